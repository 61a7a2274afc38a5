"""Driver-level scenarios, one body for every backend: each takes a started :class:`host_driver.driver.nic.Nic`
and returns a transcript (completions without timing, digests of results) that must be identical on the
RTL and on the software model."""

import hashlib

import numpy as np

from contract import credits
from contract import descriptors as ds
from contract import regmap as rm
from contract.enums import Codec, Status, names
from contract.limits import MAX_COUNT
from contract.protocol import packet_quantum
from host_driver.models import numerics as nm
from host_driver.models.vectors import edge_f32_bits

CODECS = names(Codec)


def expected(x_bits: np.ndarray, codec: str) -> np.ndarray:
    return x_bits if codec == "none" else nm.as_bits(nm.roundtrip(x_bits, codec))


async def copies(nic, r, n_desc=12, max_elems=700, batch=6):
    """Random sizes, alignments, codecs and dtypes, ``batch`` descriptors outstanding at a time; every
    destination checked bit for bit against the golden model, and the bytes around it untouched."""
    B = nic.backend.width // 8
    transcript = []
    pending = []
    for i in range(n_desc):
        n = int(r.integers(1, max_elems + 1)) if i % 3 else int(r.choice([1, B // 4, B // 4 + 1, 16, 255]))
        codec = CODECS[int(r.integers(0, len(CODECS)))]
        dtype = "int32" if codec == "none" and r.random() < 0.3 else "fp32"
        x = edge_f32_bits(r, n).astype(np.uint32)
        src = nic.alloc(4 * n + 2 * B, align=B) + 4 * int(r.integers(0, B // 4 + 1))
        dst_buf = nic.alloc(4 * n + 4 * B, align=B)
        dst = dst_buf + B + 4 * int(r.integers(0, B // 4 + 1))
        guard = r.integers(0, 256, 4 * n + 4 * B, dtype=np.uint8)
        await nic.write(dst_buf, guard)
        await nic.write(src, x)
        tag = int(r.integers(0, 1 << 63))
        index = await nic.submit("copy", src=src, dst=dst, count=n, dtype=dtype, codec=codec, tag=tag)
        pending.append((index, x, codec, dst_buf, dst, guard, tag, n))
        if len(pending) == batch or i == n_desc - 1:
            for index, x, codec, dst_buf, dst, guard, tag, n in pending:
                c = await nic.wait(index)
                assert c.ok, f"copy {index} ({n} x {codec}, dst {dst:#x}): {c.status_name}"
                assert (c.tag, c.host_bytes, c.sq_index) == (tag, 4 * n, index), c
                got = await nic.read(dst_buf, len(guard), np.uint8)
                off = dst - dst_buf
                want = guard.copy()
                want[off:off + 4 * n] = expected(x, codec).view(np.uint8)
                bad = np.nonzero(got != want)[0]
                assert bad.size == 0, (f"copy {index} ({n} x {codec}, src/dst offsets {off - B}): {bad.size} bytes "
                                       f"differ, first at {bad[0] - off} of the destination")
                transcript.append((c.functional(), hashlib.sha256(got.tobytes()).hexdigest()))
            pending.clear()
            nic.free_all()
    return transcript


def bad_descriptor_cases(mem_size):
    """(name, fields to override, register overrides): one per check of ``descriptors.check``."""
    S = Status.__members__
    return [
        ("bad_opcode", {"opcode": 0}, {}), ("bad_opcode", {"opcode": 9}, {}),
        ("bad_dtype", {"dtype": 2}, {}),
        ("bad_codec", {"codec": 5}, {}), ("bad_codec", {"codec": 7}, {}),
        ("codec_dtype", {"dtype": 1, "codec": 3}, {}),
        ("bad_algorithm", {"algorithm": 2}, {}), ("bad_algorithm", {"algorithm": 255}, {}),
        ("bad_count", {"count": 0}, {}), ("bad_count", {"count": MAX_COUNT + 1}, {}),
        ("bad_alignment", {"src_offset": 2}, {}), ("bad_alignment", {"dst_offset": 1}, {}),
        ("bad_range", {"src": (1 << 64) - 8, "count": 4}, {}),
        ("bad_world_size", {"opcode": 2}, {"WORLD_SIZE": 0}),
        ("bad_world_size", {"opcode": 3}, {"WORLD_SIZE": 65}),
        ("bad_world_size", {"opcode": 4}, {"WORLD_SIZE": 4, "RANK": 4}),
        ("bad_world_size", {"opcode": 2, "algorithm": 1}, {"WORLD_SIZE": 17}),
        ("bad_packet_size", {"codec": 1}, {"PACKET_ELEMS": 100}),
        ("bad_packet_size", {"opcode": 2}, {"PACKET_ELEMS": 2048, "WORLD_SIZE": 2}),
        ("bad_packet_size", {"opcode": 3}, {"PACKET_ELEMS": 24, "WORLD_SIZE": 2}),
        ("bad_packet_size", {"opcode": 4}, {"PACKET_ELEMS": 8, "WORLD_SIZE": 3, "RANK": 2}),
        ("unsupported", {"algorithm": 1}, {}),
        ("unsupported", {"opcode": 3, "algorithm": 1}, {"WORLD_SIZE": 2}),
        ("bad_reserved", {"flags": 1}, {}), ("bad_reserved", {"reserved0": 1 << 31}, {}),
        ("bad_reserved", {"reserved1": 1 << 191}, {}),
    ], S


async def bad_descriptors(nic, r):
    """Every bad-descriptor class gets its status (the reference ``descriptors.check`` agrees), nothing
    is written, and the next good descriptor completes."""
    cases, S = bad_descriptor_cases(nic.backend.mem_size)
    transcript = []
    n = 40
    x = edge_f32_bits(r, n).astype(np.uint32)
    src, dst = nic.alloc(4 * n), nic.alloc(4 * n)
    await nic.write(src, x)
    for name, override, regs in cases:
        await nic.write(dst, np.zeros(n, np.uint32))
        fields = {"opcode": 1, "dtype": 0, "codec": 0, "algorithm": 0, "count": n, "src": src, "dst": dst,
                  "tag": 7, "collective": 3}
        fields.update({k: v for k, v in override.items() if not k.endswith("_offset")})
        fields["src"] += override.get("src_offset", 0)
        fields["dst"] += override.get("dst_offset", 0)
        saved = {k: await nic.read_reg(k) for k in regs}
        for k, v in regs.items():
            await nic.write_reg(k, v)
        ref = ds.check(fields, await nic.read_reg("WORLD_SIZE"), await nic.read_reg("RANK"),
                       await nic.read_reg("PACKET_ELEMS"), nic.backend.width, nic.build)
        assert ref == S[name], f"reference check gives {ref} for case {name}"
        c = await nic.wait(await nic.submit_raw(**fields))
        assert c.status == S[name], f"{name} {override}: got {c.status_name}"
        assert (c.tag, c.collective, c.opcode, c.host_bytes) == (7, 3, fields["opcode"], 0), c
        for k, v in saved.items():
            await nic.write_reg(k, v)
        assert not (await nic.read(dst, n, np.uint32)).any(), f"{name}: the destination was written"
        good = await nic.wait(await nic.submit("copy", src=src, dst=dst, count=n))
        assert good.ok and np.array_equal(await nic.read(dst, n, np.uint32), x), f"copy after {name}"
        transcript.append((c.functional(), good.functional()))
    assert await nic.read_reg("DESC_ERRORS") == len(cases)
    return transcript


async def dma_errors(nic, r):
    """SLVERR and DECERR on the data read, the data write and the descriptor fetch each end in their
    status; the NIC goes on. A failed completion write raises NicError from wait()."""
    from host_driver.driver.nic import NicError
    S = Status.__members__
    mem = nic.backend.memory
    B = nic.backend.width // 8
    n = max(100, 2 * B)         # past the fifth beat, where the read error goes, at every width
    x = edge_f32_bits(r, n).astype(np.uint32)
    src, dst = nic.alloc(4 * n, align=B), nic.alloc(4 * n, align=B)
    await nic.write(src, x)
    transcript = []

    async def copy(**kw):
        fields = {"opcode": 1, "count": n, "src": src, "dst": dst, "tag": 1, **kw}
        return await nic.wait(await nic.submit_raw(**fields))

    err_dma = rm.field_masks("ERROR_STATUS")["dma"]
    sentinel = np.full(n, 0xDEADBEEF, np.uint32)
    for resp, suffix in ((2, "slverr"), (3, "decerr")):
        mem.configure(err_lo=src + 4 * B, err_hi=src + 5 * B, err_resp=resp)
        await nic.write(dst, sentinel)
        assert not await nic.read_reg("ERROR_STATUS") & err_dma
        c = await copy()
        assert c.status == S[f"read_{suffix}"], c.status_name
        # the failed read's beat never reaches the destination (what comes after it may not either)
        got = await nic.read(dst, n, np.uint32)
        assert np.array_equal(got[4 * B // 4:5 * B // 4], sentinel[4 * B // 4:5 * B // 4]), \
            "data from a failed read was written"
        assert await nic.read_reg("ERROR_STATUS") & err_dma, "ERROR_STATUS.dma not set by a read error"
        await nic.write_reg("ERROR_STATUS", err_dma)
        mem.configure(err_lo=dst + B, err_hi=dst + 2 * B, err_resp=resp)
        c2 = await copy()
        assert c2.status == S[f"write_{suffix}"], c2.status_name
        assert await nic.read_reg("ERROR_STATUS") & err_dma, "ERROR_STATUS.dma not set by a write error"
        await nic.write_reg("ERROR_STATUS", err_dma)
        mem.configure(err_lo=nic.sq_base, err_hi=nic.cq_base, err_resp=resp)
        c3 = await copy()
        assert c3.status == S["fetch_error"] and c3.opcode == 0 and c3.tag == 0, c3
        assert await nic.read_reg("ERROR_STATUS") & err_dma, "ERROR_STATUS.dma not set by a fetch error"
        await nic.write_reg("ERROR_STATUS", err_dma)
        mem.configure()
        ok = await copy()
        assert ok.ok and np.array_equal(await nic.read(dst, n, np.uint32), x)
        transcript.append([c.functional(), c2.functional(), c3.functional(), ok.functional()])
    # beyond the end of memory: DECERR from the memory's decoder
    c = await copy(src=nic.backend.mem_size - 2 * B)
    assert c.status == S["read_decerr"], c.status_name
    c2 = await copy(dst=nic.backend.mem_size + 64)
    assert c2.status == S["write_decerr"], c2.status_name
    transcript.append([c.functional(), c2.functional()])
    assert await nic.read_reg("ERROR_STATUS") == err_dma
    await nic.write_reg("ERROR_STATUS", err_dma)
    # a completion record that cannot be written: the NIC flags it and goes on
    mem.configure(err_lo=nic.cq_base, err_hi=nic.cq_base + nic.cq_entries * 64, err_resp=2)
    index = await nic.submit_raw(opcode=1, count=n, src=src, dst=dst)
    try:
        await nic.wait(index)
        raise AssertionError("a lost completion did not raise")
    except NicError as e:
        # the record's write answered SLVERR: completion_write, and dma (an AXI error response)
        assert e.bits == rm.field_masks("ERROR_STATUS")["completion_write"] | err_dma and e.lost == index, e
    mem.configure()
    await nic.start(packet_elems=nic.packet_elems)
    ok = await copy()
    assert ok.ok
    transcript.append(ok.functional())
    return transcript


async def ring_errors(nic, r):
    """A doorbell more than a ring ahead is ignored and flagged; a bad ring size stops the NIC and is
    flagged; after fixing it the queued descriptor runs."""
    ERR = rm.field_masks("ERROR_STATUS")
    head = await nic.read_reg("SQ_HEAD")
    await nic.write_reg("SQ_DOORBELL", (head + nic.sq_entries + 1) & 0xFFFF)
    assert await nic.read_reg("SQ_TAIL") == head
    assert await nic.read_reg("ERROR_STATUS") == ERR["doorbell"]
    await nic.write_reg("ERROR_STATUS", 0xFFFFFFFF)
    await nic.write_reg("IRQ_STATUS", 0xFFFFFFFF)
    await nic.write_reg("SQ_SIZE_LOG2", 0)
    src, dst = nic.alloc(64), nic.alloc(64)
    await nic.write(src, np.arange(16, dtype=np.uint32))
    # submit with the driver's own ring size intact: the NIC must hold the descriptor, not run it
    index = await nic.submit("copy", src=src, dst=dst, count=16)
    assert await nic.read_reg("ERROR_STATUS") == ERR["ring_config"]
    assert await nic.read_reg("SQ_HEAD") == head
    await nic.write_reg("SQ_SIZE_LOG2", nic.sq_entries.bit_length() - 1)
    await nic.write_reg("ERROR_STATUS", 0xFFFFFFFF)
    await nic.write_reg("IRQ_STATUS", 0xFFFFFFFF)
    c = await nic.wait(index)
    assert c.ok and np.array_equal(await nic.read(dst, 16, np.uint32), np.arange(16, dtype=np.uint32))
    return [c.functional()]


async def ring_too_large(nic, r):
    """A collective whose in-flight frames cannot fit the receive buffer even at lag 1 (16 ranks with
    1024-element packets, credits.max_lag) completes `ring_too_large` before any traffic; the same
    descriptor at 256-element packets would be planned (there it is a one-rank copy)."""
    assert credits.max_lag(16, 1024) == 0 and credits.max_lag(16, 256) >= 1
    src, dst = nic.alloc(4 * 64), nic.alloc(4 * 64)
    await nic.write(src, np.arange(64, dtype=np.uint32))
    await nic.write(dst, np.zeros(64, np.uint32))
    regs = {"WORLD_SIZE": 16, "RANK": 3, "PACKET_ELEMS": 1024}
    saved = {k: await nic.read_reg(k) for k in regs}
    for k, v in regs.items():
        await nic.write_reg(k, v)
    c = await nic.wait(await nic.submit("allreduce", src=src, dst=dst, count=64))
    for k, v in saved.items():
        await nic.write_reg(k, v)
    assert c.status_name == "ring_too_large" and c.packets_sent == 0 and c.host_bytes == 0, c
    assert not np.any(await nic.read(dst, 64, np.uint32))              # nothing written
    for k in ("IRQ_STATUS", "ERROR_STATUS"):
        await nic.write_reg(k, 0xFFFFFFFF)
    return [c.functional()]


async def build_features(nic, r):
    """What CAPS announces is what the NIC does: every codec it has runs a copy (the golden model's round
    trip); one it lacks is refused by the driver (``Unsupported``) and, posted anyway, completes
    ``unsupported`` without touching the destination; a ring larger than the peer table is
    ``bad_world_size``."""
    from contract.build import from_caps
    from contract.enums import Algorithm, Opcode
    from host_driver.driver.nic import Unsupported
    caps = await nic.read_reg("CAPS")
    width, build = from_caps(caps)
    assert width == nic.backend.width and build == nic.build, (hex(caps), build, nic.build)
    n = 4 * nic.packet_elems + 7
    x = edge_f32_bits(r, n).astype(np.uint32)
    src, dst = nic.alloc(4 * n), nic.alloc(4 * n)
    await nic.write(src, x)
    out = []
    for codec in CODECS:
        await nic.write(dst, np.zeros(n, np.uint32))
        if Codec[codec] in build.codecs:
            c = await nic.run("copy", src=src, dst=dst, count=n, codec=codec)
            assert np.array_equal(await nic.read(dst, n, np.uint32), expected(x, codec)), codec
        else:
            try:
                await nic.submit("copy", src=src, dst=dst, count=n, codec=codec)
                raise AssertionError(f"the driver posted codec {codec}, which build {build.name} lacks")
            except Unsupported as e:
                assert f"codec {codec}" in str(e) and f"{caps:#010x}" in str(e), str(e)
            c = await nic.wait(await nic.submit_raw(opcode=Opcode.copy, dtype=0, codec=Codec[codec], algorithm=0,
                                                    count=n, src=src, dst=dst))
            assert c.status == Status.unsupported and not (await nic.read(dst, n, np.uint32)).any(), c
        out.append(c.functional())
    saved = {k: await nic.read_reg(k) for k in ("WORLD_SIZE", "RANK")}
    for size, want in ((build.max_ranks + 1, Status.bad_world_size),):
        await nic.write_reg("WORLD_SIZE", size)
        await nic.write_reg("RANK", 0)
        c = await nic.wait(await nic.submit_raw(opcode=Opcode.allreduce, dtype=0, codec=0, algorithm=Algorithm.ring,
                                                count=n, src=src, dst=dst))
        assert c.status == want, c
        out.append(c.functional())
    for k, v in saved.items():
        await nic.write_reg(k, v)
    return out


async def all_scenarios(nic, r):
    await nic.start(packet_elems=int(r.choice([packet_quantum(nic.backend.width), 64, 256])))
    return {"copies": await copies(nic, r), "bad": await bad_descriptors(nic, r),
            "dma_errors": await dma_errors(nic, r), "ring_errors": await ring_errors(nic, r),
            "ring_too_large": await ring_too_large(nic, r), "build": await build_features(nic, r)}
