"""``ainic optimize``: LIBRA's network problem from its input files, a table, a JSON file and a plot.

The four input files can be paths or the names of LIBRA's shipped inputs (``--workload GPT_3``,
``--network 4d_network``): :func:`resolve` looks in ``host_driver/perf/libra/<kind>/`` when no such file
exists. Both solution methods run by default and must agree (exit 1 if they do not).
"""

import argparse
import json
import sys
from pathlib import Path

from host_driver.perf import libra_inputs as li
from host_driver.perf.network_optimizer import (METHODS, OBJECTIVES, InfeasibleError, Problem, equal_split,
                                                optimize)

#: the kind of input -> (its folder among the shipped inputs, its suffix)
KINDS = {"network": ("network", ".yml"), "workload": ("workload", ".txt"), "communicator": ("communicator", ".yml"),
         "cost_model": ("cost_model", ".yml"), "constraints": ("constraints", ".yml")}
#: relative difference of the objective beyond which the two methods disagree
AGREEMENT = 1e-4


def resolve(kind: str, value: str) -> Path:
    """A path, or the name of a shipped input of this kind."""
    path = Path(value)
    if path.exists():
        return path
    folder, suffix = KINDS[kind]
    shipped = li.SHIPPED / folder / (value if value.endswith(suffix) else value + suffix)
    if shipped.exists():
        return shipped
    names = sorted(p.stem for p in (li.SHIPPED / folder).glob(f"*{suffix}"))
    raise li.InputError(f"{kind.replace('_', ' ')} {value!r}: no such file, nor a shipped one "
                        f"({', '.join(names)})")


def add_parser(sub, formatter=None) -> None:
    o = sub.add_parser("optimize", help="bandwidth per network dimension for a workload (LIBRA's problem, "
                       "open solvers)", formatter_class=formatter or argparse.HelpFormatter)
    o.add_argument("--network", required=True, help="LIBRA network YAML (or a shipped name: 3d_network, ...)")
    o.add_argument("--workload", required=True, help="LIBRA workload text (or GPT_3, MSFT_1T, ResNet_50, ...)")
    o.add_argument("--communicator", required=True, help="LIBRA communicator YAML (or GPT_3_4d, ...)")
    o.add_argument("--cost-model", required=True, help="LIBRA cost model YAML (or 3d_cost_model, ...)")
    o.add_argument("--constraints", help="constraints YAML (ainic's format, docs/performance.md; or "
                   "total_bw_500gbps, multiple_constraints)")
    o.add_argument("--total-bw", type=float, help="GB/s per node over all dimensions (replaces the "
                   "constraints' total)")
    o.add_argument("--objective", default="time", choices=OBJECTIVES,
                   help="time: the shortest training iteration; time-cost: the least time x network cost")
    o.add_argument("--method", default="both", choices=[*METHODS, "both"],
                   help="cuts: cutting planes on HiGHS; slsqp: SciPy's SLSQP; both: run both, "
                   "report the first, fail if they disagree")
    o.add_argument("--json", metavar="FILE", help="write the result here")
    o.add_argument("--plot", metavar="FILE", help="write a bar chart of the bandwidths (PNG)")
    o.set_defaults(func=run, outputs=("json", "plot"))


def load(args) -> Problem:
    net = li.read_network(resolve("network", args.network))
    cons = li.read_constraints(resolve("constraints", args.constraints), net) if args.constraints \
        else li.Constraints()
    if args.total_bw is not None:
        if args.total_bw <= 0:
            raise li.InputError(f"--total-bw must be positive, got {args.total_bw}")
        cons = cons.with_total(args.total_bw)
    return Problem(net, li.read_workload(resolve("workload", args.workload)),
                   li.read_communicator(resolve("communicator", args.communicator), net),
                   li.read_cost_model(resolve("cost_model", args.cost_model)), cons)


def run(args) -> int:
    try:
        problem = load(args)
        methods = list(METHODS) if args.method == "both" else [args.method]
        solutions = [optimize(problem, args.objective, m) for m in methods]
    except (li.InputError, InfeasibleError) as exc:
        print(f"ainic optimize: {exc}", file=sys.stderr)
        return 2
    best = solutions[0]
    value = (lambda s: s.time_ns) if args.objective == "time" else (lambda s: s.time_ns * s.cost)
    disagreement = max(abs(value(s) - value(best)) / value(best) for s in solutions)
    c = problem.constraints
    result = {
        "objective": args.objective, "method": best.method, "nodes": problem.network.nodes,
        "dimensions": [{"topology": d.topology, "npus": d.npus, "codec": d.codec.name} for d in problem.network.dims],
        "bandwidth_gbps": list(best.bandwidth_gbps), "time_ns": best.time_ns, "comm_ns": best.comm_ns,
        "compute_ns": problem.compute_ns, "cost": best.cost,
        "methods": {s.method: {"bandwidth_gbps": list(s.bandwidth_gbps), "time_ns": s.time_ns, "cost": s.cost}
                    for s in solutions},
        "methods_agree": disagreement <= AGREEMENT, "methods_relative_difference": disagreement,
    }
    if c.total is not None or c.total_at_most is not None:
        eq = equal_split(problem)
        result["equal_split"] = {"bandwidth_gbps": [float(b) for b in eq], "time_ns": problem.time_ns(eq),
                                 "cost": problem.cost(eq)}
        result["speedup_over_equal_split"] = problem.time_ns(eq) / best.time_ns
        # time x cost of the equal split over the optimum's: > 1 where the optimum is the better buy
        result["time_cost_gain_over_equal_split"] = problem.time_ns(eq) * problem.cost(eq) / (best.time_ns * best.cost)
    _print_table(problem, result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        from host_driver.perf.plots import bandwidth_split
        bandwidth_split(result, args.plot, title=f"{Path(args.workload).stem} on {problem.network.nodes} nodes, "
                        f"objective {args.objective}")
    if not result["methods_agree"]:
        print(f"ainic optimize: the methods disagree by {disagreement:.2e} (limit {AGREEMENT})",
              file=sys.stderr)
        return 1
    return 0


def _print_table(problem: Problem, r: dict) -> None:
    eq = r.get("equal_split")
    print(f"{'dim':>3s}  {'topology':16s} {'npus':>5s} {'GB/s':>10s}" + (f" {'equal':>10s}" if eq else ""))
    for d, (dim, bw) in enumerate(zip(r["dimensions"], r["bandwidth_gbps"])):
        topo = dim["topology"] + (f":{dim['codec']}" if dim["codec"] != "none" else "")
        print(f"{d:3d}  {topo:16s} {dim['npus']:5d} {bw:10.2f}" + (f" {eq['bandwidth_gbps'][d]:10.2f}" if eq else ""))
    print(f"time {r['time_ns'] / 1e6:.4f} ms (communication {r['comm_ns'] / 1e6:.4f} ms), cost ${r['cost']:,.0f}"
          + (f"; equal split {eq['time_ns'] / 1e6:.4f} ms, ${eq['cost']:,.0f}: speedup "
             f"{r['speedup_over_equal_split']:.3f}x, time x cost {r['time_cost_gain_over_equal_split']:.3f}x better"
             if eq else ""))
    if len(r["methods"]) > 1:
        print(f"methods {', '.join(r['methods'])} agree within {r['methods_relative_difference']:.1e}")


__all__ = ["add_parser", "load", "resolve", "run"]
