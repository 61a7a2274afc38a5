"""Streaming gradient decompressor: codec bytes in W-bit beats in, fp32 beats out."""

from amaranth import Cat, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.enums import Codec
from hdl.codec import bfp
from hdl.codec.half_float import bf16_to_f32, f16_to_f32
from hdl.codec.wire_size import chunk_bytes as codec_chunk_bytes
from hdl.stream.axis import AxiStreamSignature, check_width, keep_mask
from hdl.stream.byte_packer import ByteUnpacker

COUNT_BITS = 16


def decompressor_signature(width: int) -> wiring.Signature:
    """The :class:`Decompressor`'s ports (see :func:`~hdl.codec.compressor.compressor_signature`)."""
    return wiring.Signature({
        "s_axis": In(AxiStreamSignature(width, COUNT_BITS)),
        "m_axis": Out(AxiStreamSignature(width)),
        "cfg_codec": In(Codec),
    })


class Decompressor(wiring.Component):
    """``m_axis`` = ``host_driver.models.numerics.decompress(packet, codec, n)`` for every packet on ``s_axis``.

    * ``s_axis``: one packet's codec bytes, densely packed, last beat partial. ``tuser`` on the first
      beat is the packet's element count n (>= 1); bfp codecs need it to drop the padding of a short
      last block, the other codecs ignore it. A bfp packet whose bytes hold fewer blocks than n needs
      ends at its last block; blocks beyond n are dropped.
    * ``m_axis``: fp32 elements, W/32 per beat, last beat partial in whole elements.
    * ``cfg_codec``: as for the compressor; change it only between packets while idle.
    * Throughput: one fp32 beat per cycle on ``m_axis`` while input bytes keep up (fp16/bf16 need W/16
      bytes per fp32 beat, bfp one 17- or 9-byte record per 512/W beats below W = 512, W/512 records a beat
      from W = 512 on). After a packet's last input
      beat the input waits until the packet's bytes are out.
    * Latency: none 0 cycles; fp16/bf16 1 cycle; bfp 2 cycles.
    * Backpressure: any pattern; nothing is dropped.
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        super().__init__(decompressor_signature(width))

    def elaborate(self, platform):
        m = Module()
        W = self.width
        lanes = W // 32
        chunk_bytes = codec_chunk_bytes(W)
        s, o, codec = self.s_axis, self.m_axis, self.cfg_codec
        m.submodules.unpacker = unp = ByteUnpacker(W // 8, chunk_bytes, COUNT_BITS)
        m.submodules.scatter = scatter = bfp.BlockScatter(W)
        c = unp.m

        f16 = Cat(*[f16_to_f32(m, c.data[16 * i:16 * (i + 1)], f"f{i}") for i in range(lanes)])
        bf16 = Cat(*[bf16_to_f32(m, c.data[16 * i:16 * (i + 1)], f"g{i}") for i in range(lanes)])
        is8 = codec == Codec.bfp8
        group = scatter.group
        bb = Mux(is8, bfp.block_bytes(8), bfp.block_bytes(4))
        blocks = Cat(*[bfp.decode(m, r, is8, f"bfpd{i}") for i, r in enumerate(bfp.split_records(c.data, is8, group))])

        def from_input():
            return [unp.s_axis.tdata.eq(s.tdata), unp.s_axis.tkeep.eq(s.tkeep), unp.s_axis.tlast.eq(s.tlast),
                    unp.s_axis.tuser.eq(s.tuser), unp.s_axis.tvalid.eq(s.tvalid), s.tready.eq(unp.s_axis.tready)]

        with m.Switch(codec):
            with m.Case(Codec.fp16, Codec.bf16):
                m.d.comb += from_input()
                m.d.comb += [
                    unp.take.eq(W // 16),
                    o.tdata.eq(Mux(codec == Codec.fp16, f16, bf16)),
                    o.tkeep.eq(keep_mask(c.count << 1, W // 8)),
                    o.tlast.eq(c.last),
                    o.tvalid.eq(c.valid),
                    c.ready.eq(o.tready),
                ]
            with m.Case(Codec.bfp8, Codec.bfp4):
                m.d.comb += from_input()
                m.d.comb += [
                    unp.take.eq(bb * group),
                    scatter.s.data.eq(blocks),
                    # a packet's last chunk may hold fewer records than a group
                    scatter.s.blocks.eq(1 + sum(c.count > i * bb for i in range(1, group))),
                ]
                m.d.comb += [
                    scatter.s.last.eq(c.last),
                    scatter.s.user.eq(c.user),
                    scatter.s.valid.eq(c.valid),
                    c.ready.eq(scatter.s.ready),
                ]
                wiring.connect(m, scatter.m_axis, wiring.flipped(o))
            with m.Default():
                m.d.comb += [o.tdata.eq(s.tdata), o.tkeep.eq(s.tkeep), o.tlast.eq(s.tlast),
                             o.tvalid.eq(s.tvalid), s.tready.eq(o.tready)]
        return m

