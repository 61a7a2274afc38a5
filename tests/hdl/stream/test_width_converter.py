"""Width converters: every frame comes through byte for byte (and marked if any of its beats was) under random idle
cycles and backpressure, each wide beat full but a frame's last, one narrow beat a cycle when nothing waits."""

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hdl.stream.width_converter import StreamDownsizer, StreamUpsizer
from tests.hdl.streams import beats, collect_marked, drive_marked, run_stream

W = 64


def random_frames(rng, count):
    return [(bytes(rng.integers(0, 256, int(rng.integers(1, 120)), dtype=np.uint8)), bool(rng.random() < 0.3))
            for _ in range(count)]


def run(dut, frames, idle, backpressure, cycles=6000):
    """``frames`` [(bytes, marked)] into ``dut.s_axis`` (a marked frame's mark on any of its beats), the frames
    [(bytes, marked)] and the beats [(keep, last)] that came out of ``dut.m_axis``."""
    got, beats_out = [], []

    async def feed(ctx):
        await drive_marked(ctx, dut.s_axis, [f for f, _ in frames], [k for k, (_, m) in enumerate(frames) if m],
                           np.random.default_rng(1), idle, mark_any_beat=True)

    async def sink(ctx):
        await collect_marked(ctx, dut.m_axis, got, np.random.default_rng(2), backpressure, beats_out)
    run_stream(dut, feed, sink, cycles)
    return got, beats_out


class RoundTrip(wiring.Component):
    """Up to 2W and back: what the bench puts around a switch built wider than its links."""

    def __init__(self):
        self.up, self.down = StreamUpsizer(W, 1), StreamDownsizer(W, 1)
        super().__init__({"s_axis": wiring.In(self.up.s_axis.signature.flip()),
                          "m_axis": wiring.Out(self.down.m_axis.signature)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.up, m.submodules.down = self.up, self.down
        wiring.connect(m, wiring.flipped(self.s_axis), self.up.s_axis)
        wiring.connect(m, self.up.m_axis, self.down.s_axis)
        wiring.connect(m, self.down.m_axis, wiring.flipped(self.m_axis))
        return m


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.5), (0.0, 0.7), (0.6, 0.1)])
@pytest.mark.parametrize("make", [lambda: StreamUpsizer(W, 1), lambda: StreamDownsizer(W // 2, 1), RoundTrip],
                         ids=["upsizer", "downsizer", "both"])
def test_every_frame_comes_through(make, idle, backpressure):
    frames = random_frames(np.random.default_rng(7), 40)
    dut = make()
    got, out = run(dut, frames, idle, backpressure)
    assert got == frames
    full = (1 << len(dut.m_axis.tkeep)) - 1
    assert all(keep == full for keep, last in out if not last), "a wide beat left part empty inside a frame"


@pytest.mark.parametrize("make, beats_in", [(lambda: StreamUpsizer(W, 1), 100), (lambda: StreamDownsizer(W, 1), 50)],
                         ids=["upsizer", "downsizer"])
def test_the_narrow_side_moves_a_beat_every_cycle(make, beats_in):
    """One long frame, nothing waiting: the upsizer takes 100 narrow beats in 100 cycles; the downsizer puts
    out 100 narrow beats (from 50 wide ones) in 100 cycles after the first."""
    dut = make()
    frame = (bytes(range(256)) * 8)[:len(dut.s_axis.tkeep) * beats_in]
    stamps = []

    async def bench(ctx):
        ctx.set(dut.m_axis.tready, 1)
        beats_in_order = list(beats(frame, len(dut.s_axis.tkeep)))
        assert len(beats_in_order) == beats_in
        for n in range(4 * beats_in):
            if beats_in_order:
                data, keep, last = beats_in_order[0]
                ctx.set(dut.s_axis.tdata, data)
                ctx.set(dut.s_axis.tkeep, keep)
                ctx.set(dut.s_axis.tlast, last)
            ctx.set(dut.s_axis.tvalid, int(bool(beats_in_order)))
            _, _, iv, ir, ov = await ctx.tick().sample(dut.s_axis.tvalid, dut.s_axis.tready, dut.m_axis.tvalid)
            if iv and ir:
                beats_in_order.pop(0)
                stamps.append(("in", n))
            if ov:
                stamps.append(("out", n))
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    narrow = [n for side, n in stamps if side == ("in" if isinstance(dut, StreamUpsizer) else "out")]
    assert len(narrow) == 100 and narrow[-1] - narrow[0] == 99
