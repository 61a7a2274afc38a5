"""The plan calculator equals host_driver.models.allreduce.Plan and the credit rules' lag bound."""

from amaranth.sim import Simulator


def test_plan_calculator_matches_plan(rng):
    from hdl.engine.plan_calculator import PlanCalculator
    from hdl.engine.ring_sequencer import plan_fields
    from host_driver.models import allreduce as ar
    cases = [(2, 1, 16), (4, 100, 256), (3, 1000, 16), (16, 1 << 26, 1024), (5, 4095, 64)]
    cases += [(int(rng.integers(2, 17)), int(rng.integers(1, 1 << 24)), 16 * int(rng.integers(1, 65)))
              for _ in range(20)]
    dut = PlanCalculator()
    got = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        for n, length, p in cases:
            ctx.set(dut.elements, length)
            ctx.set(dut.nodes, n)
            ctx.set(dut.packet, p)
            ctx.set(dut.rank, 1)
            ctx.set(dut.lag, 3)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await ctx.tick().until(dut.done)
            got.append({name: ctx.get(getattr(dut.plan, name)) for name in plan_fields(ar.Plan(2, 16, 16), 0, 0)})
    sim.add_testbench(bench)
    sim.run()
    for (n, length, p), g in zip(cases, got):
        assert g == plan_fields(ar.Plan(n, length, p), 1, 3), (n, length, p)


def test_serial_divider_is_divmod(rng):
    """The divider alone, at its edges (divisor 1, divisor above the dividend, the widest operands) and at random:
    quotient and remainder are Python's divmod, ``done`` pulses once, ``busy`` until then."""
    from hdl.engine.plan_calculator import SerialDivider
    w = 32
    cases = [(0, 1), (1, 1), (7, 9), (2**w - 1, 1), (2**w - 1, 2**w - 1), (2**w - 2, 2**w - 1), (2**31, 3)]
    cases += [(int(rng.integers(0, 2**w)), int(rng.integers(1, 2**int(rng.integers(1, w + 1))))) for _ in range(40)]
    dut = SerialDivider(w)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        for a, b in cases:
            ctx.set(dut.dividend, a)
            ctx.set(dut.divisor, b)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            cycles = 0
            while not ctx.get(dut.done):
                assert ctx.get(dut.busy)
                await ctx.tick()
                cycles += 1
            assert (ctx.get(dut.quotient), ctx.get(dut.remainder)) == divmod(a, b), (a, b)
            assert cycles == w, cycles
            await ctx.tick()
            assert not ctx.get(dut.done) and not ctx.get(dut.busy)
    sim.add_testbench(bench)
    sim.run()
