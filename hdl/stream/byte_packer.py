"""Byte gearboxes between variable-size chunks and dense W-bit AXI-Stream beats."""

from types import SimpleNamespace

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature, keep_bits, keep_count, keep_mask
from hdl.stream.credit_buffer import CreditBuffer
from hdl.stream.pipeline import delay, register
from hdl.stream.register_slice import skid_buffer


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

    A packet's bytes are concatenated; its last beat is partial (``tkeep``, the bytes past it zero) and the
    next packet starts a new beat. The bytes of ``s.data`` past ``s.count`` are not written (any value). Accepts a chunk
    every cycle while the output takes beats, across packet ends too. ``m_axis.tvalid`` and ``s.ready`` come
    from registers.

    A ring of ``slots`` output beats between a pipeline in and a register slice out, so that every path is a
    few levels deep:

    * in (2 stages): the chunk and its keep bits; then its bytes moved to their place in the ring (each
      chunk's place is known as it enters: the sum of the counts before it, a packet's first chunk at the
      next beat), the beats it completes and, for a packet's last chunk, the last beat's bytes;
    * control: the ring takes the chunk where the ring has room (one compare of registers); a completed beat
      leaves at the read slot (the slot's data, and the keep bits kept for it) into the output's register
      slice. Latency from a chunk's entry to the beat it completes: 4 cycles.
    """

    def __init__(self, in_bytes: int, out_bytes: int):
        self.in_bytes, self.out_bytes = in_bytes, out_bytes
        super().__init__({"s": In(ChunkSignature(in_bytes)), "m_axis": Out(AxiStreamSignature(8 * out_bytes))})

    def elaborate(self, platform):
        m = Module()
        IN, OUT = self.in_bytes, self.out_bytes
        assert OUT & (OUT - 1) == 0 and OUT >= 8, "the beat is a power of two bytes, 8 or more"
        span = -(-IN // OUT) + 1                         # slots a chunk touches, at most
        S = 1 << (span + 1).bit_length()                 # slots (a power of two): a chunk's, the skip, one to read
        cap = S * OUT
        cbits = cap.bit_length() - 1
        obits = OUT.bit_length() - 1
        s, o = self.s, self.m_axis
        # positions in the ring count on past its size (the ring is the low ``cbits``): the head less the tail
        # is what the ring holds, up to ``cap``
        POS = cbits + 2
        LIMIT = cap - IN - OUT                           # the ring takes a chunk while it holds at most this

        # -- in, stage 1: the chunk and its keep bits --------------------------------------------------------
        a = SimpleNamespace(valid=Signal(), ready=Signal(), data=Signal(8 * IN), keep=Signal(IN),
                            count=Signal(range(IN + 1)), last=Signal())
        skid_buffer(m, "chunk", s.valid, s.ready, a.valid, a.ready,
                    [(s.data, a.data), (keep_mask(s.count, IN), a.keep), (s.count, a.count), (s.last, a.last)])
        # -- in, stage 2: the bytes moved to their place, what the chunk completes -----------------------------
        place = Signal(POS)                 # where the chunk in stage 1 goes
        end = Signal(POS)
        m.d.comb += end.eq(place + a.count)
        up = Signal(POS)                    # the end rounded up to a beat: the next packet's place
        m.d.comb += up.eq((end + OUT - 1) & ~(OUT - 1) & ((1 << POS) - 1))
        nxt = Mux(a.last, up, end)
        with m.If(a.valid & a.ready):
            m.d.sync += place.eq(nxt)
        moved, moved_keep = moved_up(a.data, a.keep, IN, place[:3])
        # beats completed: every slot the chunk's end passes; a packet's last chunk also the one it ends in
        done = Signal(range(span + 2))
        m.d.comb += done.eq((nxt >> obits) - (place >> obits))
        tail = Signal(range(OUT + 1))       # the last beat's bytes (a last chunk): from its slot's start
        m.d.comb += tail.eq(end - ((end - 1) & ~(OUT - 1)))
        b = SimpleNamespace(valid=Signal(), ready=Signal(), data=Signal(len(moved)), keep=Signal(len(moved_keep)),
                            group=Signal(len(ring_sources(place[3:cbits], cap // 8))), done=Signal.like(done),
                            last=Signal(), any=Signal(),
                            tail_slot=Signal(range(S)), tail_keep=Signal(OUT), adv=Signal(range(IN + OUT + 1)),
                            adv_out=Signal(range(-OUT, IN + 1)))
        skid_buffer(m, "placed", a.valid, a.ready, b.valid, b.ready,
                    [(moved, b.data), (moved_keep, b.keep), (ring_sources(place[3:cbits], cap // 8), b.group),
                     (done, b.done),
                     (a.last, b.last), (a.count != 0, b.any), (((end - 1) >> obits)[:len(b.tail_slot)], b.tail_slot),
                     (keep_mask(tail, OUT), b.tail_keep),
                     # how far the chunk moves the ring's head (its count, and a last chunk's skip to a beat)
                     ((nxt - place)[:len(b.adv)], b.adv), ((nxt - place)[:len(b.adv)] - OUT, b.adv_out)])

        # -- control ---------------------------------------------------------------------------------------
        ring = Signal(8 * cap)
        # what the ring holds (written and not yet read, skips included) less LIMIT + 1: the ring takes a
        # chunk while this is negative
        OCC = range(-(LIMIT + 1) - OUT - 1, cap + IN + OUT + 1)
        held = Signal(OCC, init=-(LIMIT + 1))
        room = Signal(init=1)
        ready_beats = Signal(range(S + 1))
        has_beat = Signal()
        slot_keep = [Signal(OUT, init=(1 << OUT) - 1, name=f"slot_keep{k}") for k in range(S)]
        slot_last = [Signal(name=f"slot_last{k}") for k in range(S)]
        rslot = Signal(range(S))
        accept = b.valid & room
        m.d.comb += b.ready.eq(room)
        write_ring(m, ring, b.data, b.keep, b.group, accept, "ring")
        # out: the read slot's beat, its keep bits and last flag, into a register slice
        out_ready = Signal()
        emit = has_beat & out_ready
        keep = Signal(OUT)
        m.d.comb += keep.eq(pick(slot_keep, rslot, OUT))
        beat = pick([ring[8 * OUT * k:8 * OUT * (k + 1)] for k in range(S)], rslot, 8 * OUT)
        skid_buffer(m, "out", has_beat, out_ready, o.tvalid, o.tready,
                    [(beat & Cat(*[k.replicate(8) for k in keep]), o.tdata), (keep, o.tkeep),
                     (pick(slot_last, rslot, 1), o.tlast)])
        with m.If(accept & b.last & b.any):
            for k in range(S):
                with m.If(b.tail_slot == k):
                    m.d.sync += [slot_keep[k].eq(b.tail_keep), slot_last[k].eq(1)]
        with m.If(emit):
            m.d.sync += rslot.eq(rslot + 1)
            for k in range(S):
                with m.If(rslot == k):
                    m.d.sync += [slot_keep[k].eq((1 << OUT) - 1), slot_last[k].eq(0)]
        # the counts, and the flags from them for the next cycle (each one sum of registers)
        new_ready = Signal.like(ready_beats)
        m.d.comb += new_ready.eq(ready_beats + Mux(accept, b.done, 0) - emit)
        m.d.sync += [ready_beats.eq(new_ready), has_beat.eq(new_ready != 0)]
        new_held = Signal(OCC)
        with m.If(accept):
            m.d.comb += new_held.eq(Mux(emit, held + b.adv_out, held + b.adv))
        with m.Else():
            m.d.comb += new_held.eq(Mux(emit, held - OUT, held))
        m.d.sync += [held.eq(new_held), room.eq(new_held < 0)]
        return m


def pick(candidates, index, width: int):
    """``candidates[index]`` (each ``width`` bits, ``index`` a Value): one multiplexer of len(candidates)
    inputs a bit, which maps to a LUT and the wide multiplexers behind it (a shifter of the same function
    maps to a stage a bit of the index)."""
    if len(candidates) == 1:
        return candidates[0]
    return Cat(*candidates).word_select(index, width)


def moved_up(data, keep, nbytes: int, fine):
    """The first step of writing ``nbytes`` bytes (``data``, their ``keep`` bits) into a ring at a byte
    place: moved up by the place's low 3 bits (``fine``), into whole 8-byte groups (:func:`write_ring` puts
    group g at the place's group + g). Returns (bytes, keep bits)."""
    groups = -(-(nbytes + 8) // 8)
    d = [data[8 * i:8 * (i + 1)] for i in range(nbytes)]
    moved = Cat(*[pick([d[u - k] if 0 <= u - k < nbytes else C(0, 8) for k in range(8)], fine, 8)
                  for u in range(8 * groups)])
    moved_keep = Cat(*[pick([keep[u - k] if 0 <= u - k < nbytes else C(0, 1) for k in range(8)], fine, 1)
                       for u in range(8 * groups)])
    return moved, moved_keep


def ring_sources(group, G: int):
    """For each of the ring's G 8-byte groups, which of a write's groups lands on it ((J - ``group``) mod G,
    ``group`` the write's start): found a stage ahead and registered (:func:`write_ring`'s ``at``), so that
    the ring's multiplexers select on flip-flops."""
    bits = max(1, (G - 1).bit_length())
    return Cat(*[(J - group)[:bits] for J in range(G)])


def write_ring(m, ring, data, keep, at, enable, name: str):
    """The second step: ``ring`` (a Signal of G 8-byte groups) takes the groups of ``data`` (:func:`moved_up`'s,
    in a register) where their ``keep`` bits are set, group g at ring group (start + g) mod G (``at``:
    :func:`ring_sources`, registered), when ``enable``: each ring group picks one of the data's groups (a
    multiplexer of G inputs a bit, most of them constant) with its byte enables."""
    G, EG = len(ring) // 64, len(data) // 64
    bits = len(at) // G
    new, en = [], []
    for J in range(G):
        src = at[bits * J:bits * (J + 1)]
        new.append(pick([data[64 * g:64 * (g + 1)] if g < EG else C(0, 64) for g in range(G)], src, 64))
        e = Signal(8, name=f"{name}_en{J}")         # (a signal: a bit of an expression re-emits the expression)
        m.d.comb += e.eq(pick([keep[8 * g:8 * (g + 1)] if g < EG else C(0, 8) for g in range(G)], src, 8))
        e8 = Signal(64, name=f"{name}_bits{J}")     # (a signal a group: one short line of Verilog each)
        m.d.comb += e8.eq(Cat(*[e[i].replicate(8) for i in range(8)]))
        en.append(e8)
    en8 = Cat(*en)
    with m.If(enable):
        m.d.sync += ring.eq((ring & ~en8) | (Cat(*new) & en8))


class ByteUnpacker(wiring.Component):
    """Dense ``in_bytes``-byte AXI-Stream beats -> chunks of ``take`` bytes (``take`` <= ``out_bytes``,
    set per packet), the last chunk of a packet holding what remains (the bytes past its count zero).

    ``s_axis.tuser`` of a packet's first beat is carried on every chunk of that packet as ``m.user``.
    ``take`` is sampled with a packet's first beat, as ``tuser`` is, and holds for that packet. One chunk per
    cycle while bytes last; after a packet's last beat, the next packet's beats wait until that packet's last
    chunk is cut. ``m.valid`` and ``s_axis.tready`` come from registers.

    A ring of ``cap`` bytes (a power of two, at least a beat and two chunks) between two pipelines, so that no
    data path passes through the control that decides it and every path is a few levels deep:

    * in (3 stages): the beat (its byte count from ``tkeep``); its bytes rotated to where they go in the ring
      (each beat's place is known as it enters: the sum of the counts before it) with their byte enables, and
      the sums the control compares; then the control takes it into the ring;
    * control: the level, ``after`` (the level less the take) and four flags (a whole chunk, the last one,
      empty, room for a beat), each flag the sign of one sum of two registers; a chunk is cut at the read
      pointer, within the credits of the output buffer;
    * out (2 stages, then the buffer): the 8-byte-aligned window of the ring at the read pointer, then the
      chunk from the window; latency from the control's cut to ``m`` 3 cycles.
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
        assert IN & (IN - 1) == 0, "the beat is a power of two bytes"
        cap = 1 << (IN + 2 * OUT - 1).bit_length()      # refill while two chunks are left: the output never starves
        ROOM = cap - IN                                  # a beat fits while the level is at most this
        s, o = self.s_axis, self.m
        uw = len(o.user)
        cbits = cap.bit_length() - 1
        # every sum below fits this signed width: the level and ``after`` lie in [-OUT, cap], a count in [0, IN]
        SUM = range(-(cap + 2 * OUT + IN + 2), cap + 2 * OUT + IN + 2)

        # -- in, stage 1: the beat, its byte count and the packet's take -------------------------------------
        in_first, in_take = Signal(init=1), Signal.like(self.take)
        beat_take = Mux(in_first, self.take, in_take)
        with m.If(s.tvalid & s.tready):
            m.d.sync += [in_first.eq(s.tlast), in_take.eq(beat_take)]
        a = SimpleNamespace(valid=Signal(), ready=Signal(), data=Signal(8 * IN), keep=Signal(IN),
                            count=Signal(range(IN + 1)), last=Signal(), user=Signal(uw), take=Signal.like(self.take))
        skid_buffer(m, "beat", s.tvalid, s.tready, a.valid, a.ready,
                    [(s.tdata, a.data), (s.tkeep, a.keep), (keep_count(m, s.tkeep, "in_count"), a.count),
                     (s.tlast, a.last), (s.tuser, a.user), (beat_take, a.take)])
        # -- in, stage 2: the bytes rotated to their place in the ring, the ring's byte enables, the sums ------
        place = Signal(cbits)               # where the beat in stage 1 goes: the counts of the beats before it
        with m.If(a.valid & a.ready):
            m.d.sync += place.eq(place + a.count)
        moved, moved_keep = moved_up(a.data, a.keep, IN, place[:3])
        names = ("ntake", "ntake1", "c_t", "c_t1", "c_m1", "c_room")
        b = SimpleNamespace(valid=Signal(), ready=Signal(), data=Signal(len(moved)), keep=Signal(len(moved_keep)),
                            group=Signal(len(ring_sources(place[3:], cap // 8))),
                            count=Signal(range(IN + 1)), last=Signal(), user=Signal(uw), take=Signal.like(self.take),
                            **{n: Signal(SUM, name=f"pre_{n}") for n in names})
        sums = {"ntake": -a.take, "ntake1": -a.take - 1, "c_t": a.count - a.take, "c_t1": a.count - a.take - 1,
                "c_m1": a.count - 1, "c_room": a.count - (ROOM + 1)}
        skid_buffer(m, "placed", a.valid, a.ready, b.valid, b.ready,
                    [(moved, b.data), (moved_keep, b.keep), (ring_sources(place[3:], cap // 8), b.group)]
                    + [(getattr(a, n), getattr(b, n)) for n in ("count", "last", "user", "take")]
                    + [(sums[n], getattr(b, n)) for n in names])

        # -- control --------------------------------------------------------------------------------------
        ring = Signal(8 * cap)
        take, ntake, ntake1 = Signal.like(self.take), Signal(SUM), Signal(SUM)
        level = Signal(range(cap + 1))
        rp = Signal(cbits)
        ending = Signal()
        first = Signal(init=1)
        user = Signal(uw)
        # ``after``: the level once a chunk has left, level - take (signed: below a whole chunk it is negative)
        after = Signal(range(-OUT, cap + 1))
        chunk, last_chunk, empty, room = Signal(), Signal(init=1), Signal(init=1), Signal(init=1)
        # the output buffer, behind the two stages of the read
        READ = 2
        m.submodules.out = out = CreditBuffer(8 * OUT + len(o.count) + 1 + uw, READ)

        def neg(*terms):
            """Whether the sum of ``terms`` (registers) is negative: one adder and its sign."""
            t = Signal(SUM)
            m.d.comb += t.eq(sum(terms))
            return t[-1]

        def set_level(level_next, after_next, flags):
            """The next level, ``after`` and the flags (chunk, last_chunk, empty, room) as ``neg`` found them."""
            return [level.eq(level_next), after.eq(after_next), chunk.eq(flags[0]), last_chunk.eq(flags[1]),
                    empty.eq(flags[2]), room.eq(flags[3])]

        cut_valid = chunk | (ending & ~empty)
        cut = cut_valid & out.ready
        cut_count = Signal.like(o.count)       # (the last chunk's level is at most the take)
        m.d.comb += cut_count.eq(Mux(last_chunk, level, take))
        cut_last = ending & last_chunk
        # a packet's first beat may enter in the cycle its predecessor's last chunk is cut
        m.d.comb += b.ready.eq(Mux(ending, cut & last_chunk, room))
        accept = b.valid & b.ready
        write_ring(m, ring, b.data, b.keep, b.group, accept, "ring")
        with m.If(cut):
            m.d.sync += rp.eq(rp + cut_count)
        # Between packets (``first`` and not ``ending``) the level is 0 and no chunk can be cut, and a packet's
        # last beat sets ``first`` with ``ending``: so a first beat is new (the take is the new one) exactly
        # where it meets an empty ring, and a chunk is cut only at the packet's own take.
        # Each flag: chunk = after >= 0, last_chunk = after <= 0, empty = level == 0, room = level <= ROOM.
        with m.If(accept):
            m.d.sync += [ending.eq(b.last), first.eq(b.last)]
            with m.If(first):
                m.d.sync += [user.eq(b.user), take.eq(b.take), ntake.eq(b.ntake), ntake1.eq(b.ntake1)]
            with m.If(ending | first):          # a packet starts in an empty ring
                m.d.sync += set_level(b.count, b.c_t, (~b.c_t[-1], b.c_t1[-1], b.c_m1[-1], b.c_room[-1]))
            with m.Elif(cut):                   # not ending: a chunk is cut only whole
                m.d.sync += set_level(after + b.count, after + b.c_t,
                                      (~neg(after, b.c_t), neg(after, b.c_t1), neg(after, b.c_m1),
                                       neg(after, b.c_room)))
            with m.Else():
                m.d.sync += set_level(level + b.count, after + b.count,
                                      (~neg(after, b.count), neg(after, b.c_m1), neg(level, b.c_m1),
                                       neg(level, b.c_room)))
        with m.Else():
            with m.If(cut):
                with m.If(last_chunk):
                    m.d.sync += set_level(0, ntake, (~ntake[-1], 1, 1, 1))
                with m.Else():
                    m.d.sync += set_level(after, after + ntake,
                                          (~neg(after, ntake), neg(after, ntake1), neg(after, -1),
                                           neg(after, -(ROOM + 1))))
            with m.If((cut & cut_last) | (ending & empty)):
                m.d.sync += ending.eq(0)

        # -- out: the ring's 8-byte-aligned window at the read pointer, then the chunk from it ----------------
        span = OUT + 7
        G = cap // 8
        r_groups = [ring[64 * h:64 * (h + 1)] for h in range(G)]
        window = Cat(*[pick([r_groups[(h + g) % G] for h in range(G)], rp[3:], 64)
                       for g in range(-(-span // 8))])
        w1 = register(m, window, "read_window")
        lo1 = register(m, rp[:3], "read_offset")
        side1 = register(m, Cat(cut_count, cut_last, user), "read_side")
        w_bytes = [w1[8 * i:8 * (i + 1)] for i in range(len(w1) // 8)]
        picked = Cat(*[pick([w_bytes[i + k] for k in range(8)], lo1, 8) for i in range(OUT)])
        count1 = side1[:len(o.count)]
        m.d.comb += [out.enter.eq(cut), out.p_valid.eq(delay(m, cut, READ, "read_valid", reset=True)),
                     out.p_data.eq(register(m, Cat(picked & byte_mask(count1, OUT), side1), "read_chunk")),
                     o.valid.eq(out.m_valid), out.m_ready.eq(o.ready),
                     o.data.eq(out.m_data[:8 * OUT]), o.count.eq(out.m_data[8 * OUT:8 * OUT + len(o.count)]),
                     o.last.eq(out.m_data[8 * OUT + len(o.count)]), o.user.eq(out.m_data[8 * OUT + len(o.count) + 1:])]
        return m
