"""Byte gearboxes between variable-size chunks and dense W-bit AXI-Stream beats."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature, keep_bits, keep_count, keep_mask


class ChunkSignature(wiring.Signature):
    """``count`` valid bytes (from byte 0) of ``data``; ``last`` ends a packet; optional ``user``."""

    def __init__(self, nbytes: int, user_width: int = 0):
        self.nbytes = nbytes
        members = {"data": Out(8 * nbytes), "count": Out(range(nbytes + 1)), "last": Out(1),
                   "valid": Out(1), "ready": In(1)}
        if user_width:
            members["user"] = Out(user_width)
        super().__init__(members)


def byte_mask(count, nbytes):
    """``nbytes`` bytes of ones in the low ``count`` bytes, zeros above (to clear what a chunk does not hold)."""
    return Cat(*[b.replicate(8) for b in keep_bits(count, nbytes)])


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
    new beat. The bytes of ``s.data`` past ``s.count`` must be zero (the producer clears them with
    :func:`byte_mask` where it has time to spare: here they would lengthen the insertion's path).
    Latency 1 cycle. Accepts a chunk every cycle while the output takes beats, across packet
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
        # comparisons of the level, registered: each candidate next level is compared before the handshake
        # picks one, so the path from the handshake to the registers is a few multiplexers long
        full, one_beat, empty, room = Signal(), Signal(init=1), Signal(init=1), Signal(init=1)

        def set_level(value):
            return [level.eq(value), full.eq(value >= OUT), one_beat.eq(value <= OUT), empty.eq(value == 0),
                    room.eq(value <= cap - IN)]

        m.d.comb += [
            o.tvalid.eq(full | (flush & ~empty)),
            o.tdata.eq(buf[:8 * OUT]),
            o.tkeep.eq(keep_mask(level, OUT)),
            o.tlast.eq(flush & one_beat),
        ]
        emit = o.tvalid & o.tready
        # the packet being flushed is done: its last beat leaves now (or it had no bytes)
        drain = Signal()
        m.d.comb += drain.eq(flush & ((emit & one_beat) | empty))
        # while a packet end flushes, the next packet's first chunk waits in ``hold`` (the input never
        # stalls for a flush of two beats); at the drain it enters the buffer, with the chunk after it
        hold = Signal(8 * IN)
        hold_count = Signal(range(IN + 1))
        hold_last = Signal()
        hold_valid = Signal()
        m.d.comb += s.ready.eq(Mux(flush, drain | ~hold_valid, room))
        take = s.valid & s.ready
        # the chunk goes in at the registered level, then the beat that leaves (if one does) shifts out:
        # the shifter's amount never waits on m_axis.tready
        merged = Signal(8 * cap)
        m.d.comb += merged.eq(buf | (s.data << Cat(C(0, 3), level)))
        after_beat = Mux(full & ~one_beat, level - OUT, 0)      # the level once a beat has left
        with m.If(drain & hold_valid):
            m.d.sync += [flush.eq(hold_last), hold_valid.eq(0)]
            with m.If(take & ~hold_last):       # the held packet goes on: the new chunk follows it
                m.d.sync += [buf.eq(hold | (s.data << Cat(C(0, 3), hold_count))), flush.eq(s.last)]
                m.d.sync += set_level(hold_count + s.count)
            with m.Else():
                m.d.sync += buf.eq(hold)
                m.d.sync += set_level(hold_count)
            with m.If(take & hold_last):        # a one-chunk packet: the new chunk is the next one held
                m.d.sync += [hold.eq(s.data), hold_count.eq(s.count), hold_last.eq(s.last), hold_valid.eq(1)]
        with m.Elif(take & flush & ~drain):
            m.d.sync += [hold.eq(s.data), hold_count.eq(s.count), hold_last.eq(s.last), hold_valid.eq(1)]
            with m.If(emit):
                m.d.sync += buf.eq(buf >> (8 * OUT))
                m.d.sync += set_level(after_beat)
        with m.Elif(take & drain):              # the packet before is out: this one starts a new beat
            m.d.sync += [buf.eq(s.data), flush.eq(s.last)]
            m.d.sync += set_level(s.count)
        with m.Elif(take):                      # not flushing: a beat leaves only from a full one
            m.d.sync += flush.eq(s.last)
            with m.If(emit):
                m.d.sync += buf.eq(merged >> (8 * OUT))
                m.d.sync += set_level(level + s.count - OUT)
            with m.Else():
                m.d.sync += buf.eq(merged)
                m.d.sync += set_level(level + s.count)
        with m.Else():
            with m.If(emit):
                m.d.sync += buf.eq(buf >> (8 * OUT))
                m.d.sync += set_level(after_beat)
            with m.If(drain):
                m.d.sync += flush.eq(0)
        return m


class ByteUnpacker(wiring.Component):
    """Dense ``in_bytes``-byte AXI-Stream beats -> chunks of ``take`` bytes (``take`` <= ``out_bytes``,
    set per packet), the last chunk of a packet holding what remains.

    ``s_axis.tuser`` of a packet's first beat is carried on every chunk of that packet as ``m.user``.
    Latency 1 cycle; one chunk per cycle while bytes last; after a packet's last beat, input waits until
    the packet's last chunk leaves and takes the next packet's first beat in that same cycle. ``m.valid``
    comes from registers; ``s_axis.tready`` depends on ``m.ready`` only at a packet end. ``take`` is
    sampled with a packet's first beat, as ``tuser`` is, and holds for that packet.
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
        s, o = self.s_axis, self.m
        take = Signal.like(self.take)
        buf = Signal(8 * cap)
        level = Signal(range(cap + 1))
        ending = Signal()
        first = Signal(init=1)
        user = Signal(len(o.user))
        # comparisons of the level, registered (as in BytePacker): each candidate next level is compared
        # before the handshake picks one
        chunk, last_chunk, empty, room = Signal(), Signal(init=1), Signal(init=1), Signal(init=1)

        accept = s.tvalid & s.tready
        m.d.sync += take.eq(Mux(accept & first, self.take, take))   # the packet's take, from its first beat on

        # ``after``: the level once a chunk has left, level - take, kept beside the level (signed: below a
        # whole chunk it is negative), so that no sum of the next level waits on another: each is one
        # addition of registers and the beat's byte count (a new packet's: its count less the new take)
        after = Signal(range(-OUT, cap + 1))

        def set_level(level_next, after_next):
            # the flags from the two sums: a chunk is whole when ``after`` >= 0, the last when <= 0
            a = Signal.like(after, name="after_next")
            m.d.comb += a.eq(after_next)
            return [level.eq(level_next), after.eq(a), chunk.eq(~a[-1]), last_chunk.eq(a[-1] | (a == 0)),
                    empty.eq(level_next == 0), room.eq(level_next <= cap - IN)]

        m.d.comb += [
            o.valid.eq(chunk | (ending & ~empty)),
            o.data.eq(buf[:8 * OUT]),
            o.count.eq(Mux(last_chunk, level, take)),
            o.last.eq(ending & last_chunk),
            o.user.eq(user),
        ]
        emit = o.valid & o.ready
        # a packet's first beat may enter in the cycle its predecessor's last chunk leaves
        m.d.comb += s.tready.eq(Mux(ending, emit & o.last, room))
        count = keep_count(m, s.tkeep, "in_count")
        # the beat goes in at the registered level (every cycle: the bytes above the level are don't-cares,
        # masked off by byte_mask,
        # so a beat that is not taken leaves nothing that counts), then the chunk that leaves (if one does)
        # shifts out: one shifter each way, their amounts registered
        data = Signal(8 * IN)
        m.d.comb += data.eq(s.tdata & Cat(*[k.replicate(8) for k in s.tkeep]))
        # with or without a chunk leaving, in parallel: the shifters' amounts are all registers
        stay = Signal(8 * cap)
        m.d.comb += stay.eq((buf & byte_mask(level, cap)) | (data << Cat(C(0, 3), level)))
        move = Signal(8 * cap)
        shift = after[:len(level)]              # (where a chunk leaves, ``after`` is not negative)
        m.d.comb += move.eq(((buf >> Cat(C(0, 3), take)) & byte_mask(shift, cap)) | (data << Cat(C(0, 3), shift)))
        with m.If(accept & ending):             # the packet before has left: this one starts afresh
            m.d.sync += buf.eq(data)
        with m.Elif(emit):
            m.d.sync += buf.eq(move)
        with m.Else():
            m.d.sync += buf.eq(stay)
        # Between packets (``first`` and not ``ending``) the level is 0 and no chunk can leave, and a packet's
        # last beat sets ``first`` with ``ending``: so a first beat is new (the take is the new one) exactly
        # where it meets an empty buffer, and a chunk leaves only at the packet's own take.
        with m.If(accept):
            m.d.sync += [ending.eq(s.tlast), first.eq(s.tlast)]
            with m.If(first):
                m.d.sync += user.eq(s.tuser)
            with m.If(ending | first):          # a packet starts in an empty buffer
                m.d.sync += set_level(count, count - self.take)
            with m.Elif(emit):                  # not ending: a chunk leaves only whole
                m.d.sync += set_level(after + count, after + (count - take))
            with m.Else():
                m.d.sync += set_level(level + count, after + count)
        with m.Else():
            with m.If(emit):
                m.d.sync += set_level(Mux(last_chunk, 0, after), Mux(last_chunk, -take, after - take))
            with m.If((emit & o.last) | (ending & empty)):
                m.d.sync += ending.eq(0)
        return m
