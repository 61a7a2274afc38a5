"""Block floating point: 16 fp32 elements share one 8-bit exponent; each keeps a signed M-bit integer.

``encode``/``decode`` are combinational and bit-exact with ``host_driver.models.numerics.bfp_encode_blocks`` and
``bfp_decode_blocks``; :class:`BlockGather` and :class:`BlockScatter` convert between W-bit fp32 beats and
whole 16-element (512-bit) blocks for widths below 512.
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.codec.half_float import CANONICAL_NAN, _rne
from hdl.stream.axis import AxiStreamSignature, check_width

BLOCK = 16
BLOCK_BITS = 32 * BLOCK


def block_bytes(m_bits: int) -> int:
    """Bytes of one encoded block: the exponent byte and 16 M-bit integers."""
    return 1 + BLOCK * m_bits // 8


def _max(m, values, name):
    while len(values) > 1:
        nxt = []
        for i in range(0, len(values) - 1, 2):
            s = Signal(len(values[i]), name=f"{name}_{len(values)}_{i}")
            m.d.comb += s.eq(Mux(values[i] > values[i + 1], values[i], values[i + 1]))
            nxt.append(s)
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


def encode(m, block, is8, name="bfp"):
    """512-bit block of fp32 -> the encoded record (exponent byte, then 16 M-bit integers, element i at
    bits [M*i, M*(i+1))), M = 8 where ``is8`` else 4, as 17*8 bits (a bfp4 record uses the low 9 bytes).

    One encoder serves both widths at run time (a per-codec copy would double the area, and Yosys'
    resource sharing spends minutes proving two exclusive copies shareable).
    """
    mb = Signal(4, name=f"{name}_m")
    qmax = Signal(8, name=f"{name}_qmax")
    m.d.comb += [mb.eq(Mux(is8, 8, 4)), qmax.eq(Mux(is8, 127, 7))]
    elems = [block[32 * i:32 * (i + 1)] for i in range(BLOCK)]
    exps = []
    for i, x in enumerate(elems):
        e = Signal(8, name=f"{name}_ex{i}")
        m.d.comb += e.eq(Mux(x[23:31] == 0, 1, x[23:31]))
        exps.append(e)
    E = _max(m, exps, f"{name}_max")
    qs = []
    for i, x in enumerate(elems):
        d = Signal(8, name=f"{name}_d{i}")
        sh = Signal(5, name=f"{name}_sh{i}")
        m.d.comb += [d.eq(E - exps[i]), sh.eq(Mux(d > 1 + mb, 26, d + 25 - mb))]
        r = _rne(m, Cat(x[:23], x[23:31] != 0), sh, 8, f"{name}_q{i}")
        mag = Mux(r > qmax, qmax, r[:8])
        q = Signal(8, name=f"{name}_q{i}")
        m.d.comb += q.eq(Mux(E == 0xFF, 0, Mux(x[31], -mag, mag)))
        qs.append(q)
    return Mux(is8, Cat(E, *[q[:8] for q in qs]), Cat(E, *[q[:4] for q in qs]))


def decode(m, record, is8, name="bfpd"):
    """Encoded record (as :func:`encode` lays it out) -> 512-bit block of fp32: q * 2**(E-127-(M-2));
    E = 255 -> canonical NaN for every element."""
    mb = Signal(4, name=f"{name}_m")
    m.d.comb += mb.eq(Mux(is8, 8, 4))
    E = record[:8]
    outs = []
    for i in range(BLOCK):
        q = Signal(8, name=f"{name}_q{i}")
        m.d.comb += q.eq(Mux(is8, record[8 + 8 * i:16 + 8 * i], record[8 + 4 * i:12 + 4 * i].as_signed()))
        neg = q[7]
        a = Signal(8, name=f"{name}_a{i}")
        m.d.comb += a.eq(Mux(neg, -q, q))
        p = Signal(3, name=f"{name}_p{i}")
        for b in range(8):
            with m.If(a[b]):
                m.d.comb += p.eq(b)
        field = Signal(range(-8, 512), name=f"{name}_field{i}")
        m.d.comb += field.eq(E + 2 - mb + p)
        fsh = Signal(5, name=f"{name}_fsh{i}")
        m.d.comb += fsh.eq(23 - p)
        normal_frac = (a << fsh)[:23]
        ssh = Signal(5, name=f"{name}_ssh{i}")
        m.d.comb += ssh.eq((E + 24 - mb)[:5])
        sub = (a << ssh)[:23]
        out = Signal(32, name=f"{name}_o{i}")
        with m.If(E == 0xFF):
            m.d.comb += out.eq(CANONICAL_NAN)
        with m.Elif(a == 0):
            m.d.comb += out.eq(0)
        with m.Elif(field >= 1):
            m.d.comb += out.eq(Cat(normal_frac, field.as_unsigned()[:8], neg))
        with m.Else():
            m.d.comb += out.eq(Cat(sub, C(0, 8), neg))
        outs.append(out)
    return Cat(*outs)


class BlockSignature(wiring.Signature):
    """A whole block per transfer: ``data`` (512 bits of fp32), ``last`` (last block of the packet),
    ``user`` (element count of the packet, carried for the decompressor), ``valid``/``ready``."""

    def __init__(self, user_width: int = 16):
        super().__init__({"data": Out(BLOCK_BITS), "last": Out(1), "user": Out(user_width),
                          "valid": Out(1), "ready": In(1)})


class BlockGather(wiring.Component):
    """W-bit fp32 beats -> 512-bit blocks; a packet's last block is padded with zeros.

    Lanes outside ``tkeep`` read as zero. Latency 1 cycle; one beat per cycle; ``s_axis.tready`` is
    high while the block register is not full or is being taken (combinational from ``m.ready``).
    """

    def __init__(self, width: int):
        self.width = check_width(width, self)
        super().__init__({"s_axis": In(AxiStreamSignature(width)), "m": Out(BlockSignature())})

    def elaborate(self, platform):
        m = Module()
        lanes = self.width // 32
        beats = BLOCK // lanes
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
        return m


class BlockScatter(wiring.Component):
    """512-bit blocks -> W-bit fp32 beats, trimmed to the packet's element count ``m.user`` of the
    first block (blocks past the count are dropped up to the block marked ``last``).

    Latency 1 cycle; emits one beat per cycle, so a block takes 512/W cycles.
    """

    def __init__(self, width: int):
        self.width = check_width(width, self)
        super().__init__({"s": In(BlockSignature()), "m_axis": Out(AxiStreamSignature(self.width))})

    def elaborate(self, platform):
        m = Module()
        W, lanes = self.width, self.width // 32
        beats = BLOCK // lanes
        o = self.m_axis
        blk = Signal(BLOCK_BITS)
        blk_last = Signal()
        valid = Signal()
        sub = Signal(range(max(beats, 2)))
        first = Signal(init=1)
        remaining = Signal(17)
        done = Signal()            # the packet's tlast went out; drop until its last block
        final_sub = sub == beats - 1
        out_last = (remaining <= lanes) | (blk_last & final_sub)
        emit = o.tvalid & o.tready
        keep_lanes = Mux(remaining >= lanes, lanes, remaining)
        m.d.comb += [
            o.tvalid.eq(valid & ~done),
            o.tdata.eq(blk.word_select(sub, W)),
            o.tkeep.eq(Cat(*[Mux(keep_lanes > i, C(0xF, 4), C(0, 4)) for i in range(lanes)])),
            o.tlast.eq(out_last),
        ]
        # the block is finished when its final beat goes out, or at once while dropping
        finish = valid & ((emit & (final_sub | out_last)) | done)
        m.d.comb += self.s.ready.eq(~valid | finish)
        with m.If(emit):
            m.d.sync += [sub.eq(sub + 1), remaining.eq(Mux(remaining > lanes, remaining - lanes, 0))]
            with m.If(out_last & ~(blk_last & final_sub)):
                m.d.sync += done.eq(1)
        with m.If(finish):
            m.d.sync += [valid.eq(0), sub.eq(0)]
            with m.If(blk_last):
                m.d.sync += [first.eq(1), done.eq(0)]
        with m.If(self.s.valid & self.s.ready):
            m.d.sync += [blk.eq(self.s.data), blk_last.eq(self.s.last), valid.eq(1), sub.eq(0),
                         first.eq(0)]
            with m.If(first | (finish & blk_last)):        # this block opens a packet
                m.d.sync += remaining.eq(self.s.user)
        return m
