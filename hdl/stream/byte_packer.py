"""Byte gearboxes between variable-size chunks and dense W-bit AXI-Stream beats."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature, keep_count, keep_mask


class ChunkSignature(wiring.Signature):
    """``count`` valid bytes (from byte 0) of ``data``; ``last`` ends a packet; optional ``user``."""

    def __init__(self, nbytes: int, user_width: int = 0):
        self.nbytes = nbytes
        members = {"data": Out(8 * nbytes), "count": Out(range(nbytes + 1)), "last": Out(1),
                   "valid": Out(1), "ready": In(1)}
        if user_width:
            members["user"] = Out(user_width)
        super().__init__(members)


def _byte_mask(count, nbytes):
    return Cat(*[b.replicate(8) for b in keep_mask(count, nbytes)])


class ChunkRegister(wiring.Component):
    """A pipeline register for a chunk stream: latency 1 cycle, one chunk per cycle.

    It cuts the combinational path from a chunk's producer to its consumer in the data direction;
    ``s.ready`` is ``~full | m.ready``.
    """

    def __init__(self, nbytes: int):
        super().__init__({"s": In(ChunkSignature(nbytes)), "m": Out(ChunkSignature(nbytes))})

    def elaborate(self, platform):
        m = Module()
        s, o = self.s, self.m
        m.d.comb += s.ready.eq(~o.valid | o.ready)
        with m.If(s.ready):
            m.d.sync += [o.valid.eq(s.valid), o.data.eq(s.data), o.count.eq(s.count), o.last.eq(s.last)]
        return m


class BytePacker(wiring.Component):
    """Chunks of up to ``in_bytes`` bytes -> densely packed ``out_bytes``-byte AXI-Stream beats.

    A packet's bytes are concatenated; its last beat is partial (``tkeep``) and the next packet starts a
    new beat. Latency 1 cycle. Accepts a chunk every cycle while the output takes beats, across packet
    ends too: while a packet's last beats flush, the next packet's first chunk waits in a hold register and
    enters the buffer, with the chunk after it, in the cycle the last beat leaves. ``m_axis.tvalid`` comes
    from registers; ``s.ready`` depends on ``m_axis.tready`` only while a packet end is being flushed.
    """

    def __init__(self, in_bytes: int, out_bytes: int):
        self.in_bytes, self.out_bytes = in_bytes, out_bytes
        super().__init__({"s": In(ChunkSignature(in_bytes)), "m_axis": Out(AxiStreamSignature(8 * out_bytes))})

    def elaborate(self, platform):
        m = Module()
        IN, OUT = self.in_bytes, self.out_bytes
        cap = OUT + 2 * IN          # room for a chunk on top of a full beat plus a partial one: no bubbles
        s, o = self.s, self.m_axis
        buf = Signal(8 * cap)
        level = Signal(range(cap + 1))
        flush = Signal()
        m.d.comb += [
            o.tvalid.eq((level >= OUT) | (flush & (level != 0))),
            o.tdata.eq(buf[:8 * OUT]),
            o.tkeep.eq(keep_mask(level, OUT)),
            o.tlast.eq(flush & (level <= OUT)),
        ]
        emit = o.tvalid & o.tready
        # the packet being flushed is done: its last beat leaves now (or it had no bytes)
        drain = Signal()
        m.d.comb += drain.eq(flush & ((emit & o.tlast) | (level == 0)))
        # while a packet end flushes, the next packet's first chunk waits in ``hold`` (the input never
        # stalls for a flush of two beats); at the drain it enters the buffer, with the chunk after it
        hold = Signal(8 * IN)
        hold_count = Signal(range(IN + 1))
        hold_last = Signal()
        hold_valid = Signal()
        m.d.comb += s.ready.eq(Mux(flush, drain | ~hold_valid, level <= cap - IN))
        take = s.valid & s.ready
        shifted = Signal(8 * cap)
        lvl1 = Signal(range(cap + 1))
        m.d.comb += [
            shifted.eq(Mux(emit, buf >> (8 * OUT), buf)),
            lvl1.eq(Mux(emit, Mux(level > OUT, level - OUT, 0), level)),
        ]
        masked = Signal(8 * IN)
        m.d.comb += masked.eq(s.data & _byte_mask(s.count, IN))
        insert = Signal(8 * cap)
        m.d.comb += insert.eq(masked << Cat(C(0, 3), lvl1))
        with m.If(drain & hold_valid):
            after = take & ~hold_last          # the held packet goes on: the new chunk follows it
            m.d.sync += [
                buf.eq(hold | Mux(after, masked << Cat(C(0, 3), hold_count), 0)),
                level.eq(hold_count + Mux(after, s.count, 0)),
                flush.eq(hold_last | (after & s.last)),
                hold_valid.eq(take & hold_last),
            ]
            with m.If(take & hold_last):        # a one-chunk packet: the new chunk is the next one held
                m.d.sync += [hold.eq(masked), hold_count.eq(s.count), hold_last.eq(s.last)]
        with m.Elif(take & flush & ~drain):
            m.d.sync += [buf.eq(shifted), level.eq(lvl1),
                         hold.eq(masked), hold_count.eq(s.count), hold_last.eq(s.last), hold_valid.eq(1)]
        with m.Elif(take):
            m.d.sync += [buf.eq(shifted | insert), level.eq(lvl1 + s.count), flush.eq(s.last)]
        with m.Else():
            m.d.sync += [buf.eq(shifted), level.eq(lvl1)]
            with m.If(drain):
                m.d.sync += flush.eq(0)
        return m


class ByteUnpacker(wiring.Component):
    """Dense ``in_bytes``-byte AXI-Stream beats -> chunks of ``take`` bytes (``take`` <= ``out_bytes``,
    set per packet), the last chunk of a packet holding what remains.

    ``s_axis.tuser`` of a packet's first beat is carried on every chunk of that packet as ``m.user``.
    Latency 1 cycle; one chunk per cycle while bytes last; after a packet's last beat, input waits until
    the packet's last chunk leaves and takes the next packet's first beat in that same cycle. ``m.valid``
    comes from registers; ``s_axis.tready`` depends on ``m.ready`` only at a packet end.
    """

    def __init__(self, in_bytes: int, out_bytes: int, user_width: int = 16):
        self.in_bytes, self.out_bytes = in_bytes, out_bytes
        super().__init__({
            "s_axis": In(AxiStreamSignature(8 * in_bytes, user_width)),
            "m": Out(ChunkSignature(out_bytes, user_width)),
            "take": In(range(out_bytes + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        IN, OUT = self.in_bytes, self.out_bytes
        cap = IN + 2 * OUT          # refill while at least two chunks are left: the output never starves
        s, o, take = self.s_axis, self.m, self.take
        buf = Signal(8 * cap)
        level = Signal(range(cap + 1))
        ending = Signal()
        first = Signal(init=1)
        user = Signal(len(o.user))
        m.d.comb += [
            o.valid.eq((level >= take) | (ending & (level != 0))),
            o.data.eq(buf[:8 * OUT]),
            o.count.eq(Mux(level < take, level, take)),
            o.last.eq(ending & (level <= take)),
            o.user.eq(user),
        ]
        emit = o.valid & o.ready
        # a packet's first beat may enter in the cycle its predecessor's last chunk leaves
        m.d.comb += s.tready.eq(Mux(ending, emit & o.last, level <= cap - IN))
        shifted = Signal(8 * cap)
        lvl1 = Signal(range(cap + 1))
        m.d.comb += [
            shifted.eq(Mux(emit, buf >> Cat(C(0, 3), take), buf)),
            lvl1.eq(Mux(emit, level - o.count, level)),
        ]
        count = keep_count(m, s.tkeep, "in_count")
        insert = Signal(8 * cap)
        m.d.comb += insert.eq((s.tdata & _byte_mask(count, IN)) << Cat(C(0, 3), lvl1))
        with m.If(s.tvalid & s.tready):
            m.d.sync += [buf.eq(shifted | insert), level.eq(lvl1 + count), ending.eq(s.tlast),
                         first.eq(s.tlast)]
            with m.If(first):
                m.d.sync += user.eq(s.tuser)
        with m.Else():
            m.d.sync += [buf.eq(shifted), level.eq(lvl1)]
            with m.If((emit & o.last) | (ending & (level == 0))):
                m.d.sync += ending.eq(0)
        return m
