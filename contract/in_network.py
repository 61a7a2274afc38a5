"""In-network aggregation: what the aggregation switch, the NIC's switch mode and the models share
(docs/in_network.md).

A job's workers send their packets to the switch as contributions (``FrameOpcode.aggregate``). Packet j of
a collective has the job-wide packet number g = first + j (``psn``; it keeps counting across collectives)
and goes to slot ``g mod S``, set ``(g div S) mod 2`` of the job's window of S slots (S a power of two).
The switch sums a round's contributions exactly, and when every worker has contributed it sends the sum to
all of them (``FrameOpcode.aggregated``). A worker sends packet g + S only after it has the result of g.
Contributions and results are numbered on their links (:data:`SEQ_MOD`, :func:`seq_gap`): a lost
contribution is asked for again by the switch (``FrameOpcode.agg_nack``), a lost result by the worker.

Faults: every link of the cluster harness can drop, duplicate and corrupt frames, decided per frame by
:class:`FaultStream`, deterministically for a seed; the RTL injector and the model draw the same numbers.
"""

from dataclasses import dataclass

#: ``dst_rank`` of a contribution and ``src_rank`` of a result: the switch
SWITCH_RANK = 0xFFFF
#: ports of an aggregation switch
MIN_SWITCH_PORTS, MAX_SWITCH_PORTS = 2, 16
#: the switch ``make verilog`` and ``ainic verilog`` build as ``ainic_switch.v`` (docs/integration.md): 4 ports, a
#: pool of 64 slots of up to 256 elements
SWITCH_DEFAULT = {"ports": 4, "pool_slots": 64, "max_packet": 256}
#: workers of one job (the bitmap of a slot set has one bit per worker)
MAX_JOB_WORKERS = 16
#: jobs one aggregation switch holds at once (its job table's entries)
MAX_SWITCH_JOBS = 8
#: pool slots of an aggregation switch: at most 2**POOL_BITS
POOL_BITS = 12
#: largest window a job may have (slots; a power of two); a NIC keeps at most MAX_NIC_WINDOW in flight
MAX_WINDOW = 256
MAX_NIC_WINDOW = 128
#: bytes of encoded frames a NIC keeps for its resends (its frame store): a window of MAX_NIC_WINDOW frames
#: of 256 fp32. A job whose window of frames fits (:func:`frames_fit`) resends from the copy; one whose
#: frames do not re-reads and re-encodes each resend from host memory (docs/in_network.md, "The worker")
NIC_FRAME_STORE_BYTES = 128 * 1024
#: a job's window by default: above the bandwidth-delay product of an 80 Gb/s link with 0.5 us links
#: (docs/in_network.md, "Sizing")
DEFAULT_WINDOW = 32
#: cycles a worker waits for a result after its contribution left, before it sends it again; each resend
#: of the same packet doubles the wait, up to ``RETRANSMIT_TIMEOUT << BACKOFF_MAX``
RETRANSMIT_TIMEOUT = 2048
BACKOFF_MAX = 4
#: a worker's timer runs out on a packet only once a later packet's result has come or its results have
#: paused for ``timeout >> PAUSE_SHIFT`` cycles: a late result comes in order, behind the others
#: (docs/in_network.md, "The worker")
PAUSE_SHIFT = 3
#: cycles without a new result after which a worker ends the collective with status ``timeout``
DEADLINE = 1_000_000
#: psn arithmetic is modulo 2**32; g is newer than k when 0 < (g - k) mod 2**32 < 2**31
PSN_MOD = 1 << 32


def psn_newer(g: int, k: int) -> bool:
    """Whether packet number ``g`` comes after ``k`` (modulo 2**32)."""
    return 0 < (g - k) % PSN_MOD < PSN_MOD // 2


#: a link's frames of one kind are numbered modulo 2**16 (``chunk``: contributions by each worker, results
#: to each port), each naming the psn of the one before (``reserved``): a gap shows a loss at once
SEQ_MOD = 1 << 16


def seq_gap(last: int, seq: int) -> int:
    """How many frames are missing between the newest frame numbered ``last`` and one numbered ``seq``: 0 if
    ``seq`` follows ``last``, n if n were lost, -1 for a copy or an older frame (modulo 2**16)."""
    d = (seq - last) % SEQ_MOD
    return d - 1 if 0 < d < SEQ_MOD // 2 else -1


def take_number(last, seq: int) -> tuple:
    """A frame numbered ``seq`` taken after the newest so far, ``last`` (None: none yet): (the newest number
    now, whether the frame just before this one was lost). A copy or an older frame leaves the newest."""
    if last is None:
        return seq, False
    gap = seq_gap(last, seq)
    return (last if gap < 0 else seq), gap >= 1


def frame_stride(frame_bytes: int, width: int) -> int:
    """log2 of the beats of W bits (rounded up to a power of two) that a frame of ``frame_bytes`` bytes of
    payload takes in a frame store."""
    beats = max(1, -(-frame_bytes // (width // 8)))
    return (beats - 1).bit_length()


def frames_fit(window: int, frame_bytes: int, width: int, store_bytes: int = NIC_FRAME_STORE_BYTES) -> bool:
    """Whether a NIC's frame store (``store_bytes``: its build's, ``contract.build.NicBuild.frame_store_bytes``)
    holds a window of ``window`` frames of up to ``frame_bytes`` bytes of payload (the NIC then resends from
    its copies)."""
    return window << frame_stride(frame_bytes, width) <= store_bytes * 8 // width


def is_power_of_two(n: int) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n & (n - 1) == 0


def slot_of(g: int, window: int) -> tuple:
    """(slot, set) of packet number ``g`` in a window of ``window`` slots (a power of two)."""
    if not is_power_of_two(window) or window > MAX_WINDOW:
        raise ValueError(f"window must be a power of two in 1 .. {MAX_WINDOW}, got {window!r}")
    return g % window, (g // window) % 2


# -- fault injection -------------------------------------------------------------------------------------
#: a probability is a 16-bit threshold: a frame is hit when a 16-bit random number is below it
PROB_ONE = 1 << 16


def threshold(p: float) -> int:
    """The 16-bit threshold of probability ``p`` (0 .. 65535, i.e. at most 1 - 2**-16)."""
    if not 0 <= p <= 1:
        raise ValueError(f"a probability must be in [0, 1], got {p!r}")
    return min(PROB_ONE - 1, round(p * PROB_ONE))


def xorshift32(s: int) -> int:
    """One step of Marsaglia's xorshift32 (13, 17, 5): the fault injector's generator; never 0 from non-0."""
    s ^= (s << 13) & 0xFFFFFFFF
    s ^= s >> 17
    s ^= (s << 5) & 0xFFFFFFFF
    return s


def link_seed(seed: int, link: int) -> int:
    """The generator state a link starts from: ``seed`` and the link's number mixed (never 0). Link 2i is
    node i's uplink (NIC to switch), 2i + 1 its downlink."""
    s = (seed * 0x9E3779B1 + (link + 1) * 0x85EBCA77) & 0xFFFFFFFF
    return s or 1


@dataclass(frozen=True)
class FaultDecision:
    drop: bool
    corrupt: bool
    duplicate: bool


class FaultStream:
    """The decisions for consecutive frames on one link. Per frame: step the generator; the low 16 bits
    against the drop threshold, the high 16 against the corruption threshold; step again; the low 16 bits
    against the duplication threshold. A dropped frame is not corrupted or duplicated; a duplicate is an
    exact copy of what was sent (corrupted or not), right behind it."""

    def __init__(self, state: int, drop: int = 0, dup: int = 0, corrupt: int = 0):
        if not 1 <= state < 1 << 32:
            raise ValueError(f"generator state must be a non-zero 32-bit value, got {state!r}")
        for name, t in (("drop", drop), ("dup", dup), ("corrupt", corrupt)):
            if not 0 <= t < PROB_ONE:
                raise ValueError(f"{name} threshold must be in 0 .. {PROB_ONE - 1}, got {t!r}")
        self.state, self.drop, self.dup, self.corrupt = state, drop, dup, corrupt

    def next(self) -> FaultDecision:
        self.state = xorshift32(self.state)
        drop = (self.state & 0xFFFF) < self.drop
        corrupt = not drop and (self.state >> 16) < self.corrupt
        self.state = xorshift32(self.state)
        return FaultDecision(drop, corrupt, not drop and (self.state & 0xFFFF) < self.dup)


#: a two-level tree (docs/in_network.md, "Two levels"): a leaf's members take all its ports but the trunk (and
#: are a job's workers), the spine's job has a worker per leaf, one port each
MAX_TREE_LEAF_RANKS = min(MAX_JOB_WORKERS, MAX_SWITCH_PORTS - 1)
MAX_TREE_LEAVES = min(MAX_JOB_WORKERS, MAX_SWITCH_PORTS)
MAX_TREE_RANKS = MAX_TREE_LEAF_RANKS * MAX_TREE_LEAVES


def tree_groups(n: int, leaves: int) -> list:
    """The ranks behind each leaf switch of a two-level tree (docs/in_network.md, "Two levels"): ``leaves``
    contiguous groups of 0 .. n - 1, their sizes at most one apart (the first ``n % leaves`` one larger).
    A leaf holds at most :data:`MAX_TREE_LEAF_RANKS` ranks (its members' ports and its trunk), a spine at most
    :data:`MAX_TREE_LEAVES` leaves: up to :data:`MAX_TREE_RANKS` ranks in all."""
    if not isinstance(leaves, int) or isinstance(leaves, bool) or not 2 <= leaves <= min(n, MAX_TREE_LEAVES):
        raise ValueError(f"leaves must be an int in 2 .. {min(n, MAX_TREE_LEAVES)} (the ranks, at most a spine's "
                         f"{MAX_TREE_LEAVES} ports), got {leaves!r}")
    size, extra = divmod(n, leaves)
    if size + (extra > 0) > MAX_TREE_LEAF_RANKS:
        raise ValueError(f"{n} ranks on {leaves} leaves put {size + (extra > 0)} on a leaf: a leaf switch holds at "
                         f"most {MAX_TREE_LEAF_RANKS} (its {MAX_SWITCH_PORTS} ports less the trunk); give at least "
                         f"{-(-n // MAX_TREE_LEAF_RANKS)} leaves")
    groups, start = [], 0
    for k in range(leaves):
        groups.append(tuple(range(start, start + size + (k < extra))))
        start += size + (k < extra)
    return groups
