"""AXI4 (memory-mapped) master and AXI4-Lite ports as Amaranth signatures, and the burst rules the DMA
engine follows.

Only what a DMA master needs: one ID (0, so responses return in order), INCR bursts of the full bus width,
no locks, caches, QoS or regions (a shell ties them off; ``docs/hardware.md``). Port names follow AXI so the
exported Verilog binds to vendor IP and cocotbext-axi without glue.
"""

from amaranth import Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.enums import AxiResp

__all__ = ["AxiSignature", "AxiLiteSignature", "BURST_INCR", "RESP_OKAY", "RESP_EXOKAY", "RESP_SLVERR", "RESP_DECERR",
           "PAGE_BYTES", "max_burst_beats", "burst_beats"]

BURST_INCR = 1
RESP_OKAY, RESP_EXOKAY, RESP_SLVERR, RESP_DECERR = AxiResp
PAGE_BYTES = 4096            # an AXI burst never crosses a 4 KiB boundary


class AxiSignature(wiring.Signature):
    """AXI4 master (``Out`` = the master drives): AW, W, B, AR, R channels, ``addr_width``-bit addresses."""

    def __init__(self, data_width: int, addr_width: int = 64):
        self.data_width = data_width
        self.addr_width = addr_width
        super().__init__({
            "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3), "awburst": Out(2),
            "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
            "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2),
            "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rlast": In(1), "rvalid": In(1), "rready": Out(1),
        })

    def __eq__(self, other):
        return (isinstance(other, AxiSignature) and other.data_width == self.data_width
                and other.addr_width == self.addr_width)

    def __repr__(self):
        return f"AxiSignature({self.data_width}, addr_width={self.addr_width})"


class AxiLiteSignature(wiring.Signature):
    """AXI4-Lite slave port, as seen from the master (``Out`` = master drives), 32-bit data."""

    def __init__(self, addr_width: int = 16):
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })


def max_burst_beats(width: int) -> int:
    """Longest burst: 256 beats (AXI4) or one 4 KiB page, whichever is shorter."""
    return min(256, PAGE_BYTES // (width // 8))


def burst_beats(m, addr, remaining, width: int, name: str):
    """Beats of the next burst from bus-aligned ``addr`` with ``remaining`` beats to go: as many as fit
    before the next 4 KiB boundary, at most :func:`max_burst_beats`."""
    shift = (width // 8).bit_length() - 1
    cap = max_burst_beats(width)
    to_page = Signal(range(PAGE_BYTES // (width // 8) + 1), name=f"{name}_to_page")
    m.d.comb += to_page.eq((PAGE_BYTES - addr[:12]) >> shift)
    limit = Mux(to_page < cap, to_page, cap)
    beats = Signal(range(cap + 1), name=name)
    m.d.comb += beats.eq(Mux(remaining < limit, remaining, limit))
    return beats
