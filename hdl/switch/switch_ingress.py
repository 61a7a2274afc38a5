"""One port's way into the aggregation switch: frames for the switch are parsed, checked and decoded;
every other frame goes on to the forwarding path."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import DATA_OPCODES, AggDrop, Codec, Dtype, FrameOpcode
from contract.in_network import SWITCH_RANK
from contract.protocol import UDP_PORT
from hdl.codec.decompressor import Decompressor
from hdl.link.link_numbers import LinkNumbers
from hdl.packet.rx_parser import RxParser
from hdl.stream.axis import AxiStreamSignature
from hdl.stream.register_slice import skid_buffer
from hdl.stream.sync_fifo import SyncFifo
from hdl.switch.contribution_check import JOB_BITS, PASS, Contribution, ContributionCheck
from hdl.switch.job_table import PORT_BITS, WORKER_BITS, JobEntry, pick

#: a frame the checks dropped, for the counters (``job_valid``: the job was found)
CheckEvent = data.StructLayout({"valid": 1, "job_valid": 1, "job": JOB_BITS, "reason": range(PASS + 1)})

#: a contribution lost on the port's link, to ask its worker for again (an ``agg_nack``)
NackRecord = data.StructLayout({"job": JOB_BITS, "job_id": 16, "worker": WORKER_BITS, "psn": 32,
                                "codec": Codec, "dtype": Dtype})

#: a leaf's member asked for a contribution that the spine lacks the partial of (an agg_nack from the
#: port the member is behind, ``port``)
AskRecord = data.StructLayout({"nack": NackRecord, "port": PORT_BITS})


def _dst_mac(tdata):
    """The destination MAC of a frame's first beat as the 48-bit integer its configuration holds."""
    return Cat(*[tdata[8 * i:8 * i + 8] for i in reversed(range(6))])


class SwitchIngress(wiring.Component):
    """Frames in on ``s_axis`` (``tuser``: MAC error). A frame whose destination MAC is ``cfg_mac`` goes to
    the receive parser (the switch's IP and UDP port, rank ``SWITCH_RANK``, or on a leaf job's up port its
    ``up_worker``: docs/in_network.md, "Two levels"), then to the job checks
    (:class:`~hdl.switch.contribution_check.ContributionCheck`): a contribution that passes leaves as a
    record on ``m_meta`` and its payload, decoded to binary32 (or int32) beats, on ``m_axis``; anything
    else is dropped and reported on ``check_event``. Every other frame leaves unchanged on ``m_fwd``.

    * ``port``: which of the switch's ports this is (a constant where the switch instantiates it: an input
      rather than a parameter so that the N ingresses are one module, which a simulator compiles once).

    * Every beat crosses a register slice first (one cycle; ``s_axis.tready`` is a flip-flop), with the way
      that its frame goes, decided as the first beat enters.
    * Payloads follow each other into the decoder through a register slice, a frame's first beat the cycle
      after the last of the one before (its codec changes only while it holds no frame); records wait for
      the engines in a queue of four, in the order of their payloads, each offered as soon as it is queued
      (:class:`~hdl.switch.packet_crossbar.PacketCrossbar` takes it while the payload before it passes and
      keeps the payloads in order). The parser buffers what arrives meanwhile.
      ``stat_accepted`` / ``stat_drops``: the parser's counters.
    * Losses on the link (docs/in_network.md, "Losses"): a contribution that shows, by its number, that the
      one before it was lost (with any others) is followed by an :data:`NackRecord` on ``m_nack`` (for this
      port's egress, a queue of four) and a pulse on ``nack_event`` (with the job's entry, for the counters).
    * A leaf job's up port (docs/in_network.md, "Two levels"): the spine's frames are numbered as a switch
      numbers its frames to a worker. One that shows the frame before it lost (by the psn it names), and an
      ``agg_nack`` from the spine (by its own psn, first), ask the leaf's member 0 for its contribution of
      that psn, whose copy sends the partial up again: an :data:`AskRecord` on ``m_ask`` (a queue of four;
      full, the ask is dropped and the members' timers remain) with a pulse on ``nack_event``. The switch
      routes it to ``s_ask`` of the member's port, which queues it with its own ``agg_nack``s (its own
      first).
    """

    def __init__(self, width: int, ports: int, max_jobs: int = 4):
        self.width, self.ports, self.max_jobs = width, ports, max_jobs
        self._parser = RxParser(width)
        super().__init__({
            "port": In(range(ports)),
            "s_axis": In(AxiStreamSignature(width, 1)),
            "m_fwd": Out(AxiStreamSignature(width, 1)),
            "m_meta": Out(stream.Signature(Contribution)),
            "m_axis": Out(AxiStreamSignature(width)),
            "cfg_mac": In(48),
            "cfg_ip": In(32),
            "cfg_udp_port": In(16, init=UDP_PORT),
            "jobs": In(data.ArrayLayout(JobEntry, max_jobs)),
            "check_event": Out(CheckEvent),
            "m_nack": Out(stream.Signature(NackRecord)),
            "m_ask": Out(stream.Signature(AskRecord)),
            "s_ask": In(stream.Signature(NackRecord)),
            "nack_event": Out(data.StructLayout({"valid": 1, "job": JOB_BITS})),
            "stat_accepted": Out(32),
            "stat_drops": Out(self._parser.stat_drops.shape()),
        })

    def elaborate(self, platform):
        m = Module()
        s = self.s_axis
        m.submodules.parser = parser = self._parser
        m.submodules.check = check = ContributionCheck(self.ports, self.max_jobs)
        m.submodules.decode = dec = Decompressor(self.width)
        # the rank frames to this port carry: the switch's, or on a leaf job's up port the leaf's worker index
        # in the spine's job (the spine addresses its results to it); a register (the table holds still)
        rank = Signal(16, init=SWITCH_RANK)
        up_rank = SWITCH_RANK
        for j in reversed([self.jobs[i] for i in range(self.max_jobs)]):
            up_rank = Mux(j.enable & j.up & (j.up_port == self.port), j.up_worker, up_rank)
        m.d.sync += rank.eq(up_rank)
        m.d.comb += [parser.cfg_mac.eq(self.cfg_mac), parser.cfg_ip.eq(self.cfg_ip),
                     parser.cfg_udp_port.eq(self.cfg_udp_port), parser.cfg_rank.eq(rank),
                     self.stat_accepted.eq(parser.stat_accepted), self.stat_drops.eq(parser.stat_drops)]

        # -- which way a frame goes, decided on its first beat as it enters; the beat and its way cross a
        #    register slice, so that what the parser and the forwarding path take is a flip-flop's (the
        #    parser's take enables every register of its header) ----------------------------------------
        in_frame = Signal()
        held = Signal()
        to_switch = Mux(in_frame, held, _dst_mac(s.tdata) == self.cfg_mac)
        with m.If(s.tvalid & s.tready):
            m.d.sync += [in_frame.eq(~s.tlast), held.eq(to_switch)]
        b, b_route = AxiStreamSignature(self.width, 1).create(path=("beat",)), Signal()
        skid_buffer(m, "in", s.tvalid, s.tready, b.tvalid, b.tready,
                    [(s.tdata, b.tdata), (s.tkeep, b.tkeep), (s.tlast, b.tlast), (s.tuser, b.tuser),
                     (to_switch, b_route)])
        p, f = parser.s_axis, self.m_fwd
        m.d.comb += [p.tdata.eq(b.tdata), p.tkeep.eq(b.tkeep), p.tlast.eq(b.tlast), p.tuser.eq(b.tuser),
                     f.tdata.eq(b.tdata), f.tkeep.eq(b.tkeep), f.tlast.eq(b.tlast), f.tuser.eq(b.tuser),
                     p.tvalid.eq(b.tvalid & b_route), f.tvalid.eq(b.tvalid & ~b_route),
                     b.tready.eq(Mux(b_route, p.tready, f.tready))]

        # -- checks, then the decoder ---------------------------------------------------------------------
        header = parser.m_meta.payload.ainic
        m.d.comb += [check.header.eq(header), check.port.eq(self.port), check.jobs.eq(self.jobs)]
        count = Signal(Contribution.members["count"])
        has_payload = Signal()
        pay = parser.m_axis
        dec_in, dec_out, o = dec.s_axis, dec.m_axis, self.m_axis
        first = Signal(init=1)
        # the decoder's codec, a register: it changes only while the decoder holds no frame (``inflight``:
        # frames whose last beat went in and has not come out), so frames of one codec follow each other in
        # without a gap and the decoder never sees a packet under the wrong codec
        codec = Signal(Contribution.members["codec"])
        inflight = Signal(8)
        m.d.comb += dec.cfg_codec.eq(codec)
        # the payload reaches the decoder through a register slice: the state and the parser's stream
        # stop at its registers, not in the decoder's unpacker
        feed_valid, feed_ready, feed_user = Signal(), Signal(), Signal.like(dec_in.tuser)
        skid_buffer(m, "feed", feed_valid, feed_ready, dec_in.tvalid, dec_in.tready,
                    [(pay.tdata, dec_in.tdata), (pay.tkeep, dec_in.tkeep), (pay.tlast, dec_in.tlast),
                     (feed_user, dec_in.tuser)])
        # records on to the engines through a queue, in the order of their payloads out of the decoder: the
        # next frame is fed while the one before is decoded, and a record is offered as soon as it is
        # queued (the crossbar takes a source's next record while its payload before it passes, and keeps
        # the payloads in order)
        m.submodules.meta_q = mq = SyncFifo(width=Contribution.size, depth=4)
        m.d.comb += [self.m_meta.payload.eq(mq.r_data), self.m_meta.valid.eq(mq.r_rdy),
                     mq.r_en.eq(self.m_meta.valid & self.m_meta.ready)]
        # the checks of the record at the parser's output (ContributionCheck's stage, then a register): valid
        # once the record has waited 1 + LATENCY cycles (a record waits unchanged until it is taken; one that
        # arrives while a frame is fed has)
        waiting = parser.m_meta.valid & ~parser.m_meta.ready
        waited = Signal(check.LATENCY)
        checked = Signal()
        m.d.sync += [waited.eq(Cat(waiting, waited[:-1]) & waiting.replicate(check.LATENCY)),
                     checked.eq(waited[-1] & waiting)]
        chk_record, chk_reason, chk_payload = Signal(Contribution), Signal.like(check.reason), Signal()
        chk_nack = Signal()                             # the spine's agg_nack (passed only on an up port)
        m.d.sync += [chk_record.eq(check.record),
                     chk_reason.eq(check.reason),
                     chk_payload.eq(Cat(*[header.opcode == op for op in DATA_OPCODES]).any()),
                     chk_nack.eq(header.opcode == FrameOpcode.agg_nack)]
        passed = chk_reason == PASS
        to_engine = passed & ~chk_nack
        # the worker's contributions are numbered (``chunk``) and name the psn of the one before (``reserved``):
        # a number past the newest by two or more shows that the one just before this one was lost on the link
        # (with any others missing), and the worker is asked for it (a record for the egress of this port; a
        # full queue drops it, the worker's timer remains). Found as the record waits (the newest changes only
        # as a record is taken).
        m.submodules.numbers = numbers = LinkNumbers()
        m.d.comb += numbers.number.eq(header.chunk)
        m.submodules.nack_q = nq = SyncFifo(width=NackRecord.size, depth=4)
        nack = Signal(NackRecord)
        m.d.comb += [nack.job.eq(chk_record.job), nack.job_id.eq(chk_record.job_id), nack.worker.eq(chk_record.worker),
                     nack.psn.eq(header.reserved), nack.codec.eq(chk_record.codec), nack.dtype.eq(chk_record.dtype),
                     self.m_nack.payload.eq(nq.r_data), self.m_nack.valid.eq(nq.r_rdy),
                     nq.r_en.eq(self.m_nack.ready)]
        took = parser.m_meta.valid & parser.m_meta.ready & passed
        m.d.comb += numbers.take.eq(took)
        spine = chk_record.down | chk_nack
        asks = took & numbers.lost & ~spine
        # a leaf's member asked, through this port's queue: its own agg_nacks first
        m.d.comb += [self.s_ask.ready.eq(~asks & nq.w_rdy), nq.w_en.eq(asks | self.s_ask.valid & self.s_ask.ready),
                     nq.w_data.eq(Mux(asks, nack, self.s_ask.payload))]
        # the spine's frames on an up port: an agg_nack asks member 0 for its psn, then (a second record, the
        # cycle after) for the psn a gap names; a result for the psn a gap names
        m.submodules.ask_q = aq = SyncFifo(width=AskRecord.size, depth=4)
        entry = pick([self.jobs[i] for i in range(self.max_jobs)], chk_record.job)
        ask, second = Signal(AskRecord), Signal(AskRecord)
        ask_first = took & spine & (chk_nack | numbers.lost)
        ask_second = Signal()
        m.d.sync += ask_second.eq(took & chk_nack & numbers.lost)
        # (the worker-link nack's record, for the leaf's own job and its member 0)
        m.d.comb += [ask.port.eq(entry.ports[0]), ask.nack.eq(nack), ask.nack.job_id.eq(entry.job),
                     ask.nack.worker.eq(0), ask.nack.psn.eq(Mux(chk_nack, header.psn, header.reserved))]
        m.d.sync += [second.eq(ask), second.nack.psn.eq(header.reserved)]
        m.d.comb += [aq.w_en.eq(ask_first | ask_second), aq.w_data.eq(Mux(ask_second, second, ask)),
                     self.m_ask.payload.eq(aq.r_data), self.m_ask.valid.eq(aq.r_rdy), aq.r_en.eq(self.m_ask.ready),
                     self.nack_event.valid.eq(asks | ask_first | ask_second),
                     self.nack_event.job.eq(Mux(ask_second, second.nack.job, chk_record.job))]
        fed_last, out_last = Signal(), Signal()
        m.d.comb += [fed_last.eq(pay.tvalid & pay.tready & pay.tlast & feed_valid),
                     out_last.eq(o.tvalid & o.tready & o.tlast)]
        m.d.sync += inflight.eq(inflight + fed_last - out_last)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += parser.m_meta.ready.eq(checked & (~to_engine | (mq.w_rdy & ((chk_record.codec == codec)
                                                                                        | (inflight == 0)))))
                with m.If(parser.m_meta.valid & parser.m_meta.ready):
                    m.d.sync += [count.eq(chk_record.count), first.eq(1), has_payload.eq(chk_payload)]
                    m.d.comb += [self.check_event.valid.eq(~passed),
                                 self.check_event.job_valid.eq(chk_reason > AggDrop.unknown_job),
                                 self.check_event.job.eq(chk_record.job),
                                 self.check_event.reason.eq(chk_reason)]
                    with m.If(to_engine):
                        m.d.comb += [mq.w_en.eq(1), mq.w_data.eq(chk_record)]
                        m.d.sync += codec.eq(chk_record.codec)
                        m.next = "FEED"
                    with m.Else():
                        m.next = "DROP"
            with m.State("DROP"):
                # (a frame with no payload takes no beat: the parser's next payload may be waiting already)
                m.d.comb += pay.tready.eq(has_payload)
                with m.If(~has_payload | (pay.tvalid & pay.tlast)):
                    m.next = "IDLE"
            with m.State("FEED"):
                m.d.comb += [feed_user.eq(Mux(first, count, 0)), feed_valid.eq(pay.tvalid),
                             pay.tready.eq(feed_ready)]
                with m.If(pay.tvalid & pay.tready):
                    m.d.sync += first.eq(0)
                    with m.If(pay.tlast):
                        m.next = "IDLE"
        m.d.comb += [o.tdata.eq(dec_out.tdata), o.tkeep.eq(dec_out.tkeep), o.tlast.eq(dec_out.tlast),
                     o.tvalid.eq(dec_out.tvalid), dec_out.tready.eq(o.tready)]
        return m
