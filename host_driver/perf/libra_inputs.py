"""LIBRA's input files, read as LIBRA writes them (``host_driver/perf/libra/``: its shipped inputs, MIT licence),
and the constraints as data.

* Network (YAML): ``Topology`` (per dimension: ``Ring``, ``FullyConnected``, ``Switch``; ainic adds
  ``AinicRing`` and ``AinicSwitch``, optionally with a codec: ``AinicSwitch:bfp8``), ``NpusCount`` (group size
  per dimension), ``CostDimension`` (the cost model's section for each dimension).
* Workload (text): one layer a line, 12 tokens: ``name -1 fwd_compute fwd_type fwd_bytes ig_compute ig_type
  ig_bytes wg_compute wg_type wg_bytes update_time``; compute times in ns, sizes in bytes.
* Communicator (YAML): ``Forward``, ``InputGrad``, ``WeightGrad``: the group size each pass's collective uses
  in each dimension, -1 where it does not use it.
* Cost model (YAML): per section, $ per GB/s of ``Link``, ``Switch``, ``Nic``.
* Constraints (YAML, ours): see :class:`Constraints`.

Every reader raises :class:`InputError` naming the file and what is wrong with it.
"""

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from contract.enums import Codec

#: the collectives of a workload line
COLLECTIVES = ("NONE", "ALLREDUCE", "REDUCESCATTER", "ALLGATHER", "ALLTOALL")
#: LIBRA's topologies, then ainic's
LIBRA_TOPOLOGIES = ("Ring", "FullyConnected", "Switch")
AINIC_TOPOLOGIES = ("AinicRing", "AinicSwitch")
PASSES = ("Forward", "InputGrad", "WeightGrad")
#: what a dimension of each topology pays for, per GB/s (LIBRA: a switch dimension pays link, NIC and switch)
COST_PARTS = {"Ring": ("Link",), "FullyConnected": ("Link",), "Switch": ("Link", "Nic", "Switch"),
              "AinicRing": ("Link", "Nic"), "AinicSwitch": ("Link", "Nic", "Switch")}

#: the directory of LIBRA's shipped inputs vendored with ainic
SHIPPED = Path(__file__).resolve().parent / "libra"


class InputError(ValueError):
    """An input file that cannot be read or does not describe what it should."""


@dataclass(frozen=True)
class Dimension:
    topology: str           # one of LIBRA_TOPOLOGIES or AINIC_TOPOLOGIES
    npus: int               # group size
    cost_section: str       # the cost model's section
    codec: Codec = Codec.none   # ainic dimensions: the codec on the wire


@dataclass(frozen=True)
class Network:
    dims: tuple

    @property
    def nodes(self) -> int:
        n = 1
        for d in self.dims:
            n *= d.npus
        return n


@dataclass(frozen=True)
class Phase:
    compute_ns: float
    collective: str         # one of COLLECTIVES
    size_bytes: float


@dataclass(frozen=True)
class Layer:
    name: str
    forward: Phase
    input_grad: Phase
    weight_grad: Phase
    update_ns: float

    @property
    def phases(self) -> tuple:
        return (self.forward, self.input_grad, self.weight_grad)


@dataclass(frozen=True)
class Communicator:
    """Per pass (``Forward``, ``InputGrad``, ``WeightGrad``), the group size used in each dimension (-1: not)."""
    groups: dict


@dataclass(frozen=True)
class CostModel:
    sections: dict          # section -> {"Link": $, "Switch": $, "Nic": $} per GB/s

    def unit_cost(self, dim: Dimension) -> float:
        """$ per GB/s of one node's bandwidth in ``dim``."""
        try:
            parts = self.sections[dim.cost_section]
        except KeyError:
            raise InputError(f"the cost model has no section {dim.cost_section!r} "
                             f"(it has {', '.join(self.sections)})") from None
        missing = [p for p in COST_PARTS[dim.topology] if p not in parts]
        if missing:
            raise InputError(f"cost section {dim.cost_section!r} lacks {', '.join(missing)}, which a "
                             f"{dim.topology} dimension pays for")
        return sum(parts[p] for p in COST_PARTS[dim.topology])


@dataclass(frozen=True)
class Constraints:
    """Linear constraints on the bandwidths (GB/s per node, one per dimension, in the network's order):

    * ``total``: Σ bw = total (``total_at_most``: ≤);
    * ``fixed``: {dim: value}; ``min`` / ``max``: {dim: bound};
    * ``order``: [[a, b], ...]: bw[a] ≥ bw[b];
    * ``sums``: [{"dims": [...], "equal" | "at_most" | "at_least": value}, ...].

    Every bandwidth is also at least ``floor`` (a dimension cannot be switched off: its collectives would
    take forever)."""
    total: float = None
    total_at_most: float = None
    fixed: dict = field(default_factory=dict)
    min: dict = field(default_factory=dict)
    max: dict = field(default_factory=dict)
    order: tuple = ()
    sums: tuple = ()
    floor: float = 1e-3

    def with_total(self, total: float) -> "Constraints":
        return Constraints(total, None, self.fixed, self.min, self.max, self.order, self.sums, self.floor)


def _yaml(path) -> dict:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not YAML: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping at the top level")
    return data


def _need(data: dict, key: str, path) -> object:
    if key not in data:
        raise InputError(f"{path}: missing {key!r}")
    return data[key]


def read_network(path) -> Network:
    data = _yaml(path)
    topo, npus, cost = (_need(data, k, path) for k in ("Topology", "NpusCount", "CostDimension"))
    if not (isinstance(topo, list) and isinstance(npus, list) and isinstance(cost, list)) or not topo:
        raise InputError(f"{path}: Topology, NpusCount and CostDimension must be non-empty lists")
    if not len(topo) == len(npus) == len(cost):
        raise InputError(f"{path}: Topology, NpusCount and CostDimension must have one entry per dimension "
                         f"(got {len(topo)}, {len(npus)}, {len(cost)})")
    dims = []
    for i, (t, n, c) in enumerate(zip(topo, npus, cost)):
        name, _, codec = str(t).partition(":")
        if name not in LIBRA_TOPOLOGIES + AINIC_TOPOLOGIES:
            raise InputError(f"{path}: dimension {i}: unknown topology {t!r} "
                             f"(one of {', '.join(LIBRA_TOPOLOGIES + AINIC_TOPOLOGIES)})")
        if codec and name not in AINIC_TOPOLOGIES:
            raise InputError(f"{path}: dimension {i}: only ainic dimensions take a codec, got {t!r}")
        try:
            codec = Codec[codec] if codec else Codec.none
        except KeyError:
            raise InputError(f"{path}: dimension {i}: unknown codec {codec!r} "
                             f"(one of {', '.join(c.name for c in Codec)})") from None
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InputError(f"{path}: dimension {i}: NpusCount must be a positive integer, got {n!r}")
        dims.append(Dimension(name, n, str(c), codec))
    return Network(tuple(dims))


def read_workload(path) -> tuple:
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None
    layers = []
    for no, line in enumerate(lines, 1):
        tok = line.split()
        if not tok:
            continue
        if len(tok) != 12:
            raise InputError(f"{path}:{no}: a layer line has 12 tokens, got {len(tok)}")
        try:
            nums = [float(tok[i]) for i in (2, 4, 5, 7, 8, 10, 11)]
        except ValueError:
            raise InputError(f"{path}:{no}: compute times and sizes must be numbers: {line.strip()!r}") from None
        if any(x < 0 for x in nums):
            raise InputError(f"{path}:{no}: negative time or size: {line.strip()!r}")
        for t in (tok[3], tok[6], tok[9]):
            if t not in COLLECTIVES:
                raise InputError(f"{path}:{no}: unknown collective {t!r} (one of {', '.join(COLLECTIVES)})")
        phases = [Phase(nums[0], tok[3], nums[1]), Phase(nums[2], tok[6], nums[3]), Phase(nums[4], tok[9], nums[5])]
        layers.append(Layer(tok[0], *phases, update_ns=nums[6]))
    if not layers:
        raise InputError(f"{path}: no layers")
    return tuple(layers)


def read_communicator(path, network: Network) -> Communicator:
    data = _yaml(path)
    groups = {}
    for p in PASSES:
        g = _need(data, p, path)
        if not isinstance(g, list) or len(g) != len(network.dims):
            raise InputError(f"{path}: {p} must list one group size per network dimension "
                             f"({len(network.dims)}), got {g!r}")
        for d, (n, dim) in enumerate(zip(g, network.dims)):
            if n != -1 and not (isinstance(n, int) and 1 <= n <= dim.npus):
                raise InputError(f"{path}: {p}, dimension {d}: a group size is -1 or 1..{dim.npus}, got {n!r}")
        groups[p] = tuple(g)
    return Communicator(groups)


def read_cost_model(path) -> CostModel:
    data = _yaml(path)
    sections = {}
    for name, parts in data.items():
        if not isinstance(parts, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in parts.values()):
            raise InputError(f"{path}: section {name!r} must map Link/Switch/Nic to non-negative $ per GB/s")
        sections[str(name)] = {str(k): float(v) for k, v in parts.items()}
    return CostModel(sections)


def read_constraints(path, network: Network) -> Constraints:
    data = _yaml(path)
    known = {"total", "total_at_most", "fixed", "min", "max", "order", "sums"}
    if set(data) - known:
        raise InputError(f"{path}: unknown keys {sorted(set(data) - known)} (known: {sorted(known)})")
    D = len(network.dims)

    def dim(d):
        if not isinstance(d, int) or not 0 <= d < D:
            raise InputError(f"{path}: {d!r} is not a dimension (0..{D - 1})")
        return d

    def value(v, what):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise InputError(f"{path}: {what} must be a non-negative number of GB/s, got {v!r}")
        return float(v)

    per_dim = {k: {dim(d): value(v, k) for d, v in (data.get(k) or {}).items()} for k in ("fixed", "min", "max")}
    order = tuple((dim(a), dim(b)) for a, b in (data.get("order") or ()))
    sums = []
    for s in data.get("sums") or ():
        kinds = [k for k in ("equal", "at_most", "at_least") if k in s]
        if len(kinds) != 1 or "dims" not in s:
            raise InputError(f"{path}: a sum is {{dims: [...], equal|at_most|at_least: value}}, got {s!r}")
        sums.append((tuple(dim(d) for d in s["dims"]), kinds[0], value(s[kinds[0]], "a sum")))
    total = data.get("total")
    at_most = data.get("total_at_most")
    return Constraints(None if total is None else value(total, "total"),
                       None if at_most is None else value(at_most, "total_at_most"),
                       per_dim["fixed"], per_dim["min"], per_dim["max"], order, tuple(sums))


__all__ = ["AINIC_TOPOLOGIES", "COLLECTIVES", "Communicator", "Constraints", "CostModel", "Dimension",
           "InputError", "LIBRA_TOPOLOGIES", "Layer", "Network", "PASSES", "Phase", "SHIPPED",
           "read_communicator", "read_constraints", "read_cost_model", "read_network", "read_workload"]
