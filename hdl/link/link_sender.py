"""The sending end of a ring link: psn, credits, the retransmission buffer and go-back-N."""

from types import SimpleNamespace

from amaranth import Array, C, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from contract import credits as cr
from contract.enums import FrameFlag
from hdl.codec.wire_size import payload_bytes
from hdl.link.send_credits import SendCredits
from hdl.memory import scratch_memory
from hdl.packet.tx_builder import TxMeta
from hdl.stream.axis import AxiStreamSignature, check_width, keep_mask
from hdl.stream.register_slice import skid_buffer

#: what an ack or nack from the next rank says (contract/link.py): the psn it expects next, its frames of
#: room beyond that psn, its beat limit
AckInfo = data.StructLayout({"nack": 1, "psn": 32, "room": 16, "beats": 32})

LinkSenderConfig = data.StructLayout({"timeout": 32, "backoff_max": 3})


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


class LinkSender(wiring.Component):
    """New data frames from the collective engine (``s_meta`` + ``s_payload``) and acks from the link
    receiver (``s_ack_out``) in, frames to the TxBuilder (``m_meta`` + ``m_payload``) out, and the next rank's
    acks and nacks (``ack``) in; the send rule of contract/link.py.

    * A new frame is taken only within the next rank's credits (:class:`SendCredits`) and gets the psn
      ``psn`` (then ``psn`` + 1). Its header goes to a record memory (``credits.rx_frames`` entries) and its
      payload to a payload memory (the receive buffer's beats), one beat per cycle; the credits bound what
      is kept, so neither overflows.
    * Store and forward: every frame leaves from the memories, and only once its payload is whole. So the
      builder never waits on the engine, and acks, nacks and resends are never stuck behind a frame whose
      payload waits for something (in the engine a packet can wait on the host writes of an earlier one,
      and those on a frame still to be received).
    * One transmit pointer: frames leave in psn order from it. An ack with a psn in (oldest unacknowledged,
      last sent] frees the frames before it and resets the back-off; every ack and nack in that window sets
      the credits. Go-back-N is a rewind: a nack (while no replay runs) moves the pointer to its psn;
      ``cfg.timeout << min(backoff, cfg.backoff_max)`` cycles with frames outstanding and no progress move
      it to the oldest. Frames sent before leave again flagged ``retransmit``. The timer is held during a
      replay; an ack during one moves the pointer past what it acknowledges. Waiting for credit with nothing
      outstanding, the timer sends the last frame again (a probe: a lost ack may have held the credit, and
      the copy makes the receiver ack again).
    * Order on ``m_meta``: the link receiver's acks and nacks first, then frames; a frame's payload follows
      its record at one beat per cycle.
    * Counters since reset: ``retransmissions`` (frames sent again after a loss), ``timeouts`` (of the timer
      with frames outstanding), ``nacks_received``, ``probes``; ``unacked`` (frames kept), ``blocked`` (a new
      frame waits for the next rank's credit). Reset (or a ``ResetInserter``) is the link reset.
    """

    def __init__(self, width: int = 512, credits: cr.Credits = cr.DEFAULT):
        self.width = check_width(width, self)
        self.credits = credits
        self.records = _pow2(credits.rx_frames)
        self.beats = _pow2(credits.buffer_beats(width))
        super().__init__({
            "cfg": In(LinkSenderConfig),
            "s_meta": In(stream.Signature(TxMeta)),
            "s_payload": In(AxiStreamSignature(width)),
            "s_ack_out": In(stream.Signature(TxMeta)),
            "ack": In(stream.Signature(AckInfo)),
            "m_meta": Out(stream.Signature(TxMeta)),
            "m_payload": Out(AxiStreamSignature(width)),
            "psn": Out(32), "unacked": Out(32), "blocked": Out(1),
            "retransmissions": Out(32), "timeouts": Out(32), "nacks_received": Out(32), "probes": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        W, B = self.width, self.width // 8
        R, D = self.records, self.beats
        rbits, dbits = R.bit_length() - 1, D.bit_length() - 1
        Record = data.StructLayout({"meta": TxMeta, "start": dbits, "beats": dbits + 1, "last_bytes": range(B + 1)})
        m.submodules.records = rec_mem = Memory(shape=Record, depth=R, init=[])
        m.submodules.payloads = pay_mem = scratch_memory(shape=W, depth=D)
        rec_w, rec_r = rec_mem.write_port(), rec_mem.read_port()
        pay_w, pay_r = pay_mem.write_port(), pay_mem.read_port()
        m.submodules.credits = gate = SendCredits(W, self.credits)

        # psn pointers, in order: una <= tx <= high, tx <= written <= nxt (modulo 2**32)
        nxt = self.psn                  # the next new frame's psn (frames taken from the engine)
        written = Signal(32)            # frames before it have their whole payload in memory
        tx = Signal(32)                 # the next frame to send
        high = Signal(32)               # frames before it were sent at least once
        una = Signal(32)                # frames before it are acknowledged
        m.d.comb += self.unacked.eq(nxt - una)

        # -- new frames from the engine: header and payload into the memories --------------------------------------
        # (a header enters through a register stage that finds its payload's beats and last beat's bytes, so
        # that the credit check starts from registers)
        sm, sp = self.s_meta, self.s_payload
        new = SimpleNamespace(valid=Signal(), ready=Signal(), payload=Signal(TxMeta))
        new_beats, last_bytes = Signal(dbits + 1), Signal(range(B + 1))
        plen = payload_bytes(m, sm.payload.ainic.codec, sm.payload.ainic.count, "new_plen")
        beats_in = Signal(dbits + 1)
        m.d.comb += beats_in.eq((plen + B - 1) >> (B.bit_length() - 1))
        skid_buffer(m, "new_meta", sm.valid, sm.ready, new.valid, new.ready,
                    [(sm.payload, new.payload), (beats_in, new_beats),
                     ((plen - ((beats_in - 1) << (B.bit_length() - 1)))[:len(last_bytes)], last_bytes)])
        m.d.comb += gate.beats.eq(new_beats)
        writing = written != nxt        # a frame's payload is coming in
        # the next header may come in with the last beat of the payload before it
        m.d.comb += [new.ready.eq(gate.ok & (~writing | (sp.tvalid & sp.tlast))), gate.take.eq(new.valid & new.ready),
                     self.blocked.eq(new.valid & ~gate.ok)]
        alloc = Signal(dbits)           # where the next new frame's payload starts
        new_meta = Signal(TxMeta)
        m.d.comb += [new_meta.eq(new.payload), new_meta.ainic.psn.eq(nxt),
                     rec_w.addr.eq(nxt[:rbits]), rec_w.en.eq(gate.take), rec_w.data.meta.eq(new_meta),
                     rec_w.data.start.eq(alloc), rec_w.data.beats.eq(new_beats), rec_w.data.last_bytes.eq(last_bytes)]
        with m.If(gate.take):
            m.d.sync += [nxt.eq(nxt + 1), alloc.eq(alloc + new_beats)]
        wp = Signal(dbits)
        m.d.comb += [sp.tready.eq(writing), pay_w.addr.eq(wp), pay_w.data.eq(sp.tdata),
                     pay_w.en.eq(sp.tvalid & sp.tready)]
        with m.If(sp.tvalid & sp.tready):
            m.d.sync += wp.eq(wp + 1)
            with m.If(sp.tlast):
                m.d.sync += written.eq(written + 1)

        # -- out: acks and nacks first, then the frame at tx (whole in memory) ---------------------------------
        ctrl, out = self.s_ack_out, self.m_meta
        tx_q = Signal(32)
        m.d.sync += tx_q.eq(tx)
        m.d.comb += [rec_r.addr.eq(tx[:rbits]), rec_r.en.eq(1)]
        rec = Signal(Record)
        m.d.comb += rec.eq(rec_r.data)
        # una <= tx <= written, high <= una + R: pointers that far apart differ in their low rbits + 1 bits
        # (and tx moves by at most R a cycle), so those bits compare them: short compares before ``sent``
        k = rbits + 1
        frame_ok = (tx_q[:k] == tx[:k]) & (tx[:k] != written[:k])
        sel_frame = ~ctrl.valid & frame_ok
        again = tx[:k] != high[:k]      # sent before: a resend (or a probe)
        meta = Signal(TxMeta)
        m.d.comb += [meta.eq(rec.meta), meta.ainic.flags.eq(rec.meta.ainic.flags | Mux(again, FrameFlag.retransmit, 0))]
        m.d.comb += [
            out.valid.eq(ctrl.valid | frame_ok),
            out.payload.eq(Mux(ctrl.valid, ctrl.payload, meta)),
            ctrl.ready.eq(out.ready),
        ]
        sent = out.valid & out.ready & sel_frame
        probing = Signal()                      # the frame going again is a probe, not a resend after a loss
        with m.If(sent & again):
            with m.If(probing):
                m.d.sync += self.probes.eq(self.probes + 1)
            with m.Else():
                m.d.sync += self.retransmissions.eq(self.retransmissions + 1)
        with m.If(sent & ~again):
            m.d.sync += high.eq(high + 1)

        # -- the payload of the frame sent, from memory at one beat per cycle ---------------------------------
        mp = self.m_payload
        rd_ptr, rd_left, ov, olast = Signal(dbits), Signal(dbits + 1), Signal(), Signal()
        rd_last_bytes = Signal(range(B + 1))
        fetch = (rd_left != 0) & (~ov | mp.tready)
        m.d.comb += [pay_r.addr.eq(rd_ptr), pay_r.en.eq(fetch)]
        with m.If(fetch):
            m.d.sync += [rd_ptr.eq(rd_ptr + 1), rd_left.eq(rd_left - 1), ov.eq(1), olast.eq(rd_left == 1)]
        with m.Elif(mp.tready):
            m.d.sync += ov.eq(0)
        with m.If(sent):
            m.d.sync += [rd_ptr.eq(rec.start), rd_left.eq(rec.beats), rd_last_bytes.eq(rec.last_bytes)]
        m.d.comb += [mp.tdata.eq(pay_r.data), mp.tkeep.eq(Mux(olast, keep_mask(rd_last_bytes, B), C(-1, B))),
                     mp.tlast.eq(olast), mp.tvalid.eq(ov)]

        # -- acks and nacks from the next rank ------------------------------------------------------------------
        # (each ack is taken into a register first, with the frame limit it sets, psn + room: the window
        # checks and the credits then start from registers)
        a = Signal(AckInfo)
        ack_valid, ack_limit = Signal(), Signal(32)
        m.d.comb += self.ack.ready.eq(1)
        m.d.sync += [ack_valid.eq(self.ack.valid), a.eq(self.ack.payload),
                     ack_limit.eq(self.ack.payload.psn + self.ack.payload.room)]
        # in [una, high]: the window high - una is at most the records kept (k = rbits + 1 bits), so an ack in
        # it is less than 2**k ahead of una, and high - psn (the window less that) is not negative in k + 1
        # bits. psn - una < 2**k is: the high bits equal una's, plus 1 where the low k bits borrow
        # (``una_hi1``, a register beside una): equalities and a k-bit subtraction side by side, no 32-bit sum
        una_hi1 = Signal(32 - k, init=1)        # una[k:] + 1
        borrow, behind = Signal(), Signal(k + 1)
        m.d.comb += [borrow.eq(a.psn[:k] < una[:k]), behind.eq(high[:k + 1] - a.psn[:k + 1])]
        in_window = (ack_valid & Mux(borrow, a.psn[k:] == una_hi1, a.psn[k:] == una[k:])
                     & ~behind[k])
        progress = in_window & (a.psn != una)
        m.d.comb += [gate.limit_valid.eq(in_window), gate.limit_frames.eq(ack_limit), gate.limit_beats.eq(a.beats)]
        with m.If(in_window):
            m.d.sync += [una.eq(a.psn), una_hi1.eq(a.psn[k:] + 1)]

        # -- the timer, back-off and rewinds -----------------------------------------------------------------------
        backoff = Signal(3)
        timer = Signal(40)
        b = Signal(3)
        m.d.comb += b.eq(Mux(backoff > self.cfg.backoff_max, self.cfg.backoff_max, backoff))
        # the timer has waited when timer + 1 >= timeout << b, that is timer >= (timeout << b) - 1 (or the
        # timeout is 0): a compare of the timer with a register for each back-off, beside the others, the
        # back-off choosing among them; registered (the timer either restarts or counts up, so the compare
        # for timer + 1 is next cycle's compare for the timer, unless it restarts; the back-off changes only
        # where the timer restarts). The limits follow the configuration a cycle late.
        waited = Signal()
        limits = [Signal(40, name=f"limit{i}") for i in range(8)]
        no_wait = Signal()
        m.d.sync += [*(lim.eq((self.cfg.timeout << i) - 1) for i, lim in enumerate(limits)),
                     no_wait.eq(self.cfg.timeout == 0)]
        replaying = again
        outstanding = una != high
        # waiting for credit with nothing outstanding and nothing to send: the ack that gave credit may be lost
        starved = ~outstanding & (tx == written) & new.valid & ~gate.ok & (high != 0)
        # The timer restarts where there is nothing to wait for, on a replay, progress, an expiry or a rewind.
        # That decision (the ack's window, the credit compare) reaches one flip-flop, ``restarted``, and the
        # timer and ``waited`` are read as restarted the cycle after: no reset of 41 flip-flops at the end of
        # the decision. (``timer`` counts from 1 after a restart, as it would have from 0 a cycle before.)
        restarted = Signal(init=1)
        waited_now = waited & ~restarted
        expire = (outstanding | starved) & ~replaying & ~progress & waited_now
        nack_rewind = in_window & a.nack & ~replaying & (a.psn != high)
        with m.If(progress):
            m.d.sync += backoff.eq(0)
        m.d.sync += [
            restarted.eq(~(outstanding | starved) | replaying | progress | expire | nack_rewind),
            timer.eq(Mux(restarted, 1, timer + 1)),
            waited.eq(Mux(restarted, Array([lim == 0 for lim in limits])[b],
                          Array([timer >= lim for lim in limits])[b]) | no_wait),
        ]
        with m.If(nack_rewind):
            m.d.sync += self.nacks_received.eq(self.nacks_received + 1)
        with m.If(expire):
            m.d.sync += [self.timeouts.eq(self.timeouts + outstanding), probing.eq(~outstanding),
                         backoff.eq(Mux(backoff == 7, 7, backoff + 1))]
        with m.Elif(nack_rewind):
            m.d.sync += probing.eq(0)
        # (the sums from tx alone, beside the late ``sent``: a.psn >= tx + sent is a.psn - tx >= sent). With
        # una - 1 <= tx <= high <= una + R and an ack in the window, a.psn - tx is within [-R, R + 1]: its
        # k + 1 low bits hold it, sign and all
        tx_plus1, past_tx, tx_next = Signal(32), Signal(k + 1), Signal(32)
        m.d.comb += [tx_plus1.eq(tx + 1), past_tx.eq(a.psn - tx), tx_next.eq(Mux(sent, tx_plus1, tx))]
        with m.If(expire):
            m.d.sync += tx.eq(Mux(outstanding, una, high - 1))
        with m.Elif(nack_rewind):
            m.d.sync += tx.eq(a.psn)
        with m.Elif(in_window & ~past_tx[k] & ~(sent & (past_tx == 0))):
            m.d.sync += tx.eq(a.psn)            # (during a replay) the receiver has these: skip them
        with m.Else():
            m.d.sync += tx.eq(tx_next)
        return m
