"""Streaming gradient decompressor: codec bytes in W-bit beats in, fp32 beats out."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.enums import Codec
from hdl.codec import bfp
from hdl.codec.codec_set import ALL, BFP, codec_set, is_bfp8, selects
from hdl.codec.half_float import F16_TO_F32_STAGES, bf16_to_f32, f16_to_f32
from hdl.codec.wire_size import chunk_bytes as codec_chunk_bytes
from hdl.stream.axis import AxiStreamSignature, check_width, keep_mask
from hdl.stream.byte_packer import ByteUnpacker
from hdl.stream.credit_buffer import CreditBuffer
from hdl.stream.pipeline import delay, register
from hdl.stream.register_slice import StreamSlice

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
    * ``cfg_codec``: as for the compressor (codecs not in ``codecs``: none); change it only between packets
      while idle. It is registered: a packet's first beat may come the cycle after it changes, not in the
      same cycle.
    * Throughput: one fp32 beat per cycle on ``m_axis`` while input bytes keep up (fp16/bf16 need W/16
      bytes per fp32 beat, bfp one 17- or 9-byte record per 512/W beats below W = 512, W/512 records a beat
      from W = 512 on). After a packet's last input
      beat the input waits until the packet's bytes are out.
    * Latency: none 0 cycles; otherwise the unpacker (its two input stages, the ring and its read: 6), the decoders' pipeline (2) and the buffer
      behind it (2) and the output slice (1); bfp 1 more (the scatter).
    * Backpressure: any pattern; nothing is dropped.
    """

    def __init__(self, width: int = 512, codecs=ALL):
        self.width = check_width(width, self)
        self.codecs = codec_set(codecs)
        super().__init__(decompressor_signature(width))

    def elaborate(self, platform):
        m = Module()
        W = self.width
        lanes = W // 32
        chunk_bytes = codec_chunk_bytes(W)
        s, o = self.s_axis, self.m_axis
        # the codec and its selects in registers: nothing of the decoder waits on cfg_codec or a decode of it
        # (in the NIC it comes from the command processor, across the chip)
        codec = Signal.like(self.cfg_codec)
        m.d.sync += codec.eq(self.cfg_codec)
        m.submodules.unpacker = unp = ByteUnpacker(W // 8, chunk_bytes, COUNT_BITS)
        built = self.codecs
        has_bfp = bool(BFP & built)
        group = bfp.group_blocks(W)
        if has_bfp:
            m.submodules.scatter = scatter = bfp.BlockScatter(W)
        c = unp.m
        # decoded beats leave through a register slice: m_axis.tready reaches no further than its flops
        m.submodules.out = out = StreamSlice(W)
        d = out.s_axis
        # the decoders are a free-running pipeline of LATENCY stages; the buffer behind it takes the
        # backpressure (as in the compressor)
        latency = max(bfp.DECODE_STAGES, F16_TO_F32_STAGES)
        out_bits = max(W, bfp.BLOCK_BITS * group)
        count_bits = len(c.count)
        m.submodules.buffer = buf = CreditBuffer(out_bits + count_bits + 1 + COUNT_BITS, latency)
        is_bfp, is_half, is8 = Signal(), Signal(), Signal()
        m.d.sync += [is_bfp.eq(selects(self.cfg_codec, built, Codec.bfp8, Codec.bfp4)),
                     is_half.eq(selects(self.cfg_codec, built, Codec.fp16, Codec.bf16)),
                     is8.eq(is_bfp8(self.cfg_codec, built))]
        fire = Signal()
        m.d.comb += [fire.eq(c.valid & buf.ready), c.ready.eq(buf.ready)]

        valid_d = delay(m, fire, latency, "valid", reset=True)
        codec_d = delay(m, codec, latency, "codec")
        side_d = delay(m, Cat(c.count, c.last, c.user), latency, "side")
        data_d = C(0, out_bits)
        if Codec.bf16 in built:
            data_d = delay(m, Cat(*[bf16_to_f32(m, c.data[16 * i:16 * (i + 1)], f"bf16_{i}") for i in range(lanes)]),
                           latency, "bf16")
        if Codec.fp16 in built:
            f16 = Cat(*[f16_to_f32(m, c.data[16 * i:16 * (i + 1)], f"fp16_{i}", register) for i in range(lanes)])
            f16 = delay(m, f16, latency - F16_TO_F32_STAGES, "f16")
            data_d = Mux(codec_d == Codec.fp16, f16, data_d) if Codec.bf16 in built else f16
        if has_bfp:
            blocks = Cat(*[bfp.decode(m, r, is8, f"bfpd{i}", register)
                           for i, r in enumerate(bfp.split_records(c.data, is8, group))])
            blocks = delay(m, blocks, latency - bfp.DECODE_STAGES, "blocks")
            data_d = Mux(selects(codec_d, built, Codec.bfp8, Codec.bfp4), blocks, data_d)
        m.d.comb += [buf.enter.eq(fire), buf.p_valid.eq(valid_d), buf.p_data.eq(Cat(data_d, side_d))]
        data, count = buf.m_data[:out_bits], buf.m_data[out_bits:out_bits + count_bits]
        last, user = buf.m_data[out_bits + count_bits], buf.m_data[out_bits + count_bits + 1:]
        bb = Mux(is8, bfp.block_bytes(8), bfp.block_bytes(4))
        # the unpacker's chunk for the codec, registered as the selects are
        take = Signal.like(unp.take)
        m.d.sync += take.eq(Mux(selects(self.cfg_codec, built, Codec.fp16, Codec.bf16), W // 16,
                                Mux(is_bfp8(self.cfg_codec, built), bfp.block_bytes(8), bfp.block_bytes(4)) * group))
        m.d.comb += unp.take.eq(take)

        def from_input():
            return [unp.s_axis.tdata.eq(s.tdata), unp.s_axis.tkeep.eq(s.tkeep), unp.s_axis.tlast.eq(s.tlast),
                    unp.s_axis.tuser.eq(s.tuser), unp.s_axis.tvalid.eq(s.tvalid),
                    s.tready.eq(unp.s_axis.tready)]

        with m.If(is_half):
            m.d.comb += from_input()
            m.d.comb += [
                d.tdata.eq(data[:W]),
                d.tkeep.eq(keep_mask(count << 1, W // 8)),
                d.tlast.eq(last),
                d.tvalid.eq(buf.m_valid),
                buf.m_ready.eq(d.tready),
            ]
            wiring.connect(m, out.m_axis, wiring.flipped(o))
        if has_bfp:
            with m.Elif(is_bfp):
                m.d.comb += from_input()
                m.d.comb += [
                    scatter.s.data.eq(data[:bfp.BLOCK_BITS * group]),
                    # a packet's last chunk may hold fewer records than a group
                    scatter.s.blocks.eq(1 + sum(count > i * bb for i in range(1, group))),
                    scatter.s.last.eq(last),
                    scatter.s.user.eq(user),
                    scatter.s.valid.eq(buf.m_valid),
                    buf.m_ready.eq(scatter.s.ready),
                ]
                wiring.connect(m, scatter.m_axis, d)
                wiring.connect(m, out.m_axis, wiring.flipped(o))
        with m.Else():
            m.d.comb += [o.tdata.eq(s.tdata), o.tkeep.eq(s.tkeep), o.tlast.eq(s.tlast),
                         o.tvalid.eq(s.tvalid), s.tready.eq(o.tready)]
        return m
