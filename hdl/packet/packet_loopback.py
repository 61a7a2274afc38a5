"""Transmit builder wired to receive parser: the packet path's round trip as one testable top."""

from amaranth import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import DropReason
from contract.protocol import UDP_PORT
from hdl.packet.rx_parser import RxMeta, RxParser
from hdl.packet.tx_builder import TxBuilder, TxMeta
from hdl.stream.axis import AxiStreamSignature, check_width


class PacketLoopback(wiring.Component):
    """``s_meta``/``s_axis`` -> TxBuilder -> frame -> RxParser -> ``m_meta``/``m_axis``.

    The builder sends from (``cfg_tx_mac``, ``cfg_tx_ip``); the parser receives as (``cfg_rx_mac``,
    ``cfg_rx_ip``, ``cfg_rank``). A record addressed to the receiver comes out unchanged with its payload.
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        super().__init__({
            "s_meta": In(stream.Signature(TxMeta)),
            "s_axis": In(AxiStreamSignature(width)),
            "m_meta": Out(stream.Signature(RxMeta)),
            "m_axis": Out(AxiStreamSignature(width)),
            "cfg_tx_mac": In(48), "cfg_tx_ip": In(32), "cfg_rx_mac": In(48), "cfg_rx_ip": In(32),
            "cfg_rank": In(16), "cfg_udp_port": In(16, init=UDP_PORT),
            "stat_accepted": Out(32),
            "stat_drops": Out(data.ArrayLayout(32, len(DropReason))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = tx = TxBuilder(self.width)
        m.submodules.rx = rx = RxParser(self.width)
        wiring.connect(m, wiring.flipped(self.s_meta), tx.s_meta)
        wiring.connect(m, wiring.flipped(self.s_axis), tx.s_axis)
        m.d.comb += [
            rx.s_axis.tdata.eq(tx.m_axis.tdata), rx.s_axis.tkeep.eq(tx.m_axis.tkeep),
            rx.s_axis.tlast.eq(tx.m_axis.tlast), rx.s_axis.tvalid.eq(tx.m_axis.tvalid),
            rx.s_axis.tuser.eq(0), tx.m_axis.tready.eq(rx.s_axis.tready),
            tx.cfg_mac.eq(self.cfg_tx_mac), tx.cfg_ip.eq(self.cfg_tx_ip), tx.cfg_udp_port.eq(self.cfg_udp_port),
            rx.cfg_mac.eq(self.cfg_rx_mac), rx.cfg_ip.eq(self.cfg_rx_ip), rx.cfg_rank.eq(self.cfg_rank),
            rx.cfg_udp_port.eq(self.cfg_udp_port),
            self.stat_accepted.eq(rx.stat_accepted), self.stat_drops.eq(rx.stat_drops),
        ]
        wiring.connect(m, rx.m_meta, wiring.flipped(self.m_meta))
        wiring.connect(m, rx.m_axis, wiring.flipped(self.m_axis))
        return m
