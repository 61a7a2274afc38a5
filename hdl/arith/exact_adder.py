"""Exact accumulation lane: adds a binary32 or int32 term to a wide fixed-point sum with no rounding."""

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

#: the accumulator's unit is 2**-149 (the smallest binary32 subnormal): bit 0 of limb 0
LIMBS = 9                 # limb j holds bits 32j .. 32j+31 of the sum (and a carry headroom above)
LIMB_BITS = 32
#: a limb takes up to 16 terms (docs/in_network.md: at most 16 workers) of magnitude < 2**32 each
LIMB_WIDTH = LIMB_BITS + 5
#: an int32 term x is the sum's value x exactly: x * 2**149 in the accumulator's units
INT_POINT = 149

#: one element of a running sum: Σ limbs[j] · 2**(32j) in units of 2**-149, and what the terms held of
#: the special values (a NaN; +∞; −∞; every term −0)
AccElem = data.StructLayout({
    "limbs": data.ArrayLayout(signed(LIMB_WIDTH), LIMBS),
    "nan": 1,
    "pos_inf": 1,
    "neg_inf": 1,
    "neg_zero": 1,
})


class ExactAdderLane(wiring.Component):
    """``sum = acc + term``, exactly: ``term`` (binary32, or int32 with ``is_int``) is added to the running
    sum ``acc`` with no rounding at all; with ``fresh`` the sum starts from the term alone (``acc`` is not
    read). The value is rounded once, later, by :class:`~hdl.arith.exact_rounder.ExactRounderLane`.

    * A finite binary32 term is m · 2**t units (m < 2**24, t = max(e, 1) − 1 in 0 .. 253) and an int32
      term |x| · 2**149; either lands in two adjacent limbs, k = t div 32 and k + 1, as m · 2**(t mod 32)
      split at bit 32, added or subtracted by its sign. Limbs are redundant (signed, 5 bits of headroom)
      so no carry ever crosses a limb here: up to 16 terms fit.
    * NaN and infinities are flags beside the sum; a NaN term adds nothing else.
    * Combinational (latency 0): the engine registers around it. Together with the rounder it is
      bit-exact with ``host_driver.models.numerics.exact_sum_f32`` and ``sum_i32``.
    """

    acc: In(AccElem)
    term: In(32)
    is_int: In(1)
    fresh: In(1)
    sum: Out(AccElem)

    def elaborate(self, platform):
        m = Module()
        x = self.term
        sign = x[31]
        e, frac = x[23:31], x[:23]
        special = ~self.is_int & (e == 0xFF)
        mag = Signal(32)
        t = Signal(8)
        with m.If(self.is_int):
            m.d.comb += [mag.eq(Mux(sign, -x, x)), t.eq(INT_POINT)]
        with m.Else():
            m.d.comb += [mag.eq(Mux(special, 0, Cat(frac, e != 0))), t.eq(Mux(e == 0, 0, e - 1))]
        wide = Signal(64)
        m.d.comb += wide.eq(mag << t[:5])
        k = t[5:]
        base = Signal(AccElem)
        m.d.comb += base.eq(Mux(self.fresh, 0, self.acc))
        for j in range(LIMBS):
            part = Mux(k == j, wide[:32], Mux(k + 1 == j, wide[32:], 0))
            m.d.comb += self.sum.limbs[j].eq(Mux(sign, base.limbs[j] - part, base.limbs[j] + part))
        neg_zero = ~self.is_int & (x == 0x80000000)
        m.d.comb += [
            self.sum.nan.eq(base.nan | (special & (frac != 0))),
            self.sum.pos_inf.eq(base.pos_inf | (special & (frac == 0) & ~sign)),
            self.sum.neg_inf.eq(base.neg_inf | (special & (frac == 0) & sign)),
            self.sum.neg_zero.eq(Mux(self.fresh, 1, base.neg_zero) & neg_zero),
        ]
        return m
