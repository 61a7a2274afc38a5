"""Build and scale limits shared by the RTL, the driver and the harness."""

#: datapath widths (bits) every top is built, exported and simulated at; the default first
WIDTHS = (512, 256, 128, 64)
#: the NIC's wide configuration (docs/integration.md, "The wide datapath"): its datapath moves 3.2x an
#: 80 Gb/s link at 250 MHz (4x at 312.5 MHz). The NIC, its blocks and both clusters (ring, switch) are built at
#: it; the exported Verilog (``make verilog``) holds the WIDTHS only.
WIDE_WIDTH = 1024
#: the widths a NIC can be built at
NIC_WIDTHS = WIDTHS + (WIDE_WIDTH,)
DEFAULT_WIDTH = 512
#: ranks a NIC's peer table holds (WORLD_SIZE 1 .. MAX_RANKS)
MAX_RANKS = 64
#: NICs the simulated cluster bench holds (2 .. MAX_CLUSTER_NODES; a job may use fewer)
MAX_CLUSTER_NODES = 16
#: elements per descriptor (256 MiB of fp32)
MAX_COUNT = 1 << 26
