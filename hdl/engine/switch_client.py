"""The NIC's side of in-network aggregation: a switch all-reduce, packets in order as their slots free up, with
retransmission and a deadline (docs/in_network.md, "The worker")."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from contract import stages as st
from contract.enums import DATA_OPCODES, Codec, Dtype, FrameFlag, FrameOpcode, StageState
from contract.in_network import MAX_JOB_WORKERS, MAX_NIC_WINDOW, NIC_FRAME_STORE_BYTES, PAUSE_SHIFT, SWITCH_RANK
from contract.limits import MAX_COUNT
from contract.protocol import FRAME_HEADER_BYTES, MAX_P, VERSION
from hdl.codec.compressor import compressor_signature
from hdl.codec.decompressor import decompressor_signature
from hdl.codec.wire_size import payload_bytes
from hdl.engine.collective_engine import EngineStatus, engine_members
from hdl.link.link_numbers import LinkNumbers
from hdl.stream.axis import check_width
from hdl.stream.frame_store import FrameStore
from hdl.stream.stream_fifo import StreamFifo
from hdl.stream.sync_fifo import SyncFifo

J_BITS = (MAX_COUNT // 16).bit_length()         # packet indices of one collective
COUNT_BITS = MAX_COUNT.bit_length()

SwitchConfig = data.StructLayout({
    "src": 64, "dst": 64,
    "count": COUNT_BITS,                # elements L
    "packet": range(MAX_P + 1),         # P
    "codec": Codec, "dtype": Dtype,
    "job": 16, "worker": range(MAX_JOB_WORKERS), "collective": 16,
    "window_log2": 3,
    "switch_mac": 48, "switch_ip": 32,
    "timeout": 32, "backoff_max": 3, "deadline": 32,
})

#: a contribution to send: packet j (of this collective, at element offset ``off``, in the set ``set``) in slot
#: ``slot``, a resend or not, and how often the slot's packet has been sent again (its timer's backoff)
_Send = data.StructLayout({"j": J_BITS, "off": COUNT_BITS, "set": 1, "slot": range(MAX_NIC_WINDOW), "retx": 1,
                           "resends": 3})

#: what a slot remembers (in memory): the packet in flight in it (index, offset) and how often it was sent again
_SlotRecord = data.StructLayout({"j": J_BITS, "off": COUNT_BITS, "resends": 3})

#: a frame whose data was asked for, waiting for its header to go: the send, its element count and psn
_Header = data.StructLayout({"send": _Send, "count": range(MAX_P + 1), "psn": 32})


#: ``probe``: each stage's state and the kind of the item it holds, this cycle (contract/stages.py, SWITCH_STAGES)
SwitchProbe = data.StructLayout({name: data.StructLayout({"state": StageState, "kind": 3})
                                 for name in st.SWITCH_NAMES})


def switch_client_signature(width: int) -> wiring.Signature:
    """The :class:`SwitchClient`'s ports (a NIC built without it has an ``Absent`` block with these)."""
    W = width
    return wiring.Signature({
        "cfg": In(SwitchConfig),
        "start": In(1),
        "busy": Out(1),
        "status": Out(EngineStatus),
        "psn": Out(32),
        "psn_set": In(1),
        "psn_value": In(32),
        **engine_members(W),
        # the codecs it uses, shared with the NIC's other users (hdl/nic/nic.py)
        "comp": In(compressor_signature(W)), "dec": In(decompressor_signature(W)),
        "dup_results": Out(32),
        "timeouts": Out(32),
        "stored_resends": Out(32),
        "probe": Out(SwitchProbe),
    })


class SwitchClient(wiring.Component):
    """Runs one switch all-reduce of ``cfg.count`` elements from ``start`` until ``busy`` falls.

    * Packet j holds elements [jP, min(jP + P, L)) of ``cfg.src`` and has the packet number g = ``psn`` + j;
      it goes to slot g mod S, set (g div S) mod 2 (S = 2**``cfg.window_log2``). Packets go out in
      order of j, each once its slot is free: packets 0 .. S − 1 at once; the result of packet j (an
      ``aggregated`` frame on ``rx_meta``/``rx_payload`` that answers the packet in flight in its slot) is
      decoded and written to ``cfg.dst`` and frees the slot for packet j + S, which goes once the packets
      before it have. Anything else received is dropped and counted (``dup_results``).
    * Each contribution is read by DMA, encoded (:class:`Compressor`) and sent through the TxBuilder
      (``tx_meta``, ``tx_payload``) to the switch, and its encoded beats are kept in the slot's place in
      the frame store (:class:`FrameStore` of ``store_bytes``: the build's, ``NIC_FRAME_STORE_BYTES`` in the
      full one). When its last beat leaves, its slot's timer starts:
      ``cfg.timeout << min(resends, cfg.backoff_max)`` cycles later, with no result, it is sent again
      (flagged ``retransmit``) once a later packet's result has come or the results have paused for
      ``cfg.timeout >> PAUSE_SHIFT`` cycles (a late result comes in order, behind the others), as is a contribution asked for (an ``agg_nack``, or a frame from the switch that shows
      the one before it lost). Resends queue apart (``retx_depth`` of them) and go before first sends. A
      resend is sent from the frame store when the window's frames fit it (``contract.in_network.frames_fit``:
      then it costs the wire, not the DMA read and the compressor that bind with a codec), else read and
      encoded again.
    * With no new result for ``cfg.deadline`` cycles the collective stops: ``status.timeout``.
    * ``psn`` (AGG_PSN) starts at 0 after reset, is set by ``psn_set``, and advances by the collective's
      packet count when it ends.
    * ``busy`` falls once every result is written and answered (or on the deadline) and nothing is in
      flight in the engine; the DMA ports are then free.
    * ``probe``: what each stage (contract/stages.py, ``SWITCH_STAGES``) does this cycle. Wires only.
    """

    def __init__(self, width: int = 512, send_depth: int = 2 * MAX_NIC_WINDOW, retx_depth: int = 16,
                 store_bytes: int = NIC_FRAME_STORE_BYTES):
        self.width = check_width(width, self)
        self.send_depth, self.retx_depth, self.store_bytes = send_depth, retx_depth, store_bytes
        super().__init__(switch_client_signature(width))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        S = Signal(range(MAX_NIC_WINDOW + 1))
        m.d.comb += S.eq(1 << cfg.window_log2)
        now = Signal(32)
        m.d.sync += now.eq(now + 1)

        # -- the frame store: each slot's frame as it left, for its resends (when the window's frames fit) ----
        W, B = self.width, self.width // 8
        depth = self.store_bytes * 8 // W
        m.submodules.store = store = FrameStore(W, depth, 7)
        # log2 of a frame's beats (contract.in_network.frame_stride) and whether S of them fit, from the
        # configuration in registers (it holds still while a collective runs)
        frame_beats = Signal(range(depth + 1))
        m.d.sync += frame_beats.eq((payload_bytes(m, cfg.codec, cfg.packet, "store_bytes") + B - 1) >> (B.bit_length() - 1))
        stride = Signal(range(depth.bit_length()))
        with m.If(frame_beats > 1):
            for k in range(depth.bit_length()):
                with m.If((frame_beats - 1) >> k != 0):
                    m.d.sync += stride.eq(k + 1)
        with m.Else():
            m.d.sync += stride.eq(0)
        fits = Signal()
        m.d.sync += fits.eq((S << stride) <= depth)
        m.d.comb += [store.cfg_stride.eq(stride), store.w_restart.eq(self.start)]

        running = Signal()
        stopping = Signal()                     # the deadline passed: finish what is in flight, send nothing
        m.d.comb += self.busy.eq(running)
        first = Signal(32)                      # psn of packet 0
        launched = Signal(J_BITS + 1)           # packets sent a first time
        done_elems = Signal(COUNT_BITS + 1)
        last_progress = Signal(32)
        # a slot's timer runs out only once the worker's results have paused (none new for ``cfg.timeout >>
        # PAUSE_SHIFT`` cycles) or a later packet's result has come. Results come in order unless
        # something was lost, so a packet not overtaken may only be late behind the window's (at N = 8 with
        # a codec and 1 % loss, copies of such packets each drew a stored result through the switch's result
        # bus, made the next results later and stormed)
        paused = Signal()
        m.d.sync += paused.eq((now - last_progress) >= (cfg.timeout >> PAUSE_SHIFT))
        # ``newest``: the newest packet answered, plus one (0: none)
        newest = Signal(J_BITS + 1)
        took, took_j = Signal(), Signal(J_BITS + 1)
        writes_out = Signal(J_BITS + 1)         # DMA write commands issued, not yet answered


        def count_of(off):
            rest = cfg.count - off
            return Mux(rest > cfg.packet, cfg.packet, rest)

        def set_of(j):
            """The set (shadow copy) of packet j: bit log2(S) of its psn."""
            return ((first + j) >> cfg.window_log2)[0]

        # -- the slots: the packet in flight, its resends and timer ------------------------------------------
        # Flags in registers; the packet, its resends and its timer in memory (one write port each; read by
        # the resend scan a slot ahead, and by the receive side as a record is offered). Offsets, counts and
        # psns travel with each send, so no path multiplies or reads a memory into a decision in one cycle.
        inflight = Signal(MAX_NIC_WINDOW)
        queued = Signal(MAX_NIC_WINDOW)         # a send of the slot's packet is waiting to leave
        phase = Signal(MAX_NIC_WINDOW)          # the set of the slot's packet in flight
        m.submodules.slot_mem = slot_mem = Memory(shape=_SlotRecord, depth=MAX_NIC_WINDOW, init=[])
        m.submodules.due_mem = due_mem = Memory(shape=32, depth=MAX_NIC_WINDOW, init=[])
        rec_w, due_w = slot_mem.write_port(), due_mem.write_port()
        rec_rx, rec_scan = (slot_mem.read_port(transparent_for=(rec_w,)) for _ in range(2))
        due_scan = due_mem.read_port(transparent_for=(due_w,))

        m.submodules.send_q = send_q = SyncFifo(width=_Send.size, depth=self.send_depth)
        # resends wait in a queue of their own that the issue stage serves first: a resend asked for must not
        # wait behind a window of first sends (while it waits, the other workers' timers for that slot run)
        m.submodules.retx_q = retx_q = SyncFifo(width=_Send.size, depth=self.retx_depth)
        push = Signal(_Send)
        m.d.comb += [send_q.w_data.eq(push), retx_q.w_data.eq(push)]

        # -- start ------------------------------------------------------------------------------------------
        with m.If(self.start):
            m.d.sync += [running.eq(1), stopping.eq(0), first.eq(self.psn), launched.eq(0), done_elems.eq(0),
                         last_progress.eq(now), inflight.eq(0), queued.eq(0), writes_out.eq(0),
                         self.status.eq(0)]
        with m.If(self.psn_set & ~running):
            m.d.sync += self.psn.eq(self.psn_value)

        # -- receive: a result for the packet in flight in its slot, or a frame to drop ----------------------
        rx, rp = self.rx_meta, self.rx_payload
        h = rx.payload.ainic
        rslot = h.slot[:7]
        # A record waits unchanged while it is not taken: its slot's record is read as it is first offered
        # (age 0), compared in two registered stages (ages 1 and 2), and the record is answered from age 3 on
        # (while the one before is written, the next one ages: back-to-back results lose nothing).
        # A write to the waiting record's slot (the next packet launched into it, or a resend queued) starts
        # its age again: the comparison must see the slot's new packet. (Without it, a copy of a result that
        # came right behind the original, with a payload of a few beats, was compared with the record of the
        # packet it answered, after that packet's result had freed the slot and the next one had launched
        # into it: the copy was taken as the new packet's result, the new packet was never sent, and every
        # worker waited for it. Seen at W = 512, bfp8, 128 slots, 1 % loss.)
        age = Signal(2)
        rewritten = rec_w.en & (rec_w.addr == rslot)
        m.d.sync += age.eq(Mux(rx.valid & ~rx.ready & ~rewritten, Mux(age == 3, 3, age + 1), 0))
        m.d.comb += rec_rx.addr.eq(rslot)
        r = rec_rx.data
        # the switch's frames to this port (results and agg_nacks) are numbered (``chunk``) and name the psn of
        # the one before (``reserved``): whether the one before this one was lost, found as the record waits
        # (the newest changes only as a record is taken, before the next one is offered)
        m.submodules.numbers = numbers = LinkNumbers()
        m.d.comb += numbers.number.eq(h.chunk)
        s1_same = Signal()                      # stage 1: the header against the slot's record
        s1_rest = Signal(COUNT_BITS + 1)
        m.d.sync += [
            s1_same.eq((h.opcode == FrameOpcode.aggregated) & (h.job == cfg.job) & (h.slot < S)
                       & (h.psn == first + r.j) & (((h.flags & FrameFlag.shadow) != 0) == set_of(r.j))
                       & (h.offset == r.off) & (h.codec == cfg.codec) & (h.dtype == cfg.dtype)),
            s1_rest.eq(cfg.count - r.off),
        ]
        s2_same = Signal()                      # stage 2: the count
        wr_addr = Signal(64)
        m.d.sync += [s2_same.eq(s1_same & (h.count == Mux(s1_rest > cfg.packet, cfg.packet, s1_rest))),
                     wr_addr.eq(cfg.dst + Cat(C(0, 2), h.offset))]
        looked = rx.valid & (age == 3)
        # whether the record's slot has a packet in flight, from a register: the slot's flag as it was a
        # cycle ago, with the one change that can come meanwhile while the record waits (the next packet
        # launching that slot; a result taken ends the wait, a start clears every flag)
        slot_live = Signal()
        expect = running & ~stopping & s2_same & slot_live
        dec = self.dec
        m.d.comb += dec.cfg_codec.eq(cfg.codec)
        take_result = Signal()
        r_first = Signal(init=1)
        r_count = Signal(16)                    # the element count of the result being written
        # the payload passing: none, a result's (decoded and written), or a dropped frame's. A record is
        # taken as the payload before it ends (its last beat), so the decoder is fed back to back; its
        # DMA write command goes ahead while it waits (the writer queues commands), and once asked for,
        # the record is taken as a result whatever happens meanwhile (the deadline), so the command gets
        # its data
        writing, dropping = Signal(), Signal()
        in_payload = Signal()
        m.d.comb += in_payload.eq(writing | dropping)
        d = dec.s_axis
        m.d.comb += [d.tdata.eq(rp.tdata), d.tkeep.eq(rp.tkeep), d.tlast.eq(rp.tlast), d.tvalid.eq(rp.tvalid & writing),
                     d.tuser.eq(Mux(r_first, r_count, 0)),
                     rp.tready.eq(Mux(writing, d.tready, dropping))]
        ends = rp.tvalid & rp.tready & rp.tlast
        free = ~in_payload | ends
        with m.If(rp.tvalid & rp.tready & writing):
            m.d.sync += r_first.eq(0)
        with m.If(ends):
            m.d.sync += [writing.eq(0), dropping.eq(0)]
        cmd_sent = Signal()                     # the waiting record's write command has gone
        ask = rx.valid & looked & expect & ~cmd_sent
        m.d.comb += [self.wr_cmd.valid.eq(ask), self.wr_cmd.payload.addr.eq(wr_addr),
                     self.wr_cmd.payload.length.eq(Cat(C(0, 2), h.count))]
        cmd_go = ask & self.wr_cmd.ready
        with m.If(cmd_go):
            m.d.sync += cmd_sent.eq(1)
        with m.If(rx.valid & looked & free):
            with m.If(cmd_sent | cmd_go):
                m.d.comb += [rx.ready.eq(1), take_result.eq(1)]
                m.d.sync += [r_first.eq(1), writing.eq(1), cmd_sent.eq(0)]
            with m.Elif(~expect):
                m.d.comb += rx.ready.eq(1)
                with m.If(h.opcode != FrameOpcode.agg_nack):
                    m.d.sync += self.dup_results.eq(self.dup_results + 1)
                with m.If(Cat(*[h.opcode == op for op in DATA_OPCODES]).any()):
                    m.d.sync += dropping.eq(1)
        # a record taken: an agg_nack for this job asks for its psn again; a result or agg_nack that shows the
        # frame before it lost asks for that frame's psn (the worker's contribution again: the switch answers a
        # copy for a complete round with the stored result, and absorbs it for a round that waits for it), a
        # cycle later (an agg_nack may ask for both; no record is taken in the next cycle). The asks queue for
        # the resend scan; one that finds the queue full is dropped (the slot's timer remains).
        m.submodules.ask_q = ask_q = SyncFifo(width=32, depth=4)
        consumed = rx.valid & rx.ready
        numbered = (h.opcode == FrameOpcode.aggregated) | (h.opcode == FrameOpcode.agg_nack)
        ask_nack = consumed & (h.opcode == FrameOpcode.agg_nack) & (h.job == cfg.job) & running & ~stopping
        ask_gap, ask_gap_psn = Signal(), Signal(32)
        m.d.sync += [ask_gap.eq(consumed & numbered & numbers.lost & running & ~stopping),
                     ask_gap_psn.eq(h.reserved)]
        m.d.comb += numbers.take.eq(consumed & numbered)
        ask_retry = Signal()                    # a request the scan could not act on, asked again
        ask_retry_psn = Signal(32)
        m.d.comb += [ask_q.w_en.eq(ask_nack | ask_gap | ask_retry),
                     ask_q.w_data.eq(Mux(ask_nack, h.psn, Mux(ask_gap, ask_gap_psn, ask_retry_psn)))]
        with m.If(take_result):
            m.d.sync += r_count.eq(h.count)
        wd, do = self.wr_data, dec.m_axis
        m.d.comb += [wd.tdata.eq(do.tdata), wd.tkeep.eq(do.tkeep), wd.tlast.eq(do.tlast), wd.tvalid.eq(do.tvalid),
                     do.tready.eq(wd.tready)]
        m.d.comb += self.wr_status.ready.eq(1)
        with m.If(self.wr_status.valid & (self.wr_status.payload > self.status.write_resp)):
            m.d.sync += self.status.write_resp.eq(self.wr_status.payload)
        m.d.sync += writes_out.eq(writes_out + (self.wr_cmd.valid & self.wr_cmd.ready) - self.wr_status.valid)

        # -- what to send next: the next packet in order once its slot is free, or a resend ------------------
        # the resend scan: slot ``scan``'s record and timer are read a cycle early; whether its timer ran out is
        # registered with it (``sc_*``) and acted on the cycle after, with the slot's flags as they are then (a
        # timer written meanwhile makes the verdict stale: the slot is scanned again on the next round)
        # A resend asked for (``ask_q``: a psn) takes the scan's turn: its slot is read instead, and its verdict is
        # whether that psn is the slot's packet in flight (instead of whether the timer ran out).
        scan = Signal(7)
        sweep, sweep_next = Signal(7), Signal(7)
        serve = ask_q.r_rdy
        ask_psn = Signal(32)
        m.d.comb += [sweep_next.eq(Mux(sweep + 1 >= S, 0, sweep + 1)), ask_q.r_en.eq(serve)]
        scan_addr = Mux(serve, (ask_q.r_data & (S - 1))[:7], sweep_next)
        m.d.comb += [rec_scan.addr.eq(scan_addr), due_scan.addr.eq(scan_addr)]
        scan_ask = Signal()
        m.d.sync += [scan.eq(scan_addr), scan_ask.eq(serve), ask_psn.eq(ask_q.r_data)]
        with m.If(~serve):
            m.d.sync += sweep.eq(sweep_next)
        # first sends, in psn order: packet init_j, its offset, psn and slot counted up as it goes; it goes
        # when its slot is free (the result of the packet before it in the slot taken). In order, whatever
        # order the results come in: every worker sends the same sequence, so the switch's engines share the
        # load as they do without losses (a worker that queued each slot's next packet as its result came
        # sent a loss's slot late for the rest of the collective, at every worker, and each such packet met
        # another on its engine: N = 8, bfp8, W = 512, 0.1 % loss cost 0.37 of the time)
        init_j = Signal(J_BITS + 1)
        init_off = Signal(COUNT_BITS + 1)
        init_psn = Signal(32)
        can_push = send_q.w_rdy & running & ~stopping
        s0 = (init_psn & (S - 1))[:7]
        # whether a packet is left, the set of the next one and whether its slot is free, kept in flip-flops:
        # found for the next packet as one goes (and at start), so that no compare or variable bit select lies
        # between a send's choice and its record (the configuration holds still while a collective runs). The
        # slot's flag is a cycle old: a slot freed in the last cycle waits a cycle more.
        init_more, init_set, s0_free = Signal(), Signal(), Signal()
        init_go = can_push & init_more & s0_free
        j_up, off_up, psn_up = Signal.like(init_j), Signal.like(init_off), Signal.like(init_psn)
        m.d.comb += [j_up.eq(init_j + 1), off_up.eq(init_off + cfg.packet), psn_up.eq(init_psn + 1)]
        with m.If(self.start):
            m.d.sync += [init_more.eq(cfg.count != 0), init_set.eq(self.psn.bit_select(cfg.window_log2, 1))]
        with m.Elif(init_go):
            m.d.sync += [init_more.eq(off_up < cfg.count), init_set.eq(psn_up.bit_select(cfg.window_log2, 1))]
        s0_next = Signal(7)
        m.d.comb += s0_next.eq(Mux(init_go, (psn_up & (S - 1))[:7], s0))
        m.d.sync += s0_free.eq(~inflight.bit_select(s0_next, 1) & ~(init_go & (s0_next == s0)) & ~self.start)
        m.d.sync += slot_live.eq((inflight.bit_select(rslot, 1) | (init_go & (s0 == rslot))) & ~self.start)

        # the scanned slot's flags are registered with its timer's verdict (its packet in flight and not
        # queued), less what changes that slot in the same cycle: its result (which queues the next packet
        # or ends the slot), the next packet launching it, its own resend (a window of one slot), a
        # start. (A frame that leaves meanwhile writes the slot's timer, which the verdict excludes.)
        # (the slot's set is registered with them: a change to it in this cycle or the next stops the resend)
        sc_slot, sc_due, sc_idle, sc_phase = Signal(7), Signal(), Signal(), Signal()
        sc_ask, sc_ask_psn = Signal(), Signal(32)
        scan_go = ~take_result & ~init_go & retx_q.w_rdy & running & ~stopping & sc_idle & sc_due
        sc_rec = Signal(_SlotRecord)
        timer_due = ~(now - due_scan.data)[31] & ~(due_w.en & (due_w.addr == scan))
        m.d.sync += [sc_slot.eq(scan), sc_rec.eq(rec_scan.data), sc_phase.eq(phase.bit_select(scan, 1)),
                     sc_ask.eq(scan_ask), sc_ask_psn.eq(ask_psn),
                     sc_due.eq((scan < S) & Mux(scan_ask, first + rec_scan.data.j == ask_psn,
                                                     timer_due & (paused | (rec_scan.data.j + 1 < newest)))),
                     sc_idle.eq(inflight.bit_select(scan, 1) & ~queued.bit_select(scan, 1)
                                & ~(take_result & (rslot == scan)) & ~(init_go & (s0 == scan))
                                & ~(scan_go & (sc_slot == scan)) & ~self.start)]

        def queue(slot, j, off, set_, retx=0, resends=0):
            """Queue a send of packet j of ``slot`` (a resend in ``retx_q``) and record it as the slot's packet
            in flight."""
            return [push.j.eq(j), push.off.eq(off), push.set.eq(set_), push.slot.eq(slot), push.retx.eq(retx),
                    push.resends.eq(resends), (retx_q if retx else send_q).w_en.eq(1), rec_w.en.eq(1), rec_w.addr.eq(slot),
                    rec_w.data.j.eq(j), rec_w.data.off.eq(off), rec_w.data.resends.eq(resends)]
        m.d.sync += [took.eq(take_result), took_j.eq(h.psn - first + 1)]
        with m.If(self.start):
            m.d.sync += newest.eq(0)
        with m.Elif(took & (took_j > newest)):
            m.d.sync += newest.eq(took_j)
        with m.If(take_result):
            m.d.sync += [done_elems.eq(done_elems + h.count), last_progress.eq(now),
                         self.status.host_bytes.eq(self.status.host_bytes + Cat(C(0, 2), h.count))]
            m.d.sync += inflight.bit_select(rslot, 1).eq(0)
        with m.If(init_go):
            m.d.comb += queue(s0, init_j, init_off, init_set)
            m.d.sync += [phase.bit_select(s0, 1).eq(init_set), inflight.bit_select(s0, 1).eq(1),
                         queued.bit_select(s0, 1).eq(1), init_j.eq(j_up), init_off.eq(off_up),
                         init_psn.eq(psn_up), launched.eq(launched + 1)]
        with m.Elif(scan_go):
            m.d.comb += queue(sc_slot, sc_rec.j, sc_rec.off, sc_phase, retx=1,
                              resends=Mux(sc_rec.resends == 7, 7, sc_rec.resends + 1))
            m.d.sync += queued.bit_select(sc_slot, 1).eq(1)
        # an ask whose packet is in flight and idle but that lost its turn to a result or the next packet is
        # asked again (when no new ask is queued in the same cycle)
        m.d.comb += [ask_retry.eq(sc_ask & sc_due & sc_idle & ~scan_go & ~ask_nack & ~ask_gap & running),
                     ask_retry_psn.eq(sc_ask_psn)]
        with m.If(self.start):
            m.d.sync += [init_j.eq(0), init_off.eq(0), init_psn.eq(self.psn)]

        # -- send: DMA read, encode, build ------------------------------------------------------------------
        m.submodules.hdr_q = hdr_q = SyncFifo(width=_Header.size, depth=8)
        head = data.View(_Send, Mux(retx_q.r_rdy, retx_q.r_data, send_q.r_data))
        # a send is still due if its packet is the one in flight in its slot; a slot's entries in the queues
        # are its packet in flight or the one before (the next one is queued after the slot's last result,
        # and no resend of the slot is queued until it leaves: resends go first), so the set decides
        def current(send):
            return inflight.bit_select(send.slot, 1) & (phase.bit_select(send.slot, 1) == send.set)

        # the send at the queue's head is staged in registers with its count, psn and host address, then
        # issued (its DMA read asked for, its header queued) or dropped
        # (whether it is still current, its count, psn and address are found from the staged send the
        # cycle after; then whether it is current is kept in a register: only a result for its slot ends that)
        iss = Signal(_Header, name="iss")
        iss_addr = Signal(64, name="iss_addr")
        iss_valid, iss_done, iss_current = Signal(name="iss_valid"), Signal(name="iss_done"), Signal(name="iss_current")
        iss_fresh = Signal(name="iss_fresh")    # staged in the last cycle: whether it is current is found now

        def result_for(slot):
            return take_result & (rslot == slot)
        m.d.sync += [iss_fresh.eq(0),
                     iss_current.eq(Mux(iss_fresh, current(iss.send), iss_current) & ~result_for(iss.send.slot))]
        with m.If((retx_q.r_rdy | send_q.r_rdy) & (~iss_valid | iss_done)):
            m.d.comb += [retx_q.r_en.eq(retx_q.r_rdy), send_q.r_en.eq(~retx_q.r_rdy)]
            m.d.sync += [iss.send.eq(head), iss_valid.eq(1), iss_fresh.eq(1)]
        with m.Elif(iss_done):
            m.d.sync += iss_valid.eq(0)
        with m.If(iss_fresh):                   # its count, psn and host address from the staged send
            m.d.sync += [iss.count.eq(count_of(iss.send.off)), iss.psn.eq(first + iss.send.j),
                         iss_addr.eq(cfg.src + Cat(C(0, 2), iss.send.off))]
        with m.If(iss_valid & ~iss_fresh):
            with m.If(~iss_current | stopping):
                m.d.comb += iss_done.eq(1)                      # its result came meanwhile: nothing to send
            with m.Elif(hdr_q.w_rdy & iss.send.retx & fits):   # its payload comes from the frame store
                m.d.comb += [iss_done.eq(1), hdr_q.w_en.eq(1), hdr_q.w_data.eq(iss)]
            with m.Elif(hdr_q.w_rdy):
                m.d.comb += [self.rd_cmd.valid.eq(1), self.rd_cmd.payload.addr.eq(iss_addr),
                             self.rd_cmd.payload.length.eq(Cat(C(0, 2), iss.count))]
                with m.If(self.rd_cmd.ready):
                    m.d.comb += [iss_done.eq(1), hdr_q.w_en.eq(1), hdr_q.w_data.eq(iss)]
        comp = self.comp
        rd = self.rd_data
        m.d.comb += [comp.cfg_codec.eq(cfg.codec), comp.s_axis.tdata.eq(rd.tdata), comp.s_axis.tkeep.eq(rd.tkeep),
                     comp.s_axis.tlast.eq(rd.tlast), comp.s_axis.tvalid.eq(rd.tvalid), rd.tready.eq(comp.s_axis.tready)]
        with m.If(rd.tvalid & rd.tready & (rd.tuser > self.status.read_resp)):
            m.d.sync += self.status.read_resp.eq(rd.tuser)
        # the encoded frames wait in a FIFO while a resend's copy passes, so that the compressor goes on
        m.submodules.enc_q = enc_q = StreamFifo(W, 16)
        wiring.connect(m, wiring.flipped(comp.m_axis), enc_q.s_axis)

        hdr = data.View(_Header, hdr_q.r_data)
        out = hdr.send
        # the contributions are numbered on the link (``chunk``), each naming the psn of the one before
        # (``reserved``), so that the switch sees a lost one at the next (docs/in_network.md, "Losses")
        tx_seq, tx_prev = Signal(16), Signal(32)
        with m.If(self.tx_meta.valid & self.tx_meta.ready):
            m.d.sync += [tx_seq.eq(tx_seq + 1), tx_prev.eq(hdr.psn)]
        meta = self.tx_meta.payload
        a = meta.ainic
        m.d.comb += [
            a.version.eq(VERSION), a.opcode.eq(FrameOpcode.aggregate), a.codec.eq(cfg.codec), a.dtype.eq(cfg.dtype),
            a.flags.eq(Mux(out.set, FrameFlag.shadow, 0) | Mux(out.retx, FrameFlag.retransmit, 0)),
            a.job.eq(cfg.job), a.collective.eq(cfg.collective), a.src_rank.eq(cfg.worker), a.dst_rank.eq(SWITCH_RANK),
            a.chunk.eq(tx_seq), a.worker.eq(cfg.worker), a.slot.eq(out.slot), a.count.eq(hdr.count),
            a.offset.eq(out.off), a.psn.eq(hdr.psn), a.reserved.eq(tx_prev),
            meta.dst_mac.eq(cfg.switch_mac), meta.dst_ip.eq(cfg.switch_ip),
            self.tx_meta.valid.eq(hdr_q.r_rdy), hdr_q.r_en.eq(self.tx_meta.ready),
        ]
        # the frame on the wire: when its last beat leaves, its slot's timer starts (its length, with the
        # backoff of the slot's resends, taken as the header goes)
        leaving = Signal(_Send)
        sending = Signal()
        from_store = Signal()                   # the frame leaving is a resend sent from the frame store
        store_ask = Signal()                    # its copy is asked of the store (taken once the last one left)
        leave_wait = Signal(32)
        # the byte counters add a frame's bytes the cycle after it goes (its size from registers)
        tx_add = Signal(32)
        m.d.sync += [tx_add.eq(0), self.net.tx_bytes.eq(self.net.tx_bytes + tx_add)]
        # whether the frame leaving is still its slot's packet in flight, kept in a register as the issue
        # stage's is (only a result for its slot ends that), so that its last beat writes the timer at once
        leaving_current = Signal()
        m.d.sync += leaving_current.eq(leaving_current & ~result_for(leaving.slot))
        with m.If(self.tx_meta.valid & self.tx_meta.ready):
            m.d.sync += [from_store.eq(out.retx & fits), store_ask.eq(out.retx & fits)]
            m.d.sync += [leaving.eq(out), sending.eq(1), leaving_current.eq(current(out) & ~result_for(out.slot)),
                         leave_wait.eq(cfg.timeout << Mux(out.resends > cfg.backoff_max, cfg.backoff_max, out.resends))]
            m.d.sync += [self.net.tx_frames.eq(self.net.tx_frames + 1),
                         tx_add.eq(FRAME_HEADER_BYTES + payload_bytes(m, cfg.codec, hdr.count, "tx_plen")),
                         self.net.retransmissions.eq(self.net.retransmissions + out.retx),
                         self.stored_resends.eq(self.stored_resends + (out.retx & fits))]
        tp = self.tx_payload
        m.d.comb += [store.r_index.valid.eq(store_ask), store.r_index.payload.eq(leaving.slot)]
        with m.If(store_ask & store.r_index.ready):
            m.d.sync += store_ask.eq(0)
        for name in ("tdata", "tkeep", "tlast", "tvalid"):
            m.d.comb += getattr(tp, name).eq(Mux(from_store, getattr(store.m_axis, name), getattr(enc_q.m_axis, name)))
        m.d.comb += [store.m_axis.tready.eq(from_store & tp.tready), enc_q.m_axis.tready.eq(~from_store & tp.tready)]
        # a first send's beats are kept in its slot's place as they leave
        m.d.comb += [store.w_valid.eq(tp.tvalid & tp.tready & ~from_store), store.w_index.eq(leaving.slot),
                     store.w_data.eq(tp.tdata), store.w_keep.eq(tp.tkeep), store.w_last.eq(tp.tlast)]
        with m.If(tp.tvalid & tp.tready & tp.tlast):
            m.d.sync += sending.eq(0)
            ls = leaving.slot
            with m.If(leaving_current):
                m.d.comb += [due_w.en.eq(1), due_w.addr.eq(ls), due_w.data.eq(now + leave_wait)]
                m.d.sync += queued.bit_select(ls, 1).eq(0)

        # -- received-frame counters --------------------------------------------------------------------------
        rx_add = Signal(32)                     # the waiting record's size, from its header (stable while it waits)
        m.d.sync += rx_add.eq(FRAME_HEADER_BYTES + payload_bytes(m, h.codec, h.count, "rx_plen2"))
        with m.If(take_result):
            m.d.sync += [self.net.rx_frames.eq(self.net.rx_frames + 1),
                         self.net.rx_bytes.eq(self.net.rx_bytes + rx_add)]

        # -- the end: every result written, or the deadline; then drain ---------------------------------------
        with m.If(running & ~stopping & ((now - last_progress) >= cfg.deadline)):
            m.d.sync += [stopping.eq(1), self.status.timeout.eq(1), self.timeouts.eq(self.timeouts + 1)]
        drained = (~send_q.r_rdy & (send_q.level == 0) & ~retx_q.r_rdy & (retx_q.level == 0) & ~iss_valid & ~hdr_q.r_rdy & (hdr_q.level == 0) & ~sending
                   & (writes_out == 0) & ~take_result)
        finished = (done_elems >= cfg.count) | stopping
        with m.If(running & ~self.start & finished & drained & ~self.wr_cmd.valid):
            m.d.sync += [running.eq(0), self.psn.eq(first + launched)]

        # -- the probe: per stage (have an item, its kind, input valid, output ready) ------------------------
        reads_out = Signal(J_BITS + 1)          # DMA reads asked for whose data has not all passed
        frames_out = Signal(J_BITS + 1)         # frames whose payload has not all left
        writes_data = Signal(J_BITS + 1)        # results taken whose decoded data has not all been written
        rd_go = self.rd_cmd.valid & self.rd_cmd.ready
        stored_go = hdr_q.w_en & ~self.rd_cmd.valid       # a resend issued from the frame store
        m.d.sync += [reads_out.eq(reads_out + rd_go - (rd.tvalid & rd.tready & rd.tlast)),
                     frames_out.eq(frames_out + (rd_go | stored_go) - (tp.tvalid & tp.tready & tp.tlast)),
                     writes_data.eq(writes_data + take_result - (wd.tvalid & wd.tready & wd.tlast))]
        receiving = Signal()
        m.d.comb += receiving.eq(rx.valid & ~expect & looked)
        probe = {
            "issue": (running, iss.send.retx, iss_valid & ~iss_fresh & iss_current & ~stopping,
                      self.rd_cmd.ready & hdr_q.w_rdy),
            "read": (reads_out != 0, 0, rd.tvalid, rd.tready),
            "transmit": (frames_out != 0, 0, tp.tvalid, tp.tready),
            "header": (hdr_q.r_rdy, out.retx, self.tx_meta.valid, self.tx_meta.ready),
            "receive": (running, receiving, rx.valid, rx.ready),
            "result": (in_payload, 0, rp.tvalid, rp.tready),
            "write": (writes_data != 0, 0, wd.tvalid, wd.tready),
        }
        for name, (have, kind, valid, ready) in probe.items():
            state = Mux(~have, StageState.idle,
                        Mux(valid & ready, StageState.busy, Mux(valid, StageState.blocked, StageState.starved)))
            m.d.comb += [getattr(self.probe, name).state.eq(state),
                         getattr(self.probe, name).kind.eq(Mux(have, kind, 0))]
        return m
