"""Where a collective's cycles went: a NIC's ``dbg_stages`` recorded by ``ainic_stage_trace`` (the cluster
bench's ``stage_trace`` input, ``Cluster(stage_trace=True)``), summarised per stage, per item kind and over time.

Each stage of the engine running the collective (contract/stages.py: the ring's collective engine, or the
switch client) is, in each cycle, idle (no item), busy (a beat moved), starved (its input offered none) or
blocked (its output did not take the beat offered), holding an item of some kind (the ring's phase kinds, the
switch client's ``SWITCH_KINDS``). :func:`summarise` counts the cycles of each (stage, state) over the trace,
of each (stage, kind, state), and the busy share of each stage in ``bins`` equal slices of the run, which show
the start and the drain. docs/collective_engine.md ("Where the cycles go") and docs/in_network.md read one.
"""

from pathlib import Path

import numpy as np

from contract import stages as st
from contract.enums import PhaseKind, StageState

STATES = tuple(s.name for s in StageState)


def read(path: Path, offset: int = 0):
    """(cycles, values, end): the run-length trace ``ainic_stage_trace`` wrote to ``path`` from byte ``offset``
    on; value i holds from cycles[i] to cycles[i + 1] (the last to ``end``). Raises ValueError when the trace
    has no end line (the recorder was still enabled) or is empty."""
    cycles, values, end = [], [], None
    with open(path) as fh:
        fh.seek(offset)
        for line in fh:
            c, v = line.split()
            if v == "end":
                end = int(c)
                break
            cycles.append(int(c))
            values.append(int(v, 16))
    if not cycles or end is None:
        raise ValueError(f"{path}: no complete stage trace from byte {offset} (recorder still enabled?)")
    return np.array(cycles, np.int64), values, end


def layout(algorithm: str = "ring") -> tuple:
    """(stage names in bit order, kind names by value) of the engine that runs ``algorithm``'s collectives."""
    if algorithm == "switch":
        return st.SWITCH_NAMES, st.SWITCH_KINDS
    return st.NAMES, tuple(k.name for k in PhaseKind)


def summarise(cycles, values, end, bins: int = 20, algorithm: str = "ring") -> dict:
    """Per stage: ``cycles`` per state over the trace, ``by_kind`` (kind -> state -> cycles, kinds the
    stage held), ``busy_share`` over ``bins`` equal slices of the trace (busy cycles / slice length).
    ``algorithm``: whose stages the trace holds (:func:`layout`)."""
    names, kinds = layout(algorithm)
    start = int(cycles[0])
    total = end - start
    ends = np.append(cycles[1:], end)       # where each value stops holding
    dur = ends - cycles
    vals = np.array(values, np.int64)       # contract.stages.WIDTH bits < 63
    edges = np.linspace(start, end, bins + 1)
    out = {"cycles": total, "stages": {}}
    for i, name in enumerate(names):
        sub = (vals >> (st.BITS * i)) & 0x1F
        state, kind = sub & 3, sub >> 2
        per_state = np.bincount(state, weights=dur, minlength=4)
        grid = np.zeros((8, 4))
        np.add.at(grid, (kind, state), dur)
        by_kind = {kinds[k]: {STATES[s]: int(grid[k, s]) for s in range(4) if grid[k, s]}
                   for k in range(len(kinds)) if grid[k, 1:].sum()}
        for k in by_kind.values():
            k.pop("idle", None)         # an idle stage holds no item: its kind field is 0, not a phase
        # busy cycles per slice: the overlap of each busy run with each slice
        busy = state == StageState.busy
        b_start, b_end = cycles[busy], ends[busy]
        share = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            overlap = np.clip(np.minimum(b_end, hi) - np.maximum(b_start, lo), 0, None).sum()
            share.append(round(float(overlap / (hi - lo)), 3))
        out["stages"][name] = {"cycles": {STATES[s]: int(per_state[s]) for s in range(4)},
                               "by_kind": by_kind, "busy_share": share}
    return out


def table(summary: dict) -> str:
    """A Markdown table: per stage, the share of the run busy, starved, blocked and idle, and the phase kind
    it was most often starved or blocked in."""
    total = summary["cycles"]
    rows = ["| stage | busy | starved | blocked | idle | most starved in | most blocked in |",
            "|---|---|---|---|---|---|---|"]
    for name, s in summary["stages"].items():
        c = s["cycles"]
        worst = {}
        for state in ("starved", "blocked"):
            kinds = {k: v.get(state, 0) for k, v in s["by_kind"].items()}
            k = max(kinds, key=kinds.get) if kinds and max(kinds.values()) else None
            worst[state] = f"{k} ({kinds[k] / total:.0%})" if k else "—"
        rows.append(f"| {name} | " + " | ".join(f"{c[x] / total:.1%}" for x in ("busy", "starved", "blocked", "idle"))
                    + f" | {worst['starved']} | {worst['blocked']} |")
    return "\n".join(rows)


__all__ = ["STATES", "layout", "read", "summarise", "table"]
