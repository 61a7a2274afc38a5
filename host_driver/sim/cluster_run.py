"""The cluster harness in a cocotb simulation: N NICs run one job (import only inside a cocotb test).

A *job* is a dict (JSON on disk between the CLI process and the simulator process):
``nodes, width, op, codec, dtype, packet, lag, elements, repeats, link_latency, link_rate, memory, stagger``
(the last rank starts ``stagger`` cycles late; the memory
model's configuration, as ``HostMemory.configure`` takes it); optionally ``faults`` (drop, dup, corrupt
probabilities on every link and a seed), ``outage`` (rank, after, cycles: both links of a NIC dead for a
while), ``kill`` (rank, collectives: its links dead during those), ``reset`` (rank or "all", collective,
after: a NIC reset in the middle), ``deadline`` and ``retransmit_timeout`` (RING_DEADLINE, RETX_TIMEOUT), ``inputs`` (an ``.npy`` of N×L 32-bit words)
and ``outputs`` (where results and stats go). :func:`run_job` configures every NIC through its registers
(identity, peer table, rings), loads each rank's tensor through the memory backdoor, posts one descriptor
of ``op`` (allreduce, reduce_scatter, allgather) per NIC (``repeats`` of them back to back) and waits for every completion; the bulk data never
leaves the HDL.
"""

import json
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import Timer

from contract import regmap as rm
from contract.addresses import SWITCH_IP, SWITCH_MAC, ip_int, leaf_ip, leaf_mac, mac_int, rank_ip, rank_mac
from contract.enums import AggDrop, Codec, DropReason, Dtype
from contract.in_network import MIN_SWITCH_PORTS, link_seed, threshold, tree_groups
from contract.link import RING_DEADLINE
from host_driver.driver.nic import Nic
from host_driver.models import allreduce as ar
from host_driver.sim import stage_trace
from host_driver.sim.rtl_backend import CLOCK_NS, RtlBackend, reset_pulse

ADDR_BITS = 24
# The switch's definitions (its bench, job table and statistics: Amaranth; the golden model: scapy) are
# imported by the functions that need them: a ring job's simulator starts 0.3 s sooner without them.
CONTROL_ENABLE = rm.field_masks("CONTROL")["enable"]
CONTROL_LINK_RESET = rm.field_masks("CONTROL")["link_reset"]


def read_capture(path: Path, offset: int, width: int) -> list:
    """The frames ``ainic_frame_capture`` wrote to ``path`` from byte ``offset`` on: [(cycle of the last
    beat, frame bytes)]."""
    B = width // 8
    frames, cur = [], bytearray()
    with open(path) as fh:
        fh.seek(offset)
        for line in fh:
            cycle, last, keep, data = line.split()
            n = bin(int(keep, 16)).count("1")            # tkeep is contiguous from byte 0
            cur += int(data, 16).to_bytes(B, "little")[:n]
            if last == "1":
                frames.append((int(cycle), bytes(cur)))
                cur = bytearray()
    return frames


def bench_nodes(dut) -> int:
    """How many NICs the bench has (a job may use the first ``nodes`` of them)."""
    n = 0
    while hasattr(dut, f"n{n}_irq"):
        n += 1
    return n


def configure_faults(dut, job: dict) -> None:
    """The links' fault generators (docs/in_network.md, "Faults on the links"): the job's ``faults``
    (drop, dup, corrupt probabilities and a seed) on every link, no link down."""
    f = job.get("faults") or {}
    dut.fault_drop.value = threshold(f.get("drop", 0))
    dut.fault_dup.value = threshold(f.get("dup", 0))
    dut.fault_corrupt.value = threshold(f.get("corrupt", 0))
    seed = f.get("seed", 1)
    n = bench_nodes(dut)
    for r in range(n):
        getattr(dut, f"n{r}_up_seed").value = link_seed(seed, 2 * r)
        getattr(dut, f"n{r}_down_seed").value = link_seed(seed, 2 * r + 1)
        getattr(dut, f"n{r}_link_down").value = 0
        getattr(dut, f"n{r}_reset").value = 0
    for k in range(bench_leaves(dut)):      # a tree's trunks: links 2N + 2k (up) and 2N + 2k + 1, as the model's
        getattr(dut, f"t{k}_up_seed").value = link_seed(seed, 2 * n + 2 * k)
        getattr(dut, f"t{k}_down_seed").value = link_seed(seed, 2 * n + 2 * k + 1)


def bench_leaves(dut) -> int:
    """How many leaf switches the bench has (0: one switch, or a ring)."""
    k = 0
    while hasattr(dut, f"leaf{k}_mac"):
        k += 1
    return k


async def configure_switch(dut, job: dict, groups: list) -> None:
    """The aggregation switch's address and job table (job k: id k + 1, its window from pool slot
    k * window) and the ports' addresses (docs/in_network.md). A tree (``job["leaves"]``): the spine's job
    1 of the leaves, leaf k's job 1 of its ranks with its trunk as the up port (docs/in_network.md, "Two
    levels"), addresses as ``in_network.simulate`` gives them."""
    from hdl.sim.cluster_bench import SWITCH_JOBS
    from hdl.switch.job_table import JobEntry, job_entry_value
    dut.sw_mac.value = mac_int(SWITCH_MAC)
    dut.sw_ip.value = ip_int(SWITCH_IP)
    for r in range(bench_nodes(dut)):
        getattr(dut, f"n{r}_ip").value = ip_int(rank_ip(r))
    dtype, codec = Dtype[job["dtype"]], Codec[job["codec"]]
    if job.get("leaves"):
        tree = tree_groups(job["nodes"], job["leaves"])
        dut.sw_jobs.value = job_entry_value(1, range(len(tree)), job["window"], 0, dtype, codec, job["packet"])
        for k, g in enumerate(tree):
            getattr(dut, f"leaf{k}_mac").value = mac_int(leaf_mac(k))
            getattr(dut, f"leaf{k}_ip").value = ip_int(leaf_ip(k))
            getattr(dut, f"leaf{k}_jobs").value = job_entry_value(
                1, range(len(g)), job["window"], 0, dtype, codec, job["packet"], up_port=len(g), up_job=1, up_worker=k)
        return
    if len(groups) > SWITCH_JOBS:
        raise ValueError(f"the bench's switch holds {SWITCH_JOBS} jobs, got {len(groups)}")
    table = 0
    for k, g in enumerate(groups):
        e = job_entry_value(k + 1, g, job["window"], k * job["window"], dtype, codec, job["packet"])
        table |= e << (k * JobEntry.size)
    dut.sw_jobs.value = table


#: a ring job's per-NIC registers in its stats: the reliable link's counters (contract/link.py)
RING_REGISTERS = ("RETRANSMISSIONS", "LINK_TX_PSN", "LINK_RX_PSN", "LINK_TX_UNACKED", "LINK_TIMEOUTS", "LINK_PROBES",
                  "LINK_NACKS_RECEIVED", "LINK_NACKS_SENT", "LINK_ACKS_SENT", "RING_TIMEOUTS", "LINK_CREDIT_WAITS",
                  "RX_DROP_DUPLICATE", "RX_DROP_OUT_OF_ORDER", "RX_DROP_MAC_ERROR", "RX_DROP_LINK_DOWN")


def fault_counts(dut, r: int, name: str, kind: str = "n") -> dict:
    """What link ``name`` ("up" or "down") of NIC ``r`` (of trunk ``r`` with ``kind`` "t") did to its frames:
    dropped, duplicated, corrupted."""
    v = int(getattr(dut, f"{kind}{r}_{name}_faults").value)
    return {k: (v >> (32 * i)) & 0xFFFFFFFF for i, k in enumerate(("dropped", "duplicated", "corrupted"))}


def switch_stats(dut, nodes: int, jobs: int) -> dict:
    """The switch's counters and every link's fault counters, decoded; a tree's: the spine's as the
    switch's, and each leaf's and each trunk's."""
    leaves = bench_leaves(dut)
    if not leaves:
        return {"switch_counters": switch_counters(dut, "sw", bench_nodes(dut), nodes, jobs),
                "fault_counters": {"up": [fault_counts(dut, r, "up") for r in range(nodes)],
                                   "down": [fault_counts(dut, r, "down") for r in range(nodes)]}}
    tree = tree_groups(nodes, leaves)
    return {"switch_counters": switch_counters(dut, "sw", max(leaves, MIN_SWITCH_PORTS), leaves, jobs),
            "leaf_counters": [switch_counters(dut, f"leaf{k}", len(g) + 1, len(g) + 1, jobs)
                              for k, g in enumerate(tree)],
            "fault_counters": {"up": [fault_counts(dut, r, "up") for r in range(nodes)],
                               "down": [fault_counts(dut, r, "down") for r in range(nodes)],
                               "trunk_up": [fault_counts(dut, k, "up", "t") for k in range(leaves)],
                               "trunk_down": [fault_counts(dut, k, "down", "t") for k in range(leaves)]}}


def switch_counters(dut, prefix: str, ports: int, nodes: int, jobs: int) -> dict:
    """The counters of the switch whose stats are ``<prefix>_stats`` (``ports`` ports, the first ``nodes``
    of them reported), its first ``jobs`` job entries'."""
    from hdl.sim.cluster_bench import SWITCH_JOBS
    from hdl.switch.aggregation_switch import stats_layout
    layout = stats_layout(ports, SWITCH_JOBS)
    raw = int(getattr(dut, f"{prefix}_stats").value)

    def field(name):
        f = layout[name]
        return (raw >> f.offset) & ((1 << f.width) - 1), f.shape

    def array(name, inner_bits, count):
        v, _ = field(name)
        return [(v >> (inner_bits * i)) & ((1 << inner_bits) - 1) for i in range(count)]
    reasons = len(AggDrop)
    drops = dict(zip([r.name for r in AggDrop], array("drops", 32, reasons)))
    job_drops_raw = array("job_drops", 32 * reasons, SWITCH_JOBS)
    job_drops = [dict(zip([r.name for r in AggDrop], [(v >> (32 * i)) & 0xFFFFFFFF for i in range(reasons)]))
                 for v in job_drops_raw[:jobs]]
    parser = array("port_parser_drops", 32 * len(DropReason), ports)

    return {
            "drops": drops,
            "jobs": [{"absorbed": a, "completed": c, "unicast": u, "nacks": k, "up": up, "down": dn, "drops": d}
                     for a, c, u, k, up, dn, d in
                     zip(array("job_absorbed", 32, jobs), array("job_completed", 32, jobs),
                         array("job_unicast", 32, jobs), array("job_nacks", 32, jobs), array("job_up", 32, jobs),
                         array("job_down", 32, jobs), job_drops)],
            "port_frames_in": array("port_frames_in", 32, ports)[:nodes],
            "port_frames_out": array("port_frames_out", 32, ports)[:nodes],
            "port_parser_drops": [{r.name: (v >> (32 * i)) & 0xFFFFFFFF for i, r in enumerate(DropReason)
                                   if (v >> (32 * i)) & 0xFFFFFFFF} for v in parser[:nodes]],
            "unknown_mac": field("unknown_mac")[0],
    }


async def run_job(dut, job: dict) -> dict:
    n, W = job["nodes"], job["width"]
    x = np.load(job["inputs"])
    L = x.shape[1]
    nics = [Nic(RtlBackend(dut, W, ADDR_BITS, prefix=f"n{r}_", files=f"hostmem{r}"), sq_entries=8, cq_entries=8)
            for r in range(bench_nodes(dut))]
    if n > len(nics):
        raise ValueError(f"a {n}-node job on a {len(nics)}-node bench")
    for r, nic in enumerate(nics):         # the NICs beyond the job's stay disabled
        await nic.backend.reset(pulse=False, **job.get("memory", {}))
        getattr(dut, f"n{r}_mac").value = mac_int(rank_mac(r))
    nics = nics[:n]
    dut.link_latency.value = job["link_latency"]
    dut.link_rate.value = job["link_rate"]
    switch = job.get("algorithm", "ring") == "switch"
    groups = job.get("jobs") or [list(range(n))]
    configure_faults(dut, job)
    if switch:
        await configure_switch(dut, job, groups)
    await reset_pulse(dut)
    if switch:
        while int(dut.sw_clearing.value) or any(int(getattr(dut, f"leaf{k}_clearing").value)
                                                for k in range(bench_leaves(dut))):
            await Timer(10 * CLOCK_NS, unit="ns")
    tree = tree_groups(n, job["leaves"]) if job.get("leaves") else None
    peers = [(mac_int(rank_mac(r)), ip_int(rank_ip(r))) for r in range(n)]
    bufs = []

    async def configure(r):
        """Identity, peers and rings of NIC r (again after it was reset), and the job's timers."""
        nic = nics[r]
        if switch:          # rank = the worker's index in its job (its leaf's), the job id its job's
            own = tree or groups
            k = next(i for i, g in enumerate(own) if r in g)
            sw_mac, sw_ip = (leaf_mac(k), leaf_ip(k)) if tree else (SWITCH_MAC, SWITCH_IP)
            await nic.start(rank=own[k].index(r), world_size=len(own[k]), packet_elems=job["packet"],
                            lag=job["lag"], job_id=1 if tree else k + 1, local_mac=peers[r][0], local_ip=peers[r][1],
                            peers=[peers[q] for q in own[k]])
            for name, value in (("SWITCH_MAC_LO", mac_int(sw_mac) & 0xFFFFFFFF),
                                ("SWITCH_MAC_HI", mac_int(sw_mac) >> 32),
                                ("SWITCH_IP", ip_int(sw_ip)),
                                ("AGG_WINDOW_LOG2", job["window"].bit_length() - 1),
                                ("RETX_TIMEOUT", job["retransmit_timeout"]), ("AGG_DEADLINE", job["deadline"])):
                await nic.write_reg(name, value)
        else:
            await nic.start(rank=r, world_size=n, packet_elems=job["packet"], lag=job["lag"],
                            job_id=job.get("job_id", 0), local_mac=peers[r][0], local_ip=peers[r][1], peers=peers)
            for name, key in (("RETX_TIMEOUT", "retransmit_timeout"), ("RING_DEADLINE", "deadline")):
                if job.get(key) is not None:
                    await nic.write_reg(name, job[key])

    for r, nic in enumerate(nics):
        await configure(r)
        src, dst = nic.alloc(4 * L, align=W // 8), nic.alloc(4 * L, align=W // 8)
        await nic.write(src, x[r])
        if job.get("op") == "reduce_scatter":      # it leaves all but one chunk of dst unwritten
            await nic.write(dst, np.zeros(L, np.uint32))
        bufs.append((src, dst))
    start_frames = [int(getattr(dut, f"n{r}_up_frames").value) for r in range(n)]
    start_bytes = [int(getattr(dut, f"n{r}_up_bytes").value) for r in range(n)]
    start_down = [(int(getattr(dut, f"n{r}_down_frames").value), int(getattr(dut, f"n{r}_down_bytes").value))
                  for r in range(n)]
    start_stalls = [int(getattr(dut, f"n{r}_rx_stalls").value) for r in range(n)]
    captures = [Path(f"capture{r}.txt") for r in range(n)]
    if job.get("capture"):
        capture_from = [p.stat().st_size if p.exists() else 0 for p in captures]
        dut.capture.value = 1
    traces = [Path(f"stages{r}.txt") for r in range(n)]
    if job.get("stage_trace"):
        trace_from = [p.stat().st_size if p.exists() else 0 for p in traces]
        dut.stage_trace.value = 1

    op = job.get("op", "allreduce")
    plan = ar.Plan(n, L, job["packet"])
    if switch:
        from host_driver.models import in_network as inn
        bound = inn.bound_cycles(L, job["packet"], job["codec"], job["link_rate"] / 256)
        timeout = int(50 * bound + 200 * L // job["packet"] + 2 * job["deadline"] + 100_000)
    else:
        bound = ar.ring_bound_cycles(n, L, job["link_rate"] / 256, job["codec"], job["packet"], op=op)
        timeout = int(50 * bound + 200 * L // job["packet"] + 2 * job.get("deadline", RING_DEADLINE) + 100_000)
    completions = [[] for _ in range(n)]
    t0 = nics[0].backend.cycle()

    stagger = job.get("stagger", 0)
    early = {}

    async def node(r):
        nic = nics[r]
        if stagger and r == n - 1:      # the last rank starts `stagger` cycles late
            await Timer(stagger * CLOCK_NS, unit="ns")
            early["frames"] = [int(getattr(dut, f"n{q}_up_frames").value) - start_frames[q] for q in range(n)]
        for i in range(job.get("repeats", 1)):
            c = await nic.wait(await submit(r, i), timeout_cycles=timeout)
            completions[r].append(c)

    async def submit(r, i):
        src, dst = bufs[r]
        return await nics[r].submit(op, src=src, dst=dst, count=L, dtype=job["dtype"], codec=job["codec"],
                                    collective=i, algorithm="switch" if switch else "ring")

    async def rounds():
        """Collective i on every rank at once, then the next: a link down (``kill``: rank, collectives) or a
        reset of one NIC or all (``reset``: rank or "all", collective, cycles after the start) in the middle;
        after a round that did not end well, the reset NICs are configured again and every NIC's links are
        reset together (CONTROL.link_reset for ``quiet`` cycles) before the next round."""
        kill, rst = job.get("kill") or {}, job.get("reset") or {}
        quiet = 4 * job["link_latency"] + 4000
        for i in range(job.get("repeats", 1)):
            down = i in kill.get("collectives", ())
            if down:
                getattr(dut, f"n{kill['rank']}_link_down").value = 1
            idx = [await submit(r, i) for r in range(n)]
            reset_ranks = []
            if rst and rst["collective"] == i:
                await Timer(rst["after"] * CLOCK_NS, unit="ns")
                reset_ranks = list(range(n)) if rst["rank"] == "all" else [rst["rank"]]
                for r in reset_ranks:
                    getattr(dut, f"n{r}_reset").value = 1
                await Timer(4 * CLOCK_NS, unit="ns")
                for r in reset_ranks:
                    getattr(dut, f"n{r}_reset").value = 0
            tasks = {r: cocotb.start_soon(nics[r].wait(idx[r], timeout_cycles=timeout))
                     for r in range(n) if r not in reset_ranks}
            for r in range(n):
                completions[r].append((await tasks[r]) if r in tasks else None)
            if down:
                getattr(dut, f"n{kill['rank']}_link_down").value = 0
            if reset_ranks or any(c is None or not c.ok for cs in completions for c in cs[-1:]):
                for r in reset_ranks:
                    await configure(r)
                for nic in nics:
                    await nic.write_reg("CONTROL", CONTROL_ENABLE | CONTROL_LINK_RESET)
                await Timer(quiet * CLOCK_NS, unit="ns")
                for nic in nics:
                    await nic.write_reg("CONTROL", CONTROL_ENABLE)

    async def outage(rank, after, cycles):
        """Both links of NIC ``rank`` drop everything for ``cycles``, ``after`` cycles from the start."""
        await Timer(after * CLOCK_NS, unit="ns")
        getattr(dut, f"n{rank}_link_down").value = 1
        await Timer(cycles * CLOCK_NS, unit="ns")
        getattr(dut, f"n{rank}_link_down").value = 0

    if job.get("kill") or job.get("reset"):
        await rounds()
    else:
        if job.get("outage"):
            cocotb.start_soon(outage(**job["outage"]))
        tasks = [cocotb.start_soon(node(r)) for r in range(n)]
        for t in tasks:
            await t
    wall = nics[0].backend.cycle() - t0
    if job.get("stage_trace"):
        dut.stage_trace.value = 0             # the recorders write their end line two cycles later
    # let the last acks (sent as the last frames were consumed) reach the links' counters; on the ring,
    # until every sender has its frames acknowledged (a lost last ack takes a retransmission timeout or two)
    await Timer(2000 * CLOCK_NS, unit="ns")
    for _ in range(64 if not switch else 0):
        if all([await nic.read_reg("LINK_TX_UNACKED") == 0 for nic in nics]):
            break
        await Timer(2000 * CLOCK_NS, unit="ns")
    want = np.int32 if job["dtype"] == "int32" else np.float32
    results = np.stack([await nics[r].read(bufs[r][1], L, want) for r in range(n)])
    np.save(job["outputs"] + ".results.npy", results)
    stats = {
        "completions": [[c and c.__dict__ | {"status_name": c.status_name} for c in cs] for cs in completions],
        "cycles": [[c and c.cycles for c in cs] for cs in completions],
        "wall_cycles": wall,
        "frames_per_link": [int(getattr(dut, f"n{r}_up_frames").value) - start_frames[r] for r in range(n)],
        "bytes_per_link": [int(getattr(dut, f"n{r}_up_bytes").value) - start_bytes[r] for r in range(n)],
        "switch_unknown": int(dut.sw_unknown.value),
        "frames_before_last_start": early.get("frames"),
        "rx_stall_cycles": [int(getattr(dut, f"n{r}_rx_stalls").value) - start_stalls[r] for r in range(n)],
        "memory_violations": [nics[r].backend.memory.stats()["stat_violations"] for r in range(n)],
        "chunk_elems": plan.chunk_elems,
        "warnings": [sorted(nic.warnings) for nic in nics],
        "down_frames_per_link": [int(getattr(dut, f"n{r}_down_frames").value) - start_down[r][0] for r in range(n)],
        "down_bytes_per_link": [int(getattr(dut, f"n{r}_down_bytes").value) - start_down[r][1] for r in range(n)],
    }
    if switch:
        stats.update(switch_stats(dut, n, len(groups)))
        for name, frames, nbytes in (("up", stats["frames_per_link"], stats["bytes_per_link"]),
                                     ("down", stats["down_frames_per_link"], stats["down_bytes_per_link"])):
            for counters, f, b in zip(stats["fault_counters"][name], frames, nbytes):
                counters.update(frames=f, bytes=b)      # what entered the link, as the model's LinkCounters
        stats["nic_registers"] = [{name: await nic.read_reg(name) for name in
                                   ("AGG_PSN", "AGG_DUP_RESULTS", "AGG_TIMEOUTS", "RETRANSMISSIONS",
                                                             "AGG_STORED_RESENDS")} for nic in nics]
    else:
        stats["nic_registers"] = [{name: await nic.read_reg(name) for name in RING_REGISTERS} for nic in nics]
        stats["fault_counters"] = {name: [fault_counts(dut, r, name) for r in range(n)] for name in ("up", "down")}
    if job.get("capture"):
        dut.capture.value = 0
        frames = [(c, r, f.hex()) for r in range(n) for c, f in read_capture(captures[r], capture_from[r], W)]
        with open(job["outputs"] + ".frames.json", "w") as fh:
            json.dump(sorted(frames), fh)
    if job.get("stage_trace"):
        stats["stage_trace"] = [stage_trace.summarise(*stage_trace.read(traces[r], trace_from[r]),
                                                      algorithm="switch" if switch else "ring")
                                for r in range(n)]
    with open(job["outputs"] + ".stats.json", "w") as fh:
        json.dump(stats, fh)
    return stats
