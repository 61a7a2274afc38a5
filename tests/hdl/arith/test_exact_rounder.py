"""The exact accumulator's rounding lane against the golden numerics.exact_sum_f32 and sum_i32: from
states with carries left anywhere in the limbs, and end to end behind the accumulation lane."""

import numpy as np
import pytest
from amaranth import Module
from amaranth.sim import Simulator

from hdl.arith.exact_adder import ExactAdderLane
from hdl.arith.exact_rounder import ExactRounderLane
from host_driver.models import numerics as nm
from tests.hdl.arith.exact_sums import edge_terms, flags, pack, split, term_value
from tests.hdl.lanes import diff, run_pipeline


def golden(terms, is_int):
    if is_int:
        s, over = nm.sum_i32(terms.view(np.int32))
        return s.view(np.uint32), over
    return nm.exact_sum_f32(terms), np.zeros(terms.shape[1], bool)


@pytest.mark.parametrize("is_int", [False, True])
def test_rounding_from_redundant_limbs(rng, is_int):
    terms = edge_terms(rng, 5, 3000, is_int)
    states = [pack(split(sum(term_value(int(t), is_int) for t in terms[:, i]), rng), *flags(terms[:, i], is_int))
              for i in range(terms.shape[1])]
    dut = ExactRounderLane()
    got = run_pipeline(dut, [(dut.acc.as_value(), states), (dut.is_int, [int(is_int)] * len(states))],
                       {"r": dut.result, "o": dut.overflow}, dut.LATENCY)
    want, over = golden(terms, is_int)
    bad = np.flatnonzero(got["r"].astype(np.uint32) != want)
    assert bad.size == 0, diff(got["r"], want, bad=bad)
    assert np.array_equal(got["o"].astype(bool), over)
    if is_int:
        assert over.any() and not over.all()


def test_rounding_ties_and_the_binade_edges():
    """Sums built to land exactly on halfway cases, at the subnormal boundary and at overflow."""
    cases = []
    for e in (1, 2, 100, 253):                            # 2**e units: ties at every scale
        base = 1 << (e + 24)
        cases += [base + (1 << e), base + (3 << e), base + (1 << e) + 1, base - (1 << (e - 1))]
    cases += [(1 << 23) - 1, 1 << 23, (1 << 24) - 1, (1 << 24) + 1, (1 << 24) + 3]
    top = ((1 << 24) - 1) << 231                         # the largest binary32
    cases += [top, top + (1 << 230) - 1, top + (1 << 230), 1 << 280]
    cases += [-c for c in cases] + [0]
    states = [pack(split(c)) for c in cases]
    dut = ExactRounderLane()
    got = run_pipeline(dut, [(dut.acc.as_value(), states), (dut.is_int, [0] * len(states))],
                       {"r": dut.result}, dut.LATENCY)["r"]
    for c, g in zip(cases, got):
        # the reference: round c * 2**-149 to binary32 with Python's exact big-integer arithmetic
        want = int(_round_units(c))
        assert int(g) == want, (hex(c), hex(int(g)), hex(want))


def _round_units(c):
    if c == 0:
        return 0
    mag, sign = abs(c), (1 << 31 if c < 0 else 0)
    shift = max(mag.bit_length() - 24, 0)
    q, r = divmod(mag, 1 << shift)
    if shift and (r > 1 << (shift - 1) or (r == 1 << (shift - 1) and q & 1)):
        q += 1
    if q == 1 << 24:
        q, shift = q >> 1, shift + 1
    if shift == 0:
        return sign | q
    if shift + 1 >= 0xFF:
        return sign | 0x7F800000
    return sign | (shift + 1) << 23 | (q & 0x7FFFFF)


@pytest.mark.parametrize("is_int", [False, True])
def test_adder_then_rounder_is_the_golden_exact_sum(rng, is_int):
    n_terms, length = 9, 600
    terms = edge_terms(rng, n_terms, length, is_int)
    m = Module()
    m.submodules.add = add = ExactAdderLane()
    m.submodules.rnd = rnd = ExactRounderLane()
    m.d.comb += [rnd.acc.eq(add.sum), rnd.is_int.eq(add.is_int)]
    got = []

    async def bench(ctx):
        ctx.set(add.is_int, int(is_int))
        for i in range(length + rnd.LATENCY):
            if i < length:
                acc = 0
                for k in range(n_terms - 1):          # the running sum before the last term, comb
                    ctx.set(add.acc.as_value(), acc)
                    ctx.set(add.term, int(terms[k, i]))
                    ctx.set(add.fresh, int(k == 0))
                    await ctx.delay(1e-10)
                    acc = ctx.get(add.sum.as_value())
                ctx.set(add.acc.as_value(), acc)
                ctx.set(add.term, int(terms[-1, i]))
                ctx.set(add.fresh, 0)
            await ctx.tick()
            if i >= rnd.LATENCY - 1 and len(got) < length:
                got.append(ctx.get(rnd.result))

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want, _ = golden(terms, is_int)
    got = np.array(got, np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, diff(got, want, bad=bad)
