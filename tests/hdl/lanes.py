"""Amaranth-simulator helpers for lanes and combinational converters: run a pipeline or a function over
vectors, and report the first mismatches."""

import numpy as np
from amaranth import Module, Signal
from amaranth.sim import Simulator


def run_pipeline(dut, inputs, outputs, latency):
    """Drive one input vector per cycle (inputs: [(port, values)]); collect outputs ``latency`` cycles later."""
    n = len(inputs[0][1])
    got = {name: [] for name in outputs}

    async def bench(ctx):
        for i in range(n + latency):
            if i < n:
                for port, vals in inputs:
                    ctx.set(port, int(vals[i]))
            await ctx.tick()
            if i >= latency - 1 and len(got[next(iter(outputs))]) < n:
                for name, port in outputs.items():
                    got[name].append(ctx.get(port))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return {k: np.array(v, dtype=np.uint64) for k, v in got.items()}


def diff(*cols, bad):
    return [tuple(hex(int(c[i])) for c in cols) for i in bad[:6]]


def comb(build, width_in, vectors):
    m = Module()
    x = Signal(width_in)
    out = build(m, x)
    got = []

    async def bench(ctx):
        for v in vectors:
            ctx.set(x, int(v))
            await ctx.delay(1e-9)
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=object)


def staged(build, width_in, vectors, latency):
    """``build(m, x)`` as a pipeline of ``latency`` registers: one vector a cycle in, each output collected
    ``latency`` cycles later (the staged form of :func:`comb`)."""
    m = Module()
    x = Signal(width_in)
    out = build(m, x)
    got = []

    async def bench(ctx):
        for i in range(len(vectors) + latency):
            if i < len(vectors):
                ctx.set(x, int(vectors[i]))
            await ctx.delay(1e-9)
            if i >= latency:
                got.append(ctx.get(out))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=object)
