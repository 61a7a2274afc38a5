"""Cuts one DMA command into AXI bursts: the address side both DMA engines share."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.host.axi import burst_len
from hdl.stream.axis import check_width


class BurstSplitter(wiring.Component):
    """On ``start`` (while not ``busy``) takes a bus-aligned ``start_addr`` and ``start_beats`` (>= 1); then
    offers one burst at a time on ``addr`` / ``len`` (AXI AxLEN: beats - 1) while ``valid``, never crossing a
    4 KiB boundary nor exceeding 256 beats (``axi.burst_len``). ``fire`` (the AR or AW handshake, only while
    ``valid``) moves to the next burst; ``last`` marks the command's final burst, after whose ``fire``
    ``busy`` drops. A burst is offered the cycle after the one before it went (or after ``start``): its length
    is computed in that cycle from registers, so that no path runs from the address through the page
    arithmetic into the next address."""

    def __init__(self, width: int):
        self.width = check_width(width, self)
        super().__init__({
            "start": In(1), "start_addr": In(64), "start_beats": In(32), "fire": In(1),
            "busy": Out(1), "valid": Out(1), "addr": Out(64), "len": Out(8), "last": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        shift = (self.width // 8).bit_length() - 1
        left_m1 = Signal(32)                    # beats to go, less one
        length, fits = burst_len(m, self.addr, left_m1, self.width, "burst_len")
        taken = Signal(9)                       # the offered burst's beats
        with m.If(self.start):
            m.d.sync += [self.busy.eq(1), self.valid.eq(0), self.addr.eq(self.start_addr),
                         left_m1.eq(self.start_beats - 1)]
        with m.Elif(self.valid & self.fire):
            m.d.sync += [self.valid.eq(0), self.addr.eq(self.addr + (taken << shift)), left_m1.eq(left_m1 - taken)]
            with m.If(self.last):
                m.d.sync += self.busy.eq(0)
        with m.Elif(self.busy & ~self.valid):
            m.d.sync += [self.valid.eq(1), taken.eq(length + 1), self.len.eq(length), self.last.eq(fits)]
        return m
