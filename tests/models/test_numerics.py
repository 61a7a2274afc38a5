"""The golden numerics against independent references (NumPy, ml_dtypes) and against their own rules."""

import ml_dtypes
import numpy as np
import pytest

from contract.enums import Codec, names
from host_driver.models import numerics as nm
from host_driver.models.vectors import adder_edge_pairs, edge_f32_bits

N = 1_000_000


def _canon(bits):
    bits = np.asarray(bits, dtype=np.uint32).copy()
    bits[np.isnan(bits.view(np.float32))] = nm.CANONICAL_NAN
    return bits


def _hexdiff(*cols, idx):
    return [tuple(hex(int(c[i])) for c in cols) for i in idx[:8]]


def test_add_f32_matches_numpy_on_edge_draws(rng):
    a = edge_f32_bits(rng, N)
    b = edge_f32_bits(rng, N)
    # a third of the pairs are near-negations: exact and massive cancellation
    near = rng.random(N) < 0.3
    b = np.where(near, (a ^ 0x80000000) + rng.integers(-3, 4, N).astype(np.uint32), b).astype(np.uint32)
    with np.errstate(all="ignore"):
        ref = _canon((a.view(np.float32) + b.view(np.float32)).view(np.uint32))
    got = nm.add_f32(a, b).view(np.uint32)
    bad = np.nonzero(got != ref)[0]
    assert bad.size == 0, f"{bad.size} mismatches (a, b, got, numpy): {_hexdiff(a, b, got, ref, idx=bad)}"


def test_add_f32_named_edges():
    a, b = adder_edge_pairs()
    with np.errstate(all="ignore"):
        ref = _canon((a.view(np.float32) + b.view(np.float32)).view(np.uint32))
    got = nm.add_f32(a, b).view(np.uint32)
    bad = np.nonzero(got != ref)[0]
    assert bad.size == 0, _hexdiff(a, b, got, ref, idx=bad)


@pytest.mark.parametrize("a,b,want", [
    (0x00000000, 0x80000000, 0x00000000),   # +0 + -0 = +0
    (0x80000000, 0x80000000, 0x80000000),   # -0 + -0 = -0
    (0x3F800000, 0xBF800000, 0x00000000),   # x + -x = +0
    (0x00000001, 0x00000001, 0x00000002),   # smallest subnormals
    (0x00400000, 0x00400000, 0x00800000),   # subnormal + subnormal -> normal
    (0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000),   # overflow -> inf
    (0x7F800000, 0xFF800000, 0x7FC00000),   # inf - inf -> NaN
    (0x7F800001, 0x3F800000, 0x7FC00000),   # signalling NaN -> canonical
    (0x3F800000, 0x33800000, 0x3F800000),   # 1 + 2**-24: tie, round to even (down)
    (0x3F800001, 0x33800000, 0x3F800002),   # tie, round to even (up)
    (0x3F800000, 0x00000001, 0x3F800000),   # huge exponent gap
])
def test_add_f32_rules(a, b, want):
    got = int(nm.add_f32(np.uint32(a), np.uint32(b)).view(np.uint32))
    assert got == want, f"{a:#010x} + {b:#010x} = {got:#010x}, want {want:#010x}"


def test_add_i32_saturates_and_flags():
    a = np.array([2**31 - 1, -2**31, 5, -7, 2**30], dtype=np.int32)
    b = np.array([1, -1, 6, 7, 2**30], dtype=np.int32)
    s, over = nm.add_i32(a, b)
    assert s.tolist() == [2**31 - 1, -2**31, 11, 0, 2**31 - 1]
    assert over.tolist() == [True, True, False, False, True]


@pytest.mark.parametrize("dtype,encode,nan", [(np.float16, nm.f32_to_f16_bits, nm.F16_NAN),      # NumPy
                                               (ml_dtypes.bfloat16, nm.f32_to_bf16_bits, nm.BF16_NAN)])
def test_half_encoders_against_references(rng, dtype, encode, nan):
    x = edge_f32_bits(rng, N)
    with np.errstate(all="ignore"):
        ref = x.view(np.float32).astype(dtype).view(np.uint16).copy()
    ref[np.isnan(x.view(np.float32))] = nan
    got = encode(x)
    bad = np.nonzero(got != ref)[0]
    assert bad.size == 0, _hexdiff(x, got, ref, idx=bad)


@pytest.mark.parametrize("dtype,decode", [(np.float16, nm.f16_bits_to_f32),
                                          (ml_dtypes.bfloat16, nm.bf16_bits_to_f32)])
def test_half_decoders_exhaustive(dtype, decode):
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    with np.errstate(all="ignore"):
        ref = _canon(h.view(dtype).astype(np.float32).view(np.uint32))
    got = decode(h).view(np.uint32)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("codec,m_bits", [("bfp8", 8), ("bfp4", 4)])
def test_bfp_against_float64(rng, codec, m_bits):
    """q = rint(x / 2**(E-127-(M-2))) computed in float64 (exact) agrees with the bit-level encoder."""
    x = edge_f32_bits(rng, N // 16 * 16, finite=True)
    # give half the blocks a wide dynamic range, the rest a narrow one
    E, q = nm.bfp_encode_blocks(x, m_bits)
    xf = x.view(np.float32).astype(np.float64).reshape(-1, 16)
    e8 = (x.reshape(-1, 16) >> 23) & 0xFF
    E_ref = np.maximum(e8, 1).max(axis=1)
    scale = np.ldexp(1.0, (E_ref.astype(np.int64) - 127 - (m_bits - 2)))
    qmax = 2 ** (m_bits - 1) - 1
    q_ref = np.clip(np.rint(xf / scale[:, None]), -qmax, qmax).astype(np.int8).reshape(-1)
    assert np.array_equal(E, E_ref.astype(np.uint8))
    assert np.array_equal(q, q_ref)
    back = nm.bfp_decode_blocks(E, q, m_bits)
    assert np.array_equal(back.astype(np.float64), (q_ref.reshape(-1, 16) * scale[:, None]).reshape(-1))


@pytest.mark.parametrize("codec", ["bfp8", "bfp4"])
def test_bfp_blocks(codec):
    m = 8 if codec == "bfp8" else 4
    qmax = 2 ** (m - 1) - 1
    tiny_huge = np.array([1e30, 1e-30] + [0.0] * 14, dtype=np.float32)
    out = nm.roundtrip(tiny_huge, codec)
    assert out[1] == 0.0 and out[0] != 0.0                     # the tiny value is lost to the shared exponent
    assert np.all(nm.roundtrip(np.zeros(16, np.float32), codec) == 0)
    nonfinite = np.arange(16, dtype=np.float32)
    nonfinite[5] = np.inf
    out = nm.roundtrip(nonfinite, codec).view(np.uint32)
    assert np.all(out == nm.CANONICAL_NAN)                       # the whole block signals non-finite
    # rounding that saturates: the block max rounds to 2**(M-1) and is clipped to qmax
    sat = np.full(16, np.float32(np.nextafter(np.float32(2.0), np.float32(0))), dtype=np.float32)
    E, q = nm.bfp_encode_blocks(sat, m)
    assert np.all(q == qmax)
    # short last block: 20 elements -> 2 blocks, the second padded with zeros
    x = np.arange(1, 21, dtype=np.float32)
    data = nm.compress(x, codec)
    assert len(data) == nm.codec_bytes(codec, 20) == 2 * (1 + 16 * m // 8)
    assert nm.decompress(data, codec, 20).size == 20
    assert data[-(16 * m // 8) + (4 * m // 8):] == bytes(len(data[-(16 * m // 8) + (4 * m // 8):]))


@pytest.mark.parametrize("codec", names(Codec))
def test_roundtrip_error_bounds(rng, codec):
    x = rng.standard_normal(4096).astype(np.float32)
    err = np.abs(nm.roundtrip(x, codec).astype(np.float64) - x)
    bound = {"none": 0, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
    if codec in bound:
        # half an ulp, relative; fp16 below 2**-14 is subnormal: half its ulp, 2**-25, absolute
        floor = 2.0 ** -25 if codec == "fp16" else 0.0
        assert np.all(err <= np.maximum(np.abs(x) * bound[codec], floor))
    else:
        m = 8 if codec == "bfp8" else 4
        blk = np.abs(x).reshape(-1, 16).max(axis=1)
        step = 2.0 ** (np.floor(np.log2(blk)) - (m - 2))           # the block's quantum
        step = step[:, None]
        qmax = 2 ** (m - 1) - 1
        # half a quantum, except where rounding reached 2**(M-1) and saturated: then at most one quantum
        saturated = np.abs(x.reshape(-1, 16)) >= (qmax + 0.5) * step
        bound = np.where(saturated, step, step / 2)
        assert np.all(err.reshape(-1, 16) <= bound)
        assert np.any(~saturated)


def test_codec_errors():
    with pytest.raises(ValueError, match="unknown codec"):
        nm.compress(np.zeros(4, np.float32), "fp8")
    with pytest.raises(ValueError, match="take 34 bytes"):
        nm.decompress(b"\0" * 10, "bfp8", 20)
    with pytest.raises(TypeError, match="float32"):
        nm.compress(np.zeros(4), "fp16")


# ---------------------------------------------------------------------------------------------------
# The aggregation switch's sums: exact, rounded once, independent of order (docs/in_network.md)
# ---------------------------------------------------------------------------------------------------
def _exact_sum_reference(column) -> int:
    """One column, in plain Python integers: the exact sum in units of 2**-149, rounded half-even to 24
    significant bits, encoded as a binary32 bit pattern (finite terms only)."""
    total = 0
    for b in (int(v) for v in column):
        e, f = (b >> 23) & 0xFF, b & 0x7FFFFF
        mag = (f | (1 << 23)) << (e - 1) if e else f
        total += -mag if b >> 31 else mag
    sign, mag = (1 << 31 if total < 0 else 0), abs(total)
    if mag == 0:
        return 0x80000000 if all(int(v) == 0x80000000 for v in column) else 0
    if mag < 1 << 24:
        return sign | mag
    shift = mag.bit_length() - 24
    q, rem, half = mag >> shift, mag & ((1 << shift) - 1), 1 << (shift - 1)
    if rem > half or (rem == half and q & 1):
        q += 1
    if q == 1 << 24:
        q, shift = q >> 1, shift + 1
    return sign | (0x7F800000 if shift + 1 >= 0xFF else ((shift + 1) << 23) | (q & 0x7FFFFF))


@pytest.mark.parametrize("n", [2, 3, 8, 16])
def test_exact_sum_f32_is_the_exact_sum_rounded_once(rng, n):
    cols = 4000
    x = edge_f32_bits(rng, n * cols, finite=True).reshape(n, cols)
    # cancellation-heavy columns: the last term nearly cancels the others' float64 sum
    cancel = rng.random(cols) < 0.3
    with np.errstate(all="ignore"):
        partial = x[:-1].view(np.float32).astype(np.float64).sum(axis=0).astype(np.float32)
    x[-1] = np.where(cancel & np.isfinite(partial), (-partial).view(np.uint32) + rng.integers(-2, 3, cols).astype(np.uint32),
                     x[-1]).astype(np.uint32)
    x[-1] = np.where(((x[-1] >> 23) & 0xFF) == 0xFF, x[-1] & 0xBFFFFFFF, x[-1]).astype(np.uint32)
    got = nm.exact_sum_f32(x)
    want = np.array([_exact_sum_reference(x[:, j]) for j in range(cols)], dtype=np.uint32)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size} of {cols}: {[(hex(int(got[j])), hex(int(want[j]))) for j in bad[:5]]}"


def test_exact_sum_f32_of_two_terms_is_ieee_addition(rng):
    """Two terms: the correctly rounded sum is what IEEE-754 addition (NumPy's float32) gives."""
    a, b = edge_f32_bits(rng, N // 4), edge_f32_bits(rng, N // 4)
    with np.errstate(all="ignore"):
        ref = _canon((a.view(np.float32) + b.view(np.float32)).view(np.uint32))
    got = nm.exact_sum_f32(np.stack([a, b]))
    bad = np.nonzero(got != ref)[0]
    assert bad.size == 0, f"{bad.size} mismatches (a, b, got, numpy): {_hexdiff(a, b, got, ref, idx=bad)}"


def test_exact_sum_f32_does_not_depend_on_order(rng):
    n, cols = 8, 20000
    x = edge_f32_bits(rng, n * cols).reshape(n, cols)
    first = nm.exact_sum_f32(x)
    for _ in range(5):
        perm = np.argsort(rng.random((n, cols)), axis=0)             # a different order in every column
        assert np.array_equal(nm.exact_sum_f32(np.take_along_axis(x, perm, axis=0)), first)
    # where the ring's pairwise additions do depend on it
    fwd, rev = x[0], x[-1]
    for i in range(1, n):
        fwd, rev = nm.add_f32(fwd, x[i]).view(np.uint32), nm.add_f32(rev, x[n - 1 - i]).view(np.uint32)
    assert (fwd != rev).any()


def test_exact_sum_f32_special_values():
    inf, ninf, nan, big = 0x7F800000, 0xFF800000, 0x7FC00001, 0x7F7FFFFF
    cases = {
        (inf, 0x3F800000): inf, (ninf, big): ninf, (inf, ninf): nm.CANONICAL_NAN, (nan, 0): nm.CANONICAL_NAN,
        (big, big): inf, (big | 1 << 31, big | 1 << 31): ninf,             # overflow rounds to infinity
        (0x80000000, 0x80000000): 0x80000000, (0x80000000, 0): 0,          # -0 only if every term is -0
        (0x3F800000, 0xBF800000): 0,                                        # exact cancellation: +0
        (0x00000001, 0x80000001): 0, (0x00400000, 0x00400000): 0x00800000,  # subnormals, exactly
    }
    a = np.array([k for k in cases], dtype=np.uint32).T
    got = nm.exact_sum_f32(a)
    assert [hex(int(v)) for v in got] == [hex(v) for v in cases.values()]
    # 16 terms of 2**127 and one -2**127: 15 * 2**127 overflows; the sum of its parts would not matter
    assert int(nm.exact_sum_f32(np.array([[0x7F000000]] * 16 + [[0xFF000000]], dtype=np.uint32))[0]) == inf


def test_sum_i32_saturates_once():
    x = np.array([[2**31 - 1, -2**31, 5], [1, -1, -3], [-1, 1, 2**31 - 1]], dtype=np.int32)
    s, over = nm.sum_i32(x)
    # column 0: 2**31 - 1 + 1 - 1 is in range (a pairwise saturating sum would have clipped, then lost 1)
    assert s.tolist() == [2**31 - 1, -2**31, 2**31 - 1] and over.tolist() == [False, False, True]
    assert np.array_equal(nm.sum_i32(x[::-1])[0], s)
