"""The RTL header layouts decode frames exactly as scapy does; the RTL IPv4 checksum check agrees with it."""

import pytest
from amaranth import Module, Signal
from amaranth.lib import data
from amaranth.sim import Simulator
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from contract.protocol import FRAME_HEADER_BYTES, HEADER_FIELDS
from hdl.packet.headers import FrameHeader, ipv4_checksum_ok, network_order
from host_driver.models import protocol as pr


def _random_frame(rng):
    fields = {name: int(rng.integers(0, 1 << bits)) for name, bits in HEADER_FIELDS}
    fields["count"] = 4
    return pr.build_frame(bytes(16), src_mac="02:%02x:00:00:00:07" % int(rng.integers(0, 256)),
                          src_ip="10.%d.0.2" % int(rng.integers(0, 256)), sport=int(rng.integers(0, 65536)),
                          **fields)


def test_layout_matches_scapy(rng):
    frames = [_random_frame(rng) for _ in range(40)]
    m = Module()
    bus = Signal(8 * FRAME_HEADER_BYTES)
    view = data.View(FrameHeader, network_order(bus, FRAME_HEADER_BYTES))
    ok = ipv4_checksum_ok(m, bus[8 * 14:8 * 34])
    got = []

    async def bench(ctx):
        for f in frames:
            ctx.set(bus, int.from_bytes(f[:FRAME_HEADER_BYTES], "little"))
            await ctx.delay(1e-9)
            row = {f"ainic.{n}": ctx.get(getattr(view.ainic, n)) for n, _ in HEADER_FIELDS}
            row.update({"ipv4.total_length": ctx.get(view.ipv4.total_length), "ipv4.flags": ctx.get(view.ipv4.flags),
                        "ipv4.src": ctx.get(view.ipv4.src), "udp.sport": ctx.get(view.udp.sport),
                        "udp.dport": ctx.get(view.udp.dport), "eth.src": ctx.get(view.eth.src),
                        "eth.ethertype": ctx.get(view.eth.ethertype), "csum_ok": ctx.get(ok)})
            got.append(row)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for f, row in zip(frames, got):
        p = Ether(f)
        h = p[pr.Ainic]
        want = {f"ainic.{n}": getattr(h, n) for n, _ in HEADER_FIELDS}
        want.update({"ipv4.total_length": p[IP].len, "ipv4.flags": int(p[IP].flags),
                     "ipv4.src": int.from_bytes(bytes(int(x) for x in p[IP].src.split(".")), "big"),
                     "udp.sport": p[UDP].sport, "udp.dport": p[UDP].dport,
                     "eth.src": int(p[Ether].src.replace(":", ""), 16), "eth.ethertype": p[Ether].type,
                     "csum_ok": 1})
        assert row == want


@pytest.mark.parametrize("flip", [0, 3, 10, 19])
def test_checksum_rejects_a_flipped_bit(flip):
    f = bytearray(pr.build_frame(bytes(4)))
    f[14 + flip] ^= 0x10
    m = Module()
    bus = Signal(160)
    ok = ipv4_checksum_ok(m, bus)
    res = []

    async def bench(ctx):
        ctx.set(bus, int.from_bytes(bytes(f[14:34]), "little"))
        await ctx.delay(1e-9)
        res.append(ctx.get(ok))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert res == [0] and pr.check_frame(bytes(f)).reason in ("ip_checksum", "ip_version_ihl", "ip_length")
