"""Width converters: a stream of ``width``-bit beats into one of ``2 * width`` (:class:`StreamUpsizer`) and
back (:class:`StreamDownsizer`), frame for frame, byte for byte, at line rate on the narrow side.

They let a block run on a wider bus than the links around it: the cluster bench's aggregation switch built
at 2W behind W-bit links processes a frame in half the cycles its ports take to carry it (a switch's
internal speedup), so that a resend or a result sent again finds cycles to spare (docs/in_network.md).
``tuser`` (a MAC-error mark) is ORed into the wide beat and copied onto both narrow halves: a frame marked
on any beat stays marked.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature
from hdl.stream.register_slice import skid_buffer


class StreamUpsizer(wiring.Component):
    """``s_axis`` (``width``) → ``m_axis`` (``2 * width``): two narrow beats make a wide one, the first in the
    low half; a frame's last beat that comes first leaves alone (high half kept empty). Takes a beat every
    cycle; its output passes a skid buffer (a cycle of latency, no combinational path out)."""

    def __init__(self, width: int, user_width: int = 0):
        self.width, self.user_width = width, user_width
        super().__init__({"s_axis": In(AxiStreamSignature(width, user_width)),
                          "m_axis": Out(AxiStreamSignature(2 * width, user_width))})

    def elaborate(self, platform):
        m = Module()
        s, o = self.s_axis, self.m_axis
        half = Signal()                                     # the low half is held
        lo_data, lo_keep = Signal(self.width), Signal(self.width // 8)
        lo_user = Signal(self.user_width) if self.user_width else None
        emit, emit_ready = Signal(), Signal()
        data, keep = Signal(2 * self.width), Signal(self.width // 4)
        m.d.comb += [
            emit.eq(s.tvalid & (half | s.tlast)),          # a wide beat is complete with this narrow one
            s.tready.eq(Mux(half | s.tlast, emit_ready, 1)),
            data.eq(Mux(half, Cat(lo_data, s.tdata), Cat(s.tdata, 0))),
            keep.eq(Mux(half, Cat(lo_keep, s.tkeep), Cat(s.tkeep, 0))),
        ]
        fields = [(data, o.tdata), (keep, o.tkeep), (s.tlast, o.tlast)]
        if self.user_width:
            fields.append((Mux(half, lo_user | s.tuser, s.tuser), o.tuser))
        skid_buffer(m, "wide", emit, emit_ready, o.tvalid, o.tready, fields)
        with m.If(s.tvalid & s.tready):
            with m.If(half | s.tlast):
                m.d.sync += half.eq(0)
            with m.Else():
                m.d.sync += [half.eq(1), lo_data.eq(s.tdata), lo_keep.eq(s.tkeep)]
                if self.user_width:
                    m.d.sync += lo_user.eq(s.tuser)
        return m


class StreamDownsizer(wiring.Component):
    """``s_axis`` (``2 * width``) → ``m_axis`` (``width``): each wide beat leaves as its low half, then its high
    half if that holds any byte. Puts out a beat every cycle (the next wide beat is taken as the last half
    of this one leaves): the held beat's halves are chosen by a flip-flop, and ``s_axis.tready`` follows
    ``m_axis.tready`` without one."""

    def __init__(self, width: int, user_width: int = 0):
        self.width, self.user_width = width, user_width
        super().__init__({"s_axis": In(AxiStreamSignature(2 * width, user_width)),
                          "m_axis": Out(AxiStreamSignature(width, user_width))})

    def elaborate(self, platform):
        m = Module()
        s, o = self.s_axis, self.m_axis
        W, K = self.width, self.width // 8
        full, phase = Signal(), Signal()                    # a wide beat is held; its high half is next
        data, keep, last = Signal(2 * W), Signal(2 * K), Signal()
        user = Signal(self.user_width) if self.user_width else None
        has_high = keep[K].bool()                            # tkeep is contiguous: byte K kept = high half used
        final = phase | ~has_high                            # the half leaving now is the wide beat's last
        m.d.comb += [
            o.tvalid.eq(full),
            o.tdata.eq(Mux(phase, data[W:], data[:W])),
            o.tkeep.eq(Mux(phase, keep[K:], keep[:K])),
            o.tlast.eq(last & final),
            s.tready.eq(~full | (o.tready & final)),
        ]
        if self.user_width:
            m.d.comb += o.tuser.eq(user)
        with m.If(full & o.tready):
            m.d.sync += phase.eq(~final)
            with m.If(final):
                m.d.sync += full.eq(0)
        with m.If(s.tvalid & s.tready):
            m.d.sync += [full.eq(1), phase.eq(0), data.eq(s.tdata), keep.eq(s.tkeep), last.eq(s.tlast)]
            if self.user_width:
                m.d.sync += user.eq(s.tuser)
        return m
