"""IEEE-754 binary32 adder lane: round-to-nearest-even, subnormals kept, canonical NaN."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.pipeline import register

CANONICAL_NAN = 0x7FC00000


def leading_one(m, value, name):
    """(position of the highest set bit of ``value``, any bit set): a tree of log2(width) levels, each
    a two-way choice (a chain of ``If`` statements would be ``width`` multiplexers deep)."""
    width = 1 << (len(value) - 1).bit_length()
    nodes = [(value[i] if i < len(value) else C(0, 1), C(0, 0)) for i in range(width)]     # (any, position)
    level = 0
    while len(nodes) > 1:
        nxt = []
        for i in range(0, len(nodes), 2):
            (any_lo, pos_lo), (any_hi, pos_hi) = nodes[i], nodes[i + 1]
            pos = Signal(level + 1, name=f"{name}_p{level}_{i // 2}")
            m.d.comb += pos.eq(Mux(any_hi, Cat(pos_hi, C(1, 1)), Cat(pos_lo, C(0, 1))))
            nxt.append((any_hi | any_lo, pos))
        nodes, level = nxt, level + 1
    return nodes[0][1], nodes[0][0]


class Fp32AdderLane(wiring.Component):
    """``sum = a + b`` in binary32, bit-exact with ``host_driver.models.numerics.add_f32``.

    * Latency: :attr:`LATENCY` = 8 cycles, fully pipelined (one addition per cycle), no stall input:
      wrap it in a :class:`~hdl.credit_buffer.CreditBuffer` to sit behind a stream.
    * Stages, each a few LUTs or one carry chain deep (docs/hardware.md, timing): (1) the operands
      registered; (2) order by magnitude, both exponent differences, classify Inf/NaN; (3) align the
      smaller significand with guard/round/sticky bits; (4) add or subtract; (5) fold the carry, find the
      leading one; (6) limit the normalising shift so the exponent never drops below 1 (gradual
      underflow); (7) normalise, decide the rounding; (8) round, pack, overflow to infinity, signed-zero
      and special cases, into the output register.
    * Exact cancellation gives +0; -0 + -0 gives -0; any NaN operand or Inf - Inf gives 0x7FC00000.
    """

    LATENCY = 8

    a: In(32)
    b: In(32)
    sum: Out(32)

    def elaborate(self, platform):
        m = Module()

        def reg(value, name):
            return register(m, value, name)

        # -- stage 1: the operands ---------------------------------------------------------------------
        a, b = reg(self.a, "s0_a"), reg(self.b, "s0_b")

        # -- stage 2: order by magnitude, unpack, classify --------------------------------------------
        mag_a, mag_b = a[:31], b[:31]
        swap = mag_b > mag_a
        big = Mux(swap, b, a)
        small = Mux(swap, a, b)
        x_a = Mux(a[23:31] == 0, 1, a[23:31])
        x_b = Mux(b[23:31] == 0, 1, b[23:31])
        d_ab, d_ba = Signal(8), Signal(8)
        m.d.comb += [d_ab.eq(x_a - x_b), d_ba.eq(x_b - x_a)]      # both, beside the comparison
        diff = Mux(swap, d_ba, d_ab)
        nan_a, nan_b = mag_a > 0x7F800000, mag_b > 0x7F800000
        inf_a, inf_b = mag_a == 0x7F800000, mag_b == 0x7F800000
        sub0 = a[31] ^ b[31]
        nan = nan_a | nan_b | (inf_a & inf_b & sub0)
        e_big, e_sml = big[23:31], small[23:31]

        s1_sign = reg(big[31], "s1_sign")
        s1_sub = reg(sub0, "s1_sub")
        s1_exp = reg(Mux(e_big == 0, 1, e_big), "s1_exp")
        s1_mbig = reg(Cat(big[:23], e_big != 0), "s1_mbig")
        s1_msml = reg(Cat(small[:23], e_sml != 0), "s1_msml")
        s1_shift = reg(Mux(diff > 31, 31, diff[:5]), "s1_shift")
        s1_special = reg(nan | inf_a | inf_b, "s1_special")
        s1_special_val = reg(Mux(nan, C(CANONICAL_NAN, 32), Cat(C(0, 23), big[23:32])), "s1_special_val")

        # -- stage 3: align the smaller significand, with guard/round/sticky ---------------------------
        ext_sml = Cat(C(0, 3), s1_msml)                 # 27 bits
        aligned = Signal(27)
        sticky = Signal()
        m.d.comb += [
            aligned.eq(ext_sml >> s1_shift),
            sticky.eq((ext_sml & Cat(*[s1_shift > i for i in range(27)])).any()),
        ]
        s2_big = reg(Cat(C(0, 3), s1_mbig), "s2_big")
        s2_addend = reg(aligned | sticky, "s2_addend")
        s2_exp, s2_sign, s2_sub = reg(s1_exp, "s2_exp"), reg(s1_sign, "s2_sign"), reg(s1_sub, "s2_sub")
        s2_special, s2_special_val = reg(s1_special, "s2_special"), reg(s1_special_val, "s2_special_val")

        # -- stage 4: add or subtract ------------------------------------------------------------------
        total = Signal(28)
        m.d.comb += total.eq(Mux(s2_sub, s2_big - s2_addend, s2_big + s2_addend))
        s3_total = reg(total, "s3_total")
        s3_exp, s3_sign, s3_sub = reg(s2_exp, "s3_exp"), reg(s2_sign, "s3_sign"), reg(s2_sub, "s3_sub")
        s3_special, s3_special_val = reg(s2_special, "s3_special"), reg(s2_special_val, "s3_special_val")

        # -- stage 5: fold the carry, find the leading one ---------------------------------------------
        carry = s3_total[27]
        folded = Signal(27)
        m.d.comb += folded.eq(Mux(carry, Cat(s3_total[0] | s3_total[1], s3_total[2:28]), s3_total[:27]))
        msb, _ = leading_one(m, folded, "lead")
        exp1 = Signal(9)
        m.d.comb += exp1.eq(s3_exp + carry)
        s4_sum, s4_exp, s4_msb = reg(folded, "s4_sum"), reg(exp1, "s4_exp"), reg(msb, "s4_msb")
        s4_zero = reg(s3_total == 0, "s4_zero")
        s4_sign, s4_sub = reg(s3_sign, "s4_sign"), reg(s3_sub, "s4_sub")
        s4_special, s4_special_val = reg(s3_special, "s4_special"), reg(s3_special_val, "s4_special_val")

        # -- stage 6: bound the normalising shift --------------------------------------------------------
        lz = Signal(5)
        m.d.comb += lz.eq(26 - s4_msb)
        room = Signal(9)
        m.d.comb += room.eq(s4_exp - 1)
        s5_shift = reg(Mux(room < lz, room[:5], lz), "s5_shift")
        s5_sum, s5_exp, s5_zero = reg(s4_sum, "s5_sum"), reg(s4_exp, "s5_exp"), reg(s4_zero, "s5_zero")
        s5_sign, s5_sub = reg(s4_sign, "s5_sign"), reg(s4_sub, "s5_sub")
        s5_special, s5_special_val = reg(s4_special, "s5_special"), reg(s4_special_val, "s5_special_val")

        # -- stage 7: normalise, decide the rounding ----------------------------------------------------
        norm = Signal(27)
        m.d.comb += norm.eq(s5_sum << s5_shift)
        exp2 = Signal(9)
        m.d.comb += exp2.eq(s5_exp - s5_shift)
        grs = norm[:3]
        s6_mant = reg(norm[3:27], "s6_mant")
        s6_up = reg((grs > 4) | ((grs == 4) & norm[3]), "s6_up")
        s6_exp, s6_zero = reg(exp2, "s6_exp"), reg(s5_zero, "s6_zero")
        # the exponent for either outcome of the rounding, and whether each overflows, ahead of it
        s6_exp1 = reg((exp2 + 1)[:10], "s6_exp1")
        s6_big0, s6_big1 = reg(exp2 >= 255, "s6_big0"), reg(exp2 >= 254, "s6_big1")
        s6_sign, s6_sub = reg(s5_sign, "s6_sign"), reg(s5_sub, "s6_sub")
        s6_special, s6_special_val = reg(s5_special, "s6_special"), reg(s5_special_val, "s6_special_val")

        # -- stage 8: round to nearest even, pack --------------------------------------------------------
        rounded = Signal(25)
        m.d.comb += rounded.eq(s6_mant + s6_up)
        over = rounded[24]
        mant_f = Mux(over, rounded[1:25], rounded[:24])
        exp3 = Signal(10)
        m.d.comb += exp3.eq(Mux(over, s6_exp1, s6_exp))
        exp_field = Mux(mant_f[23], exp3, 0)
        infinite = mant_f[23] & Mux(over, s6_big1, s6_big0)         # exp_field >= 255
        packed = Mux(infinite, Cat(C(0, 23), C(0xFF, 8), s6_sign), Cat(mant_f[:23], exp_field[:8], s6_sign))
        zero = Cat(C(0, 31), s6_sign & ~s6_sub)
        result = Mux(s6_special, s6_special_val, Mux(s6_zero, zero, packed))
        m.d.sync += self.sum.eq(result)
        return m
