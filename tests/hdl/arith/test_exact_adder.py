"""The exact accumulation lane: after any sequence of terms its limbs hold the exact sum (Python
integers as the reference) and the special-value flags, for binary32 and int32 terms."""

from types import SimpleNamespace

import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from hdl.arith.exact_adder import ExactAdderLane, exact_addend
from tests.hdl.arith.exact_sums import edge_terms, flags, term_value, unpack


def lane(prepared: bool):
    """The lane as a design and its ports: the term raw, or made ready by ``exact_addend`` first (as the
    aggregation engine does, a pipeline stage ahead)."""
    if not prepared:
        dut = ExactAdderLane()
        return dut, dut
    m = Module()
    m.submodules.add = add = ExactAdderLane(prepared=True)
    ports = SimpleNamespace(term=Signal(32), is_int=Signal(), acc=add.acc, fresh=add.fresh, sum=add.sum)
    m.d.comb += add.term.eq(exact_addend(m, ports.term, ports.is_int))
    return m, ports


@pytest.mark.parametrize("prepared", [False, True])
@pytest.mark.parametrize("is_int", [False, True])
def test_limbs_hold_the_exact_sum(rng, is_int, prepared):
    n_terms, length = 16, 400                 # 16 terms: the most the limbs' headroom is built for
    terms = edge_terms(rng, n_terms, length, is_int)
    design, dut = lane(prepared)
    got = []

    async def bench(ctx):
        ctx.set(dut.is_int, int(is_int))
        for i in range(length):
            acc = 0
            for k in range(n_terms):
                ctx.set(dut.acc.as_value(), acc)
                ctx.set(dut.term, int(terms[k, i]))
                ctx.set(dut.fresh, int(k == 0))
                await ctx.delay(1e-9)
                acc = ctx.get(dut.sum.as_value())
            got.append(unpack(acc))

    sim = Simulator(design)
    sim.add_testbench(bench)
    sim.run()
    for i, (total, flg) in enumerate(got):
        col = [int(t) for t in terms[:, i]]
        assert total == sum(term_value(t, is_int) for t in col), (i, [hex(t) for t in col])
        assert flg == flags(col, is_int), (i, [hex(t) for t in col])


def test_fresh_ignores_the_old_sum():
    dut = ExactAdderLane()

    async def bench(ctx):
        ctx.set(dut.acc.as_value(), (1 << 300) - 1)           # garbage
        ctx.set(dut.term, 0x3F800000)                         # 1.0
        ctx.set(dut.fresh, 1)
        await ctx.delay(1e-9)
        assert unpack(ctx.get(dut.sum.as_value())) == (1 << 149, (0, 0, 0, 0))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
