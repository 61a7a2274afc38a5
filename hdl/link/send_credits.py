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

        def allows(frames_left):
            """A frame is left: ``frames_left`` in 1 .. 2**31 - 1 (modulo 2**32)."""
            return ~frames_left[31] & (frames_left != 0)

        # What is left of each limit is kept in registers beside the counters, found for the next cycle from
        # candidates side by side (with and without a take, with and without new limits): each one
        # subtraction of registers and inputs; the take (which waits on ``ok``) only chooses among them.
        frames_left = Signal(32, init=cc.rx_frames)
        frames_ok = Signal(init=cc.rx_frames > 0)
        beats_left = Signal(32, init=cc.advertised_beats(self.width))
        beats_after = Signal(33)                # beats_left - beats: its borrow says the packet does not fit
        m.d.comb += [beats_after.eq(beats_left - self.beats),
                     self.ok.eq(frames_ok & ~beats_left[31] & ~beats_after[32])]
        one_less = Signal(32)
        m.d.comb += one_less.eq(frames_left - 1)
        new_left, new_less = Signal(32), Signal(32)     # new limits less what was sent (less one more frame)
        new_beats, new_beats_less = Signal(32), Signal(32)
        m.d.comb += [new_left.eq(self.limit_frames - self.sent_frames),
                     new_less.eq(self.limit_frames + ~self.sent_frames),
                     new_beats.eq(self.limit_beats - self.sent_beats),
                     new_beats_less.eq((self.limit_beats - self.beats) - self.sent_beats)]
        with m.If(self.limit_valid):
            with m.If(self.take):
                m.d.sync += [frames_left.eq(new_less), frames_ok.eq(allows(new_less)), beats_left.eq(new_beats_less)]
            with m.Else():
                m.d.sync += [frames_left.eq(new_left), frames_ok.eq(allows(new_left)), beats_left.eq(new_beats)]
        with m.Elif(self.take):
            m.d.sync += [frames_left.eq(one_less), frames_ok.eq(allows(one_less)), beats_left.eq(beats_after[:32])]
        with m.If(self.take):
            m.d.sync += [self.sent_frames.eq(self.sent_frames + 1), self.sent_beats.eq(self.sent_beats + self.beats)]
        return m
