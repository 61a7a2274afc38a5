"""The host driver: one :class:`Nic` per card, the same code on every backend.

A backend is the thing behind the registers and host memory: :class:`host_driver.models.nic_model.ModelBackend` (the
software model, built on the golden models) or :class:`host_driver.sim.rtl_backend.RtlBackend` (the RTL in a cocotb
simulation). Every method that touches the NIC is ``async``; on the model backend nothing actually waits.

Typical use::

    nic = Nic(backend)
    await nic.start()
    src, dst = nic.alloc(4 * n), nic.alloc(4 * n)
    await nic.write(src, x)
    done = await nic.wait(await nic.submit("copy", src=src, dst=dst, count=n, codec="bf16"))
    y = await nic.read(dst, n, np.float32)
"""

import numpy as np

from contract import descriptors as ds
from contract import regmap as rm
from contract.build import from_caps
from contract.enums import Algorithm, Codec, Dtype, Opcode, Status
from contract.limits import MAX_COUNT, MAX_RANKS
from contract.protocol import MAX_P, MIN_P, packet_quantum

IRQ_COMPLETION = rm.field_masks("IRQ_STATUS")["completion"]
IRQ_ERROR = rm.field_masks("IRQ_STATUS")["error"]
ERR_COMPLETION_WRITE = rm.field_masks("ERROR_STATUS")["completion_write"]
#: an AXI error response: the descriptor's completion status says which (it stays set for the host to see)
ERR_DMA = rm.field_masks("ERROR_STATUS")["dma"]
#: ERROR_STATUS bits that report on a result rather than a failure: collected in ``Nic.warnings``
ERR_WARNINGS = rm.field_masks("ERROR_STATUS")["int32_overflow"]
DEFAULT_TIMEOUT_CYCLES = 2_000_000


class NicError(RuntimeError):
    """The NIC reported an error it could not attach to a descriptor (ERROR_STATUS bits in ``.bits``)."""

    def __init__(self, bits: int, lost: int = None):
        names = [name for name, mask in rm.field_masks("ERROR_STATUS").items() if bits & mask]
        more = f"; descriptor {lost} has no completion" if lost is not None else ""
        super().__init__(f"NIC error status {bits:#x}: {', '.join(names) or 'unknown'}{more}")
        self.bits = bits
        self.lost = lost


class Unsupported(NotImplementedError):
    """What a descriptor asks for is not in this NIC's build (its CAPS register, contract/build.py): refused
    before the NIC sees it (the NIC itself would complete it with status ``unsupported``)."""


class CompletionError(RuntimeError):
    """A descriptor completed with a status other than ok (raised by :meth:`Nic.run`)."""

    def __init__(self, completion: ds.Completion):
        if completion.status in Status._value2member_map_:
            status = Status(completion.status)
            name, meaning = status.name, ds.STATUS_MEANING[status]
        else:
            name, meaning = f"status {completion.status}", ""
        super().__init__(f"descriptor {completion.sq_index} completed with {name}: {meaning}")
        self.completion = completion


def _check_int(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in {lo} .. {hi}, got {value}")
    return int(value)


def _check_name(name, value, enum):
    if not isinstance(value, str) or value not in enum.__members__:
        raise ValueError(f"unknown {name} {value!r}; one of: {', '.join(enum.__members__)}")
    return enum[value]


class Nic:
    """Registers, rings and host memory of one NIC through a backend.

    * Rings: ``sq_entries`` descriptors and ``cq_entries`` completions (powers of two, 2 .. 32768) at the
      bottom of host memory; :meth:`alloc` hands out the rest (bump allocator, :meth:`free_all` resets).
    * :meth:`submit` writes a descriptor and rings the doorbell; it returns the descriptor's index. With
      the ring full it first waits for the oldest descriptor's completion (kept for :meth:`wait`).
    * :meth:`wait` returns the :class:`~contract.descriptors.Completion` of one index (completions are
      collected in order, as the NIC writes them, and handed out in any order).
    """

    def __init__(self, backend, sq_entries: int = 64, cq_entries: int = 64):
        for name, n in (("sq_entries", sq_entries), ("cq_entries", cq_entries)):
            _check_int(name, n, 2, 1 << 15)
            if n & (n - 1):
                raise ValueError(f"{name} must be a power of two, got {n}")
        self.backend = backend
        self.sq_entries, self.cq_entries = sq_entries, cq_entries
        self.sq_base = 0
        self.cq_base = sq_entries * ds.RECORD_BYTES
        self._heap_start = self._heap = self.cq_base + cq_entries * ds.RECORD_BYTES
        self.sq_tail = 0            # next index to submit (free-running 16 bit)
        self.cq_head = 0            # next completion to collect
        self.outstanding = {}          # index -> None, in submission order
        self.done = {}
        self.packet_elems = None
        self.warnings = set()          # ERROR_STATUS warnings seen (int32_overflow)
        self.caps = self.build = None   # CAPS and the build it announces: read by start()
        self.world_size = None

    # -- registers ---------------------------------------------------------------------------------------
    async def read_reg(self, name: str, index: int = 0) -> int:
        return await self.backend.read_reg(rm.offset(name, index))

    async def write_reg(self, name: str, value: int, index: int = 0) -> None:
        await self.backend.write_reg(rm.offset(name, index), _check_int(name, value, 0, (1 << 32) - 1))

    async def start(self, rank: int = 0, world_size: int = 1, packet_elems: int = 256, lag: int = 8,
                    job_id: int = 0, local_mac: int = 0, local_ip: int = 0, peers=()) -> None:
        """Configure the rings and identity, then enable the NIC (indices restart at 0). For collectives:
        ``lag`` (the work order, the same on every rank), ``job_id``, this NIC's ``local_mac``/``local_ip``
        and ``peers``, one (mac, ip) integer pair per rank (the peer table)."""
        _check_int("world_size", world_size, 1, MAX_RANKS)
        _check_int("lag", lag, 1, 255)
        _check_int("job_id", job_id, 0, 0xFFFF)
        _check_int("local_mac", local_mac, 0, (1 << 48) - 1)
        _check_int("local_ip", local_ip, 0, (1 << 32) - 1)
        peers = list(peers)
        if peers and len(peers) != world_size:
            raise ValueError(f"peers must hold one (mac, ip) per rank: {world_size}, got {len(peers)}")
        _check_int("rank", rank, 0, world_size - 1)
        _check_int("packet_elems", packet_elems, MIN_P, MAX_P)
        if packet_elems % packet_quantum(self.backend.width):
            raise ValueError(f"packet_elems must be a multiple of {packet_quantum(self.backend.width)} at "
                             f"W = {self.backend.width}, got {packet_elems}")
        ident = await self.read_reg("ID")
        if ident != rm.ID_VALUE:
            raise RuntimeError(f"no ainic NIC here: ID reads {ident:#010x}")
        self.caps = await self.read_reg("CAPS")
        _, self.build = from_caps(self.caps)
        await self.write_reg("CONTROL", 0)
        for name, value in (("SQ_BASE_LO", self.sq_base & 0xFFFFFFFF), ("SQ_BASE_HI", self.sq_base >> 32),
                            ("SQ_SIZE_LOG2", self.sq_entries.bit_length() - 1),
                            ("CQ_BASE_LO", self.cq_base & 0xFFFFFFFF), ("CQ_BASE_HI", self.cq_base >> 32),
                            ("CQ_SIZE_LOG2", self.cq_entries.bit_length() - 1), ("CQ_HEAD", 0),
                            ("RANK", rank), ("WORLD_SIZE", world_size), ("PACKET_ELEMS", packet_elems),
                            ("IRQ_STATUS", 0xFFFFFFFF), ("ERROR_STATUS", 0xFFFFFFFF),
                            ("IRQ_ENABLE", IRQ_COMPLETION | IRQ_ERROR), ("LAG", lag), ("JOB_ID", job_id),
                            ("LOCAL_MAC_LO", local_mac & 0xFFFFFFFF), ("LOCAL_MAC_HI", local_mac >> 32),
                            ("LOCAL_IP", local_ip)):
            await self.write_reg(name, value)
        for i, (mac, ip) in enumerate(peers):
            _check_int(f"peers[{i}] mac", mac, 0, (1 << 48) - 1)
            _check_int(f"peers[{i}] ip", ip, 0, (1 << 32) - 1)
        # the peer table holds the build's max_ranks entries: a larger job can run only through the switch
        for i, (mac, ip) in enumerate(peers[:self.build.max_ranks]):
            await self.write_reg("PEER_MAC_LO", mac & 0xFFFFFFFF, i)
            await self.write_reg("PEER_MAC_HI", mac >> 32, i)
            await self.write_reg("PEER_IP", ip, i)
        # completion slots start out with phase 0, so a stale record is never taken for a new one
        await self.backend.mem_write(self.cq_base, bytes(self.cq_entries * ds.RECORD_BYTES))
        await self.write_reg("CONTROL", 1)
        self.sq_tail = self.cq_head = 0
        self.outstanding.clear()
        self.done.clear()
        self.packet_elems = packet_elems
        self.world_size = world_size

    # -- host memory ---------------------------------------------------------------------------------------
    def alloc(self, nbytes: int, align: int = 64) -> int:
        """A host-memory buffer of ``nbytes`` (aligned to ``align``, a power of two >= 4)."""
        _check_int("nbytes", nbytes, 1, self.backend.mem_size)
        _check_int("align", align, 4, 1 << 20)
        if align & (align - 1):
            raise ValueError(f"align must be a power of two, got {align}")
        addr = -(-self._heap // align) * align
        if addr + nbytes > self.backend.mem_size:
            raise MemoryError(f"host memory exhausted: {nbytes} bytes at {addr:#x} do not fit in "
                              f"{self.backend.mem_size:#x}")
        self._heap = addr + nbytes
        return addr

    def free_all(self) -> None:
        self._heap = self._heap_start

    async def write(self, addr: int, array) -> None:
        """Copy an array's bytes into host memory at ``addr``."""
        data = np.ascontiguousarray(array).tobytes()
        self._check_range(addr, len(data))
        await self.backend.mem_write(addr, data)

    async def read(self, addr: int, count: int, dtype=np.float32) -> np.ndarray:
        """``count`` elements of ``dtype`` from host memory at ``addr``."""
        n = count * np.dtype(dtype).itemsize
        self._check_range(addr, n)
        return np.frombuffer(await self.backend.mem_read(addr, n), dtype=dtype).copy()

    def _check_range(self, addr, n):
        _check_int("addr", addr, 0, self.backend.mem_size - 1)
        if addr + n > self.backend.mem_size:
            raise ValueError(f"{n} bytes at {addr:#x} run past the end of host memory ({self.backend.mem_size:#x})")

    # -- descriptors -------------------------------------------------------------------------------------
    async def submit(self, opcode: str, *, src: int, dst: int, count: int, dtype: str = "fp32",
                     codec: str = "none", algorithm: str = "ring", collective: int = 0, tag: int = 0) -> int:
        """Post one descriptor; return its index. Arguments are checked here, before the NIC sees them
        (:meth:`submit_raw` posts anything, to test the NIC's own checks)."""
        fields = {
            "opcode": _check_name("opcode", opcode, Opcode),
            "dtype": _check_name("dtype", dtype, Dtype),
            "codec": _check_name("codec", codec, Codec),
            "algorithm": _check_name("algorithm", algorithm, Algorithm),
            "collective": _check_int("collective", collective, 0, 0xFFFF),
            "count": _check_int("count", count, 1, MAX_COUNT),
            "tag": _check_int("tag", tag, 0, (1 << 64) - 1),
        }
        if dtype == "int32" and codec != "none":
            raise ValueError(f"codec {codec!r} applies to fp32 only; int32 data travels uncompressed")
        for name, addr in (("src", src), ("dst", dst)):
            _check_int(name, addr, 0, self.backend.mem_size - 1)
            if addr % 4:
                raise ValueError(f"{name} {addr:#x} is not a multiple of 4")
            self._check_range(addr, 4 * count)
            fields[name] = addr
        if Opcode[opcode] in ds.UNSUPPORTED_OPCODES:
            raise Unsupported(f"{opcode}: not executed by this build")
        if self.build is not None:
            missing = self.build.missing(fields["codec"], fields["algorithm"])
            if missing:
                raise Unsupported(f"{missing}: this NIC was built without it (build {self.build.name!r}, CAPS "
                                  f"{self.caps:#010x}: codecs {', '.join(c.name for c in sorted(self.build.codecs))}; "
                                  f"algorithms {', '.join(a.name for a in sorted(self.build.algorithms))})")
            if (opcode != "copy" and algorithm == "ring" and self.world_size is not None
                    and self.world_size > self.build.max_ranks):
                raise Unsupported(f"a ring {opcode} of {self.world_size} ranks: this NIC's peer table holds "
                                  f"{self.build.max_ranks} (build {self.build.name!r}, CAPS {self.caps:#010x}); "
                                  "use algorithm switch or a build with a larger table")
        return await self.submit_raw(**fields)

    async def submit_raw(self, **fields) -> int:
        """Post a descriptor with these fields as they are (see ``descriptors.DESCRIPTOR_FIELDS``)."""
        raw = ds.pack_descriptor(**fields)
        while len(self.outstanding) >= self.sq_entries:
            await self._collect_one()
        index = self.sq_tail
        await self.backend.mem_write(self.sq_base + (index % self.sq_entries) * ds.RECORD_BYTES, raw)
        self.sq_tail = (index + 1) & 0xFFFF
        self.outstanding[index] = None
        await self.write_reg("SQ_DOORBELL", self.sq_tail)
        return index

    async def wait(self, index: int, timeout_cycles: int = DEFAULT_TIMEOUT_CYCLES) -> ds.Completion:
        """The completion of descriptor ``index`` (waits for it)."""
        if index not in self.outstanding and index not in self.done:
            raise ValueError(f"descriptor {index} was never submitted (or its completion was already taken)")
        while index not in self.done:
            await self._collect_one(timeout_cycles)
        return self.done.pop(index)

    async def run(self, opcode: str, **kw) -> ds.Completion:
        """:meth:`submit` then :meth:`wait`; raise :class:`CompletionError` unless the status is ok."""
        c = await self.wait(await self.submit(opcode, **kw))
        if not c.ok:
            raise CompletionError(c)
        return c

    async def _collect_one(self, timeout_cycles: int = DEFAULT_TIMEOUT_CYCLES) -> None:
        """Take every completion the NIC has written; if there is none, wait for the interrupt."""
        while True:
            tail = await self.read_reg("CQ_TAIL")
            if tail != self.cq_head:
                break
            await self.backend.wait_irq(timeout_cycles)
            status = await self.read_reg("IRQ_STATUS")
            await self.write_reg("IRQ_STATUS", status)
            if status & IRQ_ERROR:
                err = await self.read_reg("ERROR_STATUS")
                if err & ERR_WARNINGS:
                    # an int32 sum saturated: the result is the defined saturating one (docs/allreduce.md)
                    await self.write_reg("ERROR_STATUS", err & ERR_WARNINGS)
                    self.warnings.update(n for n, mk in rm.field_masks("ERROR_STATUS").items() if err & mk & ERR_WARNINGS)
                    err &= ~ERR_WARNINGS
                if err & ~(ERR_COMPLETION_WRITE | ERR_DMA):
                    await self.write_reg("ERROR_STATUS", err)
                    raise NicError(err)
                # a lost completion record: CQ_TAIL has moved past it; the phase check below names it
        n = (tail - self.cq_head) & 0xFFFF
        first = self.cq_head % self.cq_entries
        slots = [(first + i) % self.cq_entries for i in range(n)]
        raw = await self.backend.mem_read(self.cq_base, self.cq_entries * ds.RECORD_BYTES) if n > 1 else None
        for i, slot in enumerate(slots):
            rec = raw[slot * 64:(slot + 1) * 64] if raw else await self.backend.mem_read(self.cq_base + slot * 64, 64)
            c = ds.Completion.from_bytes(rec)
            want_phase = 1 - (self.cq_head // self.cq_entries) % 2
            if c.phase != want_phase:
                # the NIC advanced CQ_TAIL without a record: a completion write failed
                # (descriptors complete in order: it was the oldest outstanding one)
                self.cq_head = (self.cq_head + 1) & 0xFFFF
                await self.write_reg("CQ_HEAD", self.cq_head)
                lost = next(iter(self.outstanding), None)
                self.outstanding.pop(lost, None)
                err = await self.read_reg("ERROR_STATUS")
                if err:
                    await self.write_reg("ERROR_STATUS", err)
                    raise NicError(err, lost)
                raise RuntimeError(f"completion slot {slot}: phase {c.phase}, expected {want_phase} (CQ_TAIL {tail})")
            self.outstanding.pop(c.sq_index, None)
            self.done[c.sq_index] = c
            self.cq_head = (self.cq_head + 1) & 0xFFFF
        self.cq_head = tail
        await self.write_reg("CQ_HEAD", tail)
