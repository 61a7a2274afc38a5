"""Streaming gradient compressor: fp32 beats in, codec bytes packed densely into W-bit beats out."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.enums import Codec
from hdl.codec import bfp
from hdl.codec.codec_set import ALL, BFP, codec_set, is_bfp8, selects
from hdl.codec.half_float import F32_TO_F16_STAGES, f32_to_bf16, f32_to_f16
from hdl.codec.wire_size import chunk_bytes as codec_chunk_bytes
from hdl.stream.axis import AxiStreamSignature, check_width, keep_count
from hdl.stream.byte_packer import BytePacker
from hdl.stream.credit_buffer import CreditBuffer
from hdl.stream.pipeline import delay, register


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
    * ``cfg_codec``: 0 none, 1 fp16, 2 bf16, 3 bfp8, 4 bfp4 (other values, and codecs not in ``codecs``:
      none). Change it only between packets while idle. It is registered: a packet's first beat may come
      the cycle after it changes, not in the same cycle.
    * ``codecs``: the codecs built (hdl/codec/codec_set.py); the others' hardware is left out.
    * Throughput: one fp32 beat per cycle on ``s_axis`` without backpressure (none: a wire, W/8 bytes
      out per beat; fp16/bf16: W/16 bytes; bfp: a 16-element block every 512/W beats below W = 512, W/512
      blocks a beat from W = 512 on). Back-to-back
      packets cost nothing unless a packet ends with more than one output beat left to flush (one cycle).
    * Latency: none 0 cycles; otherwise the codec pipeline's 6 stages, the buffer behind it (2), the
      packer (4: its two input stages, the ring, its output slice) from a chunk's last input beat (bfp: 1 more, into the gather),
      plus the input needed to fill an output beat.
    * Backpressure: any pattern; nothing is dropped.
    """

    def __init__(self, width: int = 512, codecs=ALL):
        self.width = check_width(width, self)
        self.codecs = codec_set(codecs)
        super().__init__(compressor_signature(width))

    def elaborate(self, platform):
        m = Module()
        W = self.width
        lanes = W // 32
        chunk_bytes = codec_chunk_bytes(W)
        s, o = self.s_axis, self.m_axis
        # the codec and its selects in registers: nothing of the encoder waits on cfg_codec or a decode of it
        # (in the NIC it comes from the command processor, across the chip)
        codec = Signal.like(self.cfg_codec)
        m.d.sync += codec.eq(self.cfg_codec)
        m.submodules.packer = packer = BytePacker(chunk_bytes, W // 8)
        # the packed beats leave through the packer's own register slice: m_axis.tready reaches no further
        # than its flops
        out = packer
        built = self.codecs
        has_bfp = bool(BFP & built)
        if has_bfp:
            m.submodules.gather = gather = bfp.BlockGather(W)
        # the codecs are a free-running pipeline of LATENCY stages (no enable); the buffer behind it takes
        # the backpressure and hands the packer one chunk a cycle
        latency = bfp.ENCODE_STAGES
        assert latency >= F32_TO_F16_STAGES + 1         # the halves' first stage is their input register
        count_bits = len(packer.s.count)
        m.submodules.buffer = buf = CreditBuffer(8 * chunk_bytes + count_bits + 1, latency)
        is_bfp, is_half = Signal(), Signal()
        m.d.sync += [is_bfp.eq(selects(self.cfg_codec, built, Codec.bfp8, Codec.bfp4)),
                     is_half.eq(selects(self.cfg_codec, built, Codec.fp16, Codec.bf16))]
        src_valid, src_last = is_half & s.tvalid, s.tlast      # where the pipeline's next chunk comes from
        if has_bfp:
            src_valid, src_last = Mux(is_bfp, gather.m.valid, src_valid), Mux(is_bfp, gather.m.last, src_last)
        fire = Signal()
        m.d.comb += fire.eq(src_valid & buf.ready)

        # fp16 / bf16: one lane per element; the input beat is the pipeline's first register
        beat = register(m, s.tdata, "beat")
        halves = {c: delay(m, Cat(*[convert(m, beat[32 * i:32 * (i + 1)], f"{c.name}_{i}", register)
                                    for i in range(lanes)]), latency - F32_TO_F16_STAGES - 1, f"{c.name}_wait")
                  for c, convert in ((Codec.fp16, f32_to_f16), (Codec.bf16, f32_to_bf16)) if c in built}
        in_bytes = keep_count(m, s.tkeep, "in_bytes")
        half_count = Signal(range(W // 16 + 1))
        m.d.comb += half_count.eq(in_bytes >> 1)
        # what the chunk needs besides its data travels beside the pipeline, with the codec it was made with
        valid_d = delay(m, fire, latency, "valid", reset=True)
        last_d = delay(m, src_last, latency, "last")
        codec_d = delay(m, codec, latency, "codec")
        chunk = halves.get(Codec.bf16, C(0, 8 * chunk_bytes))
        if Codec.fp16 in halves:
            chunk = Mux(codec_d == Codec.fp16, halves[Codec.fp16], chunk) if Codec.bf16 in halves else halves[Codec.fp16]
        # the chunk's byte count, found as it enters (from the beat's tkeep or the group's blocks) and delayed
        # beside it: nothing at the pipeline's end waits on a product or a decode (the packer writes only the
        # bytes a count covers: what lies past it need not be cleared)
        count = Signal(count_bits)
        m.d.comb += count.eq(half_count)
        if has_bfp:
            # block floating point: gather 16 elements, encode the block, hand the packer one record
            records = [bfp.encode(m, gather.m.data[bfp.BLOCK_BITS * i:bfp.BLOCK_BITS * (i + 1)],
                                  is_bfp8(codec, built), f"bfp{i}", register) for i in range(gather.group)]
            bfp_d, is8_d = selects(codec_d, built, Codec.bfp8, Codec.bfp4), is_bfp8(codec_d, built)
            chunk = Mux(bfp_d, bfp.group_records(records, is8_d), chunk)
            with m.If(is_bfp):
                m.d.comb += count.eq(gather.m.blocks * Mux(is_bfp8(codec, built), bfp.block_bytes(8),
                                                           bfp.block_bytes(4)))
        count_d = delay(m, count, latency, "count")
        m.d.comb += [
            buf.enter.eq(fire),
            buf.p_valid.eq(valid_d),
            buf.p_data.eq(Cat(chunk, count_d, last_d)),
            packer.s.data.eq(buf.m_data[:8 * chunk_bytes]),
            packer.s.count.eq(buf.m_data[8 * chunk_bytes:8 * chunk_bytes + count_bits]),
            packer.s.last.eq(buf.m_data[-1]),
            packer.s.valid.eq(buf.m_valid),
            buf.m_ready.eq(packer.s.ready),
        ]

        with m.If(is_half):
            m.d.comb += s.tready.eq(buf.ready)
            wiring.connect(m, out.m_axis, wiring.flipped(o))
        if has_bfp:
            with m.Elif(is_bfp):
                m.d.comb += [
                    gather.s_axis.tdata.eq(s.tdata),
                    gather.s_axis.tkeep.eq(s.tkeep),
                    gather.s_axis.tlast.eq(s.tlast),
                    gather.s_axis.tvalid.eq(s.tvalid),
                    s.tready.eq(gather.s_axis.tready),
                    gather.m.ready.eq(buf.ready),
                ]
                wiring.connect(m, out.m_axis, wiring.flipped(o))
        with m.Else():
            wiring.connect(m, wiring.flipped(s), wiring.flipped(o))
        return m
