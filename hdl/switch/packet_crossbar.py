"""A packet crossbar: records with a payload, from any of N inputs to the output each record names."""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature
from hdl.stream.round_robin import round_robin


class PacketCrossbar(wiring.Component):
    """``inputs`` sources of (record on ``s_meta_<i>``, then its payload on ``s_axis_<i>`` up to ``tlast``)
    to ``outputs`` sinks (``m_meta_<k>``, ``m_axis_<k>``); a record goes to the output ``dest_<i>`` names
    (valid with the record).

    * Each output takes one packet at a time, choosing round-robin among the inputs whose record is for
      it; the record and the payload pass without a register (one beat a cycle), and the output is
      released after the payload's last beat. Inputs waiting for a busy output wait.
    * A record offered on an output and not taken is offered again, unchanged, until it is taken (a
      newcomer earlier in the round-robin order waits): the sink may act on a record before it takes it.
    * ``record`` is the payload layout of the meta streams; every packet has a payload of at least one beat,
      and a source offers its next record only after its previous payload's last beat has gone.
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
        for k in range(K):
            om, op = getattr(self, f"m_meta_{k}"), getattr(self, f"m_axis_{k}")
            busy = Signal(name=f"busy_{k}")          # a packet's record has passed, its payload has not
            owner = Signal(range(max(N, 2)), name=f"owner_{k}")
            last = Signal(range(max(N, 2)), name=f"last_{k}")
            offered = Signal(name=f"offered_{k}")   # a record was offered and not taken: offer it again
            held = Signal(range(max(N, 2)), name=f"held_{k}")
            want = Cat(*[metas[i].valid & (dests[i] == k) for i in range(N)])
            rr, _ = round_robin(m, want, last, N, f"out_{k}")
            pick = Signal(range(max(N, 2)), name=f"pick_{k}")
            m.d.comb += pick.eq(Mux(offered, held, rr))
            # a record is offered only while the output is free and a payload passes only while it is busy:
            # the record comes from the pick, the payload from the owner (the round robin is not in front
            # of the payload's multiplexer, nor of the release at its last beat)
            src_meta, src_pay = Array(metas)[pick], Array(pays)[owner]
            m.d.comb += [om.payload.eq(src_meta.payload), om.valid.eq(~busy & want.any()),
                         op.tdata.eq(src_pay.tdata), op.tkeep.eq(src_pay.tkeep), op.tlast.eq(src_pay.tlast),
                         op.tvalid.eq(busy & src_pay.tvalid)]
            for i in range(N):
                m.d.comb += [meta_ready[i][k].eq(~busy & (pick == i) & want[i] & om.ready),
                             pay_ready[i][k].eq(busy & (owner == i) & op.tready)]
            m.d.sync += [offered.eq(om.valid & ~om.ready), held.eq(pick)]
            with m.If(om.valid & om.ready):
                m.d.sync += [busy.eq(1), owner.eq(pick), last.eq(pick)]
            with m.If(op.tvalid & op.tready & op.tlast):
                m.d.sync += busy.eq(0)
        for i in range(N):
            m.d.comb += [metas[i].ready.eq(Cat(*meta_ready[i]).any()), pays[i].tready.eq(Cat(*pay_ready[i]).any())]
        return m
