"""The stream FIFO: every beat (data, keep, last, user) comes out in order under random idle and
backpressure; it holds exactly ``depth`` beats; one beat per cycle when nothing waits."""

import pytest
from amaranth.sim import Simulator

from hdl.stream.stream_fifo import StreamFifo
from tests.hdl.streams import W, mac, pass_frames, random_frame


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.5)])
def test_every_frame_comes_out_in_order(rng, idle, backpressure):
    dut = StreamFifo(W, 8)
    frames = [random_frame(rng, mac(0), k) for k in range(30)]
    got = pass_frames(dut, frames, idle, backpressure)
    assert got == frames


@pytest.mark.parametrize("depth", [4, 16])
def test_holds_depth_beats_then_one_per_cycle(depth):
    dut = StreamFifo(W, depth, user_width=3)
    out = []

    async def bench(ctx):
        ctx.set(dut.m_axis.tready, 0)
        taken = 0
        for k in range(3 * depth):                   # offer beats while the consumer holds still
            ctx.set(dut.s_axis.tdata, k)
            ctx.set(dut.s_axis.tuser, k % 8)
            ctx.set(dut.s_axis.tlast, k % 3 == 0)
            ctx.set(dut.s_axis.tvalid, 1)
            _, _, ready = await ctx.tick().sample(dut.s_axis.tready)
            taken += ready
            if not ready:
                break
        ctx.set(dut.s_axis.tvalid, 0)
        assert taken == depth, f"took {taken} beats with room for {depth}"
        ctx.set(dut.m_axis.tready, 1)
        cycles = 0
        while len(out) < depth:
            _, _, valid, data, user, last = await ctx.tick().sample(dut.m_axis.tvalid, dut.m_axis.tdata,
                                                                   dut.m_axis.tuser, dut.m_axis.tlast)
            cycles += 1
            if valid:
                out.append((data, user, last))
        assert out == [(k, k % 8, int(k % 3 == 0)) for k in range(depth)]
        assert cycles <= depth + 2                   # one per cycle once it starts (2 cycles of latency)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_a_depth_below_two_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        StreamFifo(W, 1)
