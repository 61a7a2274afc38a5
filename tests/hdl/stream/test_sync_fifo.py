"""The synchronous FIFO: beside Amaranth's ``SyncFIFOBuffered`` of the same depth it shows the same
handshakes, level and data on every cycle, whatever the offers and the reads."""

import pytest
from amaranth import Module
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from hdl.stream.sync_fifo import SyncFifo


@pytest.mark.parametrize("depth", [2, 3, 8, 13])
def test_cycle_for_cycle_as_amaranths_buffered_fifo(rng, depth):
    m = Module()
    m.submodules.dut = dut = SyncFifo(width=16, depth=depth)
    m.submodules.ref = ref = SyncFIFOBuffered(width=16, depth=depth)
    m.d.comb += [ref.w_data.eq(dut.w_data), ref.w_en.eq(dut.w_en), ref.r_en.eq(dut.r_en)]
    seen = set()

    async def bench(ctx):
        for k in range(3000):
            # phases of mostly writing and mostly reading, so that it fills and empties
            wp, rp = (0.8, 0.3) if (k // 200) % 2 == 0 else (0.3, 0.8)
            ctx.set(dut.w_data, k & 0xFFFF)
            ctx.set(dut.w_en, int(rng.random() < wp))      # offered whether or not there is room
            ctx.set(dut.r_en, int(rng.random() < rp))
            await ctx.delay(1e-9)
            got = (ctx.get(dut.w_rdy), ctx.get(dut.r_rdy), ctx.get(dut.level))
            want = (ctx.get(ref.w_rdy), ctx.get(ref.r_rdy), ctx.get(ref.level))
            assert got == want, (k, got, want)
            if got[1]:
                assert ctx.get(dut.r_data) == ctx.get(ref.r_data), k
            seen.add(got[2])
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert {0, depth} <= seen                        # it was empty and full


def test_a_depth_below_two_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        SyncFifo(width=8, depth=1)
