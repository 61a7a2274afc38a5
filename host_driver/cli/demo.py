"""``ainic demo``: a collective across N simulated NICs, every rank checked bit for bit against the golden model,
with a summary table (``--json``, ``--save``, ``--pcap``, ``--waves``).

``--sim model`` runs the golden model alone (seconds, no time); ``--sim verilator`` (the default) or ``icarus``
the RTL cluster. ``--algorithm switch`` aggregates in the network; ``--drop/--dup/--corrupt P`` put faults on every
link and ``--dead-rank R`` cuts a rank off (the ring). Exit 0: bit-exact; 1: a result or its traffic is wrong, or
the collective timed out; 2: a usage error (nothing was run).
"""

import os
import shutil
import sys
import time

import numpy as np

from contract import collective
from contract.enums import Dtype, names
from contract.in_network import DEADLINE, DEFAULT_WINDOW, RETRANSMIT_TIMEOUT, tree_groups
from host_driver.cli.common import UsageError
from host_driver.models import allreduce as ar
from host_driver.models.in_network import TREE_RETRANSMIT_TIMEOUT
from host_driver.sweep import point

SIMS = ("verilator", "icarus", "model")


def add_parser(sub, formatter) -> None:
    d = sub.add_parser("demo", formatter_class=formatter,
                       help="a collective across N simulated NICs, checked against the golden model",
                       description=__doc__.split("\n\n")[0].replace("``", ""))
    collective.add_arguments(d)
    d.add_argument("--dtype", default="fp32", choices=names(Dtype),
                   help="element type (int32 travels uncompressed: --codec none)")
    d.add_argument("--sim", default="verilator", choices=SIMS,
                   help="verilator or icarus: the RTL cluster (the first run builds it); model: the golden model "
                        "alone, in seconds (no cycles)")
    d.add_argument("--lag", type=int, default=None,
                   help="the ring's work order: packets of lead per phase, 1 .. 255 (default: chosen for the ring, "
                        "docs/collective_engine.md 'Choosing the lag')")
    d.add_argument("--seed", type=int, default=None, help="seed of the random gradients (default: 0)")
    d.add_argument("--inputs", nargs="+", metavar="NPY",
                   help="one .npy per node (all of one length and of --dtype) instead of random gradients")
    d.add_argument("--json", metavar="FILE", help="write the statistics here")
    d.add_argument("--save", metavar="FILE", help="write inputs and results (N x L) to this .npz")
    d.add_argument("--pcap", metavar="FILE", help="write every frame to this capture: on the RTL what the NICs sent "
                   "on the fabric (data and acks, stamped by cycle), on the model the golden model's frames")
    d.add_argument("--fabric", choices=["ring", "switch"],
                   help="RTL: NICs linked to each other in a ring, or each to the aggregation switch, which forwards "
                        "the ring's frames by MAC (default: the algorithm's own)")
    d.add_argument("--drop", type=float, default=0.0, help="probability that a link drops a frame")
    d.add_argument("--dup", type=float, default=0.0, help="probability that a link duplicates a frame")
    d.add_argument("--corrupt", type=float, default=0.0,
                   help="probability that a link corrupts a frame (the receiver sees a MAC error)")
    d.add_argument("--dead-rank", type=int, metavar="R",
                   help="ring: rank R's links drop everything during the collective: every rank ends with a timeout "
                        "saying what it waited for (exit 1); then the links are reset and the collective runs again, "
                        "checked bit for bit")
    d.add_argument("--fault-seed", type=int, default=None,
                   help="seed of the links' fault generators, with --drop/--dup/--corrupt/--dead-rank (default: 1)")
    d.add_argument("--window", type=int, default=None,
                   help="switch: slots per job, a power of two (default: the round trip over a packet's time, with half as "
                        f"much again: at least {DEFAULT_WINDOW})")
    d.add_argument("--jobs", type=int, default=1, help="switch: jobs at once, the nodes split between them")
    d.add_argument("--retransmit-timeout", type=int, default=None, metavar="CYCLES",
                   help="cycles a sender waits for an ack (ring) or a result (switch) before it resends (doubling "
                        f"per resend; default: {RETRANSMIT_TIMEOUT}, over a tree of switches "
                        f"{TREE_RETRANSMIT_TIMEOUT})")
    d.add_argument("--deadline", type=int, default=DEADLINE, metavar="CYCLES",
                   help="cycles without progress after which a collective ends in timeout")
    d.add_argument("--stage-trace", action="store_true",
                   help="RTL: record what every stage of each NIC's engine (the ring's collective engine, or the "
                        "switch client) does each cycle; print rank 0's summary, and put every rank's in --json "
                        "(stage_trace)")
    d.add_argument("--waves", nargs="?", const="ainic_demo.fst", metavar="FILE",
                   help="RTL: record an FST waveform of the whole run to FILE (ainic_demo.fst if no FILE is given); "
                        "open it with GTKWave or Surfer")
    d.set_defaults(func=run, outputs=("json", "save", "pcap", "waves"))


def _inputs(args, given: set) -> list:
    """The ranks' arrays: the files of ``--inputs`` or seeded random gradients."""
    if not args.inputs:             # what a sweep's point draws for the same seed (host_driver/sweep/point.py)
        return point.inputs({"seed": 0 if args.seed is None else args.seed, "nodes": args.nodes,
                             "elements": args.elements, "dtype": args.dtype})
    if "elements" in given or args.seed is not None:
        raise UsageError("--inputs gives the data: --elements and --seed do not apply")
    if len(args.inputs) != args.nodes:
        raise UsageError(f"--inputs needs one .npy per node ({args.nodes}), got {len(args.inputs)}")
    try:
        x = [np.load(f, allow_pickle=False).reshape(-1) for f in args.inputs]
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read inputs: {exc}") from None
    want = np.float32 if args.dtype == "fp32" else np.int32
    for f, a in zip(args.inputs, x):
        if a.dtype != want:
            raise UsageError(f"{f} holds {a.dtype}, --dtype {args.dtype} needs {np.dtype(want).name}")
        if a.size != x[0].size or a.size == 0:
            raise UsageError(f"every input must hold the same number of elements (> 0): {f} has {a.size:,}, "
                             f"{args.inputs[0]} {x[0].size:,}")
    args.elements = int(x[0].size)
    return x


def _refuse_what_does_not_apply(args) -> None:
    """An option that would change nothing is an error, never silently ignored."""
    ring = args.algorithm == "ring"
    if ring and args.window is not None:
        raise UsageError("--window is the switch's slots per job: it needs --algorithm switch")
    if args.switch_speedup != 1 and (ring or args.sim == "model"):
        raise UsageError("--switch-speedup builds the RTL's switch wider: it needs --algorithm switch and --sim "
                         "verilator or icarus")
    if not ring and args.lag is not None:
        raise UsageError("--lag is the ring's work order: in-network aggregation has none")
    faults = args.drop or args.dup or args.corrupt or args.dead_rank is not None
    if args.fault_seed is not None and not faults:
        raise UsageError("--fault-seed seeds the links' faults: give --drop, --dup, --corrupt or --dead-rank")
    for name in ("drop", "dup", "corrupt"):
        if not 0 <= getattr(args, name) <= 1:
            raise UsageError(f"--{name} is a probability in 0 .. 1, got {getattr(args, name)}")


def run(args) -> int:
    from host_driver.sim.cluster import Cluster, CollectiveTimeout
    given = collective.resolve(args)
    _refuse_what_does_not_apply(args)
    n, op = args.nodes, args.op
    rtl = args.sim != "model"

    def check():
        collective.check(n, args.elements, codec=args.codec, dtype=args.dtype, op=op, algorithm=args.algorithm,
                         packet=args.packet, width=args.width, link_gbps=args.link_gbps, clock_mhz=args.clock_mhz,
                         link_latency=args.link_latency, leaves=args.leaves, switch_speedup=args.switch_speedup)
    try:
        check()             # before any array is made: --nodes 100000 is an error, not 400 GB of gradients
        x = _inputs(args, given)
        check()             # the count --inputs gave
        cluster = Cluster(n, backend=args.sim, width=args.width, codec=args.codec, dtype=args.dtype,
                          packet=args.packet, link_gbps=args.link_gbps, clock_mhz=args.clock_mhz, lag=args.lag,
                          link_latency=args.link_latency, waves=bool(args.waves), capture=bool(args.pcap) and rtl,
                          algorithm=args.algorithm, window=args.window, jobs=args.jobs,
                          retransmit_timeout=args.retransmit_timeout, deadline=args.deadline, fabric=args.fabric,
                          faults={"drop": args.drop, "dup": args.dup, "corrupt": args.corrupt,
                                  "seed": 1 if args.fault_seed is None else args.fault_seed},
                          dead_rank=args.dead_rank, stage_trace=args.stage_trace, leaves=args.leaves,
                          switch_speedup=args.switch_speedup)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    try:
        if rtl:
            print(f"ainic demo: building the {n}-node cluster for {args.sim} at W = {args.width} "
                  "(cached per configuration) ...", flush=True)
            from host_driver.sim import runner
            t = time.time()
            runner.build_top(args.sim, cluster.top, args.width, bool(args.waves))
            print(f"ainic demo: built in {time.time() - t:.1f} s; simulating {n} x {x[0].size:,} elements ...",
                  flush=True)
        results, stats = cluster.collective(op, x)
    except CollectiveTimeout as exc:
        print(f"ainic demo: {exc}", file=sys.stderr)
        if exc.results is not None:     # a dead rank: the collective after the link reset must be right
            want = cluster.golden(x, op)
            bad = [r for r in range(n) if not np.array_equal(exc.results[r].view(np.uint32), want[r].view(np.uint32))]
            print("ainic demo: the collective after the link reset is " +
                  ("bit-exact with the golden model on every rank" if not bad else f"NOT bit-exact: ranks {bad}"),
                  file=sys.stderr)
        return 1
    ok, d = _report(args, cluster, x, results, stats)
    _write_outputs(args, cluster, x, results, d)
    return 0 if ok else 1


def _check(args, cluster, x, results):
    """(ranks that differ from the golden model, whether the ranks agree, the result against the fp64 sum)."""
    n, op = args.nodes, args.op
    want = cluster.golden(x, op)
    bad = [r for r in range(n) if not np.array_equal(results[r].view(np.uint32), want[r].view(np.uint32))]
    plan = ar.Plan(n, x[0].size, args.packet)
    if op == "reduce_scatter":
        # each rank keeps a different chunk: "identical" means the owned chunks put together are the all-reduce
        got = np.zeros_like(results[0])
        for r in range(n):
            own = plan.chunk((r + 1) % n)
            got[own] = results[r][own]
        full = ar.allreduce(x, args.codec, args.dtype, args.packet)[0]
        same = bool(np.array_equal(got.view(np.uint32), full.view(np.uint32)))
    else:
        got = results[0]
        same = all(np.array_equal(results[g[0]].view(np.uint32), results[r].view(np.uint32))
                   for g in cluster.job_ranks() for r in g)
    if op == "allgather":           # exact: every contribution as it was
        exact = np.concatenate([x[(c - 1) % n][plan.chunk(c)] for c in range(n)]).astype(np.float64)
    else:
        exact = np.sum(np.stack([x[r] for r in cluster.job_ranks()[0]]).astype(np.float64), axis=0)
    err = float(np.sqrt(np.mean((got.astype(np.float64) - exact) ** 2)) / max(np.sqrt(np.mean(exact ** 2)), 1e-300))
    return bad, same, err


def _report(args, cluster, x, results, stats):
    """Print the summary table: (True when every check passed, the statistics for --json)."""
    n, op, L = args.nodes, args.op, x[0].size
    bad, same, err = _check(args, cluster, x, results)
    d = stats.as_dict()
    d.update({"bit_exact": not bad, "identical_on_all_ranks": same, "rms_relative_error_vs_fp64": err})
    switch = args.algorithm == "switch"
    # the bus-bandwidth bound: what each link must carry at least, in bytes of fp32, over its rate. The ring's
    # all-reduce moves 2(N-1)/N of the data over each link (either half alone (N-1)/N); in-network
    # aggregation sends it up once and receives it down once (S over each link, each way)
    share, formula = ((1.0, "S/B (up and down once)") if switch else
                      (2 * (n - 1) / n, "2(N-1)/N*S/B") if op == "allreduce" else ((n - 1) / n, "(N-1)/N*S/B"))
    busbw = share * 4 * L / stats.link_bytes_per_cycle
    cyc = "—" if stats.cycles is None else f"{stats.cycles:,}"
    eff = "—" if stats.efficiency is None else f"{stats.efficiency:.3f}"
    print(f"ainic demo: {op}, {n} nodes x {L:,} {args.dtype}, codec {args.codec}, P = {args.packet}, "
          f"backend {args.sim}, algorithm {args.algorithm}"
          + (f" ({args.jobs} jobs: ranks {cluster.job_ranks()})" if args.jobs > 1 else "")
          + (f" (a tree: leaves of ranks {[list(g) for g in tree_groups(n, args.leaves)]} on a spine)"
             if args.leaves else ""))
    rows = [
        ("cycles (measured)", cyc + ("  (the model backend has no time)" if stats.cycles is None else "")),
        (("in-network bound" if switch else "ring bound") + ", cycles / us",
         f"{stats.bound_cycles:,.0f} / {d['bound_us']:.2f} us at {args.clock_mhz:g} MHz"),
        ("bus-bandwidth bound " + formula, f"{busbw:,.0f} cycles (no headers, no codec)"),
        ("efficiency (bound / cycles)", eff),
        ("datapath bound, cycles", f"{stats.datapath_bound_cycles:,} (every element once through a "
                                   f"{args.width}-bit block)"),
        ("of what binds (max bound / cycles)", "—" if stats.binding_efficiency is None
         else f"{stats.binding_efficiency:.3f}"),
        ("link", f"{args.link_gbps:g} Gb/s = {stats.link_bytes_per_cycle:.1f} B/cycle"),
    ] + ([] if switch or stats.lag is None else [
        ("lag (work order)", f"{stats.lag}" + ("" if args.lag is not None else " (chosen for this ring)")),
    ]) + [
        ("frames per link" + (" (up)" if switch else ""), ", ".join(map(str, stats.frames_per_link))),
        ("bytes per link (frames" + (", up)" if switch else ")"), ", ".join(f"{b:,}" for b in stats.frame_bytes_per_link)),
        ("compression ratio", f"{stats.compression_ratio:.2f}"),
        ("rms error vs exact fp64 sum", f"{err:.3g}"),
        ("bit-exact with golden model", ("yes" if not bad else f"NO: ranks {bad}")
         + (" (the model backend is the golden model)" if args.sim == "model" else "")),
        ("identical on every rank" if op != "reduce_scatter" else "owned chunks = all-reduce result",
         "yes" if same else "NO"),
    ]
    fault_text = (f"drop {args.drop:g}, dup {args.dup:g}, corrupt {args.corrupt:g}, "
                  f"seed {1 if args.fault_seed is None else args.fault_seed}")
    if switch:
        fc, sc = stats.fault_counters, stats.switch_counters
        links = fc["up"] + fc["down"] + fc.get("trunk_up", []) + fc.get("trunk_down", [])
        total = {k: sum(c.get(k, 0) for c in links) for k in ("frames", "dropped", "duplicated", "corrupted")}
        drops = {k: v for k, v in sc["drops"].items() if v}
        rows[6:6] = [
            ("frames per link (down)", ", ".join(map(str, stats.down_frames_per_link))),
            ("faults (every link)", fault_text),
            ("frames dropped / duplicated / corrupted",
             f"{total['dropped']} / {total['duplicated']} / {total['corrupted']} of {total['frames']:,}"),
            ("retransmitted per rank", ", ".join(map(str, stats.retransmitted_per_rank))),
            ("duplicate results dropped per rank", ", ".join(map(str, stats.duplicate_results_per_rank))),
            ("switch: rounds / resent results", ", ".join(f"job {j}: {c['completed']} / {c['unicast']}"
                                                        for j, c in enumerate(sc["jobs"]))),
            ("switch: drops", ", ".join(f"{k} {v}" for k, v in drops.items()) or "none"),
            ("switch: window, width", f"{cluster.window} slots a job, {args.width * cluster.switch_speedup} bits"
                                      + (" (twice its links')" if cluster.switch_speedup > 1 else "")),
        ] + [(f"leaf {k}: rounds / partials up / results down / resent",
              f"{c['jobs'][0]['completed']} / {c['jobs'][0]['up']} / {c['jobs'][0]['down']} / {c['jobs'][0]['unicast']}")
             for k, c in enumerate(sc.get("leaves", []))]
    if not switch and stats.retransmitted_per_rank is not None:       # the ring's links under faults
        fc = stats.fault_counters
        total = {k: sum(c[k] for c in fc["up"] + fc["down"]) for k in ("dropped", "duplicated", "corrupted")}
        rows[6:6] = [
            ("faults (every link)", fault_text),
            ("frames dropped / duplicated / corrupted", f"{total['dropped']} / {total['duplicated']} / {total['corrupted']}"),
            ("retransmitted per rank", ", ".join(map(str, stats.retransmitted_per_rank))),
            ("link timeouts per rank", ", ".join(map(str, stats.link_timeouts_per_rank))),
            ("acks / nacks sent per rank", ", ".join(f"{a}/{k}" for a, k in zip(stats.acks_sent_per_rank,
                                                                           stats.nacks_sent_per_rank))),
            ("dropped as duplicate / out of order / corrupt", ", ".join(
                f"{a}/{b}/{c}" for a, b, c in zip(stats.duplicates_dropped_per_rank, stats.out_of_order_dropped_per_rank,
                                                  stats.corrupted_dropped_per_rank))),
        ]
    if stats.sim_seconds is not None:
        rows[1:1] = [("time at the clock", f"{stats.cycles / args.clock_mhz:,.2f} us"),
                     ("per rank (completion cycles)", ", ".join(f"{c:,}" for c in stats.nic_cycles))]
        rows.append(("link traffic = model's frames/bytes",
                     "— (faults: resends depend on timing)" if stats.traffic_matches_model is None
                     else "yes" if stats.traffic_matches_model else "NO"))
        rows.append(("simulation wall time", f"{stats.sim_seconds:.1f} s ({stats.cycles / stats.sim_seconds:,.0f} "
                     "cycles/s)"))
    for k, v in rows:
        print(f"  {k:<34} {v}")
    if stats.stage_trace:
        from host_driver.sim.stage_trace import table
        page = "in_network.md, \"Where the switch client's cycles go\"" if switch else \
            "collective_engine.md, \"Where the cycles go\""
        print(f"ainic demo: where rank 0's cycles went (docs/{page}):")
        print(table(stats.stage_trace[0]))
    return not bad and same and stats.traffic_matches_model is not False, d


def _write_outputs(args, cluster, x, results, d: dict) -> None:
    import json
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(d, fh, indent=2)
    if args.save:
        np.savez(args.save, inputs=np.stack(x), results=results)
    if args.waves:
        shutil.copyfile(cluster.waves_file, args.waves)
        print(f"ainic demo: waveform (FST) written to {os.path.abspath(args.waves)}")
    if args.pcap:
        from host_driver.models.pcap import write_pcap
        if cluster.captured is not None:    # what the RTL fabric carried, stamped with its cycle
            write_pcap(args.pcap, [f for _, _, f in cluster.captured],
                       times=[c / (args.clock_mhz * 1e6) for c, _, _ in cluster.captured])
        else:                               # the model backend: the golden model's frames
            write_pcap(args.pcap, [f for _, f in cluster.frames(x, args.op)])
