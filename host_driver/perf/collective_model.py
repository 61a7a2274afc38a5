"""How long a collective takes on ainic, in cycles: a model whose constants are fitted to cycle counts measured
on the RTL (``make calibrate``: ``scripts/calibrate.py``; the constants live in ``calibration.json`` beside
this file).

The model of one collective (ring: ALLREDUCE, REDUCE_SCATTER or ALLGATHER; switch: ALLREDUCE) of L elements
a node, N nodes, codec c, P elements a packet, W bits of datapath, links of R bytes a cycle, h cycles of
latency a hop:

    cycles = max(β_c·wire + h·(λ₀ + λ₁·s),  γ_c·datapath + h·(μ₀ + μ₁·s)) + δ_c·chunk

* s: the steps (ring: 2(N − 1) for ALLREDUCE, N − 1 for either half; switch: 1);
* wire: the busiest link's bytes over R, frames' headers and Ethernet overhead included (the golden
  models' bounds: :func:`~host_driver.models.allreduce.ring_bound_cycles`,
  :func:`~host_driver.models.in_network.bound_cycles`);
* datapath: L / (W/32), the cycles the host side (DMA, codecs, reduction) needs at one beat a cycle (a
  two-level tree of switches, ``leaves``: twice that, a leaf's result bus carrying every packet up and down,
  unless the switches are twice as wide as the NICs, ``switch_speedup`` 2; its hop is four links, a member's
  and a trunk each way);
* chunk: (L/N) / (W/32), a chunk's beats: what does not overlap at the ends of the run.

Two bounds race: the link (β_c ≥ 1: how far it falls short of its rate) and the datapath (γ_c ≥ 1), each
with its own latency in hops; β, γ and δ are per codec (a compressed frame is shorter: a link carrying bfp4
loses more of its rate to what a frame costs besides its bytes, which the wide NIC, where the link binds
every codec, shows). Where the link binds the ring's pipeline pays little more than its fill (λ₁
is small); where the datapath binds, a rank cannot write its first result before it has come round the ring,
and every step costs about a hop (μ₁ near 1: docs/collective_engine.md, "What N = 8 can reach"). One latency
term for both (the form of issue 15, with a receive-side term η) fitted the RTL of issue 16 (its FIFOs, the
lag chosen per ring) to 14.6 % on fitted points and 6.3 % held out; this form to about 2 %. The
latencies are in hops, so that a longer link lengthens them (the calibration measures one latency: how they
scale with it is this form's assumption). The fit minimises the relative error (bounded nonlinear least
squares from a few starts) over the calibration points; the held-out points report the error on
configurations it has not seen. :func:`predict` never goes below :meth:`Setup.bound_cycles`.
"""

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contract import collective
from contract.enums import Codec, names
from contract.protocol import DEFAULT_P, FRAME_HEADER_BYTES, WIRE_OVERHEAD_BYTES
from host_driver.models import allreduce as ar
from host_driver.models import in_network as inn

CALIBRATION = Path(__file__).resolve().parent / "calibration.json"
ALGORITHMS, OPS = collective.ALGORITHMS, collective.OPS
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
    leaves: int = None               # switch: a two-level tree of K leaf switches and a spine (None: one switch)
    switch_speedup: int = 1          # switch: 2, the switches at twice the NICs' width (a tree's leaves keep up)

    def __post_init__(self):
        # the check ainic demo's cluster makes too: what a NIC could run
        collective.check(self.nodes, self.elements, codec=self.codec, op=self.op, algorithm=self.algorithm,
                         packet=self.packet, width=self.width, link_gbps=self.link_gbps, clock_mhz=self.clock_mhz,
                         link_latency=self.link_latency, leaves=self.leaves, switch_speedup=self.switch_speedup)
        if self.fabric not in (None, "ring", "switch") or (self.algorithm == "switch" and self.fabric == "ring"):
            raise ValueError(f"fabric must be None, 'ring' or 'switch' (switch: 'switch'), got {self.fabric!r}")

    @property
    def link_bytes_per_cycle(self) -> float:
        return self.link_gbps * 1e9 / 8 / (self.clock_mhz * 1e6)

    @property
    def links_per_hop(self) -> int:
        """Links a step's frames cross: a ring's hop (1, or 2 through the Ethernet switch), the switch's
        round trip (up and down: 2), a tree's (member link and trunk, each way: 4)."""
        fabric = self.fabric or ("switch" if self.algorithm == "switch" else "ring")
        return 4 if self.leaves else 2 if fabric == "switch" else 1

    def bound_cycles(self) -> float:
        """The physical bound: no run is shorter than its busiest link's bytes (``wire``) or than every element
        once through the datapath at one beat a cycle (``datapath``). :func:`predict` never goes below it."""
        f = self.features()
        return max(f["wire"], f["datapath"])

    def features(self) -> dict:
        lanes = self.width / 32
        if self.algorithm == "ring":
            steps = 2 * (self.nodes - 1) if self.op == "allreduce" else self.nodes - 1
            wire = ar.ring_bound_cycles(self.nodes, self.elements, self.link_bytes_per_cycle, self.codec,
                                        self.packet, FRAME_HEADER_BYTES + WIRE_OVERHEAD_BYTES, self.op)
        else:
            steps = 1
            wire = inn.bound_cycles(self.elements, self.packet, self.codec, self.link_bytes_per_cycle)
        # a tree's leaf switch reads and encodes every packet twice (its partial up, the spine's result down) on
        # one result bus that takes a packet's time each (docs/in_network.md, "Two levels"): at the NICs' width
        # twice the NIC's datapath; a switch twice as wide takes each in half the time, and the NIC's binds
        datapath = self.elements / lanes * (2 // self.switch_speedup if self.leaves else 1)
        return {"steps": steps, "hop": self.link_latency * self.links_per_hop, "wire": wire,
                "datapath": datapath, "chunk": self.elements / self.nodes / lanes}


@dataclass
class Constants:
    """The fitted constants of one algorithm and collective (see the module docstring); β, γ and δ per codec."""
    beta: dict
    lambda0: float
    lambda1: float
    mu0: float
    mu1: float
    gamma: dict
    delta: dict

    def cycles(self, f: dict, codec: str) -> float:
        c = SAME_TIMING.get(codec, codec)
        link = self.beta[c] * f["wire"] + f["hop"] * (self.lambda0 + self.lambda1 * f["steps"])
        datapath = self.gamma[c] * f["datapath"] + f["hop"] * (self.mu0 + self.mu1 * f["steps"])
        return max(link, datapath) + self.delta[c] * f["chunk"]


#: starting points of the fit: (β, λ₀, λ₁, μ₀, μ₁, γ, δ), β, γ and δ the same for every codec
_STARTS = ((1.0, 2.0, 0.1, 1.0, 1.0, 1.0, 0.0), (1.02, 5.0, 0.0, 2.0, 1.0, 1.05, 0.0),
           (1.0, 0.0, 1.0, 0.0, 1.0, 1.2, 0.5), (1.05, 5.0, 0.5, 5.0, 0.0, 1.0, -0.2))
#: the bounds of the fit, the same order: β ≥ 1 (no collective moves its bytes faster than the link: a β below
#: 1 predicted 4 x 1M `none` faster than its link bound, issue 30), γ ≥ 1 likewise for the datapath
_LOW = (1.0, -20.0, -5.0, -20.0, -5.0, 1.0, -3.0)
_HIGH = (2.0, 50.0, 10.0, 50.0, 10.0, 3.0, 5.0)


def fit(points) -> Constants:
    """Constants from measured points: [(Setup, cycles), ...] of one algorithm and collective; codecs absent
    from the points get none. λ₁ and μ₁ only where the steps vary (the switch's are all 1: 0).

    A codec whose link (datapath) bound never binds at its points leaves its β (γ) undetermined: it takes
    the largest β (the smallest γ) fitted for another codec, where that fits its points as well, so that a
    prediction outside the calibration (a link that binds it, a narrower datapath) stands on a constant the
    RTL showed."""
    from scipy.optimize import least_squares

    rows = [(s.features(), SAME_TIMING.get(s.codec, s.codec)) for s, _ in points]
    y = np.array([c for _, c in points], dtype=float)
    codecs = sorted({c for _, c in rows}, key=CODECS.index)
    n = len(codecs)
    idx = np.array([codecs.index(c) for _, c in rows])
    F = {k: np.array([f[k] for f, _ in rows], dtype=float) for k in rows[0][0]}
    steps = F["steps"] if np.ptp(F["steps"]) > 0 else np.zeros_like(y)
    B, L, G, D = 0, n, n + 4, 2 * n + 4         # where β, the latencies, γ and δ sit in the parameters

    def parts(t):
        l0, l1, m0, m1 = t[L:L + 4]
        link = t[B:B + n][idx] * F["wire"] + F["hop"] * (l0 + l1 * steps)
        datapath = t[G:G + n][idx] * F["datapath"] + F["hop"] * (m0 + m1 * steps)
        return link, datapath, t[D:D + n][idx] * F["chunk"]

    def residual(t):
        link, datapath, chunk = parts(t)
        return (np.maximum(link, datapath) + chunk) / y - 1

    def spread(v):
        return [v[0]] * n + list(v[1:5]) + [v[5]] * n + [v[6]] * n
    best = None
    for start in _STARTS:
        r = least_squares(residual, spread(start), bounds=(spread(_LOW), spread(_HIGH)), diff_step=1e-5)
        if best is None or r.cost < best.cost * (1 - 1e-9):
            best = r
    t = [float(v) for v in best.x]
    if not np.ptp(F["steps"]) > 0:
        t[L + 1] = t[L + 3] = 0.0
    link, datapath, _ = parts(np.array(t))
    cost = lambda: float(np.sum(residual(np.array(t)) ** 2))     # noqa: E731
    for at, binding, pick in ((B, link >= datapath, max), (G, datapath > link, min)):
        binds = [bool(np.any(binding[idx == i])) for i in range(n)]
        for i in range(n):
            # a constant the points do not determine (its bound never binds, or binds where it changes nothing)
            others = [t[at + j] for j in range(n) if j != i and binds[j]]
            if not others:
                continue
            before, kept = cost(), t[at + i]
            t[at + i] = pick(others)
            if t[at + i] == kept or cost() > before * (1 + 1e-6) + 1e-12:
                t[at + i] = kept
    return Constants(dict(zip(codecs, t[B:B + n])), *t[L:L + 4], dict(zip(codecs, t[G:G + n])),
                     dict(zip(codecs, t[D:D + n])))


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
    """Cycles of the collective (the model's prediction), never below :meth:`Setup.bound_cycles`."""
    constants = constants or _default()
    if key(setup) not in constants:
        raise ValueError(f"no calibration for {key(setup)} (calibrated: {', '.join(sorted(constants))})")
    return max(constants[key(setup)].cycles(setup.features(), setup.codec), setup.bound_cycles())


@functools.lru_cache(maxsize=1)
def _default() -> dict:
    return load()


__all__ = ["ALGORITHMS", "CALIBRATION", "Constants", "OPS", "Setup", "fit", "key", "load", "predict"]
