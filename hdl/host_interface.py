"""The NIC's host side: registers, command processor, DMA engine and codec loop on AXI4-Lite + AXI4."""

from amaranth import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from host_driver import regmap as rm
from .axi import AxiSignature
from .axis import check_width
from .codec_loop import CodecLoop
from .command_processor import CommandProcessor
from .csr import AxiLiteSignature, RegisterBlock
from .dma_engine import DmaEngine


class HostInterface(wiring.Component):
    """``s_axil``: the register map (host_driver/regmap.py); ``m_axi``: host memory (descriptors, data,
    completions); ``irq``: IRQ_STATUS & IRQ_ENABLE. Runs local-copy descriptors end to end
    (docs/host_interface.md); the collective engine (issue 5) plugs into the same command processor."""

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        super().__init__({
            "s_axil": In(AxiLiteSignature((rm.SPAN - 1).bit_length())),
            "m_axi": Out(AxiSignature(width)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        m.submodules.regs = regs = RegisterBlock(W)
        m.submodules.cmd = cmd = CommandProcessor(W)
        m.submodules.dma = dma = DmaEngine(W)
        m.submodules.loop = loop = CodecLoop(W)
        wiring.connect(m, wiring.flipped(self.s_axil), regs.s_axil)
        wiring.connect(m, dma.m_axi, wiring.flipped(self.m_axi))
        m.d.comb += self.irq.eq(regs.irq)

        c, st = regs.cfg, regs.stat
        m.d.comb += [
            cmd.cfg.enable.eq(c.control[0]),
            cmd.cfg.sq_base.eq(Cat(c.sq_base_lo, c.sq_base_hi)),
            cmd.cfg.sq_size_log2.eq(c.sq_size_log2),
            cmd.cfg.cq_base.eq(Cat(c.cq_base_lo, c.cq_base_hi)),
            cmd.cfg.cq_size_log2.eq(c.cq_size_log2),
            cmd.cfg.cq_head.eq(c.cq_head),
            cmd.cfg.world_size.eq(c.world_size),
            cmd.cfg.rank.eq(c.rank),
            cmd.cfg.packet_elems.eq(c.packet_elems),
            st.sq_head.eq(cmd.stat.sq_head),
            st.sq_tail.eq(cmd.stat.sq_tail),
            st.cq_tail.eq(cmd.stat.cq_tail),
            st.desc_completed.eq(cmd.stat.completed),
            st.desc_errors.eq(cmd.stat.errors),
            regs.set.irq_status.eq(cmd.set_irq),
            regs.set.error_status.eq(cmd.set_error),
            cmd.doorbell.eq(regs.strobe[0]),
            cmd.doorbell_value.eq(regs.strobe_data[0]),
        ]
        wiring.connect(m, cmd.rd_cmd, dma.rd_cmd)
        wiring.connect(m, dma.rd_data, cmd.rd_data)
        wiring.connect(m, cmd.wr_cmd, dma.wr_cmd)
        wiring.connect(m, cmd.wr_data, dma.wr_data)
        wiring.connect(m, dma.wr_status, cmd.wr_status)
        m.d.comb += dma.wr_poison.eq(cmd.wr_poison)
        wiring.connect(m, cmd.loop_in, loop.s_axis)
        wiring.connect(m, loop.m_axis, cmd.loop_out)
        m.d.comb += [loop.cfg_codec.eq(cmd.loop_codec), loop.cfg_packet_elems.eq(c.packet_elems),
                     loop.cfg_count.eq(cmd.loop_count), loop.start.eq(cmd.loop_start)]
        return m
