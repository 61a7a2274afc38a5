"""Gradient reduction unit: element-wise sum of two packet streams, W/32 lanes, one beat per cycle."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.arith.fp32_adder import Fp32AdderLane
from hdl.arith.int32_adder import Int32SatAdderLane
from hdl.stream.axis import AxiStreamSignature, check_width
from hdl.stream.credit_buffer import CreditBuffer

DTYPE_FP32 = 0
DTYPE_INT32 = 1


class ReductionUnit(wiring.Component):
    """``m_axis = s_axis_a + s_axis_b``, element by element (fp32 or saturating int32).

    ``s_axis_a`` carries the received partial sum, ``s_axis_b`` the local data; fp32 additions take the
    operands in that order (as docs/allreduce.md specifies; the result does not depend on it). A beat is
    consumed from both inputs together; framing (``tkeep``, ``tlast``) is taken from ``s_axis_a``.

    * ``width``: W in {64, 128, 256, 512}; W/32 lanes.
    * Latency: 10 cycles from an input beat to ``m_axis.tvalid`` (8 adder stages + FIFO write and read).
    * Throughput: one beat per cycle while ``m_axis.tready`` is high.
    * Backpressure: ``tready`` on the inputs is a registered credit check ANDed with both ``tvalid``
      (the join); no combinational path from ``m_axis.tready``.
    * ``cfg_dtype``: 0 fp32, 1 int32; change it only while no beat is in flight.
    * ``stat_overflow``: sticky, set when a kept int32 lane saturated; ``stat_framing``: sticky, set when
      the two inputs disagree on ``tkeep`` or ``tlast``. ``stat_clear`` clears both.
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        self.lanes = width // 32
        super().__init__({
            "s_axis_a": In(AxiStreamSignature(width)),
            "s_axis_b": In(AxiStreamSignature(width)),
            "m_axis": Out(AxiStreamSignature(width)),
            "cfg_dtype": In(1),
            "stat_overflow": Out(1),
            "stat_framing": Out(1),
            "stat_clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, nbytes = self.width, self.width // 8
        a, b, out = self.s_axis_a, self.s_axis_b, self.m_axis
        latency = Fp32AdderLane.LATENCY

        m.submodules.buffer = buf = CreditBuffer(W + nbytes + 1, latency)
        fire = Signal()
        m.d.comb += [
            fire.eq(a.tvalid & b.tvalid & buf.ready),
            a.tready.eq(fire),
            b.tready.eq(fire),
            buf.enter.eq(fire),
        ]

        results, overflows = [], []
        for i in range(self.lanes):
            fp = Fp32AdderLane()
            ii = Int32SatAdderLane(latency=latency)
            m.submodules[f"fp{i}"] = fp
            m.submodules[f"int{i}"] = ii
            lane_a = a.tdata[32 * i:32 * (i + 1)]
            lane_b = b.tdata[32 * i:32 * (i + 1)]
            m.d.comb += [fp.a.eq(lane_a), fp.b.eq(lane_b), ii.a.eq(lane_a), ii.b.eq(lane_b)]
            results.append((fp.sum, ii.sum))
            overflows.append(ii.overflow)

        # sideband (keep, last, dtype, valid) travels beside the lanes
        side = Cat(a.tkeep, a.tlast, self.cfg_dtype, fire)
        delayed = side
        for i in range(latency):
            d = Signal(len(side), name=f"side_d{i}")
            m.d.sync += d.eq(delayed)
            delayed = d
        keep_d = delayed[:nbytes]
        last_d = delayed[nbytes]
        dtype_d = delayed[nbytes + 1]
        valid_d = delayed[nbytes + 2]

        data_d = Cat(*[Mux(dtype_d == DTYPE_INT32, i_sum, f_sum) for f_sum, i_sum in results])
        ovf_d = Cat(*[o & keep_d[4 * i] for i, o in enumerate(overflows)]).any() & (dtype_d == DTYPE_INT32)
        m.d.comb += [
            buf.p_valid.eq(valid_d),
            buf.p_data.eq(Cat(data_d, keep_d, last_d)),
            out.tdata.eq(buf.m_data[:W]),
            out.tkeep.eq(buf.m_data[W:W + nbytes]),
            out.tlast.eq(buf.m_data[W + nbytes]),
            out.tvalid.eq(buf.m_valid),
            buf.m_ready.eq(out.tready),
        ]

        with m.If(self.stat_clear):
            m.d.sync += [self.stat_overflow.eq(0), self.stat_framing.eq(0)]
        with m.Else():
            with m.If(valid_d & ovf_d):
                m.d.sync += self.stat_overflow.eq(1)
            with m.If(fire & ((a.tkeep != b.tkeep) | (a.tlast != b.tlast))):
                m.d.sync += self.stat_framing.eq(1)
        return m
