"""A network link for the cluster harness: latency, bandwidth and per-frame overhead, in HDL."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature, check_width, keep_count
from hdl.stream.sync_fifo import SyncFifo


class LinkModel(wiring.Component):
    """Frames from ``s_axis`` reach ``m_axis`` ``cfg_latency`` cycles after they entered, no faster than
    ``cfg_rate`` bytes per cycle.

    * ``cfg_rate``: bytes per cycle in 8.8 fixed point (80 Gb/s at 250 MHz = 40 B/cycle = 10240); 0 means
      one beat per cycle. Each frame also costs ``cfg_overhead`` bytes (default 24: FCS 4, preamble and
      start delimiter 8, inter-frame gap 12), charged on its last beat.
    * The rate is enforced where frames enter (a token bucket, at most two beats of credit); beats then wait
      in a FIFO of ``depth`` beats until their time has come, so a link carries latency x rate bytes in
      flight without stalling: choose ``depth`` >= latency + a frame.
    * Frames are never dropped or reordered; backpressure on ``m_axis`` fills the FIFO and then stops
      ``s_axis``. ``stat_frames`` / ``stat_bytes`` count what entered. With ``user_width``, ``tuser`` travels
      with every beat (a frame's MAC-error mark stays on it).
    """

    def __init__(self, width: int = 512, depth: int = 1024, user_width: int = 0):
        self.width = check_width(width, self)
        self.depth = depth
        self.user_width = user_width
        super().__init__({
            "s_axis": In(AxiStreamSignature(width, user_width)),
            "m_axis": Out(AxiStreamSignature(width, user_width)),
            "cfg_latency": In(16),
            "cfg_rate": In(16),
            "cfg_overhead": In(8, init=24),
            "stat_frames": Out(32),
            "stat_bytes": Out(48),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        B = W // 8
        s, o = self.s_axis, self.m_axis
        entry = data.StructLayout({"tdata": W, "tkeep": B, "tlast": 1, "tuser": max(1, self.user_width), "due": 32})
        # (SyncFIFOBuffered's ports and timing; its rows are not written out as zeros: hdl/memory.py)
        m.submodules.q = q = SyncFifo(width=entry.size, depth=self.depth)
        now = Signal(32)
        m.d.sync += now.eq(now + 1)

        # token bucket, 8.8 fixed point, signed: a beat may enter while the balance is positive
        tokens = Signal(34)                                # two's complement
        balance = tokens.as_signed()
        unlimited = self.cfg_rate == 0
        nbytes = keep_count(m, s.tkeep, "link_bytes")
        cost = Signal(34)
        m.d.comb += cost.eq(Cat(0, 0, 0, 0, 0, 0, 0, 0, nbytes + Mux(s.tlast, self.cfg_overhead, 0)))
        take = s.tvalid & s.tready
        after = Signal(34)
        m.d.comb += after.eq(tokens + self.cfg_rate - Mux(take, cost, 0))
        cap = 2 * B << 8
        with m.If(unlimited):
            m.d.sync += tokens.eq(0)
        with m.Elif(after.as_signed() > cap):
            m.d.sync += tokens.eq(cap)
        with m.Else():
            m.d.sync += tokens.eq(after)

        new = Signal(entry)
        m.d.comb += [
            new.tdata.eq(s.tdata), new.tkeep.eq(s.tkeep), new.tlast.eq(s.tlast),
            new.tuser.eq(s.tuser if self.user_width else 0),
            new.due.eq(now + self.cfg_latency),
            q.w_data.eq(new),
            s.tready.eq(q.w_rdy & (unlimited | (balance > 0))),
            q.w_en.eq(take),
        ]
        with m.If(take):
            m.d.sync += self.stat_bytes.eq(self.stat_bytes + nbytes)
            with m.If(s.tlast):
                m.d.sync += self.stat_frames.eq(self.stat_frames + 1)

        head = Signal(entry)
        m.d.comb += head.eq(q.r_data)
        due = (now - head.due).as_signed() >= 0          # wrap-safe comparison
        m.d.comb += [
            o.tdata.eq(head.tdata), o.tkeep.eq(head.tkeep), o.tlast.eq(head.tlast),
            *([o.tuser.eq(head.tuser)] if self.user_width else []),
            o.tvalid.eq(q.r_rdy & due),
            q.r_en.eq(o.tvalid & o.tready),
        ]
        return m
