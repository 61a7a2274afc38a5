"""Simulation top: N NICs, each with its host memory, through link models and an Ethernet switch (the ring),
or an aggregation switch with fault injection on every link (in-network aggregation)."""

from amaranth import ClockSignal, Instance, Module, ResetSignal, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from contract import regmap as rm
from contract.in_network import MAX_NIC_WINDOW, MIN_SWITCH_PORTS, tree_groups
from contract.protocol import FRAME_HEADER_BYTES
from contract.limits import MAX_CLUSTER_NODES
from hdl.host.axi import AxiLiteSignature
from hdl.nic.nic import nic_signature
from hdl.sim.host_bench import SIM_DIR, add_host_memory, memory_members
from hdl.sim.fault_injector import FaultInjector
from hdl.sim.link_model import LinkModel
from hdl.stream.axis import check_width
from hdl.stream.register_slice import AxiSlice, registered_reset
from hdl.stream.width_converter import StreamDownsizer, StreamUpsizer
from hdl.switch.aggregation_switch import AggregationSwitch, stats_layout
from hdl.switch.eth_switch import EthernetSwitch
from hdl.switch.job_table import POOL_BITS, JobEntry

#: the aggregation bench's switch: jobs it holds, its pool, the largest packet it takes
SWITCH_JOBS, SWITCH_POOL, SWITCH_MAX_PACKET = 4, 128, 256

CAPTURE_SOURCE = SIM_DIR / "ainic_frame_capture.v"
TRACE_SOURCE = SIM_DIR / "ainic_stage_trace.v"


class ClusterBench(wiring.Component):
    """``nodes`` × (``nic_module`` + ``ainic_host_memory``), NIC i's ``m_axis_tx`` → uplink i →
    switch port i → downlink i → NIC i's ``s_axis_rx``; every link is a :class:`LinkModel` with the
    common ``link_latency`` and ``link_rate``, the switch forwards by ``n<i>_mac`` (static table).

    Ports per node i: ``n<i>_s_axil`` (registers), ``n<i>_irq``, ``n<i>_mem_*`` (host memory model, backdoor
    files ``hostmem<i>_load.bin`` / ``hostmem<i>_dump.bin`` in the working directory), ``n<i>_mac``,
    ``n<i>_up_frames`` / ``n<i>_up_bytes`` (what NIC i sent), ``n<i>_rx_stalls`` (cycles NIC i held its
    receive port back while a beat waited: a real MAC would have dropped it), ``capture`` (while high, every
    frame NIC i sends is written to ``capture<i>.txt``: ``ainic_frame_capture``), ``stage_trace`` (while high, NIC i's
    ``dbg_stages`` is recorded in ``stages<i>.txt``: ``ainic_stage_trace``). The NIC is instantiated by
    module name (``nic_module``, e.g. ``ainic_nic_w512``) from its exported Verilog; the fabric is Amaranth.

    Every top-level input, the reset included, goes through a flip-flop (the AXI4-Lite ports through an
    :class:`~hdl.stream.register_slice.AxiSlice`) before it reaches a NIC, a memory, a link or the switch. Verilator evaluates
    the logic that depends combinationally on the top's inputs twice per clock cycle; with registered
    inputs that is almost none of it (4x faster at N = 4, W = 512).

    Every link ends in a :class:`FaultInjector` (at the switch's ingress for uplink i, at NIC i's receive
    port for downlink i; thresholds ``fault_drop`` / ``fault_dup`` / ``fault_corrupt`` for all, seeds
    ``n<i>_up_seed`` / ``n<i>_down_seed``, counters ``n<i>_up_faults`` / ``n<i>_down_faults``: dropped,
    duplicated, corrupted). ``n<i>_link_down`` drops every frame on both of NIC i's links (a dead peer);
    ``n<i>_reset`` resets NIC i alone and its host memory's AXI port (AXI resets master and slave together;
    the memory keeps its contents).

    With ``aggregation``, the centre is an :class:`AggregationSwitch` (configured through the ``sw_*``
    ports, its counters on ``sw_stats``, port i's address ``n<i>_mac`` / ``n<i>_ip``).

    With ``leaves`` = K as well, a two-level tree (docs/in_network.md, "Two levels"): NIC i is on port p of
    leaf switch k when it is the p-th rank of ``tree_groups(nodes, K)[k]``; leaf k's last port is its trunk
    to the spine's port k, a link each way with fault injection like the NICs' (``t<k>_up_seed`` /
    ``t<k>_down_seed``, counters ``t<k>_up_faults`` / ``t<k>_down_faults``). The ``sw_*`` ports are the
    spine's; leaf k has ``leaf<k>_mac`` / ``_ip`` / ``_jobs`` / ``_clear*`` and ``leaf<k>_stats``. Its
    trunk port's address is the spine's, the spine's port k's is leaf k's.

    With ``switch_speedup`` = 2 (aggregation), every switch is built at 2W behind width converters
    (:mod:`hdl.stream.width_converter`: each uplink's beats paired into the switch's, each of its output
    beats halved onto the downlink): it processes a frame in half the cycles its links take to carry it,
    as a switch chip's core runs faster than its ports (docs/in_network.md). A tree's trunks are 2W wide
    (switch to switch, no converter), at the links' rate.
    """

    def __init__(self, nodes: int, width: int = 512, nic_module: str = "ainic_nic_w512", addr_bits: int = 24,
                 link_depth: int = 1024, aggregation: bool = False, leaves: int = 0, switch_speedup: int = 1):
        self.nic_module = nic_module
        if not 2 <= nodes <= MAX_CLUSTER_NODES:
            self._MustUse__silence = True
            raise ValueError(f"nodes must be in 2 .. {MAX_CLUSTER_NODES}, got {nodes!r}")
        self.nodes = nodes
        self.width = check_width(width, self)
        self.addr_bits = addr_bits
        self.link_depth = link_depth
        self.aggregation = aggregation
        if leaves and not aggregation:
            self._MustUse__silence = True
            raise ValueError("a tree of switches (leaves) needs aggregation=True")
        try:
            self.groups = tree_groups(nodes, leaves) if leaves else None
        except ValueError:
            self._MustUse__silence = True
            raise
        self.leaves = leaves
        if switch_speedup not in (1, 2) or (switch_speedup == 2 and not aggregation):
            self._MustUse__silence = True
            raise ValueError(f"switch_speedup is 1, or 2 for aggregation switches, got {switch_speedup!r}")
        self.switch_speedup = switch_speedup
        if switch_speedup > 1:
            check_width(width * switch_speedup, self, "the switch's width")
        members = {"link_latency": In(16), "link_rate": In(16), "sw_unknown": Out(32), "capture": In(1), "stage_trace": In(1),
                   "fault_drop": In(16), "fault_dup": In(16), "fault_corrupt": In(16)}
        if aggregation:
            members.update({
                "sw_mac": In(48), "sw_ip": In(32), "sw_jobs": In(data.ArrayLayout(JobEntry, SWITCH_JOBS)),
                "sw_clear": In(1), "sw_clear_base": In(POOL_BITS), "sw_clear_count": In(POOL_BITS + 1),
                "sw_clearing": Out(1),
                "sw_stats": Out(stats_layout(max(leaves, MIN_SWITCH_PORTS) if leaves else nodes, SWITCH_JOBS)),
            })
            for k, g in enumerate(self.groups or ()):
                members.update({
                    f"leaf{k}_mac": In(48), f"leaf{k}_ip": In(32),
                    f"leaf{k}_jobs": In(data.ArrayLayout(JobEntry, SWITCH_JOBS)),
                    f"leaf{k}_clear": In(1), f"leaf{k}_clear_base": In(POOL_BITS),
                    f"leaf{k}_clear_count": In(POOL_BITS + 1), f"leaf{k}_clearing": Out(1),
                    f"leaf{k}_stats": Out(stats_layout(len(g) + 1, SWITCH_JOBS)),
                    f"t{k}_up_seed": In(32, init=1), f"t{k}_down_seed": In(32, init=1),
                    f"t{k}_up_faults": Out(data.ArrayLayout(32, 3)), f"t{k}_down_faults": Out(data.ArrayLayout(32, 3)),
                })
            for i in range(nodes):
                members[f"n{i}_ip"] = In(32)
        for i in range(nodes):
            members.update({f"n{i}_up_seed": In(32, init=1), f"n{i}_down_seed": In(32, init=1),
                            f"n{i}_up_faults": Out(data.ArrayLayout(32, 3)),
                            f"n{i}_down_faults": Out(data.ArrayLayout(32, 3)),
                            f"n{i}_link_down": In(1), f"n{i}_reset": In(1)})
        for i in range(nodes):
            members[f"n{i}_s_axil"] = In(AxiLiteSignature((rm.SPAN - 1).bit_length()))
            members[f"n{i}_irq"] = Out(1)
            members[f"n{i}_mac"] = In(48)
            members[f"n{i}_up_frames"] = Out(32)
            members[f"n{i}_up_bytes"] = Out(48)
            members[f"n{i}_down_frames"] = Out(32)
            members[f"n{i}_down_bytes"] = Out(48)
            members[f"n{i}_rx_stalls"] = Out(32)
            members.update(memory_members(f"n{i}_mem_"))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        N, W = self.nodes, self.width
        def registered(port):
            value = port.as_value() if isinstance(port, data.View) else port
            reg = Signal.like(value, name=f"{value.name}_r")
            m.d.sync += reg.eq(value)
            return reg
        def aggregation_switch(name, ports, prefix, stats):
            m.submodules[name] = agg = AggregationSwitch(ports, W * self.switch_speedup, pool_slots=SWITCH_POOL,
                                                         max_jobs=SWITCH_JOBS,
                                                         max_packet=SWITCH_MAX_PACKET)
            cfg = {f: registered(getattr(self, f"{prefix}_{f}")) for f in ("mac", "ip", "jobs", "clear",
                                                                           "clear_base", "clear_count")}
            m.d.comb += [stats.eq(agg.stats), getattr(self, f"{prefix}_clearing").eq(agg.clearing),
                         agg.cfg_mac.eq(cfg["mac"]), agg.cfg_ip.eq(cfg["ip"]), agg.cfg_jobs.eq(cfg["jobs"]),
                         agg.cfg_clear.eq(cfg["clear"]), agg.cfg_clear_base.eq(cfg["clear_base"]),
                         agg.cfg_clear_count.eq(cfg["clear_count"])]
            return agg, cfg
        # where each NIC is: (switch, port)
        if self.aggregation and self.groups:
            sw, spine_cfg = aggregation_switch("switch", max(self.leaves, MIN_SWITCH_PORTS), "sw", self.sw_stats)
            m.d.comb += self.sw_unknown.eq(sw.stats.unknown_mac)
            leaf_sw, attach = [], [None] * N
            for k, g in enumerate(self.groups):
                leaf, cfg = aggregation_switch(f"leaf{k}", len(g) + 1, f"leaf{k}", getattr(self, f"leaf{k}_stats"))
                leaf_sw.append(leaf)
                for p, r in enumerate(g):
                    attach[r] = (leaf, p)
                # the trunk: leaf k's last port to the spine's port k, each end's address the other's
                m.d.comb += [leaf.cfg_port_mac[len(g)].eq(spine_cfg["mac"]), leaf.cfg_port_ip[len(g)].eq(spine_cfg["ip"]),
                             sw.cfg_port_mac[k].eq(cfg["mac"]), sw.cfg_port_ip[k].eq(cfg["ip"])]
        elif self.aggregation:
            sw, _ = aggregation_switch("switch", N, "sw", self.sw_stats)
            m.d.comb += self.sw_unknown.eq(sw.stats.unknown_mac)
            attach = [(sw, i) for i in range(N)]
        else:
            m.submodules.switch = sw = EthernetSwitch(N, W, user_width=1)   # a corrupted frame keeps its mark
            m.d.comb += self.sw_unknown.eq(sw.stat_unknown)
            attach = [(sw, i) for i in range(N)]
        faults = [registered(self.fault_drop), registered(self.fault_dup), registered(self.fault_corrupt)]
        link_latency, link_rate = registered(self.link_latency), registered(self.link_rate)
        capture, trace = registered(self.capture), registered(self.stage_trace)
        sig = nic_signature(W)
        for i in range(N):
            nic = sig.create(path=(f"nic{i}",))
            ports = {}
            for path, member, value in sig.flatten(nic):
                ports[("o_" if member.flow == Out else "i_") + "__".join(map(str, path))] = value
            nic_reset = registered(getattr(self, f"n{i}_reset"))
            m.submodules[f"nic{i}"] = Instance(self.nic_module, i_clk=ClockSignal(), i_rst=ResetSignal() | nic_reset,
                                               **ports)
            m.submodules[f"axil{i}"] = axil = AxiSlice(AxiLiteSignature((rm.SPAN - 1).bit_length()))
            wiring.connect(m, wiring.flipped(getattr(self, f"n{i}_s_axil")), axil.s)
            wiring.connect(m, axil.m, nic.s_axil)
            m.d.comb += getattr(self, f"n{i}_irq").eq(nic.irq)
            add_host_memory(m, f"memory{i}", nic.m_axi, self, f"n{i}_mem_", W, self.addr_bits,
                            f"hostmem{i}_load.bin", f"hostmem{i}_dump.bin", registered=True, bus_rst=nic_reset)
            m.submodules[f"up{i}"] = up = LinkModel(W, self.link_depth)
            m.submodules[f"down{i}"] = down = LinkModel(W, self.link_depth, user_width=1)
            for link in (up, down):
                m.d.comb += [link.cfg_latency.eq(link_latency), link.cfg_rate.eq(link_rate)]
            wiring.connect(m, nic.m_axis_tx, up.s_axis)
            tx = nic.m_axis_tx
            m.submodules[f"capture{i}"] = Instance(
                "ainic_frame_capture", p_DATA_WIDTH=W, p_FILE=f"capture{i}.txt", i_clk=ClockSignal(),
                i_rst=ResetSignal(), i_enable=capture, i_tdata=tx.tdata, i_tkeep=tx.tkeep, i_tlast=tx.tlast,
                i_tvalid=tx.tvalid, i_tready=tx.tready)
            m.submodules[f"trace{i}"] = Instance(
                "ainic_stage_trace", p_WIDTH=len(nic.dbg_stages), p_FILE=f"stages{i}.txt", i_clk=ClockSignal(),
                i_rst=ResetSignal(), i_enable=trace, i_value=nic.dbg_stages)
            rx = nic.s_axis_rx
            mac = registered(getattr(self, f"n{i}_mac"))
            # every link ends in a fault injector: uplink i at switch port i, downlink i at NIC i
            link_down = registered(getattr(self, f"n{i}_link_down"))
            injectors = []
            for name, link, seed in (("up", up, f"n{i}_up_seed"), ("down", down, f"n{i}_down_seed")):
                m.submodules[f"{name}_faults{i}"] = inj = FaultInjector(W)
                src = link.m_axis
                m.d.comb += [inj.s_axis.tdata.eq(src.tdata), inj.s_axis.tkeep.eq(src.tkeep),
                             inj.s_axis.tlast.eq(src.tlast),
                             inj.s_axis.tuser.eq(src.tuser if name == "down" else 0),
                             inj.s_axis.tvalid.eq(src.tvalid), src.tready.eq(inj.s_axis.tready),
                             inj.cfg_seed.eq(registered(getattr(self, seed))), inj.cfg_drop.eq(faults[0]),
                             inj.cfg_dup.eq(faults[1]), inj.cfg_corrupt.eq(faults[2]), inj.cfg_drop_all.eq(link_down)]
                counters = getattr(self, f"n{i}_{name}_faults")
                m.d.comb += [counters[0].eq(inj.stat_dropped), counters[1].eq(inj.stat_duplicated),
                             counters[2].eq(inj.stat_corrupted)]
                injectors.append(inj)
            at, port = attach[i]
            o, sw_in = getattr(at, f"m_axis_{port}"), getattr(at, f"s_axis_{port}")
            if self.switch_speedup > 1:         # the switch's port at 2W: W-bit beats paired in, halved out
                m.submodules[f"up_wide{i}"] = wide = StreamUpsizer(W, user_width=1)
                m.submodules[f"down_narrow{i}"] = narrow = StreamDownsizer(W, user_width=1)
                wiring.connect(m, wide.m_axis, sw_in)
                wiring.connect(m, o, narrow.s_axis)
                o, sw_in = narrow.m_axis, wide.s_axis
            m.d.comb += [down.s_axis.tdata.eq(o.tdata), down.s_axis.tkeep.eq(o.tkeep),
                         down.s_axis.tlast.eq(o.tlast), down.s_axis.tvalid.eq(o.tvalid),
                         down.s_axis.tuser.eq(o.tuser),
                         o.tready.eq(down.s_axis.tready)]
            wiring.connect(m, injectors[0].m_axis, sw_in)
            if self.aggregation:
                m.d.comb += [at.cfg_port_mac[port].eq(mac),
                             at.cfg_port_ip[port].eq(registered(getattr(self, f"n{i}_ip")))]
            else:
                m.d.comb += sw.cfg_mac[i].eq(mac)
            d = injectors[1].m_axis
            m.d.comb += rx.tuser.eq(d.tuser)
            m.d.comb += [rx.tdata.eq(d.tdata), rx.tkeep.eq(d.tkeep), rx.tlast.eq(d.tlast),
                         rx.tvalid.eq(d.tvalid), d.tready.eq(rx.tready),
                         getattr(self, f"n{i}_up_frames").eq(up.stat_frames),
                         getattr(self, f"n{i}_up_bytes").eq(up.stat_bytes),
                         getattr(self, f"n{i}_down_frames").eq(down.stat_frames),
                         getattr(self, f"n{i}_down_bytes").eq(down.stat_bytes)]
            # cycles in which NIC i refused a beat its downlink offered: a MAC cannot wait, so with
            # receive credits this must stay 0
            stalls = getattr(self, f"n{i}_rx_stalls")
            with m.If(d.tvalid & ~rx.tready):
                m.d.sync += stalls.eq(stalls + 1)
        # the trunks of a tree: a link each way with fault injection, leaf k's last port <-> the spine's port k.
        # A leaf's one result bus carries a partial up and the spine's result down for every round, so its
        # partials and the spine's results form a cycle (leaf bus -> trunk up -> spine -> trunk down -> leaf
        # engine -> leaf bus): a trunk that backpressures the leaf's bus while the spine waits on the leaf
        # locks both (measured: 8 NICs, W = 64, 256-element packets, 32 slots, 1,024-beat trunks). A trunk
        # holds a whole window of the largest frames, so the leaf's bus never waits on it.
        TW = W * self.switch_speedup            # switch to switch: the switches' width
        frame_beats = -(-(FRAME_HEADER_BYTES + 4 * SWITCH_MAX_PACKET) // (TW // 8))
        trunk_depth = 1 << (MAX_NIC_WINDOW * frame_beats - 1).bit_length()
        for k, g in enumerate(self.groups or ()):
            ends = (("up", getattr(leaf_sw[k], f"m_axis_{len(g)}"), getattr(sw, f"s_axis_{k}")),
                    ("down", getattr(sw, f"m_axis_{k}"), getattr(leaf_sw[k], f"s_axis_{len(g)}")))
            for name, src, dst in ends:
                m.submodules[f"t{k}_{name}"] = link = LinkModel(TW, trunk_depth, user_width=1)
                m.d.comb += [link.cfg_latency.eq(link_latency), link.cfg_rate.eq(link_rate)]
                wiring.connect(m, src, link.s_axis)
                m.submodules[f"t{k}_{name}_faults"] = inj = FaultInjector(TW)
                wiring.connect(m, link.m_axis, inj.s_axis)
                m.d.comb += [inj.cfg_seed.eq(registered(getattr(self, f"t{k}_{name}_seed"))),
                             inj.cfg_drop.eq(faults[0]), inj.cfg_dup.eq(faults[1]), inj.cfg_corrupt.eq(faults[2])]
                counters = getattr(self, f"t{k}_{name}_faults")
                m.d.comb += [counters[0].eq(inj.stat_dropped), counters[1].eq(inj.stat_duplicated),
                             counters[2].eq(inj.stat_corrupted)]
                wiring.connect(m, inj.m_axis, dst)
        # the reset is a top-level input too: every flip-flop's next-state logic reads it, so all of it
        # would be input-combinational
        return registered_reset(m)

