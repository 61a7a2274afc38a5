"""cocotb body of `ainic replay`: frames from a pcap through the RTL receive parser, one at a time, and
the verdict of each read from the parser's own counters (which one moved)."""

import json
import os

import cocotb
from cocotb.triggers import ClockCycles

from contract.addresses import ip_int, mac_int
from contract.enums import DropReason
from contract.protocol import UDP_PORT
from host_driver.models import protocol as pr
from host_driver.models.pcap import read_pcap
from host_driver.sim.testbench import TB, frame

TIMEOUT_CYCLES = 20000


def counters(dut) -> dict:
    """The parser's counters: one per drop reason, and "accepted"."""
    drops = int(dut.stat_drops.value)
    c = {reason.name: (drops >> (32 * reason)) & 0xFFFFFFFF for reason in DropReason}
    c["accepted"] = int(dut.stat_accepted.value)
    return c


async def start(dut):
    """Clock, stream endpoints and reset of an ``rx_parser`` top configured as the default NIC
    (``host_driver.models.protocol.NIC_MAC``, ``NIC_IP``, ``NIC_RANK``)."""
    tb = TB(dut, sources=("s_axis",), sinks=("m_axis", "m_meta"))
    dut.cfg_mac.value = mac_int(pr.NIC_MAC)
    dut.cfg_ip.value = ip_int(pr.NIC_IP)
    dut.cfg_udp_port.value = UDP_PORT
    dut.cfg_rank.value = pr.NIC_RANK
    dut.seq_enable.value = dut.seq_block.value = dut.seq_expect.value = 0     # no ring link: every psn passes
    await tb.reset()
    return tb


@cocotb.test()
async def replay(dut):
    tb = await start(dut)
    frames = read_pcap(os.environ["AINIC_REPLAY_PCAP"])
    results = []
    for i, f in enumerate(frames):
        before = counters(dut)
        await tb.source["s_axis"].send(frame(f, tuser=0))
        for _ in range(TIMEOUT_CYCLES):
            await ClockCycles(dut.clk, 1)
            now = counters(dut)
            moved = [k for k in now if now[k] != before[k]]
            if moved:
                break
        else:
            raise AssertionError(f"frame {i}: no verdict after {TIMEOUT_CYCLES} cycles (parser hung)")
        assert len(moved) == 1, f"frame {i}: several counters moved: {moved}"
        verdict = "accepted" if moved[0] == "accepted" else "dropped"
        results.append({"index": i, "verdict": verdict, "reason": None if verdict == "accepted" else moved[0],
                        "bytes": len(f)})
        while not tb.sink["m_meta"].empty():
            tb.sink["m_meta"].recv_nowait()
    await ClockCycles(dut.clk, 8)
    while not tb.sink["m_axis"].empty():
        tb.sink["m_axis"].recv_nowait()
    with open(os.environ["AINIC_REPLAY_OUT"], "w") as fh:
        json.dump({"frames": results, "counters": counters(dut)}, fh, indent=2)
