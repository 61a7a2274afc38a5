"""Register slices: every beat comes through in order under random idle and backpressure, one beat a cycle
when nothing waits, and no output depends combinationally on an input."""

import numpy as np
import pytest
from amaranth import ClockDomain, Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hdl.host.axi import AxiLiteSignature, AxiSignature
from hdl.host.dma_engine import dma_user_members
from hdl.nic.nic import DMA_PORTS
from hdl.stream.register_slice import AxiSlice, PortSlice, StreamSlice
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
    outputs_wait_for_the_clock(dut, inputs, outputs)


def outputs_wait_for_the_clock(dut, inputs, outputs, cycles=50):
    """Set every one of ``inputs`` to random values between clock edges: none of ``outputs`` may change
    until the edge."""
    async def bench(ctx):
        rng = np.random.default_rng(3)
        for _ in range(cycles):
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


def _port_slice_streams(dut):
    """[(name, source side, destination side, valid, ready)] of a PortSlice's streams, and its plain members."""
    streams, plain = [], []
    for name, member in dut.port_signature.members.items():
        handshake = [(v, r) for v, r in (("valid", "ready"), ("tvalid", "tready"))
                     if member.is_signature and v in member.signature.members]
        if not handshake:
            plain.append((name, member.flow))
            continue
        into_block = member.flow == In
        src, dst = (dut.front, dut.back) if into_block else (dut.back, dut.front)
        streams.append((name, getattr(src, name), getattr(dst, name), *handshake[0]))
    return streams, plain


def _dma_ports_slice():
    """The DMA engine's shared ports as the NIC slices them (hdl/nic/nic.py), and a plain input beside."""
    block_side = {n: m.flip() for n, m in dma_user_members(W).items()}
    sig = wiring.Signature({**block_side, "wr_poison": In(1)})
    return PortSlice(sig)


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.4, 0.6)])
def test_port_slice_carries_every_stream_either_way(idle, backpressure):
    """Five streams, two of them out of the block (read data, write status), each its own random source and
    sink: every item arrives once and in order; the plain member is a wire (it is seen in the same cycle)."""
    dut = _dma_ports_slice()
    streams, plain = _port_slice_streams(dut)
    assert {s[0] for s in streams} == set(DMA_PORTS) and plain == [("wr_poison", In)]
    rng = np.random.default_rng(11)
    fields = {name: [Value.cast(getattr(src, f)) for f in src.signature.members if f not in (v, r)]
              for name, src, _, v, r in streams}
    sent = {name: [[int(rng.integers(0, 1 << min(len(f), 62))) for f in fields[name]] for _ in range(40)]
            for name, *_ in streams}
    got = {name: [] for name, *_ in streams}

    async def bench(ctx):
        at = {name: 0 for name, *_ in streams}
        for cycle in range(400):
            ctx.set(dut.front.wr_poison, cycle & 1)
            assert ctx.get(dut.back.wr_poison) == cycle & 1, "the plain member is not a wire"
            watch = []
            for name, src, dst, v, r in streams:
                k = at[name]
                offer = k < len(sent[name]) and not rng.random() < idle
                ctx.set(getattr(src, v), offer)
                for f, x in zip(fields[name], sent[name][k] if k < len(sent[name]) else []):
                    ctx.set(f, x)
                ctx.set(getattr(dst, r), not rng.random() < backpressure)
                dst_fields = [Value.cast(getattr(dst, f)) for f in dst.signature.members if f not in (v, r)]
                watch += [getattr(src, v), getattr(src, r), getattr(dst, v), getattr(dst, r), *dst_fields]
            values = (await ctx.tick().sample(*watch))[2:]
            i = 0
            for name, src, dst, v, r in streams:
                n = 4 + len(fields[name])
                sv, sr, dv, dr, *data = values[i:i + n]
                i += n
                at[name] += bool(sv and sr)
                if dv and dr:
                    got[name].append(list(data))
    run_testbench(dut, bench)
    assert got == sent


def test_port_slice_streams_move_only_on_the_clock():
    """Toggle every stream input of the DMA ports' slice between clock edges: no stream output changes
    until the edge (the paths on either side of it end at its flip-flops)."""
    dut = _dma_ports_slice()
    streams, _ = _port_slice_streams(dut)
    inputs, outputs = [], []
    for _, src, dst, v, r in streams:
        for f in src.signature.members:
            (outputs if f == r else inputs).append(Value.cast(getattr(src, f)))
        for f in dst.signature.members:
            (inputs if f == r else outputs).append(Value.cast(getattr(dst, f)))
    outputs_wait_for_the_clock(dut, inputs, outputs)
