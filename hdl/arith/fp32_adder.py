"""IEEE-754 binary32 adder lane: round-to-nearest-even, subnormals kept, canonical NaN."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

CANONICAL_NAN = 0x7FC00000


def _reg(m, value, name, width=None):
    """Register ``value`` into a new reset-less signal (pipeline data needs no reset)."""
    sig = Signal(width or len(value), name=name, reset_less=True)
    m.d.sync += sig.eq(value)
    return sig


class Fp32AdderLane(wiring.Component):
    """``sum = a + b`` in binary32, bit-exact with ``host_driver.models.numerics.add_f32``.

    * Latency: :attr:`LATENCY` = 4 cycles, fully pipelined (one addition per cycle), no stall input:
      wrap it in a :class:`~hdl.credit_buffer.CreditBuffer` to sit behind a stream.
    * Stages: (1) order operands by magnitude, unpack, classify Inf/NaN; (2) align the smaller
      significand with guard/round/sticky bits and add or subtract; (3) fold the carry, find the leading
      one, limit the normalising shift so the exponent never drops below 1 (gradual underflow);
      (4) shift, round half to even, pack, overflow to infinity, signed-zero and special cases.
    * Exact cancellation gives +0; -0 + -0 gives -0; any NaN operand or Inf - Inf gives 0x7FC00000.
    """

    LATENCY = 4

    a: In(32)
    b: In(32)
    sum: Out(32)

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b

        # -- stage 1: order by magnitude, unpack, classify ---------------------------------------------
        mag_a, mag_b = a[:31], b[:31]
        swap = mag_b > mag_a
        big = Mux(swap, b, a)
        small = Mux(swap, a, b)
        e_big, e_sml = big[23:31], small[23:31]
        nan_a, nan_b = mag_a > 0x7F800000, mag_b > 0x7F800000
        inf_a, inf_b = mag_a == 0x7F800000, mag_b == 0x7F800000
        sub0 = big[31] ^ small[31]
        x_big = Mux(e_big == 0, 1, e_big)
        x_sml = Mux(e_sml == 0, 1, e_sml)
        diff = Signal(8)
        m.d.comb += diff.eq(x_big - x_sml)
        nan = nan_a | nan_b | (inf_a & inf_b & sub0)

        s1_sign = _reg(m, big[31], "s1_sign")
        s1_sub = _reg(m, sub0, "s1_sub")
        s1_exp = _reg(m, x_big, "s1_exp", 8)
        s1_mbig = _reg(m, Cat(big[:23], e_big != 0), "s1_mbig")
        s1_msml = _reg(m, Cat(small[:23], e_sml != 0), "s1_msml")
        s1_shift = _reg(m, Mux(diff > 31, 31, diff[:5]), "s1_shift", 5)
        s1_special = _reg(m, nan | inf_a | inf_b, "s1_special")
        s1_special_val = _reg(m, Mux(nan, C(CANONICAL_NAN, 32), Cat(C(0, 23), big[23:32])), "s1_special_val", 32)

        # -- stage 2: align with guard/round/sticky, add or subtract -----------------------------------
        ext_big = Cat(C(0, 3), s1_mbig)                 # 27 bits
        ext_sml = Cat(C(0, 3), s1_msml)
        aligned = Signal(27)
        sticky = Signal()
        lost_mask = Signal(27)
        m.d.comb += [
            aligned.eq(ext_sml >> s1_shift),
            lost_mask.eq((C(1, 32) << s1_shift)[:27] - 1),
            sticky.eq((ext_sml & lost_mask).any()),
        ]
        addend = aligned | sticky
        total = Signal(28)
        m.d.comb += total.eq(Mux(s1_sub, ext_big - addend, ext_big + addend))

        s2_sum = _reg(m, total, "s2_sum")
        s2_exp = _reg(m, s1_exp, "s2_exp")
        s2_sign = _reg(m, s1_sign, "s2_sign")
        s2_sub = _reg(m, s1_sub, "s2_sub")
        s2_special = _reg(m, s1_special, "s2_special")
        s2_special_val = _reg(m, s1_special_val, "s2_special_val")

        # -- stage 3: fold the carry, find the leading one, bound the shift ----------------------------
        carry = s2_sum[27]
        folded = Mux(carry, Cat(s2_sum[0] | s2_sum[1], s2_sum[2:28]), s2_sum[:27])
        exp1 = Signal(9)
        m.d.comb += exp1.eq(s2_exp + carry)
        msb = Signal(5)
        for i in range(27):
            with m.If(folded[i]):
                m.d.comb += msb.eq(i)
        lz = Signal(5)
        m.d.comb += lz.eq(26 - msb)
        room = Signal(9)
        m.d.comb += room.eq(exp1 - 1)
        shift = Mux(room < lz, room[:5], lz)

        s3_sum = _reg(m, folded, "s3_sum")
        s3_exp = _reg(m, exp1, "s3_exp")
        s3_shift = _reg(m, shift, "s3_shift", 5)
        s3_zero = _reg(m, s2_sum == 0, "s3_zero")
        s3_sign = _reg(m, s2_sign, "s3_sign")
        s3_sub = _reg(m, s2_sub, "s3_sub")
        s3_special = _reg(m, s2_special, "s3_special")
        s3_special_val = _reg(m, s2_special_val, "s3_special_val")

        # -- stage 4: normalise, round to nearest even, pack --------------------------------------------
        norm = Signal(27)
        m.d.comb += norm.eq(s3_sum << s3_shift)
        exp2 = Signal(9)
        m.d.comb += exp2.eq(s3_exp - s3_shift)
        mant = norm[3:27]
        grs = norm[:3]
        round_up = (grs > 4) | ((grs == 4) & mant[0])
        rounded = Signal(25)
        m.d.comb += rounded.eq(mant + round_up)
        over = rounded[24]
        mant_f = Mux(over, rounded[1:25], rounded[:24])
        exp3 = Signal(10)
        m.d.comb += exp3.eq(exp2 + over)
        exp_field = Mux(mant_f[23], exp3, 0)
        packed = Mux(exp_field >= 255, Cat(C(0, 23), C(0xFF, 8), s3_sign),
                     Cat(mant_f[:23], exp_field[:8], s3_sign))
        zero = Cat(C(0, 31), s3_sign & ~s3_sub)
        result = Mux(s3_special, s3_special_val, Mux(s3_zero, zero, packed))
        m.d.sync += self.sum.eq(result)
        return m
