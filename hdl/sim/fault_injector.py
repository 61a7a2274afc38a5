"""Fault injection on a link of the cluster harness: drops, duplicates and corrupts frames, seeded."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.protocol import MAX_FRAME_BYTES
from hdl.memory import scratch_memory
from hdl.stream.axis import AxiStreamSignature, check_width


def xorshift32(m: Module, s, name: str):
    """One step of xorshift32 (13, 17, 5) on the 32-bit value ``s``: ``contract.in_network.xorshift32``."""
    a, b, c = (Signal(32, name=f"{name}_{i}") for i in range(3))
    m.d.comb += [a.eq(s ^ (s << 13)[:32]), b.eq(a ^ (a >> 17)), c.eq(b ^ (b << 5)[:32])]
    return c


class FaultInjector(wiring.Component):
    """Frames from ``s_axis`` to ``m_axis``, each dropped, corrupted or duplicated as
    ``contract.in_network.FaultStream`` decides (docs/in_network.md, "Faults on the links").

    * The generator starts from ``cfg_seed`` (taken while no frame has passed since reset or since
      ``cfg_load``) and steps twice per frame, at its first beat: the first step decides drop (bits 15:0
      against ``cfg_drop``) and corruption (bits 31:16 against ``cfg_corrupt``), the second duplication
      (bits 15:0 against ``cfg_dup``). Thresholds are probabilities times 65536. ``cfg_drop_all``: every frame
      that starts while it is high is dropped (a dead link; the generator steps as usual).
    * Dropped: the frame is taken and nothing leaves. Corrupted: its last beat leaves with ``tuser`` set
      and bit 0 of its byte 0 inverted (a MAC reports a bad FCS on ``tuser``). Duplicated: the frame, as
      it left, leaves again right behind it (it is kept in a buffer of one largest frame as it passes).
    * One beat per cycle, passed through without a register; ``s_axis`` waits while a copy leaves.
      ``tuser`` coming in goes out (or-ed with the corruption). Counters: frames in, dropped, duplicated,
      corrupted.
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        self.depth = 1 << (-(-MAX_FRAME_BYTES // (width // 8)) - 1).bit_length()
        super().__init__({
            "s_axis": In(AxiStreamSignature(width, 1)),
            "m_axis": Out(AxiStreamSignature(width, 1)),
            "cfg_seed": In(32, init=1),
            "cfg_load": In(1),
            "cfg_drop": In(16),
            "cfg_dup": In(16),
            "cfg_corrupt": In(16),
            "cfg_drop_all": In(1),
            "stat_frames": Out(32),
            "stat_dropped": Out(32),
            "stat_duplicated": Out(32),
            "stat_corrupted": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        W, B = self.width, self.width // 8
        s, o = self.s_axis, self.m_axis

        state = Signal(32)
        seeded = Signal()
        current = Mux(seeded & ~self.cfg_load, state, self.cfg_seed)
        step1 = xorshift32(m, current, "fault_step1")
        step2 = xorshift32(m, step1, "fault_step2")
        drop_new = (step1[:16] < self.cfg_drop) | self.cfg_drop_all
        corrupt_new = ~drop_new & (step1[16:] < self.cfg_corrupt)
        dup_new = ~drop_new & (step2[:16] < self.cfg_dup)

        in_frame = Signal()                     # past the first beat of a frame
        drop_l, corrupt_l, dup_l = Signal(), Signal(), Signal()
        drop = Mux(in_frame, drop_l, drop_new)
        corrupt = Mux(in_frame, corrupt_l, corrupt_new)
        dup = Mux(in_frame, dup_l, dup_new)

        # the copy: every beat that leaves is written at its index; replayed after the last
        entry = W + B + 2                       # tdata, tkeep, tlast, tuser
        m.submodules.copy = mem = scratch_memory(shape=entry, depth=self.depth)
        wp = mem.write_port()
        rp = mem.read_port(domain="comb")
        wr_idx = Signal(range(self.depth))
        replay = Signal()
        rd_idx = Signal(range(self.depth))

        out_user = s.tuser | (corrupt & s.tlast)
        out_data = Cat(s.tdata[0] ^ (corrupt & s.tlast), s.tdata[1:])
        head = Signal(entry)
        m.d.comb += [head.eq(rp.data), rp.addr.eq(rd_idx)]
        with m.If(replay):
            m.d.comb += [o.tdata.eq(head[:W]), o.tkeep.eq(head[W:W + B]), o.tlast.eq(head[W + B]),
                         o.tuser.eq(head[W + B + 1]), o.tvalid.eq(1), s.tready.eq(0)]
            with m.If(o.tready):
                m.d.sync += rd_idx.eq(rd_idx + 1)
                with m.If(head[W + B]):
                    m.d.sync += [replay.eq(0), self.stat_duplicated.eq(self.stat_duplicated + 1)]
        with m.Else():
            m.d.comb += [o.tdata.eq(out_data), o.tkeep.eq(s.tkeep), o.tlast.eq(s.tlast), o.tuser.eq(out_user),
                         o.tvalid.eq(s.tvalid & ~drop), s.tready.eq(drop | o.tready)]

        take = s.tvalid & s.tready
        m.d.comb += [wp.addr.eq(wr_idx), wp.data.eq(Cat(out_data, s.tkeep, s.tlast, out_user)),
                     wp.en.eq(take & dup)]
        with m.If(take):
            m.d.sync += [in_frame.eq(~s.tlast), wr_idx.eq(Mux(s.tlast, 0, wr_idx + 1))]
            with m.If(~in_frame):
                m.d.sync += [state.eq(step2), seeded.eq(1), drop_l.eq(drop_new), corrupt_l.eq(corrupt_new),
                             dup_l.eq(dup_new), self.stat_frames.eq(self.stat_frames + 1),
                             self.stat_dropped.eq(self.stat_dropped + drop_new),
                             self.stat_corrupted.eq(self.stat_corrupted + corrupt_new)]
            with m.If(s.tlast & dup):
                m.d.sync += [replay.eq(1), rd_idx.eq(0)]
        with m.If(self.cfg_load):
            m.d.sync += seeded.eq(0)
        return m
