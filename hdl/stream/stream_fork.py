"""One AXI-Stream to two consumers, each getting every beat, at its own pace within a beat."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature, check_width


class StreamFork(wiring.Component):
    """Every beat of ``s_axis`` appears on ``m_axis_a`` and on ``m_axis_b``; ``enable_a`` / ``enable_b``
    (static per packet) leave a branch out. A beat leaves ``s_axis`` once every enabled branch has taken
    it; a branch that took it early waits (its ``tvalid`` drops) for the other. One beat per cycle when
    both branches are ready; no storage, no added latency."""

    def __init__(self, width: int = 512, user_width: int = 0):
        self.width = check_width(width, self)
        self.user_width = user_width
        sig = AxiStreamSignature(width, user_width)
        super().__init__({"s_axis": In(sig), "m_axis_a": Out(sig), "m_axis_b": Out(sig),
                          "enable_a": In(1, init=1), "enable_b": In(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        s = self.s_axis
        done_a, done_b = Signal(), Signal()
        for o, done, en in ((self.m_axis_a, done_a, self.enable_a), (self.m_axis_b, done_b, self.enable_b)):
            m.d.comb += [o.tdata.eq(s.tdata), o.tkeep.eq(s.tkeep), o.tlast.eq(s.tlast),
                         o.tvalid.eq(s.tvalid & en & ~done)]
            if self.user_width:
                m.d.comb += o.tuser.eq(s.tuser)
        took_a = ~self.enable_a | done_a | self.m_axis_a.tready
        took_b = ~self.enable_b | done_b | self.m_axis_b.tready
        m.d.comb += s.tready.eq(took_a & took_b)
        with m.If(s.tvalid & s.tready):
            m.d.sync += [done_a.eq(0), done_b.eq(0)]
        with m.Elif(s.tvalid):
            m.d.sync += [done_a.eq(done_a | (self.enable_a & self.m_axis_a.tready)),
                         done_b.eq(done_b | (self.enable_b & self.m_axis_b.tready))]
        return m
