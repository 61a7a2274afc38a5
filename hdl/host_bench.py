"""Simulation top: the host interface with a host memory model on its AXI4 port (``hdl/sim/``)."""

from pathlib import Path

from amaranth import ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from host_driver import regmap as rm
from .axis import check_width
from .csr import AxiLiteSignature
from .host_interface import HostInterface

SIM_DIR = Path(__file__).resolve().parent / "sim"
MEMORY_CONFIG = {"cfg_latency": 16, "cfg_rate": 16, "cfg_stall": 8, "cfg_seed": 32, "cfg_err_lo": 64,
                 "cfg_err_hi": 64, "cfg_err_resp": 2, "bd_load": 1, "bd_dump": 1, "bd_lo": 32, "bd_hi": 32}
MEMORY_STATS = {"stat_cycle": 64, "stat_rd_beats": 32, "stat_wr_beats": 32, "stat_rd_first": 64,
                "stat_rd_last": 64, "stat_wr_first": 64, "stat_wr_last": 64, "stat_violations": 32}


class HostBench(wiring.Component):
    """:class:`HostInterface` + ``ainic_host_memory`` (2**addr_bits bytes). The memory's configuration,
    backdoor and statistics are top-level ports (``mem_*``) the testbench drives and reads."""

    sim_sources = (SIM_DIR / "ainic_host_memory.v",)

    def __init__(self, width: int = 512, addr_bits: int = 24):
        self.width = check_width(width, self)
        self.addr_bits = addr_bits
        members = {"s_axil": In(AxiLiteSignature((rm.SPAN - 1).bit_length())), "irq": Out(1)}
        members.update({f"mem_{k}": In(w) for k, w in MEMORY_CONFIG.items()})
        members.update({f"mem_{k}": Out(w) for k, w in MEMORY_STATS.items()})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.nic = nic = HostInterface(self.width)
        wiring.connect(m, wiring.flipped(self.s_axil), nic.s_axil)
        m.d.comb += self.irq.eq(nic.irq)
        ports = {}
        for name in nic.m_axi.signature.members:
            sig = getattr(nic.m_axi, name)
            flow = nic.m_axi.signature.members[name].flow
            # the memory is the slave: the NIC's outputs are its inputs
            ports[("i_" if flow == wiring.Out else "o_") + f"s_axi_{name}"] = sig
        for k in MEMORY_CONFIG:
            ports[f"i_{k}"] = getattr(self, f"mem_{k}")
        for k in MEMORY_STATS:
            ports[f"o_{k}"] = getattr(self, f"mem_{k}")
        m.submodules.memory = Instance(
            "ainic_host_memory",
            p_DATA_WIDTH=self.width, p_ADDR_BITS=self.addr_bits,
            i_clk=ClockSignal(), i_rst=ResetSignal(),
            **ports)
        return m
