"""The ring collectives' golden model (host_driver/models/allreduce.py) against its own definition in plain NumPy."""

import numpy as np
import pytest

from contract.enums import Codec, names
from contract.protocol import DEFAULT_LAG
from host_driver.models import allreduce as ar
from host_driver.models import numerics as nm


def grads(rng, n, length):
    return [rng.standard_normal(length).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("n, length, p", [(2, 1000, 256), (3, 777, 16), (4, 100, 256), (8, 5000, 64), (5, 1, 16)])
def test_none_is_the_ring_order_sum(rng, n, length, p):
    """With codec none, chunk c's sum is ((x_c + x_c+1) + x_c+2) + ... in float32, the order the ring adds."""
    x = grads(rng, n, length)
    out = ar.allreduce(x, packet=p)
    plan = ar.Plan(n, length, p)
    want = np.empty(length, np.float32)
    for c in range(n):
        s = plan.chunk(c)
        acc = x[c][s].copy()
        for hop in range(1, n):
            acc = acc + x[(c + hop) % n][s]
        want[s] = acc
    assert out.shape == (n, length)
    assert np.array_equal(out.view(np.uint32), np.tile(want.view(np.uint32), (n, 1)))


def test_chunks_cover_everything_and_may_be_empty():
    plan = ar.Plan(4, 100, 256)          # L < N P: K = 256, chunk 0 holds all, 1..3 are empty
    assert plan.chunk_elems == 256
    assert [(plan.chunk(c).start, plan.chunk(c).stop) for c in range(4)] == [(0, 100), (100, 100), (100, 100), (100, 100)]
    plan = ar.Plan(3, 1000, 16)
    sizes = [plan.chunk(c).stop - plan.chunk(c).start for c in range(3)]
    assert sum(sizes) == 1000 and plan.chunk_elems % 16 == 0 and sizes == [336, 336, 328]


@pytest.mark.parametrize("codec", names(Codec))
def test_every_rank_identical_and_close_to_exact(rng, codec):
    n, length = 5, 3001
    x = grads(rng, n, length)
    out = ar.allreduce(x, codec=codec, packet=64)
    assert all(np.array_equal(out[0].view(np.uint32), row.view(np.uint32)) for row in out)
    exact = np.sum(np.stack(x).astype(np.float64), axis=0)
    err = np.sqrt(np.mean((out[0] - exact) ** 2)) / np.sqrt(np.mean(exact ** 2))
    bound = {"none": 1e-6, "fp16": 1e-3, "bf16": 1e-2, "bfp8": 5e-2, "bfp4": 0.5}[codec]
    assert err < bound, (codec, err)


def test_codec_applies_at_every_hop(rng):
    """bf16: the result is D(Q(S)) with S built from D(Q(partial)) + own at each hop."""
    x = grads(rng, 3, 64)
    q = lambda v: nm.roundtrip(v, "bf16")     # noqa: E731
    c0 = q(q(q(x[0][:64]) + x[1][:64]) + x[2][:64])        # chunk 0 = everything (K = 256 > 64)
    out = ar.allreduce(x, codec="bf16", packet=256)
    assert np.array_equal(out[1].view(np.uint32), c0.view(np.uint32))


def test_int32_saturates():
    x = [np.full(40, 2**31 - 10, np.int32), np.full(40, 100, np.int32), np.full(40, -5, np.int32)]
    out = ar.allreduce(x, dtype="int32", packet=16)
    assert out.dtype == np.int32
    # chunk 0 adds in the order 0, 1, 2: saturates at +max, then -5
    assert out[0][0] == 2**31 - 1 - 5


def test_single_rank_is_a_copy(rng):
    x = grads(rng, 1, 33)
    assert np.array_equal(ar.allreduce(x, codec="bfp4")[0], x[0])


def test_reduce_scatter_then_allgather_is_allreduce(rng):
    n, length = 4, 999
    x = grads(rng, n, length)
    rs = ar.reduce_scatter(x, packet=16)
    plan = ar.Plan(n, length, 16)
    for r in range(n):
        own = plan.chunk((r + 1) % n)
        assert not rs[r][:own.start].any() and not rs[r][own.stop:].any()
    assert np.array_equal(ar.allgather(list(rs), packet=16), ar.allreduce(x, packet=16))


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"codec": "zip"}, ValueError, "unknown codec 'zip'"),
    ({"dtype": "fp64"}, ValueError, "dtype must be one of"),
    ({"dtype": "int32", "codec": "bf16"}, ValueError, "uncompressed"),
    ({"packet": 100}, ValueError, "multiple of 16"),
])
def test_bad_arguments(rng, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ar.allreduce(grads(rng, 2, 10), **kwargs)
    with pytest.raises(ValueError, match="same number of elements"):
        ar.allreduce([np.zeros(3, np.float32), np.zeros(4, np.float32)])
    with pytest.raises(TypeError, match="32-bit"):
        ar.allreduce([np.zeros(3, np.float64)] * 2)


def test_ring_bound():
    # 2 ranks, 512 elements, P = 256: each rank sends 2 x (N-1) = 2 chunks of one 256-element packet
    b = ar.ring_bound_cycles(2, 512, 10.0, packet=256, header_bytes=100)
    assert b == 2 * (1024 + 100) / 10.0


@pytest.mark.parametrize("codec", names(Codec))
def test_traffic_decodes_to_the_result(rng, codec):
    n, length, p = 4, 1500, 64
    x = grads(rng, n, length)
    plan, sends = ar.ring_traffic(x, codec=codec, packet=p)
    want = ar.allreduce(x, codec=codec, packet=p)
    assert len(sends) == 2 * (n - 1) * sum(plan.packets(c) for c in range(n))
    got = np.full((n, length), np.nan, np.float32)
    for s in sends:
        if s.allgather:
            got[(s.src + 1) % n, s.offset:s.offset + s.count] = nm.decompress(s.payload, codec, s.count)
    for r in range(n):                  # the owner keeps D(Q(S)) of its chunk without receiving it
        own = plan.chunk((r + 1) % n)
        got[r, own] = want[r, own]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # rank r sends every chunk but r+1 in the reduce-scatter and every chunk but r+2 in the all-gather
    per_link = np.bincount([s.src for s in sends], minlength=n)
    total = sum(plan.packets(c) for c in range(n))
    assert list(per_link) == [2 * total - plan.packets((r + 1) % n) - plan.packets((r + 2) % n) for r in range(n)]


@pytest.mark.parametrize("op", ar.OPS)
@pytest.mark.parametrize("n, length, p, lag", [(2, 1000, 16, 1), (3, 5000, 64, 4), (5, 777, 16, 2), (8, 20000, 256, 8)])
def test_schedule_consumes_in_arrival_order(n, length, p, lag, op):
    """Each rank consumes its receive queue in exactly the order the previous rank sends."""
    plan = ar.Plan(n, length, p)
    for r in range(n):
        prev = [(ph, k, c) for ph, k, c, kind in ar.rank_schedule((r - 1) % n, plan, lag, op) if ar.sends_in(kind)]
        mine = [(ph - 1, k, c) for ph, k, c, kind in ar.rank_schedule(r, plan, lag, op) if ar.receives_in(kind)]
        assert mine == prev
    # and it covers exactly the packets of ring_traffic, at the same steps
    _, sends = ar.ring_traffic([np.zeros(length, np.float32)] * n, packet=p, op=op)
    sent = sorted((r, ph, k) for r in range(n) for ph, k, c, kind in ar.rank_schedule(r, plan, lag, op)
                  if ar.sends_in(kind))
    assert sent == sorted((s.src, s.step, (s.offset - plan.chunk(s.chunk).start) // p) for s in sends)


@pytest.mark.parametrize("codec", ["none", "bf16", "bfp4"])
def test_halves_traffic_and_bound(rng, codec):
    """The reduce-scatter sends exactly the all-reduce's first N-1 steps; the all-gather's packets carry
    Q of each owner's input and decode to ar.allgather; each bound is that half's busiest link."""
    n, length, p = 5, 1234, 32
    x = grads(rng, n, length)
    plan, full = ar.ring_traffic(x, codec=codec, packet=p)
    _, rs = ar.ring_traffic(x, codec=codec, packet=p, op="reduce_scatter")
    _, ag = ar.ring_traffic(x, codec=codec, packet=p, op="allgather")
    assert rs == [s for s in full if s.step < n - 1]
    assert [(s.step, s.src, s.offset) for s in ag] == [(s.step, s.src, s.offset) for s in full if s.allgather]
    want = ar.allgather(x, codec=codec, packet=p)
    for s in ag:
        got = nm.decompress(s.payload, codec, s.count) if codec != "none" else np.frombuffer(s.payload, np.float32)
        assert np.array_equal(got.view(np.uint32), want[0, s.offset:s.offset + s.count].view(np.uint32))
    b = {op: ar.ring_bound_cycles(n, length, 10.0, codec, p, op=op) for op in ar.OPS}
    assert b["reduce_scatter"] + b["allgather"] >= b["allreduce"] >= max(b["reduce_scatter"], b["allgather"])
    for op, sends in (("reduce_scatter", rs), ("allgather", ag)):
        per_link = [sum(len(s.payload) + 98 for s in sends if s.src == r) for r in range(n)]
        assert b[op] == pytest.approx(max(per_link) / 10.0)
    with pytest.raises(ValueError, match="op must be one of"):
        ar.ring_traffic(x, op="broadcast")
    for op, sends in (("allreduce", full), ("reduce_scatter", rs), ("allgather", ag)):   # the shape alone
        assert ar.ring_sends(n, length, p, op)[1] == [(s.step, s.src, s.chunk, s.count) for s in sends]


def test_schedule_model_meets_the_bound_without_latency():
    plan = ar.Plan(4, 100_000, 256)
    for codec in ("none", "bfp8"):
        bound = ar.ring_bound_cycles(4, 100_000, 40.0, codec, 256)
        assert ar.schedule_cycles(plan, codec, 40.0, 0) == pytest.approx(bound)
        assert ar.schedule_cycles(plan, codec, 40.0, 250, lag=16) < 1.1 * bound
        assert ar.schedule_cycles(plan, codec, 40.0, 250, lag=1) > 1.3 * bound


@pytest.mark.parametrize("n, length", [(1, 100), (3, 901), (4, 1001), (8, 300)])
def test_host_bytes_is_what_each_rank_writes(n, length):
    """The reduce-scatter writes each rank's own chunk only; the chunks tile the tensor."""
    plan = ar.Plan(n, length, 64)
    assert [plan.host_bytes(r, "allreduce") for r in range(n)] == [4 * length] * n
    assert [plan.host_bytes(r, "allgather") for r in range(n)] == [4 * length] * n
    rs = [plan.host_bytes(r, "reduce_scatter") for r in range(n)]
    assert sum(rs) == 4 * length
    assert rs == [4 * len(range(length)[plan.chunk((r + 1) % n)]) for r in range(n)]


def test_datapath_bound_counts_every_packets_beats():
    """The busiest block moves the whole tensor a beat at a time; a packet's partial last beat is a beat."""
    assert ar.datapath_bound_cycles(4, 1 << 20, 512, 256) == 65_536
    assert ar.datapath_bound_cycles(8, 1 << 20, 64, 256) == 524_288
    for op in ar.OPS:
        assert ar.datapath_bound_cycles(4, 1 << 20, 512, 256, op) == 65_536
    # chunks of 256, 256, 256 and 232 elements: 16 + 16 + 16 + ceil(928 / 64) beats
    assert ar.datapath_bound_cycles(4, 1000, 512, 256) == 63
    # 3 ranks, 100 elements of P = 16: chunks of 48, 48, 4 -> 3 + 3 packets of 1 beat, then 4 elements = 1 beat
    assert ar.datapath_bound_cycles(3, 100, 512, 16) == 7
    with pytest.raises(ValueError, match="op must be one of"):
        ar.datapath_bound_cycles(4, 1000, op="broadcast")


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("codec", names(Codec))
@pytest.mark.parametrize("width", [64, 512, 1024])
@pytest.mark.parametrize("latency", [0, 250, 2000])
def test_chosen_lag_covers_a_hop_where_the_datapath_binds(n, codec, width, latency):
    """Where the datapath binds, the chosen lag is the smallest whose keys cover a hop (lag - 1 of them do
    not); where the link binds, it is LAG's reset value."""
    L, P, B = 1 << 20, 256, 40.0
    lag = ar.chosen_lag(n, L, codec, width, P, B, latency)
    ring = ar.ring_bound_cycles(n, L, B, codec, P)
    datapath = ar.datapath_bound_cycles(n, L, width, P)
    if datapath < ar.DATAPATH_BINDS * ring:
        assert lag == DEFAULT_LAG
        return
    key = max(ring, datapath) / (ar.Plan(n, L, P).chunk_elems // P)
    hop = latency + ar.NIC_HOP_CYCLES
    assert 1 <= lag <= 255 and lag * key >= hop
    assert lag == 1 or (lag - 1) * key < hop


def test_chosen_lag_at_the_measured_points():
    """The measured rings (docs/collective_engine.md, W = 512, 125-cycle links: 250 a hop, 1M): bfp8 and bfp4 run lag 5
    at N = 4 and 3 at N = 8 (the smallest measured to cover a hop); the link-bound codecs, and every codec on
    the wide NIC, keep LAG's reset value 8."""
    pick = lambda n, codec, width=512: ar.chosen_lag(n, 1 << 20, codec, width, 256, 40.0, 250)
    assert [pick(4, c) for c in ("bfp8", "bfp4")] == [5, 5]
    assert [pick(8, c) for c in ("bfp8", "bfp4")] == [3, 3]
    assert {pick(n, c) for n in (4, 8) for c in ("none", "fp16", "bf16")} == {DEFAULT_LAG}
    assert {pick(4, c, 1024) for c in names(Codec)} == {DEFAULT_LAG}
    assert pick(1, "bfp8") == DEFAULT_LAG
    # a chunk shorter than the default lag's fill keeps it: 4 x 16K (16 packets a chunk, fewer than 8 x 3)
    # and 8 x 64K (32, fewer than 8 x 7); 4 x 64K and 8 x 256K take the covering lag
    small = lambda n, L: ar.chosen_lag(n, L, "bfp8", 512, 256, 40.0, 250)
    assert [small(4, 1 << 14), small(8, 1 << 16), small(4, 1 << 16), small(8, 1 << 18)] == [DEFAULT_LAG, DEFAULT_LAG, 5, 3]
    with pytest.raises(ValueError):
        ar.chosen_lag(4, 1 << 20, "bfp8", 512, 256, 40.0, 250, op="broadcast")
