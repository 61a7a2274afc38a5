"""Python reference of the exact accumulator's state (hdl/arith/exact_adder.py: AccElem): terms to the
exact integer sum in units of 2**-149, and integers to packed AccElem values (canonical or with carries
left in the limbs), for the adder's and the rounder's tests."""

import numpy as np

from hdl.arith.exact_adder import INT_POINT, LIMB_BITS, LIMB_WIDTH, LIMBS, AccElem


def term_value(bits: int, is_int: bool) -> int:
    """One term in units of 2**-149 (0 for NaN and infinities, which are flags)."""
    if is_int:
        v = bits - (1 << 32) if bits >> 31 else bits
        return v << INT_POINT
    e, f = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if e == 0xFF:
        return 0
    mag = (f | 1 << 23) << (e - 1) if e else f
    return -mag if bits >> 31 else mag


def flags(terms, is_int):
    """(nan, pos_inf, neg_inf, neg_zero) of a column of terms."""
    if is_int:
        return 0, 0, 0, 0
    t = [int(x) for x in terms]
    e = [(x >> 23) & 0xFF for x in t]
    nan = any(ei == 0xFF and x & 0x7FFFFF for ei, x in zip(e, t))
    pinf = any(x == 0x7F800000 for x in t)
    ninf = any(x == 0xFF800000 for x in t)
    return int(nan), int(pinf), int(ninf), int(all(x == 0x80000000 for x in t))


def split(value: int, rng=None) -> list:
    """Limbs (signed ints) whose Σ limb·2**(32j) is ``value``: canonical, or with random carries left in
    them (as the adder leaves them) when ``rng`` is given."""
    limbs = []
    v = value
    for _ in range(LIMBS - 1):
        limbs.append(v & 0xFFFFFFFF)
        v >>= 32
    limbs.append(v)
    if rng is not None:
        for j in range(LIMBS - 1):
            d = int(rng.integers(-6, 7))
            limbs[j] += d << 32
            limbs[j + 1] -= d
    lim = 1 << (LIMB_WIDTH - 1)
    assert all(-lim <= x < lim for x in limbs), limbs
    return limbs


def pack(limbs, nan=0, pos_inf=0, neg_inf=0, neg_zero=0) -> int:
    """An AccElem as the integer its port takes."""
    out = 0
    for j, x in enumerate(limbs):
        out |= (x & ((1 << LIMB_WIDTH) - 1)) << (LIMB_WIDTH * j)
    at = LIMB_WIDTH * LIMBS
    for i, f in enumerate((nan, pos_inf, neg_inf, neg_zero)):
        out |= int(f) << (at + i)
    assert out < 1 << AccElem.size
    return out


def unpack(value: int):
    """(Σ limbs·2**(32j), (nan, pos_inf, neg_inf, neg_zero)) of a packed AccElem."""
    total = 0
    for j in range(LIMBS):
        x = (value >> (LIMB_WIDTH * j)) & ((1 << LIMB_WIDTH) - 1)
        if x >> (LIMB_WIDTH - 1):
            x -= 1 << LIMB_WIDTH
        total += x << (LIMB_BITS * j)
    at = LIMB_WIDTH * LIMBS
    return total, tuple((value >> (at + i)) & 1 for i in range(4))


def edge_terms(rng, n_terms, length, is_int):
    """(n_terms, length) uint32 terms: edge values, cancellations, equal exponents, huge and tiny."""
    from host_driver.models.vectors import edge_f32_bits
    if is_int:
        t = rng.integers(-2**31, 2**31, (n_terms, length)).astype(np.int64)
        t[:, : length // 4] = rng.choice([-2**31, 2**31 - 1, -1, 0, 1], (n_terms, length // 4))
        return t.astype(np.int32).view(np.uint32)
    t = np.stack([edge_f32_bits(rng, length) for _ in range(n_terms)])
    q = length // 5
    t[1, :q] = t[0, :q] ^ 0x80000000                                    # exact cancellation
    t[:, q:2 * q] = (t[0, q:2 * q] & 0xFF800000) | (t[:, q:2 * q] & 0x807FFFFF)   # one exponent
    t[:, 2 * q:3 * q] = np.where(rng.random((n_terms, q)) < 0.5, 0x80000000, 0)
    return t.astype(np.uint32)
