"""N nodes running a collective: ``Cluster(...).allreduce(arrays) -> (results, stats)``, likewise
``reduce_scatter`` and ``allgather``.

Algorithms: ``"ring"`` (the NICs' ring all-reduce, docs/allreduce.md) and ``"switch"`` (in-network
aggregation, docs/in_network.md: every NIC sends its packets to an aggregation switch, which sends the sums
back; several jobs may share it, and the links may drop, duplicate and corrupt frames, ``faults=``).

Backends: ``"model"`` runs the golden model (``host_driver/models/allreduce.py``) and derives the traffic
from the exact packets the ring sends; it has no notion of time, so ``cycles`` and ``efficiency`` are None
there. ``"verilator"`` / ``"icarus"`` run the cluster harness (``hdl/sim/cluster_bench.py``: N NICs with
their host memories, links and a switch) in that simulator: the build is cached per (simulator, N, W), the
job runs in a simulator process (``host_driver/sim/cluster_job.py`` → ``host_driver/sim/cluster_run.py``)
and hands back the result tensors, the completions and the link counters; ``cycles`` is the slowest rank's
completion time.

Importing this module loads the golden models only: the simulation runner (cocotb's, Amaranth) is
imported when an RTL backend runs, so that the model backend works where neither is installed.
"""

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from contract import collective
from contract.addresses import rank_ip, rank_mac
from contract import credits as cr
from contract.enums import Codec, Dtype, FrameFlag, FrameOpcode
from contract.in_network import (
    DEADLINE,
    DEFAULT_WINDOW,
    MAX_NIC_WINDOW,
    MAX_WINDOW,
    RETRANSMIT_TIMEOUT,
    FaultStream,
    is_power_of_two,
    link_seed,
    threshold,
    tree_groups,
)
from contract.limits import MAX_CLUSTER_NODES
from contract.link import Stall, ack_fields
from contract.protocol import FRAME_HEADER_BYTES, WIRE_OVERHEAD_BYTES
from host_driver.models import allreduce as ar
from host_driver.models import in_network as inn
from host_driver.models import numerics as nm
from host_driver.models import protocol as proto
from host_driver.models import ring_link

BACKENDS = ("model", "verilator", "icarus")
#: the RTL cluster's aggregation switch takes packets of at most this many elements (hdl/sim/cluster_bench.py)
SWITCH_MAX_PACKET = 256
#: the RTL cluster switch's slot pool (hdl/sim/cluster_bench.py SWITCH_POOL): the jobs' windows share it
SWITCH_POOL = 128
ALGORITHMS = collective.ALGORITHMS
#: how the NICs are linked: to each other in a ring, or each to the aggregation switch (a star)
FABRICS = ("ring", "switch")
HEADER = FRAME_HEADER_BYTES         # Ethernet + IPv4 + UDP + ainic: 74 bytes per frame
WIRE_EXTRA = WIRE_OVERHEAD_BYTES    # FCS, preamble + SFD, inter-frame gap: what a link spends per frame
MODEL_OPS = {"allreduce": ar.allreduce, "reduce_scatter": ar.reduce_scatter, "allgather": ar.allgather}


def bench_top(nodes: int, fabric: str = "ring", leaves: int = None, switch_speedup: int = 1) -> str:
    """The simulation top of a cluster bench of ``nodes`` NICs: wired in a ring, each linked to the
    aggregation switch (``fabric`` "switch"), or a tree of ``leaves`` leaf switches; ``_x2`` for switches
    twice as wide as the links."""
    speedup = f"_x{switch_speedup}" if switch_speedup > 1 else ""
    if leaves:
        return f"tree_cluster_n{nodes}_l{leaves}{speedup}"
    return f"{'switch_' if fabric == 'switch' else ''}cluster_n{nodes}{speedup}"


def bytes_per_cycle(link_gbps: float, clock_mhz: float) -> float:
    """A link's bytes per clock cycle."""
    return link_gbps * 1e9 / 8 / (clock_mhz * 1e6)


def link_rate_fixed(link_gbps: float, clock_mhz: float) -> int:
    """Bytes per cycle in the link model's 8.8 fixed point."""
    return round(bytes_per_cycle(link_gbps, clock_mhz) * 256)


class CollectiveTimeout(RuntimeError):
    """A collective that could not finish: ``status`` per rank ("ok" or "timeout"), ``stats`` as far as
    it got (``results``: what the ranks ended with, when a later collective recovered)."""

    def __init__(self, message, status, stats, results=None):
        super().__init__(message)
        self.status, self.stats, self.results = status, stats, results


def ring_timeout_message(what: str, completions: list, nodes: int) -> str:
    """Which ranks of a ring timed out and what each waited for (the completion's ``stall``,
    contract.link.Stall)."""
    parts = []
    for r, c in enumerate(completions):
        if c is None or c["status_name"] == "ok":
            continue
        waits = [text.format(prev=(r - 1) % nodes, next=(r + 1) % nodes) for bit, text in STALL_TEXT
                 if c.get("stall", 0) & bit]
        parts.append(f"rank {r} {c['status_name']} ({', '.join(waits) or 'no stage moved'})")
    return f"{what}: " + "; ".join(parts)


#: what each bit of a ring completion's ``stall`` says, for a person
STALL_TEXT = ((Stall.receive, "waiting for a frame from rank {prev}"),
              (Stall.send, "waiting for credit or acks from rank {next}"),
              (Stall.host, "waiting for host memory"))


def parse_faults(faults) -> inn.Faults:
    """``faults`` as :class:`in_network.Faults`: one already, a dict of its fields, or None (no faults)."""
    if faults is None:
        return inn.Faults()
    if isinstance(faults, inn.Faults):
        return faults
    if isinstance(faults, dict):
        unknown = set(faults) - {"drop", "dup", "corrupt", "seed"}
        if unknown:
            raise ValueError(f"faults: unknown keys {sorted(unknown)}; drop, dup, corrupt, seed")
        return inn.Faults(**faults)
    raise TypeError(f"faults must be an in_network.Faults, a dict or None, got {type(faults).__name__}")


@dataclass
class ClusterStats:
    nodes: int
    elements: int
    codec: str
    dtype: str
    packet: int
    clock_mhz: float
    link_gbps: float
    frames_per_link: list = field(default_factory=list)       # link r: rank r's uplink (data + acks)
    frame_bytes_per_link: list = field(default_factory=list)  # Ethernet frames without FCS
    payload_bytes_per_link: list = field(default_factory=list)
    data_frames_per_link: list = field(default_factory=list)  # the collective's packets
    ack_frames_per_link: list = field(default_factory=list)   # receive-credit acks (to the previous rank)
    bound_cycles: float = 0.0
    cycles: int = None
    efficiency: float = None
    backend: str = "model"
    width: int = 512
    link_latency: int = 0            # cycles per link (NIC -> switch and switch -> NIC: two per hop)
    nic_cycles: list = field(default_factory=list)          # each rank's completion `cycles`
    nic_packets_sent: list = field(default_factory=list)    # each rank's completion `packets_sent`
    sim_seconds: float = None        # wall time of the simulation (build excluded)
    traffic_matches_model: bool = None   # the RTL links carried the model's frame and byte counts
    op: str = "allreduce"            # the collective (allreduce.OPS)
    algorithm: str = "ring"          # ALGORITHMS
    jobs: list = None                # switch: the ranks of each job
    down_frames_per_link: list = None       # switch: frames the switch sent rank r (results)
    down_frame_bytes_per_link: list = None
    faults: dict = None              # switch: the fault probabilities and seed
    fault_counters: dict = None      # switch: per link, frames dropped, duplicated and corrupted
    retransmitted_per_rank: list = None     # switch: contributions a rank sent again (its timer)
    duplicate_results_per_rank: list = None     # switch: results a rank dropped as already taken
    switch_counters: dict = None     # switch: its drops by reason, and per job absorbed/completed/unicast; a tree:
                                     # the spine's, and each leaf's under "leaves"
    model_cycles: float = None       # model backend, switch or faulty ring: the event model's time (not a
    #                                  measurement; the ring's: its slowest link with data always ready)
    # the ring's links on an RTL backend (registers, contract/link.py): per rank
    acks_sent_per_rank: list = None
    nacks_sent_per_rank: list = None
    link_timeouts_per_rank: list = None
    duplicates_dropped_per_rank: list = None
    out_of_order_dropped_per_rank: list = None
    corrupted_dropped_per_rank: list = None
    recovered: bool = None           # dead_rank: after the timeout and a link reset, the next collective was ok
    lag: int = None                  # the ring: the lag the NICs ran (register LAG, at most credits.max_lag)

    @property
    def link_bytes_per_cycle(self) -> float:
        return bytes_per_cycle(self.link_gbps, self.clock_mhz)

    raw_bytes_per_link: list = field(default_factory=list)    # the same elements as fp32/int32
    stage_trace: list = None         # an RTL backend with stage_trace: per rank, stage_trace.summarise

    @property
    def datapath_bound_cycles(self) -> int:
        """The NIC datapath's bound at W bits a cycle (:func:`allreduce.datapath_bound_cycles`; the switch
        algorithm reads and writes the whole tensor as packets of P)."""
        nodes = 1 if self.algorithm == "switch" else self.nodes
        return ar.datapath_bound_cycles(nodes, self.elements, self.width, self.packet, self.op)

    @property
    def binding_efficiency(self) -> float:
        """max(the network's bound, the datapath's) / cycles: how close the run came to what binds it."""
        return None if not self.cycles else max(self.bound_cycles, self.datapath_bound_cycles) / self.cycles

    @property
    def compression_ratio(self) -> float:
        return sum(self.raw_bytes_per_link) / max(sum(self.payload_bytes_per_link), 1)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["link_bytes_per_cycle"] = self.link_bytes_per_cycle
        d["compression_ratio"] = self.compression_ratio
        d["datapath_bound_cycles"] = self.datapath_bound_cycles
        d["binding_efficiency"] = self.binding_efficiency
        d["bound_us"] = self.bound_cycles / self.clock_mhz
        d["time_us"] = None if self.cycles is None else self.cycles / self.clock_mhz
        d["achieved_gbps"] = (None if not self.cycles else
                              max(self.frame_bytes_per_link) * 8 * self.clock_mhz * 1e6 / self.cycles / 1e9)
        return d


class Cluster:
    """``nodes`` NICs in a ring, each with its host; every argument is checked here."""

    def __init__(self, nodes: int, backend: str = "model", width: int = 512, codec: str = "none",
                 dtype: str = "fp32", packet: int = 256, link_gbps: float = 80.0, clock_mhz: float = 250.0,
                 lag: int = None, link_latency: int = 125, memory: dict = None, waves: bool = False,
                 workdir=None, bench_nodes: int = None, capture: bool = False, algorithm: str = "ring",
                 faults=None, window: int = None, jobs: int = 1,
                 retransmit_timeout: int = None, deadline: int = DEADLINE, fabric: str = None,
                 dead_rank: int = None, stage_trace: bool = False, leaves: int = None, switch_speedup: int = 1):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        # what any NIC could run (the one check ainic demo and ainic model share), then what the bench holds
        collective.check(nodes, codec=codec, dtype=dtype, algorithm=algorithm, packet=packet, width=width,
                         link_gbps=link_gbps, clock_mhz=clock_mhz, link_latency=link_latency, leaves=leaves,
                         switch_speedup=switch_speedup)
        if nodes > MAX_CLUSTER_NODES:
            raise ValueError(f"the simulated cluster holds at most {MAX_CLUSTER_NODES} nodes, got {nodes}")
        if lag is not None and (isinstance(lag, bool) or not isinstance(lag, int) or not 1 <= lag <= 255):
            raise ValueError(f"lag must be None (chosen per run: allreduce.chosen_lag) or an int in 1 .. 255, "
                             f"got {lag!r}")
        if backend == "model" and (fabric is not None or waves or capture):
            raise ValueError("the model backend has no fabric to choose, record or capture: fabric, waves and "
                             "capture need backend 'verilator' or 'icarus'")
        self.faults = parse_faults(faults)
        if dead_rank is not None:
            if algorithm != "ring":
                raise ValueError("dead_rank is for the ring (the switch algorithm's deadline: deadline=)")
            if isinstance(dead_rank, bool) or not isinstance(dead_rank, int) or not 0 <= dead_rank < nodes:
                raise ValueError(f"dead_rank must be a rank in 0 .. {nodes - 1}, got {dead_rank!r}")
        timeout_chosen = retransmit_timeout is None     # (then longer where the window's packets take it: below)
        if retransmit_timeout is None:      # a tree's leaves take a packet's time twice: a longer timer
            retransmit_timeout = inn.TREE_RETRANSMIT_TIMEOUT if leaves is not None else RETRANSMIT_TIMEOUT
        for name, v in (("retransmit_timeout", retransmit_timeout), ("deadline", deadline)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int (cycles), got {v!r}")
        self.dead_rank = dead_rank
        if switch_speedup != 1 and backend == "model":     # the RTL bench's switch at 2W (hdl/sim/cluster_bench.py)
            raise ValueError("switch_speedup 2 builds the RTL's switches wider: the model backend has no switch to "
                             "build (its results are the same; `ainic model` predicts the cycles)")
        self.switch_speedup = switch_speedup
        if algorithm == "switch":
            if backend != "model" and packet > SWITCH_MAX_PACKET:
                raise ValueError(f"the RTL cluster's aggregation switch takes packets of at most "
                                 f"{SWITCH_MAX_PACKET} elements, got {packet}")
            if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= nodes:
                raise ValueError(f"jobs must be an int in 1 .. nodes ({nodes}), got {jobs!r}")
            if window is None:          # the bandwidth-delay product with room (docs/in_network.md, "Sizing")
                window = inn.chosen_window(width, codec, packet, bytes_per_cycle(link_gbps, clock_mhz),
                                           link_latency, jobs, None if backend == "model" else SWITCH_POOL,
                                           retransmit_timeout, leaves, switch_speedup)
            if timeout_chosen:          # at least the time the window's packets take to pass the switch
                retransmit_timeout = inn.chosen_timeout(width, codec, packet, bytes_per_cycle(link_gbps, clock_mhz),
                                                        window, leaves, switch_speedup)
            if backend != "model" and window > MAX_NIC_WINDOW:
                raise ValueError(f"a NIC keeps at most {MAX_NIC_WINDOW} slots in flight, got window {window}")
            if not is_power_of_two(window) or window > MAX_WINDOW:
                raise ValueError(f"window must be a power of two in 1 .. {MAX_WINDOW}, got {window!r}")
            if backend != "model" and window * jobs > SWITCH_POOL:
                raise ValueError(f"the RTL cluster's switch holds {SWITCH_POOL} slots: {jobs} job(s) of {window} "
                                 "do not fit")
        elif jobs != 1:
            raise ValueError("jobs > 1 needs algorithm='switch' (a ring is one job)")
        if leaves is not None:      # a two-level tree of switches (docs/in_network.md, "Two levels")
            if jobs != 1:       # (collective.check: the algorithm, the leaves and the ranks a tree holds)
                raise ValueError("leaves (a tree of switches) runs one job: give leaves or jobs, not both")
            if bench_nodes not in (None, nodes):
                raise ValueError("a tree's bench has the job's nodes: leave bench_nodes out")
        self.leaves = leaves
        fabric = fabric or ("switch" if algorithm == "switch" else "ring")
        if fabric not in FABRICS:
            raise ValueError(f"fabric must be one of {FABRICS}, got {fabric!r}")
        if algorithm == "switch" and fabric != "switch":
            raise ValueError("algorithm='switch' runs on fabric='switch' (the aggregation switch sums the packets)")
        self.fabric = fabric
        self.algorithm, self.window, self.jobs = algorithm, window or DEFAULT_WINDOW, jobs
        self.retransmit_timeout, self.deadline = retransmit_timeout, deadline
        self.nodes, self.backend, self.width = nodes, backend, width
        self.link_latency, self.memory, self.waves = link_latency, dict(memory or {}), waves
        self.workdir = Path(workdir) if workdir else None
        self.bench_nodes = bench_nodes or nodes        # a larger bench may run a smaller job (one build)
        self.capture = capture          # RTL backends: record every frame the NICs send (self.captured)
        self.waves_file = None          # with ``waves``: the FST trace of the last RTL run
        self.captured = None            # [(cycle, sender rank, frame bytes)] of the last RTL run
        # RTL backends: record every NIC's dbg_stages (self.stage_trace: host_driver.sim.stage_trace)
        if stage_trace and backend == "model":
            raise ValueError("stage_trace records the NICs' engines (dbg_stages): it needs an RTL backend")
        self.trace_stages = stage_trace
        self.stage_trace = None         # per rank, host_driver.sim.stage_trace.summarise of the last RTL run
        if not nodes <= self.bench_nodes <= MAX_CLUSTER_NODES:
            raise ValueError(f"bench_nodes must be in {nodes} .. {MAX_CLUSTER_NODES}, got {bench_nodes!r}")
        self.codec, self.dtype, self.packet = codec, dtype, packet
        self.link_gbps, self.clock_mhz = link_gbps, clock_mhz
        self.lag = lag                  # None: allreduce.chosen_lag for each run (lag_for)

    def lag_for(self, elements: int, op: str = "allreduce") -> int:
        """Register LAG for a run of ``elements`` per rank: the ``lag`` given, or the one
        :func:`allreduce.chosen_lag` picks for this ring (the NIC runs at most ``credits.max_lag`` of it)."""
        if self.lag is not None:
            return self.lag
        hop = 2 * self.link_latency         # NIC -> Ethernet switch -> NIC: two links (the harness's ring)
        return ar.chosen_lag(self.nodes, elements, self.codec, self.width, self.packet,
                             self.link_bytes_per_cycle, hop, op)

    @property
    def link_bytes_per_cycle(self) -> float:
        return bytes_per_cycle(self.link_gbps, self.clock_mhz)

    def _inputs(self, arrays):
        arrays = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
        if len(arrays) != self.nodes:
            raise ValueError(f"expected {self.nodes} arrays (one per node), got {len(arrays)}")
        want = np.float32 if self.dtype == "fp32" else np.int32
        for i, a in enumerate(arrays):
            if a.size != arrays[0].size:
                raise ValueError(f"every rank contributes the same number of elements: array {i} has {a.size:,}, "
                                 f"array 0 {arrays[0].size:,}")
            if a.dtype != want:
                raise TypeError(f"array {i} is {a.dtype}, expected {np.dtype(want).name} for dtype {self.dtype!r}")
        return arrays

    @property
    def top(self) -> str:
        """The simulation top an RTL backend runs: the NICs wired in a ring, or each linked to the aggregation
        switch (which also forwards the ring's frames by MAC)."""
        return bench_top(self.bench_nodes, self.fabric, self.leaves, self.switch_speedup)

    def job_ranks(self) -> list:
        """The ranks of each job: ``jobs`` contiguous groups, as even as they go (one group for a ring)."""
        return [list(map(int, g)) for g in np.array_split(np.arange(self.nodes), self.jobs)]

    def golden(self, arrays, op: str = "allreduce"):
        """What every rank must end with: the golden model of this cluster's algorithm (per job)."""
        x = self._inputs(arrays)
        if self.algorithm == "ring":
            return MODEL_OPS[op](x, self.codec, self.dtype, self.packet)
        out = np.zeros((self.nodes, len(x[0])), np.float32 if self.dtype == "fp32" else np.int32)
        for g in self.job_ranks():
            out[g] = inn.allreduce([x[r] for r in g], self.codec, self.dtype, leaves=self.leaves)
        return out

    def frames(self, arrays, op: str = "allreduce"):
        """Every frame of the collective ``op`` (from a fresh reset) as (sender rank, frame bytes); for
        the switch, what each link took in, in time order, the switch's frames as sender -1."""
        if self.algorithm == "switch":
            yield from self._switch_frames(self._switch_run(self._inputs(arrays), record=True))
            return
        yield from self._ring_frames(arrays, op)

    def _ring_frames(self, arrays, op):
        """The ring's frames as (sender rank, frame bytes). Each
        rank's frames come in the order its engine works (``allreduce.rank_schedule`` with the lag the NIC
        runs), data frames numbered by ``psn`` per link (from 0: a link fresh from reset), with an ack to the
        previous rank after every ``credits.ACK_EVERY`` frames consumed. The RTL acks by time as well as by
        count (contract/link.py: frames received, and a delay), so it sends at least these acks, each
        reporting at least as much. The ranks are interleaved round-robin."""
        plan, sends = ar.ring_traffic(self._inputs(arrays), self.codec, self.dtype, self.packet, op)
        by_item = {(s.src, s.step, (s.offset - plan.chunk(s.chunk).start) // self.packet): s for s in sends}
        lag = cr.effective_lag(self.lag_for(plan.elements, op), self.nodes, self.packet)   # what the NIC runs
        n = self.nodes
        order = []
        for r in range(n):
            out, psn, used, beats = [], 0, 0, 0
            prev = (r - 1) % n
            for p, k, _, kind in ar.rank_schedule(r, plan, lag, op):
                if ar.receives_in(kind):
                    used += 1
                    beats += cr.payload_beats(self.width, len(by_item[(prev, p - 1, k)].payload))
                    if used % cr.ACK_EVERY == 0:
                        out.append(self._ack(r, used, beats))
                if ar.sends_in(kind):
                    out.append(self._frame(by_item[(r, p, k)], psn))
                    psn += 1
            order.append(out)
        for i in range(max(len(o) for o in order)):
            for r in range(n):
                if i < len(order[r]):
                    yield r, order[r][i]

    def _ack(self, r, frames_used, beats_used):
        """Rank ``r``'s ack after it consumed ``frames_used`` frames (``beats_used`` payload beats) and received
        no more (contract/link.py: the psn expected next, the frames of room beyond it, the beat limit)."""
        prev = (r - 1) % self.nodes
        fields = ack_fields(frames_used, frames_used, beats_used, cr.advertised_beats(self.width))
        return proto.build_frame(
            b"", dst_mac=rank_mac(prev), src_mac=rank_mac(r), src_ip=rank_ip(r), dst_ip=rank_ip(prev), opcode=FrameOpcode.ack,
            codec=Codec.none, dtype=Dtype.fp32, flags=0, src_rank=r, dst_rank=prev, chunk=0, **fields)

    def _frame(self, s, psn):
        dst = (s.src + 1) % self.nodes
        return proto.build_frame(
            s.payload, dst_mac=rank_mac(dst), src_mac=rank_mac(s.src), src_ip=rank_ip(s.src),
            dst_ip=rank_ip(dst), opcode=FrameOpcode.result if s.allgather else FrameOpcode.data,
            codec=Codec[self.codec], dtype=Dtype[self.dtype],
            flags=FrameFlag.last_of_chunk if s.last_of_chunk else 0,
            src_rank=s.src, dst_rank=dst, chunk=s.chunk, count=s.count, offset=s.offset, psn=psn)

    def allreduce(self, arrays):
        """Every rank's sum of all ``arrays`` (one per node): (N×L results, :class:`ClusterStats`)."""
        return self.collective("allreduce", arrays)

    def reduce_scatter(self, arrays):
        """Rank r ends with the sum of chunk (r+1) mod N only (docs/allreduce.md); the rest of its
        result is zeros here (the NIC leaves that part of its destination unwritten)."""
        return self.collective("reduce_scatter", arrays)

    def allgather(self, arrays):
        """Rank r contributes chunk (r+1) mod N of its array; every rank ends with every contribution."""
        return self.collective("allgather", arrays)

    def collective(self, op: str, arrays):
        """Run collective ``op`` (one of ``allreduce.OPS``) on ``arrays``: (results, stats)."""
        if op not in ar.OPS:
            raise ValueError(f"op must be one of {ar.OPS}, got {op!r}")
        x = self._inputs(arrays)
        collective.check(self.nodes, x[0].size, codec=self.codec, dtype=self.dtype, op=op, algorithm=self.algorithm,
                         packet=self.packet, width=self.width, link_gbps=self.link_gbps, clock_mhz=self.clock_mhz,
                         link_latency=self.link_latency, leaves=self.leaves, switch_speedup=self.switch_speedup)
        if self.algorithm == "switch":
            return self._collective_switch(x)
        if self.backend != "model":
            return self._collective_rtl(op, x)
        results, stats = MODEL_OPS[op](x, self.codec, self.dtype, self.packet), self._traffic_stats(x, op)
        if self.faults.any or self.dead_rank is not None:
            self._ring_model_links(stats, op, results)
        return results, stats

    def _ring_model_links(self, stats, op, results):
        """The model backend's ring over faulty links: the result is the golden model's (the links deliver
        each frame once, in order); each link's frames go through ``ring_link.simulate_link`` with the
        bench's four injectors per link (sender's uplink and receiver's downlink there, the reverse back),
        so the link counters are the model's (statistically the RTL's, not cycle for cycle: the RTL's
        injectors see both links' frames interleaved in time). A dead rank: every rank times out (the
        ring is a cycle of waits), then, links reset, the same collective gives the golden result."""
        n = self.nodes
        stats.faults = asdict(self.faults)
        if self.dead_rank is not None:
            d = self.dead_rank
            # every rank ends up waiting for its predecessor's next frame (what the RTL reports: a sender's
            # frames for the dead rank are in its link sender, not waiting in the engine)
            stalls = [{"status_name": "timeout", "stall": Stall.receive} for _ in range(n)]
            stats.recovered = True
            raise CollectiveTimeout(ring_timeout_message(f"ring {op} on the model", stalls, n)
                                    + f" (the model's prediction: rank {d}'s links are dead, and after "
                                    f"{self.deadline:,} cycles without progress every rank times out). After "
                                    "CONTROL.link_reset on every NIC the same collective gives the golden result",
                                    ["timeout"] * n, stats, results)
        f = self.faults
        inj = {(side, r): ring_link.Injector(FaultStream(link_seed(f.seed, 2 * r + (side == "down")),
                                                         threshold(f.drop), threshold(f.dup), threshold(f.corrupt)))
               for side in ("up", "down") for r in range(n)}
        _, sends = ar.ring_sends(n, stats.elements, self.packet, op)
        beat = self.width // 8
        frame_bytes = [[] for _ in range(n)]
        for _, src, _, count in sends:
            frame_bytes[src].append(nm.codec_bytes(self.codec, count))
        runs = []
        for r in range(n):
            payload = frame_bytes[r] or [0]
            try:
                runs.append(ring_link.simulate_link(
                    [max(1, -(-b // beat)) for b in payload], latency=2 * self.link_latency + 2,
                    bytes_per_cycle=stats.link_bytes_per_cycle, frame_bytes=[HEADER + WIRE_EXTRA + b for b in payload],
                    width=self.width, timeout=self.retransmit_timeout, link=r, deadline=self.deadline,
                    paths=([inj["up", r], inj["down", (r + 1) % n]], [inj["up", (r + 1) % n], inj["down", r]]))
                    if frame_bytes[r] else ring_link.LinkRun(0))
            except ring_link.LinkStalled as exc:
                # the ring is a cycle of waits: the rank behind the stalled link waits for its frames, and
                # every other rank in turn (what the RTL reports after RING_DEADLINE)
                stats.fault_counters = {side: [inj[side, q].counters() for q in range(n)] for side in ("up", "down")}
                stalls = [{"status_name": "timeout", "stall": Stall.receive} for _ in range(n)]
                raise CollectiveTimeout(ring_timeout_message(f"ring {op} on the model", stalls, n)
                                        + f". Rank {r}'s link to rank {(r + 1) % n} delivered nothing for "
                                        f"{self.deadline:,} cycles ({exc.delivered:,} of {exc.frames:,} frames "
                                        f"through; faults: drop {f.drop:g}, dup {f.dup:g}, corrupt {f.corrupt:g})",
                                        ["timeout"] * n, stats) from None
        prev = [runs[(r - 1) % n] for r in range(n)]
        stats.fault_counters = {side: [inj[side, r].counters() for r in range(n)] for side in ("up", "down")}
        stats.retransmitted_per_rank = [run.retransmissions for run in runs]
        stats.link_timeouts_per_rank = [run.timeouts for run in runs]
        stats.acks_sent_per_rank = [p.acks for p in prev]
        stats.nacks_sent_per_rank = [p.nacks for p in prev]
        stats.duplicates_dropped_per_rank = [p.duplicates for p in prev]
        stats.out_of_order_dropped_per_rank = [p.out_of_order for p in prev]
        stats.corrupted_dropped_per_rank = [p.corrupt_arrived[0] + run.corrupt_arrived[1] for p, run in zip(prev, runs)]
        stats.frames_per_link = [run.sent + p.acks + p.nacks for run, p in zip(runs, prev)]
        stats.frame_bytes_per_link = [run.bytes_sent - WIRE_EXTRA * run.sent + HEADER * (p.acks + p.nacks)
                                      for run, p in zip(runs, prev)]
        stats.model_cycles = max(run.cycles for run in runs)

    def _traffic_stats(self, x, op="allreduce"):
        """Stats with everything the model knows: traffic from the exact packets, the ring bound."""
        n = self.nodes
        plan, sends = ar.ring_sends(n, len(x[0]), self.packet, op)      # sizes only: no data needed
        frames, payload, raw = [0] * n, [0] * n, [0] * n
        for _, src, _, count in sends:
            frames[src] += 1
            payload[src] += nm.codec_bytes(self.codec, count)
            raw[src] += 4 * count
        # each rank acks every ACK_EVERY frames it consumed from its predecessor (from a fresh reset)
        acks = [cr.acks_sent(frames[(r - 1) % n]) if n > 1 else 0 for r in range(n)]
        stats = ClusterStats(n, plan.elements, self.codec, self.dtype, self.packet, self.clock_mhz, self.link_gbps,
                             [f + a for f, a in zip(frames, acks)],
                             [p + HEADER * (f + a) for p, f, a in zip(payload, frames, acks)], payload,
                             data_frames_per_link=frames, ack_frames_per_link=acks,
                             backend=self.backend, raw_bytes_per_link=raw, width=self.width, op=op,
                             link_latency=self.link_latency if self.backend != "model" else 0)
        stats.bound_cycles = ar.ring_bound_cycles(n, plan.elements, stats.link_bytes_per_cycle, self.codec,
                                                  self.packet, HEADER + WIRE_EXTRA, op)
        stats.lag = cr.effective_lag(self.lag_for(plan.elements, op), n, self.packet)
        return stats

    # -- in-network aggregation --------------------------------------------------------------------------
    def _switch_run(self, x, record=False):
        return inn.simulate(x, self.codec, self.dtype, self.packet, self.window, self.faults,
                            link_bytes_per_cycle=self.link_bytes_per_cycle,
                            latency=self.link_latency, timeout=self.retransmit_timeout, deadline=self.deadline,
                            jobs=None if self.leaves else self.job_ranks(), record=record, leaves=self.leaves)

    def _switch_frames(self, run):
        """(sender rank or -1 for a switch, frame) of every frame a link took in, rank links and trunks."""
        n, sw = self.nodes, run.switch
        where = [(sw, r) for r in range(n)]
        if run.leaves:
            where = [(run.leaves[k], p) for k, g in enumerate(tree_groups(n, self.leaves)) for p in range(len(g))]
        for _, link, a in run.frames:
            r = link // 2
            if r >= n:                          # a trunk: leaf k's partials up, the spine's results down
                k = r - n
                leaf = run.leaves[k]
                yield -1, (a.frame(leaf.mac, sw.mac, leaf.ip, sw.ip) if link % 2 == 0 else sw.result_frame(k, a))
            elif link % 2 == 0:
                yield r, a.frame(rank_mac(r), where[r][0].mac, rank_ip(r), where[r][0].ip)
            else:
                yield -1, where[r][0].result_frame(where[r][1], a)

    def _collective_switch(self, x):
        if self.backend != "model":
            return self._collective_rtl("allreduce", x)
        run = self._switch_run(x)
        n, L = self.nodes, len(x[0])
        up, down = run.uplinks, run.downlinks
        stats = ClusterStats(n, L, self.codec, self.dtype, self.packet, self.clock_mhz, self.link_gbps,
                             [u.frames for u in up], [u.bytes for u in up],
                             [u.bytes - HEADER * u.frames for u in up], data_frames_per_link=[u.frames for u in up],
                             ack_frames_per_link=[0] * n, backend=self.backend, width=self.width,
                             raw_bytes_per_link=[w.raw_bytes for w in run.workers], link_latency=self.link_latency,
                             algorithm="switch", jobs=self.job_ranks(),
                             down_frames_per_link=[d.frames for d in down],
                             down_frame_bytes_per_link=[d.bytes for d in down],
                             faults=asdict(self.faults),
                             fault_counters={k: [asdict(c) for c in links] for k, links in
                                             (("up", up), ("down", down), ("trunk_up", run.trunk_up or []),
                                              ("trunk_down", run.trunk_down or [])) if links},
                             retransmitted_per_rank=[w.retransmitted for w in run.workers],
                             duplicate_results_per_rank=[w.duplicates for w in run.workers],
                             switch_counters={"drops": dict(run.switch.drops),
                                              "jobs": [asdict(c) for c in run.switch.job_counters],
                                              **({"leaves": [{"drops": dict(s.drops),
                                                              "jobs": [asdict(c) for c in s.job_counters]}
                                                             for s in run.leaves]} if run.leaves else {})},
                             model_cycles=run.cycles)
        stats.bound_cycles = inn.bound_cycles(L, self.packet, self.codec, stats.link_bytes_per_cycle,
                                              HEADER + WIRE_EXTRA)
        late = [r for r, s in enumerate(run.status) if s != "ok"]
        if late:
            raise CollectiveTimeout(
                f"switch all-reduce: ranks {late} timed out (no new result for {self.deadline:,} cycles); "
                f"faults {asdict(self.faults)}", run.status, stats)
        return run.results, stats

    def _switch_rtl_stats(self, x, raw, elapsed):
        """ClusterStats of a switch all-reduce on the RTL from what the bench measured; CollectiveTimeout
        if a rank's completion says timeout."""
        n, L = self.nodes, len(x[0])
        plan = inn.packets(L, self.packet, self.window)
        last = [c[-1] for c in raw["completions"]]
        up_f, up_b = raw["frames_per_link"], raw["bytes_per_link"]
        stats = ClusterStats(n, L, self.codec, self.dtype, self.packet, self.clock_mhz, self.link_gbps,
                             up_f, up_b, [b - HEADER * f for b, f in zip(up_b, up_f)], data_frames_per_link=up_f,
                             ack_frames_per_link=[0] * n, backend=self.backend, width=self.width,
                             raw_bytes_per_link=[4 * L * c["packets_sent"] // len(plan) for c in last],
                             link_latency=self.link_latency, algorithm="switch", jobs=self.job_ranks(),
                             down_frames_per_link=raw["down_frames_per_link"],
                             down_frame_bytes_per_link=raw["down_bytes_per_link"], faults=asdict(self.faults),
                             fault_counters=raw["fault_counters"],
                             retransmitted_per_rank=[c["retransmissions"] for c in last],
                             duplicate_results_per_rank=[r["AGG_DUP_RESULTS"] for r in raw["nic_registers"]],
                             switch_counters=dict(raw["switch_counters"], **({"leaves": raw["leaf_counters"]}
                                                                             if "leaf_counters" in raw else {})))
        stats.bound_cycles = inn.bound_cycles(L, self.packet, self.codec, stats.link_bytes_per_cycle, HEADER + WIRE_EXTRA)
        stats.nic_cycles = [c["cycles"] for c in last]
        stats.nic_packets_sent = [c["packets_sent"] for c in last]
        stats.cycles = max(stats.nic_cycles)
        stats.efficiency = stats.bound_cycles / stats.cycles
        stats.sim_seconds = elapsed
        if not self.faults.any:
            stats.traffic_matches_model = (up_f == [len(plan)] * n and raw["down_frames_per_link"] == [len(plan)] * n)
        late = [r for r, c in enumerate(last) if c["status_name"] != "ok"]
        if late:
            raise CollectiveTimeout(f"switch all-reduce on {self.backend}: ranks {late} ended with "
                                    f"{[last[r]['status_name'] for r in late]}; faults {asdict(self.faults)}",
                                    [c["status_name"] for c in last], stats)
        return stats

    def _ring_link_stats(self, stats, raw):
        """The ring's link counters (each NIC's registers) and every link's fault counters into ``stats``."""
        regs = raw["nic_registers"]
        stats.faults = asdict(self.faults)
        stats.fault_counters = raw.get("fault_counters")
        stats.retransmitted_per_rank = [r["RETRANSMISSIONS"] for r in regs]
        stats.acks_sent_per_rank = [r["LINK_ACKS_SENT"] for r in regs]
        stats.nacks_sent_per_rank = [r["LINK_NACKS_SENT"] for r in regs]
        stats.link_timeouts_per_rank = [r["LINK_TIMEOUTS"] for r in regs]
        stats.duplicates_dropped_per_rank = [r["RX_DROP_DUPLICATE"] for r in regs]
        stats.out_of_order_dropped_per_rank = [r["RX_DROP_OUT_OF_ORDER"] for r in regs]
        stats.corrupted_dropped_per_rank = [r["RX_DROP_MAC_ERROR"] for r in regs]

    def _collective_rtl(self, op, x):
        from hdl.flow.export import build_dir  # the RTL backends' dependencies (module docstring)
        from host_driver.sim import runner
        n, L = self.nodes, len(x[0])
        work = self.workdir or build_dir() / "jobs" / f"{self.backend}-n{n}-w{self.width}-{os.getpid()}"
        work.mkdir(parents=True, exist_ok=True)
        inputs = np.stack([a.view(np.uint32) for a in x])
        np.save(work / "inputs.npy", inputs.view(np.float32 if self.dtype == "fp32" else np.int32))
        job = {"nodes": n, "width": self.width, "op": op, "codec": self.codec, "dtype": self.dtype,
               "packet": self.packet,
               "lag": self.lag_for(L, op), "elements": L, "link_latency": self.link_latency,
               "link_rate": link_rate_fixed(self.link_gbps, self.clock_mhz), "memory": self.memory,
               "inputs": str(work / "inputs.npy"), "outputs": str(work / "out"), "capture": self.capture,
               "stage_trace": self.trace_stages,
               "algorithm": self.algorithm, "jobs": self.job_ranks(), "window": self.window, "leaves": self.leaves,
               "retransmit_timeout": self.retransmit_timeout, "deadline": self.deadline,
               "faults": asdict(self.faults),
               # switch, or a dead rank: every status comes back (a timeout raises CollectiveTimeout below);
               # ring: any error fails the run
               "expect_status": None if self.algorithm == "switch" or self.dead_rank is not None else 0}
        if self.dead_rank is not None:      # its links dead for the first collective, then reset; a second one
            job.update(kill={"rank": self.dead_rank, "collectives": [0]}, repeats=2)
        (work / "job.json").write_text(json.dumps(job))
        top = self.top
        runner.build_top(self.backend, top, self.width, self.waves)     # so that the timing below is the run
        t = time.time()
        run_dir = runner.run(self.backend, top, self.width, "host_driver.sim.cluster_job",
                             env={"AINIC_JOB": str(work / "job.json")}, tag="job", waves=self.waves)
        if self.waves:
            self.waves_file = run_dir / runner.WAVES_FILE[self.backend]
        elapsed = time.time() - t
        results = np.load(work / "out.results.npy")
        raw = json.loads((work / "out.stats.json").read_text())
        self.stage_trace = raw.get("stage_trace")
        if self.capture:
            self.captured = [(c, r, bytes.fromhex(f)) for c, r, f in json.loads((work / "out.frames.json").read_text())]
        if self.algorithm == "switch":
            stats = self._switch_rtl_stats(x, raw, elapsed)
            stats.stage_trace = self.stage_trace
            return results, stats
        stats = self._traffic_stats(x, op)
        stats.stage_trace = self.stage_trace
        self._ring_link_stats(stats, raw)
        if self.dead_rank is not None:
            first = [cs[0] for cs in raw["completions"]]
            if any(c["status_name"] != "ok" for cs in raw["completions"] for c in cs[1:]):
                raise RuntimeError(f"after the links were reset the next collective failed: {raw['completions']}")
            stats.recovered = True
            stats.cycles = max(c[-1] for c in raw["cycles"])
            raise CollectiveTimeout(ring_timeout_message(f"ring {op} on {self.backend}", first, self.nodes)
                                    + f"; rank {self.dead_rank}'s links were dead. After CONTROL.link_reset on "
                                    "every NIC the same collective ran again: ok on every rank",
                                    [c["status_name"] for c in first], stats, results)
        stats.nic_cycles = [c[-1] for c in raw["cycles"]]
        stats.nic_packets_sent = [c[-1]["packets_sent"] for c in raw["completions"]]
        stats.cycles = max(stats.nic_cycles)
        stats.efficiency = stats.bound_cycles / stats.cycles
        stats.sim_seconds = elapsed
        # what the links carried, measured in the fabric: the model's data frames, and as many acks as the
        # receivers counted (at least the model's, contract/link.py); with faults, frames sent again too
        acks = stats.acks_sent_per_rank
        model_data_bytes = [b - HEADER * a for b, a in zip(stats.frame_bytes_per_link, stats.ack_frames_per_link)]
        if self.faults.any:
            stats.traffic_matches_model = None          # resends and their acks depend on timing
        else:
            stats.traffic_matches_model = (
                raw["frames_per_link"] == [d + a for d, a in zip(stats.data_frames_per_link, acks)]
                and raw["bytes_per_link"] == [b + HEADER * a for b, a in zip(model_data_bytes, acks)]
                and stats.nic_packets_sent == stats.data_frames_per_link
                and all(a >= m for a, m in zip(acks, stats.ack_frames_per_link)))
        stats.frames_per_link = raw["frames_per_link"]
        stats.frame_bytes_per_link = raw["bytes_per_link"]
        stats.payload_bytes_per_link = [b - HEADER * f for b, f in zip(raw["bytes_per_link"], raw["frames_per_link"])]
        return results, stats
