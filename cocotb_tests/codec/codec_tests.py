"""The cocotb tests of the compressor and the decompressor (run by test_compressor.py and test_decompressor.py), every codec, against host_driver.models.numerics.compress/decompress bit for bit."""

import os

import cocotb
from cocotb.triggers import SimTimeoutError, with_timeout
import numpy as np

from cocotb_tests import bench
from contract.enums import Codec, names
from host_driver.models import numerics as nm
from host_driver.models.vectors import edge_f32_bits
from host_driver.sim.testbench import TB, TRAFFIC, frame, rng, width

CODECS = names(Codec)


def packet_sizes(lanes, r):
    """1..4 bus widths, around a beat and a BFP block, a 1500-byte-MTU packet, one random size."""
    return sorted({1, max(lanes - 1, 1), lanes, lanes + 1, 15, 16, 17, 4 * lanes, 256, int(r.integers(1, 300))})


def gradients(r, n, codec):
    """Edge-biased fp32 values; for bfp, blocks mixing tiny and huge values, zero blocks, Inf/NaN blocks."""
    x = edge_f32_bits(r, n)
    if codec.startswith("bfp"):
        kind = r.integers(0, 4)
        if kind == 0:
            x = r.standard_normal(n).astype(np.float32).view(np.uint32)
        elif kind == 1:
            x = (r.standard_normal(n) * np.exp2(r.integers(-60, 60, n))).astype(np.float32).view(np.uint32)
        elif kind == 2:
            x = np.zeros(n, np.uint32)
            x[r.integers(0, n)] = 0x7F7FFFFF
    return x.astype(np.uint32)


async def start(dut, codec, sinks=("m_axis",)):
    tb = TB(dut, sources=("s_axis",), sinks=sinks)
    dut.cfg_codec.value = Codec[codec]
    await tb.reset()
    return tb


#: the longest a packet may take to come out once the one before it has (simulated time, at CLOCK_NS a
#: cycle): the throughput test's 10,240-beat packet under no backpressure needs about 0.04 ms
PACKET_TIMEOUT_MS = 2


async def expect_frames(tb, wants, what):
    if os.environ.get("AINIC_FLIP_EXPECTED_BIT") and wants:      # self-test of the scoreboard, see below
        wants = [bytes([wants[0][0] ^ 1]) + wants[0][1:], *wants[1:]]
    for i, want in enumerate(wants):
        try:        # a block that stops must fail here, not hang the regression until pytest's timeout
            rx = await with_timeout(tb.sink["m_axis"].recv(), PACKET_TIMEOUT_MS, "ms")
        except SimTimeoutError:
            raise AssertionError(f"{what} packet {i} of {len(wants)}: nothing came out within "
                                 f"{PACKET_TIMEOUT_MS} ms of simulated time (hung?)") from None
        got = bytes(rx.tdata)
        if got != want:
            pos = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
            raise AssertionError(f"{what} packet {i}: {len(got)} vs {len(want)} bytes, first difference at byte "
                                 f"{pos}: got {got[pos:pos + 8].hex()} want {want[pos:pos + 8].hex()}")
    assert tb.sink["m_axis"].empty()


async def compress_packets(dut, codec):
    tb = await start(dut, codec)
    r = rng(10 + Codec[codec])
    lanes = width() // 32
    for idle, bp in TRAFFIC:
        tb.set_traffic(idle, bp)
        xs = [gradients(r, n, codec) for n in packet_sizes(lanes, r)]
        for x in xs:
            await tb.source["s_axis"].send(frame(x.tobytes()))
        await expect_frames(tb, [nm.compress(x, codec) for x in xs], f"compress {codec} idle={idle} bp={bp}")


async def decompress_packets(dut, codec):
    tb = await start(dut, codec)
    r = rng(20 + Codec[codec])
    lanes = width() // 32
    for idle, bp in TRAFFIC:
        tb.set_traffic(idle, bp)
        datas = []
        for n in packet_sizes(lanes, r):
            # arbitrary bytes, not only what the compressor makes: every pattern must decode exactly
            data = r.integers(0, 256, nm.codec_bytes(codec, n), dtype=np.uint8).tobytes()
            datas.append((data, n))
            await tb.source["s_axis"].send(frame(data, tuser=n))
        await expect_frames(tb, [nm.decompress(d, codec, n).tobytes() for d, n in datas],
                            f"decompress {codec} idle={idle} bp={bp}")


def _register(kind, body, codec):
    async def test(dut):
        await body(dut, codec)
    test.__name__ = test.__qualname__ = f"{kind}_{codec}"
    test.__doc__ = f"{kind} random packets with {codec}, every traffic mode"
    globals()[test.__name__] = cocotb.test(test)


for _codec in CODECS:
    _register("compress", compress_packets, _codec)
    _register("decompress", decompress_packets, _codec)


@cocotb.test()
async def decompress_half_exhaustive(dut):
    """All 65,536 fp16 and all 65,536 bf16 patterns through the decompressor, under backpressure."""
    tb = await start(dut, "fp16")
    tb.set_traffic(0.1, 0.2)
    for codec in ("fp16", "bf16"):
        dut.cfg_codec.value = Codec[codec]          # idle between packets: safe to switch
        pats = np.arange(65536, dtype=np.uint32).astype(np.uint16)
        datas = [pats[i:i + 4096].tobytes() for i in range(0, 65536, 4096)]
        for d in datas:
            await tb.source["s_axis"].send(frame(d, tuser=len(d) // 2))
        await expect_frames(tb, [nm.decompress(d, codec, len(d) // 2).tobytes() for d in datas], f"{codec} exhaustive")


@cocotb.test()
async def bfp_short_count_trims(dut):
    """A bfp packet whose element count ends inside a block: the padding elements never come out."""
    tb = await start(dut, "bfp8")
    for codec in ("bfp8", "bfp4"):
        dut.cfg_codec.value = Codec[codec]
        x = np.arange(1, 38, dtype=np.float32)
        data = nm.compress(x, codec)
        await tb.source["s_axis"].send(frame(data, tuser=37))
        await expect_frames(tb, [nm.decompress(data, codec, 37).tobytes()], codec)


async def _throughput(tb, codec, direction):
    dut = tb.dut
    lanes = width() // 32
    n = 10240 * lanes
    r = rng(30)
    x = r.standard_normal(n).astype(np.float32)
    tb.dut.cfg_codec.value = Codec[codec]
    if direction == "compress":
        meter = bench.StreamMeter(dut, "s_axis", "m_axis")
        await tb.source["s_axis"].send(frame(x.tobytes()))
        await expect_frames(tb, [nm.compress(x, codec)], "throughput")
    else:
        # tuser (the element count) is 16 bits: 4096-element packets, back to back
        parts = [x[i:i + 4096] for i in range(0, n, 4096)]
        datas = [nm.compress(p, codec) for p in parts]
        meter = bench.StreamMeter(dut, "s_axis", "m_axis")
        for p, d in zip(parts, datas):
            await tb.source["s_axis"].send(frame(d, tuser=p.size))
        await expect_frames(tb, [nm.decompress(d, codec, p.size).tobytes() for p, d in zip(parts, datas)], "throughput")
    meter.stop()
    fig = meter.figures()
    # the fp32 side is the side that must run at one beat per cycle
    fp32_side = "in_beats_per_cycle" if direction == "compress" else "out_beats_per_cycle"
    fig["fp32_beats_per_cycle"] = fig[fp32_side]
    # the same with back-to-back 256-element packets (1500-byte MTU): the per-packet flush shows here
    xs = [x[i:i + 256] for i in range(0, 256 * 64, 256)]
    datas = [nm.compress(p, codec) for p in xs]
    meter = bench.StreamMeter(dut, "s_axis", "m_axis")
    for p, d in zip(xs, datas):
        await tb.source["s_axis"].send(frame(p.tobytes()) if direction == "compress" else frame(d, tuser=256))
    await expect_frames(tb, datas if direction == "compress" else [nm.decompress(d, codec, 256).tobytes()
                                                                   for d in datas], "packets")
    meter.stop()
    fig["fp32_packet256_beats_per_cycle"] = meter.figures()[fp32_side]
    bench.record(f"{direction}_{codec}_w{width()}", fig)


@cocotb.test(skip=not bench.enabled())
async def throughput(dut):
    """10,240 fp32 beats per codec, no idle, no backpressure."""
    direction = "decompress" if hasattr(dut, "s_axis__tuser") else "compress"
    tb = await start(dut, "none")
    for codec in CODECS:
        await _throughput(tb, codec, direction)


#: the cocotb tests (a regular expression on their names) that apply to each top
TESTS_OF = {"compressor": r"\.compress_", "decompressor": r"\.decompress_|bfp_short"}
if bench.enabled():
    TESTS_OF = {top: f"{tests}|throughput" for top, tests in TESTS_OF.items()}
