"""Codec round trip on a stream: cut fp32 data into P-element packets, compress, decompress."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.enums import Codec
from hdl.codec.compressor import compressor_signature
from hdl.codec.decompressor import decompressor_signature
from hdl.stream.axis import AxiStreamSignature, check_width


class CodecLoop(wiring.Component):
    """``m_axis`` = ``numerics.roundtrip(packet, codec)`` for each P-element packet of ``s_axis``.

    What a receiver sees of data sent through the wire codec, without the wire: the local-copy opcode's
    codec option uses it so the numeric path runs end to end before the collective engine exists.

    * ``start`` (one cycle, while idle): a new transfer of ``cfg_count`` elements begins.
    * ``s_axis``: the transfer's fp32 elements (as the DMA reader delivers them: packed, ``tlast`` at the
      end). Packets are cut every ``cfg_packet_elems`` elements (a multiple of 16, so packets start on
      beat and BFP-block boundaries and the result equals ``roundtrip`` of the whole transfer).
    * ``m_axis``: the same number of elements, round-tripped; ``tlast`` at every packet end.
    * ``comp``, ``dec``: the compressor and decompressor it uses (the NIC's, shared with the collective
      engines: ``hdl/nic/nic.py``).
    * Throughput: one beat per cycle while the codec keeps up (see Compressor/Decompressor).
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        super().__init__({
            "s_axis": In(AxiStreamSignature(width)),
            "m_axis": Out(AxiStreamSignature(width)),
            "cfg_codec": In(Codec),
            "cfg_packet_elems": In(11),
            "cfg_count": In(32),
            "start": In(1),
            # the codecs it uses, shared with the NIC's other users (hdl/nic/nic.py)
            "comp": In(compressor_signature(width)), "dec": In(decompressor_signature(width)),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        shift = (W // 8).bit_length() - 1
        s = self.s_axis
        comp, decomp = self.comp, self.dec
        m.d.comb += [comp.cfg_codec.eq(self.cfg_codec), decomp.cfg_codec.eq(self.cfg_codec)]

        # cut packets: P elements = 4P/(W/8) beats
        beats_per_packet = Signal(11)
        m.d.comb += beats_per_packet.eq((self.cfg_packet_elems << 2) >> shift)
        beat = Signal(11)
        m.d.comb += [
            comp.s_axis.tdata.eq(s.tdata), comp.s_axis.tkeep.eq(s.tkeep),
            comp.s_axis.tlast.eq(s.tlast | (beat == beats_per_packet - 1)),
            comp.s_axis.tvalid.eq(s.tvalid), s.tready.eq(comp.s_axis.tready),
        ]
        with m.If(s.tvalid & s.tready):
            m.d.sync += beat.eq(Mux(comp.s_axis.tlast, 0, beat + 1))

        # the decompressor needs each packet's element count: min(P, what is left)
        left = Signal(32)
        c = comp.m_axis
        m.d.comb += [
            decomp.s_axis.tdata.eq(c.tdata), decomp.s_axis.tkeep.eq(c.tkeep), decomp.s_axis.tlast.eq(c.tlast),
            decomp.s_axis.tuser.eq(Mux(left < self.cfg_packet_elems, left, self.cfg_packet_elems)),
            decomp.s_axis.tvalid.eq(c.tvalid), c.tready.eq(decomp.s_axis.tready),
        ]
        with m.If(c.tvalid & c.tready & c.tlast):
            m.d.sync += left.eq(left - self.cfg_packet_elems)
        with m.If(self.start):
            m.d.sync += [left.eq(self.cfg_count), beat.eq(0)]
        wiring.connect(m, wiring.flipped(decomp.m_axis), wiring.flipped(self.m_axis))
        return m
