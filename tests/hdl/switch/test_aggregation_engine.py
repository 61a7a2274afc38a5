"""One aggregation engine, driven directly as the crossbar drives it: every result is the exact sum of its
round (host_driver.models.numerics), a resend after the round completes gets the stored result, one before
is dropped; and the engine takes a contribution of k beats in max(k, 3) cycles (the next record decided
while the payload before it passes), with rounds of 1-, 2- and 3-beat packets on the same set back to back
(the accumulator's read-add-write is three cycles deep: the case a missing gap would corrupt)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from contract.enums import AggDrop, Codec, Dtype
from hdl.switch.aggregation_engine import AggregationEngine
from hdl.switch.contribution_check import PASS
from hdl.switch.job_table import job_entry_value
from host_driver.models import numerics as nm

W = 128              # 4 lanes (the Python simulator's compiler recurses too deep at W = 512)
P = 64
LANES = W // 32
PORTS = 3
WINDOW = 4


def rounds(rng, counts):
    """Per round g (packet g of one job, slot g mod WINDOW): its element count and each worker's values."""
    return [(c, (rng.standard_normal((PORTS, c)) * 2.0 ** rng.integers(-20, 20, (PORTS, c))).astype(np.float32))
            for c in counts]


def script(rng, plan, resend: float):
    """Contributions in the order the engine gets them: round g's workers in a random order, each round after
    the one before; with probability ``resend`` a worker's copy is sent again (before or after the round
    completes). Returns [(record fields, values)] and the reason the model expects for each."""
    items = []
    for g, (count, x) in enumerate(plan):
        order = list(rng.permutation(PORTS))
        seen = 0
        for w in order:
            seen += 1
            items.append((g, int(w), "pass"))
            if rng.random() < resend:
                items.append((g, int(w), "unicast" if seen == PORTS else "duplicate"))
    return items


def record(g, w, count):
    slot = g % WINDOW
    return {"job": 0, "job_id": 7, "pool_slot": slot, "slot": slot, "set": (g // WINDOW) % 2, "psn": g,
            "offset": g * P, "count": count, "collective": 1, "worker": w, "workers": PORTS, "port": w,
            "codec": Codec.none, "dtype": Dtype.fp32}


def beats_of(values):
    bits = values.view(np.uint32)
    out = []
    for k in range(0, len(bits), LANES):
        chunk = bits[k:k + LANES]
        data = sum(int(v) << (32 * i) for i, v in enumerate(chunk))
        out.append((data, (1 << (4 * len(chunk))) - 1, k + LANES >= len(bits)))
    return out


def run(items, plan, idle=0.0, backpressure=0.0, seed=0, limit=60_000):
    """Drive the engine; returns (results [(record dict, uint32 values)], events [reason], cycles from the
    first record offered to the last payload beat taken)."""
    dut = AggregationEngine(W, PORTS, slots=WINDOW, engines=1, max_packet=P, max_jobs=1)
    rng = np.random.default_rng(seed)
    results, events, span = [], [], {}

    async def bench(ctx):
        ctx.set(dut.jobs[0].as_value(), job_entry_value(7, range(PORTS), WINDOW, 0, Dtype.fp32, Codec.none, P))
        ctx.set(dut.index, 0)
        await ctx.tick().until(~dut.clearing)
        metas = list(items)
        taken = []                  # records taken whose payload has not been sent
        beat = 0
        cur = None
        out_bits, out_recs = [], []          # records come ahead of their payloads, in the same order
        start = None
        for n in range(limit):
            s_meta, s_axis, om, oa = dut.s_meta, dut.s_axis, dut.m_meta, dut.m_axis
            offer = bool(metas) and (start is None or rng.random() >= idle or ctx.get(s_meta.valid))
            ctx.set(s_meta.valid, int(offer))
            if offer:
                g, w, _ = metas[0]
                ctx.set(s_meta.payload, record(g, w, plan[g][0]))
                start = n if start is None else start
            if cur is None and taken:
                g, w = taken[0]
                cur = beats_of(plan[g][1][w])
                beat = 0
            send = cur is not None and rng.random() >= idle
            ctx.set(s_axis.tvalid, int(send))
            if send:
                d, k, last = cur[beat]
                ctx.set(s_axis.tdata, d)
                ctx.set(s_axis.tkeep, k)
                ctx.set(s_axis.tlast, last)
            ctx.set(om.ready, int(rng.random() >= backpressure))
            ctx.set(oa.tready, int(rng.random() >= backpressure))
            # the handshakes of this cycle
            if ctx.get(dut.event.valid):
                events.append(int(ctx.get(dut.event.reason)))
            if ctx.get(om.valid) and ctx.get(om.ready):
                out_recs.append({k: int(ctx.get(getattr(om.payload, k))) for k in ("psn", "count", "retransmit", "dest")})
            if ctx.get(oa.tvalid) and ctx.get(oa.tready):
                d, keep = int(ctx.get(oa.tdata)), int(ctx.get(oa.tkeep))
                out_bits += [(d >> (32 * i)) & 0xFFFFFFFF for i in range(LANES) if keep >> (4 * i) & 1]
                if ctx.get(oa.tlast):
                    results.append((out_recs.pop(0), np.array(out_bits, np.uint32)))
                    out_bits = []
            if offer and ctx.get(s_meta.ready):
                g, w, _ = metas.pop(0)
                taken.append((g, w))
            if send and ctx.get(s_axis.tready):
                beat += 1
                if beat == len(cur):
                    taken.pop(0)
                    cur = None
                    span["cycles"] = n - start + 1
            if not metas and not taken and len(events) == len(items) and n - start > span["cycles"] + 200:
                return
            await ctx.tick()
        raise AssertionError(f"not done after {limit} cycles")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return results, events, span["cycles"]


def check(items, plan, results, events):
    want_reason = {"pass": PASS, "unicast": PASS, "duplicate": AggDrop.duplicate}
    assert events == [want_reason[kind] for _, _, kind in items]
    sums = [nm.exact_sum_f32(x) for _, x in plan]
    expected = []
    for g, w, kind in items:
        if kind == "unicast":
            expected.append((g, 1, 1 << w))
    done = {}
    for g, w, kind in items:                # the round's multicast comes with its last worker
        if kind == "pass":
            done[g] = done.get(g, 0) + 1
            if done[g] == PORTS:
                expected.append((g, 0, (1 << PORTS) - 1))
    got = sorted((r["psn"], r["retransmit"], r["dest"]) for r, _ in results)
    assert got == sorted(expected)
    for r, bits in results:
        assert r["count"] == plan[r["psn"]][0]
        assert np.array_equal(bits, sums[r["psn"]]), r


@pytest.mark.parametrize("counts", [[4] * 24, [8] * 24, [12, 5, 4, 8] * 6, [64, 4, 1, 63] * 4])
def test_back_to_back_at_one_contribution_per_max_k_3_cycles(rng, counts):
    plan = rounds(rng, counts)
    items = script(rng, plan, resend=0.0)
    results, events, cycles = run(items, plan)
    check(items, plan, results, events)
    bound = sum(PORTS * max(-(-c // LANES), 3) for c in counts)
    # the first record's lookup and decision (2 cycles) are the only ones not hidden behind a payload
    assert cycles <= bound + 2, (cycles, bound)


def test_resends_under_idle_and_backpressure(rng):
    plan = rounds(rng, [int(c) for c in rng.choice([1, 4, 5, 8, 12, 64], 40)])
    items = script(rng, plan, resend=0.3)
    results, events, _ = run(items, plan, idle=0.3, backpressure=0.5, seed=int(rng.integers(2**31)))
    check(items, plan, results, events)
