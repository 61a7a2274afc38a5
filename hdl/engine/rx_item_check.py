"""Matches each received packet's header against the item the collective engine expects next."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import FrameFlag, FrameOpcode, PhaseKind
from hdl.engine.ring_sequencer import Item
from hdl.packet.rx_parser import RxMeta

RxCheckConfig = data.StructLayout({"rank": 16, "nodes": 16, "codec": 4, "dtype": 4, "job": 16,
                                   "collective": 16, "prev_ip": 32})

#: which header fields disagreed, one bit each (``stat_mismatch_fields`` accumulates them)
#: (the psn is the link's: the parser's sequence check takes only the psn expected next, contract/link.py)
FIELDS = ("opcode", "codec_dtype", "job_collective", "ranks", "chunk", "offset", "count", "flags", "src_ip")


class RxItemCheck(wiring.Component):
    """Pairs ``items`` that receive (every kind but ``send``) with ``s_meta`` records from the RxParser, in
    order, and checks the header is the one the previous rank's engine sends for that item: opcode
    (``data`` until the previous rank's final phase, then ``result``), codec, dtype, job, collective, src
    rank = previous rank, dst rank = this rank, chunk, element offset, count, last-of-chunk flag and the
    sender's IP. Each pair leaves on ``checked`` with a ``mismatch`` bit set per field that differed (0 when
    all agree); ``stat_mismatches`` counts bad pairs. Items of kind ``send`` pass with no record. While
    ``bypass`` (the engine's deadline ran out), an item that receives passes with no record when none is
    there, marked ``synthetic``: its payload will not come. Combinational, one pair per cycle."""

    def __init__(self):
        super().__init__({
            "cfg": In(RxCheckConfig),
            "start": In(1),
            "bypass": In(1),
            "items": In(stream.Signature(Item)),
            "s_meta": In(stream.Signature(RxMeta)),
            "checked": Out(stream.Signature(data.StructLayout({"item": Item, "mismatch": len(FIELDS),
                                                                         "synthetic": 1}))),
            "stat_mismatches": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        it, cfg = self.items.payload, self.cfg
        meta = self.s_meta.payload
        h = meta.ainic
        K = PhaseKind
        receives = (it.kind != K.send) & (it.kind != K.gather)
        prev = Mux(cfg.rank == 0, cfg.nodes - 1, cfg.rank - 1)
        # `result` frames are what the previous rank sent from its final (or gather) phase on
        want_opcode = Mux((it.kind == K.forward) | (it.kind == K.last), FrameOpcode.result, FrameOpcode.data)
        want_flags = Mux(it.last_of_chunk, FrameFlag.last_of_chunk, 0)
        bad = {
            "opcode": h.opcode != want_opcode,
            "codec_dtype": (h.codec != cfg.codec) | (h.dtype != cfg.dtype),
            "job_collective": (h.job != cfg.job) | (h.collective != cfg.collective),
            "ranks": (h.src_rank != prev) | (h.dst_rank != cfg.rank),
            "chunk": h.chunk != it.chunk,
            "offset": h.offset != it.offset,
            "count": h.count != it.count,
            "flags": (h.flags & ~FrameFlag.retransmit) != want_flags,     # a frame sent again is the same frame
            "src_ip": meta.src_ip != cfg.prev_ip,
        }
        mismatch = Signal(len(FIELDS))
        for i, name in enumerate(FIELDS):
            m.d.comb += mismatch[i].eq(receives & bad[name])
        out = self.checked
        synthetic = receives & ~self.s_meta.valid & self.bypass
        passes = ~receives | self.s_meta.valid | self.bypass
        m.d.comb += [
            out.payload.item.eq(it), out.payload.mismatch.eq(Mux(synthetic, 0, mismatch)),
            out.payload.synthetic.eq(synthetic),
            out.valid.eq(self.items.valid & passes),
            self.items.ready.eq(out.ready & passes),
            self.s_meta.ready.eq(self.items.valid & receives & out.ready),
        ]
        with m.If(self.s_meta.valid & self.s_meta.ready & (mismatch != 0)):
            m.d.sync += self.stat_mismatches.eq(self.stat_mismatches + 1)
        return m
