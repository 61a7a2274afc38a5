"""From collective times to training time: one iteration of data-parallel training, per node.

A workload is a list of layers (forward, input-gradient and weight-gradient compute times; the weight
gradient's size, all-reduced every iteration). An iteration runs the forward pass layer by layer, then the
backward pass from the last layer to the first (each layer's input gradient, then its weight gradient),
then waits for every gradient's all-reduce. Two overlap structures:

* ``none``: each all-reduce runs when its layer's weight gradient is ready, and the host waits for it
  (LIBRA's ``no_overlap``);
* ``backward``: each all-reduce is handed to the network as soon as its gradient is ready and runs while
  the host goes on with the backward pass of the layers before it; the host keeps at most ``depth`` (2)
  all-reduces outstanding and waits for the oldest before it hands over a third (the Intel AI smart NIC's
  host code); the network runs them one at a time, in order.

Scaling: ``weak`` keeps each node's batch (its compute time does not change with N); ``strong`` keeps the
global batch of ``base_nodes`` nodes, so each node's compute scales by base_nodes / N.

Collective backends (:class:`HostRing`, :class:`Ainic`) give an all-reduce's time from its size and N.
"""

from dataclasses import dataclass

from host_driver.perf import collective_model as cm

OVERLAPS = ("none", "backward")
SCALINGS = ("weak", "strong")


@dataclass(frozen=True)
class Layer:
    name: str
    forward_ns: float
    input_grad_ns: float
    weight_grad_ns: float
    grad_bytes: float


def mlp(layers: int = 20, width: int = 2048, batch: int = 1792, flops: float = 2.0e12) -> list:
    """A multi-layer perceptron of ``layers`` fully connected ``width`` × ``width`` fp32 layers, ``batch``
    samples a node, on a host that sustains ``flops`` fp32 operations a second: each pass of a layer is one
    (batch × width) · (width × width) product, 2·batch·width² operations (the input gradient and the weight
    gradient likewise); its gradient is width² fp32."""
    t = 2 * batch * width * width / flops * 1e9
    return [Layer(f"fc{i}", t, t, t, 4 * width * width) for i in range(layers)]


def from_libra(libra_layers) -> list:
    """LIBRA's workload (``libra_inputs.read_workload``) as data-parallel layers: the weight gradient's
    all-reduce is the one this model times; other collectives of the file are left out (say so)."""
    out = []
    for la in libra_layers:
        wg = la.weight_grad
        size = wg.size_bytes if wg.collective == "ALLREDUCE" else 0.0
        out.append(Layer(la.name, la.forward.compute_ns, la.input_grad.compute_ns, wg.compute_ns, size))
    return out


@dataclass(frozen=True)
class HostRing:
    """The baseline: the hosts' own ring all-reduce over plain NICs (MPI or NCCL style), fp32, reductions
    on the CPU. Each of the 2(N − 1) steps sends a chunk of S/N bytes to the next host; in the N − 1
    reduce-scatter steps the receiving CPU also adds the chunk to its own (reading two, writing one:
    3·S/N bytes of memory traffic at ``mem_gbps``). Chunks are pipelined, so a step takes the longer of
    the wire and the reduction, plus ``step_us`` of software latency. The wire carries TCP/IP over
    1,500-byte frames: 1,448 bytes of payload per 1,538 on the wire (``wire_efficiency``)."""
    link_gbps: float = 40.0
    mem_gbps: float = 20.0          # GB/s of memory bandwidth the reduction gets
    step_us: float = 10.0
    wire_efficiency: float = 1448 / 1538
    name: str = "host ring"

    def allreduce_ns(self, size_bytes: float, nodes: int) -> float:
        if nodes < 2 or size_bytes <= 0:
            return 0.0
        chunk = size_bytes / nodes
        wire = chunk * 8 / (self.link_gbps * self.wire_efficiency)      # ns
        reduce = 3 * chunk / self.mem_gbps              # ns (GB/s = bytes/ns)
        return (nodes - 1) * (max(wire, reduce) + self.step_us * 1e3) + \
            (nodes - 1) * (wire + self.step_us * 1e3)


@dataclass(frozen=True)
class Ainic:
    """ainic's all-reduce on the NICs, ``algorithm`` "ring" (the NICs' ring) or "switch" (in-network
    aggregation): the calibrated collective model (fp32 elements). The switch's N nodes hang off a tree of
    ``radix``-port aggregation switches (the RTL's switch has 8), ⌈log_radix N⌉ levels: every level adds
    two links of latency to the path (the calibration measured one level)."""
    codec: str = "none"
    link_gbps: float = 40.0
    algorithm: str = "ring"
    clock_mhz: float = 250.0
    width: int = 512
    link_latency: int = 125
    radix: int = 8
    constants: dict = None

    @property
    def name(self) -> str:
        return f"ainic {self.algorithm} {self.codec}"

    def levels(self, nodes: int) -> int:
        """Switch levels between the nodes (1 up to ``radix`` nodes)."""
        levels, reach = 1, self.radix
        while reach < nodes:
            levels, reach = levels + 1, reach * self.radix
        return levels

    def allreduce_ns(self, size_bytes: float, nodes: int) -> float:
        if nodes < 2 or size_bytes <= 0:
            return 0.0
        latency = self.link_latency * (self.levels(nodes) if self.algorithm == "switch" else 1)
        setup = cm.Setup(nodes, max(1, int(size_bytes // 4)), self.codec, algorithm=self.algorithm,
                         width=self.width, link_gbps=self.link_gbps, clock_mhz=self.clock_mhz,
                         link_latency=latency)
        return cm.predict(setup, self.constants) * 1e3 / self.clock_mhz


def iteration_ns(layers, nodes: int, backend, overlap: str = "none", scaling: str = "weak",
                 base_nodes: int = None, depth: int = 2) -> dict:
    """One iteration's time on each node: {"total_ns", "compute_ns", "exposed_comm_ns", "comm_ns"}."""
    if overlap not in OVERLAPS:
        raise ValueError(f"overlap must be one of {OVERLAPS}, got {overlap!r}")
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be a positive int, got {nodes!r}")
    if scaling == "strong" and not base_nodes:
        raise ValueError("strong scaling needs base_nodes (the node count whose per-node batch is given)")
    k = base_nodes / nodes if scaling == "strong" else 1.0
    comm = [backend.allreduce_ns(la.grad_bytes, nodes) for la in layers]
    t = sum(la.forward_ns for la in layers) * k
    compute = t + sum(la.input_grad_ns + la.weight_grad_ns for la in layers) * k
    net_free, outstanding = 0.0, []           # when the network is idle; finish times of posted all-reduces
    for la, c in zip(reversed(layers), reversed(comm)):
        t += (la.input_grad_ns + la.weight_grad_ns) * k
        if c <= 0:
            continue
        if overlap == "none":
            t += c
            continue
        if len(outstanding) >= depth:        # wait for the oldest before posting another
            t = max(t, outstanding.pop(0))
        start = max(t, net_free)
        net_free = start + c
        outstanding.append(net_free)
    if outstanding:
        t = max(t, outstanding[-1])
    return {"total_ns": t, "compute_ns": compute, "exposed_comm_ns": t - compute, "comm_ns": sum(comm)}


def ainic_backends(codecs, algorithms=None, constants=None, **ainic) -> list:
    """An :class:`Ainic` for each algorithm (those calibrated, by default) and codec; ``ainic``: its other
    fields (link_gbps, width, clock_mhz, ...)."""
    calibrated = constants or cm.load()
    return [Ainic(c, algorithm=algorithm, constants=constants, **ainic) for algorithm in algorithms or cm.ALGORITHMS
            if f"{algorithm}/allreduce" in calibrated for c in codecs]


def speedup_table(layers, nodes, host, backends) -> dict:
    """{overlap: {backend name: {"iteration_ms": [...], "speedup": [...]}}}: each backend's iteration time of
    ``layers`` and its speedup over ``host`` (the hosts' ring, first in each table) at each of ``nodes``; None
    where the NIC cannot run that many ranks."""
    def total(backend, n, overlap):
        try:
            return iteration_ns(layers, n, backend, overlap)["total_ns"]
        except ValueError:          # more ranks than the NIC (or a switch job) holds
            return None
    out = {}
    for overlap in OVERLAPS:
        base = [total(host, n, overlap) for n in nodes]
        table = {host.name: {"iteration_ms": [b / 1e6 for b in base], "speedup": [1.0] * len(base)}}
        for b in backends:
            t = [total(b, n, overlap) for n in nodes]
            table[b.name] = {"iteration_ms": [None if x is None else x / 1e6 for x in t],
                             "speedup": [None if x is None else h / x for h, x in zip(base, t)]}
        out[overlap] = table
    return out


__all__ = ["Ainic", "HostRing", "Layer", "OVERLAPS", "SCALINGS", "ainic_backends", "from_libra", "iteration_ns",
           "mlp", "speedup_table"]
