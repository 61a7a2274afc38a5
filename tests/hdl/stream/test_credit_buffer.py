"""The credit buffer behind a fixed-latency pipeline that never stalls: no item is ever lost or
reordered whatever the consumer does, and the pipeline takes one item per cycle while the consumer keeps up."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.stream.credit_buffer import CreditBuffer


@pytest.mark.parametrize("latency, backpressure", [(1, 0.0), (4, 0.0), (4, 0.6), (6, 0.9)])
def test_no_item_lost_and_full_rate(latency, backpressure):
    dut = CreditBuffer(16, latency)
    rng = np.random.default_rng(latency)
    n = 300
    out, entered_at = [], []

    async def producer(ctx):
        pipe = [None] * latency                      # the never-stalling pipeline the buffer serves
        k = cycle = 0
        while len(out) < n and cycle < 20000:
            enter = k < n and ctx.get(dut.ready)
            ctx.set(dut.enter, int(enter))
            leaving = pipe.pop(0)
            ctx.set(dut.p_valid, int(leaving is not None))
            ctx.set(dut.p_data, leaving or 0)
            pipe.append(k if enter else None)
            if enter:
                entered_at.append(cycle)
                k += 1
            await ctx.tick()
            cycle += 1

    async def consumer(ctx):
        while True:
            ctx.set(dut.m_ready, int(not (backpressure and rng.random() < backpressure)))
            _, _, valid, ready, value = await ctx.tick().sample(dut.m_valid, dut.m_ready, dut.m_data)
            if valid and ready:
                out.append(value)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_process(consumer)
    sim.run()
    assert out == list(range(n))
    if not backpressure:
        assert entered_at[-1] - entered_at[0] == n - 1, "the pipeline did not take one item per cycle"
