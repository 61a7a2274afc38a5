"""The software model backend: the NIC's registers, command processor and host memory in Python, built
on the golden models. It is the reference the RTL is checked against: for everything it covers
(descriptor checks and status codes, completion records except ``cycles``, result bytes) it is bit-exact
with the RTL. It executes descriptors when the doorbell is written, so nothing ever waits.
"""

import numpy as np

from contract import credits
from contract import descriptors as ds
from contract import regmap as rm
from contract.build import FULL
from contract.enums import AxiResp, Codec, Opcode, Status
from host_driver.models import numerics as nm

ERR = rm.field_masks("ERROR_STATUS")
IRQ = rm.field_masks("IRQ_STATUS")
RESP_OKAY, RESP_SLVERR, RESP_DECERR = AxiResp.okay, AxiResp.slverr, AxiResp.decerr
#: completion statuses that report an AXI error response (they set ERROR_STATUS.dma)
DMA_ERRORS = (Status.read_slverr, Status.read_decerr, Status.write_slverr, Status.write_decerr, Status.fetch_error)


class ModelMemory:
    """Host memory of ``2**addr_bits`` bytes with the RTL memory model's error injection."""

    def __init__(self, addr_bits: int = 24):
        self.size = 1 << addr_bits
        self.data = np.zeros(self.size, np.uint8)
        self.err_lo = self.err_hi = 0
        self.err_resp = 0

    def configure(self, err_lo=0, err_hi=0, err_resp=0, **timing):
        """Error region [err_lo, err_hi) answering err_resp (2 SLVERR, 3 DECERR); timing knobs
        (latency, rate, stall, seed) are accepted and ignored: the model has no time."""
        self.err_lo, self.err_hi, self.err_resp = err_lo, err_hi, err_resp

    def resp(self, addr: int, n: int, width_bytes: int) -> int:
        """Worst response over the bus words a DMA of n bytes at addr touches (as the RTL memory)."""
        lo = addr // width_bytes * width_bytes
        hi = -(-(addr + n) // width_bytes) * width_bytes
        if hi > self.size:
            return RESP_DECERR
        if self.err_resp and lo < self.err_hi and hi > self.err_lo:
            # the RTL decides per beat on the beat's address; a beat is erroneous if it starts inside
            first = max(lo, -(-self.err_lo // width_bytes) * width_bytes)
            if first < min(hi, self.err_hi):
                return self.err_resp
        return RESP_OKAY


class ModelBackend:
    """Registers + command processor + host memory, in Python (see module doc). ``width`` only sets the
    bus word the error injection works on, so error cases match the RTL of that width; ``build``
    (contract/build.py) is what CAPS announces and what the descriptor checks hold the descriptors to."""

    def __init__(self, width: int = 512, addr_bits: int = 24, build=FULL):
        self.width = width
        self.build = build
        self.memory = ModelMemory(addr_bits)
        self.mem_size = self.memory.size
        self.regs = {}
        for r in rm.REGISTERS:
            for i in range(r.count):
                self.regs[r.offset + 4 * i] = r.reset
        self.regs[rm.offset("CAPS")] = rm.caps_value(width, build)
        self.sq_head = self.sq_tail = self.cq_tail = 0

    # -- the backend interface ---------------------------------------------------------------------------
    async def read_reg(self, offset: int) -> int:
        self._check_offset(offset)
        live = {rm.offset("SQ_HEAD"): self.sq_head, rm.offset("SQ_TAIL"): self.sq_tail,
                rm.offset("CQ_TAIL"): self.cq_tail, rm.offset("SQ_DOORBELL"): 0}
        return live.get(offset, self.regs[offset])

    async def write_reg(self, offset: int, value: int) -> None:
        self._check_offset(offset)
        reg = next(r for r in rm.REGISTERS if r.offset <= offset < r.offset + 4 * r.count)
        if reg.access == "rw":
            self.regs[offset] = value & reg.mask
        elif reg.access == "w1c":
            self.regs[offset] &= ~value
        elif reg.name == "SQ_DOORBELL":
            self._doorbell(value & 0xFFFF)
        if not self._reg("CONTROL") & 1:
            self.sq_head = self.sq_tail = self.cq_tail = 0
        self._run()

    async def mem_write(self, addr: int, data: bytes) -> None:
        self.memory.data[addr:addr + len(data)] = np.frombuffer(data, np.uint8)

    async def mem_read(self, addr: int, n: int) -> bytes:
        return self.memory.data[addr:addr + n].tobytes()

    async def wait_irq(self, timeout_cycles: int) -> None:
        if not self.irq:
            raise TimeoutError("model backend: waiting for an interrupt that nothing will raise "
                               "(no descriptor pending)")

    @property
    def irq(self) -> bool:
        return bool(self._reg("IRQ_STATUS") & self._reg("IRQ_ENABLE"))

    # -- the command processor ---------------------------------------------------------------------------
    def _reg(self, name, index=0):
        return self.regs[rm.offset(name, index)]

    def _check_offset(self, offset):
        if offset % 4 or offset not in self.regs:
            raise ValueError(f"no register at offset {offset:#x}")

    def _set(self, name, bits):
        self.regs[rm.offset(name)] |= bits
        if name == "ERROR_STATUS" and bits:
            self.regs[rm.offset("IRQ_STATUS")] |= IRQ["error"]

    def _ring(self, q):
        base = self._reg(f"{q}_BASE_LO") | self._reg(f"{q}_BASE_HI") << 32
        log2 = self._reg(f"{q}_SIZE_LOG2") & 0x1F
        return base, log2, base % 64 == 0 and 1 <= log2 <= 15

    def _doorbell(self, value):
        if not self._reg("CONTROL") & 1:
            return
        _, log2, _ = self._ring("SQ")
        if (value - self.sq_head) & 0xFFFF <= 1 << (log2 & 0xF):
            self.sq_tail = value
        else:
            self._set("ERROR_STATUS", ERR["doorbell"])

    def _run(self):
        if not self._reg("CONTROL") & 1:
            return
        sq_base, sq_log2, sq_ok = self._ring("SQ")
        cq_base, cq_log2, cq_ok = self._ring("CQ")
        if not (sq_ok and cq_ok):
            self._set("ERROR_STATUS", ERR["ring_config"])
            return
        B = self.width // 8
        while self.sq_head != self.sq_tail and (self.cq_tail - self._reg("CQ_HEAD")) & 0xFFFF < 1 << cq_log2:
            addr = sq_base + (self.sq_head % (1 << sq_log2)) * 64
            if self.memory.resp(addr, 64, B) >= RESP_SLVERR:
                desc, status = ds.unpack(ds.DESCRIPTOR_BITS, bytes(64)), Status.fetch_error
            else:
                desc = ds.unpack(ds.DESCRIPTOR_BITS, self.memory.data[addr:addr + 64].tobytes())
                status = ds.check(desc, self._reg("WORLD_SIZE"), self._reg("RANK"), self._reg("PACKET_ELEMS"),
                                  self.width, self.build)
            host_bytes = 0
            collective = desc["opcode"] != Opcode.copy and self._reg("WORLD_SIZE") > 1
            if status == 0 and collective and credits.max_lag(self._reg("WORLD_SIZE"), self._reg("PACKET_ELEMS")) == 0:
                status = Status.ring_too_large         # the plan is refused before any traffic
            if status == 0 and collective:
                raise RuntimeError("a collective with WORLD_SIZE > 1 needs the other ranks: a single model NIC "
                                   "has no network (run collectives with host_driver.sim.cluster.Cluster)")
            if status == 0:
                # a copy, or a collective of one rank: the input itself (docs/allreduce.md: N = 1 is a copy)
                status = self._copy(desc, B)
                host_bytes = 4 * desc["count"] if status == 0 else 0
            if status in DMA_ERRORS:
                self._set("ERROR_STATUS", ERR["dma"])
            record = ds.Completion(
                status=status, opcode=desc["opcode"], phase=1 - (self.cq_tail >> cq_log2) % 2,
                sq_index=self.sq_head, collective=desc["collective"], cycles=0, tag=desc["tag"],
                bytes_sent=0, bytes_received=0, packets_sent=0, packets_received=0, retransmissions=0,
                host_bytes=host_bytes)
            caddr = cq_base + (self.cq_tail % (1 << cq_log2)) * 64
            if self.memory.resp(caddr, 64, B) >= RESP_SLVERR:
                self._set("ERROR_STATUS", ERR["completion_write"] | ERR["dma"])
            else:
                self.memory.data[caddr:caddr + 64] = np.frombuffer(record.to_bytes(), np.uint8)
                self._set("IRQ_STATUS", IRQ["completion"])
            self.sq_head = (self.sq_head + 1) & 0xFFFF
            self.cq_tail = (self.cq_tail + 1) & 0xFFFF
            self.regs[rm.offset("DESC_COMPLETED")] = (self._reg("DESC_COMPLETED") + 1) & 0xFFFFFFFF
            if status:
                self.regs[rm.offset("DESC_ERRORS")] = (self._reg("DESC_ERRORS") + 1) & 0xFFFFFFFF

    def _copy(self, desc, B):
        n = 4 * desc["count"]
        src, dst = desc["src"], desc["dst"]
        rresp = self.memory.resp(src, n, B)
        if rresp >= RESP_SLVERR:
            return (Status.read_slverr if rresp == RESP_SLVERR else Status.read_decerr)
        wresp = self.memory.resp(dst, n, B)
        data = self.memory.data[src:src + n].copy()
        codec = Codec(desc["codec"])
        if codec != Codec.none and desc["opcode"] == Opcode.copy:
            data = nm.roundtrip(data.view(np.uint32), codec).view(np.uint8)
        if wresp >= RESP_SLVERR:
            return (Status.write_slverr if wresp == RESP_SLVERR else Status.write_decerr)
        self.memory.data[dst:dst + n] = data
        return 0
