"""Builder -> parser round trip in RTL: random headers and payload sizes, every codec, idle cycles and
backpressure; every record and payload comes back unchanged."""

import cocotb
import pytest

from cocotb_tests.packet.test_tx_builder import IP4, MAC, meta_bytes, random_packet
from contract.limits import WIDTHS
from contract.protocol import UDP_PORT
from host_driver.models import protocol as pr
from host_driver.sim.testbench import TB, TRAFFIC, frame, rng


@cocotb.test()
async def round_trip(dut):
    tb = TB(dut, sources=("s_meta", "s_axis"), sinks=("m_meta", "m_axis"))
    dut.cfg_tx_mac.value, dut.cfg_tx_ip.value = MAC(pr.PEER_MAC), IP4(pr.PEER_IP)
    dut.cfg_rx_mac.value, dut.cfg_rx_ip.value = MAC(pr.NIC_MAC), IP4(pr.NIC_IP)
    dut.cfg_rank.value, dut.cfg_udp_port.value = pr.NIC_RANK, UDP_PORT
    await tb.reset()
    r = rng(60)
    total = 0
    for idle, bp in TRAFFIC:
        tb.set_traffic(idle, bp)
        packets = []
        for i in range(16):
            fields, payload = random_packet(r, header_only=(i % 5 == 2))
            fields["dst_rank"] = pr.NIC_RANK
            packets.append((fields, payload))
            await tb.source["s_meta"].send(frame(meta_bytes(fields, dst_ip=pr.NIC_IP, dst_mac=pr.NIC_MAC)))
            if payload:
                await tb.source["s_axis"].send(frame(payload))
        for i, (fields, payload) in enumerate(packets):
            raw = bytes((await tb.sink["m_meta"].recv()).tdata)
            header = int.from_bytes(raw[:32], "little").to_bytes(32, "big")
            assert header == bytes(pr.Ainic(**fields)), f"record {i}"
            assert int.from_bytes(raw[32:36], "little") == IP4(pr.PEER_IP)
            if payload:
                assert bytes((await tb.sink["m_axis"].recv()).tdata) == payload, f"payload {i}"
        total += len(packets)
        assert tb.sink["m_axis"].empty() and tb.sink["m_meta"].empty()
    assert int(dut.stat_accepted.value) == total and int(dut.stat_drops.value) == 0


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_packet_loopback(sim, width):
    from host_driver.sim.runner import run
    run(sim, "packet_loopback", width, __name__)
