"""Wire sizes of the codecs in RTL: payload bytes per packet, and the gearboxes' step size."""

from amaranth import Signal

from contract.enums import Codec
from contract.protocol import BFP_BLOCK, bfp_block_bytes
from hdl.codec.bfp import group_blocks


def chunk_bytes(width: int) -> int:
    """The most bytes any codec hands the gearboxes per step at width W: W/16 bytes of fp16/bf16 per
    fp32 beat, or a beat's group of 17-byte bfp8 records (one below W = 1024)."""
    return max(width // 16, group_blocks(width) * bfp_block_bytes(Codec.bfp8))


def payload_bytes(m, codec, count, name="payload_bytes"):
    """Bytes on the wire for ``count`` elements under ``codec`` (as ``contract.protocol.codec_bytes``);
    0 for an unknown codec."""
    assert BFP_BLOCK == 16
    blocks = (count + 15) >> 4
    need = Signal(len(count) + 3, name=name)
    with m.Switch(codec):
        with m.Case(Codec.none):
            m.d.comb += need.eq(count << 2)
        with m.Case(Codec.fp16, Codec.bf16):
            m.d.comb += need.eq(count << 1)
        with m.Case(Codec.bfp8):
            m.d.comb += need.eq((blocks << 4) + blocks)
        with m.Case(Codec.bfp4):
            m.d.comb += need.eq((blocks << 3) + blocks)
    return need
