"""A host memory for the Amaranth simulator: the slave side of an AXI4 master (one ID, in-order responses),
cycle by cycle, with random stalls on every channel, an address range that answers SLVERR, and a check of the
AXI rules the DMA engines promise (docs/host_interface.md): INCR bursts of the full bus width, aligned,
at most 256 beats, never across a 4 KiB page; W never ahead of its AW; ``wlast`` on a burst's last beat."""

from dataclasses import dataclass, field

import numpy as np

from contract.enums import AxiResp
from hdl.host.axi import BURST_INCR, PAGE_BYTES


@dataclass
class AxiMemory:
    """``mem``: the bytes (address 0 up); ``error``: (lo, hi) byte ranges whose beats answer SLVERR;
    ``stall``: the probability a channel is not ready (or, for R and B, not valid) in a cycle."""
    width: int
    mem: bytearray
    rng: np.random.Generator
    stall: float = 0.0
    error: tuple = ()
    max_outstanding_seen: int = 0
    reads: list = field(default_factory=list)           # accepted AR bursts (addr, beats)
    writes: list = field(default_factory=list)          # accepted AW bursts (addr, beats)

    def __post_init__(self):
        self.B = self.width // 8
        self._r = []                # [addr, beats left] of read bursts not yet answered in full
        self._w = []                # [addr, beats left] of write bursts whose data has not all arrived
        self._b = []                # responses of write bursts whose data is all in
        self._rvalid = self._bvalid = False     # a valid shown stays up until taken (AXI)

    def _go(self):
        return not (self.stall and self.rng.random() < self.stall)

    def _check_burst(self, addr, length, size, burst):
        B = self.B
        beats = length + 1
        assert burst == BURST_INCR and size == B.bit_length() - 1, (burst, size)
        assert addr % B == 0, f"burst address {addr:#x} not aligned to the {B}-byte bus"
        assert beats <= 256, f"burst of {beats} beats"
        assert addr // PAGE_BYTES == (addr + beats * B - 1) // PAGE_BYTES, f"burst at {addr:#x} crosses a 4 KiB page"
        return beats

    def _resp(self, addr):
        bad = any(lo < addr + self.B and addr < hi for lo, hi in self.error)
        return AxiResp.slverr if bad else AxiResp.okay

    def offer_command(self, ctx, port, pending: list):
        """Offer the first of ``pending`` (addr, length) DMA commands on ``port`` (a ``DmaCommand`` stream);
        call after the other inputs are set: it pops the command if taken this cycle."""
        ctx.set(port.valid, bool(pending))
        if pending:
            ctx.set(port.payload.addr, pending[0][0])
            ctx.set(port.payload.length, pending[0][1])
            if ctx.get(port.ready):
                pending.pop(0)

    def set_read(self, ctx, axi):
        """Drive AR/R for this cycle (call before the tick, after the master's inputs are set)."""
        ctx.set(axi.arready, self._go())
        self._rvalid = bool(self._r) and (self._rvalid or self._go())
        if self._rvalid:
            addr, left = self._r[0]
            ctx.set(axi.rvalid, 1)
            ctx.set(axi.rdata, int.from_bytes(self.mem[addr:addr + self.B], "little"))
            ctx.set(axi.rresp, self._resp(addr))
            ctx.set(axi.rlast, left == 1)
        else:
            ctx.set(axi.rvalid, 0)

    def step_read(self, ctx, axi):
        """Account for the handshakes of this cycle (call right before the tick)."""
        if ctx.get(axi.rvalid) and ctx.get(axi.rready):
            self._rvalid = False
            burst = self._r[0]
            burst[0] += self.B
            burst[1] -= 1
            if burst[1] == 0:
                self._r.pop(0)
        if ctx.get(axi.arvalid) and ctx.get(axi.arready):
            addr = ctx.get(axi.araddr)
            beats = self._check_burst(addr, ctx.get(axi.arlen), ctx.get(axi.arsize), ctx.get(axi.arburst))
            self.reads.append((addr, beats))
            self._r.append([addr, beats])
        self.max_outstanding_seen = max(self.max_outstanding_seen, len(self._r))

    def set_write(self, ctx, axi):
        ctx.set(axi.awready, self._go())
        ctx.set(axi.wready, self._go())
        self._bvalid = bool(self._b) and (self._bvalid or self._go())
        if self._bvalid:
            ctx.set(axi.bvalid, 1)
            ctx.set(axi.bresp, self._b[0])
        else:
            ctx.set(axi.bvalid, 0)

    def step_write(self, ctx, axi):
        if ctx.get(axi.bvalid) and ctx.get(axi.bready):
            self._bvalid = False
            self._b.pop(0)
        if ctx.get(axi.awvalid) and ctx.get(axi.awready):
            addr = ctx.get(axi.awaddr)
            beats = self._check_burst(addr, ctx.get(axi.awlen), ctx.get(axi.awsize), ctx.get(axi.awburst))
            self.writes.append((addr, beats))
            self._w.append([addr, beats, AxiResp.okay])
        if ctx.get(axi.wvalid) and ctx.get(axi.wready):
            assert self._w, "W beat before its AW"
            burst = self._w[0]
            addr, strb, data = burst[0], ctx.get(axi.wstrb), ctx.get(axi.wdata).to_bytes(self.B, "little")
            burst[2] = max(burst[2], self._resp(addr))
            if self._resp(addr) == AxiResp.okay:         # an erroring beat writes nothing
                for i in range(self.B):
                    if strb >> i & 1:
                        self.mem[addr + i] = data[i]
            burst[0] += self.B
            burst[1] -= 1
            assert ctx.get(axi.wlast) == (burst[1] == 0), f"wlast wrong at {addr:#x}"
            if burst[1] == 0:
                self._b.append(burst[2])
                self._w.pop(0)
