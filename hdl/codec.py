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


def payload_bytes(m, codec, count, name="payload_bytes"):
    """Bytes on the wire for ``count`` elements under ``codec`` (as ``host_driver.numerics.codec_bytes``);
    0 for an unknown codec."""
    from amaranth import Signal
    blocks = (count + 15) >> 4
    need = Signal(len(count) + 3, name=name)
    with m.Switch(codec):
        with m.Case(CODEC_NONE):
            m.d.comb += need.eq(count << 2)
        with m.Case(CODEC_FP16, CODEC_BF16):
            m.d.comb += need.eq(count << 1)
        with m.Case(CODEC_BFP8):
            m.d.comb += need.eq((blocks << 4) + blocks)
        with m.Case(CODEC_BFP4):
            m.d.comb += need.eq((blocks << 3) + blocks)
    return need
