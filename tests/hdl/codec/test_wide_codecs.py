"""The codecs at the wide NIC's width (W = 1024, contract.limits.WIDE_WIDTH): a beat holds two BFP blocks, so
the compressor encodes two per cycle and a packet's last beat may hold one (hdl/codec/bfp.py, groups).
Bit for bit against the golden model, with random idle cycles on the input and backpressure on the output.
(The cocotb regression runs the codecs at W = 64 and 512; `ainic demo --width 1024` runs them in a cluster.)
The same at W = 64 in the Amaranth simulator: the first check of a change to the codecs, in seconds."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from contract.enums import Codec
from contract.limits import WIDE_WIDTH
from hdl.codec.compressor import Compressor
from hdl.codec.decompressor import Decompressor
from host_driver.models import numerics as nm

# around one block (16), one beat (32 elements = two blocks), a beat and a block, a whole 256-element packet
SIZES = (1, 15, 16, 17, 31, 32, 33, 48, 49, 64, 256)


def run(dut, codec, packets, rng, user=None, idle=0.3, backpressure=0.3):
    """Byte strings through ``dut`` (``s_axis`` -> ``m_axis``, ``cfg_codec`` = ``codec``); ``user[k]``: tuser
    of packet k. Returns the packets that came out."""
    B = dut.width // 8
    got, done = [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def feed(ctx):
        s = dut.s_axis
        ctx.set(dut.cfg_codec, Codec[codec])
        await ctx.tick()
        for k, p in enumerate(packets):
            for i in range(0, len(p), B):
                while rng.random() < idle:
                    ctx.set(s.tvalid, 0)
                    await ctx.tick()
                chunk = p[i:i + B]
                ctx.set(s.tdata, int.from_bytes(chunk.ljust(B, b"\0"), "little"))
                ctx.set(s.tkeep, (1 << len(chunk)) - 1)
                ctx.set(s.tlast, i + B >= len(p))
                if user is not None:
                    ctx.set(s.tuser, user[k])
                ctx.set(s.tvalid, 1)
                await ctx.tick().until(s.tready)
        ctx.set(s.tvalid, 0)

    async def sink(ctx):
        o, buf = dut.m_axis, b""
        while len(got) < len(packets):
            ctx.set(o.tready, int(rng.random() >= backpressure))
            _, _, valid, ready, data, keep, last = await ctx.tick().sample(o.tvalid, o.tready, o.tdata, o.tkeep,
                                                                          o.tlast)
            if valid and ready:
                buf += int(data).to_bytes(B, "little")[:bin(keep).count("1")]
                if last:
                    got.append(buf)
                    buf = b""
        done.append(True)

    async def limit(ctx):
        await ctx.tick().repeat(40 * sum(len(p) // B + 2 for p in packets) + 200)

    sim.add_testbench(feed, background=True)
    sim.add_testbench(sink, background=True)
    sim.add_testbench(limit)
    sim.run()
    assert done, f"{len(got)} of {len(packets)} packets out (hung?)"
    return got


def gradients(rng, n):
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    x[rng.random(n) < 0.1] = 0.0
    return x


@pytest.mark.parametrize("W", [64, WIDE_WIDTH])
@pytest.mark.parametrize("codec", ["bfp8", "bfp4", "fp16", "bf16"])
def test_wide_compressor_and_decompressor_are_the_golden_model(rng, codec, W):
    xs = [gradients(rng, n) for n in SIZES]
    got = run(Compressor(W), codec, [x.tobytes() for x in xs], rng)
    wire = [bytes(nm.compress(x, codec)) for x in xs]
    for n, g, w in zip(SIZES, got, wire):
        assert g == w, f"compress {codec} n={n}: {len(g)} vs {len(w)} bytes"
    got = run(Decompressor(W), codec, wire, rng, user=list(SIZES))
    for n, g, w in zip(SIZES, got, wire):
        want = nm.decompress(w, codec, n).tobytes()
        assert g == want, f"decompress {codec} n={n}: {len(g)} vs {len(want)} bytes"


@pytest.mark.parametrize("codecs", [frozenset({Codec.none, Codec.fp16, Codec.bfp8}),
                                    frozenset({Codec.none, Codec.bf16, Codec.bfp4})])
def test_a_codec_subset_keeps_its_codecs_and_passes_the_others_through(rng, codecs):
    """A build's codec set (contract/build.py): the codecs built are the golden model's bit for bit; one left
    out is no hardware at all (its converters are not in the netlist) and its packets pass through as ``none``
    (the command processor refuses such descriptors first). (What it saves is small at W = 64: about 4 % of
    the compressor's gates for bf16 and bfp4; docs/hardware.md, "What makes the NIC big".)"""
    from amaranth.back import rtlil
    W, sizes = 64, (1, 17, 33, 256)
    xs = [gradients(rng, n) for n in sizes]
    for codec in Codec:
        packets = [x.tobytes() for x in xs]
        got = run(Compressor(W, codecs), codec.name, packets, rng)
        want = [bytes(nm.compress(x, codec.name)) if codec in codecs else p for x, p in zip(xs, packets)]
        assert got == want, f"compress {codec.name} in {sorted(c.name for c in codecs)}"
        got = run(Decompressor(W, codecs), codec.name, want, rng, user=list(sizes))
        back = [nm.decompress(w, codec.name, n).tobytes() if codec in codecs else w for n, w in zip(sizes, want)]
        assert got == back, f"decompress {codec.name} in {sorted(c.name for c in codecs)}"
    for block in (Compressor, Decompressor):
        text = rtlil.convert(block(W, codecs), emit_src=False)
        for c in (Codec.fp16, Codec.bf16):
            assert (f"{c.name}_0" in text) == (c in codecs), (block.__name__, c.name)
