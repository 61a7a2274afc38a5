"""The NIC: registers, command processor, DMA engine, codec loop, collective engine, switch client and
packet path."""

import functools
import operator
from types import SimpleNamespace

from amaranth import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract import regmap as rm
from contract import stages as st
from contract.build import FULL, NicBuild
from contract.enums import DATA_OPCODES, DropReason, FrameOpcode
from hdl.codec.codec_loop import CodecLoop
from hdl.codec.compressor import Compressor
from hdl.codec.decompressor import Decompressor
from hdl.engine.collective_engine import CollectiveEngine
from hdl.engine.switch_client import SwitchClient, switch_client_signature
from hdl.host.axi import AxiLiteSignature, AxiSignature
from hdl.host.dma_engine import DmaEngine
from hdl.host.register_block import RegisterBlock
from hdl.link.link_receiver import LinkReceiver
from hdl.link.link_sender import LinkSender
from hdl.nic.command_processor import CommandProcessor
from hdl.packet.rx_parser import RxParser
from hdl.packet.tx_builder import TxBuilder
from hdl.stream.axis import AxiStreamSignature, check_width, keep_count
from hdl.stream.register_slice import AxiSlice, PortSlice, StreamSlice, registered_reset
from hdl.stream.sync_fifo import SyncFifo

DMA_PORTS = ("rd_cmd", "rd_data", "wr_cmd", "wr_data", "wr_status")     # shared by command processor and engine
HANDSHAKES = ("valid", "ready", "tvalid", "tready")


def share(m, block, users):
    """Give ``block`` (an interface, flows as the block sees them) to one of several ``users`` (interfaces of
    the opposite flows) at a time: ``users`` is [(interface, active)], the block takes its inputs from the
    first active one (from the last one if its ``active`` is None and no other is; else zeros), and every
    user sees the block's outputs with the handshakes gated by its being active."""
    others = [act for _, act in users if act is not None]
    for path, member, value in block.signature.flatten(block):
        values = []
        for iface, _ in users:
            v = iface
            for name in path:
                v = v[name] if isinstance(name, int) else getattr(v, name)
            values.append(v)
        if member.flow == In:           # a user drives it
            default_user = users[-1][1] is None
            expr = values[-1] if default_user else 0
            for (_, act), v in reversed(list(zip(users, values))[:len(users) - default_user]):
                expr = Mux(act, v, expr)
            m.d.comb += value.eq(expr)
        else:
            for (_, act), v in zip(users, values):
                if path[-1] in HANDSHAKES:
                    act = ~functools.reduce(operator.or_, others) if act is None else act
                    m.d.comb += v.eq(value & act)
                else:
                    m.d.comb += v.eq(value)


def sliced(m, name, block, members, reset=None):
    """``block``'s ports ``members`` through a :class:`PortSlice` (submodule ``name``; reset with ``reset``
    too where the block is): returns the slice's front, the same ports a register away from the block."""
    sl = PortSlice(wiring.Signature({n: block.signature.members[n] for n in members}))
    m.submodules[name] = sl if reset is None else ResetInserter(reset)(sl)
    for n in members:
        member, theirs, ours = block.signature.members[n], getattr(block, n), getattr(sl.back, n)
        if not member.is_port:
            wiring.connect(m, ours, theirs)
        else:
            m.d.comb += theirs.eq(ours) if member.flow == In else ours.eq(theirs)
    return sl.front


class Absent(wiring.Component):
    """A block a build leaves out (contract/build.py), in its place: its outputs stay at 0 but for the
    readies, which are 1 (whatever is routed to it is taken and dropped)."""

    def __init__(self, signature: wiring.Signature):
        super().__init__(signature)

    def elaborate(self, platform):
        m = Module()
        for path, member, value in self.signature.flatten(self):
            if member.flow == Out and path[-1] in ("ready", "tready"):
                m.d.comb += value.eq(1)
        return m


def nic_signature(width: int) -> wiring.Signature:
    """The NIC's ports (what ``ainic_nic_w<W>.v`` has, with ``clk`` and ``rst``)."""
    return wiring.Signature({
        "s_axil": In(AxiLiteSignature((rm.SPAN - 1).bit_length())),
        "m_axi": Out(AxiSignature(width)),
        "s_axis_rx": In(AxiStreamSignature(width, 1)),
        "m_axis_tx": Out(AxiStreamSignature(width)),
        "irq": Out(1),
        "dbg_stages": Out(st.WIDTH),
    })


class Nic(wiring.Component):
    """The whole NIC (docs/hardware.md):

    * ``s_axil``: the register map (contract/regmap.py); ``irq``: IRQ_STATUS & IRQ_ENABLE.
    * ``m_axi``: host memory (descriptors, data, completions), AXI4 master, W-bit data, 64-bit addresses.
    * ``s_axis_rx`` / ``m_axis_tx``: Ethernet frames from / to a MAC (no FCS; ``s_axis_rx.tuser`` = the MAC's
      error flag for the frame). Frames are Ethernet/IPv4/UDP/ainic (docs/protocol.md).
    * ``dbg_stages``: what each stage of the engine running the collective (the ring's collective engine, or
      the switch client while a switch collective runs) does this cycle, for a logic analyser or a
      simulation trace (contract/stages.py; may be left unconnected).

    Local copies run in the command processor with the DMA engine and codec loop; collective descriptors
    run in the :class:`CollectiveEngine` (algorithm ring) or the :class:`SwitchClient` (algorithm switch),
    which owns the DMA ports for their duration and talks to the network through the :class:`RxParser`
    and :class:`TxBuilder`. The ring's frames travel over reliable links (contract/link.py): the
    :class:`LinkSender` numbers, keeps and resends the engine's frames within the next rank's credits, the
    :class:`LinkReceiver` tells the parser the psn it takes next and acknowledges to the previous rank;
    ``CONTROL.link_reset`` holds both in reset. Received ``aggregated`` and ``agg_nack`` frames go to the switch
    client (which drops them when it is not running), acks and nacks to the link sender, data and results to the
    collective engine. Received frames wait in the parser's buffer until the engine asks for them, so a
    peer may start earlier; receive credits (``contract/credits.py``) keep every sender within that buffer,
    so ``s_axis_rx`` never has to push back on a MAC.
    """

    def __init__(self, width: int = 512, build: NicBuild = FULL):
        self.width = check_width(width, self)
        self.build = build
        self.credits = build.credits
        super().__init__(nic_signature(width))

    def elaborate(self, platform):
        m = Module()
        W = self.width
        m.submodules.regs = regs = RegisterBlock(W, build=self.build, banked_read=True)
        m.submodules.cmd = cmd = CommandProcessor(W, self.build)
        m.submodules.dma = dma = DmaEngine(W)
        m.submodules.loop = loop = CodecLoop(W)
        m.submodules.engine = eng = CollectiveEngine(W, credits=self.credits)
        m.submodules.client = cl = SwitchClient(W, store_bytes=self.build.frame_store_bytes) if self.build.switch else Absent(switch_client_signature(W))
        m.submodules.rx = rx = RxParser(W, buffer_beats=self.credits.buffer_beats(W))
        m.submodules.tx = tx = TxBuilder(W)
        link_reset = Signal()
        m.d.comb += link_reset.eq(regs.cfg.control[2])
        m.submodules.link_tx = ls = ResetInserter(link_reset)(LinkSender(W, self.credits))
        m.submodules.link_rx = lr = ResetInserter(link_reset)(LinkReceiver(W, self.credits))
        # every port of the NIC passes a register slice: no path from an input pin to logic inside without
        # a flip-flop (timing at the boundary; and a simulator evaluates nothing of the NIC per input change)
        m.submodules.axil_slice = axil = AxiSlice(AxiLiteSignature((rm.SPAN - 1).bit_length()))
        m.submodules.axi_slice = axi = AxiSlice(AxiSignature(W))
        wiring.connect(m, wiring.flipped(self.s_axil), axil.s)
        wiring.connect(m, axil.m, regs.s_axil)
        wiring.connect(m, dma.m_axi, axi.s)
        wiring.connect(m, axi.m, wiring.flipped(self.m_axi))
        m.d.comb += self.irq.eq(regs.irq)

        c, st = regs.cfg, regs.stat
        m.d.comb += [
            cmd.cfg.enable.eq(c.control[0]),
            cmd.cfg.sq_base.eq(Cat(c.sq_base_lo, c.sq_base_hi)),
            cmd.cfg.sq_size_log2.eq(c.sq_size_log2),
            cmd.cfg.cq_base.eq(Cat(c.cq_base_lo, c.cq_base_hi)),
            cmd.cfg.cq_size_log2.eq(c.cq_size_log2),
            cmd.cfg.cq_head.eq(c.cq_head),
            cmd.cfg.world_size.eq(c.world_size),
            cmd.cfg.rank.eq(c.rank),
            cmd.cfg.packet_elems.eq(c.packet_elems),
            cmd.cfg.lag.eq(c.lag),
            st.sq_head.eq(cmd.stat.sq_head),
            st.sq_tail.eq(cmd.stat.sq_tail),
            st.cq_tail.eq(cmd.stat.cq_tail),
            st.desc_completed.eq(cmd.stat.completed),
            st.desc_errors.eq(cmd.stat.errors),
            regs.set.irq_status.eq(cmd.set_irq),
            regs.set.error_status.eq(cmd.set_error),
            cmd.doorbell.eq(regs.strobe[0]),
            cmd.doorbell_value.eq(regs.strobe_data[0]),
            cl.psn_set.eq(regs.strobe[1]),
            cl.psn_value.eq(regs.strobe_data[1]),
            st.agg_psn.eq(cl.psn), st.agg_dup_results.eq(cl.dup_results), st.agg_timeouts.eq(cl.timeouts),
            st.agg_stored_resends.eq(cl.stored_resends),
            st.retransmissions.eq(cl.net.retransmissions + ls.retransmissions),
            st.link_tx_psn.eq(ls.psn), st.link_tx_unacked.eq(ls.unacked), st.link_rx_psn.eq(lr.expect),
            st.link_timeouts.eq(ls.timeouts), st.link_nacks_received.eq(ls.nacks_received),
            st.link_probes.eq(ls.probes),
            st.link_nacks_sent.eq(lr.nacks_sent), st.link_acks_sent.eq(lr.acks_sent),
        ]

        # -- the DMA engine's user: the command processor, or the engine running the collective -----------------
        # who owns the DMA engine and the shared codecs, in registers: the choice comes from the command
        # processor's descriptor, across the chip, and fans out to every multiplexer of the shared ports
        # (the engine first uses them cycles after its start; the ports change hands a cycle after it ends)
        use_sw = cmd.use_switch
        act_ring, act_sw = Signal(), Signal()
        m.d.sync += [act_ring.eq(cmd.engine_active & ~use_sw), act_sw.eq(cmd.engine_active & use_sw)]
        # the shared blocks sit behind register slices (PortSlice): their users are elsewhere on the chip, and
        # a path through a user, a multiplexer and the block (a ready from the compressor through the engine
        # to the DMA reader's FIFO) would otherwise be one cycle's
        dma_ports = sliced(m, "dma_ports", dma, DMA_PORTS)
        for name in DMA_PORTS:
            share(m, getattr(dma_ports, name), [(getattr(eng, name), act_ring), (getattr(cl, name), act_sw),
                                                (getattr(cmd, name), None)])
        # -- the codecs: one compressor and two decompressors for the ring engine, the switch client and
        # the local copy's codec loop (one of them runs at a time); reset as each job starts, so that nothing
        # a job left behind (an aborted packet) reaches the next
        codec_reset = cmd.engine_start | cmd.loop_start
        codecs = self.build.codecs
        comp, dec0, dec1 = Compressor(W, codecs), Decompressor(W, codecs), Decompressor(W, codecs)
        ports = {}
        for name, block in (("comp", comp), ("dec0", dec0), ("dec1", dec1)):
            m.submodules[name] = ResetInserter(codec_reset)(block)
            ports[name] = sliced(m, f"{name}_ports", block, block.signature.members, reset=codec_reset)
        share(m, ports["comp"], [(eng.comp, act_ring), (cl.comp, act_sw), (loop.comp, None)])
        share(m, ports["dec0"], [(eng.d_rx, act_ring), (cl.dec, act_sw), (loop.dec, None)])
        share(m, ports["dec1"], [(eng.d_out, act_ring)])
        m.d.comb += dma.wr_poison.eq(cmd.wr_poison & ~cmd.engine_active)
        wiring.connect(m, cmd.loop_in, loop.s_axis)
        wiring.connect(m, loop.m_axis, cmd.loop_out)
        m.d.comb += [loop.cfg_codec.eq(cmd.loop_codec), loop.cfg_packet_elems.eq(c.packet_elems),
                     loop.cfg_count.eq(cmd.loop_count), loop.start.eq(cmd.loop_start)]

        # -- the collective engine's configuration: descriptor, plan, registers, peer table -------------------
        nodes = c.world_size[:7]
        rank = c.rank[:6]
        nxt = Signal(6)
        prv = Signal(6)
        m.d.comb += [nxt.eq(Mux(rank == nodes - 1, 0, rank + 1)), prv.eq(Mux(rank == 0, nodes - 1, rank - 1))]
        # the peer table is a RAM (contract.regmap TABLE_READ_CYCLES): read the next and the previous rank's
        # entries in turn, each kept in registers until its turn comes again
        next_mac, next_ip, prev_mac, prev_ip = Signal(48), Signal(32), Signal(48), Signal(32)
        turn, turn_d = Signal(), Signal()
        t = regs.tables
        m.d.sync += [turn.eq(~turn), turn_d.eq(turn)]
        for port in (t.peer_mac_lo, t.peer_mac_hi, t.peer_ip):
            m.d.comb += port.addr.eq(Mux(turn, prv, nxt))
        entry_mac, entry_ip = Cat(t.peer_mac_lo.data, t.peer_mac_hi.data), t.peer_ip.data
        with m.If(turn_d):
            m.d.sync += [prev_mac.eq(entry_mac), prev_ip.eq(entry_ip)]
        with m.Else():
            m.d.sync += [next_mac.eq(entry_mac), next_ip.eq(entry_ip)]
        ec, h, d = eng.cfg, eng.cfg.header, cmd.desc
        m.d.comb += [
            ec.plan.eq(cmd.plan), ec.prev_ip.eq(prev_ip), ec.src.eq(d.src), ec.dst.eq(d.dst),
            ec.deadline.eq(c.ring_deadline), eng.flush.eq(link_reset & ~eng.busy),
            lr.cfg.rank.eq(c.rank), lr.cfg.prev_rank.eq(prv), lr.cfg.job.eq(c.job_id),
            lr.cfg.prev_mac.eq(prev_mac), lr.cfg.prev_ip.eq(prev_ip),
            ls.cfg.timeout.eq(c.retx_timeout), ls.cfg.backoff_max.eq(c.retx_backoff_max),
            h.rank.eq(c.rank), h.nodes.eq(c.world_size), h.codec.eq(d.codec), h.dtype.eq(d.dtype),
            h.job.eq(c.job_id), h.collective.eq(d.collective), h.next_mac.eq(next_mac), h.next_ip.eq(next_ip),
            eng.start.eq(cmd.engine_start & ~use_sw),
            self.dbg_stages.eq(Mux(act_sw, cl.probe.as_value(), eng.probe.as_value())),
            cmd.engine_busy.eq(Mux(use_sw, cl.busy, eng.busy)),
            cmd.engine_status.eq(Mux(use_sw, cl.status.as_value(), eng.status.as_value())),
        ]
        sc = cl.cfg
        m.d.comb += [
            sc.src.eq(d.src), sc.dst.eq(d.dst), sc.count.eq(d.count), sc.packet.eq(c.packet_elems),
            sc.codec.eq(d.codec), sc.dtype.eq(d.dtype), sc.job.eq(c.job_id), sc.worker.eq(c.rank),
            sc.collective.eq(d.collective), sc.window_log2.eq(c.agg_window_log2),
            sc.switch_mac.eq(Cat(c.switch_mac_lo, c.switch_mac_hi[:16])), sc.switch_ip.eq(c.switch_ip),
            sc.timeout.eq(c.retx_timeout), sc.backoff_max.eq(c.retx_backoff_max), sc.deadline.eq(c.agg_deadline),
            cl.start.eq(cmd.engine_start & use_sw),
        ]

        # -- packet path ----------------------------------------------------------------------------------------
        local_mac = Cat(c.local_mac_lo, c.local_mac_hi[:16])
        m.d.comb += [
            rx.cfg_mac.eq(local_mac), rx.cfg_ip.eq(c.local_ip), rx.cfg_udp_port.eq(c.udp_port), rx.cfg_rank.eq(c.rank),
            tx.cfg_mac.eq(local_mac), tx.cfg_ip.eq(c.local_ip), tx.cfg_udp_port.eq(c.udp_port),
        ]
        m.d.comb += [rx.seq_enable.eq(1), rx.seq_block.eq(link_reset), rx.seq_expect.eq(lr.expect),
                     lr.seq_accepted.eq(rx.seq_accepted), lr.seq_duplicate.eq(rx.seq_duplicate),
                     lr.seq_out_of_order.eq(rx.seq_out_of_order)]
        m.submodules.rx_slice = rx_slice = StreamSlice(W, 1)
        wiring.connect(m, wiring.flipped(self.s_axis_rx), rx_slice.s_axis)
        wiring.connect(m, rx_slice.m_axis, rx.s_axis)
        self._route_received(m, sliced(m, "rx_out", rx, ("m_meta", "m_axis")), eng, cl, ls, nxt)
        ep = eng.rx_payload           # what the engine took from the parser: consumed (the receiver's credit)
        m.d.comb += [lr.consumed_beats.eq(ep.tvalid & ep.tready), lr.consumed.eq(ep.tvalid & ep.tready & ep.tlast)]
        # the engine's frames through the link sender; its output held while the link is in reset
        wiring.connect(m, eng.tx_meta, ls.s_meta)
        wiring.connect(m, eng.tx_payload, ls.s_payload)
        wiring.connect(m, lr.m_ack, ls.s_ack_out)
        ring = SimpleNamespace(tx_meta=ls.m_meta.signature.create(path=("ring_tx_meta",)), tx_payload=ls.m_payload)
        m.d.comb += [ring.tx_meta.payload.eq(ls.m_meta.payload), ring.tx_meta.valid.eq(ls.m_meta.valid & ~link_reset),
                     ls.m_meta.ready.eq(ring.tx_meta.ready & ~link_reset)]
        self._share_transmit(m, sliced(m, "tx_in", tx, ("s_meta", "s_axis")), ring, cl)
        m.submodules.tx_slice = tx_slice = StreamSlice(W)
        wiring.connect(m, tx.m_axis, tx_slice.s_axis)
        wiring.connect(m, tx_slice.m_axis, wiring.flipped(self.m_axis_tx))

        # -- network counters: registers (every frame on the ports, acks included) -----------------------------
        ring_net = Signal.like(eng.net)
        m.d.comb += [ring_net.eq(eng.net), ring_net.retransmissions.eq(ls.retransmissions)]
        ring_timeouts, was_busy = Signal(32), Signal()
        m.d.sync += was_busy.eq(eng.busy)
        with m.If(was_busy & ~eng.busy & eng.status.timeout):
            m.d.sync += ring_timeouts.eq(ring_timeouts + 1)
        m.d.comb += st.ring_timeouts.eq(ring_timeouts)
        credit_waits = Signal(32)
        with m.If(ls.blocked & ~link_reset):
            m.d.sync += credit_waits.eq(credit_waits + 1)
        m.d.comb += st.link_credit_waits.eq(credit_waits)
        tx_frames = Signal(32)
        tx_bytes, rx_bytes = Signal(32), Signal(32)
        # (counted inside the ports' register slices: the same beats, and no logic on the input pins)
        for port, nbytes, name in ((tx_slice.s_axis, tx_bytes, "tx"), (rx_slice.m_axis, rx_bytes, "rx")):
            n = keep_count(m, port.tkeep, f"{name}_beat_bytes")
            with m.If(port.tvalid & port.tready):
                m.d.sync += nbytes.eq(nbytes + n)
        with m.If(tx_slice.s_axis.tvalid & tx_slice.s_axis.tready & tx_slice.s_axis.tlast):
            m.d.sync += tx_frames.eq(tx_frames + 1)
        m.d.comb += [
            # a completion counts its collective's data frames (acks apart)
            cmd.net.eq(Mux(use_sw, cl.net.as_value(), ring_net.as_value())),
            st.tx_frames.eq(tx_frames), st.tx_bytes.eq(tx_bytes),
            st.rx_accepted.eq(rx.stat_accepted), st.rx_bytes.eq(rx_bytes),
        ]
        for reason in DropReason:
            m.d.comb += getattr(st, f"rx_drop_{reason.name}").eq(rx.stat_drops[reason])
        return registered_reset(m)      # rst through a flip-flop too (hdl/stream/register_slice.py)

    def _route_received(self, m, rx, eng, cl, ls, next_rank):
        """Accepted frames: ``aggregated`` and ``agg_nack`` ones to the switch client, the next rank's acks and
        nacks to the link sender (taken at once), data and results to the collective engine. Records pass on
        at once (the engine queues data records, so an ack is never stuck behind data); a FIFO of
        destinations, one entry per record with a payload, sends each payload after its record (room for
        every record the credits allow, and one for the switch client)."""
        meta, pay = rx.m_meta, rx.m_axis
        m.submodules.rx_route = route = SyncFifo(width=1, depth=self.credits.rx_frames + 2)
        a = meta.payload.ainic
        to_switch = (a.opcode == FrameOpcode.aggregated) | (a.opcode == FrameOpcode.agg_nack)
        to_link = (a.opcode == FrameOpcode.ack) | (a.opcode == FrameOpcode.nack)
        has_payload = Cat(*[a.opcode == op for op in DATA_OPCODES]).any()
        room = route.w_rdy | ~has_payload
        for dst, sel in ((cl, to_switch), (eng, ~to_switch & ~to_link)):
            m.d.comb += [dst.rx_meta.payload.eq(meta.payload), dst.rx_meta.valid.eq(meta.valid & sel & room)]
        m.d.comb += [
            ls.ack.valid.eq(meta.valid & to_link & (a.src_rank == next_rank)),
            ls.ack.payload.nack.eq(a.opcode == FrameOpcode.nack), ls.ack.payload.psn.eq(a.psn),
            ls.ack.payload.room.eq(a.count), ls.ack.payload.beats.eq(a.offset),
            meta.ready.eq(room & Mux(to_switch, cl.rx_meta.ready, Mux(to_link, 1, eng.rx_meta.ready))),
            route.w_data.eq(to_switch), route.w_en.eq(meta.valid & meta.ready & has_payload),
        ]
        pay_to_switch = route.r_data
        for dst, sel in ((cl, pay_to_switch), (eng, ~pay_to_switch)):
            p = dst.rx_payload
            m.d.comb += [p.tdata.eq(pay.tdata), p.tkeep.eq(pay.tkeep), p.tlast.eq(pay.tlast),
                         p.tvalid.eq(pay.tvalid & route.r_rdy & sel)]
        m.d.comb += [pay.tready.eq(route.r_rdy & Mux(pay_to_switch, cl.rx_payload.tready, eng.rx_payload.tready)),
                     route.r_en.eq(pay.tvalid & pay.tready & pay.tlast)]

    @staticmethod
    def _share_transmit(m, tx, eng, cl):
        """The builder takes frames from the collective engine and the switch client, a frame at a time
        (round-robin on the records); a frame's payload comes from the source of its record. ``tx`` is the
        builder behind a register slice, which would take a record while the payload before it still
        passes; the sources count on the builder's rule (the next record is taken no earlier than the cycle
        the last one's payload ends: the link sender and the switch client start the next payload, or a
        frame's timer, at the record), so records are held here to it."""
        from_switch = Signal()              # the source of the frame being built
        last, open_ = Signal(), Signal()    # open_: a record with a payload was taken, its last beat was not
        pick = Mux(eng.tx_meta.valid & cl.tx_meta.valid, ~last, cl.tx_meta.valid)
        src_sw, src_eng, p = cl.tx_payload, eng.tx_payload, tx.s_axis
        ends = p.tvalid & p.tready & p.tlast
        free = ~open_ | ends                # the builder's rule: a record may be taken in this cycle
        take = tx.s_meta.ready & free
        carries = Cat(*[tx.s_meta.payload.ainic.opcode == op for op in DATA_OPCODES]).any()
        m.d.comb += [tx.s_meta.payload.eq(Mux(pick, cl.tx_meta.payload.as_value(), eng.tx_meta.payload.as_value())),
                     tx.s_meta.valid.eq((eng.tx_meta.valid | cl.tx_meta.valid) & free),
                     cl.tx_meta.ready.eq(take & pick), eng.tx_meta.ready.eq(take & ~pick)]
        with m.If(ends):
            m.d.sync += open_.eq(0)
        with m.If(tx.s_meta.valid & tx.s_meta.ready):
            m.d.sync += [from_switch.eq(pick), last.eq(pick), open_.eq(carries)]
        m.d.comb += [p.tdata.eq(Mux(from_switch, src_sw.tdata, src_eng.tdata)),
                     p.tkeep.eq(Mux(from_switch, src_sw.tkeep, src_eng.tkeep)),
                     p.tlast.eq(Mux(from_switch, src_sw.tlast, src_eng.tlast)),
                     p.tvalid.eq(Mux(from_switch, src_sw.tvalid, src_eng.tvalid)),
                     src_sw.tready.eq(p.tready & from_switch), src_eng.tready.eq(p.tready & ~from_switch)]
