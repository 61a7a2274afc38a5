"""How long a collective takes on ainic, in cycles: an α–β model whose constants are fitted to cycle counts
measured on the RTL (``make calibrate``: ``scripts/calibrate.py``; the constants live in ``calibration.json``
beside this file).

The model of one collective (ring: ALLREDUCE, REDUCE_SCATTER or ALLGATHER; switch: ALLREDUCE) of L elements
a node, N nodes, codec c, P elements a packet, W bits of datapath, links of R bytes a cycle, h cycles of
latency per hop:

    cycles = α₀ + α₁·s + α₂·s·h + β·max(wire, γ·datapath) + δ_c·chunk

* s: the steps (ring: 2(N − 1) for ALLREDUCE, N − 1 for either half; switch: 1);
* wire: the busiest link's bytes over R, frames' headers and Ethernet overhead included (the golden
  models' bounds: :func:`~host_driver.models.allreduce.ring_bound_cycles`,
  :func:`~host_driver.models.in_network.bound_cycles`);
* datapath: L / (W/32), the cycles the host side (DMA, codecs, reduction) needs at one beat a cycle;
* chunk: (L/N) / (W/32) on the ring (the part of the work that cannot overlap: the last chunk through
  the compressor and the host decompressor in series), L / (W/32) / N on the switch likewise;
  δ_c is per codec.

α are latencies (cycles; α₂ = 1: a step waits one hop), β and γ the inverse of the fraction of the link's
and of the datapath's rate reached, δ the serial fraction. The fit minimises the relative error (weighted least squares, γ by a one-dimensional
search) over the calibration points; the held-out points report the error on configurations it has not seen.
"""

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contract.enums import Codec, names
from contract.protocol import DEFAULT_P, FRAME_HEADER_BYTES, WIRE_OVERHEAD_BYTES
from host_driver.models import allreduce as ar
from host_driver.models import in_network as inn

CALIBRATION = Path(__file__).resolve().parent / "calibration.json"
ALGORITHMS = ("ring", "switch")
OPS = ("allreduce", "reduce_scatter", "allgather")
CODECS = tuple(names(Codec))
#: codecs that take another's constants: the same bytes through the same datapath
SAME_TIMING = {"bf16": "fp16"}


@dataclass(frozen=True)
class Setup:
    """One collective on one configuration (the arguments of ``ainic demo`` that decide its time)."""
    nodes: int
    elements: int
    codec: str = "none"
    op: str = "allreduce"
    algorithm: str = "ring"
    packet: int = DEFAULT_P
    width: int = 512
    link_gbps: float = 80.0
    clock_mhz: float = 250.0
    link_latency: int = 125          # cycles per link
    fabric: str = None               # ring: NICs linked in a ring (one link a hop) or through a switch (two)

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if self.op not in OPS or (self.algorithm == "switch" and self.op != "allreduce"):
            raise ValueError(f"op must be one of {OPS} (switch: allreduce), got {self.op!r}")
        if self.codec not in CODECS:
            raise ValueError(f"codec must be one of {CODECS}, got {self.codec!r}")
        for name in ("nodes", "elements", "packet", "width"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (2 if name == "nodes" else 1):
                raise ValueError(f"{name} must be an int >= {2 if name == 'nodes' else 1}, got {v!r}")
        if not self.link_gbps > 0 or not self.clock_mhz > 0 or self.link_latency < 0:
            raise ValueError("link_gbps and clock_mhz must be positive, link_latency >= 0")

    @property
    def link_bytes_per_cycle(self) -> float:
        return self.link_gbps * 1e9 / 8 / (self.clock_mhz * 1e6)

    @property
    def links_per_hop(self) -> int:
        fabric = self.fabric or ("switch" if self.algorithm == "switch" else "ring")
        return 2 if fabric == "switch" else 1

    def features(self) -> dict:
        lanes = self.width / 32
        if self.algorithm == "ring":
            steps = 2 * (self.nodes - 1) if self.op == "allreduce" else self.nodes - 1
            wire = ar.ring_bound_cycles(self.nodes, self.elements, self.link_bytes_per_cycle, self.codec,
                                        self.packet, FRAME_HEADER_BYTES + WIRE_OVERHEAD_BYTES, self.op)
        else:
            steps = 1
            wire = inn.bound_cycles(self.elements, self.packet, self.codec, self.link_bytes_per_cycle)
        return {"steps": steps, "hop": self.link_latency * self.links_per_hop, "wire": wire,
                "datapath": self.elements / lanes, "chunk": self.elements / self.nodes / lanes}


@dataclass
class Constants:
    """The fitted constants of one algorithm (see the module docstring)."""
    alpha0: float
    alpha1: float
    alpha2: float
    beta: float
    gamma: float
    delta: dict = field(default_factory=dict)      # per codec

    def cycles(self, f: dict, codec: str) -> float:
        return (self.alpha0 + self.alpha1 * f["steps"] + self.alpha2 * f["steps"] * f["hop"]
                + self.beta * max(f["wire"], self.gamma * f["datapath"])
                + self.delta[SAME_TIMING.get(codec, codec)] * f["chunk"])


def _design(rows, gamma):
    """The least-squares matrix of the linear constants for a given γ: columns α₀, α₁, β, δ_c..."""
    X = []
    for f, codec in rows:
        X.append([1.0, f["steps"], max(f["wire"], gamma * f["datapath"]),
                  *[f["chunk"] if codec == c else 0.0 for c in CODECS]])
    return np.array(X)


def fit(points) -> Constants:
    """Constants from measured points: [(Setup, cycles), ...] of one algorithm and collective. α₂ is not
    fitted: each step waits for one hop's latency (the sweep keeps the latency fixed, so it could not tell
    α₂ from α₁)."""
    rows = [(s.features(), SAME_TIMING.get(s.codec, s.codec)) for s, _ in points]
    y = np.array([c for _, c in points], dtype=float)
    latency = np.array([f["steps"] * f["hop"] for f, _ in rows])
    w = 1.0 / y                                     # relative error
    present = {c for _, c in rows}
    keep = [0, 1, 2] + [3 + i for i, c in enumerate(CODECS) if c in present]
    best = None
    for gamma in np.linspace(0.5, 2.0, 151):
        X = _design(rows, gamma)[:, keep]
        coef, *_ = np.linalg.lstsq(X * w[:, None], (y - latency) * w, rcond=None)
        err = float(np.sum(((X @ coef + latency - y) * w) ** 2))
        if best is None or err < best[0]:
            best = (err, gamma, dict(zip(keep, coef)))
    _, gamma, coef = best
    return Constants(float(coef[0]), float(coef[1]), 1.0, float(coef[2]), float(gamma),
                     {c: float(coef[3 + i]) for i, c in enumerate(CODECS) if 3 + i in coef})


def key(setup: Setup) -> str:
    """The calibration a setup uses: one set of constants per algorithm and collective."""
    return f"{setup.algorithm}/{setup.op}"


def load(path=CALIBRATION) -> dict:
    """{"<algorithm>/<op>": Constants} from the calibration file."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError:
        raise FileNotFoundError(f"no calibration at {path}: run `make calibrate`") from None
    return {k: Constants(**v) for k, v in data["constants"].items()}


def predict(setup: Setup, constants: dict = None) -> float:
    """Cycles of the collective (the model's prediction)."""
    constants = constants or _default()
    if key(setup) not in constants:
        raise ValueError(f"no calibration for {key(setup)} (calibrated: {', '.join(sorted(constants))})")
    return constants[key(setup)].cycles(setup.features(), setup.codec)


@functools.lru_cache(maxsize=1)
def _default() -> dict:
    return load()


__all__ = ["ALGORITHMS", "CALIBRATION", "Constants", "OPS", "Setup", "fit", "key", "load", "predict"]
