"""A sweep's journal as a table: a row a point (its parameters, then its figures), written as CSV and JSON,
and a plot of one figure against one parameter, a line per value of the others that vary."""

import csv
import json
from pathlib import Path

from host_driver.sweep.grid import PARAMS
from host_driver.sweep.point import FIELDS

#: the figures a plot can show
PLOTTABLE = ("cycles", "efficiency", "time_us", "bound_cycles", "retransmissions", "frames_lost", "sim_seconds",
             "wall_seconds")


def rows(entries) -> list:
    """Journal entries as flat rows: every parameter, then every figure."""
    return [{**{k: e["point"][k] for k in PARAMS}, **{k: e["result"].get(k) for k in FIELDS}} for e in entries]


def write(rows_: list, csv_path, json_path=None) -> None:
    """``rows_`` to ``csv_path`` (empty cells for None) and, if given, ``json_path``."""
    columns = list(PARAMS) + list(FIELDS)
    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, columns)
        w.writeheader()
        for r in rows_:
            w.writerow({k: "" if r[k] is None else r[k] for k in columns})
    if json_path:
        Path(json_path).write_text(json.dumps(rows_, indent=1) + "\n")


def varying(rows_: list) -> list:
    """The parameters that take more than one value among ``rows_``."""
    return [k for k in PARAMS if len({json.dumps(r[k]) for r in rows_}) > 1]


def plot(rows_: list, y: str, x: str, path, by=None) -> list:
    """``y`` against ``x``, a line per value of ``by`` (default: every other parameter that varies), to
    ``path`` (PNG). Points without a ``y`` (a timeout) are left out. Returns the lines' labels. Raises
    ValueError for a name that is not a figure or a parameter."""
    if y not in PLOTTABLE:
        raise ValueError(f"plot: y must be one of {', '.join(PLOTTABLE)}, got {y!r}")
    if x not in PARAMS:
        raise ValueError(f"plot: x must be a parameter ({', '.join(PARAMS)}), got {x!r}")
    others = [k for k in varying(rows_) if k != x] if by is None else list(by)
    for k in others:
        if k not in PARAMS:
            raise ValueError(f"plot: by must name parameters ({', '.join(PARAMS)}), got {k!r}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lines = {}
    for r in rows_:
        if r[y] is None or r[x] is None:
            continue
        lines.setdefault(tuple(r[k] for k in others), []).append((r[x], r[y]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    labels = []
    for group in sorted(lines, key=lambda g: json.dumps(g)):
        pts = sorted(lines[group], key=lambda p: (isinstance(p[0], str), p[0]))
        text = ", ".join(f"{k}={v}" for k, v in zip(others, group)) or y
        ax.plot([str(p[0]) if isinstance(p[0], str) else p[0] for p in pts], [p[1] for p in pts], marker="o",
                label=text)
        labels.append(text)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if labels:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return labels
