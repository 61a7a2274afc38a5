"""Block-floating-point record encode and decode against the golden model, bit for bit."""

import numpy as np
import pytest

from hdl.codec import bfp
from host_driver.models import numerics as nm
from host_driver.models.vectors import edge_f32_bits
from hdl.stream.pipeline import register
from tests.hdl.lanes import comb, staged


@pytest.mark.parametrize("codec", ["bfp8", "bfp4"])
def test_bfp_encode_decode(rng, codec):
    blocks = [edge_f32_bits(rng, 16), edge_f32_bits(rng, 16, finite=True), np.zeros(16, np.uint32),
              (rng.standard_normal(16) * np.exp2(rng.integers(-40, 40, 16))).astype(np.float32).view(np.uint32)]
    blocks += [rng.standard_normal(16).astype(np.float32).view(np.uint32) for _ in range(60)]
    packed = [sum(int(v) << (32 * i) for i, v in enumerate(b)) for b in blocks]
    is8 = codec == "bfp8"
    rec_bytes = bfp.block_bytes(8 if is8 else 4)
    records = comb(lambda m, x: bfp.encode(m, x, is8), 512, packed)
    for blk, rec in zip(blocks, records):
        want = nm.compress(blk.view(np.float32), codec)
        assert int(rec).to_bytes(17, "little")[:rec_bytes] == want
    decoded = comb(lambda m, x: bfp.decode(m, x, is8), 17 * 8, [int(r) for r in records])
    for rec, out in zip(records, decoded):
        want = nm.decompress(int(rec).to_bytes(17, "little")[:rec_bytes], codec, 16).view(np.uint32)
        got = np.array([(int(out) >> (32 * i)) & 0xFFFFFFFF for i in range(16)], dtype=np.uint32)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("codec", ["bfp8", "bfp4"])
def test_staged_encoder_is_the_same_function(rng, codec):
    """The encoder cut into its pipeline stages gives, ENCODE_STAGES cycles later, what the combinational
    one gives (a value one cycle a block: a stage that dropped or crossed a value would show)."""
    blocks = [edge_f32_bits(rng, 16) for _ in range(40)]
    blocks += [(rng.standard_normal(16) * np.exp2(rng.integers(-30, 30, 16))).astype(np.float32).view(np.uint32)
               for _ in range(40)]
    packed = [sum(int(v) << (32 * i) for i, v in enumerate(b)) for b in blocks]
    is8 = codec == "bfp8"
    want = comb(lambda m, x: bfp.encode(m, x, is8), 512, packed)
    got = staged(lambda m, x: bfp.encode(m, x, is8, stage=register), 512, packed, bfp.ENCODE_STAGES)
    assert [int(g) for g in got] == [int(w) for w in want]


@pytest.mark.parametrize("codec", ["bfp8", "bfp4"])
def test_staged_decoder_is_the_same_function(rng, codec):
    """The decoder cut into its DECODE_STAGES pipeline stages, one record a cycle (every byte pattern)."""
    records = [int.from_bytes(rng.integers(0, 256, 17, dtype=np.uint8).tobytes(), "little") for _ in range(120)]
    records += [0xFF, 0, 0x80 << 8]
    is8 = codec == "bfp8"
    want = comb(lambda m, x: bfp.decode(m, x, is8), 17 * 8, records)
    got = staged(lambda m, x: bfp.decode(m, x, is8, stage=register), 17 * 8, records, bfp.DECODE_STAGES)
    assert [int(g) for g in got] == [int(w) for w in want]
