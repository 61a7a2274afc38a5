"""The tops, by name: what ``make verilog`` exports and what the testbenches build.

:data:`TOPS` are synthesizable (exported at every width of ``contract.limits.WIDTHS``); :data:`SIM_TOPS`
instantiate the simulation-only models of ``hdl/sim/`` and are built by the testbenches, never exported
for synthesis. :func:`export` writes one top's Verilog (cached, :mod:`hdl.flow.export`).
"""

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from contract.build import FULL, SMALL, NicBuild
from contract.credits import TIGHT
from contract.limits import DEFAULT_WIDTH, MAX_CLUSTER_NODES, WIDTHS
from hdl.arith.reduction_unit import ReductionUnit
from hdl.codec.compressor import Compressor
from hdl.codec.decompressor import Decompressor
from hdl.flow import export as _export
from hdl.host.dma_engine import DmaEngine
from hdl.host.register_block import RegisterBlock
from hdl.nic.nic import Nic
from hdl.packet.packet_loopback import PacketLoopback
from hdl.packet.rx_parser import RxParser
from hdl.packet.tx_builder import TxBuilder
from hdl.sim.cluster_bench import CAPTURE_SOURCE, TRACE_SOURCE, ClusterBench
from hdl.sim.host_bench import MEMORY_SOURCE, HostBench

EXPORT_WIDTHS = WIDTHS
#: the tops that are a whole NIC, by the build they hold (contract/build.py; ``nic_small``: none/fp16/bfp8, an
#: 8-entry peer table, packed whole by make report)
NIC_TOPS = {"nic": FULL, "nic_small": SMALL}


@dataclass(frozen=True)
class Top:
    """A top: ``factory(width)`` builds it. ``sources(width)``: other Verilog files a simulation of it
    needs; ``instanced(width)``: modules of those files it instantiates several times (a simulator compiles
    each once rather than inlining every copy)."""
    factory: object
    sources: object = field(default=lambda width: ())
    instanced: object = field(default=lambda width: ())
    #: the Python module its export's cache key starts from (default: where the factory is defined)
    module: str = None

    def __post_init__(self):
        if self.module is None:
            f = self.factory
            object.__setattr__(self, "module", (f.func if isinstance(f, partial) else f).__module__)


TOPS = {name: Top(factory) for name, factory in {
    "reduction_unit": ReductionUnit,
    "compressor": Compressor,
    "decompressor": Decompressor,
    "rx_parser": RxParser,
    "tx_builder": TxBuilder,
    "packet_loopback": PacketLoopback,
    "register_block": RegisterBlock,
    "dma_engine": DmaEngine,
    **{name: partial(Nic, build=build) for name, build in NIC_TOPS.items()},
}.items()}


def module_name(top: str, width: int) -> str:
    return f"ainic_{top}_w{width}"


def _cluster(nodes: int, width: int, aggregation: bool = False, nic: str = "nic", leaves: int = 0,
             switch_speedup: int = 1) -> ClusterBench:
    return ClusterBench(nodes, width, nic_module=module_name(nic, width), aggregation=aggregation, leaves=leaves,
                        switch_speedup=switch_speedup)


def _cluster_sources(width: int, nic: str = "nic") -> tuple:
    return (MEMORY_SOURCE, CAPTURE_SOURCE, TRACE_SOURCE, export(nic, width))


def _host_bench(width: int, nic: str = "nic") -> HostBench:
    return HostBench(width, nic_module=module_name(nic, width))


SIM_TOPS = {
    # the bench instantiates the exported NIC by module name, as the cluster benches do
    "host_bench": Top(HostBench, sources=lambda width: (MEMORY_SOURCE, export("nic", width))),
    # the same around the small build (contract/build.py)
    "host_bench_small": Top(partial(_host_bench, nic="nic_small"),
                            sources=lambda width: (MEMORY_SOURCE, export("nic_small", width)),
                            module=HostBench.__module__),
    # the bench instantiates the exported NIC by module name: its own Verilog depends on the bench alone
    **{f"cluster_n{n}": Top(partial(_cluster, n), _cluster_sources, lambda width: (module_name("nic", width),),
                            module=ClusterBench.__module__)
       for n in range(2, MAX_CLUSTER_NODES + 1)},
    # the same with the aggregation switch at the centre and fault injection on every link
    **{f"switch_cluster_n{n}": Top(partial(_cluster, n, aggregation=True), _cluster_sources,
                                   lambda width: (module_name("nic", width),), module=ClusterBench.__module__)
       for n in range(2, MAX_CLUSTER_NODES + 1)},
    # the same with the switch built at twice the NICs' width behind width converters (a switch's speedup)
    **{f"switch_cluster_n{n}_x2": Top(partial(_cluster, n, aggregation=True, switch_speedup=2), _cluster_sources,
                                      lambda width: (module_name("nic", width),), module=ClusterBench.__module__)
       for n in range(2, MAX_CLUSTER_NODES + 1)},
    # the same as a two-level tree: the NICs on leaf switches, the leaves on a spine (docs/in_network.md); "_x2":
    # every switch at twice the NICs' width (and the trunks with them)
    **{f"tree_cluster_n{n}_l{k}" + ("_x2" if s > 1 else ""):
       Top(partial(_cluster, n, aggregation=True, leaves=k, switch_speedup=s), _cluster_sources,
           lambda width: (module_name("nic", width),), module=ClusterBench.__module__)
       for n in range(2, MAX_CLUSTER_NODES + 1) for k in range(2, n + 1) for s in (1, 2)},
    # a NIC whose receive side is tiny (contract.credits.TIGHT), and 6 of them in a ring (credits bind with loss)
    "nic_tight": Top(partial(Nic, build=NicBuild("tight", credits=TIGHT))),
    "tight_cluster_n6": Top(partial(_cluster, 6, nic="nic_tight"), partial(_cluster_sources, nic="nic_tight"),
                            lambda width: (module_name("nic_tight", width),), module=ClusterBench.__module__),
}


def get(top: str) -> Top:
    try:
        return TOPS.get(top) or SIM_TOPS[top]
    except KeyError:
        raise ValueError(f"unknown top {top!r}; known: {', '.join([*TOPS, *SIM_TOPS])}") from None


def export(top: str, width: int, out_dir: Path = None, fmt: str = "verilog") -> Path:
    """Write (unless current) and return the Verilog of ``top`` at ``width``: ``ainic_<top>_w<width>.v``
    (``fmt="rtlil"``: Yosys' RTLIL of the same netlist, ``.il``)."""
    t = get(top)
    return _export.export(module_name(top, width), t.factory, width, t.module, out_dir, fmt)


__all__ = ["DEFAULT_WIDTH", "EXPORT_WIDTHS", "NIC_TOPS", "SIM_TOPS", "TOPS", "Top", "export", "get", "module_name"]
