"""Block-floating-point record encode and decode against the golden model, bit for bit."""

import numpy as np
import pytest

from hdl.codec import bfp
from host_driver.models import numerics as nm
from host_driver.models.vectors import edge_f32_bits
from tests.hdl.lanes import comb


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
