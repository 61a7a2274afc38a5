"""Transmit builder: every frame bit-exact with host_driver.models.protocol.build_frame, and accepted by the
reference validator at the peer; line rate in the benchmark."""

import os
from pathlib import Path

import cocotb
import numpy as np
import pytest

from cocotb_tests import bench
from contract.addresses import ip_int, mac_int
from contract.enums import Codec, names
from contract.protocol import HEADER_FIELDS, UDP_PORT, VERSION
from host_driver.models import numerics as nm
from host_driver.models import protocol as pr
from host_driver.models.pcap import tshark_fields, write_pcap
from host_driver.sim.testbench import SIM_WIDTHS, TB, TRAFFIC, frame, rng, width

MAC, IP4 = mac_int, ip_int


def random_packet(r, header_only=False):
    fields = {name: int(r.integers(0, 1 << bits)) for name, bits in HEADER_FIELDS}
    fields.update(version=VERSION, reserved=0, dst_rank=pr.PEER_RANK)
    if header_only:         # an ack or nack: its count is the receiver's room, not a payload
        fields.update(opcode=int(r.choice([2, 3])), count=int(r.integers(0, 129)), codec=0, dtype=0)
        return fields, b""
    codec = str(r.choice(names(Codec)))
    n = int(r.choice([1, 2, 15, 16, 17, 64, 256, int(r.integers(1, 257))]))
    fields.update(opcode=int(r.integers(0, 2)), codec=Codec[codec], dtype=0, count=n)
    return fields, nm.compress(r.standard_normal(n).astype(np.float32), codec)


def meta_bytes(fields, dst_ip=pr.PEER_IP, dst_mac=pr.PEER_MAC) -> bytes:
    ainic = int.from_bytes(bytes(pr.Ainic(**fields)), "big")
    value = ainic | IP4(dst_ip) << 256 | MAC(dst_mac) << 288
    return value.to_bytes(42, "little")


def expected(fields, payload):
    return pr.build_frame(payload, dst_mac=pr.PEER_MAC, src_mac=pr.NIC_MAC, src_ip=pr.NIC_IP, dst_ip=pr.PEER_IP,
                          **fields)


async def start(dut):
    tb = TB(dut, sources=("s_meta", "s_axis"), sinks=("m_axis",))
    dut.cfg_mac.value = MAC(pr.NIC_MAC)
    dut.cfg_ip.value = IP4(pr.NIC_IP)
    dut.cfg_udp_port.value = UDP_PORT
    await tb.reset()
    return tb


@cocotb.test()
async def frames_match_build_frame(dut):
    tb = await start(dut)
    r = rng(50)
    sent = []
    for idle, bp in TRAFFIC:
        tb.set_traffic(idle, bp)
        packets = [random_packet(r, header_only=(i % 7 == 3)) for i in range(20)]
        for fields, payload in packets:
            await tb.source["s_meta"].send(frame(meta_bytes(fields)))
            if payload:
                await tb.source["s_axis"].send(frame(payload))
        for i, (fields, payload) in enumerate(packets):
            got = bytes((await tb.sink["m_axis"].recv()).tdata)
            sent.append(got)
            want = expected(fields, payload)
            assert got == want, f"frame {i}: {len(got)} vs {len(want)} bytes\n{got.hex()}\n{want.hex()}"
            v = pr.check_frame(got, nic_mac=pr.PEER_MAC, nic_ip=pr.PEER_IP, rank=pr.PEER_RANK)
            assert v.accepted, v.reason
        assert tb.sink["m_axis"].empty()
    # what tshark makes of the builder's frames: every one an ainic frame, checksums good, nothing malformed
    pcap = write_pcap(Path(os.getcwd()) / "tx_builder.pcap", sent)
    rows = tshark_fields(pcap, ["ainic.version", "ip.checksum.status", "_ws.malformed"])
    assert rows == [["1", "1", ""]] * len(sent), rows[:4]


@cocotb.test(skip=not bench.enabled())
async def throughput(dut):
    """Back-to-back maximum-size frames (256 fp32): output beats per cycle."""
    tb = await start(dut)
    x = np.arange(256, dtype=np.float32)
    fields = dict(count=256, codec=0, dst_rank=pr.PEER_RANK)
    n = 10240 // -(-(74 + 1024) // (width() // 8)) + 1
    meter = bench.StreamMeter(dut, "s_axis", "m_axis")
    for _ in range(n):
        await tb.source["s_meta"].send(frame(meta_bytes(fields)))
        await tb.source["s_axis"].send(frame(x.tobytes()))
    want = expected(fields, x.tobytes())
    for _ in range(n):
        assert bytes((await tb.sink["m_axis"].recv()).tdata) == want
    meter.stop()
    fig = meter.figures()
    bench.record(f"tx_builder_w{width()}", {"fp32_beats_per_cycle": None,
                                             "max_frame_out_beats_per_cycle": fig["out_beats_per_cycle"],
                                             "sim_cycles_per_second": fig["sim_cycles_per_second"]})


@pytest.mark.parametrize("width", SIM_WIDTHS)
def test_tx_builder(sim, width):
    from host_driver.sim.runner import run
    run(sim, "tx_builder", width, __name__)
