"""Rounding lane for the exact accumulator: a wide fixed-point sum to binary32 (or saturated int32), once."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.arith.exact_adder import INT_POINT, LIMB_BITS, LIMBS, AccElem
from hdl.arith.fp32_adder import CANONICAL_NAN
from hdl.stream.pipeline import register

INT32_MAX, INT32_MIN = (1 << 31) - 1, 1 << 31          # (the magnitude of the most negative int32)


def _leading_zeros(m, v, name):
    """Leading zeros of the 32-bit value ``v`` (32 for 0)."""
    n = Signal(range(33), name=name)
    m.d.comb += n.eq(32)
    for i in range(32):                      # the highest set bit wins: it is assigned last
        with m.If(v[i]):
            m.d.comb += n.eq(31 - i)
    return n


class ExactRounderLane(wiring.Component):
    """``result`` = the running sum ``acc`` (an :data:`~hdl.arith.exact_adder.AccElem`) rounded once:
    to binary32, round-to-nearest-even, subnormals kept (with ``is_int``: the integer sum saturated to
    int32, ``overflow`` set when it was). Together with
    :class:`~hdl.arith.exact_adder.ExactAdderLane`, bit-exact with
    ``host_driver.models.numerics.exact_sum_f32`` and ``sum_i32`` (docs/in_network.md, "The result").

    * Latency :attr:`LATENCY` = 9 cycles, fully pipelined, no stall input.
    * Stages: (1-3) resolve the limbs' carries, three limbs a cycle; (4) the sign, the one's complement's
      words and which are all ones; (5) the magnitude; (6) the top non-zero limb, the one below it and a
      sticky bit for the rest; (7) the leading one and the guard bit's position; (8) the 24 bits to keep,
      guard and sticky, the exponent for either rounding outcome, the int32 result; (9) round half to
      even, pack, overflow to infinity, the special values
      (a NaN, or both infinities: 0x7FC00000; an infinity; −0 when every term was −0).
    """

    LATENCY = 9

    acc: In(AccElem)
    is_int: In(1)
    result: Out(32)
    overflow: Out(1)

    def elaborate(self, platform):
        m = Module()
        a = self.acc
        # flags travel beside the arithmetic
        flags = Cat(a.nan, a.pos_inf, a.neg_inf, a.neg_zero, self.is_int)

        # -- stages 1-3: resolve carries, three limbs a cycle ------------------------------------------
        limbs = [a.limbs[j] for j in range(LIMBS)]
        resolved = []
        carry = Const(0, 8)
        for stage in range(3):
            group = range(3 * stage, 3 * stage + 3)
            new_carry = carry
            for j in group:
                t = Signal(LIMB_BITS + 8, name=f"resolve_{j}")
                t = t.as_signed()
                m.d.comb += t.eq(limbs[j] + new_carry.as_signed())
                if j < LIMBS - 1:
                    resolved.append(t[:LIMB_BITS])
                    new_carry = t[LIMB_BITS:]
                else:
                    resolved.append(t)                    # the top limb keeps the sign
            # register this group's results, the carry, and everything still to come
            resolved = [register(m, r, f"s{stage + 1}_r{i}") for i, r in enumerate(resolved)]
            carry = register(m, new_carry, f"s{stage + 1}_carry")
            limbs = [None] * (3 * stage + 3) + [register(m, limbs[j], f"s{stage + 1}_l{j}").as_signed()
                                                for j in range(3 * stage + 3, LIMBS)]
            flags = register(m, flags, f"s{stage + 1}_flags")
        top = resolved[-1].as_signed()

        # -- stage 4: the words of the magnitude's one's complement, and which are all ones -------------
        neg = top < 0
        words = [Signal(LIMB_BITS, name=f"word_{j}") for j in range(LIMBS)]
        for j in range(LIMBS):
            m.d.comb += words[j].eq(Mux(neg, ~resolved[j][:LIMB_BITS], resolved[j][:LIMB_BITS]))
        all_ones = [register(m, w == 0xFFFFFFFF, f"s4_ones{j}") for j, w in enumerate(words)]
        words = [register(m, w, f"s4_word{j}") for j, w in enumerate(words)]
        neg = register(m, neg, "s4_neg")
        flags = register(m, flags, "s4_flags")

        # -- stage 5: magnitude and sign (the one's complement plus the carry that reaches each word) ----
        mags = []
        for j in range(LIMBS):
            carry_in = neg
            for i in range(j):
                carry_in = carry_in & all_ones[i]
            mags.append(register(m, (words[j] + carry_in)[:LIMB_BITS], f"s5_mag{j}"))
        neg = register(m, neg, "s5_neg")
        flags = register(m, flags, "s5_flags")

        # -- stage 6: the top non-zero limb h, limb h - 1, and whether anything below is set -----------
        nz = [mg != 0 for mg in mags]
        h = Signal(range(LIMBS), name="top_limb")
        for j in range(LIMBS):
            with m.If(nz[j]):
                m.d.comb += h.eq(j)
        hi, lo = Signal(LIMB_BITS, name="hi"), Signal(LIMB_BITS, name="lo")
        below = Signal(name="below")
        with m.Switch(h):
            for j in range(LIMBS):
                with m.Case(j):
                    m.d.comb += [hi.eq(mags[j]), lo.eq(mags[j - 1] if j else 0),
                                 below.eq(Cat(*nz[:j - 1]).any() if j > 1 else 0)]
        int_mag = Cat(mags[INT_POINT // 32][INT_POINT % 32:], mags[INT_POINT // 32 + 1])
        int_high = Cat(*nz[INT_POINT // 32 + 2:]).any()
        s6 = {name: register(m, v, f"s6_{name}") for name, v in
              (("h", h), ("hi", hi), ("lo", lo), ("below", below), ("neg", neg), ("flags", flags),
               ("int_mag", int_mag), ("int_high", int_high))}

        # -- stage 7: the leading one and where the 24 bits start --------------------------------------
        lz = _leading_zeros(m, s6["hi"], "lz")
        pos = Signal(6, name="msb_in_hi")
        m.d.comb += pos.eq(31 - lz)
        p = Signal(range(LIMBS * LIMB_BITS), name="msb")           # the sum's top bit
        m.d.comb += p.eq(s6["h"] * LIMB_BITS + pos)
        small = p <= 23                                             # subnormal or first binade: exact
        # the window's msb is bit 32 + pos: keep bits 32 + pos .. 9 + pos, the guard is bit 8 + pos
        # (a small sum keeps bits 55 .. 32 and has no guard)
        gpos = Signal(7, name="guard_pos")
        m.d.comb += gpos.eq(Mux(small, 31, pos + 8))
        s7 = {name: register(m, v, f"s7_{name}") for name, v in
              (("window", Cat(s6["lo"], s6["hi"])), ("gpos", gpos), ("small", small),
               ("shift", Mux(small, 0, p - 23)), ("zero", s6["hi"] == 0), ("below", s6["below"]),
               ("neg", s6["neg"]), ("flags", s6["flags"]), ("int_mag", s6["int_mag"]),
               ("int_high", s6["int_high"]))}

        # -- stage 8: the 24 bits, guard and sticky ----------------------------------------------------
        window, small = s7["window"], s7["small"]
        q25 = Signal(25, name="kept_and_guard")
        m.d.comb += q25.eq((window >> s7["gpos"])[:25])
        below_guard = Cat(*(window[i] & (s7["gpos"] > i) for i in range(64))).any()
        # the exponent field for either outcome of the rounding (its carry adds one to the shift), and the
        # int32 result with its saturation, found here: the last stage only chooses
        sh = s7["shift"]
        ef0, ef1 = Signal(10, name="exp_field0"), Signal(10, name="exp_field1")
        m.d.comb += [ef0.eq(Mux(sh == 0, 0, sh + 1)), ef1.eq(sh + 2)]
        im, ih, ineg = s7["int_mag"], s7["int_high"], s7["neg"]
        over = ih | Mux(ineg, im > INT32_MIN, im > INT32_MAX)
        sat = Mux(ineg, Const(INT32_MIN, 32), Const(INT32_MAX, 32))
        exact = Mux(ineg, -im[:32], im[:32])
        s8 = {name: register(m, v, f"s8_{name}") for name, v in
              (("q", q25[1:]), ("guard", ~small & q25[0]), ("sticky", ~small & (below_guard | s7["below"])),
               ("sh_zero", sh == 0), ("ef0", ef0[:8]), ("ef1", ef1[:8]), ("big0", ef0 >= 0xFF),
               ("big1", ef1 >= 0xFF), ("zero", s7["zero"]), ("neg", s7["neg"]), ("flags", s7["flags"]),
               ("int_over", over), ("int_result", Mux(over, sat, exact)))}
        s7 = s8

        # -- stage 9: round, pack, special values ------------------------------------------------------
        nan_f, pinf, ninf, negzero, is_int = (s7["flags"][i] for i in range(5))
        up = s7["guard"] & (s7["sticky"] | s7["q"][0])
        q2 = Signal(25, name="rounded")
        m.d.comb += q2.eq(s7["q"] + up)
        carry_out = q2[24]
        mant = Mux(carry_out, q2[1:25], q2[:24])
        finite = Signal(32, name="finite")
        with m.If(s7["sh_zero"] & ~carry_out):
            m.d.comb += finite.eq(Cat(mant, Const(0, 7), s7["neg"]))       # the 24 bits are the pattern
        with m.Elif(Mux(carry_out, s7["big1"], s7["big0"])):
            m.d.comb += finite.eq(Cat(Const(0, 23), Const(0xFF, 8), s7["neg"]))
        with m.Else():
            m.d.comb += finite.eq(Cat(mant[:23], Mux(carry_out, s7["ef1"], s7["ef0"]), s7["neg"]))
        fp = Signal(32, name="fp_result")
        with m.If(nan_f | (pinf & ninf)):
            m.d.comb += fp.eq(CANONICAL_NAN)
        with m.Elif(pinf):
            m.d.comb += fp.eq(0x7F800000)
        with m.Elif(ninf):
            m.d.comb += fp.eq(0xFF800000)
        with m.Elif(s7["zero"]):
            m.d.comb += fp.eq(Mux(negzero, 0x80000000, 0))
        with m.Else():
            m.d.comb += fp.eq(finite)
        m.d.sync += [self.result.eq(Mux(is_int, s7["int_result"], fp)),
                     self.overflow.eq(is_int & s7["int_over"])]
        return m
