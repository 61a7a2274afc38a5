"""The frame store: frames written by index as they pass come back, beat for beat with their keep and last,
each read as often as asked, under backpressure, in the order asked; one beat a cycle once a read starts."""

import numpy as np
from amaranth.sim import Simulator

from hdl.stream.frame_store import FrameStore
from tests.hdl.streams import W, beats

DEPTH, STRIDE = 256, 5          # 8 frames of up to 32 beats


def frame(rng, n):
    return bytes(rng.integers(0, 256, n, dtype=np.uint8))


def run(frames_in, reads, backpressure, rng):
    """Write ``frames_in`` ([(index, bytes)], in that order, with idle cycles between beats), then read the
    indices ``reads`` with random backpressure: the frames read and the cycles each read's beats took."""
    dut = FrameStore(W, DEPTH, 3)
    got, spans = [], []

    async def bench(ctx):
        ctx.set(dut.cfg_stride, STRIDE)
        for index, f in frames_in:
            for data, keep, last in beats(f):
                if rng.random() < 0.3:
                    await ctx.tick()
                ctx.set(dut.w_valid, 1)
                ctx.set(dut.w_index, index)
                ctx.set(dut.w_data, data)
                ctx.set(dut.w_keep, keep)
                ctx.set(dut.w_last, last)
                await ctx.tick()
                ctx.set(dut.w_valid, 0)
        for index in reads:
            ctx.set(dut.r_index.payload, index)
            ctx.set(dut.r_index.valid, 1)
            await ctx.tick().until(dut.r_index.ready)
            ctx.set(dut.r_index.valid, 0)
            buf, cycles, first = b"", 0, None
            while True:
                ready = int(rng.random() >= backpressure)
                ctx.set(dut.m_axis.tready, ready)
                _, _, valid, data, keep, last = await ctx.tick().sample(
                    dut.m_axis.tvalid, dut.m_axis.tdata, dut.m_axis.tkeep, dut.m_axis.tlast)
                cycles += 1
                assert cycles < 1000, "the frame never ended"
                if valid and ready:
                    first = cycles if first is None else first
                    buf += int(data).to_bytes(W // 8, "little")[:bin(keep).count("1")]
                    if last:
                        break
            got.append(buf)
            spans.append((first, cycles))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, spans


def test_frames_come_back_as_written_under_backpressure(rng):
    frames = {i: frame(rng, int(rng.integers(1, 32 * W // 8 + 1))) for i in range(8)}
    reads = [int(i) for i in rng.integers(0, 8, 20)]
    got, _ = run(list(frames.items()), reads, 0.4, rng)
    assert got == [frames[i] for i in reads]


def test_a_frame_written_again_replaces_the_old_one(rng):
    old, new, other = frame(rng, 200), frame(rng, 41), frame(rng, 60)
    got, _ = run([(3, old), (4, other), (3, new)], [3, 4], 0.0, rng)
    assert got == [new, other]


def test_one_beat_a_cycle_after_two_cycles():
    rng = np.random.default_rng(1)
    f = frame(rng, 20 * W // 8)
    _, spans = run([(2, f)], [2, 2], 0.0, rng)
    for first, cycles in spans:
        assert first <= 2 and cycles == first + 19, spans


def test_refuses_a_depth_that_is_not_a_power_of_two():
    import pytest
    with pytest.raises(ValueError, match="power of two"):
        FrameStore(W, 100, 3)


def test_a_frame_never_written_ends_at_the_last_beat_of_its_place(rng):
    got, spans = run([(1, frame(rng, 70))], [5], 0.0, rng)
    assert len(got[0]) == 0 and spans[0][1] == spans[0][0] + (1 << STRIDE) - 1     # 32 beats, no byte kept
