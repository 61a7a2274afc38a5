"""DMA engine: the read and write engines side by side on one AXI4 master port."""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.host.axi import AxiSignature
from hdl.host.dma_reader import DmaCommand, DmaReader
from hdl.host.dma_writer import DmaWriter
from hdl.stream.axis import AxiStreamSignature, check_width

READ_MEMBERS = ("araddr", "arlen", "arsize", "arburst", "arvalid", "arready", "rdata", "rresp", "rlast",
                "rvalid", "rready")
WRITE_MEMBERS = ("awaddr", "awlen", "awsize", "awburst", "awvalid", "awready", "wdata", "wstrb", "wlast",
                 "wvalid", "wready", "bresp", "bvalid", "bready")


def dma_user_members(width: int) -> dict:
    """The ports of a block that uses the DMA engine (the command processor, the collective engines):
    read and write commands, the data read, the data to write, the write responses."""
    return {
        "rd_cmd": Out(stream.Signature(DmaCommand)),
        "rd_data": In(AxiStreamSignature(width, user_width=2)),
        "wr_cmd": Out(stream.Signature(DmaCommand)),
        "wr_data": Out(AxiStreamSignature(width)),
        "wr_status": In(stream.Signature(2)),
    }


class DmaEngine(wiring.Component):
    """Host memory access for the NIC: :class:`DmaReader` on AR/R, :class:`DmaWriter` on AW/W/B.

    The two channels are independent, so a copy reads and writes at the same time (one beat per cycle
    each). Alignment rules (``docs/hardware.md``): addresses and lengths are multiples of 4 bytes; buffers
    aligned to W/8 bytes take the fast path.
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        super().__init__({
            **{name: member.flip() for name, member in dma_user_members(width).items()},
            "wr_poison": In(1),
            "m_axi": Out(AxiSignature(width)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.reader = reader = DmaReader(self.width)
        m.submodules.writer = writer = DmaWriter(self.width)
        wiring.connect(m, wiring.flipped(self.rd_cmd), reader.cmd)
        wiring.connect(m, reader.m_axis, wiring.flipped(self.rd_data))
        wiring.connect(m, wiring.flipped(self.wr_cmd), writer.cmd)
        wiring.connect(m, wiring.flipped(self.wr_data), writer.s_axis)
        wiring.connect(m, writer.status, wiring.flipped(self.wr_status))
        m.d.comb += writer.poison.eq(self.wr_poison)
        for engine, names in ((reader, READ_MEMBERS), (writer, WRITE_MEMBERS)):
            for name in names:
                ours, theirs = getattr(self.m_axi, name), getattr(engine.m_axi, name)
                flow = AxiSignature(self.width).members[name].flow
                m.d.comb += (ours.eq(theirs) if flow == wiring.Out else theirs.eq(ours))
        m.d.comb += self.busy.eq(reader.busy | writer.busy)
        return m
