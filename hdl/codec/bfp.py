"""Block floating point: 16 fp32 elements share one 8-bit exponent; each keeps a signed M-bit integer.

``encode``/``decode`` are combinational and bit-exact with ``host_driver.models.numerics.bfp_encode_blocks`` and
``bfp_decode_blocks``; :class:`BlockGather` and :class:`BlockScatter` convert between W-bit fp32 beats and
groups of whole 16-element (512-bit) blocks: below W = 512 a group is one block gathered from 512/W beats, at
W >= 512 it is one beat of W/512 blocks (:func:`group_blocks`).
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.codec.half_float import CANONICAL_NAN, rne_select
from hdl.stream.axis import AxiStreamSignature, check_width, keep_count
from hdl.stream.pipeline import delay, wire

BLOCK = 16
BLOCK_BITS = 32 * BLOCK


def group_blocks(width: int) -> int:
    """Blocks a transfer between the gather, the codecs and the scatter holds at width W: one beat's worth,
    at least one block."""
    return max(1, width // BLOCK_BITS)


def group_records(records, is8):
    """The byte stream of consecutive encoded records (each as :func:`encode` returns it): 17-byte records
    for bfp8, 9-byte for bfp4, packed back to back."""
    b8, b4 = block_bytes(8), block_bytes(4)
    return Mux(is8, Cat(*[r[:8 * b8] for r in records]), Cat(*[r[:8 * b4] for r in records]))


def split_records(data, is8, group):
    """The inverse of :func:`group_records`: the ``group`` records in ``data``, each as :func:`decode`
    reads it."""
    b8, b4 = block_bytes(8), block_bytes(4)
    return [Mux(is8, data[8 * b8 * i:8 * b8 * (i + 1)], data[8 * b4 * i:8 * b4 * (i + 1)]) for i in range(group)]


def block_bytes(m_bits: int) -> int:
    """Bytes of one encoded block: the exponent byte and 16 M-bit integers."""
    return 1 + BLOCK * m_bits // 8


def _max(m, values, name, levels, stage):
    """The maximum of ``values``: a tree of comparisons, ``stage`` after every ``levels`` of it."""
    depth = 0
    while len(values) > 1:
        nxt = []
        for i in range(0, len(values) - 1, 2):
            s = Signal(len(values[i]), name=f"{name}_{len(values)}_{i}")
            m.d.comb += s.eq(Mux(values[i] > values[i + 1], values[i], values[i + 1]))
            nxt.append(s)
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
        depth += 1
        if depth % levels == 0:
            values = [stage(m, v, f"{name}_{len(values)}_r{i}") for i, v in enumerate(values)]
    return values[0]


#: levels of the maximum tree between two of its registers (one compare and its multiplexer: 3 or 4 LUT levels)
MAX_TREE_LEVELS = 1
#: registers :func:`encode` puts between its input and its output when staged
ENCODE_STAGES = 2 + 4 // MAX_TREE_LEVELS


def encode(m, block, is8, name="bfp", stage=wire):
    """512-bit block of fp32 -> the encoded record (exponent byte, then 16 M-bit integers, element i at
    bits [M*i, M*(i+1))), M = 8 where ``is8`` else 4, as 17*8 bits (a bfp4 record uses the low 9 bytes).

    ``stage`` (hdl/stream/pipeline.py) cuts it into :data:`ENCODE_STAGES` pipeline stages: (1 .. 4) the
    block's exponent E, :data:`MAX_TREE_LEVELS` levels of the maximum tree each; then each element's shift;
    then the bits of its quotient, guard and sticky; the last stage rounds, saturates and signs. ``is8``
    travels with the block.

    One encoder serves both widths at run time (a per-codec copy would double the area, and Yosys'
    resource sharing spends minutes proving two exclusive copies shareable).
    """
    elems = [block[32 * i:32 * (i + 1)] for i in range(BLOCK)]
    exps = []
    for i, x in enumerate(elems):
        e = Signal(8, name=f"{name}_ex{i}")
        m.d.comb += e.eq(Mux(x[23:31] == 0, 1, x[23:31]))
        exps.append(e)
    E = _max(m, exps, f"{name}_max", MAX_TREE_LEVELS, stage)
    tree = ENCODE_STAGES - 2
    is8 = delay(m, is8, tree, f"{name}_is8", stage)
    # the elements and their exponents wait beside the tree
    elems = [delay(m, x, tree, f"{name}_x{i}", stage) for i, x in enumerate(elems)]
    exps = [delay(m, e, tree, f"{name}_e{i}", stage) for i, e in enumerate(exps)]
    # |x| / 2**(E-127-(M-2)) = m / 2**sh, sh = E - e + 25 - M >= 17; shift = sh - 17 (8 and more: 0)
    fields = []
    for i, x in enumerate(elems):
        d = Signal(8, name=f"{name}_d{i}")
        shift = Signal(4, name=f"{name}_sh{i}")
        m.d.comb += [d.eq(E - exps[i]),
                     shift.eq(Mux(is8, Mux(d > 8, 8, d[:4]), Mux(d > 4, 8, d[:3] + 4)))]
        fields.append((stage(m, Cat(x[:23], x[23:31] != 0), f"{name}_m{i}"), stage(m, shift, f"{name}_s{i}"),
                       stage(m, x[31], f"{name}_n{i}")))
    E, is8 = stage(m, E, f"{name}_E3"), delay(m, is8, 2, f"{name}_is8_4", stage)
    qs = []
    for i, (mag24, shift, neg) in enumerate(fields):
        # the quotient's bits, guard and sticky (rne_shift's selection), registered; then one adder rounds
        # and signs: -(q + up) = ~q + (1 - up), so the result is (q ^ neg) + (up ^ neg); up is dropped
        # where q is already qmax (saturation: only qmax rounded up would pass it)
        q7, guard, sticky = rne_select(m, mag24, 17, shift, 7, f"{name}_q{i}")
        q7, guard, sticky = stage(m, q7, f"{name}_sq{i}"), stage(m, guard, f"{name}_sg{i}"), stage(m, sticky, f"{name}_ss{i}")
        neg = stage(m, neg, f"{name}_n4{i}")
        at_max = Mux(is8, q7 == 127, q7 == 7)
        up = guard & (sticky | q7[0]) & ~at_max
        q = Signal(8, name=f"{name}_q{i}")
        m.d.comb += q.eq((Cat(q7, 0) ^ neg.replicate(8)) + (up ^ neg))
        qs.append(q)
    E = stage(m, E, f"{name}_E4")
    nonfinite = E == 0xFF
    return Mux(is8, Cat(E, *[Mux(nonfinite, 0, q[:8]) for q in qs]),
               Cat(E, *[Mux(nonfinite, 0, q[:4]) for q in qs]))


#: registers :func:`decode` puts between its input and its output when staged
DECODE_STAGES = 2


def decode(m, record, is8, name="bfpd", stage=wire):
    """Encoded record (as :func:`encode` lays it out) -> 512-bit block of fp32: q * 2**(E-127-(M-2));
    E = 255 -> canonical NaN for every element.

    ``stage`` cuts it into :data:`DECODE_STAGES` pipeline stages: (1) each magnitude |q| and the block's
    exponent terms, (2) the leading one of |q|, the exponent field and the subnormal shift; the last stage
    normalises and packs. ``is8`` is read in the first stage only."""
    mb = Mux(is8, 8, 4)
    E = record[:8]
    base = Signal(range(-8, 512), name=f"{name}_base")      # the field of an element whose leading one is bit 0
    ssh = Signal(5, name=f"{name}_ssh")
    m.d.comb += [base.eq(E + 2 - mb), ssh.eq((E + 24 - mb)[:5])]
    mags = []
    for i in range(BLOCK):
        q = Signal(8, name=f"{name}_q{i}")
        m.d.comb += q.eq(Mux(is8, record[8 + 8 * i:16 + 8 * i], record[8 + 4 * i:12 + 4 * i].as_signed()))
        a = Signal(8, name=f"{name}_a{i}")
        m.d.comb += a.eq(Mux(q[7], -q, q))
        mags.append((stage(m, a, f"{name}_a1{i}"), stage(m, q[7], f"{name}_n1{i}")))
    # an element is normal where its field base + p >= 1, p the position of its leading one: p >= 1 - base
    thr = Signal(4, name=f"{name}_thr")
    m.d.comb += thr.eq(Mux(base >= 1, 0, Mux(base <= -7, 8, (1 - base)[:4])))
    base, ssh = stage(m, base, f"{name}_base1").as_signed(), stage(m, ssh, f"{name}_ssh1")
    thr = stage(m, thr, f"{name}_thr1")
    nan = stage(m, E == 0xFF, f"{name}_nan1")
    fields = []
    for i, (a, neg) in enumerate(mags):
        p = Signal(3, name=f"{name}_p{i}")
        for b in range(8):
            with m.If(a[b]):
                m.d.comb += p.eq(b)
        field = Signal(range(-8, 512), name=f"{name}_field{i}")
        m.d.comb += field.eq(base + p)
        sub = (a << ssh)[:23]
        fields.append([stage(m, v, f"{name}_{k}2{i}") for k, v in
                       (("a", a), ("n", neg), ("p", p), ("f", field.as_unsigned()), ("s", sub), ("z", a == 0),
                        ("norm", p >= thr))])
    nan = stage(m, nan, f"{name}_nan2")
    outs = []
    for i, (a, neg, p, field, sub, zero, normal) in enumerate(fields):
        fsh = Signal(5, name=f"{name}_fsh{i}")
        m.d.comb += fsh.eq(23 - p)
        normal_frac = (a << fsh)[:23]
        out = Signal(32, name=f"{name}_o{i}")
        with m.If(nan):
            m.d.comb += out.eq(CANONICAL_NAN)
        with m.Elif(zero):
            m.d.comb += out.eq(0)
        with m.Elif(normal):
            m.d.comb += out.eq(Cat(normal_frac, field[:8], neg))
        with m.Else():
            m.d.comb += out.eq(Cat(sub, C(0, 8), neg))
        outs.append(out)
    return Cat(*outs)


class BlockSignature(wiring.Signature):
    """A group of whole blocks per transfer: ``data`` (``group`` blocks of 512 bits of fp32, block i at bits
    [512 i, 512 (i + 1))), ``blocks`` (how many of them hold elements, 1 .. group: fewer only at a packet's
    end), ``last`` (last group of the packet), ``user`` (element count of the packet, carried for the
    decompressor), ``valid``/``ready``."""

    def __init__(self, group: int = 1, user_width: int = 16):
        super().__init__({"data": Out(BLOCK_BITS * group), "blocks": Out(range(1, group + 1), init=1),
                          "last": Out(1), "user": Out(user_width), "valid": Out(1), "ready": In(1)})


class BlockGather(wiring.Component):
    """W-bit fp32 beats -> groups of 512-bit blocks (:func:`group_blocks`); a packet's last block is padded
    with zeros, and its last group holds only the blocks its elements reach.

    Lanes outside ``tkeep`` read as zero. Latency 1 cycle; one beat per cycle; ``s_axis.tready`` is
    high while the block register is not full or is being taken (combinational from ``m.ready``).
    """

    def __init__(self, width: int):
        self.width = check_width(width, self)
        self.group = group_blocks(width)
        super().__init__({"s_axis": In(AxiStreamSignature(width)), "m": Out(BlockSignature(self.group))})

    def elaborate(self, platform):
        m = Module()
        lanes = self.width // 32
        beats = max(1, BLOCK // lanes)
        s = self.s_axis
        full = Signal()
        idx = Signal(range(max(beats, 2)))
        take = self.m.valid & self.m.ready
        accept = s.tvalid & s.tready
        m.d.comb += [s.tready.eq(~full | self.m.ready), self.m.valid.eq(full)]
        masked = Cat(*[Mux(s.tkeep[4 * i], s.tdata[32 * i:32 * (i + 1)], 0) for i in range(lanes)])
        with m.If(take):
            m.d.sync += [full.eq(0), self.m.data.eq(0)]
        with m.If(accept):
            # the write below wins over the clear above for the lanes it covers
            for b in range(beats):
                with m.If(idx == b):
                    m.d.sync += self.m.data[self.width * b:self.width * (b + 1)].eq(masked)
            done = s.tlast | (idx == beats - 1)
            m.d.sync += [idx.eq(Mux(done, 0, idx + 1)), full.eq(done), self.m.last.eq(s.tlast)]
            if self.group > 1:      # blocks the beat's elements reach (only the last beat may be partial)
                elems = keep_count(m, s.tkeep, "gather_bytes") >> 2
                m.d.sync += self.m.blocks.eq((elems + BLOCK - 1) >> 4)
        return m


class BlockScatter(wiring.Component):
    """Groups of 512-bit blocks -> W-bit fp32 beats, trimmed to the packet's element count ``m.user`` of
    the first group and to the elements of the group's ``blocks`` (groups past the count are dropped up to
    the one marked ``last``).

    Latency 1 cycle; emits one beat per cycle, so a group takes max(1, 512/W) cycles.
    """

    def __init__(self, width: int):
        self.width = check_width(width, self)
        self.group = group_blocks(width)
        super().__init__({"s": In(BlockSignature(self.group)), "m_axis": Out(AxiStreamSignature(self.width))})

    def elaborate(self, platform):
        m = Module()
        W, lanes = self.width, self.width // 32
        beats = max(1, BLOCK // lanes)
        o = self.m_axis
        blk = Signal(BLOCK_BITS * self.group)
        blk_last = Signal()
        valid = Signal()
        sub = Signal(range(max(beats, 2)))
        first = Signal(init=1)
        remaining = Signal(17)
        done = Signal()            # the packet's tlast went out; drop until its last block
        final_sub = sub == beats - 1
        avail = Signal(range(lanes + 1))            # elements the beat's blocks hold
        if self.group > 1:
            blk_n = Signal.like(self.s.blocks)
            m.d.comb += avail.eq(blk_n << 4)
        else:
            m.d.comb += avail.eq(lanes)
        # ``remaining <= avail``, registered: each candidate (a beat left or not; a new group or not) is
        # compared before the handshake picks one
        ends = Signal()
        # the count once a beat has left (at least 0), a register beside ``remaining``: no comparison below
        # waits on a subtraction
        dec = Signal.like(remaining)

        def less_a_beat(v):
            return Mux(v > lanes, v - lanes, 0)
        reach_new = (self.s.blocks << 4) if self.group > 1 else lanes
        out_last = ends | (blk_last & final_sub)
        emit = o.tvalid & o.tready
        keep_lanes = Mux(ends, remaining, avail)
        m.d.comb += [
            o.tvalid.eq(valid & ~done),
            o.tdata.eq(blk.word_select(sub, W)),
            o.tkeep.eq(Cat(*[Mux(keep_lanes > i, C(0xF, 4), C(0, 4)) for i in range(lanes)])),
            o.tlast.eq(out_last),
        ]
        # the block is finished when its final beat goes out, or at once while dropping
        finish = valid & ((emit & (final_sub | out_last)) | done)
        m.d.comb += self.s.ready.eq(~valid | finish)
        load = self.s.valid & self.s.ready
        opens = first | (finish & blk_last)
        with m.If(emit):
            m.d.sync += [sub.eq(sub + 1), remaining.eq(dec), dec.eq(less_a_beat(dec))]
            with m.If(out_last & ~(blk_last & final_sub)):
                m.d.sync += done.eq(1)
        with m.If(finish):
            m.d.sync += [valid.eq(0), sub.eq(0)]
            with m.If(blk_last):
                m.d.sync += [first.eq(1), done.eq(0)]
        with m.If(load):
            m.d.sync += [blk.eq(self.s.data), blk_last.eq(self.s.last), valid.eq(1), sub.eq(0),
                         first.eq(0)]
            if self.group > 1:
                m.d.sync += blk_n.eq(self.s.blocks)
            with m.If(opens):        # this block opens a packet
                m.d.sync += [remaining.eq(self.s.user), dec.eq(less_a_beat(self.s.user)),
                             ends.eq(self.s.user <= reach_new)]
            with m.Elif(emit):
                m.d.sync += ends.eq(dec <= reach_new)
            with m.Else():
                m.d.sync += ends.eq(remaining <= reach_new)
        with m.Elif(emit):
            m.d.sync += ends.eq(dec <= avail)
        return m
