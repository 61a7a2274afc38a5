"""Simulation top: the NIC with a host memory model on its AXI4 port (``hdl/sim/``)."""

from pathlib import Path

from amaranth import ClockSignal, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract import regmap as rm
from hdl.host.axi import AxiLiteSignature, AxiSignature
from hdl.nic.nic import nic_signature
from hdl.sim.memory_ports import MEMORY_CONFIG, MEMORY_STATS
from hdl.stream.axis import check_width

SIM_DIR = Path(__file__).resolve().parent
MEMORY_SOURCE = SIM_DIR / "ainic_host_memory.v"


def memory_members(prefix: str = "mem_") -> dict:
    """Top-level ports that expose one host memory's configuration, backdoor and statistics."""
    members = {f"{prefix}{k}": In(w) for k, w in MEMORY_CONFIG.items()}
    members.update({f"{prefix}{k}": Out(w) for k, w in MEMORY_STATS.items()})
    return members


def add_host_memory(m, name, axi, top, prefix, width, addr_bits, load_file="hostmem_load.bin",
                    dump_file="hostmem_dump.bin", registered=False, bus_rst=0):
    """Instantiate ``ainic_host_memory`` as the slave of AXI4 master ``axi`` (an interface object), with its
    configuration and statistics on ``top``'s ``<prefix>*`` ports (see :func:`memory_members`). With
    ``registered``, the configuration and backdoor inputs pass through a flip-flop (one cycle later).
    ``bus_rst`` resets the memory's AXI port alone (with a reset of its master alone)."""
    ports = {}
    for member, desc in axi.signature.members.items():
        # the memory is the slave: the NIC's outputs are its inputs
        ports[("i_" if desc.flow == Out else "o_") + f"s_axi_{member}"] = getattr(axi, member)
    for k in MEMORY_CONFIG:
        port = getattr(top, f"{prefix}{k}")
        if registered:
            reg = Signal.like(port, name=f"{prefix}{k}_r")
            m.d.sync += reg.eq(port)
            port = reg
        ports[f"i_{k}"] = port
    for k in MEMORY_STATS:
        ports[f"o_{k}"] = getattr(top, f"{prefix}{k}")
    m.submodules[name] = Instance(
        "ainic_host_memory",
        p_DATA_WIDTH=width, p_ADDR_BITS=addr_bits, p_LOAD_FILE=load_file, p_DUMP_FILE=dump_file,
        i_clk=ClockSignal(), i_rst=ResetSignal(), i_bus_rst=bus_rst, **ports)


class HostBench(wiring.Component):
    """:class:`Nic` (network ports idle) + ``ainic_host_memory`` (2**addr_bits bytes). The memory's
    configuration, backdoor and statistics are top-level ports (``mem_*``) the testbench drives and reads.

    The NIC is the exported one, instantiated by module name (``nic_module``, ``ainic_nic_w<W>``), as the
    cluster bench instantiates it: the bench's own Verilog depends on the bench alone, and the NIC is
    elaborated once for every bench and the integration top (it was elaborated again inside each bench).

    What the testbench watches inside is brought out as outputs too, so that the simulator need not keep
    internal signals visible (Verilator then optimises across the whole NIC): ``probe_m_axi__<name>``, every
    signal of the NIC's AXI4 port."""

    def __init__(self, width: int = 512, addr_bits: int = 24, nic_module: str = None):
        self.width = check_width(width, self)
        self.addr_bits = addr_bits
        self.nic_module = nic_module or f"ainic_nic_w{width}"
        members = {"s_axil": In(AxiLiteSignature((rm.SPAN - 1).bit_length())), "irq": Out(1)}
        members.update(memory_members())
        members.update({f"probe_m_axi__{name}": Out(desc.shape) for name, desc in AxiSignature(width).members.items()})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        sig = nic_signature(self.width)
        nic = sig.create(path=("nic",))
        ports = {("o_" if member.flow == Out else "i_") + "__".join(map(str, path)): value
                 for path, member, value in sig.flatten(nic)}
        m.submodules.nic = Instance(self.nic_module, i_clk=ClockSignal(), i_rst=ResetSignal(), **ports)
        wiring.connect(m, wiring.flipped(self.s_axil), nic.s_axil)
        m.d.comb += [self.irq.eq(nic.irq), nic.m_axis_tx.tready.eq(1)]
        add_host_memory(m, "memory", nic.m_axi, self, "mem_", self.width, self.addr_bits)
        m.d.comb += [getattr(self, f"probe_m_axi__{name}").eq(getattr(nic.m_axi, name))
                     for name in nic.m_axi.signature.members]
        return m
