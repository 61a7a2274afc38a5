#!/usr/bin/env python3
"""`make bench`: throughput, latency and simulation speed of every block at W = 512 on both simulators.

Runs the cocotb ``throughput`` tests (10,240 back-to-back beats, no idle, no backpressure; results checked
bit for bit like any other test) and writes ``results/bench.json``:

    {"meta": {...}, "<simulator>": {"<block>_w512": {"in_beats_per_cycle": ..., "latency_cycles": ...,
                                                       "sim_cycles_per_second": ...}, ...}}
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from contract.enums import Codec, names
from contract.limits import WIDE_WIDTH
from hdl.flow.export import build_dir
from hdl.flow.synth import resource_summary
from hdl.flow.toolchain import SIMULATORS
from host_driver.models.allreduce import OPS
from host_driver.sim.runner import run

ROOT = Path(__file__).resolve().parent.parent
os.environ["AINIC_BENCH"] = "1"

RUNS = [  # (top, cocotb module, test filter)
    ("reduction_unit", "cocotb_tests.arith.test_reduction_unit", r"\.throughput"),
    ("compressor", "cocotb_tests.codec.codec_tests", r"\.throughput"),
    ("decompressor", "cocotb_tests.codec.codec_tests", r"\.throughput"),
    ("rx_parser", "cocotb_tests.packet.test_rx_parser", r"\.throughput"),
    ("tx_builder", "cocotb_tests.packet.test_tx_builder", r"\.throughput"),
    ("host_bench", "cocotb_tests.nic.test_nic", r"\.dma_throughput"),
]


def at_clock(st) -> dict:
    """A run's time and the Gb/s its busiest link carried at the clock it was simulated at (``--clock-mhz``:
    the cycles are the clock's too, the links' bytes per cycle following it)."""
    d = st.as_dict()
    return {"clock_mhz": st.clock_mhz, "time_us": round(d["time_us"], 3), "achieved_gbps": round(d["achieved_gbps"], 2)}


def allreduce_bench(results, args):
    """Ring collectives of L fp32 per rank through the RTL cluster (W = 512, 80 Gb/s links of 125 cycles, the
    lag ``Cluster`` chooses): cycles against the ring bound and the datapath bound (``binding_efficiency``:
    the larger of the two / cycles), each stage's busy share on rank 0 (the stage trace), checked bit for bit
    against the golden model; simulation speed. Verilator runs every (collective, N, codec) — REDUCE_SCATTER
    and ALLGATHER alone too — and every codec's all-reduce at N = 4 on the wide NIC (W = 1024,
    docs/collective_engine.md, "The wide datapath"); Icarus one small case for its speed."""
    import numpy as np

    from host_driver.sim.cluster import MODEL_OPS, Cluster
    res = results.setdefault("allreduce", {})
    W = args.width
    ops, nodes, codecs = args.op or OPS, args.nodes or [4, 8], args.codec or names(Codec)
    # every collective (either half alone too), N and codec
    cases = [("verilator", op, n, codec, args.elements, W) for op in ops for n in nodes for codec in codecs]
    # the wide NIC, every codec at N = 4
    if W != WIDE_WIDTH and 4 in nodes and "allreduce" in ops:
        cases += [("verilator", "allreduce", 4, codec, args.elements, WIDE_WIDTH) for codec in codecs]
    if (not args.sim or "icarus" in args.sim) and "allreduce" in ops:
        cases.append(("icarus", "allreduce", 4, "bfp8", 16384, W))
    for sim, op, n, codec, L, width in cases:
        if args.sim and sim not in args.sim:
            continue
        print(f"bench: {op} {sim} N={n} {codec} L={L:,} W={width} ...", flush=True)
        rng = np.random.default_rng(n)
        x = [rng.standard_normal(L).astype(np.float32) for _ in range(n)]
        got, st = Cluster(n, sim, width, codec, stage_trace=True, clock_mhz=args.clock_mhz).collective(op, x)
        want = MODEL_OPS[op](x, codec, "fp32", 256)
        trace = st.stage_trace[0]        # rank 0: each stage's share of the run busy (docs/collective_engine.md)
        key = f"n{n}_{codec}_L{L}_w{width}" if op == "allreduce" else f"{op}_n{n}_{codec}_L{L}_w{width}"
        res.setdefault(sim, {})[key] = {
            "cycles": st.cycles, "bound_cycles": round(st.bound_cycles), "efficiency": round(st.efficiency, 4),
            "datapath_bound_cycles": st.datapath_bound_cycles,
            "binding_efficiency": round(st.binding_efficiency, 4),
            "rank0_busy": {k: round(v["cycles"]["busy"] / trace["cycles"], 3) for k, v in trace["stages"].items()},
            "bit_exact": bool(np.array_equal(got.view(np.uint32), want.view(np.uint32))),
            "traffic_matches_model": st.traffic_matches_model, "frames_per_link": st.frames_per_link[0],
            "compression_ratio": round(st.compression_ratio, 3), "sim_seconds": round(st.sim_seconds, 1),
            "sim_cycles_per_second": round(st.cycles / st.sim_seconds),
            "link_gbps": st.link_gbps, "link_latency_cycles": st.link_latency, "lag": st.lag, "packet": 256,
            **at_clock(st)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")      # after every case: long runs keep partial figures
    if args.op:         # only these collectives of the ring
        return
    if (not args.sim or "verilator" in args.sim) and 4 in nodes:
        demo_bench(results, args)
    if not args.sim or "verilator" in args.sim:
        switch_bench(results, args)


def switch_bench(results, args):
    """In-network aggregation of L fp32 per rank through the RTL cluster around the aggregation switch (W =
    512 and the wide W = 1024, 80 Gb/s links), every codec: cycles against the in-network bound and the
    NIC's datapath bound; the ring all-reduce with the same codec on the same fabric (the NICs' ring frames
    forwarded by MAC through the same switch: one build, the same links), and the speedup; at the smallest
    N, efficiency at 0.01 %, 0.1 % and 1 % loss on every link (frames dropped on the way up and on the way
    down), with the switch at the NICs' width and at twice it (``switch_speedup`` 2: keys ``..._x2``), and at
    the largest N a tree of two leaf switches and a spine, twice as wide (keys ``..._x2_l2``: every link and
    trunk lossy). Every result checked bit for bit against the golden model. Writes results/switch_loss.png."""
    from hdl.flow.deps import timing_digest
    from host_driver.sweep import engine
    res = results.setdefault("switch_allreduce", {}).setdefault("verilator", {})
    nodes = args.nodes or [4, 8]
    codecs = args.codec or names(Codec)
    L = args.elements
    cases = [(n, c, 0.0, args.width) for n in nodes for c in codecs]
    if not args.no_loss_sweep:          # loss curves: N = 4 and 8, uncompressed and bfp8, at the first width
        cases += [(n, c, p, args.width) for n in nodes for c in ("none", "bfp8") if c in codecs
                  for p in (1e-4, 1e-3, 1e-2)]
        if args.width != WIDE_WIDTH:    # and the switch twice as wide as its links (loss-free first: the base)
            cases += [(n, c, p, args.width, 2) for n in nodes for c in ("none", "bfp8") if c in codecs
                      for p in (0.0, 1e-4, 1e-3, 1e-2)]
            cases += [(max(nodes), c, p, args.width, 2, 2) for c in ("none", "bfp8") if c in codecs
                      for p in (0.0, 1e-3, 1e-2)]
    if args.tree:                       # only the tree's cases (its loss-free one first: the base)
        cases = [c for c in cases if len(c) > 5]
    if args.width != WIDE_WIDTH and not args.no_wide and not args.tree:     # then the wide NIC (the largest builds)
        cases += [(n, c, 0.0, WIDE_WIDTH) for n in nodes for c in codecs]
    # on the sweep engine (host_driver/sweep/engine.py): a case a worker, each bench built by its first case;
    # each case journaled as it completes (run again on the same RTL, only the missing cases run)
    # (a point names its speedup and leaves only when it has them: the journal's keys of the others stay)
    points = [{"nodes": n, "codec": c, "loss": p, "width": w, "elements": L, "clock_mhz": args.clock_mhz,
               **({"speedup": s[0]} if s else {}), **({"leaves": s[1]} if len(s) > 1 else {})}
              for n, c, p, w, *s in cases]
    key = engine.canonical
    out = engine.run(points, switch_case, engine.Journal(build_dir() / "bench_switch_cases.jsonl", timing_digest()),
                     key=key, group=lambda p: (p["nodes"], p["width"], p.get("speedup", 1), p.get("leaves")),
                     scheduler=args.scheduler, workers=args.sim_workers,
                     describe=lambda p: (f"N={p['nodes']} {p['codec']} W={p['width']} loss={p['loss']:g}"
                                         + (f" switch x{p['speedup']}" if "speedup" in p else "")
                                         + (f" over {p['leaves']} leaves" if "leaves" in p else "")),
                     say=lambda line: print("bench: switch: " + line, flush=True))
    if out["failed"]:
        raise RuntimeError(f"switch bench: cases failed: {out['failed']}")
    for p in points:                    # loss-free cases first in ``cases``: each loss case finds its base
        entry = dict(out["results"][key(p)])
        k = f"n{p['nodes']}_{p['codec']}_L{L}_w{p['width']}" + (f"_x{p['speedup']}" if "speedup" in p else "") \
            + (f"_l{p['leaves']}" if "leaves" in p else "")
        if p["loss"]:
            base = res.get(k, {}).get("efficiency")
            entry["relative_to_lossless"] = round(entry["efficiency"] / base, 4) if base else None
        res[k + (f"_loss{p['loss']:g}" if p["loss"] else "")] = entry
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    plot_loss(results, args, min(nodes))


def switch_case(p: dict) -> dict:
    """One case of :func:`switch_bench` (N, codec, loss, width, L, clock): the switch all-reduce's figures and,
    loss-free at the switch's own width, the ring's on the same fabric and the speedup."""
    import numpy as np

    from host_driver.sim.cluster import MODEL_OPS, Cluster
    n, codec, loss, width, L = p["nodes"], p["codec"], p["loss"], p["width"], p["elements"]
    switch_speedup, leaves = p.get("speedup", 1), p.get("leaves")
    rng = np.random.default_rng(n)
    x = [rng.standard_normal(L).astype(np.float32) for _ in range(n)]
    ring = None
    if not loss and switch_speedup == 1 and not leaves:
        print(f"bench: ring allreduce through the switch, verilator N={n} {codec} L={L:,} W={width} ...",
              flush=True)
        ring_cluster = Cluster(n, "verilator", width, codec, fabric="switch", clock_mhz=p["clock_mhz"])
        got, st = ring_cluster.allreduce(x)
        want = MODEL_OPS["allreduce"](x, codec, "fp32", ring_cluster.packet)
        ring = {"cycles": st.cycles, "bound_cycles": round(st.bound_cycles), "efficiency": round(st.efficiency, 4),
                "bit_exact": bool(np.array_equal(got.view(np.uint32), want.view(np.uint32))),
                "sim_seconds": round(st.sim_seconds, 1)}
    print(f"bench: switch allreduce verilator N={n} {codec} L={L:,} W={width} loss={loss:g} ...", flush=True)
    cluster = Cluster(n, "verilator", width, codec, algorithm="switch", faults={"drop": loss, "seed": 1},
                      clock_mhz=p["clock_mhz"], stage_trace=True, switch_speedup=switch_speedup, leaves=leaves)
    got, st = cluster.allreduce(x)
    trace = st.stage_trace[0]        # rank 0: each stage of its switch client busy (docs/in_network.md)
    entry = {
        "cycles": st.cycles, "bound_cycles": round(st.bound_cycles), "efficiency": round(st.efficiency, 4),
        "datapath_bound_cycles": st.datapath_bound_cycles,
        "binding_efficiency": round(st.binding_efficiency, 4),
        "bit_exact": bool(np.array_equal(got.view(np.uint32), cluster.golden(x).view(np.uint32))),   # a tree's too
        "loss_per_link": loss, "retransmissions": sum(st.retransmitted_per_rank),
        "frames_lost": sum(c["dropped"] for links in st.fault_counters.values() for c in links),   # trunks too
        "frames_up": st.frames_per_link[0], "frames_down": st.down_frames_per_link[0],
        "ring_bound_ratio": round(2 * (n - 1) / n, 3),
        "rank0_busy": {k: round(v["cycles"]["busy"] / trace["cycles"], 3) for k, v in trace["stages"].items()},
        "sim_seconds": round(st.sim_seconds, 1), "sim_cycles_per_second": round(st.cycles / st.sim_seconds),
        "link_gbps": st.link_gbps, "packet": cluster.packet, "window": cluster.window,
        "switch_speedup": switch_speedup, "leaves": leaves, **at_clock(st)}
    if ring:
        entry.update(ring_same_fabric=ring, speedup_over_ring=round(ring["cycles"] / st.cycles, 3))
    return entry


def ring_loss_bench(results, args):
    """The ring all-reduce of L fp32 per rank over lossy links (W = 512, 80 Gb/s, 1 µs per hop, Verilator):
    efficiency at 0, 0.01 %, 0.1 % and 1 % of frames dropped on every link (contract/link.py: the NICs resend
    what is lost), relative to the loss-free run; every result checked bit for bit. Plotted with the switch."""
    from hdl.flow.deps import timing_digest
    from host_driver.sweep import engine
    res = results.setdefault("ring_loss", {}).setdefault("verilator", {})
    n, L = min(args.nodes or [4]), args.elements
    # on the sweep engine, as the switch's cases (one build: the loss-free case first)
    points = [{"nodes": n, "loss": loss, "width": args.width, "elements": L, "clock_mhz": args.clock_mhz}
              for loss in (0.0, 1e-4, 1e-3, 1e-2)]
    key = engine.canonical
    out = engine.run(points, ring_loss_case, engine.Journal(build_dir() / "bench_ring_loss.jsonl", timing_digest()),
                     key=key, group=lambda p: (p["nodes"], p["width"]), scheduler=args.scheduler,
                     workers=args.sim_workers, describe=lambda p: f"N={p['nodes']} none loss={p['loss']:g}",
                     say=lambda line: print("bench: ring loss: " + line, flush=True))
    if out["failed"]:
        raise RuntimeError(f"ring loss bench: cases failed: {out['failed']}")
    base = out["results"][key(points[0])]["efficiency"]
    for p in points:
        entry = out["results"][key(p)]
        res[f"n{n}_none_L{L}_w{args.width}_loss{p['loss']:g}"] = dict(
            entry, relative_to_lossless=round(entry["efficiency"] / base, 4))
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    plot_loss(results, args, n)


def ring_loss_case(p: dict) -> dict:
    """One loss rate of :func:`ring_loss_bench`: the ring all-reduce's figures (``relative_to_lossless`` is
    added by the bench)."""
    import numpy as np

    from host_driver.sim.cluster import MODEL_OPS, Cluster
    n, L, loss = p["nodes"], p["elements"], p["loss"]
    print(f"bench: ring allreduce verilator N={n} none L={L:,} loss={loss:g} ...", flush=True)
    rng = np.random.default_rng(n)
    x = [rng.standard_normal(L).astype(np.float32) for _ in range(n)]
    cluster = Cluster(n, "verilator", p["width"], "none", faults={"drop": loss, "seed": 1}, clock_mhz=p["clock_mhz"])
    got, st = cluster.allreduce(x)
    want = MODEL_OPS["allreduce"](x, "none", "fp32", cluster.packet)
    return {
        "cycles": st.cycles, "bound_cycles": round(st.bound_cycles), "efficiency": round(st.efficiency, 4),
        "datapath_bound_cycles": st.datapath_bound_cycles,
        "binding_efficiency": round(st.binding_efficiency, 4), "loss_per_link": loss,
        "bit_exact": bool(np.array_equal(got.view(np.uint32), want.view(np.uint32))),
        "data_frames_per_link": st.data_frames_per_link[0],
        "frames_lost": sum(c["dropped"] for c in st.fault_counters["up"] + st.fault_counters["down"]),
        "retransmissions": sum(st.retransmitted_per_rank), "link_timeouts": sum(st.link_timeouts_per_rank),
        "nacks": sum(st.nacks_sent_per_rank), "acks": sum(st.acks_sent_per_rank),
        "sim_seconds": round(st.sim_seconds, 1), "link_gbps": st.link_gbps, "packet": cluster.packet,
        **at_clock(st)}


SOAK_BENCH_NODES = 8


def soak_jobs(rng, count: int, width: int = 64, packet: int = 64) -> list:
    """``count`` random ring jobs for the 8-NIC bench: N in 2 .. 8, L in 1 .. 4,000, any codec (fp32) or
    int32, lag 1 .. 8, link latency 20 .. 300 cycles, loss, duplication and corruption each up to 5 % on every
    link, a seed each; a deadline short enough that a stuck collective shows up as a timeout."""
    from contract.enums import Codec, names
    from host_driver.sim.cluster import link_rate_fixed
    jobs = []
    for i in range(count):
        n = int(rng.integers(2, SOAK_BENCH_NODES + 1))
        dtype = "int32" if rng.random() < 0.15 else "fp32"
        codec = "none" if dtype == "int32" else str(rng.choice(names(Codec)))
        faults = {k: float(rng.uniform(0, 0.05)) for k in ("drop", "dup", "corrupt")}
        faults["seed"] = int(rng.integers(1, 2**31))
        jobs.append({"name": f"soak{i}", "nodes": n, "width": width, "op": "allreduce", "codec": codec,
                     "dtype": dtype, "packet": packet, "lag": int(rng.integers(1, 9)),
                     "elements": int(rng.integers(1, 4001)), "link_latency": int(rng.integers(20, 301)),
                     "link_rate": link_rate_fixed(80, 250), "memory": {}, "repeats": 1, "faults": faults,
                     "retransmit_timeout": 2048, "deadline": 200_000, "expect_status": None,
                     "seed": int(rng.integers(0, 2**31))})
    return jobs


def soak_batch(batch: list, work: str) -> list:
    """Run ``batch`` (soak jobs) on the 8-NIC bench, one simulation for as many of them as it finishes; what
    each run came to: ``(job, outcome, stats)``, outcome right, wrong or hung. A simulation that stops in a
    job (the driver gave up waiting) counts that job hung, and the rest of the batch runs again."""
    import numpy as np

    from host_driver.sim.cluster import MODEL_OPS
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    for j in batch:
        data_rng = np.random.default_rng(j["seed"])
        shape = (j["nodes"], j["elements"])
        x = (data_rng.integers(-1000, 1000, shape, dtype=np.int32) if j["dtype"] == "int32"
             else data_rng.standard_normal(shape).astype(np.float32))
        j["inputs"], j["outputs"] = str(work / f"{j['name']}.in.npy"), str(work / j["name"])
        np.save(j["inputs"], x)
    out, todo, attempt = [], list(batch), 0
    while todo:
        attempt += 1
        (work / "jobs.json").write_text(json.dumps(todo))
        try:
            run("verilator", f"cluster_n{SOAK_BENCH_NODES}", 64, "host_driver.sim.cluster_job",
                env={"AINIC_JOB": str(work / "jobs.json")}, tag=f"soak-{work.name}-{attempt}")
            failed = None
        except AssertionError as exc:
            failed = str(exc)
        ran, todo = todo, []
        for k, j in enumerate(ran):
            stats_file = Path(j["outputs"] + ".stats.json")
            if not stats_file.exists():         # the simulation stopped in this job: hung; the rest again
                out.append((j, "hung", {"error": (failed or "")[-1500:]}))
                todo = ran[k + 1:]
                break
            st = json.loads(stats_file.read_text())
            x = np.load(j["inputs"])
            got = np.load(j["outputs"] + ".results.npy")
            want = MODEL_OPS["allreduce"](list(x), j["codec"], j["dtype"], j["packet"])
            ok = all(c["status_name"] == "ok" for cs in st["completions"] for c in cs) and \
                np.array_equal(got.view(np.uint32), want.view(np.uint32))
            out.append((j, "right" if ok else "wrong", st))
    return out


def soak_point(point: dict) -> list:
    """One soak batch on a sweep engine's worker (its own temporary folder): :func:`soak_batch`'s outcomes."""
    with tempfile.TemporaryDirectory(prefix="ainic-soak-") as tmp:
        return soak_batch(point["jobs"], str(Path(tmp) / f"batch{point['batch']}"))


def soak_bench(results, args):
    """``args.soak`` fault-injected ring all-reduces (:func:`soak_jobs`) on the 8-NIC Verilator bench at W = 64,
    in batches of one simulation each, on the sweep engine (``args.soak_workers`` local Dask workers, or the
    scheduler at ``args.scheduler``; host_driver/sweep/engine.py): a run is right when every rank's
    completion is ok and its result is the golden model's bit for bit; wrong when it finished otherwise; hung
    when the driver gave up waiting (the simulation stops there and the rest of its batch runs again)."""
    import numpy as np

    from hdl.flow.deps import timing_digest
    from host_driver.sim.runner import build_top
    from host_driver.sweep import engine
    rng = np.random.default_rng(args.soak_seed)
    todo = soak_jobs(rng, args.soak)
    batches = [todo[i:i + args.soak_batch] for i in range(0, len(todo), args.soak_batch)]
    counts = {"runs": 0, "right": 0, "wrong": 0, "hung": 0, "frames_lost": 0, "retransmissions": 0,
              "link_timeouts": 0, "nacks": 0, "probes": 0, "faults_hit": 0}
    wrong, hung = [], []
    t0 = time.time()
    where = args.scheduler or f"{args.soak_workers} at a time"
    print(f"bench: soak, {len(todo)} ring all-reduces with faults in {len(batches)} batches, {where} ...", flush=True)
    build_top("verilator", f"cluster_n{SOAK_BENCH_NODES}", 64)          # once, before the workers share it
    # on the sweep engine (host_driver/sweep/engine.py): each batch journaled as it completes (a soak run again
    # on the same RTL with the same seed and sizes runs only the batches it lacks)
    journal = engine.Journal(build_dir() / "soak_batches.jsonl",
                             f"{timing_digest()}/{args.soak_seed}/{args.soak}/{args.soak_batch}")
    points = [{"batch": i, "jobs": b} for i, b in enumerate(batches)]
    out = engine.run(points, soak_point, journal, key=lambda p: str(p["batch"]), scheduler=args.scheduler,
                     workers=None if args.scheduler else args.soak_workers,
                     describe=lambda p: f"batch {p['batch']}", say=lambda line: print("bench: soak: " + line, flush=True))
    if out["failed"]:
        raise RuntimeError(f"soak: batches failed: {out['failed']}")
    for p in points:                    # in batch order: the same lists whatever order the batches came in
        for j, outcome, st in out["results"][str(p["batch"])]:
            counts["runs"] += 1
            counts[outcome] += 1
            brief = {k: j[k] for k in ("name", "nodes", "elements", "codec", "dtype", "lag", "link_latency",
                                       "faults")}
            if outcome == "hung":
                hung.append(brief | st)
                continue
            if outcome == "wrong":
                wrong.append(brief | {"statuses": [c["status_name"] for cs in st["completions"] for c in cs]})
            regs = st["nic_registers"]
            fc = [c for side in st["fault_counters"].values() for c in side]
            counts["frames_lost"] += sum(c["dropped"] for c in fc)
            counts["faults_hit"] += sum(c["dropped"] + c["duplicated"] + c["corrupted"] for c in fc)
            for key, reg in (("retransmissions", "RETRANSMISSIONS"), ("link_timeouts", "LINK_TIMEOUTS"),
                             ("nacks", "LINK_NACKS_SENT"), ("probes", "LINK_PROBES")):
                counts[key] += sum(r[reg] for r in regs)
    results["ring_soak"] = {**counts, "wall_seconds": round(time.time() - t0),
                            "seed": args.soak_seed, "wrong_runs": wrong, "hung_runs": hung,
                            "method": soak_bench.__doc__.split("\n\n")[0].replace("\n", " ")}
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"bench: soak: {counts['runs']} runs, {counts['right']} right, {counts['wrong']} wrong, "
          f"{counts['hung']} hung", flush=True)


def link_synth(results, args):
    """The ring link's sender (the retransmission buffer) and receiver mapped by synth_xilinx at the bench's
    width: what reliability costs in LUTs, flip-flops and block RAM."""
    from amaranth.back import verilog

    from hdl.flow.synth import synth_xilinx
    from hdl.link.link_receiver import LinkReceiver
    from hdl.link.link_sender import LinkSender
    out = build_dir() / "link_bench"
    out.mkdir(parents=True, exist_ok=True)
    for name, block in (("link_sender", LinkSender(args.width)), ("link_receiver", LinkReceiver(args.width))):
        print(f"bench: synth_xilinx {name} w{args.width} ...", flush=True)
        src = out / f"{name}_w{args.width}.v"
        src.write_text(verilog.convert(block, name=f"{name}_w{args.width}"))
        cells = synth_xilinx(src, f"{name}_w{args.width}", build_dir() / "synth")
        results.setdefault("synth_xilinx", {})[f"{name}_w{args.width}"] = resource_summary(cells)
        args.out.write_text(json.dumps(results, indent=2) + "\n")


def switch_synth(results, args):
    """The aggregation switch mapped by synth_xilinx at 8 ports, module by module: the RTL cluster's pool and
    packets (hdl/sim/cluster_bench.py) at W = 64 and at the bench's width (512: the build that carries
    80 Gb/s on every port)."""
    ports = 8
    for width in sorted({64, args.width}, reverse=True):
        print(f"bench: synth_xilinx aggregation switch, {ports} ports, W = {width} ...", flush=True)
        results.setdefault("synth_xilinx", {})[f"switch_p{ports}_w{width}"] = resource_summary(
            switch_cells(width, ports))
        args.out.write_text(json.dumps(results, indent=2) + "\n")


def switch_cells(width: int, ports: int = 8) -> dict:
    """synth_xilinx cell counts of the aggregation switch (the RTL cluster's pool and packets), module by
    module, from its RTLIL."""
    from hdl.flow.integration import export_switch_core, switch_core
    from hdl.flow.synth import synth_xilinx
    from hdl.flow.tops import module_name
    from hdl.sim.cluster_bench import SWITCH_MAX_PACKET, SWITCH_POOL
    name = module_name(switch_core(ports, SWITCH_POOL, SWITCH_MAX_PACKET), width)
    src = export_switch_core(width, build_dir() / "switch_bench", ports, SWITCH_POOL, SWITCH_MAX_PACKET, fmt="rtlil")
    return synth_xilinx(src, name, build_dir() / "synth", flatten=False)


def plot_loss(results, args, n):
    """results/switch_loss.png: under loss on every link, each run's efficiency as a share of its loss-free
    efficiency: the switch at N = 4 and 8, uncompressed and bfp8 (as wide as its links, and twice: dotted; a
    tree of switches twice as wide: dash-dotted), and the ring at N = ``n``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sw = results.get("switch_allreduce", {}).get("verilator", {})
    ring = results.get("ring_loss", {}).get("verilator", {})

    def curve(entries, base):
        pts = [(v["loss_per_link"], v["relative_to_lossless"]) for k, v in entries.items()
               if k.startswith(base + "_loss") and v.get("relative_to_lossless")]
        return sorted([(0.0, 1.0)] + pts) if pts else []
    fig, ax = plt.subplots(figsize=(6.5, 4))
    drawn = False
    for nodes in (4, 8):
        for codec, style in (("none", "o"), ("bfp8", "^")):
            for suffix, line, what in (("", "-", ""), ("_x2", ":", ", switch 2x wide"),
                                       ("_x2_l2", "-.", ", tree of 2 leaves 2x wide")):
                pts = curve(sw, f"n{nodes}_{codec}_L{args.elements}_w{args.width}{suffix}")
                if pts:
                    drawn = True
                    ax.semilogx([max(p, 1e-5) for p, _ in pts], [e for _, e in pts], style + line,
                                label=f"switch, N = {nodes}, {codec}{what}")
    pts = curve(ring, f"n{n}_none_L{args.elements}_w{args.width}")
    if pts:
        drawn = True
        ax.semilogx([max(p, 1e-5) for p, _ in pts], [e for _, e in pts], "s--",
                    label=f"ring, N = {n}, none (go-back-N links)")
    if not drawn:
        return
    ax.axhline(0.85, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("frames lost per link, both ways (0 plotted at 1e-5)")
    ax.set_ylabel("efficiency / loss-free efficiency")
    ax.set_ylim(0, 1.05)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{args.elements:,} fp32 per rank, 80 Gb/s links, W = {args.width}")
    out = args.out.parent / "switch_loss.png"
    fig.savefig(out, dpi=120, bbox_inches="tight")
    print(f"bench: wrote {out}")


def demo_bench(results, args):
    """What a user waits for: ``ainic demo`` with 4 nodes x L fp32 on Verilator, the build cached (the
    cases above built it), timed from the command's start to its exit, golden-model check included."""
    res = results.setdefault("demo", {})
    for codec in ("none", "bfp8"):
        if args.codec and codec not in args.codec:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "host_driver.cli", "demo", "--nodes", "4", "--elements", str(args.elements),
                   "--codec", codec, "--sim", "verilator", "--width", str(args.width), "--json", f"{tmp}/s.json"]
            print(f"bench: {' '.join(cmd[1:])} ...", flush=True)
            t0 = time.perf_counter()
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if done.returncode:
                raise RuntimeError(f"ainic demo failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            st = json.loads(Path(f"{tmp}/s.json").read_text())
        res[f"n4_{codec}_L{args.elements}_w{args.width}"] = {
            "wall_seconds": round(wall, 2), "sim_seconds": round(st["sim_seconds"], 2), "cycles": st["cycles"],
            "command": "ainic " + " ".join(cmd[3:-2])}
        args.out.write_text(json.dumps(results, indent=2) + "\n")


def train_bench(results, args):
    """``ainic train`` as a user runs it: the comparison on the golden model (results/train_digits.json and
    .png), then three steps on the RTL (Verilator, N = 4, bfp8 and bfp4, ring and switch) against the golden
    model's (results/train_rtl.json); the docs' training tables come from both. bench.json keeps the commands
    and their wall times."""
    runs = {"comparison": ["train", "--json", "results/train_digits.json", "--plot", "results/train_digits.png"],
            "rtl": ["train", "--sim", "verilator", "--nodes", "4", "--steps", "3", "--codec", "bfp8", "--codec",
                    "bfp4", "--json", "results/train_rtl.json"]}
    res = results.setdefault("train", {})
    for name, argv in runs.items():
        cmd = [sys.executable, "-m", "host_driver.cli", *argv]
        print(f"bench: ainic {' '.join(argv)} ...", flush=True)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"ainic train failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        print(done.stdout, end="")
        res[name] = {"command": "ainic " + " ".join(argv), "wall_seconds": round(time.perf_counter() - t0, 1)}
        args.out.write_text(json.dumps(results, indent=2) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", action="append", choices=SIMULATORS, help="only this simulator (repeatable)")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--clock-mhz", type=float, default=250.0,
                    help="the NIC's clock: the links' bytes per cycle follow it, and every run states its time and "
                         "Gb/s at it (default 250; docs/hardware.md says what each configuration reached)")
    ap.add_argument("--top", action="append", choices=[r[0] for r in RUNS], help="only this block (repeatable)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench.json")
    ap.add_argument("--synth", action="store_true", help="also map every top with Yosys synth_xilinx (slow)")
    ap.add_argument("--no-sim", action="store_true", help="skip the simulations (with --synth: resources only)")
    ap.add_argument("--allreduce", action="store_true", help="only the all-reduce benchmark (cluster harness)")
    ap.add_argument("--no-allreduce", action="store_true", help="skip the all-reduce benchmark")
    ap.add_argument("--switch", action="store_true",
                    help="only the switch all-reduce benchmark (and, with --synth, the switch's resources)")
    ap.add_argument("--nodes", type=int, action="append", help="all-reduce: ranks (default 4 and 8)")
    ap.add_argument("--elements", type=int, default=1 << 20, help="all-reduce: fp32 elements per rank")
    ap.add_argument("--codec", action="append", help="all-reduce: only this codec (repeatable)")
    ap.add_argument("--op", action="append", choices=OPS,
                    help="all-reduce benchmark: only this ring collective (repeatable; skips the demo and "
                         "switch runs that follow it)")
    ap.add_argument("--ring-faults", action="store_true",
                    help="only the ring over lossy links: the loss sweep, the soak and the link's resources")
    ap.add_argument("--soak", type=int, default=1000, help="ring: fault-injected runs in the soak (0: none)")
    ap.add_argument("--soak-batch", type=int, default=50, help="ring soak: runs per simulation")
    ap.add_argument("--soak-seed", type=int, default=14, help="ring soak: the seed of its random jobs")
    ap.add_argument("--scheduler", metavar="ADDRESS", help="the switch cases and the soak on a running Dask "
                    "scheduler (docs/sweeps.md); default: a LocalCluster")
    ap.add_argument("--sim-workers", type=int, default=os.cpu_count() or 1,
                    help="switch: cases simulated at a time on the LocalCluster (default: one per core)")
    ap.add_argument("--soak-workers", type=int, default=os.cpu_count() or 1,
                    help="ring soak: simulations at a time (default: one per core)")
    ap.add_argument("--no-loss-sweep", action="store_true", help="ring faults and switch: skip the loss sweep")
    ap.add_argument("--no-wide", action="store_true", help="switch: skip the wide NIC (W = 1024) section")
    ap.add_argument("--tree", action="store_true",
                    help="switch: only the loss sweep's tree of two leaves and a spine twice as wide (keys _x2_l2)")
    ap.add_argument("--train", action="store_true",
                    help="only the training comparison (ainic train: results/train_digits.json and .png)")
    ap.add_argument("--no-train", action="store_true", help="skip the training comparison")
    args = ap.parse_args(argv)
    args.switch = args.switch or args.tree

    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    before = {k: json.dumps(v, sort_keys=True) for k, v in results.items() if k != "meta"}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    partial = bool(args.train or args.no_train or args.switch or args.allreduce or args.ring_faults or args.top or args.op or args.sim or args.codec
                   or args.nodes or args.elements != 1 << 20 or args.no_sim or args.no_allreduce)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit, "clock_mhz": args.clock_mhz,
            "method": "10,240 back-to-back beats per block and codec (keys end in the width W), no idle, no backpressure; "
                      "beats_per_cycle = (beats-1)/(cycles from first to last beat)"}
    for sim in [] if args.no_sim or args.allreduce or args.switch or args.ring_faults or args.train \
            else (args.sim or SIMULATORS):
        figures = results.get(sim, {})
        for top, module, test_filter in RUNS:
            if args.top and top not in args.top:
                continue
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
                out = tmp.name
            os.unlink(out)
            print(f"bench: {sim} {top} w{args.width} ...", flush=True)
            run(sim, top, args.width, module, env={"COCOTB_TEST_FILTER": test_filter, "AINIC_BENCH": "1",
                                                  "AINIC_BENCH_OUT": out}, tag="bench")
            figures.update(json.loads(Path(out).read_text()))
            os.unlink(out)
        results[sim] = dict(sorted(figures.items()))
    if args.train:
        train_bench(results, args)
    elif args.ring_faults:
        if not args.no_sim:
            if not args.no_loss_sweep:
                ring_loss_bench(results, args)
            if args.soak:
                soak_bench(results, args)
        link_synth(results, args)
    elif args.switch:
        if not args.no_sim:
            switch_bench(results, args)
    elif not args.no_sim and not args.no_allreduce:
        allreduce_bench(results, args)
        if (not args.sim or "verilator" in args.sim) and not args.op:
            ring_loss_bench(results, args)
            if args.soak:
                soak_bench(results, args)
        if not args.no_train and not (args.sim or args.op or args.codec or args.nodes):
            train_bench(results, args)
    if args.synth and not args.ring_faults:
        link_synth(results, args)
        if not args.switch:
            from hdl.flow.synth import synth_xilinx
            from hdl.flow.tops import TOPS, export, module_name
            res = results.setdefault("synth_xilinx", {})
            for top in TOPS:
                print(f"bench: synth_xilinx {top} w{args.width} ...", flush=True)
                # the NIC from its RTLIL: Yosys 0.23's Verilog front end spends minutes on its initialised buffers
                src = export(top, args.width, fmt="rtlil" if top == "nic" else "verilog")
                cells = synth_xilinx(src, module_name(top, args.width), build_dir() / "synth")
                res[f"{top}_w{args.width}"] = resource_summary(cells)
        switch_synth(results, args)
    if partial and "meta" in results:
        # a part rerun: the full run's meta stays, and each section this run changed names its own commit
        # (``section_commits``: what the docs cite for that section's figures)
        changed = [k for k, v in results.items() if k != "meta" and before.get(k) != json.dumps(v, sort_keys=True)]
        results["meta"]["section_commits"] = {**results["meta"].get("section_commits", {}),
                                              **{k: commit for k in changed}}
    else:
        results["meta"] = meta
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"bench: wrote {args.out}")
    worst = min((blk["fp32_beats_per_cycle"] for sim in SIMULATORS for blk in results.get(sim, {}).values()
                 if blk.get("fp32_beats_per_cycle") is not None), default=None)
    print(f"bench: lowest fp32-side beats per cycle over long streams: {worst}")
    if args.out == ROOT / "results" / "bench.json":     # the README's and the docs' figures from it
        from scripts import gen_docs
        gen_docs.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
