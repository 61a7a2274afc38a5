"""A packet crossbar: records with a payload, from any of N inputs to the output each record names."""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature
from hdl.stream.round_robin import round_robin


def _two_deep(m, taken, ends, who, busy, now, ahead, after):
    """The bookkeeping of an output (or a source): the payload passing now (``busy``, from or to ``now``) and
    one record taken ahead of it (``ahead``, ``after``). A record taken (``taken``, from or to ``who``) while a
    payload passes, and not at its last beat (``ends``), waits as the one ahead."""
    with m.If(taken & busy & ~ends):
        m.d.sync += [ahead.eq(1), after.eq(who)]
    with m.Elif(taken):
        m.d.sync += [busy.eq(1), now.eq(who)]
    with m.Elif(ends & ahead):
        m.d.sync += [now.eq(after), ahead.eq(0)]
    with m.Elif(ends):
        m.d.sync += busy.eq(0)


class PacketCrossbar(wiring.Component):
    """``inputs`` sources of (record on ``s_meta_<i>``, then its payload on ``s_axis_<i>`` up to ``tlast``)
    to ``outputs`` sinks (``m_meta_<k>``, ``m_axis_<k>``); a record goes to the output ``dest_<i>`` names
    (valid with the record).

    * Each output passes one payload at a time, choosing round-robin among the inputs whose record is for
      it; the record and the payload pass without a register (one beat a cycle).
    * Records run one packet ahead of payloads, on both sides: an output takes the next record while the
      payload before it is still passing, and a source's next record may be taken (by any output) while its
      payload before it is still passing. Each payload follows directly after the one before it on its
      output and on its source, so neither a sink that decides on a record while it takes the previous
      payload nor a source that keeps its payloads back to back loses a cycle between packets. (Payloads
      pass in the order of the takes on each output and on each source; the oldest take is at the head of
      both, so the crossbar cannot deadlock.)
    * A record offered on an output and not taken is offered again, unchanged, until it is taken (a
      newcomer earlier in the round-robin order waits): the sink may act on a record before it takes it.
    * ``record`` is the payload layout of the meta streams; every packet has a payload of at least one beat.
      A source may offer its next record at any time (it is taken when at most one of the source's payloads
      is left to pass).
    """

    def __init__(self, inputs: int, outputs: int, record, width: int):
        self.inputs, self.outputs, self.record, self.width = inputs, outputs, record, width
        members = {}
        for i in range(inputs):
            members[f"s_meta_{i}"] = In(stream.Signature(record))
            members[f"s_axis_{i}"] = In(AxiStreamSignature(width))
            members[f"dest_{i}"] = In(range(max(outputs, 2)))
        for k in range(outputs):
            members[f"m_meta_{k}"] = Out(stream.Signature(record))
            members[f"m_axis_{k}"] = Out(AxiStreamSignature(width))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        N, K = self.inputs, self.outputs
        metas = [getattr(self, f"s_meta_{i}") for i in range(N)]
        pays = [getattr(self, f"s_axis_{i}") for i in range(N)]
        dests = [getattr(self, f"dest_{i}") for i in range(N)]
        meta_ready = [[Signal(name=f"meta_ready_{i}_{k}") for k in range(K)] for i in range(N)]
        pay_ready = [[Signal(name=f"pay_ready_{i}_{k}") for k in range(K)] for i in range(N)]
        # per source: the output its payload goes to now (``src_busy``: a record was taken, its payload has
        # not all passed) and the output that took its next record (``src_ahead``)
        src_busy = [Signal(name=f"src_busy_{i}") for i in range(N)]
        src_out = [Signal(range(max(K, 2)), name=f"src_out_{i}") for i in range(N)]
        src_ahead = [Signal(name=f"src_ahead_{i}") for i in range(N)]
        src_next = [Signal(range(max(K, 2)), name=f"src_next_{i}") for i in range(N)]
        taken_by = [[Signal(name=f"taken_{i}_{k}") for k in range(K)] for i in range(N)]
        ends_on = [[Signal(name=f"ends_{i}_{k}") for k in range(K)] for i in range(N)]
        for k in range(K):
            om, op = getattr(self, f"m_meta_{k}"), getattr(self, f"m_axis_{k}")
            busy = Signal(name=f"busy_{k}")          # a packet's record has passed, its payload has not
            owner = Signal(range(max(N, 2)), name=f"owner_{k}")
            ahead = Signal(name=f"ahead_{k}")        # the next packet's record has passed too: its payload waits
            after = Signal(range(max(N, 2)), name=f"after_{k}")
            last = Signal(range(max(N, 2)), name=f"last_{k}")
            offered = Signal(name=f"offered_{k}")   # a record was offered and not taken: offer it again
            held = Signal(range(max(N, 2)), name=f"held_{k}")
            want = Cat(*[metas[i].valid & (dests[i] == k) & ~src_ahead[i] for i in range(N)])
            rr, _ = round_robin(m, want, last, N, f"out_{k}")
            pick = Signal(range(max(N, 2)), name=f"pick_{k}")
            m.d.comb += pick.eq(Mux(offered, held, rr))
            # a record is offered while no record is ahead; a payload passes while the output is busy and its
            # source's payload is the one for this output (the source's payload before it has passed)
            src_meta, src_pay = Array(metas)[pick], Array(pays)[owner]
            turn = Array(src_out)[owner] == k
            m.d.comb += [om.payload.eq(src_meta.payload), om.valid.eq(~ahead & want.any()),
                         op.tdata.eq(src_pay.tdata), op.tkeep.eq(src_pay.tkeep), op.tlast.eq(src_pay.tlast),
                         op.tvalid.eq(busy & turn & src_pay.tvalid)]
            for i in range(N):
                m.d.comb += [meta_ready[i][k].eq(~ahead & (pick == i) & want[i] & om.ready),
                             pay_ready[i][k].eq(busy & turn & (owner == i) & op.tready),
                             taken_by[i][k].eq(meta_ready[i][k]),
                             ends_on[i][k].eq(pay_ready[i][k] & pays[i].tvalid & pays[i].tlast)]
            m.d.sync += [offered.eq(om.valid & ~om.ready), held.eq(pick)]
            ends = op.tvalid & op.tready & op.tlast
            taken = om.valid & om.ready
            with m.If(taken):
                m.d.sync += last.eq(pick)
            _two_deep(m, taken, ends, pick, busy, owner, ahead, after)
        for i in range(N):
            m.d.comb += [metas[i].ready.eq(Cat(*meta_ready[i]).any()), pays[i].tready.eq(Cat(*pay_ready[i]).any())]
            took, ended = Cat(*taken_by[i]).any(), Cat(*ends_on[i]).any()
            by = Signal(range(max(K, 2)), name=f"took_by_{i}")
            for k in range(K):
                with m.If(taken_by[i][k]):
                    m.d.comb += by.eq(k)
            _two_deep(m, took, ended, by, src_busy[i], src_out[i], src_ahead[i], src_next[i])
        return m
