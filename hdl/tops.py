"""The synthesizable tops, by name: what ``make verilog`` exports and what the testbenches build."""

from .compressor import Compressor
from .csr import RegisterBlock
from .decompressor import Decompressor
from .reduction_unit import ReductionUnit
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
}

#: widths every top is exported and tested at (default first)
EXPORT_WIDTHS = (512, 256, 128, 64)
DEFAULT_WIDTH = 512


def module_name(top: str, width: int) -> str:
    return f"ainic_{top}_w{width}"
