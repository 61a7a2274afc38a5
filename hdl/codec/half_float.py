"""fp32 <-> binary16 / bfloat16 conversions as combinational Amaranth expressions (one lane each).

Bit-exact with ``host_driver.models.numerics``: f32_to_f16_bits, f16_bits_to_f32, f32_to_bf16_bits,
bf16_bits_to_f32. Each function adds its logic to module ``m`` and returns the result signal.
"""

from amaranth import C, Cat, Mux, Signal

CANONICAL_NAN = 0x7FC00000


def _rne(m, value, shift, width, name):
    """round-half-even(value / 2**shift) for a non-negative value and a (variable) shift >= 1."""
    q = Signal(width, name=f"{name}_q")
    rem = Signal(len(value), name=f"{name}_rem")
    half = Signal(len(value) + 2, name=f"{name}_half")
    m.d.comb += [
        q.eq(value >> shift),
        rem.eq(value & ((C(1, len(value) + 2) << shift) - 1)),
        half.eq(C(1, len(value) + 2) << (shift - 1).as_unsigned()),
    ]
    up = (rem > half) | ((rem == half) & q[0])
    res = Signal(width + 1, name=f"{name}_r")
    m.d.comb += res.eq(q + up)
    return res


def f32_to_f16(m, x, name="h"):
    sign, e8, frac = x[31], x[23:31], x[:23]
    e16 = Signal(range(-112, 144), name=f"{name}_e16")          # binary16 biased exponent, before rounding
    m.d.comb += e16.eq(Mux(e8 == 0, 1, e8) - 112)
    # normal: drop 13 fraction bits, let the rounding carry ripple into the exponent
    normal = Signal(18, name=f"{name}_normal")
    m.d.comb += normal.eq((e16.as_unsigned()[:8] << 10) + _rne(m, frac, C(13, 4), 10, f"{name}_n"))
    # subnormal: value in units of 2**-24 = m24 >> (14 - e16); beyond a shift of 25 it is 0
    m24 = Cat(frac, e8 != 0)
    sub_shift = Signal(range(0, 128), name=f"{name}_sub_shift")
    m.d.comb += sub_shift.eq(Mux(e16 < -11, 26, 14 - e16))
    subnormal = _rne(m, m24, sub_shift[:5], 11, f"{name}_s")
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


def f16_to_f32(m, h, name="f"):
    sign, e5, frac = h[15], h[10:15], h[:10]
    msb = Signal(4, name=f"{name}_msb")
    for i in range(10):
        with m.If(frac[i]):
            m.d.comb += msb.eq(i)
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


def f32_to_bf16(m, x, name="b"):
    out = Signal(16, name=name)
    rounded = Signal(33, name=f"{name}_rounded")
    m.d.comb += rounded.eq(x + 0x7FFF + x[16])
    nan = (x[23:31] == 0xFF) & (x[:23] != 0)
    m.d.comb += out.eq(Mux(nan, 0x7FC0, rounded[16:32]))
    return out


def bf16_to_f32(m, h, name="f"):
    out = Signal(32, name=name)
    nan = (h[7:15] == 0xFF) & (h[:7] != 0)
    m.d.comb += out.eq(Mux(nan, CANONICAL_NAN, Cat(C(0, 16), h)))
    return out
