"""Simulation top: N NICs, each with its host memory, in a ring through an Ethernet switch and link models."""

from amaranth import ClockDomain, ClockSignal, DomainRenamer, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract import regmap as rm
from contract.limits import MAX_CLUSTER_NODES
from hdl.host.axi import AxiLiteSignature
from hdl.host.axil_slice import AxiLiteSlice
from hdl.nic.nic import nic_signature
from hdl.switch.eth_switch import EthernetSwitch
from hdl.sim.host_bench import SIM_DIR, add_host_memory, memory_members
from hdl.sim.link_model import LinkModel
from hdl.stream.axis import check_width

CAPTURE_SOURCE = SIM_DIR / "ainic_frame_capture.v"


class ClusterBench(wiring.Component):
    """``nodes`` × (``nic_module`` + ``ainic_host_memory``), NIC i's ``m_axis_tx`` → uplink i →
    switch port i → downlink i → NIC i's ``s_axis_rx``; every link is a :class:`LinkModel` with the
    common ``link_latency`` and ``link_rate``, the switch forwards by ``n<i>_mac`` (static table).

    Ports per node i: ``n<i>_s_axil`` (registers), ``n<i>_irq``, ``n<i>_mem_*`` (host memory model, backdoor
    files ``hostmem<i>_load.bin`` / ``hostmem<i>_dump.hex`` in the working directory), ``n<i>_mac``,
    ``n<i>_up_frames`` / ``n<i>_up_bytes`` (what NIC i sent), ``n<i>_rx_stalls`` (cycles NIC i held its
    receive port back while a beat waited: a real MAC would have dropped it), ``capture`` (while high, every
    frame NIC i sends is written to ``capture<i>.txt``: ``ainic_frame_capture``). The NIC is instantiated by
    module name (``nic_module``, e.g. ``ainic_nic_w512``) from its exported Verilog; the fabric is Amaranth.

    Every top-level input, the reset included, goes through a flip-flop (the AXI4-Lite ports through an
    :class:`AxiLiteSlice`) before it reaches a NIC, a memory, a link or the switch. Verilator evaluates
    the logic that depends combinationally on the top's inputs twice per clock cycle; with registered
    inputs that is almost none of it (4x faster at N = 4, W = 512).
    """

    def __init__(self, nodes: int, width: int = 512, nic_module: str = "ainic_nic_w512", addr_bits: int = 24,
                 link_depth: int = 1024):
        self.nic_module = nic_module
        if not 2 <= nodes <= MAX_CLUSTER_NODES:
            self._MustUse__silence = True
            raise ValueError(f"nodes must be in 2 .. {MAX_CLUSTER_NODES}, got {nodes!r}")
        self.nodes = nodes
        self.width = check_width(width, self)
        self.addr_bits = addr_bits
        self.link_depth = link_depth
        members = {"link_latency": In(16), "link_rate": In(16), "sw_unknown": Out(32), "capture": In(1)}
        for i in range(nodes):
            members[f"n{i}_s_axil"] = In(AxiLiteSignature((rm.SPAN - 1).bit_length()))
            members[f"n{i}_irq"] = Out(1)
            members[f"n{i}_mac"] = In(48)
            members[f"n{i}_up_frames"] = Out(32)
            members[f"n{i}_up_bytes"] = Out(48)
            members[f"n{i}_rx_stalls"] = Out(32)
            members.update(memory_members(f"n{i}_mem_"))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        N, W = self.nodes, self.width
        m.submodules.switch = sw = EthernetSwitch(N, W)
        m.d.comb += self.sw_unknown.eq(sw.stat_unknown)

        def registered(port):
            reg = Signal.like(port, name=f"{port.name}_r")
            m.d.sync += reg.eq(port)
            return reg
        link_latency, link_rate = registered(self.link_latency), registered(self.link_rate)
        capture = registered(self.capture)
        sig = nic_signature(W)
        for i in range(N):
            nic = sig.create(path=(f"nic{i}",))
            ports = {}
            for path, member, value in sig.flatten(nic):
                ports[("o_" if member.flow == Out else "i_") + "__".join(map(str, path))] = value
            m.submodules[f"nic{i}"] = Instance(self.nic_module, i_clk=ClockSignal(), i_rst=ResetSignal(),
                                               **ports)
            m.submodules[f"axil{i}"] = axil = AxiLiteSlice((rm.SPAN - 1).bit_length())
            wiring.connect(m, wiring.flipped(getattr(self, f"n{i}_s_axil")), axil.s)
            wiring.connect(m, axil.m, nic.s_axil)
            m.d.comb += getattr(self, f"n{i}_irq").eq(nic.irq)
            add_host_memory(m, f"memory{i}", nic.m_axi, self, f"n{i}_mem_", W, self.addr_bits,
                            f"hostmem{i}_load.bin", f"hostmem{i}_dump.hex", registered=True)
            m.submodules[f"up{i}"] = up = LinkModel(W, self.link_depth)
            m.submodules[f"down{i}"] = down = LinkModel(W, self.link_depth)
            for link in (up, down):
                m.d.comb += [link.cfg_latency.eq(link_latency), link.cfg_rate.eq(link_rate)]
            wiring.connect(m, nic.m_axis_tx, up.s_axis)
            tx = nic.m_axis_tx
            m.submodules[f"capture{i}"] = Instance(
                "ainic_frame_capture", p_DATA_WIDTH=W, p_FILE=f"capture{i}.txt", i_clk=ClockSignal(),
                i_rst=ResetSignal(), i_enable=capture, i_tdata=tx.tdata, i_tkeep=tx.tkeep, i_tlast=tx.tlast,
                i_tvalid=tx.tvalid, i_tready=tx.tready)
            wiring.connect(m, up.m_axis, getattr(sw, f"s_axis_{i}"))
            wiring.connect(m, getattr(sw, f"m_axis_{i}"), down.s_axis)
            rx, d = nic.s_axis_rx, down.m_axis
            m.d.comb += [rx.tdata.eq(d.tdata), rx.tkeep.eq(d.tkeep), rx.tlast.eq(d.tlast), rx.tuser.eq(0),
                         rx.tvalid.eq(d.tvalid), d.tready.eq(rx.tready),
                         sw.cfg_mac[i].eq(registered(getattr(self, f"n{i}_mac"))),
                         getattr(self, f"n{i}_up_frames").eq(up.stat_frames),
                         getattr(self, f"n{i}_up_bytes").eq(up.stat_bytes)]
            # cycles in which NIC i refused a beat its downlink offered: a MAC cannot wait, so with
            # receive credits this must stay 0
            stalls = getattr(self, f"n{i}_rx_stalls")
            with m.If(d.tvalid & ~rx.tready):
                m.d.sync += stalls.eq(stalls + 1)
        # the reset is a top-level input too: every flip-flop's next-state logic reads it, so all of it
        # would be input-combinational. The bench runs in domain "core", whose reset is `rst` registered.
        top = Module()
        top.domains.core = core = ClockDomain("core", local=True)
        rst = Signal(reset_less=True)      # (a register with a reset would be held at 0 by it)
        top.d.sync += rst.eq(ResetSignal("sync"))
        top.d.comb += [core.clk.eq(ClockSignal("sync")), core.rst.eq(rst)]
        top.submodules.bench = DomainRenamer("core")(m)
        return top

