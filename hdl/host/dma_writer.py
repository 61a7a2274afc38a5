"""DMA write engine: an AXI-Stream of packed bytes -> host memory, on the AW/W/B half of an AXI4 master."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.host.axi import BURST_INCR, AxiSignature, max_burst_beats
from hdl.host.burst_splitter import BurstSplitter
from hdl.host.dma_reader import DmaCommand, resp_max
from hdl.stream.axis import AxiStreamSignature, check_width, keep_mask


class DmaWriter(wiring.Component):
    """Writes the next ``cmd.length`` bytes of ``s_axis`` to host memory at ``cmd.addr``; reports on ``status``.

    * ``cmd``: as for :class:`~hdl.dma_reader.DmaReader` (multiples of 4, length >= 4).
    * ``s_axis``: the command's bytes packed from byte 0, ``ceil(length / (W/8))`` beats; ``tkeep`` and
      ``tlast`` are not looked at (the command's length rules).
    * ``status``: one record per command, in order, once every write response of the command is back:
      the worst AXI response (OKAY = 0).
    * ``poison``: while high, beats go out with ``wstrb`` = 0 (nothing is written). The command processor
      raises it when the data it is copying came from a failed read.
    * AXI: INCR bursts as for the reader; ``wstrb`` covers exactly the command's bytes; AW runs ahead of W;
      W data never precedes its AW (bursts are queued between the two, up to 16).
    * Throughput: one beat per cycle, no bubble between commands; a misaligned command needs one more
      memory beat than it has stream beats (the last one flushes the tail).
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        super().__init__({
            "cmd": In(stream.Signature(DmaCommand)),
            "s_axis": In(AxiStreamSignature(width)),
            "status": Out(stream.Signature(2)),
            "poison": In(1),
            "m_axi": Out(AxiSignature(width)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        B = W // 8
        shift = B.bit_length() - 1
        lanes = W // 32
        axi, cmd, s = self.m_axi, self.cmd, self.s_axis
        cap = max_burst_beats(W)

        # -- address side ---------------------------------------------------------------------------------
        info_layout = data.StructLayout({"lane": range(lanes), "n_in": 32, "n_axi": 32, "end_bytes": range(B + 1)})
        m.submodules.info = info = fifo.SyncFIFO(width=info_layout.size, depth=4)
        m.submodules.bursts = bursts = fifo.SyncFIFO(width=(cap - 1).bit_length(), depth=16)
        m.submodules.done = done = fifo.SyncFIFO(width=32, depth=4)       # bursts per command, for B
        m.submodules.splitter = splitter = BurstSplitter(W)
        aw_count = Signal(32)

        offset = cmd.payload.addr[:shift]
        n_axi = (offset + cmd.payload.length + B - 1) >> shift
        new_info = Signal(info_layout)
        m.d.comb += [
            new_info.lane.eq(offset >> 2),
            new_info.n_in.eq((cmd.payload.length + B - 1) >> shift),
            new_info.n_axi.eq(n_axi),
            new_info.end_bytes.eq(offset + cmd.payload.length - (n_axi - 1 << shift)),
            info.w_data.eq(new_info),
            cmd.ready.eq(~splitter.busy & info.w_rdy),
            info.w_en.eq(cmd.valid & cmd.ready),
            splitter.start.eq(info.w_en),
            splitter.start_addr.eq(cmd.payload.addr & ~(B - 1)),
            splitter.start_beats.eq(n_axi),
        ]
        with m.If(info.w_en):
            m.d.sync += aw_count.eq(0)

        aw_go = axi.awvalid & axi.awready
        m.d.comb += [
            axi.awvalid.eq(splitter.valid & bursts.w_rdy & done.w_rdy),
            axi.awaddr.eq(splitter.addr), axi.awlen.eq(splitter.len), axi.awsize.eq(shift),
            axi.awburst.eq(BURST_INCR),
            splitter.fire.eq(aw_go),
            bursts.w_data.eq(splitter.len),
            bursts.w_en.eq(aw_go),
        ]
        with m.If(aw_go):
            m.d.sync += aw_count.eq(aw_count + 1)
            with m.If(splitter.last):
                m.d.comb += [done.w_en.eq(1), done.w_data.eq(aw_count + 1)]

        # -- data side: shift stream beats up to the destination's byte offset ---------------------------
        cur = Signal(info_layout)
        m.d.comb += cur.eq(info.r_data)
        k = Signal(32)                  # memory beat of the command
        in_burst = Signal(8)            # beat within the burst
        prev = Signal(W)
        flush = k >= cur.n_in           # the extra memory beat of a misaligned command: no stream beat
        first = k == 0
        last = k == cur.n_axi - 1
        lane_mask = Signal(B)
        m.d.comb += lane_mask.eq(
            Mux(first, ~keep_mask(Cat(C(0, 2), cur.lane), B), (1 << B) - 1)
            & Mux(last, keep_mask(cur.end_bytes, B), (1 << B) - 1))
        m.d.comb += [
            axi.wdata.eq(Cat(prev, Mux(flush, 0, s.tdata)).bit_select(Cat(C(0, 5), lanes - cur.lane), W)),
            axi.wstrb.eq(Mux(self.poison, 0, lane_mask)),
            axi.wlast.eq(in_burst == bursts.r_data),
            axi.wvalid.eq(info.r_rdy & bursts.r_rdy & (flush | s.tvalid)),
            s.tready.eq(info.r_rdy & bursts.r_rdy & ~flush & axi.wready),
        ]
        with m.If(axi.wvalid & axi.wready):
            m.d.sync += [k.eq(k + 1), in_burst.eq(in_burst + 1), prev.eq(Mux(flush, 0, s.tdata))]
            with m.If(axi.wlast):
                m.d.comb += bursts.r_en.eq(1)
                m.d.sync += in_burst.eq(0)
            with m.If(last):
                m.d.comb += info.r_en.eq(1)
                m.d.sync += [k.eq(0), prev.eq(0)]

        # -- responses -----------------------------------------------------------------------------------
        b_count = Signal(32)
        b_resp = Signal(2)
        complete = done.r_rdy & (b_count == done.r_data)
        m.d.comb += [
            axi.bready.eq(~complete),
            self.status.valid.eq(complete),
            self.status.payload.eq(b_resp),
        ]
        with m.If(axi.bvalid & axi.bready):
            m.d.sync += [b_count.eq(b_count + 1), b_resp.eq(resp_max(b_resp, axi.bresp))]
        with m.If(self.status.valid & self.status.ready):
            m.d.comb += done.r_en.eq(1)
            m.d.sync += [b_count.eq(0), b_resp.eq(0)]

        m.d.comb += self.busy.eq(splitter.busy | info.r_rdy | done.r_rdy)
        return m
