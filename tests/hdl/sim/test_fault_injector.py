"""The link fault injector against contract.in_network.FaultStream: the same frames dropped, corrupted
and duplicated for a seed, under random idle cycles and backpressure, and the counters."""

import pytest
from amaranth.sim import Simulator

from contract.in_network import FaultStream, link_seed, threshold
from hdl.sim.fault_injector import FaultInjector
from tests.hdl.streams import B, W, collect_marked, drive_marked, mac, random_frame


def expected(frames, seed, drop, dup, corrupt):
    """What leaves, per the model: (frame bytes, MAC error) in order, and the counts of each fault."""
    fs = FaultStream(seed, threshold(drop), threshold(dup), threshold(corrupt))
    out, counts = [], {"frames": len(frames), "dropped": 0, "duplicated": 0, "corrupted": 0}
    for f in frames:
        d = fs.next()
        counts["dropped"] += d.drop
        counts["duplicated"] += d.duplicate
        counts["corrupted"] += d.corrupt
        if d.drop:
            continue
        sent = (bytes([f[0] ^ 1]) + f[1:]) if d.corrupt and len(f) <= B else f
        if d.corrupt and len(f) > B:
            last = (len(f) - 1) // B * B              # byte 0 of the last beat
            sent = f[:last] + bytes([f[last] ^ 1]) + f[last + 1:]
        out += [(sent, d.corrupt)] * (2 if d.duplicate else 1)
    return out, counts


def run(frames, seed, drop, dup, corrupt, rng, idle=0.3, backpressure=0.3):
    dut = FaultInjector(W)
    got = []

    async def feed(ctx):
        ctx.set(dut.cfg_seed, seed)
        ctx.set(dut.cfg_drop, threshold(drop))
        ctx.set(dut.cfg_dup, threshold(dup))
        ctx.set(dut.cfg_corrupt, threshold(corrupt))
        await drive_marked(ctx, dut.s_axis, frames, rng=rng, idle=idle)

    async def sink(ctx):
        await collect_marked(ctx, dut.m_axis, got, rng, backpressure)

    stats = {}

    async def wait(ctx):
        await ctx.tick().repeat(60 * len(frames) + 500)
        for k in ("frames", "dropped", "duplicated", "corrupted"):
            stats[k] = ctx.get(getattr(dut, f"stat_{k}"))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_process(sink)
    sim.add_testbench(wait)
    sim.run()
    return got, stats


@pytest.mark.parametrize("drop, dup, corrupt", [(0.2, 0.2, 0.2), (0.0, 0.5, 0.0), (0.0, 0.0, 0.0)])
def test_faults_are_the_models(rng, drop, dup, corrupt):
    frames = [random_frame(rng, mac(1), k) for k in range(120)]
    seed = link_seed(int(rng.integers(0, 2**32)), 3)
    got, stats = run(frames, seed, drop, dup, corrupt, rng)
    want, counts = expected(frames, seed, drop, dup, corrupt)
    assert got == want
    assert stats == counts
    for name, p in (("dropped", drop), ("duplicated", dup), ("corrupted", corrupt)):
        assert (counts[name] > 0) == (p > 0), (name, counts)
    if not (drop or dup or corrupt):
        assert got == [(f, False) for f in frames]


def test_mac_errors_coming_in_go_out(rng):
    frames = [random_frame(rng, mac(1), k) for k in range(4)]
    dut = FaultInjector(W)
    got = []

    async def feed(ctx):
        await drive_marked(ctx, dut.s_axis, frames, marked={2})

    async def sink(ctx):
        await collect_marked(ctx, dut.m_axis, got)

    async def wait(ctx):
        await ctx.tick().repeat(400)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_process(sink)
    sim.add_testbench(wait)
    sim.run()
    assert [err for _, err in got] == [False, False, True, False]
