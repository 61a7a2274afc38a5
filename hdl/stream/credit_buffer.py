"""Output buffer that lets a fixed-latency, never-stalling pipeline sit behind a stream interface."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.sync_fifo import SyncFifo


class CreditBuffer(wiring.Component):
    """FIFO plus a credit counter for a pipeline of ``latency`` cycles that always advances.

    The upstream side asks ``ready``; when an item enters the pipeline it pulses ``enter``. The pipeline
    delivers the item ``latency`` cycles later on ``p_valid``/``p_data``; it is stored here and leaves on
    ``m_data``/``m_valid``/``m_ready``. ``ready`` is a registered compare of the count of items in flight plus
    stored against ``depth``, so no combinational path runs from ``m_ready`` to ``ready``, and an
    item in flight always finds room. With ``depth >= latency + 3`` the pipeline accepts one item per cycle
    while ``m_ready`` stays high.
    """

    def __init__(self, width: int, latency: int):
        self.width = width
        self.latency = latency
        self.depth = latency + 4
        super().__init__({
            "ready": Out(1),
            "enter": In(1),
            "p_valid": In(1),
            "p_data": In(width),
            "m_data": Out(width),
            "m_valid": Out(1),
            "m_ready": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SyncFifo(width=self.width, depth=self.depth)
        count = Signal(range(self.depth + 1))
        leave = fifo.r_rdy & self.m_ready
        m.d.sync += count.eq(count + self.enter - leave)
        m.d.comb += [
            self.ready.eq(count < self.depth),
            fifo.w_data.eq(self.p_data),
            fifo.w_en.eq(self.p_valid),
            self.m_data.eq(fifo.r_data),
            self.m_valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.m_ready),
        ]
        return m
