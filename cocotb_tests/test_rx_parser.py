"""Receive parser: every frame's verdict equals host_driver.protocol.check_frame; accepted payloads and
headers come out bit-exact; dropped frames are counted per reason and never disturb the next frame."""

import cocotb
import numpy as np
import pytest

from tb import TB, TRAFFIC, frame, rng
from host_driver import numerics as nm
from host_driver import protocol as pr
from host_driver.vectors import malformed_frames


def valid_frame(r):
    codec = str(r.choice(list(nm.CODECS)))
    n = int(r.choice([1, 2, 15, 16, 17, 64, 255, 256, int(r.integers(1, 257))]))
    x = r.standard_normal(n).astype(np.float32)
    return pr.build_frame(nm.compress(x, codec), codec=codec, count=n, chunk=int(r.integers(0, 100)),
                          offset=int(r.integers(0, 2**32)), psn=int(r.integers(0, 2**32)),
                          opcode=int(r.integers(0, 2)))


def fuzzed(r, f):
    f = bytearray(f)
    if r.random() < 0.5:
        f = f[:int(r.integers(1, len(f)))]
    for _ in range(int(r.integers(0, 3))):
        f[int(r.integers(0, len(f)))] ^= 1 << int(r.integers(0, 8))
    return bytes(f)


def workload(r):
    """Valid frames interleaved with every malformed class, fuzzed frames, and control frames."""
    frames = []
    bad = list(malformed_frames().values())
    for i in range(24):
        frames.append((valid_frame(r), False))
        frames.append(bad[i % len(bad)] if i < len(bad) else (fuzzed(r, valid_frame(r)), False))
    frames.append((pr.build_frame(b"", opcode=2, count=0), False))        # an ack: header only
    frames.append((valid_frame(r), False))
    return frames


async def start(dut):
    tb = TB(dut, sources=("s_axis",), sinks=("m_axis", "m_meta"))
    dut.cfg_mac.value = int(pr.NIC_MAC.replace(":", ""), 16)
    dut.cfg_ip.value = int.from_bytes(bytes(int(x) for x in pr.NIC_IP.split(".")), "big")
    dut.cfg_udp_port.value = pr.UDP_PORT
    dut.cfg_rank.value = pr.NIC_RANK
    await tb.reset()
    return tb


@cocotb.test()
async def verdicts_payloads_and_counters(dut):
    tb = await start(dut)
    r = rng(40)
    expect_counts = {reason: 0 for reason in pr.DROP_REASONS}
    accepted = 0
    for idle, bp in TRAFFIC:
        tb.set_traffic(idle, bp)
        frames = workload(r)
        metas, payloads = [], []
        for f, mac_error in frames:
            await tb.source["s_axis"].send(frame(f, tuser=int(mac_error)))
            v = pr.check_frame(f, mac_error)
            if v.accepted:
                accepted += 1
                metas.append(f[42:74] + f[26:30])
                if len(f) > 74:
                    payloads.append(f[74:])
            else:
                expect_counts[v.reason] += 1
        for i, want in enumerate(metas):
            rx = await tb.sink["m_meta"].recv()
            raw = bytes(rx.tdata)
            got = int.from_bytes(raw[:32], "little").to_bytes(32, "big") + \
                int.from_bytes(raw[32:36], "little").to_bytes(4, "big")
            assert got == want, f"meta {i}: {got.hex()} != {want.hex()}"
        for i, want in enumerate(payloads):
            rx = await tb.sink["m_axis"].recv()
            assert bytes(rx.tdata) == want, f"payload {i}: {len(rx.tdata)} vs {len(want)} bytes"
        assert tb.sink["m_axis"].empty() and tb.sink["m_meta"].empty()
    await tb.cycles(8)
    drops = int(dut.stat_drops.value)
    got_counts = {reason: (drops >> (32 * i)) & 0xFFFFFFFF for i, reason in enumerate(pr.DROP_REASONS)}
    assert got_counts == expect_counts
    assert int(dut.stat_accepted.value) == accepted
    assert all(expect_counts.values()), "every drop reason was provoked"


@pytest.mark.parametrize("width", [64, 512])
def test_rx_parser(sim, width):
    from harness import run
    run(sim, "rx_parser", width, "test_rx_parser")
