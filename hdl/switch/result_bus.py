"""The switch's way from its engines to its ports: one result at a time, encoded by one compressor, to every
destination port at once (docs/in_network.md, "The switch")."""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import Codec
from hdl.codec.compressor import Compressor
from hdl.stream.axis import AxiStreamSignature
from hdl.stream.round_robin import round_robin
from hdl.stream.sync_fifo import SyncFifo
from hdl.switch.aggregation_engine import result_layout


class ResultBus(wiring.Component):
    """``engines`` engines' results (``s_meta_<k>`` / ``s_axis_<k>``: a result record, then its rounded
    binary32 or int32 beats) to ``ports`` ports (``m_meta_<i>`` / ``m_axis_<i>``: the record and the payload
    encoded with its codec, to each port in the record's ``dest``).

    * **Feed**: the engines take turns (round robin), a result at a time; its beats go through the one
      :class:`~hdl.codec.compressor.Compressor`, one a cycle. The next result's record is taken while the
      beats before it pass, and its first beat follows their last at once when both have the same codec (a
      change of codec waits until the compressor is empty; a result of one beat costs a cycle more).
      One job's results are a 1/N share of what its N ports bring, so one beat a cycle of results keeps
      every port of a job at line rate; jobs at once share it.
    * **Out**: the records wait in order (8 of them); each goes to its destinations at once (when every one
      of them is ready), then its encoded beats, each beat to all of them together.
    """

    def __init__(self, width: int, engines: int, ports: int):
        self.width, self.engines, self.ports = width, engines, ports
        self.result = result_layout(ports)
        members = {}
        for k in range(engines):
            members[f"s_meta_{k}"] = In(stream.Signature(self.result))
            members[f"s_axis_{k}"] = In(AxiStreamSignature(width))
        for i in range(ports):
            members[f"m_meta_{i}"] = Out(stream.Signature(self.result))
            members[f"m_axis_{i}"] = Out(AxiStreamSignature(width))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        K, N = self.engines, self.ports
        metas = [getattr(self, f"s_meta_{k}") for k in range(K)]
        pays = [getattr(self, f"s_axis_{k}") for k in range(K)]
        m.submodules.comp = comp = Compressor(self.width)
        m.submodules.mq = mq = SyncFifo(width=self.result.size, depth=8)

        # -- feed: a result's record into the queue, its beats into the compressor --------------------------
        # Records run a result ahead of the beats: the next result's record is taken (and queued for the
        # ports) while the beats before it pass, so that its beats follow at once and its record is at the
        # head of the queue when the ports finish the one before (the queue takes two cycles: a result of
        # one beat is followed by a cycle without one).
        feeding, owner, last = Signal(), Signal(range(max(K, 2))), Signal(range(max(K, 2)))
        ahead, ahead_owner = Signal(), Signal(range(max(K, 2)))
        codec = Signal(Codec)                   # the codec of the last result taken
        inside = Signal(range(8))               # results whose beats went in and whose last beat has not left
        want = Cat(*[s.valid for s in metas])
        pick, _ = round_robin(m, want, last, K, "feed")
        head = data.View(self.result, Array([s.payload for s in metas])[pick])
        src = Array(pays)[owner]
        fed = feeding & src.tvalid & comp.s_axis.tready
        fed_last = fed & src.tlast
        left_last = comp.m_axis.tvalid & comp.m_axis.tready & comp.m_axis.tlast
        # the compressor is empty: nothing taken that has not left (a change of codec waits for this)
        empty = ~feeding & ~ahead & (inside == 0)
        take = want.any() & mq.w_rdy & (~ahead | fed_last) & ((head.codec == codec) | empty)
        for k, s in enumerate(metas):
            m.d.comb += s.ready.eq(take & (pick == k))
        m.d.comb += [mq.w_en.eq(take), mq.w_data.eq(head)]
        with m.If(take):
            m.d.sync += [last.eq(pick), codec.eq(head.codec)]
            with m.If(~feeding | fed_last & ~ahead):
                m.d.sync += [feeding.eq(1), owner.eq(pick)]
            with m.Elif(fed_last):
                m.d.sync += [owner.eq(ahead_owner), ahead_owner.eq(pick)]
            with m.Else():
                m.d.sync += [ahead.eq(1), ahead_owner.eq(pick)]
        with m.Elif(fed_last):
            m.d.sync += [feeding.eq(ahead), owner.eq(ahead_owner), ahead.eq(0)]
        m.d.sync += inside.eq(inside + fed_last - left_last)
        # (the compressor registers its codec: the next result's from the cycle its record is taken, a cycle
        # before its first beat)
        m.d.comb += comp.cfg_codec.eq(Mux(take, head.codec, codec))
        for k, s in enumerate(pays):
            m.d.comb += s.tready.eq(feeding & (owner == k) & comp.s_axis.tready)
        m.d.comb += [comp.s_axis.tdata.eq(src.tdata), comp.s_axis.tkeep.eq(src.tkeep),
                     comp.s_axis.tlast.eq(src.tlast), comp.s_axis.tvalid.eq(feeding & src.tvalid)]

        # -- out: the record to its destinations, then its encoded beats to all of them at once ------------
        out_m = [getattr(self, f"m_meta_{i}") for i in range(N)]
        out_p = [getattr(self, f"m_axis_{i}") for i in range(N)]
        cur = data.View(self.result, mq.r_data)
        sending = Signal()
        held = Signal(N)                        # the destinations of the result whose beats are passing
        o = comp.m_axis
        all_pay_ready = Cat(*[~held[i] | out_p[i].tready for i in range(N)]).all()
        beat_go = sending & o.tvalid & all_pay_ready
        all_meta_ready = Cat(*[~cur.dest[i] | out_m[i].ready for i in range(N)]).all()
        meta_go = mq.r_rdy & all_meta_ready & (~sending | (beat_go & o.tlast))
        m.d.comb += [mq.r_en.eq(meta_go), o.tready.eq(sending & all_pay_ready)]
        for i in range(N):
            m.d.comb += [out_m[i].payload.eq(cur), out_m[i].valid.eq(mq.r_rdy & (~sending | (beat_go & o.tlast))
                                                                      & cur.dest[i] & all_meta_ready),
                         out_p[i].tdata.eq(o.tdata), out_p[i].tkeep.eq(o.tkeep), out_p[i].tlast.eq(o.tlast),
                         out_p[i].tvalid.eq(beat_go & held[i])]
        with m.If(meta_go):
            m.d.sync += [sending.eq(1), held.eq(cur.dest)]
        with m.Elif(beat_go & o.tlast):
            m.d.sync += sending.eq(0)
        return m
