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
