"""The receiving end of a ring link: the psn it expects, and the acks and nacks it owes the sender."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract import credits as cr
from contract import link as ln
from contract.enums import FrameOpcode
from contract.protocol import VERSION
from hdl.packet.tx_builder import TxMeta

#: where acks go: the previous rank's addresses, and the fields every ack carries
AckConfig = data.StructLayout({"rank": 16, "prev_rank": 16, "job": 16, "prev_mac": 48, "prev_ip": 32})


class LinkReceiver(wiring.Component):
    """The receive rule of contract/link.py, beside the RxParser that applies its sequence check.

    * ``expect`` (to the parser's ``seq_expect``): the psn expected next; ``seq_accepted`` (a data frame
      accepted in sequence) advances it. ``consumed`` pulses when the engine has taken a frame's payload and
      ``consumed_beats`` counts the beats it took in that cycle (0 or 1).
    * ``m_ack``: header-only records for the TxBuilder (``TxMeta``): an ack (or a nack, first) when one is
      due; its fields are taken when it leaves (``contract.link.ack_fields``). Ack due: ``ack_every`` frames
      received or consumed since the last ack or nack, a duplicate received, or ``ACK_DELAY`` cycles with
      something unreported. Nack due: a newer psn than expected, once per expected psn.
    * Counters since reset: ``acks_sent``, ``nacks_sent``. Reset (or ``ResetInserter``) is the link reset.
    """

    def __init__(self, width: int, credits: cr.Credits = cr.DEFAULT, ack_delay: int = ln.ACK_DELAY):
        self.width, self.credits, self.ack_delay = width, credits, ack_delay
        super().__init__({
            "cfg": In(AckConfig),
            "expect": Out(32),
            "seq_accepted": In(1), "seq_duplicate": In(1), "seq_out_of_order": In(1),
            "consumed": In(1), "consumed_beats": In(1),
            "m_ack": Out(stream.Signature(TxMeta)),
            "acks_sent": Out(32), "nacks_sent": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        cc, cfg = self.credits, self.cfg
        used_frames, used_beats = Signal(32), Signal(32)
        E = cc.ack_every
        assert E >= 2, "an ack every frame or more"
        # Since the last ack or nack: frames received and consumed (the rule's expect - received_at and
        # used - used_at, modulo 2**32), and the flags the rule reads, each a register found from registers
        # a cycle ahead (a count moves by at most 1 a cycle, and a record that leaves resets it to what
        # came in with it): ``unreported`` (either count not 0), ``count_due`` (either at ``ack_every``),
        # ``idle_done`` (``ack_delay`` cycles with something unreported)
        got, used = Signal(32), Signal(32)
        unreported, count_due = Signal(), Signal()
        idle = Signal(range(self.ack_delay + 1))
        idle_done = Signal(init=self.ack_delay == 0)
        dup_seen, nack_due = Signal(), Signal()
        # a nack was sent for the psn expected now (the rule's "once per expected psn"): set as it leaves,
        # cleared as the expected psn moves on -- a flag where the rule compares the nacked psn with ``expect``
        nacked_here = Signal()
        acc, cons = self.seq_accepted, self.consumed
        with m.If(acc):
            m.d.sync += self.expect.eq(self.expect + 1)
        with m.If(cons):
            m.d.sync += used_frames.eq(used_frames + 1)
        with m.If(self.consumed_beats):
            m.d.sync += used_beats.eq(used_beats + 1)
        ack_due = Signal()
        m.d.comb += ack_due.eq(count_due | dup_seen | (unreported & idle_done))
        out = self.m_ack
        h = out.payload.ainic
        m.d.comb += [
            out.valid.eq(ack_due | nack_due),
            # (every field a continuous expression: a field set under an If makes Yosys emit the record as
            # always-blocks, and Verilator never runs one that reads nothing, such as a constant's)
            h.version.eq(VERSION), h.opcode.eq(Mux(nack_due, FrameOpcode.nack, FrameOpcode.ack)),
            h.job.eq(cfg.job), h.src_rank.eq(cfg.rank), h.dst_rank.eq(cfg.prev_rank),
            h.psn.eq(self.expect), h.count.eq((used_frames + cc.rx_frames - self.expect)[:16]),
            h.offset.eq(used_beats + cc.advertised_beats(self.width)),
            out.payload.dst_ip.eq(cfg.prev_ip), out.payload.dst_mac.eq(cfg.prev_mac),
        ]
        sent = out.valid & out.ready
        with m.If(sent):
            m.d.sync += [got.eq(acc), used.eq(cons), unreported.eq(acc | cons), count_due.eq(0),
                         idle.eq(0), idle_done.eq(self.ack_delay == 0), dup_seen.eq(0)]
            with m.If(nack_due):
                m.d.sync += [nack_due.eq(0), nacked_here.eq(~acc), self.nacks_sent.eq(self.nacks_sent + 1)]
            with m.Else():
                m.d.sync += self.acks_sent.eq(self.acks_sent + 1)
        with m.Else():
            m.d.sync += [got.eq(got + acc), used.eq(used + cons), unreported.eq(unreported | acc | cons),
                         count_due.eq(count_due | (acc & (got == E - 1)) | (cons & (used == E - 1)))]
            with m.If(unreported & ~idle_done):
                m.d.sync += [idle.eq(idle + 1), idle_done.eq(idle == self.ack_delay - 1)]
        # events of this cycle count after a record that leaves in it (it reported the state before them)
        with m.If(self.seq_duplicate):
            m.d.sync += dup_seen.eq(1)
        with m.If(self.seq_accepted):
            m.d.sync += nacked_here.eq(0)
        already = nacked_here | (sent & nack_due)
        with m.If(self.seq_out_of_order & ~already):
            m.d.sync += nack_due.eq(1)
        return m
