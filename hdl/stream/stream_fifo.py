"""An AXI-Stream FIFO: decouples a producer from a consumer by ``depth`` beats."""

from amaranth import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature
from hdl.stream.sync_fifo import SyncFifo, check_depth


class StreamFifo(wiring.Component):
    """``m_axis`` = ``s_axis`` (tdata, tkeep, tlast, tuser), beat for beat, up to ``depth`` beats later.

    * Throughput: one beat per cycle in and out. Latency: 2 cycles (a :class:`SyncFifo`: a memory of
      ``depth`` − 1 beats, then an output register) plus the time the consumer takes.
    * ``s_axis.tready`` and ``m_axis.tvalid`` are flip-flops (no path from ``m_axis.tready`` to
      ``s_axis.tready``, nor from a level's compare).
    """

    def __init__(self, width: int, depth: int, user_width: int = 0):
        check_depth(self, depth)
        self.width, self.depth, self.user_width = width, depth, user_width
        sig = AxiStreamSignature(width, user_width)
        super().__init__({"s_axis": In(sig), "m_axis": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        s, o = self.s_axis, self.m_axis
        fields = [s.tdata, s.tkeep, s.tlast] + ([s.tuser] if self.user_width else [])
        bits = sum(len(f) for f in fields)
        m.submodules.q = q = SyncFifo(width=bits, depth=self.depth)
        m.d.comb += [q.w_data.eq(Cat(*fields)), q.w_en.eq(s.tvalid), s.tready.eq(q.w_rdy),
                     o.tvalid.eq(q.r_rdy), q.r_en.eq(o.tready)]
        at = 0
        for src in [o.tdata, o.tkeep, o.tlast] + ([o.tuser] if self.user_width else []):
            m.d.comb += src.eq(q.r_data[at:at + len(src)])
            at += len(src)
        return m
