"""Golden model of the ring collectives, exactly as docs/allreduce.md states them.

Everything here is NumPy plus the element rules of :mod:`host_driver.models.numerics` (fp32 addition, saturating
int32 addition, the wire codecs). The RTL collective engine and the model backend must match these
functions bit for bit.
"""

import math
from dataclasses import dataclass

import numpy as np

from contract.enums import Codec, Collective, Dtype, PhaseKind, names
from contract.protocol import DEFAULT_LAG
from host_driver.models import numerics as nm

#: element type names (``contract.enums.Dtype``)
DTYPES = tuple(names(Dtype))
#: the ring collectives: the whole ring, its first half, its second half (``contract.enums.Collective``)
OPS = tuple(names(Collective))


def _check_op(op):
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    return op


def phases(n: int, op: str = "allreduce") -> range:
    """The phases a rank runs: all 2N-1 for the all-reduce, 0 .. N-1 for the reduce-scatter (it ends by
    keeping S) and N-1 .. 2N-2 for the all-gather (it starts by sending its own contribution)."""
    _check_op(op)
    return range(n - 1 if op == "allgather" else 0, n if op == "reduce_scatter" else 2 * n - 1)


@dataclass(frozen=True)
class Plan:
    """How L elements split over N ranks with P elements per packet."""
    nodes: int
    elements: int
    packet: int

    def __post_init__(self):
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.elements < 1:
            raise ValueError(f"elements must be >= 1, got {self.elements}")
        if self.packet < 16 or self.packet % 16:
            raise ValueError(f"packet must be a positive multiple of 16, got {self.packet}")

    @property
    def chunk_elems(self) -> int:
        """K = ceil(L / (N P)) P: every chunk but the last few is K elements; K is a multiple of P."""
        n, p = self.nodes, self.packet
        return -(-self.elements // (n * p)) * p

    def chunk(self, c: int) -> slice:
        """Elements of chunk c (possibly empty)."""
        k = self.chunk_elems
        lo = min(c * k, self.elements)
        return slice(lo, min((c + 1) * k, self.elements))

    def packets(self, c: int) -> int:
        s = self.chunk(c)
        return -(-(s.stop - s.start) // self.packet)

    def host_bytes(self, rank: int, op: str = "allreduce") -> int:
        """Bytes rank ``rank`` writes to its host (a completion's ``host_bytes``): the whole result, or for
        the reduce-scatter its own chunk, (rank + 1) mod N, only."""
        _check_op(op)
        if op == "reduce_scatter" and self.nodes > 1:
            s = self.chunk((rank + 1) % self.nodes)
            return 4 * (s.stop - s.start)
        return 4 * self.elements


def _q(x, codec):
    """Q then D on one chunk (blocks start at the chunk start): what the next rank decodes."""
    return x if codec == "none" else nm.as_bits(nm.roundtrip(x, codec))


def _add(received, own, dtype):
    if dtype == "fp32":
        return nm.as_bits(nm.add_f32(received, own))
    s, _ = nm.add_i32(received.view(np.int32), own.view(np.int32))
    return s.view(np.uint32)


def check_inputs(inputs, codec, dtype):
    """The inputs of a collective (one 32-bit array per rank, equal sizes) as uint32 views; ValueError or
    TypeError naming what is wrong."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if codec not in Codec.__members__:
        raise ValueError(f"unknown codec {codec!r}; one of {', '.join(names(Codec))}")
    if dtype == "int32" and codec != "none":
        raise ValueError("int32 data travels uncompressed: codec must be 'none'")
    x = [np.ascontiguousarray(a).reshape(-1) for a in inputs]
    if not x:
        raise ValueError("no inputs")
    if any(a.size != x[0].size for a in x):
        raise ValueError(f"all ranks need the same number of elements, got {[a.size for a in x]}")
    if any(a.dtype.itemsize != 4 for a in x):
        raise TypeError("inputs must be 32-bit arrays (float32, int32 or uint32 bit patterns)")
    return [a.view(np.uint32) for a in x]


def reduce_scatter_sums(inputs, codec="none", dtype="fp32", packet=256):
    """S for every chunk: the partial sum the ring builds, before the final Q/D. Returns (plan, list of
    bit-pattern arrays, chunk c at index c)."""
    x = check_inputs(inputs, codec, dtype)
    n = len(x)
    plan = Plan(n, x[0].size, packet)
    sums = []
    for c in range(n):
        s = plan.chunk(c)
        # chunk c starts at rank c and travels c -> c+1 -> ... -> c+N-1
        partial = x[c][s]
        for hop in range(1, n):
            r = (c + hop) % n
            partial = _add(_q(partial, codec), x[r][s], dtype)
        sums.append(partial)
    return plan, sums


def allreduce(inputs, codec="none", dtype="fp32", packet=256) -> np.ndarray:
    """The ring all-reduce: an (N, L) array, every row identical (bit patterns viewed as ``dtype``)."""
    x = check_inputs(inputs, codec, dtype)
    if len(x) == 1:
        return _as(np.stack(x), dtype)
    plan, sums = reduce_scatter_sums(x, codec, dtype, packet)
    out = np.empty(plan.elements, np.uint32)
    for c, s in enumerate(sums):
        out[plan.chunk(c)] = _q(s, codec)
    return _as(np.tile(out, (len(x), 1)), dtype)


def reduce_scatter(inputs, codec="none", dtype="fp32", packet=256):
    """(N, L) array: rank r holds R = D(Q(S)) of chunk (r+1) mod N at that chunk's place, zeros elsewhere."""
    x = check_inputs(inputs, codec, dtype)
    n = len(x)
    if n == 1:
        return _as(np.stack(x), dtype)
    plan, sums = reduce_scatter_sums(x, codec, dtype, packet)
    out = np.zeros((n, plan.elements), np.uint32)
    for r in range(n):
        c = (r + 1) % n
        out[r, plan.chunk(c)] = _q(sums[c], codec)
    return _as(out, dtype)


def allgather(inputs, codec="none", dtype="fp32", packet=256):
    """(N, L) array: rank r contributes chunk (r+1) mod N of its input; every rank ends with D(Q(.)) of
    every contribution (its own included), identical on all ranks."""
    x = check_inputs(inputs, codec, dtype)
    n = len(x)
    if n == 1:
        return _as(np.stack(x), dtype)
    plan = Plan(n, x[0].size, packet)
    out = np.empty(plan.elements, np.uint32)
    for r in range(n):
        s = plan.chunk((r + 1) % n)
        out[s] = _q(x[r][s], codec)
    return _as(np.tile(out, (n, 1)), dtype)


def _as(bits, dtype):
    return bits.view(np.float32 if dtype == "fp32" else np.int32)


def ring_bound_cycles(nodes: int, elements: int, link_bytes_per_cycle: float, codec="none", packet=256,
                      header_bytes: int = 74 + 4 + 8 + 12, op: str = "allreduce") -> float:
    """The ring's lower bound in cycles: the busiest rank's link time. Rank r sends every chunk but r+1 in
    the reduce-scatter and every chunk but r+2 in the all-gather, each as packets of at most P elements
    plus ``header_bytes`` per frame (Ethernet/IPv4/UDP/ainic headers, FCS, preamble and inter-frame gap by
    default). ``op`` selects either half alone."""
    _check_op(op)
    if nodes == 1:
        return 0.0
    plan = Plan(nodes, elements, packet)

    def chunk_bytes(c):
        s = plan.chunk(c)
        n = s.stop - s.start
        full, rest = divmod(n, packet)
        out = full * (nm.codec_bytes(codec, packet) + header_bytes)
        return out + (nm.codec_bytes(codec, rest) + header_bytes if rest else 0)
    total = sum(chunk_bytes(c) for c in range(nodes))
    rs = [total - chunk_bytes((r + 1) % nodes) for r in range(nodes)]
    ag = [total - chunk_bytes((r + 2) % nodes) for r in range(nodes)]
    per_rank = {"allreduce": [a + b for a, b in zip(rs, ag)], "reduce_scatter": rs, "allgather": ag}[op]
    return max(per_rank) / link_bytes_per_cycle


def datapath_bound_cycles(nodes: int, elements: int, width: int = 512, packet: int = 256,
                          op: str = "allreduce") -> int:
    """The NIC datapath's lower bound in cycles: the busiest block's beats, at one W-bit beat a cycle. In each
    of the three collectives some block of every rank moves the whole tensor (the all-reduce and the
    reduce-scatter read every own packet from the host and compress it; the all-reduce and the all-gather
    write every packet of the result and decode it), a packet of c elements in ceil(4c / (W/8)) beats."""
    _check_op(op)
    plan, B = Plan(nodes, elements, packet), width // 8
    beats = 0
    for c in range(nodes):
        s = plan.chunk(c)
        full, rest = divmod(s.stop - s.start, packet)
        beats += full * -(-4 * packet // B) + -(-4 * rest // B)
    return beats


#: Cycles a packet spends in a NIC on its way round the ring, from its frame's arrival to the first byte of
#: the frame it goes on in, beyond the network's own latency (store-and-forward of the frame on either side,
#: receive, decode, reduce, encode, transmit). The W = 512 cluster at 125-cycle links (a hop is two of them,
#: NIC -> Ethernet switch -> NIC: 250 cycles) shows a hop of 260 .. 320 cycles in all: at N = 4 bfp8
#: (64-cycle keys) lag 4 does not cover it (0.87 of what binds) and lag 5 does (0.97); at N = 8 (130-cycle
#: keys) lag 2 does not (0.80) and lag 3 does (0.92). A 2-rank ring at lag 1 times one: 298 cycles from a
#: frame's first byte leaving rank 1 to the first byte of the frame rank 0 sends on (docs/collective_engine.md).
NIC_HOP_CYCLES = 50
#: the datapath binds when its bound is at least this share of the link's
DATAPATH_BINDS = 0.95


def chosen_lag(nodes: int, elements: int, codec: str, width: int, packet: int, link_bytes_per_cycle: float,
               hop_latency: int, op: str = "allreduce") -> int:
    """The lag a ring collective should run with (register LAG; the NIC runs at most ``credits.max_lag``).
    ``hop_latency``: the network's cycles from one NIC to the next (the cluster harness: two links, NIC ->
    Ethernet switch -> NIC).

    Where the NIC's datapath binds (its bound at least ``DATAPATH_BINDS`` of the ring's), a rank's reads and
    its writes are offset by the time its first result takes to come round the ring, N - 1 hops of at least
    ``lag`` keys each: the best lag is the smallest whose keys (a key: one packet of every phase, at the
    binding rate) cover a hop of ``hop_latency + NIC_HOP_CYCLES``. Where the link binds, it sends in every
    phase, and a deeper lag keeps it busy while the ring fills: ``protocol.DEFAULT_LAG``. So too where a
    chunk has fewer packets than ``DEFAULT_LAG`` x (N - 1), the default lag's fill: such a run is all start
    and end, and the deeper lag was the faster there (bfp8, W = 512: 4 x 16K 2,453 cycles at lag 8, 2,751 at
    5; 8 x 64K 7,796 at 7, 7,940 at 3; from 4 x 64K and 8 x 256K on the covering lag wins, 3 % and 10 %)."""
    _check_op(op)
    if nodes < 2:
        return DEFAULT_LAG
    keys = Plan(nodes, elements, packet).chunk_elems // packet       # packets a chunk (K is a multiple of P)
    if keys < DEFAULT_LAG * (nodes - 1):
        return DEFAULT_LAG          # a chunk shorter than the default lag's fill: the run is all start and end
    ring = ring_bound_cycles(nodes, elements, link_bytes_per_cycle, codec, packet, op=op)
    datapath = datapath_bound_cycles(nodes, elements, width, packet, op)
    if datapath < DATAPATH_BINDS * ring:
        return DEFAULT_LAG
    key_cycles = max(ring, datapath) / keys
    return max(1, min(255, math.ceil((hop_latency + NIC_HOP_CYCLES) / key_cycles)))


@dataclass(frozen=True)
class Send:
    """One packet of the ring: at ``step`` (0 .. 2N-3; reduce-scatter first) rank ``src`` sends elements
    [offset, offset+count) of chunk ``chunk`` to rank (src+1) mod N; ``payload`` is Q of them."""
    step: int
    src: int
    chunk: int
    offset: int
    count: int
    last_of_chunk: bool
    allgather: bool
    payload: bytes


def _ring_steps(n: int, op: str) -> list:
    """(step, sender, chunk) of every chunk a ring collective ``op`` sends, in (step, sender) order. Steps
    keep their all-reduce numbering: the reduce-scatter is steps 0 .. N-2 (chunk c from rank c+step), the
    all-gather N-1 .. 2N-3 (chunk c from rank c-1+t)."""
    keys = []
    for c in range(n):
        if op != "allgather":
            keys += [(step, (c + step) % n, c) for step in range(n - 1)]
        if op != "reduce_scatter":
            keys += [(n - 1 + t, (c - 1 + t) % n, c) for t in range(n - 1)]
    return sorted(keys)


def _packets(plan: "Plan", c: int, packet: int) -> list:
    """(first element within chunk c, element count) of each of its packets."""
    s = plan.chunk(c)
    return [(k, min(packet, s.stop - s.start - k)) for k in range(0, s.stop - s.start, packet)]


def ring_sends(nodes: int, elements: int, packet: int = 256, op: str = "allreduce"):
    """The shape of :func:`ring_traffic` without the data: (step, sender, chunk, element count) per packet,
    in the same order. Enough for frame and byte counts (``numerics.codec_bytes``), and fast at any L."""
    _check_op(op)
    plan = Plan(nodes, elements, packet)
    return plan, [(step, src, c, count) for step, src, c in _ring_steps(nodes, op)
                  for _, count in _packets(plan, c, packet)]


def ring_traffic(inputs, codec="none", dtype="fp32", packet=256, op="allreduce"):
    """Every packet of a ring collective (``op``), in (step, sender, element) order, with its exact
    payload bytes. Decoding the all-gather's packets gives :func:`allreduce`'s result (tests check it).
    Steps keep their all-reduce numbering: the reduce-scatter alone is steps 0 .. N-2, the all-gather
    alone N-1 .. 2N-3, where it sends Q of each owner's own input instead of Q(S)."""
    x = check_inputs(inputs, codec, dtype)
    _check_op(op)
    n = len(x)
    plan = Plan(n, x[0].size, packet)
    sent = {}                            # (step, sender) -> the bit patterns it sends of its chunk
    for c in range(n):
        s = plan.chunk(c)
        partial = x[c][s]
        for step in range(n - 1):        # reduce-scatter: sender c+step
            sent[(step, (c + step) % n)] = partial
            partial = _add(_q(partial, codec), x[(c + step + 1) % n][s], dtype)
        if op == "allgather":            # the owner c-1 contributes its own input of chunk c
            partial = x[(c - 1) % n][s]
        for t in range(n - 1):           # all-gather: Q(S) from the owner c-1, forwarded unchanged
            sent[(n - 1 + t, (c - 1 + t) % n)] = partial
    sends = []
    for step, src, c in _ring_steps(n, op):
        start, size = plan.chunk(c).start, plan.chunk(c).stop - plan.chunk(c).start
        for k, count in _packets(plan, c, packet):
            part = sent[(step, src)][k:k + count]
            sends.append(Send(step, src, c, start + k, count, k + packet >= size, step >= n - 1,
                              nm.compress(part, codec) if codec != "none" else part.tobytes()))
    return plan, sends


#: what a rank does in each phase p of an all-reduce (N >= 2); phase p works on chunk (r - p) mod N
PHASE_KINDS = {
    PhaseKind.send: "read own packet, Q, send (p = 0)",
    PhaseKind.reduce: "receive, D, + own, Q, send (p = 1 .. N-2)",
    PhaseKind.final: "receive, D, + own, Q, send; D(Q(S)) to host (p = N-1)",
    PhaseKind.forward: "receive, send unchanged; D to host (p = N .. 2N-3)",
    PhaseKind.last: "receive, D to host (p = 2N-2)",
    PhaseKind.gather: "read own packet, Q, send; D(Q(own)) to host (p = N-1 of an all-gather alone)",
    PhaseKind.scatter_end: "receive, D, + own, Q; D(Q(S)) to host, nothing sent (p = N-1 of a reduce-scatter alone)",
}


def phase_kind(p: int, n: int, op: str = "allreduce") -> PhaseKind:
    if p == 0:
        return PhaseKind.send
    if p < n - 1:
        return PhaseKind.reduce
    if p == n - 1:
        return {"allreduce": PhaseKind.final, "reduce_scatter": PhaseKind.scatter_end,
                "allgather": PhaseKind.gather}[op]
    return PhaseKind.forward if p < 2 * n - 2 else PhaseKind.last


def sends_in(kind: PhaseKind) -> bool:
    """Whether an item of this kind transmits a packet."""
    return kind not in (PhaseKind.last, PhaseKind.scatter_end)


def receives_in(kind: PhaseKind) -> bool:
    """Whether an item of this kind consumes a received packet."""
    return kind not in (PhaseKind.send, PhaseKind.gather)


def rank_schedule(rank: int, plan: Plan, lag: int = 1, op: str = "allreduce"):
    """The order in which one rank's engine works: every (phase, packet) item, by the key
    d = packet + lag * phase, phase ascending among equal keys. Item (p, k) needs the previous rank's item
    (p-1, k), whose key is exactly ``lag`` smaller, so every rank consumes its receive queue in the order the
    previous rank filled it (no packet is ever stuck behind another), and ``lag`` keys of other work hide
    each hop's latency; the receive buffer must hold about ``lag`` packets per phase in flight.
    ``op`` restricts the phases (:func:`phases`). Returns [(phase, packet, chunk, kind)]."""
    n = plan.nodes
    items = []
    for p in phases(n, op):
        c = (rank - p) % n
        for k in range(plan.packets(c)):
            items.append((k + lag * p, p, k, c))
    items.sort()
    return [(p, k, c, phase_kind(p, n, op)) for _, p, k, c in items]


def schedule_cycles(plan: Plan, codec="none", link_bytes_per_cycle=40.0, latency_cycles=250,
                    overhead_bytes=74 + 24, lag: int = 1, op: str = "allreduce"):
    """Cycles for the all-reduce if every rank works through :func:`rank_schedule` with its link as the
    only limit (one frame at a time at ``link_bytes_per_cycle``, ``latency_cycles`` from the end of a
    frame on the sender to its use at the receiver). A performance model of the engine, not a
    measurement."""
    n = plan.nodes
    if n == 1:
        return 0.0
    sched = [rank_schedule(r, plan, lag, op) for r in range(n)]
    sent = [dict() for _ in range(n)]           # (p, k) -> time the frame is fully at the next rank
    free = [0.0] * n
    pos = [0] * n
    done = 0
    total = sum(len(s) for s in sched)
    while done < total:
        progressed = False
        for r in range(n):
            while pos[r] < len(sched[r]):
                p, k, c, kind = sched[r][pos[r]]
                start = free[r]
                if receives_in(kind):
                    arrival = sent[(r - 1) % n].get((p - 1, k))
                    if arrival is None:
                        break
                    start = max(start, arrival)
                s = plan.chunk(c)
                count = min(plan.packet, s.stop - s.start - k * plan.packet)
                wire = nm.codec_bytes(codec, count) + overhead_bytes
                if sends_in(kind):
                    free[r] = start + wire / link_bytes_per_cycle
                    sent[r][(p, k)] = free[r] + latency_cycles
                else:
                    free[r] = start
                pos[r] += 1
                done += 1
                progressed = True
        if not progressed:
            raise RuntimeError("schedule deadlock")        # cannot happen: see rank_schedule
    return max(free)
