"""The on-NIC collective engine: a ring all-reduce driven by the RingSequencer's items (docs/collective_engine.md)."""

import functools
import operator
from types import SimpleNamespace

from amaranth import C, Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract import credits as cr
from contract import stages as st
from contract.enums import PhaseKind, StageState
from contract.link import Stall
from contract.protocol import FRAME_HEADER_BYTES
from hdl.arith.reduction_unit import ReductionUnit
from hdl.codec.compressor import compressor_signature
from hdl.codec.decompressor import decompressor_signature
from hdl.codec.wire_size import payload_bytes
from hdl.engine.ring_sequencer import Item, PlanLayout, RingSequencer
from hdl.engine.rx_item_check import FIELDS, RxItemCheck
from hdl.engine.tx_header_gen import HeaderConfig, TxHeaderGen
from hdl.host.dma_engine import dma_user_members
from hdl.packet.rx_parser import RxMeta
from hdl.packet.tx_builder import TxMeta
from hdl.stream.axis import AxiStreamSignature, check_width, keep_mask
from hdl.stream.register_slice import skid_buffer
from hdl.stream.stream_fifo import StreamFifo
from hdl.stream.stream_fork import StreamFork
from hdl.stream.sync_fifo import SyncFifo

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
    "plan": PlanLayout, "header": HeaderConfig, "prev_ip": 32, "src": 64, "dst": 64,
    "deadline": 32,         # cycles with no stage moving before the collective ends with timeout (0: never)
})

#: the engine's data frames since reset (acks not included); a completion reports the difference
#: (``retransmissions``: frames sent again after a loss; the ring's come from its link sender)
NetCounters = data.StructLayout({"tx_frames": 32, "tx_bytes": 64, "rx_frames": 32, "rx_bytes": 64,
                                 "retransmissions": 32})

EngineStatus = data.StructLayout({
    "read_resp": 2,         # worst AXI response of the own-data reads
    "write_resp": 2,        # worst AXI response of the result writes
    "mismatch": len(FIELDS),  # header fields that disagreed with the expected items (OR over the run)
    "overflow": 1,          # an int32 sum saturated
    "framing": 1,           # the reduction unit's operands disagreed in framing
    "host_bytes": 64,       # bytes of results written to host memory (the write commands' lengths)
    "timeout": 1,           # the deadline ran out (switch client: no new result; ring: no stage moved)
    "stall": len(Stall),    # the ring: what it waited for when the deadline ran out (contract.link.Stall)
})


#: ``probe``: each stage's state and the kind of the item it holds, this cycle (contract/stages.py)
StageProbe = data.StructLayout({name: data.StructLayout({"state": StageState, "kind": PhaseKind})
                                for name in st.NAMES})
assert StageProbe.size == st.WIDTH


def engine_members(width: int) -> dict:
    """The ports every collective engine has (this one and the switch client): the DMA engine's user side,
    received frames from the RxParser, frames to the TxBuilder, and the network counters."""
    return {
        **dma_user_members(width),
        "rx_meta": In(stream.Signature(RxMeta)),
        "rx_payload": In(AxiStreamSignature(width)),
        "tx_meta": Out(stream.Signature(TxMeta)),
        "tx_payload": Out(AxiStreamSignature(width)),
        "net": Out(NetCounters),
    }


class _ItemQueue:
    """A stage's queue of items and its current one: ``item``/``have`` describe the packet being moved;
    assert ``done`` in the cycle its last beat is taken, and the next item (if offered) is current in the
    next cycle with no bubble. By default the next item comes straight from the queue; :meth:`follow`
    takes it from elsewhere (a stream fed by the queue)."""

    def __init__(self, m, name, depth, follow_fifo=True):
        self.m = m
        self.fifo = q = SyncFifo(width=Item.size, depth=depth)
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


def _byte_addr(base, item):
    """The host byte address of an item's first element in the tensor at ``base``."""
    return base + Cat(C(0, 2), item.offset)


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
            "flush": In(1),
            "probe": Out(StageProbe),
            # the codecs it uses, shared with the NIC's other users (hdl/nic/nic.py)
            "comp": In(compressor_signature(W)), "d_rx": In(decompressor_signature(W)),
            "d_out": In(decompressor_signature(W)),
            **engine_members(W),
        })

    def elaborate(self, platform):
        """The data path, stage by stage, in the order a packet meets them; ``p`` carries the blocks and the
        signals one stage hands to another."""
        m = Module()
        p = self._blocks(m)
        self._queue_items(m, p)
        self._read_own_data(m, p)
        self._compress(m, p)
        self._fork_compressed(m, p)
        self._take_headers(m, p)
        self._receive(m, p)
        self._buffer_fork_branches(m, p)
        self._transmit(m, p)
        self._write_to_host(m, p)
        self._run_state(m, p)
        self._probe(m, p)
        return m

    def _blocks(self, m):
        """The sequencer, codecs, reduction unit, forks, header generator and checker, and their settings."""
        W, cfg = self.width, self.cfg
        p = SimpleNamespace(
            seq=RingSequencer(), ru=ReductionUnit(W), fork1=StreamFork(W), fork2=StreamFork(W),
            rx_check=RxItemCheck(), tx_hdr=TxHeaderGen(),
        )
        for name, block in vars(p).items():
            m.submodules[name] = block
        p.comp, p.d_rx, p.d_out = self.comp, self.d_rx, self.d_out
        p.aborting = Signal()
        h = cfg.header
        p.codec = h.codec
        p.next_rank = Mux(h.rank == h.nodes - 1, 0, h.rank + 1)
        p.prev_rank = Mux(h.rank == 0, h.nodes - 1, h.rank - 1)
        m.d.comb += [
            p.seq.plan.eq(cfg.plan), p.seq.start.eq(self.start),
            p.comp.cfg_codec.eq(h.codec), p.d_rx.cfg_codec.eq(h.codec), p.d_out.cfg_codec.eq(h.codec),
            p.ru.cfg_dtype.eq(h.dtype), p.ru.stat_clear.eq(self.start),
            p.tx_hdr.cfg.eq(h), p.tx_hdr.start.eq(self.start),
            p.rx_check.cfg.rank.eq(h.rank), p.rx_check.cfg.nodes.eq(h.nodes),
            p.rx_check.cfg.codec.eq(h.codec), p.rx_check.cfg.dtype.eq(h.dtype),
            p.rx_check.cfg.job.eq(h.job), p.rx_check.cfg.collective.eq(h.collective),
            p.rx_check.cfg.prev_ip.eq(cfg.prev_ip), p.rx_check.start.eq(self.start),
        ]
        return p

    def _queue_items(self, m, p):
        """Each sequencer item goes to the queue of every stage that has work for it (:data:`STAGES`), all
        in the same cycle: the sequencer waits while any of those queues is full."""
        depth = self.queue_depth
        q = {name: _ItemQueue(m, name, depth, follow_fifo=name not in ("receive", "transmit")) for name in STAGES}
        q["own"] = _ItemQueue(m, "own", depth)           # read commands issued, data not yet routed
        items = p.seq.items
        need = {name: Signal(name=f"need_{name}") for name in STAGES}
        for name, kinds in STAGES.items():
            m.d.comb += need[name].eq(_any(items.payload.kind == k for k in kinds))
        all_room = Signal()
        m.d.comb += [all_room.eq(_all(~need[n] | q[n].fifo.w_rdy for n in STAGES)), items.ready.eq(all_room)]
        for name in STAGES:
            m.d.comb += [q[name].fifo.w_data.eq(items.payload),
                         q[name].fifo.w_en.eq(items.valid & all_room & need[name])]
        p.q = q

    def _read_own_data(self, m, p):
        """One DMA read per own packet; its item then waits in the ``own`` queue, which routes the data:
        send and gather -> the compressor's input (``p.own_send``), reduce and final -> reduction unit
        operand b. Tracks the worst read response (``p.read_resp``)."""
        rdq, own, ru, rd = p.q["read"], p.q["own"], p.ru, self.rd_data
        issued = self.rd_cmd.valid & self.rd_cmd.ready
        m.d.comb += [
            self.rd_cmd.valid.eq(rdq.have & own.fifo.w_rdy),
            self.rd_cmd.payload.addr.eq(_byte_addr(self.cfg.src, rdq.item)),
            self.rd_cmd.payload.length.eq(Cat(C(0, 2), rdq.item.count)),
            own.fifo.w_data.eq(rdq.item), own.fifo.w_en.eq(issued), rdq.done.eq(issued),
        ]
        # own packets to compress wait in a FIFO, so that the reads move on to the next sum's operand while
        # the compressor still takes them: the reduction unit's pipeline then fills before the compressor
        # turns to that sum (without it, 6 cycles lost at every send -> reduce turn)
        m.submodules.fifo_own = own_fifo = StreamFifo(self.width, self.fork_fifo_beats)
        own_send = own_fifo.s_axis
        p.own_send = own_fifo.m_axis
        p.probe = {"read": (own.have, own.item.kind, rd.tvalid, rd.tready)}
        t1 = _pass(m, rd, own_send, own.kind_is(*OWN_ONLY))
        t2 = _pass(m, rd, ru.s_axis_b, own.kind_is(*SUMS))
        m.d.comb += [rd.tready.eq(Mux(own.kind_is(*OWN_ONLY), own_send.tready, ru.s_axis_b.tready) & own.have),
                     own.done.eq((t1 | t2) & rd.tlast)]
        p.read_resp = Signal(2)
        with m.If(rd.tvalid & rd.tready & (rd.tuser > p.read_resp)):
            m.d.sync += p.read_resp.eq(rd.tuser)

    def _compress(self, m, p):
        """The compressor's input: own data (send, gather) or the reduction unit's sum (reduce, final)."""
        cq, c_in, own_send, ru = p.q["compress"], p.comp.s_axis, p.own_send, p.ru
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
        p.probe["compress"] = (cq.have, cq.item.kind, c_in.tvalid, c_in.tready)

    def _fork_compressed(self, m, p):
        """Fork 1: compressed packets -> transmit (all but scatter_end), and -> the host decompressor
        (final, gather, scatter_end)."""
        f1, comp, fork1 = p.q["fork1"], p.comp, p.fork1
        t = _pass(m, comp.m_axis, fork1.s_axis, f1.have)
        m.d.comb += [comp.m_axis.tready.eq(fork1.s_axis.tready & f1.have),
                     fork1.enable_a.eq(~f1.kind_is(SCATTER_END)), fork1.enable_b.eq(f1.kind_is(*TO_HOST_FROM_FORK1)),
                     f1.done.eq(t & comp.m_axis.tlast)]
        p.probe["fork1"] = (f1.have, f1.item.kind, comp.m_axis.tvalid, comp.m_axis.tready)

    def _take_headers(self, m, p):
        """Every data header from the parser waits in ``rx_meta_q`` (room for RX_FRAMES, which credits never
        exceed; acks go to the link sender, not here). ``flush`` empties it and drops received payloads while
        no collective runs (the link reset)."""
        cc, meta = self.credits, self.rx_meta
        m.submodules.rx_meta_q = p.rx_meta_q = rx_meta_q = ResetInserter(self.flush)(
            SyncFifo(width=RxMeta.size, depth=cc.rx_frames))
        m.d.comb += [meta.ready.eq(rx_meta_q.w_rdy | self.flush),
                     rx_meta_q.w_data.eq(meta.payload), rx_meta_q.w_en.eq(meta.valid & ~self.flush)]
        # the queue's head reaches the check through a register slice (emptied with the queue): the
        # check's verdict, which waits on the receive queue and the payload's way out, stops at its
        # registers and does not reach into the queue's level
        p.rx_head = stream.Signature(RxMeta).create(path=("rx_head",))
        sl = Module()
        skid_buffer(sl, "rx_head", rx_meta_q.r_rdy, rx_meta_q.r_en, p.rx_head.valid, p.rx_head.ready,
                    [(rx_meta_q.r_data, p.rx_head.payload)])
        m.submodules.rx_head_slice = ResetInserter(self.flush)(sl)

    def _receive(self, m, p):
        """Received headers are checked against the receive queue's items (:class:`RxItemCheck`, OR of the
        mismatches in ``p.mismatch``); payloads go to the receive decompressor (reduce, final, scatter_end)
        or to fork 2 (forward, last). Once the deadline has run out (``p.aborting``) an item with no header
        waiting takes a payload of zeros of its size instead (``synthetic``), so that every stage finishes.
        Counts the data frames and bytes received (the completion's)."""
        rq, rx_check = p.q["receive"], p.rx_check
        B = self.width // 8
        m.d.comb += [
            rx_check.items.valid.eq(rq.fifo.r_rdy), rx_check.items.payload.eq(rq.fifo.r_data),
            rx_check.s_meta.payload.eq(p.rx_head.payload), rx_check.s_meta.valid.eq(p.rx_head.valid),
            p.rx_head.ready.eq(rx_check.s_meta.ready), rx_check.bypass.eq(p.aborting),
        ]
        # the receive queue's current item is the checked one (RxItemCheck is combinational)
        checked = rx_check.checked
        checked_take = rq.follow(checked.valid, checked.payload.item)
        m.d.comb += [checked.ready.eq(rq.free), rq.fifo.r_en.eq(rx_check.items.valid & rx_check.items.ready)]
        p.mismatch = Signal(len(FIELDS))
        with m.If(checked_take & (checked.payload.mismatch != 0)):
            m.d.sync += p.mismatch.eq(p.mismatch | checked.payload.mismatch)
        # the payload: the parser's, or zeros of the item's size for a synthetic item
        synthetic = Signal()
        zeros_left = Signal(range(4 * 1024 + 2 * B + 1))      # bytes of zeros still to give (MAX_P fp32 at most)
        plen = payload_bytes(m, p.codec, checked.payload.item.count, "synthetic_plen")
        rx = AxiStreamSignature(self.width).create(path=("rx_in",))
        real = self.rx_payload
        # the zeros' beat (valid, last, keep) is kept in registers, set from the count a cycle after an item
        # takes it (``z_load``: the synthetic payload starts a cycle later; it only runs once the deadline has)
        # and from the count that is left as a beat goes: nothing compares on the way to the receive queue
        z_valid, z_last, z_keep, z_load = Signal(), Signal(), Signal(B), Signal()

        def zeros(value):
            return [zeros_left.eq(value), z_valid.eq(value != 0), z_last.eq(value <= B),
                    z_keep.eq(keep_mask(Mux(value > B, B, value), B))]
        m.d.comb += [
            rx.tdata.eq(Mux(synthetic, 0, real.tdata)),
            rx.tkeep.eq(Mux(synthetic, z_keep, real.tkeep)),
            rx.tlast.eq(Mux(synthetic, z_last, real.tlast)),
            rx.tvalid.eq(Mux(synthetic, z_valid, real.tvalid)),
            real.tready.eq((~synthetic & rx.tready) | self.flush),
        ]
        rest = Signal.like(zeros_left)
        m.d.comb += rest.eq(Mux(zeros_left > B, zeros_left - B, 0))
        m.d.sync += z_load.eq(0)
        with m.If(z_load):
            m.d.sync += zeros(zeros_left)
        with m.If(synthetic & rx.tvalid & rx.tready):
            m.d.sync += zeros(rest)
        with m.If(checked_take):                # (after the lines above: a new item's size wins)
            m.d.sync += [synthetic.eq(checked.payload.synthetic), zeros_left.eq(plen), z_valid.eq(0),
                         z_load.eq(1)]
        # received operands wait for the decompressor in a FIFO: it takes a compressed beat only every few
        # cycles (bfp8: one in four), and a reduce packet fed to it straight held the receive router until
        # it was decoded, so the forwarded packets behind it waited too and, at N = 8, the router's time
        # (decode time + forwarded beats) exceeded the datapath bound
        d_rx, fork2 = p.d_rx, p.fork2
        m.submodules.fifo_rx = rx_fifo = StreamFifo(self.width, self.fork_fifo_beats, len(d_rx.s_axis.tuser))
        wiring.connect(m, rx_fifo.m_axis, wiring.flipped(d_rx.s_axis))
        to_d_rx = rx_fifo.s_axis
        t1 = _pass(m, rx, to_d_rx, rq.kind_is(*SUMS), user=rq.item.count)
        t2 = _pass(m, rx, fork2.s_axis, rq.kind_is(FORWARD, LAST))
        m.d.comb += [
            rx.tready.eq(Mux(rq.kind_is(*SUMS), to_d_rx.tready, fork2.s_axis.tready) & rq.have),
            rq.done.eq((t1 | t2) & rx.tlast),
            fork2.enable_a.eq(rq.kind_is(FORWARD)), fork2.enable_b.eq(1),
        ]
        wiring.connect(m, wiring.flipped(d_rx.m_axis), p.ru.s_axis_a)
        p.probe["receive"] = (rq.have, rq.item.kind, rx.tvalid, rx.tready)
        rx_frames, rx_bytes = Signal(32), Signal(64)         # received here since reset
        rx_plen = payload_bytes(m, p.codec, rq.item.count, "rx_plen")
        with m.If(rq.done & ~synthetic):
            m.d.sync += [rx_frames.eq(rx_frames + 1), rx_bytes.eq(rx_bytes + FRAME_HEADER_BYTES + rx_plen)]
        m.d.comb += [self.net.rx_frames.eq(rx_frames), self.net.rx_bytes.eq(rx_bytes)]

    def _buffer_fork_branches(self, m, p):
        """FIFOs behind the forks' branches that wait on another stage (D_out for final and forwarded
        packets, transmit for forwarded ones): without them the compressor, the receive router and D_out
        run in lock step within a key (a final packet holds the compressor until D_out is free; a forwarded
        one holds the receive router, starving the next reduce). ``p.branch[name]`` is each FIFO's output."""
        p.branch = {}
        for name, src in (("f1a", p.fork1.m_axis_a), ("f1b", p.fork1.m_axis_b), ("f2a", p.fork2.m_axis_a),
                          ("f2b", p.fork2.m_axis_b)):
            m.submodules[f"fifo_{name}"] = f = StreamFifo(self.width, self.fork_fifo_beats)
            wiring.connect(m, src, f.s_axis)
            p.branch[name] = f.m_axis

    def _transmit(self, m, p):
        """Header record (:class:`TxHeaderGen`) + payload (fork 1 for own packets, fork 2 for forwarded
        ones) to the link sender, which numbers the frame and holds it within the next rank's credits. The
        header is offered only once the packet's first beat is there: from then on the payload needs nothing
        from the network (received operands are whole in the parser's buffer), so a frame in the builder
        never waits on a frame still to be received, and acks, nacks and resends are never stuck behind one.
        Once the deadline has run out a new item's packet is taken and dropped (``sink``) instead. Counts the
        data frames sent."""
        tq, tx_hdr = p.q["transmit"], p.tx_hdr
        sink, hdr_sent = Signal(), Signal()
        take = tq.follow(tq.fifo.r_rdy, tq.fifo.r_data)
        m.d.comb += tq.fifo.r_en.eq(take)
        tp = self.tx_payload
        fwd = tq.kind_is(FORWARD)
        a1, a2 = p.branch["f1a"], p.branch["f2a"]
        src_valid, src_last = Mux(fwd, a2.tvalid, a1.tvalid), Mux(fwd, a2.tlast, a1.tlast)
        m.d.comb += [
            tx_hdr.items.valid.eq(tq.have & ~hdr_sent & ~sink & src_valid & ~p.aborting),
            tx_hdr.items.payload.eq(tq.item),
        ]
        with m.If(tx_hdr.items.valid & tx_hdr.items.ready):
            m.d.sync += hdr_sent.eq(1)
        with m.If(take):
            m.d.sync += [sink.eq(p.aborting), hdr_sent.eq(0)]
        with m.Elif(tq.have & ~hdr_sent & ~sink & p.aborting):
            m.d.sync += sink.eq(1)          # the header never left: drop the packet
        sent = tx_hdr.m_meta
        wiring.connect(m, sent, wiring.flipped(self.tx_meta))
        p.tx_waiting = tq.have & ~hdr_sent & ~sink & src_valid     # a header the link sender does not take
        tx_frames, tx_bytes = Signal(32), Signal(64)
        hdr_plen = payload_bytes(m, sent.payload.ainic.codec, sent.payload.ainic.count, "hdr_plen")
        with m.If(sent.valid & sent.ready):
            m.d.sync += [tx_frames.eq(tx_frames + 1), tx_bytes.eq(tx_bytes + FRAME_HEADER_BYTES + hdr_plen)]
        m.d.comb += [self.net.tx_frames.eq(tx_frames), self.net.tx_bytes.eq(tx_bytes)]
        out_ready = Mux(sink, 1, tp.tready & hdr_sent)
        m.d.comb += [
            tp.tdata.eq(Mux(fwd, a2.tdata, a1.tdata)), tp.tkeep.eq(Mux(fwd, a2.tkeep, a1.tkeep)),
            tp.tlast.eq(src_last),
            tp.tvalid.eq(tq.have & ~sink & hdr_sent & src_valid),
            a1.tready.eq(tq.kind_is(SEND, REDUCE, FINAL, GATHER) & out_ready),
            a2.tready.eq(fwd & out_ready),
            tq.done.eq(tq.have & src_valid & out_ready & src_last),
        ]
        p.probe["transmit"] = (tq.have & ~sink, tq.item.kind, src_valid, out_ready)

    def _write_to_host(self, m, p):
        """D_out (final, gather, scatter_end from fork 1; forward, last from fork 2) -> DMA write. The write
        command goes out with the packet's first beat; the data follows through D_out. Tracks the writes
        not yet answered (``p.pending``), the worst write response and the bytes written."""
        hq, d = p.q["host_out"], p.d_out.s_axis
        b1, b2 = p.branch["f1b"], p.branch["f2b"]
        fin = hq.kind_is(*TO_HOST_FROM_FORK1)
        m.d.comb += [
            d.tdata.eq(Mux(fin, b1.tdata, b2.tdata)), d.tkeep.eq(Mux(fin, b1.tkeep, b2.tkeep)),
            d.tlast.eq(Mux(fin, b1.tlast, b2.tlast)), d.tuser.eq(hq.item.count),
            d.tvalid.eq(hq.have & Mux(fin, b1.tvalid, b2.tvalid)),
            b1.tready.eq(fin & d.tready), b2.tready.eq(hq.kind_is(FORWARD, LAST) & d.tready),
        ]
        cmd_sent = Signal()
        m.d.comb += [
            self.wr_cmd.valid.eq(hq.have & ~cmd_sent),
            self.wr_cmd.payload.addr.eq(_byte_addr(self.cfg.dst, hq.item)),
            self.wr_cmd.payload.length.eq(Cat(C(0, 2), hq.item.count)),
            hq.done.eq(d.tvalid & d.tready & d.tlast & (cmd_sent | self.wr_cmd.ready)),
        ]
        with m.If(hq.done):
            m.d.sync += cmd_sent.eq(0)
        with m.Elif(self.wr_cmd.valid & self.wr_cmd.ready):
            m.d.sync += cmd_sent.eq(1)
        wiring.connect(m, wiring.flipped(p.d_out.m_axis), wiring.flipped(self.wr_data))
        wd = self.wr_data
        p.probe["host_out"] = (hq.have, hq.item.kind, d.tvalid, d.tready)
        p.probe["write"] = (hq.have | wd.tvalid, hq.item.kind, wd.tvalid, wd.tready)
        p.pending = Signal(32)
        p.write_resp = Signal(2)
        p.host_bytes = Signal(64)
        issued = self.wr_cmd.valid & self.wr_cmd.ready
        answered = self.wr_status.valid
        m.d.comb += self.wr_status.ready.eq(1)
        m.d.sync += p.pending.eq(p.pending + issued - answered)
        with m.If(issued):
            m.d.sync += p.host_bytes.eq(p.host_bytes + self.wr_cmd.payload.length)
        with m.If(answered & (self.wr_status.payload > p.write_resp)):
            m.d.sync += p.write_resp.eq(self.wr_status.payload)

    def _run_state(self, m, p):
        """``busy`` from ``start`` until the sequencer is done, every queue is empty and every write has been
        answered; ``status`` (cleared by ``start``). The deadline: ``cfg.deadline`` cycles in which no item
        left the sequencer and no stage finished a packet start the abort (``p.aborting``): received packets
        that will not come are made up, packets to send are dropped, and the run ends with ``status.timeout``
        and ``status.stall`` (what was waiting when it ran out)."""
        running = Signal()
        all_idle = Signal()
        m.d.comb += all_idle.eq(_all(q.idle for q in p.q.values()))
        quiet = Signal(32)
        moved = (p.seq.items.valid & p.seq.items.ready) | _any(q.done for q in p.q.values())
        stall = Signal(len(Stall))
        timed_out = Signal()
        out_of_time = running & ~p.aborting & (self.cfg.deadline != 0) & (quiet >= self.cfg.deadline)
        rq = p.q["receive"]
        with m.If(self.start | moved | ~running):
            m.d.sync += quiet.eq(0)
        with m.Else():
            m.d.sync += quiet.eq(quiet + 1)
        with m.If(self.start):
            m.d.sync += [running.eq(1), p.read_resp.eq(0), p.write_resp.eq(0), p.mismatch.eq(0), p.host_bytes.eq(0),
                         p.aborting.eq(0), stall.eq(0), timed_out.eq(0)]
        with m.Elif(running & ~p.seq.busy & all_idle & (p.pending == 0)):
            m.d.sync += [running.eq(0), p.aborting.eq(0)]
        with m.Elif(out_of_time):
            m.d.sync += [p.aborting.eq(1), timed_out.eq(1),
                         stall.eq(Cat((rq.fifo.r_rdy | rq.have) & ~p.rx_head.valid, p.tx_waiting,
                                      (p.pending != 0) | (p.q["own"].have & ~self.rd_data.tvalid)))]
        st = self.status
        m.d.comb += [
            self.busy.eq(running),
            st.read_resp.eq(p.read_resp), st.write_resp.eq(p.write_resp), st.mismatch.eq(p.mismatch),
            st.overflow.eq(p.ru.stat_overflow), st.framing.eq(p.ru.stat_framing), st.host_bytes.eq(p.host_bytes),
            st.timeout.eq(timed_out), st.stall.eq(stall),
        ]

    def _probe(self, m, p):
        """``probe``: per stage (contract/stages.py), idle without an item, busy when a beat moved, starved when
        its input offered none, blocked when its output did not take the one offered. Wires only."""
        seq = p.seq.items
        p.probe["sequencer"] = (p.seq.busy, seq.payload.kind, seq.valid, seq.ready)
        for name in st.NAMES:
            have, kind, valid, ready = p.probe[name]
            state = Mux(~have, StageState.idle,
                        Mux(valid & ready, StageState.busy, Mux(valid, StageState.blocked, StageState.starved)))
            m.d.comb += [getattr(self.probe, name).state.eq(state),
                         getattr(self.probe, name).kind.eq(Mux(have, kind, 0))]
