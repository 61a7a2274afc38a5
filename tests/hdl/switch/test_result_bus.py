"""The switch's result bus: the engines' rounded results, in turn, through one compressor to every destination
port at once, each port's payload the golden model's encoding (host_driver.models.numerics.compress), under
idle engines and backpressure on every port; results of one codec follow each other without a cycle between."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from contract.enums import Codec
from hdl.switch.result_bus import ResultBus
from host_driver.models import numerics as nm

W = 128
LANES = W // 32
ENGINES, PORTS = 3, 4


def results_for(rng, count, codecs, least=1):
    """Per engine, its results of ``least`` to 39 elements: (psn, codec, dest, values)."""
    out = [[] for _ in range(ENGINES)]
    for psn in range(count):
        n = int(rng.integers(least, 40))
        values = (rng.standard_normal(n) * 2.0 ** rng.integers(-10, 10, n)).astype(np.float32)
        dest = int(rng.integers(1, 1 << PORTS))
        out[int(rng.integers(ENGINES))].append((psn, codecs[int(rng.integers(len(codecs)))], dest, values))
    return out


def encoded(codec, values):
    bits = values.view(np.uint32)
    return bits.tobytes() if codec == "none" else bytes(nm.compress(bits, codec))


def run(per_engine, idle=0.0, backpressure=0.0, seed=0, limit=20_000):
    """Drive the bus; returns (per port [(psn, payload bytes)], cycles in which a beat entered the compressor,
    cycles from the first beat in to the last)."""
    dut = ResultBus(W, ENGINES, PORTS)
    rng = np.random.default_rng(seed)
    got = [[] for _ in range(PORTS)]
    fed, order = [], []
    total = sum(len(e) for e in per_engine)

    async def bench(ctx):
        queues = [list(e) for e in per_engine]
        taken = [[] for _ in range(ENGINES)]            # records taken whose beats are still to go
        beat = [0] * ENGINES
        recs = [[] for _ in range(PORTS)]
        body = [b""] * PORTS
        done = 0
        for n in range(limit):
            for k in range(ENGINES):
                sm, sa = getattr(dut, f"s_meta_{k}"), getattr(dut, f"s_axis_{k}")
                offer = bool(queues[k]) and (rng.random() >= idle or ctx.get(sm.valid))
                ctx.set(sm.valid, offer)
                if offer:
                    psn, codec, dest, values = queues[k][0]
                    ctx.set(sm.payload.psn, psn)
                    ctx.set(sm.payload.codec, Codec[codec])
                    ctx.set(sm.payload.count, len(values))
                    ctx.set(sm.payload.dest, dest)
                send = bool(taken[k]) and (rng.random() >= idle or ctx.get(sa.tvalid))
                ctx.set(sa.tvalid, send)
                if send:
                    bits = taken[k][0][3].view(np.uint32)
                    chunk = bits[beat[k]:beat[k] + LANES]
                    ctx.set(sa.tdata, sum(int(v) << (32 * i) for i, v in enumerate(chunk)))
                    ctx.set(sa.tkeep, (1 << (4 * len(chunk))) - 1)
                    ctx.set(sa.tlast, beat[k] + LANES >= len(bits))
            for i in range(PORTS):
                ctx.set(getattr(dut, f"m_meta_{i}").ready, rng.random() >= backpressure)
                ctx.set(getattr(dut, f"m_axis_{i}").tready, rng.random() >= backpressure)
            # this cycle's handshakes
            for k in range(ENGINES):
                sm, sa = getattr(dut, f"s_meta_{k}"), getattr(dut, f"s_axis_{k}")
                if ctx.get(sa.tvalid) and ctx.get(sa.tready):
                    fed.append(n)
                    beat[k] += LANES
                    if beat[k] >= len(taken[k][0][3]):
                        taken[k].pop(0)
                        beat[k] = 0
                if ctx.get(sm.valid) and ctx.get(sm.ready):
                    taken[k].append(queues[k].pop(0))
                    order.append(taken[k][-1][0])
            for i in range(PORTS):
                om, oa = getattr(dut, f"m_meta_{i}"), getattr(dut, f"m_axis_{i}")
                if ctx.get(om.valid) and ctx.get(om.ready):
                    recs[i].append(ctx.get(om.payload.psn))
                if ctx.get(oa.tvalid) and ctx.get(oa.tready):
                    data, keep = ctx.get(oa.tdata), ctx.get(oa.tkeep)
                    body[i] += bytes((data >> (8 * b)) & 0xFF for b in range(W // 8) if keep >> b & 1)
                    if ctx.get(oa.tlast):
                        got[i].append((recs[i].pop(0), body[i]))
                        body[i] = b""
                        done += 1
            if done == sum(bin(r[2]).count("1") for e in per_engine for r in e) and not any(taken):
                return
            await ctx.tick()
        raise AssertionError(f"not done after {limit} cycles ({done} payloads of {total} results out)")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, fed, order


def check(per_engine, got, order):
    by_psn = {r[0]: r for e in per_engine for r in e}
    for i in range(PORTS):
        want = sorted(psn for psn, (_, _, dest, _) in by_psn.items() if dest >> i & 1)
        assert sorted(psn for psn, _ in got[i]) == want, i
        for psn, body in got[i]:
            _, codec, _, values = by_psn[psn]
            assert body == encoded(codec, values), (i, psn, codec)
    # every port sees its results in the order the bus took them
    for i in range(PORTS):
        assert [psn for psn, _ in got[i]] == [p for p in order if by_psn[p][2] >> i & 1], i


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.3)])
def test_every_codec_to_every_destination(rng, idle, backpressure):
    per_engine = results_for(rng, 60, ["none", "fp16", "bf16", "bfp8", "bfp4"])
    got, _, order = run(per_engine, idle, backpressure, seed=int(rng.integers(1 << 30)))
    check(per_engine, got, order)


@pytest.mark.parametrize("codec", ["none", "bfp8"])
def test_results_of_one_codec_back_to_back(rng, codec):
    """Engines always ready, ports never pushing back, results of two beats or more: the compressor takes a
    beat every cycle from the first result's first beat to the last result's last (the next result's record
    is taken while the one before passes), but for its own cycle after a packet that ends with encoded beats
    to flush."""
    per_engine = results_for(rng, 40, [codec], least=LANES + 1)
    got, fed, order = run(per_engine)
    check(per_engine, got, order)
    span = fed[-1] - fed[0] + 1
    # (the compressor's flush cycle: none has none; a codec at most one a result)
    flushes = 0 if codec == "none" else sum(len(e) for e in per_engine)
    assert span - len(fed) <= flushes, (span, len(fed), flushes)
