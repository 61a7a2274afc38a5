"""The transmit header of each item the collective engine sends (the TxBuilder's metadata record)."""

from amaranth import Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import FrameFlag, FrameOpcode, PhaseKind
from contract.protocol import VERSION
from hdl.engine.ring_sequencer import Item
from hdl.packet.tx_builder import TxMeta

HeaderConfig = data.StructLayout({
    "rank": 16, "nodes": 16, "codec": 4, "dtype": 4, "job": 16, "collective": 16,
    "next_mac": 48, "next_ip": 32,
})


class TxHeaderGen(wiring.Component):
    """For each item on ``items`` that sends (every kind but ``last``), one record on ``m_meta`` for the
    TxBuilder: the ainic header (docs/protocol.md) — opcode ``data`` in the reduce-scatter, ``result`` from
    the final phase on; ``last_of_chunk`` flag; src rank = ``cfg.rank``, dst rank = the next; chunk, count,
    element offset; ``psn`` 0 (the link sender numbers the link's frames) — and the next rank's MAC and IP. Items of kind ``last`` are taken and produce nothing. Combinational, one item per cycle."""

    def __init__(self):
        super().__init__({
            "cfg": In(HeaderConfig),
            "start": In(1),
            "items": In(stream.Signature(Item)),
            "m_meta": Out(stream.Signature(TxMeta)),
        })

    def elaborate(self, platform):
        m = Module()
        it, cfg = self.items.payload, self.cfg
        meta = self.m_meta.payload
        h = meta.ainic
        K = PhaseKind
        sends = (it.kind != K.last) & (it.kind != K.scatter_end)
        result = (it.kind == K.final) | (it.kind == K.forward) | (it.kind == K.gather)
        m.d.comb += [
            h.version.eq(VERSION),
            h.opcode.eq(Mux(result, FrameOpcode.result, FrameOpcode.data)),
            h.codec.eq(cfg.codec), h.dtype.eq(cfg.dtype),
            h.flags.eq(Mux(it.last_of_chunk, FrameFlag.last_of_chunk, 0)),
            h.job.eq(cfg.job), h.collective.eq(cfg.collective),
            h.src_rank.eq(cfg.rank), h.dst_rank.eq(Mux(cfg.rank == cfg.nodes - 1, 0, cfg.rank + 1)),
            h.chunk.eq(it.chunk), h.count.eq(it.count), h.offset.eq(it.offset),
            meta.dst_ip.eq(cfg.next_ip), meta.dst_mac.eq(cfg.next_mac),
            self.m_meta.valid.eq(self.items.valid & sends),
            self.items.ready.eq(self.m_meta.ready | ~sends),
        ]
        return m
