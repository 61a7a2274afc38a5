"""fp32 <-> binary16 / bfloat16 conversions as combinational Amaranth expressions (one lane each).

Bit-exact with ``host_driver.models.numerics``: f32_to_f16_bits, f16_bits_to_f32, f32_to_bf16_bits,
bf16_bits_to_f32. Each function adds its logic to module ``m`` and returns the result signal; the encoders
take a ``stage`` (hdl/stream/pipeline.py) that makes them pipelines of :data:`F32_TO_F16_STAGES` registers.
"""

from amaranth import C, Cat, Mux, Signal

from hdl.stream.pipeline import delay, wire

CANONICAL_NAN = 0x7FC00000


def rne_select(m, value, lo: int, shift, width: int, name: str):
    """The bits that round-half-even(value / 2**(lo + shift)) needs, for a non-negative ``value``, a
    constant ``lo`` >= 1 and a ``shift`` >= 0 (an int, or a variable: a quotient that leaves ``value`` reads
    as 0): the ``width``-bit quotient, the guard bit (the highest one dropped) and the sticky bit (any below
    it)."""
    above = value[lo - 1:]
    q = Signal(width, name=f"{name}_q")
    guard, sticky = Signal(name=f"{name}_guard"), Signal(name=f"{name}_sticky")
    below = value[:lo - 1].any() if lo > 1 else 0
    if isinstance(shift, int):
        m.d.comb += [q.eq(above[1:] >> shift), guard.eq(above[shift] if shift < len(above) else 0)]
        m.d.comb += sticky.eq(below | (above[:shift].any() if shift else 0))
    else:
        reach = Cat(*[shift > j for j in range(len(above))])     # the bits of ``above`` below the guard
        m.d.comb += [q.eq(above[1:] >> shift), guard.eq((above >> shift)[0]),
                     sticky.eq(below | (above & reach).any())]
    return q, guard, sticky


def rne_shift(m, value, lo: int, shift, width: int, name: str, stage=wire):
    """round-half-even(value / 2**(lo + shift)) (:func:`rne_select`'s bits, ``stage``, then rounded up when
    guard and (sticky or the quotient is odd)); ``width`` + 1 result bits."""
    q, guard, sticky = rne_select(m, value, lo, shift, width, name)
    q, guard, sticky = stage(m, q, f"{name}_sq"), stage(m, guard, f"{name}_sg"), stage(m, sticky, f"{name}_ss")
    res = Signal(width + 1, name=f"{name}_r")
    m.d.comb += res.eq(q + (guard & (sticky | q[0])))
    return res


#: registers :func:`f32_to_f16` puts between its input and its output when staged
F32_TO_F16_STAGES = 3


def f32_to_f16(m, x, name="h", stage=wire):
    """fp32 -> binary16 bits; ``stage`` (hdl/stream/pipeline.py) cuts it into :data:`F32_TO_F16_STAGES`
    pipeline stages: (1) the binary16 exponent and the subnormal shift, (2) the quotient, guard and sticky
    bits of both roundings, (3) the roundings' additions; the last stage packs."""
    sign, e8, frac = x[31], x[23:31], x[:23]
    e16 = Signal(range(-112, 144), name=f"{name}_e16")          # binary16 biased exponent, before rounding
    m.d.comb += e16.eq(Mux(e8 == 0, 1, e8) - 112)
    # subnormal: value in units of 2**-24 = m24 >> (14 - e16); beyond a shift of 25 it is 0
    sub_shift = Signal(4, name=f"{name}_sub_shift")             # 14 - e16 - 14, at most 12
    m.d.comb += sub_shift.eq(Mux(e16 < -11, 12, (-e16).as_unsigned()[:4]))
    x, e16, sub_shift = stage(m, x, f"{name}_x1"), stage(m, e16, f"{name}_e1"), stage(m, sub_shift, f"{name}_s1")
    sign, e8, frac = x[31], x[23:31], x[:23]
    e16 = e16.as_signed()
    # normal: drop 13 fraction bits, let the rounding carry ripple into the exponent
    rounded = rne_shift(m, frac, 13, 0, 10, f"{name}_n", stage)
    subnormal = rne_shift(m, Cat(frac, e8 != 0), 14, sub_shift, 10, f"{name}_s", stage)
    x, e16 = delay(m, x, 1, f"{name}_x2", stage), delay(m, e16, 1, f"{name}_e2", stage).as_signed()
    normal = Signal(18, name=f"{name}_normal")
    m.d.comb += normal.eq((e16.as_unsigned()[:8] << 10) + rounded)
    normal, subnormal = stage(m, normal, f"{name}_n3"), stage(m, subnormal, f"{name}_s3")
    x, e16 = stage(m, x, f"{name}_x3"), stage(m, e16, f"{name}_e3").as_signed()
    sign, e8, frac = x[31], x[23:31], x[:23]
    mag = Signal(16, name=f"{name}_mag")
    with m.If(e16 >= 1):
        m.d.comb += mag.eq(Mux((e16 >= 31) | (normal >= 0x7C00), 0x7C00, normal))
    with m.Else():
        m.d.comb += mag.eq(subnormal)
    out = Signal(16, name=name)
    with m.If(e8 == 0xFF):
        m.d.comb += out.eq(Mux(frac != 0, 0x7E00, Cat(C(0x7C00, 15), sign)))
    with m.Else():
        m.d.comb += out.eq(Cat(mag[:15], sign))
    return out


#: registers :func:`f16_to_f32` puts between its input and its output when staged
F16_TO_F32_STAGES = 1


def f16_to_f32(m, h, name="f", stage=wire):
    """binary16 bits -> fp32 (exact); ``stage`` registers the leading one of a subnormal's fraction."""
    frac = h[:10]
    msb = Signal(4, name=f"{name}_msb")
    for i in range(10):
        with m.If(frac[i]):
            m.d.comb += msb.eq(i)
    h, msb = stage(m, h, f"{name}_h1"), stage(m, msb, f"{name}_msb1")
    sign, e5, frac = h[15], h[10:15], h[:10]
    sub_sh = Signal(5, name=f"{name}_sub_sh")
    sub_frac = Signal(23, name=f"{name}_sub_frac")
    m.d.comb += [sub_sh.eq(23 - msb), sub_frac.eq((frac << sub_sh)[:23])]
    out = Signal(32, name=name)
    with m.If(e5 == 0x1F):
        m.d.comb += out.eq(Mux(frac != 0, CANONICAL_NAN, Cat(C(0, 23), C(0xFF, 8), sign)))
    with m.Elif(e5 == 0):
        m.d.comb += out.eq(Mux(frac == 0, Cat(C(0, 31), sign), Cat(sub_frac, (msb + 103)[:8], sign)))
    with m.Else():
        m.d.comb += out.eq(Cat(C(0, 13), frac, (e5 + 112)[:8], sign))
    return out


def f32_to_bf16(m, x, name="b", stage=wire):
    """fp32 -> bfloat16 bits; staged (``stage``) as :func:`f32_to_f16`, its rounding in the first stage."""
    out = Signal(16, name=name)
    rounded = Signal(33, name=f"{name}_rounded")
    m.d.comb += rounded.eq(x + 0x7FFF + x[16])
    nan = Signal(name=f"{name}_nan")
    m.d.comb += nan.eq((x[23:31] == 0xFF) & (x[:23] != 0))
    rounded = delay(m, rounded[16:32], F32_TO_F16_STAGES, f"{name}_r", stage)
    nan = delay(m, nan, F32_TO_F16_STAGES, f"{name}_nan", stage)
    m.d.comb += out.eq(Mux(nan, 0x7FC0, rounded))
    return out


def bf16_to_f32(m, h, name="f"):
    out = Signal(32, name=name)
    nan = (h[7:15] == 0xFF) & (h[:7] != 0)
    m.d.comb += out.eq(Mux(nan, CANONICAL_NAN, Cat(C(0, 16), h)))
    return out
