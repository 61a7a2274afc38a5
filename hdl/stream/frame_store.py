"""Whole frames kept by index and sent again: the copy of what a sender put on the wire, so that a resend
costs the wire and not the stages that made the frame (a NIC's contributions in flight)."""

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.memory import scratch_memory
from hdl.stream.axis import AxiStreamSignature, check_width


class FrameStore(wiring.Component):
    """``depth`` beats of ``width`` bits (each with its tkeep and tlast), in frames of up to 2**``cfg_stride``
    beats: frame i is kept at beats [i · 2**stride, (i + 1) · 2**stride).

    * **Write** (never refused): a beat on ``w_valid`` (``w_data``, ``w_keep``, ``w_last``) is beat b of frame
      ``w_index``, b counted from 0 after each ``w_last`` (and after reset or ``w_restart``). The writer
      passes the beats of a frame in order, as they pass on their way elsewhere.
    * **Read**: an index taken on ``r_index`` sends that frame's beats on ``m_axis`` up to and including the
      one written with tlast (or the last of its place: a frame never written ends there, and so does what
      the read gives back, whatever it is); the next index is taken once that beat has left. Its first beat is offered two
      cycles after the index is taken, then one a cycle; ``m_axis.tvalid`` is a flip-flop, ``m_axis.tdata``
      the memory's output register.
    * A frame read while it is being written, a frame longer than 2**stride beats, or an index whose frames
      do not fit in ``depth``: what comes out is undefined but ends (the users keep these apart:
      docs/in_network.md).
    """

    def __init__(self, width: int, depth: int, index_bits: int):
        self.width = check_width(width, self)
        if depth < 2 or depth & (depth - 1):
            self._MustUse__silence = True
            raise ValueError(f"depth must be a power of two of 2 or more, got {depth}")
        self.depth, self.index_bits = depth, index_bits
        super().__init__({
            "cfg_stride": In(range(depth.bit_length())),
            "w_restart": In(1),
            "w_valid": In(1), "w_index": In(index_bits), "w_data": In(width), "w_keep": In(width // 8),
            "w_last": In(1),
            "r_index": In(stream.Signature(index_bits)),
            "m_axis": Out(AxiStreamSignature(width)),
        })

    def elaborate(self, platform):
        m = Module()
        W, B, depth = self.width, self.width // 8, self.depth
        m.submodules.mem = mem = scratch_memory(shape=W + B + 1, depth=depth)
        wp, rp = mem.write_port(), mem.read_port()
        abits = (depth - 1).bit_length()

        def base(index):
            return (index << self.cfg_stride)[:abits]

        # -- write: beat b of the frame passing, at its frame's base + b ---------------------------------------
        beat = Signal(abits)
        m.d.comb += [wp.en.eq(self.w_valid), wp.addr.eq(base(self.w_index) | beat),
                     wp.data.eq(Cat(self.w_data, self.w_keep, self.w_last))]
        with m.If(self.w_valid):
            m.d.sync += beat.eq(beat + 1)
            with m.If(self.w_last):
                m.d.sync += beat.eq(0)
        with m.If(self.w_restart):
            m.d.sync += beat.eq(0)

        # -- read: a beat fetched while the output is empty or leaving (and was not the frame's last) ---------
        reading, offered = Signal(), Signal()
        addr = Signal(abits)
        at_end = Signal()                       # the beat offered is the last of its frame's place
        o = self.m_axis
        m.d.comb += [o.tdata.eq(rp.data[:W]), o.tkeep.eq(rp.data[W:W + B]), o.tlast.eq(rp.data[W + B] | at_end),
                     o.tvalid.eq(offered)]
        leaves = offered & o.tready
        fetch = reading & (~offered | leaves & ~o.tlast)
        m.d.comb += [rp.addr.eq(addr), rp.en.eq(fetch)]
        mask = Signal(abits)
        m.d.comb += mask.eq(((1 << self.cfg_stride) - 1)[:abits])
        with m.If(fetch):
            m.d.sync += [addr.eq(addr + 1), offered.eq(1), at_end.eq((addr & mask) == mask)]
        with m.Elif(leaves):
            m.d.sync += offered.eq(0)
        with m.If(leaves & o.tlast):
            m.d.sync += [reading.eq(0), offered.eq(0)]
        m.d.comb += self.r_index.ready.eq(~reading & ~offered)
        with m.If(self.r_index.valid & self.r_index.ready):
            m.d.sync += [reading.eq(1), addr.eq(base(self.r_index.payload))]
        return m
