"""Reduction unit: fp32 and int32 element-wise sums against host_driver.models.numerics, bit for bit (also on
its ECP5 gate-level netlist)."""

import os

import cocotb
import numpy as np
import pytest

from cocotb_tests import bench
from host_driver.models import numerics as nm
from host_driver.models.vectors import adder_edge_pairs, edge_f32_bits
from host_driver.sim.testbench import SIM_WIDTHS, TB, TRAFFIC, frame, rng, width

TOP = "reduction_unit"


def packet_sizes(lanes, r):
    """Element counts: 1..4 bus widths, off-by-one around a beat, a 1500-byte-MTU packet, random."""
    return [1, lanes - 1 or 1, lanes, lanes + 1, 2 * lanes, 3 * lanes + 1, 4 * lanes, 256,
            int(r.integers(1, 300))]


async def start(dut, dtype):
    tb = TB(dut, sources=("s_axis_a", "s_axis_b"), sinks=("m_axis",))
    dut.cfg_dtype.value = dtype
    dut.stat_clear.value = 0
    await tb.reset()
    return tb


async def send_and_check(tb, pairs, expect):
    if os.environ.get("AINIC_FLIP_EXPECTED_BIT"):       # self-test of the scoreboard, see below
        expect = [e.copy() for e in expect]
        expect[0].view(np.uint32)[0] ^= 1
    for a, b in pairs:
        await tb.source["s_axis_a"].send(frame(a.tobytes()))
        await tb.source["s_axis_b"].send(frame(b.tobytes()))
    for i, want in enumerate(expect):
        rx = await tb.sink["m_axis"].recv()
        got = np.frombuffer(bytes(rx.tdata), dtype=np.uint32)
        want = want.view(np.uint32)
        bad = np.nonzero(got != want)[0] if got.size == want.size else [-1]
        assert got.size == want.size and len(bad) == 0, \
            f"packet {i}: {got.size} vs {want.size} elements; first bad {[(int(j), hex(got[j]), hex(want[j])) for j in bad[:4]]}"
    assert tb.sink["m_axis"].empty()


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def fp32_packets(dut):
    """Random packets of edge-biased fp32 pairs, every traffic mode; sums bit-exact with add_f32."""
    tb = await start(dut, 0)
    r = rng(1)
    lanes = width() // 32
    for idle, bp in TRAFFIC:
        tb.set_traffic(idle, bp)
        pairs = [(edge_f32_bits(r, n), edge_f32_bits(r, n)) for n in packet_sizes(lanes, r)]
        await send_and_check(tb, pairs, [nm.add_f32(a, b) for a, b in pairs])
    assert dut.stat_framing.value == 0


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def fp32_named_edges(dut):
    """Every pair of the named edge values (zeros, subnormals, ties, inf, NaN, ...) under backpressure."""
    tb = await start(dut, 0)
    tb.set_traffic(0.2, 0.3)
    a, b = adder_edge_pairs()
    await send_and_check(tb, [(a, b)], [nm.add_f32(a, b)])


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def int32_saturation(dut):
    """Saturating int32 sums; stat_overflow is sticky, set only by a kept lane, and cleared by stat_clear."""
    tb = await start(dut, 1)
    r = rng(2)
    lanes = width() // 32
    small = [(r.integers(-2**20, 2**20, n).astype(np.int32), r.integers(-2**20, 2**20, n).astype(np.int32))
             for n in packet_sizes(lanes, r)]
    tb.set_traffic(0.3, 0.3)
    await send_and_check(tb, small, [nm.add_i32(a, b)[0] for a, b in small])
    assert dut.stat_overflow.value == 0, "overflow flagged without overflow"
    big = [(r.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32),
            r.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)) for n in (lanes, 3 * lanes + 1)]
    big[0][0][:2] = [2**31 - 1, -2**31]
    big[0][1][:2] = [1, -1]
    await send_and_check(tb, big, [nm.add_i32(a, b)[0] for a, b in big])
    assert dut.stat_overflow.value == 1
    dut.stat_clear.value = 1
    await tb.cycles(1)
    dut.stat_clear.value = 0
    await tb.cycles(1)
    assert dut.stat_overflow.value == 0


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def framing_mismatch_flagged(dut):
    """Inputs that disagree on tlast are paired beat by beat and flagged in stat_framing."""
    tb = await start(dut, 1)
    lanes = width() // 32
    a = np.arange(2 * lanes, dtype=np.int32)
    b = np.arange(3 * lanes, dtype=np.int32)
    await tb.source["s_axis_a"].send(frame(a.tobytes()))
    await tb.source["s_axis_b"].send(frame(b.tobytes()))
    await tb.source["s_axis_a"].send(frame(a[:lanes].tobytes()))
    rx = await tb.sink["m_axis"].recv()
    assert np.array_equal(np.frombuffer(bytes(rx.tdata), np.int32), a + b[:2 * lanes])
    rx = await tb.sink["m_axis"].recv()
    assert dut.stat_framing.value == 1


@cocotb.test(skip=not bench.enabled())
async def throughput(dut):
    """10,240 back-to-back beats, no idle, no backpressure: beats per cycle and latency."""
    tb = await start(dut, 0)
    lanes = width() // 32
    n = 10240 * lanes
    r = rng(3)
    a, b = edge_f32_bits(r, n), edge_f32_bits(r, n)
    meter = bench.StreamMeter(dut, "s_axis_a", "m_axis")
    await send_and_check(tb, [(a, b)], [nm.add_f32(a, b)])
    meter.stop()
    fig = meter.figures()
    fig["fp32_beats_per_cycle"] = fig["in_beats_per_cycle"]
    bench.record(f"reduction_unit_w{width()}", fig)


@pytest.mark.parametrize("width", SIM_WIDTHS)
def test_reduction_unit(sim, width):
    from host_driver.sim.runner import run
    run(sim, TOP, width, __name__)


@pytest.mark.heavy(40)
def test_reduction_unit_gate_level():
    """The same tests on the synthesised netlist (synth_ecp5, W = 64), bit for bit."""
    from cocotb_tests.gate_level import run_gate_level
    run_gate_level(TOP, __name__)


def test_scoreboard_catches_one_wrong_bit():
    """The regression can fail: with one expected bit flipped, the fp32 test must report a mismatch."""
    from host_driver.sim.runner import run
    with pytest.raises(AssertionError, match="first bad"):
        run("icarus", TOP, 64, __name__, testcase="fp32_named_edges",
            env={"AINIC_FLIP_EXPECTED_BIT": "1"}, tag="flip")
