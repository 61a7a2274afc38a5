"""The on-NIC collective engine: a ring all-reduce driven by the RingSequencer's items (docs/collective_engine.md)."""

import functools
import operator

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from contract import credits as cr
from contract.enums import FrameOpcode, PhaseKind
from contract.protocol import FRAME_HEADER_BYTES, VERSION
from hdl.arith.reduction_unit import ReductionUnit
from hdl.codec.compressor import Compressor
from hdl.codec.decompressor import Decompressor
from hdl.codec.wire_size import payload_bytes
from hdl.engine.ring_sequencer import Item, PlanLayout, RingSequencer
from hdl.engine.rx_item_check import FIELDS, RxItemCheck, RxMeta
from hdl.engine.send_credits import SendCredits
from hdl.engine.tx_header_gen import HeaderConfig, TxHeaderGen
from hdl.host.dma_reader import DmaCommand
from hdl.packet.rx_parser import META_BITS
from hdl.packet.tx_builder import TxMeta
from hdl.stream.axis import AxiStreamSignature, check_width
from hdl.stream.stream_fifo import StreamFifo
from hdl.stream.stream_fork import StreamFork

SEND, REDUCE, FINAL, FORWARD, LAST, GATHER, SCATTER_END = PhaseKind
OWN_ONLY = (SEND, GATHER)                   # own data straight to the compressor
SUMS = (REDUCE, FINAL, SCATTER_END)         # received + own through the reduction unit
TO_HOST_FROM_FORK1 = (FINAL, GATHER, SCATTER_END)   # compressed here, decoded to the host

#: which stages take an item, by kind (the table in docs/collective_engine.md)
STAGES = {
    "read": OWN_ONLY + SUMS,                # DMA read command of the own packet, then the own-read router
    "compress": OWN_ONLY + SUMS,            # compressor input: own data or the reduction unit
    "fork1": OWN_ONLY + SUMS,               # compressor output -> transmit, and -> D_out
    "receive": SUMS + (FORWARD, LAST),
    "transmit": (SEND, REDUCE, FINAL, GATHER, FORWARD),
    "host_out": TO_HOST_FROM_FORK1 + (FORWARD, LAST),   # D_out input mux, and the DMA write command
}

EngineConfig = data.StructLayout({
    "plan": PlanLayout, "header": HeaderConfig, "prev_ip": 32, "prev_mac": 48, "src": 64, "dst": 64,
})

#: the engine's data frames since reset (acks not included); a completion reports the difference
NetCounters = data.StructLayout({"tx_frames": 32, "tx_bytes": 64, "rx_frames": 32, "rx_bytes": 64})

EngineStatus = data.StructLayout({
    "read_resp": 2,         # worst AXI response of the own-data reads
    "write_resp": 2,        # worst AXI response of the result writes
    "mismatch": len(FIELDS),  # header fields that disagreed with the expected items (OR over the run)
    "overflow": 1,          # an int32 sum saturated
    "framing": 1,           # the reduction unit's operands disagreed in framing
    "host_bytes": 64,       # bytes of results written to host memory (the write commands' lengths)
})


class _ItemQueue:
    """A stage's queue of items and its current one: ``item``/``have`` describe the packet being moved;
    assert ``done`` in the cycle its last beat is taken, and the next item (if offered) is current in the
    next cycle with no bubble. By default the next item comes straight from the queue; :meth:`follow`
    takes it from elsewhere (a stream fed by the queue)."""

    def __init__(self, m, name, depth, follow_fifo=True):
        self.m = m
        self.fifo = q = fifo.SyncFIFOBuffered(width=Item.size, depth=depth)
        m.submodules[f"q_{name}"] = q
        self.item = Signal(Item, name=f"{name}_item")
        self.have = Signal(name=f"{name}_have")
        self.done = Signal(name=f"{name}_done")
        self.free = Signal(name=f"{name}_free")       # a next item may be taken this cycle
        m.d.comb += self.free.eq(~self.have | self.done)
        if follow_fifo:
            m.d.comb += q.r_en.eq(self.follow(q.r_rdy, q.r_data))

    def follow(self, valid, payload):
        """Take the next item from (``valid``, ``payload``) when free; returns the take condition."""
        m = self.m
        take = Signal()
        m.d.comb += take.eq(valid & self.free)
        with m.If(take):
            m.d.sync += [self.item.eq(payload), self.have.eq(1)]
        with m.Elif(self.done):
            m.d.sync += self.have.eq(0)
        return take

    @property
    def idle(self):
        # `level`, not `r_rdy`: a buffered FIFO shows a new entry on r_rdy a cycle or two after the write
        return ~self.have & (self.fifo.level == 0)

    def kind_is(self, *kinds):
        return self.have & _any(self.item.kind == k for k in kinds)


def _any(values):
    return functools.reduce(operator.or_, values)


def _all(values):
    return functools.reduce(operator.and_, values)


def _pass(m, src, dst, valid, user=None):
    """Connect stream ``src`` to ``dst`` while ``valid`` (a route that is open); returns the beat-taken signal."""
    m.d.comb += [dst.tdata.eq(src.tdata), dst.tkeep.eq(src.tkeep), dst.tlast.eq(src.tlast),
                 dst.tvalid.eq(src.tvalid & valid)]
    if user is not None:
        m.d.comb += dst.tuser.eq(user)
    return dst.tvalid & dst.tready


class CollectiveEngine(wiring.Component):
    """Runs one ring all-reduce of ``cfg.plan`` from ``start`` until ``busy`` falls.

    Reads its own tensor at ``cfg.src`` through ``rd_cmd``/``rd_data`` (one DMA command per packet),
    receives the previous rank's packets as parsed by the RxParser (``rx_meta``, ``rx_payload``), sends its
    own through the TxBuilder (``tx_meta``, ``tx_payload``) and writes the result to ``cfg.dst`` through
    ``wr_cmd``/``wr_data``/``wr_status``. The result is ``host_driver.models.allreduce.allreduce`` bit for bit.

    * Items from the :class:`RingSequencer` are queued (``queue_depth`` each) to the stages that have work
      for them (:data:`STAGES`); every stage takes its items in the sequencer's order and switches its
      stream mux only between packets, so the stages overlap by up to ``queue_depth`` packets and the
      blocks run at one beat per cycle: DMA reads are issued ahead, the reduction unit's latency overlaps
      the next packet, transmit and host write run concurrently.
    * The received stream must hold the previous rank's packets in the order of its sequencer (the ring
      and the work order guarantee it, docs/collective_engine.md); each header is checked against the
      expected item (:class:`RxItemCheck`) and any disagreement is reported in ``status.mismatch``.
    * ``busy`` falls once every item has passed every stage and every result write has been answered;
      ``status`` then holds the worst DMA responses and the error flags of the run (cleared by ``start``).
    """

    def __init__(self, width: int = 512, queue_depth: int = 16, fork_fifo_beats: int = 64,
                 credits: cr.Credits = cr.DEFAULT):
        self.width = check_width(width, self)
        self.credits = credits
        self.queue_depth = queue_depth
        self.fork_fifo_beats = fork_fifo_beats
        W = width
        super().__init__({
            "cfg": In(EngineConfig),
            "start": In(1),
            "busy": Out(1),
            "status": Out(EngineStatus),
            "rd_cmd": Out(stream.Signature(DmaCommand)),
            "rd_data": In(AxiStreamSignature(W, user_width=2)),
            "wr_cmd": Out(stream.Signature(DmaCommand)),
            "wr_data": Out(AxiStreamSignature(W)),
            "wr_status": In(stream.Signature(2)),
            "rx_meta": In(AxiStreamSignature(META_BITS)),
            "rx_payload": In(AxiStreamSignature(W)),
            "tx_meta": Out(AxiStreamSignature(TxMeta.size)),
            "tx_payload": Out(AxiStreamSignature(W)),
            "net": Out(NetCounters),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        cfg, st = self.cfg, self.status
        codec = cfg.header.codec

        m.submodules.seq = seq = RingSequencer()
        m.submodules.comp = comp = Compressor(W)
        m.submodules.d_rx = d_rx = Decompressor(W)
        m.submodules.d_out = d_out = Decompressor(W)
        m.submodules.ru = ru = ReductionUnit(W)
        m.submodules.fork1 = fork1 = StreamFork(W)
        m.submodules.fork2 = fork2 = StreamFork(W)
        m.submodules.rx_check = rx_check = RxItemCheck()
        m.submodules.tx_hdr = tx_hdr = TxHeaderGen()
        m.d.comb += [
            seq.plan.eq(cfg.plan), seq.start.eq(self.start),
            comp.cfg_codec.eq(codec), d_rx.cfg_codec.eq(codec), d_out.cfg_codec.eq(codec),
            ru.cfg_dtype.eq(cfg.header.dtype), ru.stat_clear.eq(self.start),
            tx_hdr.cfg.eq(cfg.header), tx_hdr.start.eq(self.start),
            rx_check.cfg.rank.eq(cfg.header.rank), rx_check.cfg.nodes.eq(cfg.header.nodes),
            rx_check.cfg.codec.eq(cfg.header.codec), rx_check.cfg.dtype.eq(cfg.header.dtype),
            rx_check.cfg.job.eq(cfg.header.job), rx_check.cfg.collective.eq(cfg.header.collective),
            rx_check.cfg.prev_ip.eq(cfg.prev_ip), rx_check.start.eq(self.start),
        ]

        # -- items to the stages' queues ---------------------------------------------------------------------
        depth = self.queue_depth
        q = {name: _ItemQueue(m, name, depth, follow_fifo=name not in ("receive", "transmit")) for name in STAGES}
        q["own"] = _ItemQueue(m, "own", depth)           # read commands issued, data not yet routed
        it = seq.items.payload
        need = {name: Signal(name=f"need_{name}") for name in STAGES}
        for name, kinds in STAGES.items():
            m.d.comb += need[name].eq(_any(it.kind == k for k in kinds))
        all_room = Signal()
        m.d.comb += all_room.eq(_all(~need[n] | q[n].fifo.w_rdy for n in STAGES))
        m.d.comb += seq.items.ready.eq(all_room)
        for name in STAGES:
            m.d.comb += [q[name].fifo.w_data.eq(it), q[name].fifo.w_en.eq(seq.items.valid & all_room & need[name])]

        def byte_addr(base, item):
            return base + Cat(C(0, 2), item.offset)

        # -- read: one DMA read per own packet, its item then waits in the own-read router's queue ----------
        rdq, own = q["read"], q["own"]
        m.d.comb += [
            self.rd_cmd.valid.eq(rdq.have & own.fifo.w_rdy),
            self.rd_cmd.payload.addr.eq(byte_addr(cfg.src, rdq.item)),
            self.rd_cmd.payload.length.eq(Cat(C(0, 2), rdq.item.count)),
            own.fifo.w_data.eq(rdq.item), own.fifo.w_en.eq(self.rd_cmd.valid & self.rd_cmd.ready),
            rdq.done.eq(self.rd_cmd.valid & self.rd_cmd.ready),
        ]
        # own-read router: send -> compressor input mux; reduce/final -> reduction unit operand b
        rd = self.rd_data
        own_send = AxiStreamSignature(W).create(path=("own_send",))
        t1 = _pass(m, rd, own_send, own.kind_is(*OWN_ONLY))
        t2 = _pass(m, rd, ru.s_axis_b, own.kind_is(*SUMS))
        m.d.comb += [rd.tready.eq(Mux(own.kind_is(*OWN_ONLY), own_send.tready, ru.s_axis_b.tready) & own.have),
                     own.done.eq((t1 | t2) & rd.tlast)]
        read_resp = Signal(2)
        with m.If(rd.tvalid & rd.tready & (rd.tuser > read_resp)):
            m.d.sync += read_resp.eq(rd.tuser)

        # -- compressor input: own data (send) or the reduction unit's sum (reduce, final) -----------------
        cq = q["compress"]
        c_in = comp.s_axis
        is_send = cq.kind_is(*OWN_ONLY)
        m.d.comb += [
            c_in.tdata.eq(Mux(is_send, own_send.tdata, ru.m_axis.tdata)),
            c_in.tkeep.eq(Mux(is_send, own_send.tkeep, ru.m_axis.tkeep)),
            c_in.tlast.eq(Mux(is_send, own_send.tlast, ru.m_axis.tlast)),
            c_in.tvalid.eq(cq.have & Mux(is_send, own_send.tvalid, ru.m_axis.tvalid)),
            own_send.tready.eq(is_send & c_in.tready),
            ru.m_axis.tready.eq(cq.kind_is(*SUMS) & c_in.tready),
            cq.done.eq(c_in.tvalid & c_in.tready & c_in.tlast),
        ]

        # -- fork 1: compressed packets -> transmit (not scatter_end), and -> the host decompressor ---------
        f1 = q["fork1"]
        t = _pass(m, comp.m_axis, fork1.s_axis, f1.have)
        m.d.comb += [comp.m_axis.tready.eq(fork1.s_axis.tready & f1.have),
                     fork1.enable_a.eq(~f1.kind_is(SCATTER_END)), fork1.enable_b.eq(f1.kind_is(*TO_HOST_FROM_FORK1)),
                     f1.done.eq(t & comp.m_axis.tlast)]

        # -- receive credits (contract/credits.py): acks from the next rank raise this rank's limits --------
        # Every header from the parser is taken at once: acks update the limits, data headers wait in
        # rx_meta_q (room for RX_FRAMES, which credits never exceed), so an ack is never stuck behind data.
        B = W // 8
        shift = B.bit_length() - 1
        cc = self.credits
        m.submodules.send_credits = gate = SendCredits(W, cc)
        used_frames, used_beats = Signal(32), Signal(32)        # consumed here, since reset
        acked_at = Signal(32)
        m.submodules.rx_meta_q = rx_meta_q = fifo.SyncFIFOBuffered(width=META_BITS, depth=cc.rx_frames)
        rmeta = data.View(RxMeta, self.rx_meta.tdata)
        is_ack = rmeta.ainic.opcode == FrameOpcode.ack
        nodes = cfg.header.nodes
        next_rank = Mux(cfg.header.rank == nodes - 1, 0, cfg.header.rank + 1)
        m.d.comb += [
            self.rx_meta.tready.eq(is_ack | rx_meta_q.w_rdy),
            rx_meta_q.w_data.eq(self.rx_meta.tdata), rx_meta_q.w_en.eq(self.rx_meta.tvalid & ~is_ack),
        ]
        m.d.comb += [gate.limit_valid.eq(self.rx_meta.tvalid & is_ack & (rmeta.ainic.src_rank == next_rank)),
                     gate.limit_frames.eq(rmeta.ainic.psn), gate.limit_beats.eq(rmeta.ainic.offset)]

        # -- receive: headers checked against the items, payload routed --------------------------------------
        rq = q["receive"]
        m.d.comb += [
            rx_check.items.valid.eq(rq.fifo.r_rdy), rx_check.items.payload.eq(rq.fifo.r_data),
            rx_check.s_meta.tdata.eq(rx_meta_q.r_data), rx_check.s_meta.tkeep.eq(-1),
            rx_check.s_meta.tlast.eq(1), rx_check.s_meta.tvalid.eq(rx_meta_q.r_rdy),
            rx_meta_q.r_en.eq(rx_check.s_meta.tready),
        ]
        # the receive queue's current item is the checked one (RxItemCheck is combinational)
        checked_take = rq.follow(rx_check.checked.valid, rx_check.checked.payload.item)
        m.d.comb += [rx_check.checked.ready.eq(rq.free), rq.fifo.r_en.eq(rx_check.items.valid & rx_check.items.ready)]
        mismatch = Signal(len(FIELDS))
        with m.If(checked_take & (rx_check.checked.payload.mismatch != 0)):
            m.d.sync += mismatch.eq(mismatch | rx_check.checked.payload.mismatch)
        rx = self.rx_payload
        t1 = _pass(m, rx, d_rx.s_axis, rq.kind_is(*SUMS), user=rq.item.count)
        t2 = _pass(m, rx, fork2.s_axis, rq.kind_is(FORWARD, LAST))
        m.d.comb += [
            rx.tready.eq(Mux(rq.kind_is(*SUMS), d_rx.s_axis.tready, fork2.s_axis.tready) & rq.have),
            rq.done.eq((t1 | t2) & rx.tlast),
            fork2.enable_a.eq(rq.kind_is(FORWARD)), fork2.enable_b.eq(1),
        ]
        # what this rank consumed (frames, buffer beats) and its data-frame counters
        rx_bytes = Signal(64)
        rx_plen = payload_bytes(m, codec, rq.item.count, "rx_plen")
        with m.If(t1 | t2):
            m.d.sync += used_beats.eq(used_beats + 1)
        with m.If(rq.done):
            m.d.sync += [used_frames.eq(used_frames + 1), rx_bytes.eq(rx_bytes + FRAME_HEADER_BYTES + rx_plen)]
        m.d.comb += [self.net.rx_frames.eq(used_frames), self.net.rx_bytes.eq(rx_bytes)]
        wiring.connect(m, d_rx.m_axis, ru.s_axis_a)

        # FIFOs behind the forks' branches that wait on another stage (D_out for final and forwarded packets,
        # transmit for forwarded ones): without them the compressor, the receive router and D_out run in
        # lock step within a key (a final packet holds the compressor until D_out is free; a forwarded one
        # holds the receive router, starving the next reduce)
        fifos = {}
        for name, branch in (("f1b", fork1.m_axis_b), ("f2a", fork2.m_axis_a), ("f2b", fork2.m_axis_b)):
            m.submodules[f"fifo_{name}"] = f = StreamFifo(W, self.fork_fifo_beats)
            wiring.connect(m, branch, f.s_axis)
            fifos[name] = f.m_axis

        # -- transmit: header record + payload (fork 1 for own packets, fork 2 for forwarded ones) ----------
        # A packet is sent only within the next rank's limits: one frame, and its payload's beats.
        tq = q["transmit"]
        next_item = data.View(Item, tq.fifo.r_data)
        tx_plen = payload_bytes(m, codec, next_item.count, "tx_plen")
        credit = gate.ok
        m.d.comb += [
            gate.beats.eq((tx_plen + B - 1) >> shift),
            tx_hdr.items.valid.eq(tq.fifo.r_rdy & tq.free & credit), tx_hdr.items.payload.eq(tq.fifo.r_data),
            tq.fifo.r_en.eq(tq.follow(tq.fifo.r_rdy & tx_hdr.items.ready & credit, tq.fifo.r_data)),
            gate.take.eq(tq.fifo.r_en),
        ]

        # Acks to the previous rank (every ACK_EVERY consumed frames) go out between data frames, first.
        ack = Signal(TxMeta)
        ah = ack.ainic
        ack_due = Signal()
        m.d.comb += [
            ack_due.eq((used_frames - acked_at)[:32] >= cc.ack_every),
            ah.version.eq(VERSION), ah.opcode.eq(FrameOpcode.ack),
            ah.job.eq(cfg.header.job), ah.collective.eq(cfg.header.collective),
            ah.src_rank.eq(cfg.header.rank), ah.dst_rank.eq(Mux(cfg.header.rank == 0, nodes - 1, cfg.header.rank - 1)),
            ah.psn.eq(used_frames + cc.rx_frames), ah.offset.eq(used_beats + cc.advertised_beats(W)),
            ack.dst_ip.eq(cfg.prev_ip), ack.dst_mac.eq(cfg.prev_mac),
        ]
        hm, tm = tx_hdr.m_meta, self.tx_meta
        m.d.comb += [
            tm.tdata.eq(Mux(ack_due, ack, hm.tdata)), tm.tkeep.eq(-1), tm.tlast.eq(1),
            tm.tvalid.eq(ack_due | hm.tvalid), hm.tready.eq(tm.tready & ~ack_due),
        ]
        with m.If(ack_due & tm.tready):
            # one ack per ACK_EVERY frames (it reports what was consumed when it leaves, maybe a little more)
            m.d.sync += acked_at.eq(acked_at + cc.ack_every)
        tx_frames, tx_bytes = Signal(32), Signal(64)
        sent_meta = data.View(TxMeta, hm.tdata)
        hdr_plen = payload_bytes(m, sent_meta.ainic.codec, sent_meta.ainic.count, "hdr_plen")
        with m.If(hm.tvalid & hm.tready):
            m.d.sync += [tx_frames.eq(tx_frames + 1), tx_bytes.eq(tx_bytes + FRAME_HEADER_BYTES + hdr_plen)]
        m.d.comb += [self.net.tx_frames.eq(tx_frames), self.net.tx_bytes.eq(tx_bytes)]
        tp = self.tx_payload
        fwd = tq.kind_is(FORWARD)
        a1, a2 = fork1.m_axis_a, fifos["f2a"]
        m.d.comb += [
            tp.tdata.eq(Mux(fwd, a2.tdata, a1.tdata)), tp.tkeep.eq(Mux(fwd, a2.tkeep, a1.tkeep)),
            tp.tlast.eq(Mux(fwd, a2.tlast, a1.tlast)),
            tp.tvalid.eq(tq.have & Mux(fwd, a2.tvalid, a1.tvalid)),
            a1.tready.eq(tq.kind_is(SEND, REDUCE, FINAL, GATHER) & tp.tready),
            a2.tready.eq(fwd & tp.tready),
            tq.done.eq(tp.tvalid & tp.tready & tp.tlast),
        ]

        # -- host out: D_out (final, gather, scatter_end: fork 1; forward, last: fork 2) -> DMA write ------
        hq = q["host_out"]
        b1, b2 = fifos["f1b"], fifos["f2b"]
        fin = hq.kind_is(*TO_HOST_FROM_FORK1)
        d = d_out.s_axis
        m.d.comb += [
            d.tdata.eq(Mux(fin, b1.tdata, b2.tdata)), d.tkeep.eq(Mux(fin, b1.tkeep, b2.tkeep)),
            d.tlast.eq(Mux(fin, b1.tlast, b2.tlast)), d.tuser.eq(hq.item.count),
            d.tvalid.eq(hq.have & Mux(fin, b1.tvalid, b2.tvalid)),
            b1.tready.eq(fin & d.tready), b2.tready.eq(hq.kind_is(FORWARD, LAST) & d.tready),
        ]
        # the write command goes out with the packet's first beat; the data follows through D_out
        cmd_sent = Signal()
        m.d.comb += [
            self.wr_cmd.valid.eq(hq.have & ~cmd_sent),
            self.wr_cmd.payload.addr.eq(byte_addr(cfg.dst, hq.item)),
            self.wr_cmd.payload.length.eq(Cat(C(0, 2), hq.item.count)),
            hq.done.eq(d.tvalid & d.tready & d.tlast & (cmd_sent | self.wr_cmd.ready)),
        ]
        with m.If(hq.done):
            m.d.sync += cmd_sent.eq(0)
        with m.Elif(self.wr_cmd.valid & self.wr_cmd.ready):
            m.d.sync += cmd_sent.eq(1)
        wiring.connect(m, d_out.m_axis, wiring.flipped(self.wr_data))
        pending = Signal(32)
        write_resp = Signal(2)
        issued = self.wr_cmd.valid & self.wr_cmd.ready
        answered = self.wr_status.valid
        m.d.comb += self.wr_status.ready.eq(1)
        m.d.sync += pending.eq(pending + issued - answered)
        host_bytes = Signal(64)
        with m.If(issued):
            m.d.sync += host_bytes.eq(host_bytes + self.wr_cmd.payload.length)
        with m.If(answered & (self.wr_status.payload > write_resp)):
            m.d.sync += write_resp.eq(self.wr_status.payload)

        # -- run state ----------------------------------------------------------------------------------------
        running = Signal()
        all_idle = Signal()
        m.d.comb += all_idle.eq(_all(q[n].idle for n in q))
        with m.If(self.start):
            m.d.sync += [running.eq(1), read_resp.eq(0), write_resp.eq(0), mismatch.eq(0), host_bytes.eq(0)]
        with m.Elif(running & ~seq.busy & all_idle & (pending == 0)):
            m.d.sync += running.eq(0)
        m.d.comb += [
            self.busy.eq(running),
            st.read_resp.eq(read_resp), st.write_resp.eq(write_resp), st.mismatch.eq(mismatch),
            st.overflow.eq(ru.stat_overflow), st.framing.eq(ru.stat_framing), st.host_bytes.eq(host_bytes),
        ]
        return m
