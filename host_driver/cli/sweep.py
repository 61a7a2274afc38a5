"""``ainic sweep``: a grid of collectives through the simulated cluster, run on Dask (docs/sweeps.md).

``ainic sweep --nodes 2,4,8 --codec all --algorithm ring,switch --elements 65536 --out sweep/ --x nodes --y
efficiency``: every combination is a point, run as ``ainic demo`` runs it (checked bit for bit), on a Dask
``LocalCluster`` of this machine's cores or on ``--scheduler tcp://host:8786``. Results go to
``OUT/points.jsonl`` as they come (a rerun skips what is there: an interrupted sweep resumes), then to
``OUT/table.csv``, ``OUT/table.json`` and, with ``--x``, the plot ``OUT/plot.png``.
"""

import hashlib
import json
import sys
from pathlib import Path

from host_driver.cli.common import UsageError
from host_driver.sweep import grid as gr
from host_driver.sweep import table as tb

#: what the parameters' values look like on the command line
EXAMPLES = {"nodes": "2,4,8", "codec": "all", "drop": "0,0.001,0.01", "leaves": "default,2"}


def add_parser(sub, formatter) -> None:
    s = sub.add_parser("sweep", formatter_class=formatter, help="a grid of collectives on Dask, resumable, plotted",
                       description=__doc__.splitlines()[0].split(": ", 1)[1] + " Each parameter takes a "
                       "comma-separated list (all: every choice; default: the default). What a NIC cannot run "
                       "(e.g. a switch reduce-scatter) is left out and listed.")
    for name, (_, default, choices, text) in gr.PARAMS.items():
        s.add_argument("--" + name.replace("_", "-"), metavar="V[,V...]",
                       help=f"{text} (default: {default}" + (f"; choices: {', '.join(map(str, choices))}" if choices
                                                            else "") + ")")
    s.add_argument("--grid", metavar="FILE", help="parameters from a TOML, YAML or JSON file (parameter = value or "
                                                  "list); the command line's replace the file's")
    s.add_argument("--out", default="sweep", metavar="DIR", help="the sweep's folder: points.jsonl, table.csv, "
                                                                  "table.json, plot.png")
    s.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler (tcp://host:8786); default: a "
                                                          "LocalCluster of --workers processes")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="LocalCluster: worker processes, one point each at a time (default: the cores)")
    s.add_argument("--x", metavar="PARAM", help="plot: the parameter along x (the plot is drawn when given)")
    s.add_argument("--y", default="cycles", choices=tb.PLOTTABLE, help="plot: the figure along y")
    s.add_argument("--by", metavar="PARAM[,PARAM]",
                   help="plot: a line per value of these (default: every other parameter that varies)")
    s.add_argument("--dry-run", action="store_true", help="list the points and what is already done; run nothing")
    s.set_defaults(func=run, outputs=())


def _grid(args) -> dict:
    g = gr.load(args.grid) if args.grid else {}
    for name in gr.PARAMS:
        text = getattr(args, name)
        if text is not None:
            g[name] = gr.parse_values(name, text)
    return g


def tag(points) -> str:
    """What a point's figures depend on besides the point: the RTL's sources (``hdl.flow.deps.timing_digest``)
    for points on a simulator, the calibration for points on the model. Journal lines of another tag are
    not reused."""
    h = hashlib.sha256()
    if any(p["sim"] != "model" for p in points):
        from hdl.flow.deps import timing_digest
        h.update(timing_digest().encode())
    if any(p["sim"] == "model" for p in points):
        from host_driver.perf.collective_model import CALIBRATION
        h.update(Path(CALIBRATION).read_bytes())
    return h.hexdigest()[:16]


def run(args) -> int:
    from host_driver.sweep import engine, point
    try:
        g = _grid(args)
        points, skipped = gr.points(g)
        if args.x is not None and args.x not in gr.PARAMS:
            raise ValueError(f"--x must be a parameter ({', '.join(gr.PARAMS)}), got {args.x!r}")
        by = args.by.split(",") if args.by else None
        for k in by or []:
            if k not in gr.PARAMS:
                raise ValueError(f"--by must name parameters ({', '.join(gr.PARAMS)}), got {k!r}")
        if args.workers is not None and args.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {args.workers}")
        if args.scheduler and args.workers is not None:
            raise ValueError("--workers sizes the LocalCluster: a --scheduler has the workers its user started")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    reasons = {}
    for p, why in skipped:
        reasons.setdefault(why, []).append(p)
    for why, ps in reasons.items():
        print(f"ainic sweep: left out {len(ps)} point{'s' if len(ps) > 1 else ''} ({gr.label(ps[0], list(g))}"
              f"{' ...' if len(ps) > 1 else ''}): {why}")
    if not points:
        raise UsageError("no point of the grid is one a NIC could run (see above)")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: not a folder")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: the folder {out.parent} does not exist")
    journal = engine.Journal(out / "points.jsonl", tag(points))
    varying = [k for k in g if len(g[k]) > 1] or list(g)
    done = journal.done()
    if args.dry_run:
        for p in points:
            print(("done  " if gr.key(p) in done else "to do ") + gr.label(p, varying))
        print(f"ainic sweep: {len(points)} points, {sum(gr.key(p) in done for p in points)} already done")
        return 0
    where = args.scheduler or f"a LocalCluster of {args.workers or 'every core'}"
    print(f"ainic sweep: {len(points)} points on {where}; results in {journal.path}", flush=True)
    res = engine.run(points, point.run, journal, key=gr.key, group=point.build_group, scheduler=args.scheduler,
                     workers=args.workers, say=lambda line: print(line, flush=True),
                     describe=lambda p: gr.label(p, varying))
    results, failed = res["results"], res["failed"]
    entries = {e["key"]: e for e in journal.entries()}
    rows = tb.rows([entries[k] for k in (gr.key(p) for p in points) if k in entries])
    tb.write(rows, out / "table.csv", out / "table.json")
    print(f"ainic sweep: {len(rows)} points in {out / 'table.csv'}")
    if args.x:
        labels = tb.plot(rows, args.y, args.x, out / "plot.png", by)
        print(f"ainic sweep: {args.y} against {args.x}, {len(labels)} lines: {out / 'plot.png'}")
    wrong = [r for r in rows if r["bit_exact"] is False]
    for k, err in failed.items():
        print(f"ainic sweep: FAILED {gr.label(json.loads(k), varying)}: {err}", file=sys.stderr)
    for r in wrong:
        print(f"ainic sweep: NOT bit-exact: {gr.label(r, varying)}", file=sys.stderr)
    return 1 if failed or wrong or len(results) < len(points) else 0
