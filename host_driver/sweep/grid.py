"""A sweep's parameters, a grid of them and its points.

A **point** is one collective: a dict with a value for every name of :data:`PARAMS` (``ainic demo``'s
parameters: the collective's, ``contract.collective.ARGUMENTS``, and the run's: simulator, dtype, lag, window,
faults, seeds). A **grid** names some parameters, each with a list of values; its points are their product
(the first parameter varies slowest), every other parameter at its default. A point the hardware could not
run (``contract.collective.check``: in-network aggregation of a reduce-scatter, 64 ranks on a switch job) is
left out and reported, so that ``--algorithm ring,switch --op allreduce,reduce_scatter`` asks what it can.

:func:`key` is a point's identity in the journal: its canonical JSON. Nothing here imports a simulator.
"""

import itertools
import json
import tomllib
from pathlib import Path

from contract import collective
from contract.enums import Dtype, names
from host_driver.sweep import engine

#: where a point runs: the RTL on a simulator, or the golden model (its cycles from ``ainic model``)
SIMS = ("verilator", "icarus", "model")

_RUN = {
    "sim": (str, "verilator", SIMS, "where each point runs: the RTL on Verilator or Icarus, or the golden model "
                                    "(its cycles predicted by `ainic model`)"),
    "dtype": (str, "fp32", tuple(names(Dtype)), "the element type"),
    "lag": (int, None, None, "ring: the work order's lag (default: chosen per ring)"),
    "window": (int, None, None, "switch: slots a worker keeps in flight (default: chosen per job)"),
    "retransmit_timeout": (int, None, None, "switch: cycles before a contribution is sent again (default: "
                                            "chosen per job)"),
    "drop": (float, 0.0, None, "probability that a link drops a frame"),
    "dup": (float, 0.0, None, "probability that a link duplicates a frame"),
    "corrupt": (float, 0.0, None, "probability that a link corrupts a frame"),
    "fault_seed": (int, 1, None, "seed of the links' fault injectors"),
    "seed": (int, 0, None, "seed of the random gradients (as `ainic demo --seed`)"),
}

#: name -> (type, default, choices or None, help): every parameter a point has
PARAMS = {**collective.ARGUMENTS, **_RUN}


def parse_values(name: str, text) -> list:
    """The values of parameter ``name`` from ``text``: a comma-separated string (``"2,4,8"``; ``all`` for
    every choice; ``default`` for the default), or a value or a list of values (from a grid file). Raises
    ValueError naming the parameter and what it takes."""
    if name not in PARAMS:
        raise ValueError(f"unknown parameter {name!r}: the parameters are {', '.join(PARAMS)}")
    kind, default, choices, _ = PARAMS[name]
    items = text.split(",") if isinstance(text, str) else (list(text) if isinstance(text, (list, tuple)) else [text])
    out = []
    for item in items:
        if isinstance(item, str):
            item = item.strip()
            if item == "all" and choices:
                out += [c for c in choices if c not in out]
                continue
            if item in ("default", ""):
                item = default
            elif kind is not str:
                try:
                    item = kind(item)
                except ValueError:
                    raise ValueError(f"{name}: {item!r} is not a{'n int' if kind is int else ' number'}") from None
        elif item is not None and kind is float and isinstance(item, int) and not isinstance(item, bool):
            item = float(item)
        if item is not None and (isinstance(item, bool) or not isinstance(item, kind)):
            raise ValueError(f"{name}: {item!r} is not a{'n int' if kind is int else ' number' if kind is float else ' name'}")
        if choices and item is not None and item not in choices:
            raise ValueError(f"{name} must be one of {', '.join(map(str, choices))} (or all), got {item!r}")
        if item not in out:
            out.append(item)
    if not out:
        raise ValueError(f"{name}: no value given")
    return out


def load(path) -> dict:
    """A grid from a TOML, YAML or JSON file: a table of parameter = value or [values] (``[grid]`` in TOML may
    hold them). Raises ValueError for a file that cannot be read or holds something else."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    try:
        if path.suffix == ".toml":
            doc = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml
            doc = yaml.safe_load(text)
        elif path.suffix == ".json":
            doc = json.loads(text)
        else:
            raise ValueError(f"{path}: a grid file is .toml, .yaml/.yml or .json")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    except Exception as exc:        # yaml's errors, without importing yaml where it is not needed
        if type(exc).__module__.startswith("yaml"):
            raise ValueError(f"{path}: {exc}") from None
        raise
    if isinstance(doc, dict) and isinstance(doc.get("grid"), dict):
        doc = doc["grid"]
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a table of parameter = values, got {type(doc).__name__}")
    return {str(k).replace("-", "_"): parse_values(str(k).replace("-", "_"), v) for k, v in doc.items()}


def points(grid: dict) -> tuple:
    """(the points of ``grid`` that the hardware could run, [(point, why) of the others])."""
    names_ = list(grid)
    base = {k: v[1] for k, v in PARAMS.items()}
    good, skipped = [], []
    for values in itertools.product(*(grid[n] for n in names_)):
        p = dict(base, **dict(zip(names_, values)))
        try:
            check(p)
        except ValueError as exc:
            skipped.append((p, str(exc)))
            continue
        good.append(p)
    return good, skipped


def check(p: dict) -> None:
    """ValueError unless point ``p`` is one a NIC could run (the checks every command shares)."""
    collective.check(p["nodes"], p["elements"], codec=p["codec"], dtype=p["dtype"], op=p["op"],
                     algorithm=p["algorithm"], packet=p["packet"], width=p["width"], link_gbps=p["link_gbps"],
                     clock_mhz=p["clock_mhz"], link_latency=p["link_latency"], leaves=p["leaves"],
                     switch_speedup=p["switch_speedup"])
    for name in ("drop", "dup", "corrupt"):
        if not 0.0 <= p[name] <= 1.0:
            raise ValueError(f"{name} must be a probability in 0 .. 1, got {p[name]!r}")
    if p["algorithm"] == "ring" and (p["window"] is not None or p["retransmit_timeout"] is not None):
        raise ValueError("window and retransmit_timeout are the switch's (algorithm switch)")
    if p["algorithm"] == "switch" and p["lag"] is not None:
        raise ValueError("lag is the ring's (algorithm ring)")


def key(point: dict) -> str:
    """A point's identity: its canonical JSON (every parameter, sorted)."""
    return engine.canonical({k: point[k] for k in PARAMS})


def label(point: dict, names_) -> str:
    """``name=value`` of ``names_``, for a person."""
    return " ".join(f"{n}={point[n]}" for n in names_)
