"""Streaming gradient compressor: fp32 beats in, codec bytes packed densely into W-bit beats out."""

from amaranth import Cat, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.enums import Codec
from hdl.codec import bfp
from hdl.codec.half_float import f32_to_bf16, f32_to_f16
from hdl.codec.wire_size import chunk_bytes as codec_chunk_bytes
from hdl.stream.axis import AxiStreamSignature, check_width, keep_count
from hdl.stream.byte_packer import BytePacker, ChunkRegister


def compressor_signature(width: int) -> wiring.Signature:
    """The :class:`Compressor`'s ports; a block that uses a compressor it does not own (the NIC shares one
    between its engines, hdl/nic/nic.py) has ``In(compressor_signature(W))``."""
    return wiring.Signature({
        "s_axis": In(AxiStreamSignature(width)),
        "m_axis": Out(AxiStreamSignature(width)),
        "cfg_codec": In(Codec),
    })


class Compressor(wiring.Component):
    """``m_axis`` = ``host_driver.models.numerics.compress(packet, codec)`` for every packet on ``s_axis``.

    * ``s_axis``: fp32 elements, W/32 per beat, little-endian; only the last beat of a packet may be
      partial (``tkeep`` in whole elements, contiguous).
    * ``m_axis``: the packet's codec bytes packed densely; the last beat is partial (``tkeep``).
    * ``cfg_codec``: 0 none, 1 fp16, 2 bf16, 3 bfp8, 4 bfp4 (other values: none). Change it only
      between packets while idle.
    * Throughput: one fp32 beat per cycle on ``s_axis`` without backpressure (none: a wire, W/8 bytes
      out per beat; fp16/bf16: W/16 bytes; bfp: a 16-element block every 512/W beats below W = 512, W/512
      blocks a beat from W = 512 on). Back-to-back
      packets cost nothing unless a packet ends with more than one output beat left to flush (one cycle).
    * Latency: none 0 cycles; otherwise 2 cycles from a chunk's last input beat to the packer, plus the
      input needed to fill an output beat (measured first-in to first-out at W=512: fp16/bf16 3, bfp8 6,
      bfp4 10).
    * Backpressure: any pattern; nothing is dropped.
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        super().__init__(compressor_signature(width))

    def elaborate(self, platform):
        m = Module()
        W = self.width
        lanes = W // 32
        chunk_bytes = codec_chunk_bytes(W)
        s, o, codec = self.s_axis, self.m_axis, self.cfg_codec
        m.submodules.packer = packer = BytePacker(chunk_bytes, W // 8)
        # the codecs' logic ends in a register before the packer's shifter (timing, and synthesis time)
        m.submodules.stage = stage = ChunkRegister(chunk_bytes)
        wiring.connect(m, stage.m, packer.s)
        m.submodules.gather = gather = bfp.BlockGather(W)

        # fp16 / bf16: one lane per element, combinational, straight into the packer
        halves_f16 = Cat(*[f32_to_f16(m, s.tdata[32 * i:32 * (i + 1)], f"h{i}") for i in range(lanes)])
        halves_bf16 = Cat(*[f32_to_bf16(m, s.tdata[32 * i:32 * (i + 1)], f"b{i}") for i in range(lanes)])
        in_bytes = keep_count(m, s.tkeep, "in_bytes")
        # block floating point: gather 16 elements, encode the block, hand the packer one record
        is8 = codec == Codec.bfp8
        group = gather.group
        records = [bfp.encode(m, gather.m.data[bfp.BLOCK_BITS * i:bfp.BLOCK_BITS * (i + 1)], is8, f"bfp{i}")
                   for i in range(group)]

        with m.Switch(codec):
            with m.Case(Codec.fp16, Codec.bf16):
                with m.If(codec == Codec.fp16):
                    m.d.comb += stage.s.data.eq(halves_f16)
                with m.Else():
                    m.d.comb += stage.s.data.eq(halves_bf16)
                m.d.comb += [
                    stage.s.count.eq(in_bytes >> 1),
                    stage.s.last.eq(s.tlast),
                    stage.s.valid.eq(s.tvalid),
                    s.tready.eq(stage.s.ready),
                ]
                wiring.connect(m, packer.m_axis, wiring.flipped(o))
            with m.Case(Codec.bfp8, Codec.bfp4):
                m.d.comb += [
                    gather.s_axis.tdata.eq(s.tdata),
                    gather.s_axis.tkeep.eq(s.tkeep),
                    gather.s_axis.tlast.eq(s.tlast),
                    gather.s_axis.tvalid.eq(s.tvalid),
                    s.tready.eq(gather.s_axis.tready),
                    stage.s.last.eq(gather.m.last),
                    stage.s.valid.eq(gather.m.valid),
                    gather.m.ready.eq(stage.s.ready),
                ]
                m.d.comb += [
                    stage.s.data.eq(bfp.group_records(records, is8)),
                    stage.s.count.eq(gather.m.blocks * Mux(is8, bfp.block_bytes(8), bfp.block_bytes(4))),
                ]
                wiring.connect(m, packer.m_axis, wiring.flipped(o))
            with m.Default():
                wiring.connect(m, wiring.flipped(s), wiring.flipped(o))
        return m
