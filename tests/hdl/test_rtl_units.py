"""Fast unit tests of the RTL building blocks in Amaranth's own simulator, against the golden model.

The cocotb runs on exported Verilog (cocotb_tests/) are the regression of record; these check the lanes and
converters one by one, so that a failure names the block.
"""

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from hdl.arith.fp32_adder import Fp32AdderLane
from hdl.arith.int32_adder import Int32SatAdderLane
from hdl.codec import bfp
from hdl.codec import half_float as hf
from host_driver.models import numerics as nm
from host_driver.models.vectors import adder_edge_pairs, edge_f32_bits


def _run_pipeline(dut, inputs, outputs, latency):
    """Drive one input vector per cycle (inputs: [(port, values)]); collect outputs ``latency`` cycles later."""
    n = len(inputs[0][1])
    got = {name: [] for name in outputs}

    async def bench(ctx):
        for i in range(n + latency):
            if i < n:
                for port, vals in inputs:
                    ctx.set(port, int(vals[i]))
            await ctx.tick()
            if i >= latency - 1 and len(got[next(iter(outputs))]) < n:
                for name, port in outputs.items():
                    got[name].append(ctx.get(port))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return {k: np.array(v, dtype=np.uint64) for k, v in got.items()}


def _diff(*cols, bad):
    return [tuple(hex(int(c[i])) for c in cols) for i in bad[:6]]


def test_fp32_lane(rng):
    a0, b0 = adder_edge_pairs()
    a = np.concatenate([a0, edge_f32_bits(rng, 3000)])
    b = np.concatenate([b0, edge_f32_bits(rng, 3000)])
    dut = Fp32AdderLane()
    got = _run_pipeline(dut, [(dut.a, a), (dut.b, b)], {"sum": dut.sum}, dut.LATENCY)["sum"]
    want = nm.add_f32(a, b).view(np.uint32)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, _diff(a, b, got, want, bad=bad)


@pytest.mark.parametrize("latency", [1, 4])
def test_int32_lane(rng, latency):
    a = rng.integers(-2**31, 2**31, 2000, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, 2000, dtype=np.int64).astype(np.int32)
    dut = Int32SatAdderLane(latency)
    got = _run_pipeline(dut, [(dut.a, a.view(np.uint32)), (dut.b, b.view(np.uint32))],
                        {"sum": dut.sum, "ovf": dut.overflow}, latency)
    s, over = nm.add_i32(a, b)
    assert np.array_equal(got["sum"].astype(np.uint32), s.view(np.uint32))
    assert np.array_equal(got["ovf"].astype(bool), over) and over.any()
    with pytest.raises(ValueError, match="latency"):
        Int32SatAdderLane(0)


def _comb(build, width_in, vectors):
    m = Module()
    x = Signal(width_in)
    out = build(m, x)
    got = []

    async def bench(ctx):
        for v in vectors:
            ctx.set(x, int(v))
            await ctx.delay(1e-9)
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=object)


@pytest.mark.parametrize("conv,ref", [(hf.f32_to_f16, nm.f32_to_f16_bits), (hf.f32_to_bf16, nm.f32_to_bf16_bits)])
def test_half_encoders(rng, conv, ref):
    x = edge_f32_bits(rng, 6000)
    got = _comb(conv, 32, x).astype(np.uint16)
    want = ref(x)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, _diff(x, got, want, bad=bad)


@pytest.mark.parametrize("conv,ref", [(hf.f16_to_f32, nm.f16_bits_to_f32), (hf.bf16_to_f32, nm.bf16_bits_to_f32)])
def test_half_decoders(conv, ref):
    h = np.arange(0, 65536, 5, dtype=np.uint32).astype(np.uint16)      # every 5th pattern; all in cocotb
    got = _comb(conv, 16, h).astype(np.uint32)
    want = ref(h).view(np.uint32)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, _diff(h, got, want, bad=bad)


@pytest.mark.parametrize("codec", ["bfp8", "bfp4"])
def test_bfp_encode_decode(rng, codec):
    blocks = [edge_f32_bits(rng, 16), edge_f32_bits(rng, 16, finite=True), np.zeros(16, np.uint32),
              (rng.standard_normal(16) * np.exp2(rng.integers(-40, 40, 16))).astype(np.float32).view(np.uint32)]
    blocks += [rng.standard_normal(16).astype(np.float32).view(np.uint32) for _ in range(60)]
    packed = [sum(int(v) << (32 * i) for i, v in enumerate(b)) for b in blocks]
    is8 = codec == "bfp8"
    rec_bytes = bfp.block_bytes(8 if is8 else 4)
    records = _comb(lambda m, x: bfp.encode(m, x, is8), 512, packed)
    for blk, rec in zip(blocks, records):
        want = nm.compress(blk.view(np.float32), codec)
        assert int(rec).to_bytes(17, "little")[:rec_bytes] == want
    decoded = _comb(lambda m, x: bfp.decode(m, x, is8), 17 * 8, [int(r) for r in records])
    for rec, out in zip(records, decoded):
        want = nm.decompress(int(rec).to_bytes(17, "little")[:rec_bytes], codec, 16).view(np.uint32)
        got = np.array([(int(out) >> (32 * i)) & 0xFFFFFFFF for i in range(16)], dtype=np.uint32)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("top", ["reduction_unit", "compressor", "decompressor"])
def test_bad_width_is_rejected(top):
    from hdl.flow.tops import TOPS
    with pytest.raises(ValueError, match="width must be one of"):
        TOPS[top].factory(96)
