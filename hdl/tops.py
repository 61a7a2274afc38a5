"""The synthesizable tops, by name: what ``make verilog`` exports and what the testbenches build."""

from .cluster_bench import MAX_NODES, ClusterTop
from .compressor import Compressor
from .csr import RegisterBlock
from .decompressor import Decompressor
from .dma_engine import DmaEngine
from .host_bench import HostBench
from .reduction_unit import ReductionUnit
from .nic import Nic
from .packet_loopback import PacketLoopback
from .rx_parser import RxParser
from .tx_builder import TxBuilder

#: name -> factory(width) -> wiring.Component
TOPS = {
    "reduction_unit": ReductionUnit,
    "compressor": Compressor,
    "decompressor": Decompressor,
    "rx_parser": RxParser,
    "tx_builder": TxBuilder,
    "packet_loopback": PacketLoopback,
    "register_block": RegisterBlock,
    "dma_engine": DmaEngine,
    "nic": Nic,
}

#: simulation-only tops (they instantiate the models in hdl/sim/); built by the testbenches, never exported
SIM_TOPS = {
    "host_bench": HostBench,
    **{f"cluster_n{n}": ClusterTop(n) for n in range(2, MAX_NODES + 1)},
}

#: widths every top is exported and tested at (default first)
EXPORT_WIDTHS = (512, 256, 128, 64)
DEFAULT_WIDTH = 512


def module_name(top: str, width: int) -> str:
    return f"ainic_{top}_w{width}"
