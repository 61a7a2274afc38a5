"""The sender's side of the receive credits: may the next packet go to the next rank? (contract/credits.py)"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract import credits as cr


class SendCredits(wiring.Component):
    """Frames and payload beats sent since reset against the limits the next rank last advertised.

    * ``limit_valid`` with ``limit_frames`` / ``limit_beats``: an ack's limits (its ``psn`` and ``offset``);
      until the first one the limits are the receiver's whole room, ``credits.rx_frames`` frames and
      ``credits.advertised_beats(width)`` beats (neighbours are the same build).
    * ``ok``: a packet of ``beats`` payload beats stays within both limits (counters and limits are 32-bit
      and compared modulo 2**32, so they may wrap). ``take``: the packet was taken (only while ``ok``).
    """

    def __init__(self, width: int, credits: cr.Credits = cr.DEFAULT):
        self.width = width
        self.credits = credits
        super().__init__({
            "limit_valid": In(1), "limit_frames": In(32), "limit_beats": In(32),
            "beats": In(32), "ok": Out(1), "take": In(1),
            "sent_frames": Out(32), "sent_beats": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        cc = self.credits
        limit_frames = Signal(32, init=cc.rx_frames)
        limit_beats = Signal(32, init=cc.advertised_beats(self.width))
        frames_left, beats_left = Signal(32), Signal(32)
        m.d.comb += [
            frames_left.eq(limit_frames - self.sent_frames), beats_left.eq(limit_beats - self.sent_beats),
            self.ok.eq(~frames_left[31] & (frames_left != 0) & ~beats_left[31] & (beats_left >= self.beats)),
        ]
        with m.If(self.limit_valid):
            m.d.sync += [limit_frames.eq(self.limit_frames), limit_beats.eq(self.limit_beats)]
        with m.If(self.take):
            m.d.sync += [self.sent_frames.eq(self.sent_frames + 1), self.sent_beats.eq(self.sent_beats + self.beats)]
        return m
