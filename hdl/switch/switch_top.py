"""``ainic_switch``: the aggregation switch with its registers, the top exported for vendor tools."""

from amaranth import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from contract.enums import AggDrop, DropReason
from contract.regmap import VERSION_VALUE
from contract.switch_regmap import (
    JOB_CONFIG_FIELDS,
    JOB_UP_FIELDS,
    PORT_NIBBLES,
    SWITCH_ID_VALUE,
    caps_value,
    switch_regmap,
)
from hdl.host.axi import AxiLiteSignature
from hdl.host.register_block import RegisterBlock
from hdl.switch.aggregation_switch import AggregationSwitch


class SwitchTop(wiring.Component):
    """An :class:`AggregationSwitch` of ``ports`` ports configured and read through ``s_axil`` (the map of
    :func:`contract.switch_regmap.switch_regmap`, docs/switch_registers.md).

    Ports: ``s_axil`` (AXI4-Lite, 32-bit data), and per switch port i ``s_axis_<i>`` (frames from the MAC,
    ``tuser`` = its bad-frame flag) and ``m_axis_<i>`` (frames to the MAC, ``tuser`` = a frame to be sent
    with a bad FCS, as the one received). The other parameters are the switch's (``engines``, pool size,
    job entries, largest packet); CAPS, POOL_SLOTS and MAX_PACKET report them.
    """

    def __init__(self, ports: int = 4, width: int = 512, engines: int = None, pool_slots: int = 64,
                 max_jobs: int = 4, max_packet: int = 256):
        AggregationSwitch.take_parameters(self, ports, width, engines, pool_slots, max_jobs, max_packet)
        self.regmap = switch_regmap(ports, max_jobs)
        self.constants = {"ID": SWITCH_ID_VALUE, "VERSION": VERSION_VALUE,
                          "CAPS": caps_value(width, ports, max_jobs, self.engines),
                          "POOL_SLOTS": pool_slots, "MAX_PACKET": max_packet}
        super().__init__({"s_axil": In(AxiLiteSignature((self.regmap.span - 1).bit_length())),
                          **AggregationSwitch.port_members(ports, width)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.switch = sw = AggregationSwitch(self.ports, self.width, self.engines, self.pool_slots,
                                                     self.max_jobs, self.max_packet)
        m.submodules.regs = regs = RegisterBlock(self.width, self.regmap, self.constants, banked_read=True)
        self.switch = sw                # (the last elaboration's switch: testbenches read its configuration)
        wiring.connect(m, wiring.flipped(self.s_axil), regs.s_axil)
        for i in range(self.ports):
            wiring.connect(m, wiring.flipped(getattr(self, f"s_axis_{i}")), getattr(sw, f"s_axis_{i}"))
            wiring.connect(m, getattr(sw, f"m_axis_{i}"), wiring.flipped(getattr(self, f"m_axis_{i}")))

        c, st, s = regs.cfg, regs.stat, sw.stats
        m.d.comb += [
            sw.cfg_mac.eq(Cat(c.switch_mac_lo, c.switch_mac_hi[:16])), sw.cfg_ip.eq(c.switch_ip),
            sw.cfg_udp_port.eq(c.udp_port),
            sw.cfg_clear.eq(regs.strobe[0]),
            sw.cfg_clear_base.eq(regs.strobe_data[0][:16]), sw.cfg_clear_count.eq(regs.strobe_data[0][16:]),
            st.pool_clearing.eq(sw.clearing), st.unknown_mac.eq(s.unknown_mac),
        ]
        for i in range(self.ports):
            m.d.comb += [sw.cfg_port_mac[i].eq(Cat(c.port_mac_lo[i], c.port_mac_hi[i][:16])),
                         sw.cfg_port_ip[i].eq(c.port_ip[i]),
                         st.port_frames_in[i].eq(s.port_frames_in[i]), st.port_frames_out[i].eq(s.port_frames_out[i]),
                         st.port_accepted[i].eq(s.port_accepted[i])]
            for reason in DropReason:
                m.d.comb += getattr(st, f"port_rx_drop_{reason.name}")[i].eq(s.port_parser_drops[i][reason])
        for reason in AggDrop:
            m.d.comb += getattr(st, f"drop_{reason.name}").eq(s.drops[reason])
        for k in range(self.max_jobs):
            e, cfg = sw.cfg_jobs[k], c.job_config[k]
            field = {name: cfg[lsb:lsb + width] for name, lsb, width, _ in JOB_CONFIG_FIELDS}
            up = {name: c.job_up[k][lsb:lsb + width] for name, lsb, width, _ in JOB_UP_FIELDS}
            ports = Cat(c.job_ports_lo[k], c.job_ports_hi[k])
            m.d.comb += [e.enable.eq(field["enable"]), e.job.eq(c.job_id[k]), e.workers.eq(field["workers"]),
                         e.window_log2.eq(field["window_log2"]), e.slot_base.eq(c.job_slot_base[k]),
                         e.dtype.eq(field["dtype"]), e.codec.eq(field["codec"]), e.packet.eq(field["packet"]),
                         e.up.eq(up["up"]), e.up_port.eq(up["up_port"]), e.up_job.eq(up["up_job"]),
                         e.up_worker.eq(up["up_worker"]),
                         st.job_absorbed[k].eq(s.job_absorbed[k]), st.job_completed[k].eq(s.job_completed[k]),
                         st.job_unicast[k].eq(s.job_unicast[k]), st.job_nacks[k].eq(s.job_nacks[k]),
                         st.job_up_sent[k].eq(s.job_up[k]), st.job_down_taken[k].eq(s.job_down[k])]
            for w in range(len(e.ports)):
                m.d.comb += e.ports[w].eq(ports[4 * w:4 * w + 4])
            for reason in AggDrop:
                m.d.comb += getattr(st, f"job_drop_{reason.name}")[k].eq(s.job_drops[k][reason])
        assert 2 * PORT_NIBBLES == len(sw.cfg_jobs[0].ports)
        return m
