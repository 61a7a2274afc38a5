"""Register slices: every beat comes through in order under random idle and backpressure, one beat a cycle
when nothing waits, and no output depends combinationally on an input."""

import numpy as np
import pytest
from amaranth import ClockDomain, Module
from amaranth.lib.wiring import In

from hdl.host.axi import AxiLiteSignature, AxiSignature
from hdl.stream.register_slice import AxiSlice, StreamSlice
from tests.hdl.streams import W, mac, pass_frames, random_frame, run_testbench


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.5), (0.0, 0.7)])
def test_every_beat_comes_through_in_order(rng, idle, backpressure):
    dut = StreamSlice(W, user_width=1)
    frames = [random_frame(rng, mac(0), k) for k in range(30)]
    got = pass_frames(dut, frames, idle, backpressure)
    assert got == frames


def test_one_beat_a_cycle_and_one_cycle_of_latency():
    dut = StreamSlice(W)
    seen = []

    async def bench(ctx):
        ctx.set(dut.m_axis.tready, 1)
        ctx.set(dut.s_axis.tvalid, 1)
        for k in range(40):
            ctx.set(dut.s_axis.tdata, k + 1)
            _, _, ready, valid, data = await ctx.tick().sample(dut.s_axis.tready, dut.m_axis.tvalid, dut.m_axis.tdata)
            assert ready, "the slice refused a beat while its output flowed"
            seen.append(data if valid else None)
    run_testbench(dut, bench)
    assert seen[0] is None and seen[1:] == list(range(1, 40))


@pytest.mark.parametrize("sig", [AxiSignature(64), AxiLiteSignature(11)], ids=["axi4", "axi4-lite"])
def test_axi_slice_outputs_move_only_on_the_clock(sig):
    """Toggle every input of the slice between clock edges: no output may change until the edge."""
    dut = AxiSlice(sig)
    inputs, outputs = [], []
    for side in (dut.s, dut.m):
        for _, member, value in side.signature.flatten(side):       # flows as the slice sees them
            (inputs if member.flow == In else outputs).append(value)

    async def bench(ctx):
        rng = np.random.default_rng(3)
        for _ in range(50):
            before = [ctx.get(o) for o in outputs]
            for i in inputs:
                ctx.set(i, int(rng.integers(0, 1 << min(len(i), 62))))
            await ctx.delay(1e-9)
            assert [ctx.get(o) for o in outputs] == before, "an output followed an input without the clock"
            await ctx.tick()
    run_testbench(dut, bench)


def test_axi_slice_carries_a_burst_each_way():
    """AXI4: AW/W/AR from the master arrive at the slave, R/B from the slave at the master, beat for beat."""
    dut = AxiSlice(AxiSignature(64))
    got_w, got_r = [], []

    async def bench(ctx):
        s, m = dut.s, dut.m

        async def sample():
            _, _, wv, wd, rv, rd = await ctx.tick().sample(m.wvalid, m.wdata, s.rvalid, s.rdata)
            if wv:
                got_w.append(wd)
            if rv:
                got_r.append(rd)
        ctx.set(m.wready, 1)
        ctx.set(s.rready, 1)
        for k in range(20):
            ctx.set(s.wvalid, 1)
            ctx.set(s.wdata, 100 + k)
            ctx.set(s.wlast, k == 19)
            ctx.set(m.rvalid, 1)
            ctx.set(m.rdata, 200 + k)
            await sample()
        ctx.set(s.wvalid, 0)
        ctx.set(m.rvalid, 0)
        for _ in range(3):
            await sample()
    run_testbench(dut, bench)
    assert got_w == list(range(100, 120)) and got_r == list(range(200, 220))


def test_axi_slice_refuses_in_reset_and_loses_nothing():
    """A master that is not reset with the slice (or leaves reset first, as a NIC's pins do: its slices leave
    reset a cycle later, hdl.stream.register_slice.registered_reset) offers AR in the slice's reset: no
    channel is ready then, and the AR arrives once the reset falls. (Accepting it in reset lost it: the
    cluster's NIC-reset jobs hung on their first register read.)"""
    m = Module()
    m.domains.sync = cd = ClockDomain()
    m.submodules.slice = dut = AxiSlice(AxiLiteSignature(11))
    got = []

    async def bench(ctx):
        ctx.set(cd.rst, 1)
        ctx.set(dut.m.arready, 1)
        ctx.set(dut.s.araddr, 0x40)
        ctx.set(dut.s.arvalid, 1)
        for _ in range(3):
            _, _, ready = await ctx.tick().sample(dut.s.arready)
            assert not ready, "the slice took an AR in reset"
            assert all(not ctx.get(getattr(dut.s, f"{ch}ready")) for ch in ("aw", "w", "ar"))
            assert all(not ctx.get(getattr(dut.m, f"{ch}ready")) for ch in ("r", "b"))
        ctx.set(cd.rst, 0)
        await ctx.tick().until(dut.s.arready)
        ctx.set(dut.s.arvalid, 0)
        for _ in range(4):
            _, _, valid, addr = await ctx.tick().sample(dut.m.arvalid, dut.m.araddr)
            if valid:
                got.append(addr)
    run_testbench(m, bench)
    assert got == [0x40]
