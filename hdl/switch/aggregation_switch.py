"""The in-network aggregation switch: N ports, forwarding by MAC, and K aggregation engines that sum the
workers' packets exactly and send the results back (docs/in_network.md)."""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import AggDrop, DropReason
from contract.in_network import MAX_SWITCH_PORTS, MIN_SWITCH_PORTS
from contract.protocol import UDP_PORT
from hdl.stream.axis import AxiStreamSignature, check_width
from hdl.switch.aggregation_engine import AggregationEngine
from hdl.switch.contribution_check import MAX_JOBS, Contribution
from hdl.switch.eth_switch import EthernetSwitch
from hdl.switch.job_table import POOL_BITS, JobEntry
from hdl.switch.packet_crossbar import PacketCrossbar
from hdl.switch.result_bus import ResultBus
from hdl.switch.switch_egress import SwitchEgress
from hdl.switch.switch_ingress import AskRecord, SwitchIngress


def stats_layout(ports: int, max_jobs: int) -> data.StructLayout:
    """The switch's counters (docs/in_network.md, "Counters")."""
    per_reason = data.ArrayLayout(32, len(AggDrop))
    return data.StructLayout({
        "port_frames_in": data.ArrayLayout(32, ports),
        "port_frames_out": data.ArrayLayout(32, ports),
        "port_accepted": data.ArrayLayout(32, ports),              # frames for the switch its parser took
        "port_parser_drops": data.ArrayLayout(data.ArrayLayout(32, len(DropReason)), ports),
        "unknown_mac": 32,                                         # frames forwarded nowhere
        "drops": per_reason,                                       # every AggDrop, job known or not
        "job_absorbed": data.ArrayLayout(32, max_jobs),
        "job_completed": data.ArrayLayout(32, max_jobs),
        "job_unicast": data.ArrayLayout(32, max_jobs),
        "job_nacks": data.ArrayLayout(32, max_jobs),               # lost contributions asked for again
        "job_up": data.ArrayLayout(32, max_jobs),                  # a leaf: partials sent up (resends too)
        "job_down": data.ArrayLayout(32, max_jobs),                # a leaf: the spine's results taken
        "job_drops": data.ArrayLayout(per_reason, max_jobs),
    })


def _held(m, value: int, count: int, name: str):
    """``value`` from a register that always holds it: an input of a per-port block driven by a constant
    would be folded into the block by the generator, making each port's block a module of its own (eight
    copies of the same logic for a simulator to compile); a register keeps it an input. Synthesis folds the
    register (its next value and its reset value are the constant)."""
    reg = Signal(range(count), init=value, name=name)
    m.d.sync += reg.eq(value)
    return reg


class AggregationSwitch(wiring.Component):
    """``ports`` ports of AXI-Stream (``s_axis_<i>`` in, ``m_axis_<i>`` out; ``tuser``: MAC error), the
    configuration on ``cfg_*`` and the counters on ``stats``.

    * **Forwarding**: a frame not for ``cfg_mac`` goes to the port whose ``cfg_port_mac`` it is for
      (:class:`~hdl.switch.eth_switch.EthernetSwitch`, its ``tuser`` with it); others are dropped and
      counted (``unknown_mac``).
    * **Aggregation**: a frame for ``cfg_mac`` is parsed and checked (:class:`SwitchIngress`), routed by
      its pool slot to engine ``pool_slot mod engines`` (:class:`PacketCrossbar`), summed there
      (:class:`AggregationEngine`: slots ``pool_slots / engines`` each), and its results go, one at a
      time, through one compressor to every destination port at once (:class:`ResultBus`), where
      :class:`SwitchEgress` builds the frames.
    * **Line rate**: every port takes a beat a cycle; each engine sums a beat of W/32 elements a cycle, so
      ``engines`` engines sum ``engines`` beats a cycle in all. Contributions of consecutive packets go to
      consecutive engines, so the load spreads over all of them (docs/in_network.md, "Line rate"). The
      result bus encodes a beat of results a cycle: what one job's N ports need (its results are 1/N of
      its contributions); jobs at once share it.
    * ``cfg_clear`` (a pulse) empties pool slots [``cfg_clear_base``, + ``cfg_clear_count``) in every
      engine: write a job's entry, then clear its slots. Reset empties all of them.
    """

    @staticmethod
    def take_parameters(component, ports: int, width: int, engines: int = None, pool_slots: int = 64,
                        max_jobs: int = 4, max_packet: int = 256) -> None:
        """Check a switch's parameters and set them on ``component`` (this switch, or a top around one):
        ``width``, ``ports``, ``engines`` (by default the power of two at or above ``ports``), ``pool_slots``,
        ``max_jobs``, ``max_packet``; ValueError (and no unused-elaboratable warning) if they make no switch."""
        try:
            if not MIN_SWITCH_PORTS <= ports <= MAX_SWITCH_PORTS:
                raise ValueError(f"ports must be in {MIN_SWITCH_PORTS} .. {MAX_SWITCH_PORTS}, got {ports!r}")
            engines = engines or 1 << (ports - 1).bit_length()
            if engines & (engines - 1) or pool_slots & (pool_slots - 1) or not engines <= pool_slots <= 1 << POOL_BITS:
                raise ValueError(f"engines and pool_slots must be powers of two, engines <= pool_slots <= "
                                 f"{1 << POOL_BITS}, got {engines}, {pool_slots}")
            if not 1 <= max_jobs <= MAX_JOBS:
                raise ValueError(f"max_jobs must be in 1 .. {MAX_JOBS}, got {max_jobs!r}")
        except ValueError:
            component._MustUse__silence = True
            raise
        component.width = check_width(width, component)
        component.ports, component.engines, component.pool_slots = ports, engines, pool_slots
        component.max_jobs, component.max_packet = max_jobs, max_packet

    @staticmethod
    def port_members(ports: int, width: int) -> dict:
        """``s_axis_<i>`` in and ``m_axis_<i>`` out per port (``tuser``: the MAC error flag)."""
        members = {}
        for i in range(ports):
            members[f"s_axis_{i}"] = In(AxiStreamSignature(width, 1))
            members[f"m_axis_{i}"] = Out(AxiStreamSignature(width, 1))
        return members

    def __init__(self, ports: int, width: int = 512, engines: int = None, pool_slots: int = 64,
                 max_jobs: int = 4, max_packet: int = 256):
        self.take_parameters(self, ports, width, engines, pool_slots, max_jobs, max_packet)
        members = {
            "cfg_mac": In(48), "cfg_ip": In(32), "cfg_udp_port": In(16, init=UDP_PORT),
            "cfg_port_mac": In(data.ArrayLayout(48, ports)), "cfg_port_ip": In(data.ArrayLayout(32, ports)),
            "cfg_jobs": In(data.ArrayLayout(JobEntry, max_jobs)),
            "cfg_clear": In(1), "cfg_clear_base": In(POOL_BITS), "cfg_clear_count": In(POOL_BITS + 1),
            "clearing": Out(1),
            "stats": Out(stats_layout(ports, max_jobs)),
            **self.port_members(ports, width),
        }
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        N, K, W = self.ports, self.engines, self.width
        shift = (K - 1).bit_length()
        st = self.stats
        m.submodules.forward = fwd = EthernetSwitch(N, W, user_width=1, registered=True)
        m.d.comb += st.unknown_mac.eq(fwd.stat_unknown)
        m.submodules.xbar = xbar = PacketCrossbar(N, K, Contribution, W)
        ingress, egress, engines = [], [], []
        for i in range(N):
            m.submodules[f"in{i}"] = ig = SwitchIngress(W, N, self.max_jobs)
            m.submodules[f"out{i}"] = eg = SwitchEgress(W, N, self.max_jobs)
            m.d.comb += [ig.port.eq(_held(m, i, N, f"port{i}")), eg.port.eq(ig.port)]
            ingress.append(ig)
            egress.append(eg)
            s_in, m_out = getattr(self, f"s_axis_{i}"), getattr(self, f"m_axis_{i}")
            wiring.connect(m, wiring.flipped(s_in), ig.s_axis)
            wiring.connect(m, ig.m_fwd, getattr(fwd, f"s_axis_{i}"))
            wiring.connect(m, getattr(fwd, f"m_axis_{i}"), eg.s_fwd)
            wiring.connect(m, eg.m_axis, wiring.flipped(m_out))
            wiring.connect(m, ig.m_nack, eg.s_nack)
            wiring.connect(m, ig.m_meta, getattr(xbar, f"s_meta_{i}"))
            wiring.connect(m, ig.m_axis, getattr(xbar, f"s_axis_{i}"))
            m.d.comb += getattr(xbar, f"dest_{i}").eq(ig.m_meta.payload.pool_slot[:shift] if shift else 0)
            for port in (ig, eg):
                m.d.comb += [port.cfg_mac.eq(self.cfg_mac), port.cfg_ip.eq(self.cfg_ip),
                             port.cfg_udp_port.eq(self.cfg_udp_port), port.jobs.eq(self.cfg_jobs)]
            m.d.comb += [eg.cfg_port_mac.eq(self.cfg_port_mac[i]), eg.cfg_port_ip.eq(self.cfg_port_ip[i]),
                         fwd.cfg_mac[i].eq(self.cfg_port_mac[i]),
                         st.port_accepted[i].eq(ig.stat_accepted), st.port_parser_drops[i].eq(ig.stat_drops)]
            # frames in and out of the port
            with m.If(s_in.tvalid & s_in.tready & s_in.tlast):
                m.d.sync += st.port_frames_in[i].eq(st.port_frames_in[i] + 1)
            with m.If(m_out.tvalid & m_out.tready & m_out.tlast):
                m.d.sync += st.port_frames_out[i].eq(st.port_frames_out[i] + 1)
        clearing = []
        for k in range(K):
            m.submodules[f"engine{k}"] = en = AggregationEngine(W, N, self.pool_slots // K, K, self.max_packet,
                                                                self.max_jobs)
            m.d.comb += en.index.eq(_held(m, k, max(K, 2), f"engine{k}_index"))
            engines.append(en)
            wiring.connect(m, getattr(xbar, f"m_meta_{k}"), en.s_meta)
            wiring.connect(m, getattr(xbar, f"m_axis_{k}"), en.s_axis)
            m.d.comb += [en.jobs.eq(self.cfg_jobs), en.clear.eq(self.cfg_clear),
                         en.clear_base.eq(self.cfg_clear_base), en.clear_count.eq(self.cfg_clear_count)]
            clearing.append(en.clearing)
        m.d.comb += self.clearing.eq(Cat(*clearing).any())
        self._route_asks(m, ingress)

        # -- the result bus: one engine's result at a time, encoded, to all of its destination ports at once
        m.submodules.results = bus = ResultBus(W, K, N)
        for k, en in enumerate(engines):
            wiring.connect(m, en.m_meta, getattr(bus, f"s_meta_{k}"))
            wiring.connect(m, en.m_axis, getattr(bus, f"s_axis_{k}"))
        for i, eg in enumerate(egress):
            wiring.connect(m, getattr(bus, f"m_meta_{i}"), eg.s_meta)
            wiring.connect(m, getattr(bus, f"m_axis_{i}"), eg.s_axis)

        # -- counters of drops and rounds, per job and per switch -----------------------------------------
        for r in AggDrop:
            hits = [(ig.check_event.valid & (ig.check_event.reason == r)) for ig in ingress]
            hits += [(en.event.valid & (en.event.reason == r)) for en in engines]
            m.d.sync += st.drops[r].eq(st.drops[r] + sum(h.as_unsigned() for h in hits))
        for j in range(self.max_jobs):
            def count(field, src=engines):
                return sum((en.event.valid & (en.event.job == j) & getattr(en.event, field)).as_unsigned()
                           for en in src)
            m.d.sync += [st.job_absorbed[j].eq(st.job_absorbed[j] + count("absorbed")),
                         st.job_completed[j].eq(st.job_completed[j] + count("completed")),
                         st.job_unicast[j].eq(st.job_unicast[j] + count("unicast")),
                         st.job_up[j].eq(st.job_up[j] + count("up")), st.job_down[j].eq(st.job_down[j] + count("down")),
                         st.job_nacks[j].eq(st.job_nacks[j] + sum((ig.nack_event.valid & (ig.nack_event.job == j))
                                                                  .as_unsigned() for ig in ingress))]
            for r in AggDrop:
                hits = [(ig.check_event.valid & ig.check_event.job_valid & (ig.check_event.job == j)
                         & (ig.check_event.reason == r)) for ig in ingress]
                hits += [(en.event.valid & (en.event.job == j) & (en.event.reason == r)) for en in engines]
                m.d.sync += st.job_drops[j][r].eq(st.job_drops[j][r] + sum(h.as_unsigned() for h in hits))
        return m

    @staticmethod
    def _route_asks(m, ingress):
        """A leaf's asks (a spine's frame on an up port showed a partial lost: docs/in_network.md, "Two levels")
        go to the ingress of the member's port, which queues them with its own ``agg_nack``s: one at a time,
        through a register, from the lowest-numbered up port that has one (they are rare)."""
        held, valid = Signal(AskRecord), Signal()
        taken = Signal()
        for i, ig in enumerate(ingress):
            m.d.comb += [ig.s_ask.payload.eq(held.nack), ig.s_ask.valid.eq(valid & (held.port == i))]
            with m.If(ig.s_ask.valid & ig.s_ask.ready):
                m.d.comb += taken.eq(1)
        with m.If(taken):
            m.d.sync += valid.eq(0)
        first = Signal()            # an ingress before this one offers an ask
        for ig in ingress:
            m.d.comb += ig.m_ask.ready.eq(~valid & ~first)
            with m.If(ig.m_ask.valid & ig.m_ask.ready):
                m.d.sync += [held.eq(ig.m_ask.payload), valid.eq(1)]
            nxt = Signal()
            m.d.comb += nxt.eq(first | ig.m_ask.valid)
            first = nxt
