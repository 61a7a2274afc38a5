"""Saturating two's-complement int32 adder lane."""

from amaranth import C, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Int32SatAdderLane(wiring.Component):
    """``sum = clamp(a + b, -2**31, 2**31 - 1)``; ``overflow`` is high with a clamped result.

    Bit-exact with ``host_driver.models.numerics.add_i32``. Latency ``latency`` cycles (default 1; the
    reduction unit asks for the fp32 lane's latency so both element types share one pipeline),
    one addition per cycle, no stall input.
    """

    def __init__(self, latency: int = 1):
        if latency < 1:
            self._MustUse__silence = True       # a rejected object is not an unused design
            raise ValueError(f"latency must be >= 1, got {latency}")
        self.latency = latency
        super().__init__({"a": In(32), "b": In(32), "sum": Out(32), "overflow": Out(1)})

    def elaborate(self, platform):
        m = Module()
        wide = Signal(33)
        m.d.comb += wide.eq(self.a.as_signed() + self.b.as_signed())
        ovf = wide[32] ^ wide[31]
        sat = Mux(wide[32], C(0x80000000, 32), C(0x7FFFFFFF, 32))
        stage_sum, stage_ovf = Mux(ovf, sat, wide[:32]), ovf
        for i in range(self.latency):
            s = Signal(32, name=f"sum_d{i}", reset_less=True)
            o = Signal(name=f"ovf_d{i}", reset_less=True)
            m.d.sync += [s.eq(stage_sum), o.eq(stage_ovf)]
            stage_sum, stage_ovf = s, o
        m.d.comb += [self.sum.eq(stage_sum), self.overflow.eq(stage_ovf)]
        return m
