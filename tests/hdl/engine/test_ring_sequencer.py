"""The ring sequencer's items equal the golden schedule (host_driver.models.allreduce.rank_schedule)."""

import pytest
from amaranth.sim import Simulator


@pytest.mark.parametrize("n, length, p, lag", [(2, 100, 16, 1), (3, 1000, 16, 2), (4, 100, 256, 1),
                                              (5, 5000, 64, 3), (8, 777, 16, 4), (8, 5, 64, 4),
                                              (3, 100, 64, 2), (16, 1000, 16, 5), (13, 300, 16, 2)])
@pytest.mark.parametrize("op", ["allreduce", "reduce_scatter", "allgather"])
def test_ring_sequencer_matches_schedule(n, length, p, lag, op):
    from contract.credits import effective_lag
    from hdl.engine.ring_sequencer import RingSequencer, plan_fields
    from host_driver.models import allreduce as ar
    plan = ar.Plan(n, length, p)
    run_lag = effective_lag(lag, n, p)      # what the NIC runs: at N = 16 the receive buffer caps the lag
    assert run_lag == lag or n == 16
    for rank in sorted({0, n - 1, n // 2, n - 2}):
        want = []
        for ph, k, c, kind in ar.rank_schedule(rank, plan, run_lag, op):
            s = plan.chunk(c)
            want.append((ph, kind, c, k, s.start + k * p, min(p, s.stop - s.start - k * p)))
        dut = RingSequencer()
        got = []
        sim = Simulator(dut)
        sim.add_clock(1e-8)

        async def bench(ctx):
            for name, v in plan_fields(plan, rank, lag, op).items():
                ctx.set(getattr(dut.plan, name), v)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.items.ready, 1)
            for cycle in range(200_000):
                _, _, valid, busy, item = await ctx.tick().sample(dut.items.valid, dut.busy, dut.items.payload)
                if valid:
                    got.append((item.phase, item.kind, item.chunk, item.packet, item.offset, item.count))
                if not busy and cycle > 2:
                    break
        sim.add_testbench(bench)
        sim.run()
        assert got == want, (rank, got[:5], want[:5])
