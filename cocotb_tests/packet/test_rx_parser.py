"""Receive parser: every frame's verdict equals host_driver.models.protocol.check_frame; accepted payloads and
headers come out bit-exact; dropped frames are counted per reason and never disturb the next frame."""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge, SimTimeoutError, with_timeout
import pytest
from scapy.packet import fuzz

from cocotb_tests import bench
from contract.enums import Codec, names
from host_driver.models import numerics as nm
from host_driver.models import protocol as pr
from host_driver.models.vectors import malformed_frames
from host_driver.sim.replay import counters, start
from host_driver.sim.testbench import SIM_WIDTHS, TRAFFIC, frame, rng, width


def valid_frame(r):
    codec = str(r.choice(names(Codec)))
    n = int(r.choice([1, 2, 15, 16, 17, 64, 255, 256, int(r.integers(1, 257))]))
    x = r.standard_normal(n).astype(np.float32)
    return pr.build_frame(nm.compress(x, codec), codec=codec, count=n, chunk=int(r.integers(0, 100)),
                          offset=int(r.integers(0, 2**32)), psn=int(r.integers(0, 2**32)),
                          opcode=int(r.integers(0, 2)))


def fuzzed(r, f):
    f = bytearray(f)
    if r.random() < 0.5:
        f = f[:int(r.integers(1, len(f)))]
    for _ in range(int(r.integers(0, 3))):
        f[int(r.integers(0, len(f)))] ^= 1 << int(r.integers(0, 8))
    return bytes(f)


def workload(r):
    """Valid frames interleaved with every malformed class, fuzzed frames, and control frames."""
    frames = []
    bad = list(malformed_frames().values())
    for i in range(24):
        frames.append((valid_frame(r), False))
        frames.append(bad[i % len(bad)] if i < len(bad) else (fuzzed(r, valid_frame(r)), False))
    frames.append((pr.build_frame(b"", opcode=2, count=0), False))        # an ack: header only
    for _ in range(6):                                                     # scapy's own field fuzzer
        hdr = bytes(fuzz(pr.Ainic(version=1)))
        frames.append((pr.build_frame(b"", count=0)[:42] + hdr, False))
    frames.append((valid_frame(r), False))
    return frames


@cocotb.test()
async def verdicts_payloads_and_counters(dut):
    tb = await start(dut)
    r = rng(40)
    expect_counts = {reason: 0 for reason in pr.DROP_REASONS}
    accepted = 0
    for idle, bp in TRAFFIC:
        tb.set_traffic(idle, bp)
        frames = workload(r)
        metas, payloads = [], []
        for f, mac_error in frames:
            await tb.source["s_axis"].send(frame(f, tuser=int(mac_error)))
            v = pr.check_frame(f, mac_error)
            if v.accepted:
                accepted += 1
                metas.append(f[42:74] + f[26:30])
                if len(f) > 74:
                    payloads.append(f[74:])
            else:
                expect_counts[v.reason] += 1
        for i, want in enumerate(metas):
            rx = await tb.sink["m_meta"].recv()
            raw = bytes(rx.tdata)
            got = int.from_bytes(raw[:32], "little").to_bytes(32, "big") + \
                int.from_bytes(raw[32:36], "little").to_bytes(4, "big")
            assert got == want, f"meta {i}: {got.hex()} != {want.hex()}"
        for i, want in enumerate(payloads):
            rx = await tb.sink["m_axis"].recv()
            assert bytes(rx.tdata) == want, f"payload {i}: {len(rx.tdata)} vs {len(want)} bytes"
        assert tb.sink["m_axis"].empty() and tb.sink["m_meta"].empty()
    await tb.cycles(8)
    assert counters(dut) == {**expect_counts, "accepted": accepted}
    assert all(v for k, v in expect_counts.items() if k not in SEQ_REASONS), "every drop reason was provoked"


SEQ_REASONS = ("link_down", "duplicate", "out_of_order")


@cocotb.test()
async def sequence_check(dut):
    """The ring link's receive rule (seq_enable): data and result frames pass only with the psn expected
    next, which the bench advances on every ``seq_accepted`` as the link receiver does; copies, frames
    after a gap and anything while ``seq_block`` are dropped under their reasons (check_frame with
    ``expect_psn``); acks and in-network results pass whatever their psn."""
    tb = await start(dut)
    r = rng(41)
    dut.seq_enable.value = 1
    dut.seq_expect.value = 0
    live = {"expect": 0, "accepted": 0, "dup": 0, "ooo": 0}

    async def link_receiver():
        while True:
            await FallingEdge(dut.clk)
            live["dup"] += int(dut.seq_duplicate.value)
            live["ooo"] += int(dut.seq_out_of_order.value)
            if int(dut.seq_accepted.value):
                live["expect"] += 1
                live["accepted"] += 1
                await RisingEdge(dut.clk)       # a register: the new value from the next cycle on
                dut.seq_expect.value = live["expect"] % 2**32
    cocotb.start_soon(link_receiver())
    before = counters(dut)
    want = {k: 0 for k in SEQ_REASONS}
    expect, accepted_payloads = 0, []
    for idle, bp in TRAFFIC:
        tb.set_traffic(idle, bp)
        for block in (False, True, False):
            dut.seq_block.value = int(block)
            batch = []
            for _ in range(40):
                kind = r.random()
                psn = (expect + int(r.choice([-3, -1, 0, 0, 0, 0, 1, 2]))) % 2**32
                n = int(r.integers(1, 80))
                if kind < 0.8:
                    opcode = int(r.integers(0, 2))          # data or result: checked
                else:
                    opcode = int(r.choice([2, 3, 5]))      # ack, nack, aggregated: never checked
                body = b"" if opcode in (2, 3) else nm.compress(r.standard_normal(n).astype(np.float32), "none")
                f = pr.build_frame(body, count=0 if opcode in (2, 3) else n, psn=psn, opcode=opcode)
                v = pr.check_frame(f, expect_psn=expect, link_down=block)
                if v.accepted:
                    if opcode in (0, 1):
                        expect += 1
                    if body:
                        accepted_payloads.append(body)
                else:
                    want[v.reason] += 1
                batch.append(f)
            for f in batch:
                await tb.source["s_axis"].send(frame(f))
            await tb.source["s_axis"].wait()        # every frame in before seq_block changes
            for body in accepted_payloads:
                assert bytes((await tb.sink["m_axis"].recv()).tdata) == body
            accepted_payloads.clear()
            while not tb.sink["m_meta"].empty():
                tb.sink["m_meta"].recv_nowait()
            await tb.cycles(16)
            assert live["expect"] == expect, (live, expect)
    now = counters(dut)
    assert {k: now[k] - before[k] for k in SEQ_REASONS} == want
    assert (live["dup"], live["ooo"]) == (want["duplicate"], want["out_of_order"])
    assert all(want.values()), want


@cocotb.test()
async def records_kept_while_the_reader_waits(dut):
    """Minimum frames (the header alone) back to back while nobody takes the records: the parser holds its input
    when its record buffer is full, and every accepted frame's record comes out once the reader takes them, in
    order (W = 1024 carries a whole frame a beat, the most frames on their way at once)."""
    tb = await start(dut)
    n = 24
    sink = tb.sink["m_meta"]
    sink.pause = True
    sent = [pr.build_frame(b"", opcode=2, count=0, psn=psn) for psn in range(n)]
    for f in sent:
        await tb.source["s_axis"].send(frame(f))
    await tb.cycles(40 * n)
    held = int(dut.stat_accepted.value)
    assert held < n, "the parser took every frame with its record buffer full"
    sink.pause = False
    got = []
    for i in range(n):
        try:
            got.append(bytes((await with_timeout(sink.recv(), 10, "us")).tdata))
        except SimTimeoutError:
            raise AssertionError(f"record {i} of {n} never came (accepted: {int(dut.stat_accepted.value)})")
    await tb.cycles(20)
    assert int(dut.stat_accepted.value) == n and sink.empty()
    want = [f[42:74] + f[26:30] for f in sent]
    assert [int.from_bytes(g[:32], "little").to_bytes(32, "big") + int.from_bytes(g[32:36], "little").to_bytes(4, "big")
            for g in got] == want


@cocotb.test(skip=not bench.enabled())
async def throughput(dut):
    """Back-to-back maximum-size (P = 256 fp32) frames: beats per cycle; minimum-size frames: frames per cycle."""
    tb = await start(dut)
    figures = {}
    x = np.arange(256, dtype=np.float32)
    for kind, f in (("max", pr.build_frame(x.tobytes())), ("min", pr.build_frame(b"", opcode=2, count=0))):
        n = 10240 // -(-len(f) // (width() // 8)) + 1
        meter = bench.StreamMeter(dut, "s_axis", "m_meta")
        for _ in range(n):
            await tb.source["s_axis"].send(frame(f))
        for _ in range(n):
            await tb.sink["m_meta"].recv()
        if kind == "max":
            for _ in range(n):
                assert bytes((await tb.sink["m_axis"].recv()).tdata) == f[74:]
        meter.stop()
        fig = meter.figures()
        span = meter.in_cycles[-1] - meter.in_cycles[0] + 1
        figures[kind] = {"frames": n, "frame_bytes": len(f), "in_beats_per_cycle": fig["in_beats_per_cycle"],
                         "frames_per_cycle": round(n / span, 4), "sim_cycles_per_second": fig["sim_cycles_per_second"]}
    bench.record(f"rx_parser_w{width()}", {
        "fp32_beats_per_cycle": None,
        "max_frame_beats_per_cycle": figures["max"]["in_beats_per_cycle"],
        "min_frame_frames_per_cycle": figures["min"]["frames_per_cycle"],
        "min_frame_beats_per_cycle": figures["min"]["in_beats_per_cycle"],
        "max_frame_bytes": figures["max"]["frame_bytes"], "min_frame_bytes": figures["min"]["frame_bytes"],
        "sim_cycles_per_second": figures["max"]["sim_cycles_per_second"],
    })


@pytest.mark.parametrize("width", SIM_WIDTHS)
def test_rx_parser(sim, width):
    from host_driver.sim.runner import run
    run(sim, "rx_parser", width, __name__)


def test_rx_parser_records_w1024():
    """W = 1024, where every minimum frame is one beat: the records that are on their way while the input is
    held must fit (a record buffer of 4 lost one)."""
    from host_driver.sim.runner import run
    run("verilator", "rx_parser", 1024, __name__, testcase="records_kept_while_the_reader_waits")
