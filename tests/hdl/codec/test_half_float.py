"""fp16/bf16 converters against the golden model, bit for bit."""

import numpy as np
import pytest

from hdl.codec import half_float as hf
from host_driver.models import numerics as nm
from host_driver.models.vectors import edge_f32_bits
from hdl.stream.pipeline import register
from tests.hdl.lanes import comb, diff, staged


@pytest.mark.parametrize("conv,ref", [(hf.f32_to_f16, nm.f32_to_f16_bits), (hf.f32_to_bf16, nm.f32_to_bf16_bits)])
def test_half_encoders(rng, conv, ref):
    x = edge_f32_bits(rng, 6000)
    got = comb(conv, 32, x).astype(np.uint16)
    want = ref(x)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, diff(x, got, want, bad=bad)


@pytest.mark.parametrize("conv,ref", [(hf.f16_to_f32, nm.f16_bits_to_f32), (hf.bf16_to_f32, nm.bf16_bits_to_f32)])
def test_half_decoders(conv, ref):
    h = np.arange(0, 65536, 5, dtype=np.uint32).astype(np.uint16)      # every 5th pattern; all in cocotb
    got = comb(conv, 16, h).astype(np.uint32)
    want = ref(h).view(np.uint32)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, diff(h, got, want, bad=bad)


@pytest.mark.parametrize("conv,ref", [(hf.f32_to_f16, nm.f32_to_f16_bits), (hf.f32_to_bf16, nm.f32_to_bf16_bits)])
def test_staged_half_encoders(rng, conv, ref):
    """The encoders cut into their F32_TO_F16_STAGES pipeline stages, one value a cycle."""
    x = edge_f32_bits(rng, 1500)
    got = staged(lambda m, v: conv(m, v, stage=register), 32, x, hf.F32_TO_F16_STAGES).astype(np.uint16)
    want = ref(x)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, diff(x, got, want, bad=bad)


def test_staged_f16_decoder(rng):
    """f16_to_f32 with its F16_TO_F32_STAGES registers, one pattern a cycle."""
    h = np.arange(0, 65536, 37, dtype=np.uint32).astype(np.uint16)
    got = staged(lambda m, v: hf.f16_to_f32(m, v, stage=register), 16, h, hf.F16_TO_F32_STAGES).astype(np.uint32)
    want = nm.f16_bits_to_f32(h).view(np.uint32)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, diff(h, got, want, bad=bad)
