"""Golden model of in-network aggregation, exactly as docs/in_network.md states it.

* :func:`allreduce` -- the result of a switch all-reduce from the inputs alone (NumPy): what every rank
  ends with, whatever the arrival order, losses and retransmissions.
* :func:`packets` -- how a worker cuts its tensor into packets, numbers them and maps them to slots.
* :class:`SwitchModel` -- the aggregation switch, frame by frame: job table, slot pool, the decision
  table, result multicast and stored-result unicast, forwarding by MAC, counters. The RTL switch is checked
  against it packet by packet.
* :class:`WorkerModel` -- a NIC in switch mode: a self-clocked window of slots, result checks, a
  retransmission timer with back-off, a collective timeout.
* :func:`simulate` -- N workers, their links (latency, rate, the fault injection of
  ``contract.in_network.FaultStream``) and the switch, as a discrete-event simulation: the model backend
  of ``Cluster(algorithm="switch")``.
"""

import heapq
from dataclasses import dataclass, field, replace

import numpy as np

from contract.addresses import SWITCH_IP, SWITCH_MAC, leaf_ip, leaf_mac, mac_int
from contract.enums import AggDrop, Codec, DropReason, Dtype, FrameFlag, FrameOpcode
from contract.in_network import (
    BACKOFF_MAX,
    DEADLINE,
    DEFAULT_WINDOW,
    MAX_JOB_WORKERS,
    MAX_NIC_WINDOW,
    MAX_SWITCH_PORTS,
    MAX_WINDOW,
    MIN_SWITCH_PORTS,
    PAUSE_SHIFT,
    RETRANSMIT_TIMEOUT,
    SEQ_MOD,
    SWITCH_RANK,
    FaultStream,
    is_power_of_two,
    link_seed,
    psn_newer,
    slot_of,
    take_number,
    threshold,
    tree_groups,
)
from contract.protocol import FRAME_HEADER_BYTES, MAX_P, MIN_P, UDP_PORT, WIRE_OVERHEAD_BYTES
from host_driver.models import allreduce as ar
from host_driver.models import numerics as nm
from host_driver.models import protocol as proto


# -- semantics -------------------------------------------------------------------------------------------
def _check(inputs, codec, dtype, leaves=None):
    """The ring's input checks (``allreduce.check_inputs``), and a job's limits (a tree's: :func:`tree_groups`)."""
    x = ar.check_inputs(inputs, codec, dtype)
    if leaves is not None:
        tree_groups(len(x), leaves)
    elif len(x) > MAX_JOB_WORKERS:
        raise ValueError(f"a switch job has at most {MAX_JOB_WORKERS} workers, got {len(x)}")
    if x[0].size == 0:
        raise ValueError("no elements")
    return x


def reduce_bits(terms, dtype: str) -> np.ndarray:
    """The switch's sum of a stack of decoded terms ((k, n) uint32 bit patterns): fp32 exactly, rounded
    once (``numerics.exact_sum_f32``); int32 exactly, saturated once (``numerics.sum_i32``)."""
    terms = np.asarray(terms, np.uint32)
    if dtype == "fp32":
        return nm.exact_sum_f32(terms)
    return nm.sum_i32(terms.view(np.int32))[0].view(np.uint32)


def _q(bits, codec):
    """D(Q(x)) with blocks from element 0 (packets start at multiples of 16, so per packet is the same)."""
    return bits if codec == "none" else nm.as_bits(nm.roundtrip(bits, codec))


def allreduce(inputs, codec="none", dtype="fp32", leaves: int = None) -> np.ndarray:
    """The switch all-reduce: every rank gets D(Q(sum)) where sum is the exact sum of the decoded
    contributions D(Q(x_i)), rounded once (fp32) or saturated once (int32). (N, L) array of ``dtype``,
    every row identical. The packet size does not matter: codec blocks never straddle packets.

    With ``leaves`` = K (a two-level tree, :func:`tree_groups`): leaf k's partial is D(Q(its members'
    sum)), rounded (saturated) once, as one switch would give its members; the spine sums the K partials
    the same way. Each level is exact and independent of arrival order; the result is rounded twice."""
    x = _check(inputs, codec, dtype, leaves)
    groups = tree_groups(len(x), leaves) if leaves is not None else [range(len(x))]
    level = [_q(reduce_bits(np.stack([_q(x[r], codec) for r in g]), dtype), codec) for g in groups]
    out = level[0] if leaves is None else _q(reduce_bits(np.stack(level), dtype), codec)
    return np.tile(out, (len(x), 1)).view(np.float32 if dtype == "fp32" else np.int32)


def bound_cycles(elements: int, packet: int, codec: str, link_bytes_per_cycle: float,
                 overhead_bytes: int = FRAME_HEADER_BYTES + WIRE_OVERHEAD_BYTES) -> float:
    """The in-network bound: every worker's uplink carries each of its packets once (and its downlink
    each result once, at the same time), as frames with ``overhead_bytes`` each."""
    full, rest = divmod(elements, packet)
    wire = full * (nm.codec_bytes(codec, packet) + overhead_bytes)
    if rest:
        wire += nm.codec_bytes(codec, rest) + overhead_bytes
    return wire / link_bytes_per_cycle


#: cycles a round trip takes besides the two link latencies: the NIC's DMA read, encoding and send, the
#: switch's parse, decode, sum, rounding and encode, the NIC's receive (measured on the RTL cluster at W =
#: 512: a window of 16 slots of bfp8 packets is latency-bound at 407 cycles a round with 125-cycle links)
ROUND_TRIP_EXTRA = 160
#: round trips a chosen window holds: the packet's own, and two for a loss's recovery (chosen_window)
WINDOW_ROUND_TRIPS = 3


#: the retransmission timer a cluster gives a two-level tree's NICs: a leaf takes a packet's time twice
#: (docs/in_network.md, "Two levels"), so a window that covers the longer round trip takes twice as long to
#: send (8 NICs over two leaves at W = 512: 64 slots and 2,048 cycles stormed, 32 slots took 149,206 cycles,
#: 64 slots and 4,096 cycles 131,910)
TREE_RETRANSMIT_TIMEOUT = 2 * RETRANSMIT_TIMEOUT


def chosen_window(width: int, codec: str, packet: int, link_bytes_per_cycle: float, latency: int,
                  jobs: int = 1, pool: int = None, timeout: int = RETRANSMIT_TIMEOUT, leaves: int = None,
                  speedup: int = 1) -> int:
    """The window (slots per job) a cluster gives a switch job when none is asked for: the round trip
    (``2 * latency + ROUND_TRIP_EXTRA``) over the time a packet takes to leave (its frame on the link, or the
    NIC's datapath at W/32 elements a cycle, whichever is longer), :data:`WINDOW_ROUND_TRIPS` times over
    (packets go in order, so a slot held by a loss holds up every worker once the window has gone round: a
    loss is asked for and answered in about two more round trips), as a power of two; at least
    :data:`DEFAULT_WINDOW`, at most ``pool // jobs`` (the switch's slot pool shared by the jobs) and
    ``MAX_NIC_WINDOW``, and halved while its packets take the retransmission ``timeout`` or more to pass
    the switch (the NIC's time a packet over the switch's ``speedup``: a switch built wider than its links
    answers in less). A tree (``leaves``): the round trip crosses a trunk each way and a second switch, and a leaf's
    result bus takes a packet's time twice (its partial up, the spine's result down: "Two levels"), its own
    time: the NIC's over the ``speedup``; where that is longer than the NIC's time, the timer halves the window
    below the default too.
    docs/in_network.md, "Sizing the window"."""
    levels = 2 if leaves else 1
    nic, leaf = _packet_times(width, codec, packet, link_bytes_per_cycle, leaves, speedup)
    per_packet = max(nic, leaf)
    need = WINDOW_ROUND_TRIPS * levels * (2 * latency + ROUND_TRIP_EXTRA) / per_packet
    window = max(DEFAULT_WINDOW, 1 << max(int(need) - 1, 0).bit_length())
    limit = min(MAX_NIC_WINDOW, (pool or MAX_WINDOW) // jobs)
    window = min(window, 1 << (limit.bit_length() - 1))
    # a worker ahead of a late one waits for it with its whole window at the switch: a window that takes the
    # timer to pass the switch times out and resends in a storm (W = 512, bfp8, N = 8, 0.1 % loss, 128 slots
    # of 16 cycles, the timer's 2,048: 45,000 resends for 142 frames lost; 64 slots: 81; the switch at twice
    # the width, 128 slots: 61 resends for 61 frames lost; docs/in_network.md)
    # a leaf's result bus slower than the NICs (a tree at the NICs' width) holds the whole window queued even
    # with no loss: there the timer bounds the window below the default too (W = 64, bfp8, 8 NICs over two
    # leaves, 65,536 fp32: 32 slots of 256 cycles, 369,379 cycles and 3,865 resends with no loss; 8 slots:
    # 67,149 and none)
    floor = 1 if leaf > nic else DEFAULT_WINDOW
    while window > floor and window * per_packet / speedup >= timeout:
        window //= 2
    return window


def _packet_times(width: int, codec: str, packet: int, link_bytes_per_cycle: float, leaves: int = None,
                  speedup: int = 1) -> tuple:
    """(a packet's time at a NIC: its frame on the link or the datapath, whichever is longer; its time on a
    switch's result bus: a leaf's carries it twice, a switch ``speedup`` times as wide passes it faster)."""
    frame = (FRAME_HEADER_BYTES + nm.codec_bytes(codec, packet) + WIRE_OVERHEAD_BYTES) / link_bytes_per_cycle
    return max(frame, packet / (width // 32)), (2 if leaves else 1) * packet / (width // 32) / speedup


def chosen_timeout(width: int, codec: str, packet: int, link_bytes_per_cycle: float, window: int,
                   leaves: int = None, speedup: int = 1) -> int:
    """The NICs' retransmission timer a cluster gives a switch job when none is asked for:
    ``RETRANSMIT_TIMEOUT`` (a tree's ``TREE_RETRANSMIT_TIMEOUT``), doubled while the ``window``'s packets take
    it or more to pass the switch. That happens where :func:`chosen_window` keeps the default window although
    the timer binds: one switch at W = 64, 32 packets of 128 cycles (with 2,048 cycles, 1 % loss stormed:
    N = 8, bfp8, 65,536 fp32, 392,549 cycles and 3,402 resends for 103 frames lost; 8,192: 43,999 and 46).
    docs/in_network.md, "Sizing the window"."""
    nic, leaf = _packet_times(width, codec, packet, link_bytes_per_cycle, leaves, speedup)
    timeout = TREE_RETRANSMIT_TIMEOUT if leaves else RETRANSMIT_TIMEOUT
    while window * max(nic, leaf) / speedup >= timeout:
        timeout *= 2
    return timeout


@dataclass(frozen=True)
class PacketPlan:
    j: int              # packet index within the collective
    psn: int            # job-wide packet number g (mod 2**32)
    slot: int
    set: int
    offset: int         # first element
    count: int


def packets(elements: int, packet: int, window: int, first: int = 0) -> list:
    """A worker's packets of one collective: packet j holds elements [jP, min(jP + P, L)), is numbered
    g = first + j and goes to ``slot_of(g, window)``."""
    if not (isinstance(packet, int) and MIN_P <= packet <= MAX_P and packet % 16 == 0):
        raise ValueError(f"packet must be a multiple of 16 in {MIN_P} .. {MAX_P}, got {packet!r}")
    if elements < 1:
        raise ValueError(f"elements must be >= 1, got {elements}")
    out = []
    for j, off in enumerate(range(0, elements, packet)):
        g = (first + j) % (1 << 32)
        slot, s = slot_of(g, window)
        out.append(PacketPlan(j, g, slot, s, off, min(packet, elements - off)))
    return out


# -- frames ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Agg:
    """An aggregation frame's header fields and payload (a contribution or a result)."""
    opcode: int
    job: int
    worker: int
    slot: int
    set: int
    psn: int
    offset: int
    count: int
    codec: int
    dtype: int
    payload: bytes
    retransmit: bool = False
    collective: int = 0
    seq: int = 0                # ``chunk``: the sender's count of the frames of its kind it sent on this link
    prev: int = 0               # ``reserved``: the psn of the frame it sent before this one

    @property
    def flags(self) -> int:
        return (FrameFlag.shadow if self.set else 0) | (FrameFlag.retransmit if self.retransmit else 0)

    def wire_bytes(self) -> int:
        """Bytes the frame takes on a link, overhead included."""
        return len(self.payload) + FRAME_HEADER_BYTES + WIRE_OVERHEAD_BYTES

    def frame(self, src_mac, dst_mac, src_ip, dst_ip, udp_port=UDP_PORT) -> bytes:
        to_switch = self.opcode == FrameOpcode.aggregate
        return proto.build_frame(
            self.payload, dst_mac=dst_mac, src_mac=src_mac, src_ip=src_ip, dst_ip=dst_ip, sport=udp_port,
            dport=udp_port, opcode=self.opcode, codec=self.codec, dtype=self.dtype, flags=self.flags,
            job=self.job, collective=self.collective, src_rank=self.worker if to_switch else SWITCH_RANK,
            dst_rank=SWITCH_RANK if to_switch else self.worker, chunk=self.seq, worker=self.worker, slot=self.slot,
            count=self.count, offset=self.offset, psn=self.psn, reserved=self.prev)

    @classmethod
    def from_header(cls, h: dict, payload: bytes) -> "Agg":
        return cls(h["opcode"], h["job"], h["worker"], h["slot"], int(bool(h["flags"] & FrameFlag.shadow)),
                   h["psn"], h["offset"], h["count"], h["codec"], h["dtype"], bytes(payload),
                   bool(h["flags"] & FrameFlag.retransmit), h["collective"], h["chunk"], h["reserved"])


# -- the switch ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """One entry of the switch's job table: job ``job`` has ``len(ports)`` workers, worker w behind port
    ``ports[w]``, a window of ``window`` slots starting at pool slot ``slot_base``, and one dtype, codec and
    packet size (elements). A leaf switch's job has an ``up_port``: a complete round is sent there as a
    contribution of worker ``up_worker`` to job ``up_job`` of the switch above (the spine), and the spine's
    result is what the leaf multicasts (docs/in_network.md, "Two levels")."""
    job: int
    ports: tuple
    window: int
    slot_base: int = 0
    dtype: str = "fp32"
    codec: str = "none"
    packet: int = 256
    up_port: int = None
    up_job: int = 0
    up_worker: int = 0

    def __post_init__(self):
        if not 0 <= self.job < 1 << 16:
            raise ValueError(f"job id must be in 0 .. 65535, got {self.job!r}")
        if not 1 <= len(self.ports) <= MAX_JOB_WORKERS:
            raise ValueError(f"a job has 1 .. {MAX_JOB_WORKERS} workers, got {len(self.ports)}")
        if len(set(self.ports)) != len(self.ports):
            raise ValueError(f"a job's workers need distinct ports, got {self.ports}")
        if not is_power_of_two(self.window) or self.window > MAX_WINDOW:
            raise ValueError(f"window must be a power of two in 1 .. {MAX_WINDOW}, got {self.window!r}")
        _check([np.zeros(1, np.uint32)], self.codec, self.dtype)
        if not (MIN_P <= self.packet <= MAX_P and self.packet % 16 == 0):
            raise ValueError(f"packet must be a multiple of 16 in {MIN_P} .. {MAX_P}, got {self.packet!r}")
        if self.up_port is not None:
            if self.up_port in self.ports:
                raise ValueError(f"a job's up port cannot be a worker's, got {self.up_port} in {self.ports}")
            if not 0 <= self.up_job < 1 << 16 or not 0 <= self.up_worker < MAX_JOB_WORKERS:
                raise ValueError(f"up_job must be in 0 .. 65535 and up_worker in 0 .. {MAX_JOB_WORKERS - 1}, "
                                 f"got {self.up_job!r}, {self.up_worker!r}")

    @property
    def workers(self) -> int:
        return len(self.ports)


@dataclass
class SlotSet:
    """One set of one slot: the round it holds (``psn``), who has contributed, and their decoded terms."""
    psn: int = None             # None: no round yet since the job was configured
    bitmap: int = 0
    count: int = 0              # contributions to the round
    offset: int = 0
    elements: int = 0
    collective: int = 0
    terms: list = field(default_factory=list)
    result: bytes = None        # the encoded sum, once complete (a leaf: the spine's result, once it came)
    partial: bytes = None       # a leaf: the encoded sum of its members, sent up


@dataclass
class JobCounters:
    absorbed: int = 0           # contributions taken into a round (the completing one included)
    completed: int = 0          # rounds complete, each multicast to every worker
    unicast: int = 0            # stored results sent again to one worker (its contribution was a copy)
    nacks: int = 0              # contributions found lost (a gap in a worker's frames) and asked for again
    up: int = 0                 # a leaf: partials sent to the spine (resends included)
    down: int = 0               # a leaf: the spine's results taken (each multicast to the members)
    drops: dict = field(default_factory=lambda: {r.name: 0 for r in AggDrop})


@dataclass
class PortCounters:
    frames_in: int = 0
    frames_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    forwarded: int = 0          # frames in that were forwarded by MAC
    unknown_mac: int = 0        # frames in for a MAC no port has: dropped
    parser_drops: dict = field(default_factory=lambda: {r.name: 0 for r in DropReason})


class SwitchModel:
    """The aggregation switch (docs/in_network.md): ``ports`` ports, a pool of ``slots`` slots (two sets
    each), up to ``max_jobs`` jobs. ``port_macs``/``port_ips``: the address of what is behind each port
    (forwarding, and the destination of results)."""

    def __init__(self, ports: int, slots: int = 64, max_jobs: int = 4, port_macs=None, port_ips=None,
                 mac: str = SWITCH_MAC, ip: str = SWITCH_IP, udp_port: int = UDP_PORT):
        if not MIN_SWITCH_PORTS <= ports <= MAX_SWITCH_PORTS:
            raise ValueError(f"ports must be in {MIN_SWITCH_PORTS} .. {MAX_SWITCH_PORTS}, got {ports!r}")
        if not 1 <= slots <= 4096:
            raise ValueError(f"slots must be in 1 .. 4096, got {slots!r}")
        self.ports, self.slots, self.max_jobs = ports, slots, max_jobs
        self.port_macs = list(port_macs or [f"02:00:00:00:01:{p:02x}" for p in range(ports)])
        self.port_ips = list(port_ips or [f"10.0.1.{p + 1}" for p in range(ports)])
        self.mac, self.ip, self.udp_port = mac, ip, udp_port
        self.jobs = [None] * max_jobs
        self.pool = [[SlotSet(), SlotSet()] for _ in range(slots)]
        self.job_counters = [JobCounters() for _ in range(max_jobs)]
        self.port_counters = [PortCounters() for _ in range(ports)]
        self.drops = {r.name: 0 for r in AggDrop}       # every aggregation drop, job known or not
        self.rx_seq = [None] * ports    # per port: the newest contribution's seq (None: none since reset)
        self.tx_seq = [0] * ports       # per port: the seq of the next result sent there
        self.tx_prev = [0] * ports      # per port: the psn of the result sent there last

    def configure(self, index: int, job: Job = None):
        """Write (or with None, disable) job table entry ``index``; a written job starts with its slots
        empty and its counters at zero."""
        if not 0 <= index < self.max_jobs:
            raise ValueError(f"job index must be in 0 .. {self.max_jobs - 1}, got {index!r}")
        if job is not None:
            if max(job.ports) >= self.ports:
                raise ValueError(f"job {job.job}: port {max(job.ports)} does not exist ({self.ports} ports)")
            if job.slot_base + job.window > self.slots:
                raise ValueError(f"job {job.job}: slots {job.slot_base} .. {job.slot_base + job.window - 1} "
                                 f"beyond the pool of {self.slots}")
            for i, other in enumerate(self.jobs):
                if other is None or i == index:
                    continue
                if other.job == job.job:
                    raise ValueError(f"job id {job.job} is already entry {i}")
                if (job.slot_base < other.slot_base + other.window
                        and other.slot_base < job.slot_base + job.window):
                    raise ValueError(f"job {job.job}'s slots overlap job {other.job}'s")
                if job.up_port is not None and other.up_port == job.up_port and other.up_worker != job.up_worker:
                    raise ValueError(f"jobs with up port {job.up_port} must be the same worker of the spine "
                                     f"(its frames' dst_rank), got {job.up_worker} and {other.up_worker}")
            if job.up_port is not None and job.up_port >= self.ports:
                raise ValueError(f"job {job.job}: up port {job.up_port} does not exist ({self.ports} ports)")
            for s in range(job.slot_base, job.slot_base + job.window):
                self.pool[s] = [SlotSet(), SlotSet()]
        self.jobs[index] = job
        self.job_counters[index] = JobCounters()

    # -- the decision table ------------------------------------------------------------------------------
    def _drop(self, reason: AggDrop, index=None):
        self.drops[reason.name] += 1
        if index is not None:
            self.job_counters[index].drops[reason.name] += 1
        return []

    def contribute(self, port: int, a: Agg) -> list:
        """A contribution ``a`` arriving on ``port`` (its frame already accepted): the (port, Agg) results
        it causes, per the decision table (a result or an ``agg_nack`` from a spine: :meth:`_from_spine`)."""
        if a.opcode in (FrameOpcode.aggregated, FrameOpcode.agg_nack):
            return self._number(self._from_spine(port, a))
        if a.opcode != FrameOpcode.aggregate:
            return self._drop(AggDrop.opcode)
        index = next((i for i, j in enumerate(self.jobs) if j is not None and j.job == a.job), None)
        if index is None:
            return self._drop(AggDrop.unknown_job)
        job = self.jobs[index]
        bad = self._check(a, job, a.worker >= job.workers or job.ports[a.worker] != port)
        if bad is not None:
            return self._drop(bad, index)
        nack = self._gap(port, a, job, index)
        return self._number(nack + self._decide(port, a, job, index))

    @staticmethod
    def _check(a: Agg, job: Job, stranger: bool):
        """The decision table's rows 3-6 once the job is known (``stranger``: not the worker it says it is):
        the AggDrop of the first that fails, or None."""
        if stranger:
            return AggDrop.not_member
        if a.dtype != Dtype[job.dtype] or a.codec != Codec[job.codec]:
            return AggDrop.dtype
        if a.slot >= job.window:
            return AggDrop.slot_range
        if a.count > job.packet:
            return AggDrop.count
        return None

    def _gap(self, port: int, a: Agg, job: Job, index: int) -> list:
        """The worker's frames on ``port`` are numbered (``seq``) and each names the psn of the one before
        (``prev``): a number past the newest by two or more shows that the frame just before this one was
        lost on the link (with any others missing), and the worker is asked for it again at once (an
        ``agg_nack``); the others missing are left to the workers' timers."""
        self.rx_seq[port], lost = take_number(self.rx_seq[port], a.seq)
        return self._ask(port, a.worker, a.prev, job, index) if lost else []

    def _ask(self, port: int, worker: int, psn: int, job: Job, index: int) -> list:
        """An ``agg_nack`` to ``worker`` of ``job`` (behind ``port``): its contribution of ``psn`` again."""
        self.job_counters[index].nacks += 1
        slot, s = slot_of(psn, job.window)
        return [(port, Agg(FrameOpcode.agg_nack, job.job, worker, slot, s, psn, 0, 0, Codec[job.codec],
                           Dtype[job.dtype], b""))]

    def _number(self, out: list) -> list:
        """Frames to the workers (results and agg_nacks), numbered per port in the order they leave, each
        naming the psn of the one before."""
        numbered = []
        for port, r in out:
            numbered.append((port, replace(r, seq=self.tx_seq[port], prev=self.tx_prev[port])))
            self.tx_seq[port] = (self.tx_seq[port] + 1) % SEQ_MOD
            self.tx_prev[port] = r.psn
        return numbered

    def _decide(self, port: int, a: Agg, job: Job, index: int) -> list:
        """The decision table's second part (the slot's set): the (port, result) it sends."""
        jc = self.job_counters[index]
        st = self.pool[job.slot_base + a.slot][a.set]
        bit = 1 << a.worker
        if st.psn is None or psn_newer(a.psn, st.psn):
            if st.psn is not None and st.count < job.workers:
                return self._drop(AggDrop.busy, index)
            st.psn, st.bitmap, st.count, st.offset, st.elements = a.psn, 0, 0, a.offset, a.count
            st.collective, st.terms, st.result = a.collective, [], None
        elif a.psn != st.psn:
            return self._drop(AggDrop.stale, index)
        elif a.offset != st.offset or a.count != st.elements:
            return self._drop(AggDrop.count, index)
        elif st.bitmap & bit:
            if st.count < job.workers:
                return self._drop(AggDrop.duplicate, index)
            if st.result is None:           # a leaf still waiting for the spine: the partial goes up again
                return self._up(index, job, a.slot, a.set, st, retransmit=True)
            jc.unicast += 1
            return [(port, self._result(job, a.slot, a.set, st, a.worker, retransmit=True))]
        st.bitmap |= bit
        st.count += 1
        st.terms.append(self._decode(job, a))
        jc.absorbed += 1
        if st.count < job.workers:
            return []
        jc.completed += 1
        encoded = self._encode(job, reduce_bits(np.stack(st.terms), job.dtype))
        if job.up_port is not None:
            st.partial = encoded
            return self._up(index, job, a.slot, a.set, st)
        st.result = encoded
        return self._multicast(job, a.slot, a.set, st)

    def _multicast(self, job, slot, s, st) -> list:
        return [(job.ports[w], self._result(job, slot, s, st, w)) for w in range(job.workers)]

    def _up(self, index, job, slot, s, st, retransmit=False) -> list:
        """A leaf's complete round, sent to the spine as worker ``up_worker``'s contribution."""
        self.job_counters[index].up += 1
        return [(job.up_port, Agg(FrameOpcode.aggregate, job.up_job, job.up_worker, slot, s, st.psn, st.offset,
                                  st.elements, Codec[job.codec], Dtype[job.dtype], st.partial, retransmit,
                                  st.collective))]

    def _from_spine(self, port: int, a: Agg) -> list:
        """A frame from the spine on a leaf job's up port: its result for a round this leaf sent up is taken
        once, kept to answer the members' resends, and multicast to them. The spine's frames are numbered
        as a switch numbers its frames to a worker: one that shows the frame before it lost, and an
        ``agg_nack`` (the spine lacks the leaf's partial of its psn), make the leaf ask its member 0 for its
        contribution of that psn (an ``agg_nack``: docs/in_network.md, "Two levels"), whose copy sends the
        partial up again (or, once the result came, is answered with it); the ``agg_nack``'s own psn first.
        Anything else is dropped and counted."""
        leaf = [i for i, j in enumerate(self.jobs) if j is not None and j.up_port == port]
        if not leaf:                                            # a switch takes contributions, and the
            return self._drop(AggDrop.opcode)                   # spine's frames on an up port
        index = next((i for i in leaf if self.jobs[i].up_job == a.job), None)
        if index is None:
            return self._drop(AggDrop.unknown_job)
        job, jc = self.jobs[index], self.job_counters[index]
        bad = self._check(a, job, a.worker != job.up_worker)
        if bad is not None:
            return self._drop(bad, index)
        self.rx_seq[port], lost = take_number(self.rx_seq[port], a.seq)
        asked = self._ask(job.ports[0], 0, a.prev, job, index) if lost else []
        if a.opcode == FrameOpcode.agg_nack:
            return self._ask(job.ports[0], 0, a.psn, job, index) + asked
        st = self.pool[job.slot_base + a.slot][a.set]
        if st.psn != a.psn or st.count < job.workers:
            return asked + self._drop(AggDrop.stale, index)
        if a.offset != st.offset or a.count != st.elements:
            return asked + self._drop(AggDrop.count, index)
        if st.result is not None:
            return asked + self._drop(AggDrop.duplicate, index)
        # taken as the leaf's accumulator takes it: decoded, summed alone (exact), rounded and encoded again,
        # which gives back what a spine sends (every codec re-encodes its own output unchanged)
        st.result = self._encode(job, reduce_bits(self._decode(job, a)[None], job.dtype))
        jc.down += 1
        return asked + self._multicast(job, a.slot, a.set, st)

    @staticmethod
    def _decode(job, a):
        if job.codec == "none":
            return np.frombuffer(a.payload, np.uint32)
        return nm.as_bits(nm.decompress(a.payload, job.codec, a.count))

    @staticmethod
    def _encode(job, bits):
        return bits.tobytes() if job.codec == "none" else nm.compress(bits, job.codec)

    @staticmethod
    def _result(job, slot, s, st, worker, retransmit=False):
        return Agg(FrameOpcode.aggregated, job.job, worker, slot, s, st.psn, st.offset, st.elements,
                   Codec[job.codec], Dtype[job.dtype], st.result, retransmit, st.collective)

    # -- frames ------------------------------------------------------------------------------------------
    def receive(self, port: int, frame: bytes, mac_error: bool = False) -> list:
        """One frame in on ``port``: the (port, frame bytes, mac_error) that go out. Frames for the
        switch's MAC are parsed (as the NIC's parser does, rank ``SWITCH_RANK``) and, if accepted, go
        through the decision table; any other frame is forwarded unchanged to the port whose MAC it is for
        (its MAC error flag with it), or dropped and counted if no port has that MAC."""
        pc = self.port_counters[port]
        pc.frames_in += 1
        pc.bytes_in += len(frame)
        dst = mac_int(":".join(f"{b:02x}" for b in frame[:6])) if len(frame) >= 6 else None
        if dst != mac_int(self.mac):
            out = [p for p, mac in enumerate(self.port_macs) if mac_int(mac) == dst]
            if not out:
                pc.unknown_mac += 1
                return []
            pc.forwarded += 1
            return self._sent([(out[0], bytes(frame), mac_error)])
        rank = next((j.up_worker for j in self.jobs if j is not None and j.up_port == port), SWITCH_RANK)
        v = proto.check_frame(frame, mac_error, nic_mac=self.mac, nic_ip=self.ip, udp_port=self.udp_port,
                              rank=rank)
        if not v.accepted:
            pc.parser_drops[v.reason] += 1
            return []
        a = Agg.from_header(v.header, frame[FRAME_HEADER_BYTES:])
        return self._sent([(p, self.result_frame(p, r), False) for p, r in self.contribute(port, a)])

    def result_frame(self, port: int, r: Agg) -> bytes:
        return r.frame(self.mac, self.port_macs[port], self.ip, self.port_ips[port], self.udp_port)

    def _sent(self, out):
        for p, f, _ in out:
            self.port_counters[p].frames_out += 1
            self.port_counters[p].bytes_out += len(f)
        return out


# -- a worker --------------------------------------------------------------------------------------------
@dataclass
class WorkerCounters:
    sent: int = 0               # contributions sent, retransmissions included
    raw_bytes: int = 0          # their elements as 32-bit values (4 bytes each)
    retransmitted: int = 0
    results: int = 0            # results taken
    duplicates: int = 0         # results dropped: already taken, or for no packet in flight
    mismatched: int = 0         # results dropped: offset/count/job other than the packet's
    mac_errors: int = 0         # frames dropped for a MAC error (a corrupted frame)
    asked: int = 0              # resends the switch asked for (an agg_nack) or a gap in its results showed


class WorkerModel:
    """A NIC running one switch-mode all-reduce (docs/in_network.md, "The worker"). ``data``: its input
    (uint32 bit patterns); packets numbered from ``first``. A packet not answered within ``timeout``
    cycles is sent again, the wait doubling with each resend of it up to ``timeout << backoff_max``, once a
    later packet's result has come or the worker's results have paused for ``timeout >> PAUSE_SHIFT``
    cycles (a late result comes in order, behind the others); with no new result for ``deadline`` cycles
    the collective ends with status ``timeout``."""

    def __init__(self, rank: int, job: Job, data, first: int = 0, timeout: int = RETRANSMIT_TIMEOUT,
                 backoff_max: int = BACKOFF_MAX, deadline: int = DEADLINE, collective: int = 0):
        self.rank, self.job = rank, job
        self.data = np.asarray(data, np.uint32)
        self.plan = packets(self.data.size, job.packet, job.window, first)
        self.timeout, self.backoff_max, self.deadline = timeout, backoff_max, deadline
        self.collective = collective
        self.result = np.zeros(self.data.size, np.uint32)
        self.got = np.zeros(len(self.plan), bool)
        self.in_flight = {}             # slot -> [j, resends, due]
        self.last_progress = 0
        self.newest = -1                # the newest packet answered (-1: none)
        self.status = None              # "ok" / "timeout" once done
        self.counters = WorkerCounters()
        self.seq, self.prev = 0, 0      # the next contribution's seq; the psn of the one sent before
        self.rx_seq = None              # the newest result's seq (None: none yet)
        self.next_j = 0                 # the next packet to send a first time (they go in order)

    def _packet(self, j, now, retransmit=False) -> Agg:
        p = self.plan[j]
        bits = self.data[p.offset:p.offset + p.count]
        payload = bits.tobytes() if self.job.codec == "none" else nm.compress(bits, self.job.codec)
        self.counters.sent += 1
        self.counters.raw_bytes += 4 * p.count
        self.counters.retransmitted += retransmit
        a = Agg(FrameOpcode.aggregate, self.job.job, self.rank, p.slot, p.set, p.psn, p.offset, p.count,
                Codec[self.job.codec], Dtype[self.job.dtype], payload, retransmit, self.collective, self.seq, self.prev)
        self.seq, self.prev = (self.seq + 1) % SEQ_MOD, p.psn
        return a

    def _launch(self, now) -> list:
        """Send the next packets in order while their slots are free (the result of j - S has come): every
        worker sends the same sequence whatever order its results come in (docs/in_network.md, "The
        worker")."""
        out = []
        while self.next_j < len(self.plan) and self.plan[self.next_j].slot not in self.in_flight:
            j = self.next_j
            self.in_flight[self.plan[j].slot] = [j, 0, now + self.timeout]
            out.append(self._packet(j, now))
            self.next_j += 1
        return out

    def start(self, now: int = 0) -> list:
        """The first window: packets 0 .. S - 1, one per slot."""
        self.last_progress = now
        return self._launch(now)

    def receive(self, a: Agg, now: int) -> list:
        """A result for this worker: take it if it answers the packet in flight in its slot, which frees the
        slot for packet j + S; packets go in order, each once its slot is free. Returns the contributions to
        send."""
        if self.status is not None:
            return []
        asked = []
        if a.opcode == FrameOpcode.agg_nack and a.job == self.job.job:
            asked = self._resend(a.psn, now)
        if a.opcode in (FrameOpcode.aggregated, FrameOpcode.agg_nack):
            # the switch's frames to this port (results and agg_nacks) are numbered and each names the psn of
            # the one before: a gap shows that one lost on the link, and the worker sends its contribution of
            # that psn again (the switch answers a copy for a complete round with the stored result, and
            # absorbs it into a round that waits for it); any others missing are left to the timers
            self.rx_seq, lost = take_number(self.rx_seq, a.seq)
            if lost:
                asked += self._resend(a.prev, now)
        if a.opcode == FrameOpcode.agg_nack:
            return asked
        return asked + self._result(a, now)

    def _resend(self, psn: int, now) -> list:
        """Send packet ``psn`` again now, if it is the packet in flight in its slot."""
        entry = self.in_flight.get(slot_of(psn, self.job.window)[0])
        if entry is None or self.plan[entry[0]].psn != psn:
            return []
        self.counters.asked += 1
        entry[1] += 1
        entry[2] = now + (self.timeout << min(entry[1], self.backoff_max))
        return [self._packet(entry[0], now, retransmit=True)]

    def _result(self, a: Agg, now) -> list:
        entry = self.in_flight.get(a.slot)
        if a.opcode != FrameOpcode.aggregated or entry is None or self.plan[entry[0]].psn != a.psn:
            self.counters.duplicates += 1
            return []
        p = self.plan[entry[0]]
        if a.job != self.job.job or a.offset != p.offset or a.count != p.count or a.set != p.set:
            self.counters.mismatched += 1
            return []
        bits = (np.frombuffer(a.payload, np.uint32) if self.job.codec == "none"
                else nm.as_bits(nm.decompress(a.payload, self.job.codec, a.count)))
        self.result[p.offset:p.offset + p.count] = bits
        self.got[p.j] = True
        self.newest = max(self.newest, p.j)
        self.counters.results += 1
        self.last_progress = now
        del self.in_flight[a.slot]
        out = self._launch(now)
        if self.got.all():
            self.status = "ok"
        return out

    def departed(self, a: Agg, t: float):
        """The contribution ``a`` has left on the wire at ``t``: its wait starts then (a NIC stamps a frame
        as its last beat leaves, so queueing behind its own window does not count as waiting)."""
        entry = self.in_flight.get(a.slot)
        if entry is not None and self.plan[entry[0]].psn == a.psn:
            entry[2] = t + (self.timeout << min(entry[1], self.backoff_max))

    def next_timer(self):
        """When this worker next has something to do on its own: a resend, or its deadline."""
        if self.status is not None:
            return None
        return min([self._fires(e) for e in self.in_flight.values()] + [self.last_progress + self.deadline])

    def _fires(self, entry) -> int:
        """When the timer of an in-flight ``entry`` runs out: at its due time if a later packet's result has
        come (it is lost or waits on a loss), else not before the results have paused."""
        if entry[0] < self.newest:
            return entry[2]
        return max(entry[2], self.last_progress + (self.timeout >> PAUSE_SHIFT))

    def tick(self, now: int) -> list:
        """Resend every packet whose wait is over once a later packet's result has come or the results have
        paused for ``timeout >> PAUSE_SHIFT`` cycles; end with ``timeout`` past the deadline."""
        if self.status is not None:
            return []
        if now >= self.last_progress + self.deadline:
            self.status = "timeout"
            return []
        out = []
        for entry in self.in_flight.values():
            if self._fires(entry) <= now:
                entry[1] += 1
                entry[2] = now + (self.timeout << min(entry[1], self.backoff_max))
                out.append(self._packet(entry[0], now, retransmit=True))
        return out


# -- the fabric ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Faults:
    """Per-link fault probabilities (every uplink and downlink), and the seed of the generators."""
    drop: float = 0.0
    dup: float = 0.0
    corrupt: float = 0.0
    seed: int = 1

    def __post_init__(self):
        for name in ("drop", "dup", "corrupt"):
            threshold(getattr(self, name))          # checks the range
        if not isinstance(self.seed, int) or not 0 <= self.seed < 1 << 32:
            raise ValueError(f"seed must be a 32-bit unsigned int, got {self.seed!r}")

    @property
    def any(self) -> bool:
        return bool(self.drop or self.dup or self.corrupt)

    def stream(self, link: int) -> FaultStream:
        return FaultStream(link_seed(self.seed, link), threshold(self.drop), threshold(self.dup),
                           threshold(self.corrupt))


@dataclass
class LinkCounters:
    frames: int = 0             # frames that entered the link
    bytes: int = 0              # their Ethernet bytes (no FCS)
    dropped: int = 0
    duplicated: int = 0
    corrupted: int = 0


class _Link:
    def __init__(self, faults: Faults, index: int, rate: float, latency: int):
        self.faults = faults.stream(index)
        self.rate, self.latency = rate, latency
        self.free = self.departed = 0.0
        self.counters = LinkCounters()

    def send(self, now: float, nbytes: int, wire: int) -> list:
        """A frame of ``nbytes`` (``wire`` with overhead) enters at ``now``: [(arrival time, corrupted)];
        ``self.departed`` is when its last byte left."""
        c = self.counters
        c.frames += 1
        c.bytes += nbytes
        d = self.faults.next()
        start = max(now, self.free)
        self.free = self.departed = start + wire / self.rate
        if d.drop:
            c.dropped += 1
            return []
        c.corrupted += d.corrupt
        out = [(self.free + self.latency, d.corrupt)]
        if d.duplicate:
            c.duplicated += 1
            self.free += wire / self.rate
            out.append((self.free + self.latency, d.corrupt))
        return out


@dataclass
class SwitchRun:
    results: np.ndarray                 # (N, L) bit patterns as the job's dtype (zeros where never received)
    status: list                        # per rank: "ok" or "timeout"
    cycles: float                       # when the last worker finished (model time)
    workers: list                       # WorkerCounters per rank
    uplinks: list                       # LinkCounters, rank -> switch (its leaf in a tree)
    downlinks: list                     # LinkCounters, switch -> rank
    switch: SwitchModel                 # the switch (in a tree: the spine)
    jobs: list                          # the Job of each job table entry used (in a tree: the spine's)
    frames: list = None                 # with record=True: (time, link, Agg) of every frame a link took in;
                                        # link 2r is rank r's uplink, 2r + 1 its downlink; in a tree, link
                                        # 2N + 2k is leaf k's trunk up to the spine, 2N + 2k + 1 the one down
    leaves: list = None                 # a tree: the leaf switches (SwitchModel), leaf k's ranks tree_groups
    trunk_up: list = None               # a tree: LinkCounters, leaf k -> spine
    trunk_down: list = None             # a tree: LinkCounters, spine -> leaf k


def simulate(inputs, codec="none", dtype="fp32", packet=256, window=DEFAULT_WINDOW, faults: Faults = None,
             link_bytes_per_cycle=40.0, latency=125, switch_latency=0, timeout=RETRANSMIT_TIMEOUT,
             backoff_max=BACKOFF_MAX, deadline=DEADLINE, dead=(), late=None, jobs=None, job_id=1, first=0, record=False,
             max_cycles=None, leaves: int = None) -> SwitchRun:
    """Switch all-reduces of ``inputs`` (one array per rank; rank r on switch port r) through links of
    ``link_bytes_per_cycle`` and ``latency`` cycles with ``faults`` on every link. ``jobs``: the ranks of
    each job (default: one job of every rank); job k has id ``job_id + k`` and pool slots from
    ``k * window``, and all run at once. Ranks in ``dead`` never send; rank r in ``late`` starts
    ``late[r]`` cycles after the others. Model time only: frames take their wire time, the switch
    ``switch_latency``, a worker none.

    ``leaves`` = K: a two-level tree of one job: leaf switch k holds the ranks ``tree_groups(N, K)[k]`` on its
    ports 0 .. m - 1 (worker p of its job is the p-th of them) and its trunk to the spine on port m; the spine
    holds leaf k on its port k (worker k of its job). Every link, trunks included, has the same rate,
    latency and faults."""
    x = _check(inputs, codec, dtype, leaves)
    n = len(x)
    faults = faults or Faults()
    if leaves is not None and jobs is not None:
        raise ValueError("a tree (leaves) runs one job: give leaves or jobs, not both")
    groups = [tuple(g) for g in (jobs or [range(n)])] if leaves is None else tree_groups(n, leaves)
    flat = [r for g in groups for r in g]
    if sorted(flat) != sorted(set(flat)) or not set(flat) <= set(range(n)):
        raise ValueError(f"jobs must be disjoint lists of ranks in 0 .. {n - 1}, got {groups}")
    workers = [None] * n
    # the fabric: switches, and where each port and each rank sends (its link and the far end)
    route, uplink_of, links = {}, {}, []

    def link(index):
        links.append(_Link(faults, index, link_bytes_per_cycle, latency))
        return links[-1], index

    up = [None] * n
    down = [None] * n
    if leaves is None:
        switches = [SwitchModel(max(n, MIN_SWITCH_PORTS), slots=window * len(groups), max_jobs=len(groups))]
        table = [Job(job_id + k, g, window, k * window, dtype, codec, packet) for k, g in enumerate(groups)]
        for k, (job, g) in enumerate(zip(table, groups)):
            switches[0].configure(k, job)
            for w, r in enumerate(g):
                workers[r] = WorkerModel(w, job, x[r], first, timeout, backoff_max, deadline)
        for r in range(n):
            up[r], down[r] = link(2 * r), link(2 * r + 1)
            uplink_of[r] = (*up[r], (0, r))
            route[(0, r)] = (*down[r], "worker", r)
        trunks = []
    else:
        spine = SwitchModel(max(leaves, MIN_SWITCH_PORTS), slots=window, max_jobs=1)
        table = [Job(job_id, tuple(range(leaves)), window, 0, dtype, codec, packet)]
        spine.configure(0, table[0])
        switches, trunks = [], []
        for k, g in enumerate(groups):
            leaf = SwitchModel(max(len(g) + 1, MIN_SWITCH_PORTS), slots=window, max_jobs=1,
                               mac=leaf_mac(k), ip=leaf_ip(k))
            job = Job(job_id, tuple(range(len(g))), window, 0, dtype, codec, packet,
                      up_port=len(g), up_job=job_id, up_worker=k)
            leaf.configure(0, job)
            switches.append(leaf)
            for p, r in enumerate(g):
                workers[r] = WorkerModel(p, job, x[r], first, timeout, backoff_max, deadline)
                up[r], down[r] = link(2 * r), link(2 * r + 1)
                uplink_of[r] = (*up[r], (k, p))
                route[(k, p)] = (*down[r], "worker", r)
            t_up, t_down = link(2 * n + 2 * k), link(2 * n + 2 * k + 1)
            trunks.append((t_up[0], t_down[0]))
            route[(k, len(g))] = (*t_up, "switch", (leaves, k))
            route[(leaves, k)] = (*t_down, "switch", (k, len(g)))
        switches.append(spine)
    frames = [] if record else None
    events, seq = [], 0

    def push(t, kind, who, item=None, bad=False):
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, who, item, bad))
        seq += 1

    def send(lk, index, now, a, kind, who):
        if record:
            frames.append((now, index, a))
        for t, bad in lk.send(now, a.wire_bytes() - WIRE_OVERHEAD_BYTES, a.wire_bytes()):
            push(t, kind, who, a, bad)

    def to_switch(r, now, aggs):
        lk, index, at = uplink_of[r]
        for a in aggs:
            send(lk, index, now, a, "switch", at)
            workers[r].departed(a, lk.departed)
        t = workers[r].next_timer()
        if t is not None:
            push(t, "timer", r)

    for r in range(n):
        if workers[r] is None or r in dead:
            if workers[r] is not None:
                workers[r].status = "timeout"
        else:
            push((late or {}).get(r, 0), "start", r)
    live = [w for w in workers if w is not None]
    now = 0.0
    while events:
        now, _, kind, who, item, bad = heapq.heappop(events)
        if max_cycles is not None and now > max_cycles:
            break
        if kind == "start":
            to_switch(who, now, workers[who].start(now))
        elif kind == "switch":
            sw, port = who
            if bad:
                switches[sw].port_counters[port].frames_in += 1
                switches[sw].port_counters[port].parser_drops["mac_error"] += 1
                continue
            for out, res in switches[sw].contribute(port, item):
                send(*route[(sw, out)][:2], now + switch_latency, res, *route[(sw, out)][2:])
        elif kind == "worker":
            w = workers[who]
            if bad:
                w.counters.mac_errors += 1
                continue
            to_switch(who, now, w.receive(item, now))
        elif kind == "timer":
            w = workers[who]
            t = w.next_timer()
            if t is not None and t <= now:
                to_switch(who, now, w.tick(now))
        if all(w.status is not None for w in live):
            break
    results = np.stack([w.result if w else np.zeros(x[0].size, np.uint32) for w in workers])
    return SwitchRun(results.view(np.float32 if dtype == "fp32" else np.int32),
                     [w.status or "timeout" if w else None for w in workers], now,
                     [w.counters if w else None for w in workers], [u[0].counters for u in up],
                     [d[0].counters for d in down], switches[-1], table, frames,
                     switches[:-1] if leaves is not None else None,
                     [t[0].counters for t in trunks] if trunks else None,
                     [t[1].counters for t in trunks] if trunks else None)


__all__ = ["SWITCH_MAC", "SWITCH_IP", "leaf_mac", "leaf_ip", "ROUND_TRIP_EXTRA", "tree_groups", "allreduce", "reduce_bits", "bound_cycles", "chosen_window", "chosen_timeout",
           "PacketPlan", "packets",
           "Agg", "Job", "SlotSet", "JobCounters", "PortCounters", "SwitchModel", "WorkerCounters",
           "WorkerModel", "Faults", "LinkCounters", "SwitchRun", "simulate"]
