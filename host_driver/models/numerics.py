"""Golden numerics: the one bit-exact reference for every numeric transform in ainic.

Everything here works on the integer bit patterns, step by step as the RTL does it, so that a failing
RTL test points at a rule, not at a library. The models are themselves checked against independent
references (NumPy's float32 addition and float16 cast, ml_dtypes' bfloat16) in ``tests/test_numerics.py``.

Public API (NumPy arrays in and out):

* :func:`add_f32` -- IEEE-754 binary32 addition, round-to-nearest-even, subnormals kept, canonical NaN.
* :func:`add_i32` -- saturating two's-complement addition, returning the sums and an overflow flag.
* :func:`exact_sum_f32` -- the exact sum of N binary32 values rounded once (round-to-nearest-even): what the
  aggregation switch computes, independent of the order of the terms (docs/in_network.md).
* :func:`sum_i32` -- the exact sum of N int32 values, saturated once.
* :func:`compress`, :func:`decompress`, :func:`roundtrip` -- the wire codecs ``none``, ``fp16``,
  ``bf16``, ``bfp8``, ``bfp4``; exact rules in ``docs/numerics.md``.
"""

import numpy as np

from contract.enums import Codec
from contract.protocol import BFP_BLOCK, BFP_MANTISSA_BITS
from contract.protocol import codec_bytes as _codec_bytes

__all__ = [
    "CANONICAL_NAN", "BFP_BLOCK", "add_f32", "add_i32", "exact_sum_f32", "sum_i32", "compress", "decompress", "roundtrip",
    "codec_bytes", "f32_to_f16_bits", "f16_bits_to_f32", "f32_to_bf16_bits", "bf16_bits_to_f32",
    "bfp_encode_blocks", "bfp_decode_blocks", "as_bits", "from_bits",
]

CANONICAL_NAN = 0x7FC00000
F16_NAN = 0x7E00
BF16_NAN = 0x7FC0


def as_bits(x) -> np.ndarray:
    """float32 values (or their uint32 patterns) -> uint32 bit patterns."""
    x = np.asarray(x)
    if x.dtype == np.uint32:
        return x
    if x.dtype == np.float32:
        return x.view(np.uint32)
    if np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"expected float32 or uint32 bit patterns, got {x.dtype}: cast explicitly")
    return x.astype(np.uint32)


def from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _rne_shift(m, sh):
    """Round-half-even of m / 2**sh for non-negative int64 m and shift 0 <= sh <= 62."""
    sh = np.asarray(sh, dtype=np.int64)
    q = m >> sh
    rem = m - (q << sh)
    half = np.where(sh > 0, np.int64(1) << np.maximum(sh - 1, 0), 0)
    up = (sh > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    return q + up


# ---------------------------------------------------------------------------------------------------
# Adders
# ---------------------------------------------------------------------------------------------------

def add_f32(a, b) -> np.ndarray:
    """IEEE-754 binary32 a + b, round-to-nearest-even, no flush-to-zero; NaN results are 0x7FC00000.

    Accepts float32 arrays or uint32 bit patterns; returns float32. The steps are those of the RTL lane
    (``hdl/arith/fp32_adder.py``): order by magnitude, align with guard/round/sticky, add or subtract,
    normalise (never below the subnormal exponent), round, pack.
    """
    ua = as_bits(a).astype(np.int64)
    ub = as_bits(b).astype(np.int64)
    ua, ub = np.broadcast_arrays(ua, ub)
    mag_a, mag_b = ua & 0x7FFFFFFF, ub & 0x7FFFFFFF
    swap = mag_b > mag_a
    big = np.where(swap, ub, ua)
    small = np.where(swap, ua, ub)
    sign = big >> 31
    sub = ((big ^ small) >> 31) & 1            # effective subtraction
    e_big, f_big = (big >> 23) & 0xFF, big & 0x7FFFFF
    e_sml, f_sml = (small >> 23) & 0xFF, small & 0x7FFFFF
    # subnormals: exponent 1 without hidden bit
    m_big = np.where(e_big == 0, f_big, f_big | 0x800000) << 3      # 27 bits: mantissa + G R S
    m_sml = np.where(e_sml == 0, f_sml, f_sml | 0x800000) << 3
    x_big, x_sml = np.maximum(e_big, 1), np.maximum(e_sml, 1)
    d = np.minimum(x_big - x_sml, 31)
    sticky = (m_sml & ((np.int64(1) << d) - 1)) != 0
    aligned = (m_sml >> d) | sticky
    s = np.where(sub == 1, m_big - aligned, m_big + aligned)           # 0 .. 2**28
    e = x_big.copy()
    # carry out: shift right one, keeping the sticky bit
    carry = (s >> 27) & 1 == 1
    s = np.where(carry, (s >> 1) | (s & 1), s)
    e = np.where(carry, e + 1, e)
    # normalise left, but not below exponent 1 (gradual underflow)
    msb = np.where(s > 0, np.floor(np.log2(np.maximum(s, 1))).astype(np.int64), 0)
    lz = np.where(s > 0, 26 - msb, 0)
    shift = np.clip(np.minimum(lz, e - 1), 0, None)
    s = s << shift
    e = e - shift
    # round to nearest even on the 3 low bits
    mant = s >> 3
    grs = s & 7
    mant = mant + ((grs > 4) | ((grs == 4) & ((mant & 1) == 1)))
    over = mant >> 24 == 1
    mant = np.where(over, mant >> 1, mant)
    e = np.where(over, e + 1, e)
    exp_field = np.where((mant >> 23) & 1 == 1, e, 0)
    res = (sign << 31) | (exp_field << 23) | (mant & 0x7FFFFF)
    res = np.where(exp_field >= 255, (sign << 31) | 0x7F800000, res)        # overflow -> inf
    # exact zero: +0 unless both operands are -0 (x + -x = +0 in round-to-nearest)
    res = np.where(s == 0, (sign & (1 - sub)) << 31, res)
    # specials
    nan_a = (mag_a > 0x7F800000)
    nan_b = (mag_b > 0x7F800000)
    inf_a, inf_b = mag_a == 0x7F800000, mag_b == 0x7F800000
    res = np.where(inf_a | inf_b, big & 0xFF800000, res)                 # the infinite operand is "big"
    res = np.where(nan_a | nan_b | (inf_a & inf_b & (sub == 1)), CANONICAL_NAN, res)
    return from_bits(res.astype(np.uint32))


#: limbs of the exact accumulator: 32 bits each, bit 0 = 2**-149 (the smallest subnormal); 281 bits hold
#: any sum of up to 16 binary32 values (277 bits of range and 4 of growth); more terms only widen the top limb
ACC_LIMBS = 10


def exact_sum_f32(x) -> np.ndarray:
    """Sum the rows of ``x`` ((N, L) float32, or uint32 bit patterns) exactly, then round the sum once to
    binary32, round-to-nearest-even; returns uint32 bit patterns, shape (L,).

    The result depends on the multiset of terms only, never on their order. Special values: a NaN, or
    both infinities, give the canonical NaN; otherwise an infinity gives itself. A zero sum is +0 unless
    every term is -0. A sum beyond the binary32 range rounds to an infinity (as IEEE-754 rounding does).
    """
    bits = as_bits(np.asarray(x))
    if bits.ndim != 2:
        raise ValueError(f"expected an (N, L) array of terms, got shape {bits.shape}")
    n, length = bits.shape
    bits = bits.astype(np.int64)
    sign = bits >> 31
    e = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    finite = e != 0xFF
    nan = ((e == 0xFF) & (frac != 0)).any(axis=0)
    pinf = ((e == 0xFF) & (frac == 0) & (sign == 0)).any(axis=0)
    ninf = ((e == 0xFF) & (frac == 0) & (sign == 1)).any(axis=0)
    all_neg_zero = ((bits == 0x80000000)).all(axis=0)

    # every finite term is m * 2**t in units of 2**-149: m < 2**24, t = max(e, 1) - 1 in 0 .. 253
    m = np.where(finite, np.where(e > 0, frac | (1 << 23), frac), 0)
    t = np.maximum(e, 1) - 1
    acc = np.zeros((length, ACC_LIMBS), np.int64)
    rows = np.arange(length)
    for i in range(n):
        wide = m[i] << (t[i] % 32)                              # < 2**55
        k = t[i] // 32
        s = np.where(sign[i] == 1, -1, 1)
        acc[rows, k] += s * (wide & 0xFFFFFFFF)
        acc[rows, k + 1] += s * (wide >> 32)
    _carry(acc)
    negative = acc[:, -1] < 0
    acc[negative] = -acc[negative]
    _carry(acc)

    # the magnitude's most significant bit, then its top 24 bits rounded half-even
    nonzero = acc != 0
    top = np.where(nonzero.any(axis=1), ACC_LIMBS - 1 - np.argmax(nonzero[:, ::-1], axis=1), 0)
    top_limb = acc[rows, top]
    msb = 32 * top + _bit_length(top_limb) - 1                  # -1 for a zero sum
    shift = np.maximum(msb - 23, 0)                             # bits below the kept 24
    limbs = acc.astype(np.uint64)
    pad = np.concatenate([limbs, np.zeros((length, 1), np.uint64)], axis=1)
    qi = shift // 32
    pair = pad[rows, qi] | (pad[rows, qi + 1] << np.uint64(32))
    q = ((pair >> (shift % 32).astype(np.uint64)) & np.uint64(0xFFFFFF)).astype(np.int64)
    g = np.maximum(shift - 1, 0)                                # the guard bit, when shift > 0
    guard = (shift > 0) & (((limbs[rows, g // 32] >> (g % 32).astype(np.uint64)) & np.uint64(1)) == 1)
    below_guard_in_limb = limbs[rows, g // 32] & ((np.uint64(1) << (g % 32).astype(np.uint64)) - np.uint64(1))
    lower_limbs = np.cumsum(nonzero, axis=1)
    below_guard = (below_guard_in_limb != 0) | ((g // 32 > 0) & (lower_limbs[rows, np.maximum(g // 32 - 1, 0)] > 0))
    sticky = (shift > 1) & below_guard
    up = guard & (sticky | ((q & 1) == 1))
    q = q + up
    carry_out = q == (1 << 24)
    q = np.where(carry_out, q >> 1, q)
    shift = shift + carry_out
    # q * 2**(shift - 149): with shift = 0 the bit pattern is q itself (subnormal, or the first binade)
    exp_field = np.where(shift > 0, shift + 1, 0)
    out = np.where(shift > 0, (exp_field << 23) | (q & 0x7FFFFF), q)
    out = np.where(exp_field >= 0xFF, 0x7F800000, out)
    out = out | (negative.astype(np.int64) << 31)
    out = np.where(all_neg_zero, 0x80000000, out)
    out = np.where(pinf, 0x7F800000, out)
    out = np.where(ninf, 0xFF800000, out)
    out = np.where(nan | (pinf & ninf), CANONICAL_NAN, out)
    return out.astype(np.uint32)


def _carry(acc):
    """Propagate carries so that limbs 0 .. -2 are in [0, 2**32); the top limb keeps the sign."""
    for k in range(acc.shape[1] - 1):
        c = acc[:, k] >> 32
        acc[:, k] -= c << 32
        acc[:, k + 1] += c


def _bit_length(v) -> np.ndarray:
    """Bit length of non-negative int64 values below 2**53 (0 for 0)."""
    v = np.asarray(v, dtype=np.int64)
    _, exp = np.frexp(v.astype(np.float64))
    return np.where(v > 0, exp, 0).astype(np.int64)


def sum_i32(x):
    """Sum the rows of ``x`` ((N, L) int32) exactly and saturate the sum once to the int32 range; returns
    (sums int32 (L,), overflow bool (L,)). The result depends on the terms only, never on their order."""
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype.itemsize != 4:
        raise ValueError(f"expected an (N, L) array of 32-bit terms, got {x.dtype} {x.shape}")
    total = x.view(np.int32).astype(np.int64).sum(axis=0)
    clipped = np.clip(total, -(1 << 31), (1 << 31) - 1)
    return clipped.astype(np.int32), clipped != total


def add_i32(a, b):
    """Saturating int32 a + b. Returns (sums as int32, overflow flag per element as bool)."""
    a = np.asarray(a, dtype=np.int32).astype(np.int64)
    b = np.asarray(b, dtype=np.int32).astype(np.int64)
    s = a + b
    over = (s > 0x7FFFFFFF) | (s < -0x80000000)
    return np.clip(s, -0x80000000, 0x7FFFFFFF).astype(np.int32), over


# ---------------------------------------------------------------------------------------------------
# Element codecs: fp16 and bf16
# ---------------------------------------------------------------------------------------------------

def f32_to_f16_bits(x) -> np.ndarray:
    """fp32 -> IEEE binary16 bits: round-to-nearest-even, subnormals kept, overflow to +-inf, NaN -> 0x7E00."""
    u = as_bits(x).astype(np.int64)
    sign = (u >> 31) << 15
    e8 = (u >> 23) & 0xFF
    m = np.where(e8 == 0, u & 0x7FFFFF, (u & 0x7FFFFF) | 0x800000)
    e16 = np.maximum(e8, 1) - 127 + 15          # binary16 biased exponent before normalising
    # normal result: drop 13 bits, the carry may ripple into the exponent (and up to inf)
    normal = (e16 << 10) + _rne_shift(m & 0x7FFFFF, 13)
    # subnormal result: value in units of 2**-24, rounded
    sub_shift = np.clip(14 - e16, 14, 40)
    subnormal = _rne_shift(m, sub_shift)
    mag = np.where(e16 >= 1, normal, subnormal)
    mag = np.minimum(mag, 0x7C00)                 # overflow -> inf
    res = sign | mag
    res = np.where(e8 == 0xFF, np.where((u & 0x7FFFFF) != 0, F16_NAN, sign | 0x7C00), res)
    return res.astype(np.uint16)


def f16_bits_to_f32(h) -> np.ndarray:
    """binary16 bits -> fp32 (exact); any NaN -> canonical NaN."""
    h = np.asarray(h, dtype=np.uint16).astype(np.int64)
    sign = (h >> 15) << 31
    e5 = (h >> 10) & 0x1F
    f = h & 0x3FF
    # subnormal: normalise f so that its leading one becomes the hidden bit
    msb = np.where(f > 0, np.floor(np.log2(np.maximum(f, 1))).astype(np.int64), 0)
    sub_e = msb - 24 + 127                       # value = f * 2**-24, leading one at 2**(msb-24)
    sub_f = ((f << (23 - msb)) & 0x7FFFFF)
    res = np.where(e5 == 0, np.where(f == 0, 0, (sub_e << 23) | sub_f), ((e5 - 15 + 127) << 23) | (f << 13))
    res = np.where(e5 == 0x1F, 0x7F800000, res) | sign
    res = np.where((e5 == 0x1F) & (f != 0), CANONICAL_NAN, res)
    return from_bits(res.astype(np.uint32))


def f32_to_bf16_bits(x) -> np.ndarray:
    """fp32 -> bfloat16 bits: round-to-nearest-even on the low 16 bits, overflow to +-inf, NaN -> 0x7FC0."""
    u = as_bits(x).astype(np.int64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = ((u >> 23) & 0xFF == 0xFF) & ((u & 0x7FFFFF) != 0)
    return np.where(nan, BF16_NAN, rounded).astype(np.uint16)


def bf16_bits_to_f32(h) -> np.ndarray:
    """bfloat16 bits -> fp32 (exact); any NaN -> canonical NaN."""
    u = np.asarray(h, dtype=np.uint16).astype(np.uint32) << 16
    nan = ((u >> 23) & 0xFF == 0xFF) & ((u & 0x7FFFFF) != 0)
    return from_bits(np.where(nan, CANONICAL_NAN, u).astype(np.uint32))


# ---------------------------------------------------------------------------------------------------
# Block floating point
# ---------------------------------------------------------------------------------------------------

def bfp_encode_blocks(x, m_bits):
    """fp32 values (length a multiple of 16) -> (E per block as uint8, q per element as int8).

    E = max over the block of max(biased exponent, 1); q = RNE(x / 2**(E-127-(M-2))), saturated to
    +-(2**(M-1)-1). A block holding Inf or NaN gets E = 255 and q = 0 everywhere.
    """
    u = as_bits(x).astype(np.int64).reshape(-1, BFP_BLOCK)
    e8 = (u >> 23) & 0xFF
    ex = np.maximum(e8, 1)
    E = ex.max(axis=1)
    m = np.where(e8 == 0, u & 0x7FFFFF, (u & 0x7FFFFF) | 0x800000)
    sh = E[:, None] - ex + 25 - m_bits               # |x| / 2**(E-127-(M-2)) = m / 2**sh
    qmax = (1 << (m_bits - 1)) - 1
    mag = np.minimum(_rne_shift(m, np.minimum(sh, 40)), qmax)
    q = np.where(u >> 31 == 1, -mag, mag)
    nonfinite = E == 0xFF
    q[nonfinite] = 0
    return E.astype(np.uint8), q.reshape(-1).astype(np.int8)


def bfp_decode_blocks(E, q, m_bits) -> np.ndarray:
    """(E per block, q per element) -> fp32 values q * 2**(E-127-(M-2)) (exact); E = 255 -> canonical NaN."""
    E = np.asarray(E, dtype=np.int64)
    q = np.asarray(q, dtype=np.int64).reshape(-1, BFP_BLOCK)
    val = np.ldexp(q.astype(np.float64), (E - 127 - (m_bits - 2))[:, None]).astype(np.float32)
    bits = val.view(np.uint32).copy()
    bits[E == 0xFF] = CANONICAL_NAN
    return from_bits(bits.reshape(-1))


# ---------------------------------------------------------------------------------------------------
# Byte streams
# ---------------------------------------------------------------------------------------------------

def _check_codec(codec) -> Codec:
    """A codec name (or Codec) as a Codec member."""
    if isinstance(codec, Codec):
        return codec
    if not isinstance(codec, str) or codec not in Codec.__members__:
        raise ValueError(f"unknown codec {codec!r}; expected one of {', '.join(Codec.__members__)}")
    return Codec[codec]


def codec_bytes(codec, n: int) -> int:
    """Bytes on the wire for n fp32 elements under codec (a name or a Codec)."""
    return _codec_bytes(_check_codec(codec), n)


def compress(x, codec: str) -> bytes:
    """fp32 array -> the codec's byte stream (layout in docs/numerics.md)."""
    codec = _check_codec(codec)
    bits = as_bits(np.ravel(np.asarray(x)))
    if codec == Codec.none:
        return bits.astype("<u4").tobytes()
    if codec == Codec.fp16:
        return f32_to_f16_bits(bits).astype("<u2").tobytes()
    if codec == Codec.bf16:
        return f32_to_bf16_bits(bits).astype("<u2").tobytes()
    m_bits = BFP_MANTISSA_BITS[codec]
    n = bits.size
    padded = np.zeros(-(-n // BFP_BLOCK) * BFP_BLOCK, dtype=np.uint32)
    padded[:n] = bits
    E, q = bfp_encode_blocks(padded, m_bits)
    q = q.reshape(-1, BFP_BLOCK).astype(np.uint8)
    if m_bits == 4:
        q = (q[:, 0::2] & 0xF) | ((q[:, 1::2] & 0xF) << 4)       # element 2k in the low nibble
    return np.concatenate([E[:, None], q], axis=1).astype(np.uint8).tobytes()


def decompress(data: bytes, codec: str, n: int) -> np.ndarray:
    """The codec's byte stream for n elements -> fp32 array of length n."""
    codec = _check_codec(codec)
    need = codec_bytes(codec, n)
    if len(data) != need:
        raise ValueError(f"{codec.name}: {n} elements take {need} bytes, got {len(data)}")
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    if codec == Codec.none:
        return from_bits(raw.view("<u4").astype(np.uint32))      # as is, NaN payloads included
    if codec == Codec.fp16:
        return f16_bits_to_f32(raw.view("<u2"))
    if codec == Codec.bf16:
        return bf16_bits_to_f32(raw.view("<u2"))
    m_bits = BFP_MANTISSA_BITS[codec]
    rec = raw.reshape(-1, 1 + BFP_BLOCK * m_bits // 8)
    E = rec[:, 0]
    body = rec[:, 1:]
    if m_bits == 8:
        q = body.view(np.int8)
    else:
        lo = (body & 0xF).astype(np.int8)
        hi = (body >> 4).astype(np.int8)
        q = np.stack([lo, hi], axis=2).reshape(-1, BFP_BLOCK)
        q = np.where(q >= 8, q - 16, q).astype(np.int8)
    return bfp_decode_blocks(E, q, m_bits)[:n]


def roundtrip(x, codec: str) -> np.ndarray:
    """decompress(compress(x)): what a receiver sees of x."""
    x = np.ravel(np.asarray(x))
    return decompress(compress(x, codec), codec, x.size)
