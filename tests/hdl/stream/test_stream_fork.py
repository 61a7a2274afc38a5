"""The stream fork delivers every beat to each enabled branch, under random backpressure."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from tests.hdl.streams import W, collect, drive, mac, random_frame


@pytest.mark.parametrize("enable_b", [1, 0])
def test_stream_fork_delivers_every_beat_to_each_branch(rng, enable_b):
    from hdl.stream.stream_fork import StreamFork
    dut = StreamFork(W)
    frames = [random_frame(rng, mac(0), k) for k in range(20)]
    got_a, got_b = [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def feed(ctx):
        ctx.set(dut.enable_b, enable_b)
        await drive(ctx, dut.s_axis, frames, np.random.default_rng(1), 0.3)

    async def sink_a(ctx):
        await collect(ctx, dut.m_axis_a, got_a, np.random.default_rng(2), 0.5)

    async def sink_b(ctx):
        await collect(ctx, dut.m_axis_b, got_b, np.random.default_rng(3), 0.3)

    async def wait(ctx):
        await ctx.tick().repeat(3000)
    sim.add_testbench(feed)
    sim.add_process(sink_a)
    sim.add_process(sink_b)
    sim.add_testbench(wait)
    sim.run()
    assert got_a == frames
    assert got_b == (frames if enable_b else [])
