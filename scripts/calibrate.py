#!/usr/bin/env python3
"""`make calibrate`: measure collectives on the RTL (Verilator) and fit the collective time model.

A documented sweep of ring collectives through the RTL cluster (W = 512, 80 Gb/s links, 125 cycles per
link, 250 MHz, P = 256, the lag ``Cluster`` chooses for each ring, ``allreduce.chosen_lag``, as ``ainic demo``
and ``make bench`` run it), every result checked bit for bit against the golden model:

* **fit**: N ∈ {2, 4, 8}, L ∈ {65,536, 262,144, 1,048,576}; codecs none, fp16, bfp8, bfp4 (bf16 moves
  the same bytes through the same datapath as fp16: it takes fp16's constants); ALLREDUCE, and
  REDUCE_SCATTER and ALLGATHER alone;
* **held out** (never used by the fit, only compared with its predictions): N = 3 at L ∈ {131,072,
  1,048,576} and N ∈ {4, 8} at L = 524,288; the same codecs and collectives;
* **wide** (the NIC at W = 1024, where the link binds every codec: what teaches the model a compressed
  codec's link): ALLREDUCE at N = 4, fit L ∈ {262,144, 1,048,576}, held out L = 524,288; the same codecs;
* **switch** (the in-network ALLREDUCE, NICs linked through the aggregation switch, every NIC's job on one
  4-port switch bench): fit N ∈ {2, 4} at the same L, held out N = 3 at L ∈ {131,072, 1,048,576} and N = 4
  at L = 524,288; the same codecs; and on the wide NIC (W = 1024, N = 4, the L of the ring's wide points),
  where the link binds every codec but bfp4 (what teaches the switch a compressed codec's link: at W = 512
  the datapath binds them);
* **tree** (the in-network ALLREDUCE over two levels: 4 NICs on two leaf switches and a spine,
  docs/in_network.md, "Two levels"): fit L ∈ {262,144, 1,048,576} with the switch's points (one set of
  constants: a tree changes the model's features, not its constants), held out L = 524,288; the same codecs;
  and the same tree with its switches twice as wide as the NICs (``switch_speedup`` 2: the trunks too), held
  out at L ∈ {262,144, 1,048,576}: the features the model gives a faster tree, checked on the RTL.

Writes ``host_driver/perf/calibration.json`` (the points, the fitted constants per collective, versioned
with the code, and the digest of the RTL they were measured on, ``hdl.flow.deps.timing_digest``: ``ainic
model`` warns when the RTL differs), ``results/model_error.json`` (prediction against measurement on every point, with the error;
the largest held-out one must stay within 5 %) and ``results/model_calibration.png``. ``--reuse`` refits
from the points already in the calibration file without simulating; ``--algorithm ring|switch`` measures
one algorithm's sweep and keeps the file's points of the other.

The calibration records the RTL it was measured on twice: ``rtl_digest``, the digest of the sources that
elaborate the NIC and its benches (``ainic model`` compares it with the installed sources in a moment), and
``verilog``, a digest of every bench's exported Verilog. A change of those sources that leaves the hardware as
it was (a register's description, a comment, a refactoring) changes the first, not the second:
``--restamp`` exports the benches again and, when every one is the same Verilog, records the new source
digest without measuring anything; when one differs, it says which and exits 1 (`make calibrate` then).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from contract import collective
from hdl.flow.deps import timing_digest
from hdl.flow.export import build_dir
from host_driver.perf.collective_model import CALIBRATION, Setup, fit, key

ROOT = Path(__file__).resolve().parent.parent
FIT_NODES, FIT_ELEMENTS = (2, 4, 8), (1 << 16, 1 << 18, 1 << 20)
#: (nodes, elements) never used by the fit
HELD = [(3, 1 << 17), (3, 1 << 20), (4, 1 << 19), (8, 1 << 19)]
OPS = collective.OPS
#: bf16 takes fp16's constants (collective_model.SAME_TIMING)
CODECS = ("none", "fp16", "bfp8", "bfp4")
#: the switch: one 4-port bench runs every N (a smaller job on a larger bench: one build)
SWITCH_BENCH, SWITCH_FIT_NODES = 4, (2, 4)
SWITCH_HELD = [(3, 1 << 17), (3, 1 << 20), (4, 1 << 19)]
#: the tree: (nodes, leaves), its fitted and its held-out element counts
TREE, TREE_FIT, TREE_HELD = (4, 2), (1 << 18, 1 << 20), (1 << 19,)
#: the tree with its switches twice as wide: held out only
TREE_X2_HELD = (1 << 18, 1 << 20)
#: the wide NIC: one bench (N = 4), the ring's ALLREDUCE (what make bench runs on it)
WIDE_WIDTH, WIDE_NODES, WIDE_FIT, WIDE_HELD = 1024, 4, (1 << 18, 1 << 20), (1 << 19,)
#: the error the held-out points must stay within (issue 15)
LIMIT = 0.05


def benches(points) -> list:
    """The (top, width) of every Verilog a set of points simulated: each cluster bench and the NIC inside."""
    out = set()
    for p in points:
        out.add((bench_top(p["algorithm"], p["nodes"], p.get("leaves"), p.get("switch_speedup", 1)), p["width"]))
        out.add(("nic", p["width"]))
    return sorted(out)


def bench_top(algorithm: str, nodes: int, leaves: int = None, switch_speedup: int = 1) -> str:
    """The cluster bench a point runs on (``Cluster.top``'s name): a ring's own, the 4-port switch bench
    (one switch: every N on it), a tree's."""
    from host_driver.sim.cluster import bench_top as top
    one_switch = algorithm == "switch" and not leaves
    return top(SWITCH_BENCH if one_switch else nodes, "switch" if algorithm == "switch" else "ring", leaves,
               switch_speedup)


def verilog_digests(tops) -> dict:
    """{"<top>_w<W>": sha256 of its exported Verilog} (exported, or found current in the build cache)."""
    import hashlib

    from hdl.flow.tops import export
    return {f"{t}_w{w}": hashlib.sha256(export(t, w).read_bytes()).hexdigest()[:16] for t, w in tops}


def restamp() -> int:
    data = json.loads(CALIBRATION.read_text())
    meta, digest = data["meta"], timing_digest()
    if meta.get("rtl_digest") == digest:
        print(f"calibrate: the calibration is of these sources already ({digest})")
        return 0
    if "verilog" not in meta:
        print("calibrate: the calibration records no Verilog to compare: run `make calibrate`", file=sys.stderr)
        return 1
    now = verilog_digests([(k.rsplit("_w", 1)[0], int(k.rsplit("_w", 1)[1])) for k in meta["verilog"]])
    changed = [k for k in meta["verilog"] if now[k] != meta["verilog"][k]]
    if changed:
        print(f"calibrate: the hardware changed ({', '.join(changed)}): run `make calibrate`", file=sys.stderr)
        return 1
    meta["rtl_digest"] = digest
    for p in data["points"]:
        p["rtl_digest"] = digest
    CALIBRATION.write_text(json.dumps(data, indent=1) + "\n")
    print(f"calibrate: the same Verilog ({len(now)} benches): the calibration now records sources {digest}")
    return 0


def _current(kept, digest):
    """The points an ``--algorithm`` run keeps, stamped with today's sources when every bench they ran on
    exports the same Verilog as when they were measured (the calibration then records one RTL, and ``ainic
    model`` does not warn); otherwise as they were, and a warning names the benches that changed."""
    if not kept or all(p.get("rtl_digest") == digest for p in kept):
        return kept
    then = json.loads(CALIBRATION.read_text())["meta"].get("verilog", {})
    now = verilog_digests(benches(kept))
    changed = sorted(k for k in now if then.get(k) != now[k])
    if changed:
        print(f"calibrate: warning: the points kept ran on other Verilog ({', '.join(changed)}): measure them "
              "again (make calibrate)", file=sys.stderr)
        return kept
    return [{**p, "rtl_digest": digest} for p in kept]


def sweep(algorithms=("ring", "switch")):
    """[(Setup, "fit" | "held_out")] of the documented sweep."""
    out = []
    if "ring" in algorithms:
        for op in OPS:
            for codec in CODECS:
                out += [(Setup(n, L, codec, op), "fit") for n in FIT_NODES for L in FIT_ELEMENTS]
                out += [(Setup(n, L, codec, op), "held_out") for n, L in HELD]
        for codec in CODECS:
            out += _at(WIDE_FIT, WIDE_HELD, lambda L: Setup(WIDE_NODES, L, codec, width=WIDE_WIDTH))
    if "switch" in algorithms:
        for codec in CODECS:
            out += [(Setup(n, L, codec, algorithm="switch"), "fit") for n in SWITCH_FIT_NODES for L in FIT_ELEMENTS]
            out += [(Setup(n, L, codec, algorithm="switch"), "held_out") for n, L in SWITCH_HELD]
            out += _at(WIDE_FIT, WIDE_HELD, lambda L: Setup(SWITCH_BENCH, L, codec, algorithm="switch",
                                                            width=WIDE_WIDTH))
            out += _at(TREE_FIT, TREE_HELD, lambda L: Setup(TREE[0], L, codec, algorithm="switch", leaves=TREE[1]))
            out += _at((), TREE_X2_HELD, lambda L: Setup(TREE[0], L, codec, algorithm="switch", leaves=TREE[1],
                                                         switch_speedup=2))
    return out


def _at(fit_elements, held_elements, setup):
    """[(setup(L), "fit") for the fitted L, then (setup(L), "held_out") for the held-out L]."""
    return [(setup(L), role) for Ls, role in ((fit_elements, "fit"), (held_elements, "held_out")) for L in Ls]


def measure(setup: Setup) -> dict:
    """One collective on the RTL cluster: its cycles, checked bit for bit."""
    import numpy as np

    from host_driver.sim.cluster import MODEL_OPS, Cluster
    rng = np.random.default_rng(setup.nodes * 7919 + setup.elements)
    x = [rng.standard_normal(setup.elements).astype(np.float32) for _ in range(setup.nodes)]
    switch = setup.algorithm == "switch"
    cluster = Cluster(setup.nodes, "verilator", setup.width, setup.codec, packet=setup.packet,
                      link_gbps=setup.link_gbps, clock_mhz=setup.clock_mhz, link_latency=setup.link_latency,
                      algorithm=setup.algorithm, bench_nodes=SWITCH_BENCH if switch and not setup.leaves else None,
                      leaves=setup.leaves, switch_speedup=setup.switch_speedup)
    got, st = cluster.collective(setup.op, x)
    want = cluster.golden(x) if switch else MODEL_OPS[setup.op](x, setup.codec, "fp32", setup.packet)
    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        raise RuntimeError(f"{setup}: the RTL's result is not the golden model's")
    return {"cycles": int(st.cycles), "lag": st.lag, "sim_seconds": round(st.sim_seconds, 1)}


def measure_point(point: dict) -> dict:
    """:func:`measure` of a sweep point (a Setup's fields): what the sweep engine's workers run."""
    return measure(Setup(**point))


def _measure_all(todo, workers, journal: Path, digest: str, scheduler: str = None):
    """Measure on the sweep engine (host_driver/sweep/engine.py: a Dask LocalCluster of ``workers`` processes,
    or the scheduler at ``scheduler``), one simulation per worker. The first collective of each bench runs
    before the others of it, so that each cluster is built once and no worker waits on another's build.
    Each point is journaled in ``journal`` as it completes, with the RTL's digest: an interrupted sweep run
    again on the same RTL measures only what it lacks."""
    from host_driver.sweep import engine
    points = [asdict(s) for s, _ in todo]
    key = engine.canonical
    out = engine.run(points, measure_point, engine.Journal(journal, digest), key=key, scheduler=scheduler,
                     workers=workers, group=lambda p: (bench_top(p["algorithm"], p["nodes"], p["leaves"], p["switch_speedup"]),
                                                      p["width"]),
                     describe=lambda p: str(Setup(**p)), say=lambda line: print("calibrate: " + line, flush=True))
    if out["failed"]:
        raise SystemExit("calibrate: " + "; ".join(f"{k}: {v}" for k, v in out["failed"].items()))
    return [out["results"][key(p)] for p in points]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reuse", action="store_true", help="refit from the calibration file's points")
    ap.add_argument("--restamp", action="store_true", help="the sources changed, the Verilog did not: record the "
                    "sources' digest without measuring (see the module docstring)")
    ap.add_argument("--algorithm", choices=("ring", "switch"),
                    help="measure only this algorithm's sweep; keep the file's points of the other")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="worker processes of the local Dask cluster (one simulation each)")
    ap.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler to measure on "
                    "(docs/sweeps.md); default: a LocalCluster of --workers")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "model_error.json")
    args = ap.parse_args(argv)
    if args.restamp:
        return restamp()
    if args.reuse:
        points = json.loads(CALIBRATION.read_text())["points"]
    else:
        measured = (args.algorithm,) if args.algorithm else ("ring", "switch")
        kept = [p for p in json.loads(CALIBRATION.read_text())["points"] if p["algorithm"] not in measured] \
            if args.algorithm and CALIBRATION.exists() else []
        todo = sweep(measured)
        print(f"calibrate: {len(todo)} collectives on Verilator ...", flush=True)
        digest = timing_digest()
        got = _measure_all(todo, args.workers, build_dir() / "calibrate_points.jsonl", digest, args.scheduler)
        points = _current(kept, digest) + [{**asdict(s), "role": role, **m, "rtl_digest": digest}
                                           for (s, role), m in zip(todo, got)]
    setups = [(Setup(**{k: p[k] for k in Setup.__dataclass_fields__ if k in p}), p) for p in points]
    constants = {}
    for k in sorted({key(s) for s, _ in setups}):
        constants[k] = fit([(s, p["cycles"]) for s, p in setups if key(s) == k and p["role"] == "fit"])
    rows, worst = [], 0.0
    for s, p in setups:
        pred = constants[key(s)].cycles(s.features(), s.codec)
        if p["role"] == "held_out":
            worst = max(worst, abs(pred / p["cycles"] - 1))
        rows.append({"algorithm": s.algorithm, "op": s.op, "nodes": s.nodes, "leaves": s.leaves,
                     "switch_speedup": s.switch_speedup, "elements": s.elements,
                     "codec": s.codec, "role": p["role"], "measured_cycles": p["cycles"],
                     "predicted_cycles": round(pred), "error": round(pred / p["cycles"] - 1, 4)})
    held = [r for r in rows if r["role"] == "held_out"]
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.strip(),
            # the RTL every point was measured on (None: points of different RTL, a partial re-measure)
            "rtl_digest": digests.pop() if len(digests := {p.get("rtl_digest") for p in points}) == 1 else None,
            # the Verilog of every bench the points ran on (--restamp compares it)
            "verilog": (json.loads(CALIBRATION.read_text())["meta"].get("verilog") if args.reuse
                        else verilog_digests(benches(points))),
            "setup": "ring, switch and a tree of switches on the RTL cluster, Verilator, W = 512 (and the ring and "
                     "the switch at W = 1024), 80 Gb/s, "
                     "250 MHz, 125 cycles a link, P = 256, the lag chosen per ring",
            "held_out_max_abs_error": worst, "limit": LIMIT}
    CALIBRATION.write_text(json.dumps({"meta": meta, "constants": {k: asdict(c) for k, c in constants.items()},
                                       "points": points}, indent=1) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    from host_driver.perf.plots import predicted_vs_measured
    predicted_vs_measured(rows, args.out.parent / "model_calibration.png")
    print(f"calibrate: {len(held)} held-out points, largest error {worst:.2%} (limit {LIMIT:.0%}); "
          f"wrote {CALIBRATION.relative_to(ROOT)} and {args.out}")
    if args.out == ROOT / "results" / "model_error.json":      # the docs' and the README's accuracy figures
        from scripts import gen_docs
        gen_docs.main([])
    return 0 if worst <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
