"""Amaranth-simulator helpers for stream blocks: frames as beats, a driver with random idle cycles and
a collector with random backpressure (the cocotb tests use cocotbext-axi for the same)."""

import numpy as np
from amaranth.sim import Simulator

W = 64
B = W // 8


def beats(frame: bytes, nbytes: int = B):
    """The beats of ``frame`` on a bus of ``nbytes``: (data, keep, last), byte 0 in the low bits."""
    for k in range(0, len(frame), nbytes):
        chunk = frame[k:k + nbytes]
        yield int.from_bytes(chunk.ljust(nbytes, b"\0"), "little"), (1 << len(chunk)) - 1, k + nbytes >= len(frame)


def mac(i):
    return f"02:00:00:00:01:{i:02x}"


def random_frame(rng, dst_mac: str, tag: int):
    n = int(rng.integers(14, 200))
    body = bytes(rng.integers(0, 256, n, dtype=np.uint8))
    return bytes.fromhex(dst_mac.replace(":", "")) + tag.to_bytes(4, "little") + body


async def drive(ctx, port, frames, rng, idle):
    for f in frames:
        for data, keep, last in beats(f):
            while idle and rng.random() < idle:
                ctx.set(port.tvalid, 0)
                await ctx.tick()
            ctx.set(port.tdata, data)
            ctx.set(port.tkeep, keep)
            ctx.set(port.tlast, last)
            ctx.set(port.tvalid, 1)
            await ctx.tick().until(port.tready)
    ctx.set(port.tvalid, 0)


async def collect(ctx, port, out, rng, backpressure, cycles_log=None):
    buf = b""
    while True:
        ctx.set(port.tready, int(not (backpressure and rng.random() < backpressure)))
        _, _, valid, ready, data, keep, last = await ctx.tick().sample(port.tvalid, port.tready, port.tdata,
                                                                      port.tkeep, port.tlast)
        if valid and ready:
            n = bin(keep).count("1")
            buf += int(data).to_bytes(B, "little")[:n]
            if last:
                out.append(buf)
                if cycles_log is not None:
                    cycles_log.append(ctx)
                buf = b""


def simulate(dut, cycle, limit=200_000):
    """Run ``dut`` calling ``cycle(ctx, n)`` once per clock: it sets the inputs, samples the handshakes and
    returns True when the test is done; fail if it never is. Then one more clock."""
    done = []

    async def bench(ctx):
        for n in range(limit):
            if cycle(ctx, n):
                done.append(n)
                await ctx.tick()
                return
            await ctx.tick()

    run_testbench(dut, bench)
    assert done, f"not done after {limit} cycles (hung?)"


def run_testbench(dut, bench):
    """Simulate ``dut`` (10 ns clock) until the async testbench ``bench(ctx)`` returns."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


async def drive_marked(ctx, port, frames, marked=(), rng=None, idle=0.0, mark_any_beat=False):
    """Frames onto ``port`` (with ``tuser``; beats as wide as the port): frame k carries a MAC error on its
    last beat if k is in ``marked`` (with ``mark_any_beat``, on a beat ``rng`` picks)."""
    nbytes = len(port.tkeep)
    for k, f in enumerate(frames):
        frame_beats = list(beats(f, nbytes))
        mark = int(rng.integers(0, len(frame_beats))) if mark_any_beat else len(frame_beats) - 1
        for i, (data, keep, last) in enumerate(frame_beats):
            while rng is not None and idle and rng.random() < idle:
                ctx.set(port.tvalid, 0)
                await ctx.tick()
            ctx.set(port.tdata, data)
            ctx.set(port.tkeep, keep)
            ctx.set(port.tlast, last)
            ctx.set(port.tuser, int(i == mark and k in marked))
            ctx.set(port.tvalid, 1)
            await ctx.tick().until(port.tready)
    ctx.set(port.tvalid, 0)


async def collect_marked(ctx, port, out, rng=None, backpressure=0.0, beats_log=None):
    """Frames from ``port`` (with ``tuser``; beats as wide as the port) into ``out`` as (bytes, MAC error on
    any beat); each beat's (keep, last) into ``beats_log`` if given."""
    nbytes = len(port.tkeep)
    buf, err = b"", 0
    while True:
        ctx.set(port.tready, int(rng is None or rng.random() >= backpressure))
        _, _, valid, ready, data, keep, last, user = await ctx.tick().sample(
            port.tvalid, port.tready, port.tdata, port.tkeep, port.tlast, port.tuser)
        if valid and ready:
            if beats_log is not None:
                beats_log.append((keep, last))
            buf += int(data).to_bytes(nbytes, "little")[:bin(keep).count("1")]
            err |= user
            if last:
                out.append((buf, bool(err)))
                buf, err = b"", 0


def pass_frames(dut, frames, idle=0.0, backpressure=0.0, cycles=4000, s="s_axis", m="m_axis"):
    """Frames through a stream block (``dut.<s>`` → ``dut.<m>``) with random idle cycles at its input and
    random backpressure at its output; returns the frames that came out within ``cycles``."""
    got = []

    async def feed(ctx):
        await drive(ctx, getattr(dut, s), frames, np.random.default_rng(1), idle)

    async def sink(ctx):
        await collect(ctx, getattr(dut, m), got, np.random.default_rng(2), backpressure)
    run_stream(dut, feed, sink, cycles)
    return got


def run_stream(dut, feed, sink, cycles):
    """Simulate ``dut`` for ``cycles`` with the testbench ``feed(ctx)`` and the process ``sink(ctx)``."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def wait(ctx):
        await ctx.tick().repeat(cycles)
    sim.add_testbench(feed)
    sim.add_process(sink)
    sim.add_testbench(wait)
    sim.run()
