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


#: a term made ready to add (:func:`exact_term`): its magnitude shifted within its limb pair (``wide``), the
#: pair's first limb ``k``, its sign, and what it holds of the special values
ExactTerm = data.StructLayout({"wide": 64, "k": 3, "sign": 1, "nan": 1, "pos_inf": 1, "neg_inf": 1,
                               "neg_zero": 1})


def exact_term(m, term, is_int, name="term"):
    """``term`` (binary32, or int32 with ``is_int``) as an :data:`ExactTerm`: everything of the addition that
    does not need the running sum (the magnitude, its alignment shift, the limb), so that a pipeline can
    register it while the sum is read."""
    x = term
    sign = x[31]
    e, frac = x[23:31], x[:23]
    special = ~is_int & (e == 0xFF)
    mag = Signal(32, name=f"{name}_mag")
    t = Signal(8, name=f"{name}_t")
    with m.If(is_int):
        m.d.comb += [mag.eq(Mux(sign, -x, x)), t.eq(INT_POINT)]
    with m.Else():
        m.d.comb += [mag.eq(Mux(special, 0, Cat(frac, e != 0))), t.eq(Mux(e == 0, 0, e - 1))]
    out = Signal(ExactTerm, name=name)
    m.d.comb += [
        out.wide.eq(mag << t[:5]), out.k.eq(t[5:]), out.sign.eq(sign),
        out.nan.eq(special & (frac != 0)),
        out.pos_inf.eq(special & (frac == 0) & ~sign),
        out.neg_inf.eq(special & (frac == 0) & sign),
        out.neg_zero.eq(~is_int & (x == 0x80000000)),
    ]
    return out


#: a term made ready to add, one step further (:func:`exact_addend`): for each limb what it adds (the
#: term's magnitude where it falls, inverted when the term is negative, sign-extended) and the carry that
#: completes a negation, so that the sum of a limb is one addition with a carry in (one carry chain)
ExactAddend = data.StructLayout({
    "limbs": data.ArrayLayout(signed(LIMB_WIDTH), LIMBS),
    "carry": LIMBS,
    "nan": 1,
    "pos_inf": 1,
    "neg_inf": 1,
    "neg_zero": 1,
})

#: the addend that leaves a sum as it is (what a lane adds when it only reads)
NEUTRAL_ADDEND = {"limbs": [0] * LIMBS, "carry": 0, "nan": 0, "pos_inf": 0, "neg_inf": 0, "neg_zero": 1}


def exact_addend(m, term, is_int, name="term"):
    """``term`` (binary32, or int32 with ``is_int``) as an :data:`ExactAddend`: everything of the addition
    that does not need the running sum (magnitude, alignment, the limbs it falls in, its sign)."""
    return place_term(m, exact_term(m, term, is_int, name), name)


def place_term(m, x, name="term"):
    """An :data:`ExactTerm` as an :data:`ExactAddend` (its limbs placed, inverted when negative): the step
    that a pipeline can register apart from :func:`exact_term` while the sum is read."""
    out = Signal(ExactAddend, name=f"{name}_addend")
    for j in range(LIMBS):
        part = Mux(x.k == j, x.wide[:32], x.wide[32:])
        here = (x.k == j) | (x.k + 1 == j)
        m.d.comb += [out.limbs[j].eq(Mux(here, Cat(part ^ x.sign.replicate(LIMB_BITS),
                                                       x.sign.replicate(LIMB_WIDTH - LIMB_BITS)), 0)),
                     out.carry[j].eq(here & x.sign)]
    m.d.comb += [out.nan.eq(x.nan), out.pos_inf.eq(x.pos_inf), out.neg_inf.eq(x.neg_inf),
                 out.neg_zero.eq(x.neg_zero)]
    return out


class ExactAdderLane(wiring.Component):
    """``sum = acc + term``, exactly: ``term`` (binary32, or int32 with ``is_int``) is added to the running
    sum ``acc`` with no rounding at all; with ``fresh`` the sum starts from the term alone (``acc`` is not
    read). The value is rounded once, later, by :class:`~hdl.arith.exact_rounder.ExactRounderLane`.

    * A finite binary32 term is m · 2**t units (m < 2**24, t = max(e, 1) − 1 in 0 .. 253) and an int32
      term |x| · 2**149; either lands in two adjacent limbs, k = t div 32 and k + 1, as m · 2**(t mod 32)
      split at bit 32, added or subtracted by its sign. Limbs are redundant (signed, 5 bits of headroom)
      so no carry ever crosses a limb here: up to 16 terms fit.
    * NaN and infinities are flags beside the sum; a NaN term adds nothing else.
    * Combinational (latency 0): the engine registers around it. With ``prepared``, ``term`` is an
      :data:`ExactAddend` that the pipeline made (and registered) stages earlier with
      :func:`exact_term` and :func:`place_term`, and there is no ``is_int``: each limb is then one addition with a carry in.
      Together with the rounder it is bit-exact with ``host_driver.models.numerics.exact_sum_f32`` and
      ``sum_i32``.
    """

    def __init__(self, prepared: bool = False):
        self.prepared = prepared
        members = {"acc": In(AccElem), "term": In(ExactAddend if prepared else 32), "fresh": In(1),
                   "sum": Out(AccElem)}
        if not prepared:
            members["is_int"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        x = self.term if self.prepared else exact_addend(m, self.term, self.is_int)
        base = Signal(AccElem)
        m.d.comb += base.eq(Mux(self.fresh, 0, self.acc))
        for j in range(LIMBS):
            m.d.comb += self.sum.limbs[j].eq(base.limbs[j] + x.limbs[j] + x.carry[j])
        m.d.comb += [
            self.sum.nan.eq(base.nan | x.nan),
            self.sum.pos_inf.eq(base.pos_inf | x.pos_inf),
            self.sum.neg_inf.eq(base.neg_inf | x.neg_inf),
            self.sum.neg_zero.eq(Mux(self.fresh, 1, base.neg_zero) & x.neg_zero),
        ]
        return m
