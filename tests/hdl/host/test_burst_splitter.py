"""The burst splitter: a command's bursts cover exactly its beats, in order, none longer than 256 beats or
crossing a 4 KiB page (the AXI rules), with ``last`` on the final one; the AR/AW side may hold it, and a
``fire`` while no burst is offered (``valid`` low) does nothing."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.host.axi import PAGE_BYTES
from hdl.host.burst_splitter import BurstSplitter


@pytest.mark.parametrize("width", [64, 512, 1024])
def test_bursts_tile_the_command(rng, width):
    B = width // 8
    dut = BurstSplitter(width)
    commands = [(0, 1), (PAGE_BYTES - B, 2), (B * 7, 300), (PAGE_BYTES * 3 + B * 5, 1000), (0, 512 * 64 // B)]
    commands += [(int(rng.integers(0, 1 << 20)) * B, int(rng.integers(1, 3000))) for _ in range(20)]
    got = []

    async def bench(ctx):
        hold = np.random.default_rng(5)
        for addr, beats in commands:
            ctx.set(dut.start, 1)
            ctx.set(dut.start_addr, addr)
            ctx.set(dut.start_beats, beats)
            await ctx.tick()
            ctx.set(dut.start, 0)
            bursts = []
            while ctx.get(dut.busy):
                fire = int(hold.random() < 0.6)     # the AXI address channel is not always ready
                ctx.set(dut.fire, fire)
                if fire and ctx.get(dut.valid):
                    bursts.append((ctx.get(dut.addr), ctx.get(dut.len) + 1, ctx.get(dut.last)))
                await ctx.tick()
            ctx.set(dut.fire, 0)
            got.append(bursts)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for (addr, beats), bursts in zip(commands, got, strict=True):
        at = addr
        for i, (a, n, last) in enumerate(bursts):
            assert a == at and 1 <= n <= min(256, PAGE_BYTES // B)
            assert a // PAGE_BYTES == (a + n * B - 1) // PAGE_BYTES, f"burst at {a:#x} of {n} beats crosses a page"
            assert last == (i == len(bursts) - 1)
            at += n * B
        assert at == addr + beats * B
        # as few bursts as the rules allow: each one runs to the page end or 256 beats, or the command ends
        assert all(n == min(256, (PAGE_BYTES - a % PAGE_BYTES) // B) for a, n, _ in bursts[:-1])
