"""The byte gearboxes (hdl/stream/byte_packer.py): BytePacker packs variable-size chunks into dense beats,
ByteUnpacker cuts dense beats into chunks of a per-packet size, ChunkRegister delays chunks by one cycle.
Each is checked against plain byte concatenation under random idle cycles and backpressure, and for its
rate: one chunk (or beat) per cycle when nothing stalls."""

import numpy as np
import pytest

from hdl.stream.byte_packer import BytePacker, ByteUnpacker, ChunkRegister
from tests.hdl.streams import simulate

TRAFFIC = [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5), (0.4, 0.4)]      # (idle, backpressure)


def chunk_packets(rng, in_bytes, n_packets, max_chunks=12):
    """Packets as lists of chunks (bytes of 1 .. in_bytes each)."""
    return [[bytes(rng.integers(0, 256, int(rng.integers(1, in_bytes + 1)), dtype=np.uint8))
             for _ in range(int(rng.integers(1, max_chunks + 1)))] for _ in range(n_packets)]


def pack(dut, packets, rng, idle=0.0, backpressure=0.0):
    """Drive chunk packets into a BytePacker (junk in the bytes past each chunk's count); returns the output
    packets [(bytes, keeps)] and the cycles a chunk was taken."""
    OUT = dut.out_bytes
    chunks = [(c, i == len(p) - 1) for p in packets for i, c in enumerate(p)]
    out, taken = [], []
    state = {"at": 0, "data": b"", "keeps": []}

    def cycle(ctx, n):
        at = state["at"]
        offer = at < len(chunks) and not (idle and rng.random() < idle)
        ctx.set(dut.s.valid, offer)
        if offer:
            c, last = chunks[at]
            junk = int(rng.integers(0, 1 << 62)) << 8 * len(c)     # past count: not written, whatever they hold
            ctx.set(dut.s.data, (int.from_bytes(c, "little") | junk) & ((1 << 8 * dut.in_bytes) - 1))
            ctx.set(dut.s.count, len(c))
            ctx.set(dut.s.last, last)
        ctx.set(dut.m_axis.tready, not (backpressure and rng.random() < backpressure))
        if offer and ctx.get(dut.s.ready):
            state["at"] += 1
            taken.append(n)
        o = dut.m_axis
        if ctx.get(o.tvalid) and ctx.get(o.tready):
            keep = ctx.get(o.tkeep)
            state["keeps"].append(keep)
            beat = ctx.get(o.tdata).to_bytes(OUT, "little")
            assert not any(beat[bin(keep).count("1"):]), "the bytes past tkeep are zero"
            state["data"] += beat[:bin(keep).count("1")]
            if ctx.get(o.tlast):
                out.append((state["data"], state["keeps"]))
                state["data"], state["keeps"] = b"", []
        return len(out) == len(packets)

    simulate(dut, cycle)
    return out, taken


@pytest.mark.parametrize("in_bytes,out_bytes", [(4, 8), (17, 8), (9, 64), (32, 64), (68, 64)])
@pytest.mark.parametrize("idle,backpressure", TRAFFIC)
def test_byte_packer_concatenates_chunks_into_dense_beats(rng, in_bytes, out_bytes, idle, backpressure):
    packets = chunk_packets(rng, in_bytes, 12)
    out, _ = pack(BytePacker(in_bytes, out_bytes), packets, rng, idle, backpressure)
    for i, (p, (data, keeps)) in enumerate(zip(packets, out, strict=True)):
        assert data == b"".join(p), f"packet {i}"
        assert len(keeps) == -(-len(data) // out_bytes), f"packet {i}: not dense"
        assert all(k == (1 << out_bytes) - 1 for k in keeps[:-1])


@pytest.mark.parametrize("in_bytes,out_bytes", [(4, 8), (32, 64), (64, 64)])
def test_byte_packer_takes_a_chunk_per_cycle(rng, in_bytes, out_bytes):
    """Nothing stalls and the output is at least as wide: a packet's chunks go in on consecutive cycles."""
    packets = [[bytes(in_bytes)] * 40, [bytes(in_bytes)] * 40]
    _, taken = pack(BytePacker(in_bytes, out_bytes), packets, rng)
    assert taken[39] - taken[0] == 39 and taken[79] - taken[40] == 39, taken


@pytest.mark.parametrize("in_bytes,chunks", [(17, 16), (9, 16), (17, 1), (4, 3)])
def test_byte_packer_takes_a_chunk_per_cycle_across_packet_ends(rng, in_bytes, chunks):
    """The compressor's case: bfp8 (17-byte records) or bfp4 (9) packets of 16 blocks, 272 bytes = 4¼ beats of
    64: the packet end flushes two beats, and the next packet's first chunk is taken meanwhile (it waits in
    the hold register), so chunks go in on consecutive cycles across packets; also one-chunk packets."""
    packets = [[bytes(rng.integers(0, 256, in_bytes, dtype=np.uint8)) for _ in range(chunks)] for _ in range(8)]
    out, taken = pack(BytePacker(in_bytes, 64), packets, rng)
    assert [d for d, _ in out] == [b"".join(p) for p in packets]
    assert taken == list(range(taken[0], taken[0] + len(taken))), taken


def unpack(dut, packets, takes, users, rng, idle=0.0, backpressure=0.0):
    """Drive byte packets (dense beats, ``users[k]`` on each first beat) into a ByteUnpacker whose ``take``
    is ``takes[k]`` while packet k goes in (it is sampled with the first beat; garbage on the others);
    returns [(chunks, users)] and the cycles a chunk left."""
    IN = dut.in_bytes
    beats = [(p[j:j + IN], j + IN >= len(p), users[k], takes[k]) for k, p in enumerate(packets)
             for j in range(0, len(p), IN)]
    out, emitted = [], []
    state = {"at": 0, "chunks": [], "users": []}

    def cycle(ctx, n):
        at = state["at"]
        offer = at < len(beats) and not (idle and rng.random() < idle)
        ctx.set(dut.s_axis.tvalid, offer)
        if offer:
            data, last, user, take = beats[at]
            first = at == 0 or beats[at - 1][1]
            ctx.set(dut.take, take if first else int(rng.integers(0, dut.out_bytes + 1)))
            ctx.set(dut.s_axis.tdata, int.from_bytes(data, "little") | (int(rng.integers(0, 1 << 30)) << 8 * len(data)))
            ctx.set(dut.s_axis.tkeep, (1 << len(data)) - 1)
            ctx.set(dut.s_axis.tlast, last)
            ctx.set(dut.s_axis.tuser, user if first else int(rng.integers(0, 1 << 16)))
        ctx.set(dut.m.ready, not (backpressure and rng.random() < backpressure))
        if offer and ctx.get(dut.s_axis.tready):
            state["at"] += 1
        if ctx.get(dut.m.valid) and ctx.get(dut.m.ready):
            emitted.append(n)
            count = ctx.get(dut.m.count)
            state["chunks"].append(ctx.get(dut.m.data).to_bytes(dut.out_bytes, "little")[:count])
            state["users"].append(ctx.get(dut.m.user))
            if ctx.get(dut.m.last):
                out.append((state["chunks"], state["users"]))
                state["chunks"], state["users"] = [], []
        return len(out) == len(packets)

    simulate(dut, cycle)
    return out, emitted


@pytest.mark.parametrize("in_bytes,out_bytes", [(8, 4), (8, 17), (64, 9), (64, 32), (64, 68), (128, 64)])
@pytest.mark.parametrize("idle,backpressure", TRAFFIC)
def test_byte_unpacker_cuts_beats_into_chunks(rng, in_bytes, out_bytes, idle, backpressure):
    n = 12
    packets = [bytes(rng.integers(0, 256, int(rng.integers(1, 6 * in_bytes)), dtype=np.uint8)) for _ in range(n)]
    takes = [int(rng.integers(1, out_bytes + 1)) for _ in range(n)]
    users = [int(rng.integers(0, 1 << 16)) for _ in range(n)]
    out, _ = unpack(ByteUnpacker(in_bytes, out_bytes), packets, takes, users, rng, idle, backpressure)
    for k, (p, (chunks, us)) in enumerate(zip(packets, out, strict=True)):
        t = takes[k]
        assert chunks == [p[j:j + t] for j in range(0, len(p), t)], f"packet {k} (take {t})"
        assert us == [users[k]] * len(chunks), f"packet {k}: tuser of the first beat on every chunk"


@pytest.mark.parametrize("in_bytes,out_bytes", [(8, 8), (64, 32), (64, 64)])
def test_byte_unpacker_gives_a_chunk_per_cycle(rng, in_bytes, out_bytes):
    """Nothing stalls and each beat holds at least one chunk: the chunks leave on consecutive cycles."""
    packets = [bytes(40 * out_bytes)] * 2
    out, emitted = unpack(ByteUnpacker(in_bytes, out_bytes), packets, [out_bytes] * 2, [1, 2], rng)
    assert [len(c) for c, _ in out] == [40, 40]
    assert emitted[39] - emitted[0] == 39 and emitted[79] - emitted[40] == 39, emitted


@pytest.mark.parametrize("idle,backpressure", TRAFFIC)
def test_chunk_register_passes_chunks_unchanged(rng, idle, backpressure):
    dut = ChunkRegister(17)
    chunks = [(bytes(rng.integers(0, 256, 17, dtype=np.uint8)), int(rng.integers(1, 18)), bool(rng.random() < 0.3))
              for _ in range(200)]
    got, cycles_in, cycles_out = [], [], []
    state = {"at": 0}

    def cycle(ctx, n):
        at = state["at"]
        offer = at < len(chunks) and not (idle and rng.random() < idle)
        ctx.set(dut.s.valid, offer)
        if offer:
            data, count, last = chunks[at]
            ctx.set(dut.s.data, int.from_bytes(data, "little"))
            ctx.set(dut.s.count, count)
            ctx.set(dut.s.last, last)
        ctx.set(dut.m.ready, not (backpressure and rng.random() < backpressure))
        if offer and ctx.get(dut.s.ready):
            state["at"] += 1
            cycles_in.append(n)
        if ctx.get(dut.m.valid) and ctx.get(dut.m.ready):
            got.append((ctx.get(dut.m.data).to_bytes(17, "little"), ctx.get(dut.m.count), bool(ctx.get(dut.m.last))))
            cycles_out.append(n)
        return len(got) == len(chunks)

    simulate(dut, cycle)
    assert got == chunks
    if not idle and not backpressure:
        assert cycles_out == [c + 1 for c in cycles_in], "latency 1, one chunk per cycle"


@pytest.mark.parametrize("cls", [BytePacker, ByteUnpacker])
def test_byte_gearbox_netlist_grows_linearly_with_width(cls):
    """Byte masks are built from one comparator a byte: a mask cut from slices of a ``Cat`` re-emits the
    whole ``Cat`` per slice (Amaranth does not share subexpressions), which made the W = 1024 NIC's RTLIL
    550 MB and its export run Yosys out of memory. Doubling the width at most doubles the comparators."""
    from amaranth.back import rtlil

    def comparators(in_bytes, out_bytes):
        text = rtlil.convert(cls(in_bytes, out_bytes), emit_src=False)
        return sum(text.count(f"cell ${op} ") for op in ("gt", "lt", "ge", "le"))
    small, large = comparators(16, 32), comparators(32, 64)
    assert large <= 2.5 * small, (small, large)
