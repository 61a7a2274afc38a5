"""round_robin: the first requester after the last one served, for every request pattern and last."""

from amaranth import Module, Signal
from amaranth.sim import Simulator

from hdl.stream.round_robin import round_robin


def test_every_pattern():
    n = 5
    m = Module()
    want, last = Signal(n), Signal(range(n))
    pick, anyone = round_robin(m, want, last, n, "rr")
    seen = []

    async def bench(ctx):
        for w in range(1 << n):
            for lst in range(n):
                ctx.set(want, w)
                ctx.set(last, lst)
                await ctx.delay(1e-9)
                seen.append((w, lst, ctx.get(pick), ctx.get(anyone)))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for w, lst, p, a in seen:
        after = [(lst + k) % n for k in range(1, n + 1) if w >> ((lst + k) % n) & 1]
        assert a == bool(w)
        if w:
            assert p == after[0], (bin(w), lst, p)
