"""A receiver's view of the numbers on one in-network link: is the frame waiting newer than the newest taken, and
was the one just before it lost? (docs/in_network.md, "Losses"; the golden model is
``contract.in_network.seq_gap``)"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.in_network import SEQ_MOD

SEQ_BITS = (SEQ_MOD - 1).bit_length()


class LinkNumbers(wiring.Component):
    """The frames on a link carry a number (``chunk``, modulo 2**16) and the psn of the frame before; this keeps
    the newest number taken and compares a waiting frame's against it.

    * ``number``: the waiting frame's number, held while it waits. ``lost`` and ``newer`` are its verdicts one
      cycle later (registers): ``newer``, it is ahead of the newest by less than half the number space (or
      nothing was taken yet); ``lost``, newer and at least two past the newest (one frame or more between
      them were lost: the one just before it, whose psn it names, among them).
    * ``take``: the waiting frame is taken this cycle (its verdicts valid); if newer, it becomes the newest.
    """

    def __init__(self):
        super().__init__({"number": In(SEQ_BITS), "take": In(1), "lost": Out(1), "newer": Out(1)})

    def elaborate(self, platform):
        m = Module()
        newest, valid = Signal(SEQ_BITS), Signal()
        d = Signal(SEQ_BITS)
        m.d.comb += d.eq(self.number - newest)
        m.d.sync += [self.lost.eq(valid & (d[1:] != 0) & ~d[-1]), self.newer.eq(~valid | (d != 0) & ~d[-1])]
        with m.If(self.take & self.newer):
            m.d.sync += [newest.eq(self.number), valid.eq(1)]
        return m
