"""Codec codes shared by the RTL, the register map and the wire header (from the golden model)."""

from host_driver.numerics import CODECS

CODEC_NONE = CODECS["none"]
CODEC_FP16 = CODECS["fp16"]
CODEC_BF16 = CODECS["bf16"]
CODEC_BFP8 = CODECS["bfp8"]
CODEC_BFP4 = CODECS["bfp4"]
CODEC_BITS = 3


def chunk_bytes(width: int) -> int:
    """The most bytes any codec hands the gearboxes per step at width W: W/16 bytes of fp16/bf16 per
    fp32 beat, or one 17-byte bfp8 record."""
    from .bfp import block_bytes
    return max(width // 16, block_bytes(8))
