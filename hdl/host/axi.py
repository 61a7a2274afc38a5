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
           "PAGE_BYTES", "max_burst_beats", "burst_len"]

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


def burst_len(m, addr, remaining_m1, width: int, name: str):
    """The next burst from bus-aligned ``addr`` with ``remaining_m1`` + 1 beats to go, as AxLEN (beats - 1):
    as many beats as fit before the next 4 KiB boundary, at most :func:`max_burst_beats`; and whether it is
    the last (all the remaining beats fit). In the minus-one form throughout, so that no subtraction follows
    the choices: the beats to the page's end less one are the complement of the beat index in the page."""
    shift = (width // 8).bit_length() - 1
    cap = max_burst_beats(width)
    in_page = addr[shift:12]
    to_page_m1 = Signal(len(in_page), name=f"{name}_to_page_m1")
    m.d.comb += to_page_m1.eq(~in_page)
    limit_m1 = Signal(range(cap), name=f"{name}_limit_m1")
    m.d.comb += limit_m1.eq(Mux(to_page_m1 < cap - 1, to_page_m1, cap - 1))
    # remaining <= limit, with the high bits of ``remaining_m1`` beside the compare of its low ones
    fits = (remaining_m1[len(in_page):] == 0) & (remaining_m1[:len(in_page)] <= limit_m1)
    length = Signal(8, name=name)
    m.d.comb += length.eq(Mux(fits, remaining_m1, limit_m1))
    return length, fits
