"""DMA read engine: host memory -> an AXI-Stream of packed bytes, on the AR/R half of an AXI4 master."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.host.axi import BURST_INCR, AxiSignature
from hdl.host.burst_splitter import BurstSplitter
from hdl.stream.axis import AxiStreamSignature, check_width, keep_mask

#: a DMA request: ``length`` bytes at host address ``addr`` (both multiples of 4, length >= 4)
DmaCommand = data.StructLayout({"addr": 64, "length": 32})


def resp_max(a, b):
    """The worse of two AXI responses (DECERR > SLVERR > EXOKAY > OKAY)."""
    return Mux(a > b, a, b)


class DmaReader(wiring.Component):
    """Reads ``cmd.length`` bytes from ``cmd.addr`` and streams them on ``m_axis``, packed from byte 0.

    * ``cmd``: ``addr`` and ``length`` multiples of 4 (an element), ``length`` >= 4. Other values are the
      caller's bug (the command processor rejects such descriptors before they get here).
    * ``m_axis``: exactly ``ceil(length / (W/8))`` beats, ``tlast`` on the last, ``tkeep`` partial only
      there. ``tuser`` is the worst AXI response seen so far in this command (sticky): a command that met
      SLVERR/DECERR still delivers every beat (zeros from the memory) and ends with ``tuser`` != 0, so the
      consumer never hangs and learns of the error on ``tlast``.
    * AXI: INCR bursts of the full bus width from the bus-aligned address below ``addr``, never crossing a
      4 KiB boundary, at most 256 beats; up to ``max_outstanding`` bursts in flight (across commands); the
      next command's bursts are issued while the previous one's data is still arriving. Responses must
      return in order (one ID).
    * Throughput: one beat per cycle. A bus-aligned ``addr`` streams straight through; otherwise each
      command costs one extra cycle at its start and, when the tail fits in the last memory beat, one at
      its end (the realigner needs the next memory beat to fill an output beat).
    """

    def __init__(self, width: int = 512, max_outstanding: int = 16):
        self.width = check_width(width, self)
        self.max_outstanding = max_outstanding
        super().__init__({
            "cmd": In(stream.Signature(DmaCommand)),
            "m_axis": Out(AxiStreamSignature(width, user_width=2)),
            "m_axi": Out(AxiSignature(width)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        B = W // 8
        shift = B.bit_length() - 1
        lanes = W // 32
        axi, cmd, o = self.m_axi, self.cmd, self.m_axis

        # -- address side: split each command into bursts ----------------------------------------------
        info_layout = data.StructLayout({"lane": range(lanes), "n_in": 32, "n_out": 32, "last_bytes": range(B + 1)})
        m.submodules.info = info = fifo.SyncFIFO(width=info_layout.size, depth=4)
        m.submodules.bursts = bursts = BurstSplitter(W)
        outstanding = Signal(range(self.max_outstanding + 1))

        offset = cmd.payload.addr[:shift]
        new_info = Signal(info_layout)
        m.d.comb += [
            new_info.lane.eq(offset >> 2),
            new_info.n_in.eq((offset + cmd.payload.length + B - 1) >> shift),
            new_info.n_out.eq((cmd.payload.length + B - 1) >> shift),
            new_info.last_bytes.eq(cmd.payload.length - (((cmd.payload.length + B - 1) >> shift) - 1 << shift)),
            info.w_data.eq(new_info),
            cmd.ready.eq(~bursts.busy & info.w_rdy),
            info.w_en.eq(cmd.valid & cmd.ready),
            bursts.start.eq(info.w_en),
            bursts.start_addr.eq(cmd.payload.addr & ~(B - 1)),
            bursts.start_beats.eq(new_info.n_in),
        ]

        ar_go = axi.arvalid & axi.arready
        r_end = axi.rvalid & axi.rready & axi.rlast
        m.d.comb += [
            axi.arvalid.eq(bursts.valid & (outstanding < self.max_outstanding)),
            axi.araddr.eq(bursts.addr), axi.arlen.eq(bursts.len), axi.arsize.eq(shift), axi.arburst.eq(BURST_INCR),
            bursts.fire.eq(ar_go),
        ]
        m.d.sync += outstanding.eq(outstanding + ar_go - r_end)

        # -- data side: realign memory beats to byte 0 of the stream ------------------------------------
        cur = Signal(info_layout)
        m.d.comb += cur.eq(info.r_data)
        active = info.r_rdy
        in_cnt = Signal(32)
        out_cnt = Signal(32)
        have = Signal()
        prev = Signal(W)
        resp = Signal(2)
        last_out = out_cnt == cur.n_out - 1
        shifted = Signal(W)
        upper = Signal(W)
        m.d.comb += shifted.eq(Cat(prev, upper).bit_select(Cat(C(0, 5), cur.lane), W))
        m.d.comb += [
            o.tkeep.eq(Mux(last_out, keep_mask(cur.last_bytes, B), (1 << B) - 1)),
            o.tlast.eq(last_out),
        ]

        def finish():
            return [info.r_en.eq(1)], [in_cnt.eq(0), out_cnt.eq(0), have.eq(0), resp.eq(0)]

        take = axi.rvalid & axi.rready
        with m.If(take):
            m.d.sync += resp.eq(resp_max(resp, axi.rresp))
        with m.If(active & (cur.lane == 0)):                        # aligned: straight through
            m.d.comb += [
                o.tdata.eq(axi.rdata), o.tuser.eq(resp_max(resp, axi.rresp)),
                o.tvalid.eq(axi.rvalid), axi.rready.eq(o.tready),
            ]
            with m.If(o.tvalid & o.tready):
                m.d.sync += out_cnt.eq(out_cnt + 1)
                with m.If(last_out):
                    comb, sync = finish()
                    m.d.comb += comb
                    m.d.sync += sync
        with m.Elif(active & ~have):                                # misaligned: hold the first beat
            m.d.comb += axi.rready.eq(1)
            with m.If(take):
                m.d.sync += [prev.eq(axi.rdata), have.eq(1), in_cnt.eq(1)]
        with m.Elif(active & (in_cnt < cur.n_in)):                  # an output beat from two memory beats
            m.d.comb += [
                upper.eq(axi.rdata), o.tdata.eq(shifted), o.tuser.eq(resp_max(resp, axi.rresp)),
                o.tvalid.eq(axi.rvalid), axi.rready.eq(o.tready),
            ]
            with m.If(o.tvalid & o.tready):
                m.d.sync += [prev.eq(axi.rdata), in_cnt.eq(in_cnt + 1), out_cnt.eq(out_cnt + 1)]
                with m.If(last_out):
                    comb, sync = finish()
                    m.d.comb += comb
                    m.d.sync += sync
        with m.Elif(active):                                        # the tail, from the last memory beat
            m.d.comb += [o.tdata.eq(shifted), o.tuser.eq(resp), o.tvalid.eq(1)]
            with m.If(o.tready):
                comb, sync = finish()
                m.d.comb += comb
                m.d.sync += sync

        m.d.comb += self.busy.eq(bursts.busy | active | (outstanding != 0))
        return m
