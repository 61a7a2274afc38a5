"""``ainic train``: data-parallel training through the ``ainic`` torch.distributed backend, every wire codec and
both all-reduce algorithms against gloo fp32 on the same seeds (:mod:`host_driver.distributed.digits`); with
``--sim verilator`` (or icarus), a few steps on the RTL checked bit for bit against the golden model's.
Needs the extra ``ainic[torch]`` (``make setup`` installs it)."""

import importlib.util
import json
from pathlib import Path

from contract.enums import Codec, names
from contract.limits import DEFAULT_WIDTH, WIDTHS
from host_driver.cli.common import UsageError

ALGORITHMS = ("ring", "switch")


def add_parser(sub, formatter) -> None:
    t = sub.add_parser("train", formatter_class=formatter,
                       help="train on the digits set through the simulated NICs: accuracy per codec against gloo fp32",
                       description=__doc__.split("\n\n")[0].replace("``", ""))
    t.add_argument("--nodes", type=int, default=4, help="ranks, one process each (2 .. 16)")
    t.add_argument("--codec", action="append", choices=["all", *names(Codec)],
                   help="a wire codec (repeatable; default: all)")
    t.add_argument("--algorithm", action="append", choices=["all", *ALGORITHMS],
                   help="the all-reduce (repeatable; default: both)")
    t.add_argument("--seeds", type=int, default=3, help="seeds per configuration (0, 1, ...)")
    t.add_argument("--epochs", type=int, default=20, help="passes over the 1,347 training images")
    t.add_argument("--batch", type=int, default=16, help="images per rank per step")
    t.add_argument("--link-gbps", type=float, default=40.0, help="the link rate of the step-time table")
    t.add_argument("--sim", default="model", choices=["model", "verilator", "icarus"],
                   help="model: the full comparison on the golden model; verilator or icarus: --steps steps on the "
                        "RTL, compared bit for bit with the golden model's")
    t.add_argument("--steps", type=int, default=3, help="with --sim verilator/icarus: training steps on the RTL")
    t.add_argument("--width", type=int, default=DEFAULT_WIDTH, choices=WIDTHS,
                   help="with --sim verilator/icarus: the NICs' datapath bits")
    t.add_argument("--bench-nodes", type=int, default=0, metavar="N",
                   help="with --sim verilator/icarus: simulate a bench of N NICs (the job uses --nodes of them), so "
                        "that the run shares that bench's build (default: --nodes)")
    t.add_argument("--json", metavar="FILE", help="write the records, the summary and the step-time table here")
    t.add_argument("--plot", metavar="FILE", help="draw accuracy per epoch and the final accuracies (PNG)")
    t.set_defaults(func=run, outputs=("json", "plot"))


def _choices(given, default):
    return list(default) if not given or "all" in given else list(dict.fromkeys(given))


def run(args) -> int:
    missing = [m for m in ("torch", "sklearn") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(f"needs the extra ainic[torch] ({', '.join(missing)} missing): "
                         "pip install 'ainic[torch]' (make setup installs it)")
    from host_driver.distributed import digits
    if not 2 <= args.nodes <= 16:
        raise UsageError(f"--nodes must be in 2 .. 16, got {args.nodes}")
    for name in ("seeds", "epochs", "batch", "steps"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.link_gbps <= 0:
        raise UsageError(f"--link-gbps must be positive, got {args.link_gbps:g}")
    codecs = _choices(args.codec, digits.CODECS)
    algorithms = _choices(args.algorithm, ALGORITHMS)
    if args.sim != "model":
        if args.plot:
            raise UsageError("--plot draws the comparison on the golden model: not with --sim " + args.sim)
        rows = digits.rtl_check(args.sim, args.nodes, args.steps, codecs if args.codec else ["bfp8"], algorithms,
                                width=args.width, bench_nodes=args.bench_nodes)
        print(f"{args.steps} training steps of the digits network on {args.nodes} NICs, {args.sim} against the "
              "golden model:")
        for r in rows:
            cyc = r["cycles"]
            print(f"  {r['algorithm']:6s} {r['codec']:5s} weights {'identical' if r['identical'] else 'DIFFER'}; "
                  f"{sum(r['collectives'].values())} collectives, {r['collectives']['nic']} through the NICs "
                  f"({min(cyc):,} .. {max(cyc):,} cycles each), {r['seconds']:.1f} s")
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        return 0 if all(r["identical"] for r in rows) else 1
    schedule = digits.Schedule(epochs=args.epochs, batch=args.batch)
    print(f"training the digits network on {args.nodes} ranks, {args.seeds} seed(s), {args.epochs} epochs, "
          f"{len(digits.configs(codecs, algorithms))} configurations (golden model) ...", flush=True)
    result = digits.run(args.nodes, range(args.seeds), schedule, codecs, algorithms, args.link_gbps)
    print_summary(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if args.plot:
        from host_driver.perf.plots import training_curves
        training_curves(result, args.plot)
    return 0


def print_summary(result: dict) -> None:
    meta = result["meta"]
    print(f"final held-out accuracy over {len(meta['seeds'])} seed(s), {meta['nodes']} ranks "
          f"({meta['wall_seconds']:.0f} s):")
    print(f"  {'configuration':16s} {'accuracy %':>10s} {'min .. max':>14s} {'test loss':>9s} {'vs gloo':>8s}")
    for name, s in result["summary"].items():
        gap = s["points_below_baseline"] or 0.0
        gap = 0.0 if abs(gap) < 5e-3 else gap          # no "-0.00"
        print(f"  {name:16s} {100 * s['accuracy_mean']:10.2f} {100 * s['accuracy_min']:6.2f} .. "
              f"{100 * s['accuracy_max']:5.2f} {s['test_loss_mean']:9.4f} {-gap if gap else 0.0:+8.2f}")
    st = result["step_time"]
    for workload in [k for k in st if isinstance(st[k], dict) and "overlap" in st[k]]:
        w = st[workload]
        rows = w["overlap"]["backward"]
        print(f"step time, {workload} ({w['compute_ms']:.3f} ms of compute: {w['compute_source']}, "
              f"{w['gradient_bytes'] / 1e6:.3g} MB of gradients), N = {st['nodes']}, {st['link_gbps']:g} Gb/s, "
              "all-reduce overlapping the backward pass:")
        for name, r in rows.items():
            print(f"  {name:18s} {r['step_ms']:9.3f} ms  {r['speedup']:5.2f}x")
