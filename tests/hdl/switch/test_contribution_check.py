"""The switch's contribution checks (decision table rows 1-6) against SwitchModel.contribute, header by
header: the same drop reason, or none, and the routing record."""

from amaranth.sim import Simulator

from contract.enums import AggDrop, Codec, Dtype, FrameFlag, FrameOpcode
from contract.protocol import codec_bytes
from hdl.packet.headers import AinicHeader
from hdl.switch.contribution_check import PASS, ContributionCheck
from host_driver.models import in_network as inn
from tests.hdl.switch.jobs import entry

JOBS = [inn.Job(7, (2, 0, 3), 4, slot_base=8, packet=64), None,
        inn.Job(9, (1,), 2, slot_base=0, dtype="int32", packet=32), inn.Job(11, (3, 1), 8, slot_base=16, codec="bfp8")]


def random_contribution(rng):
    job = JOBS[int(rng.choice([0, 2, 3]))]
    w = int(rng.integers(0, job.workers))
    a = inn.Agg(FrameOpcode.aggregate, job.job, w, int(rng.integers(0, job.window)), int(rng.integers(0, 2)),
                int(rng.integers(0, 2**32)), int(rng.integers(0, 2**20)), int(rng.integers(1, job.packet + 1)),
                Codec[job.codec], Dtype[job.dtype], b"", bool(rng.integers(0, 2)), int(rng.integers(0, 2**16)))
    port = job.ports[w]
    fault = int(rng.integers(0, 8))
    if fault == 1:
        a = inn.Agg(**{**a.__dict__, "opcode": int(rng.choice([0, 1, 2, 3, 5]))})
    elif fault == 2:
        a = inn.Agg(**{**a.__dict__, "job": int(rng.choice([8, 10, 0xFFFF]))})
    elif fault == 3:
        a = inn.Agg(**{**a.__dict__, "worker": int(rng.integers(job.workers, 2**16))})
    elif fault == 4:
        port = int(rng.integers(0, 4))
    elif fault == 5:
        a = inn.Agg(**{**a.__dict__, "dtype": 1 - a.dtype, "codec": int(rng.integers(0, 5))})
    elif fault == 6:
        a = inn.Agg(**{**a.__dict__, "slot": int(rng.integers(job.window, 2**16))})
    elif fault == 7:
        a = inn.Agg(**{**a.__dict__, "count": int(rng.integers(job.packet + 1, 1025))})
    return port, a


def model_reason(port, a):
    sw = inn.SwitchModel(4, slots=64)
    for i, j in enumerate(JOBS):
        if j is not None:
            sw.configure(i, j)
    sw.contribute(port, inn.Agg(**{**a.__dict__, "payload": bytes(codec_bytes(min(a.codec, 4), a.count))}))
    dropped = [AggDrop[k] for k, v in sw.drops.items() if v]
    return dropped[0] if dropped else PASS


def header(a):
    return AinicHeader.const({
        "version": 1, "opcode": a.opcode, "codec": a.codec, "dtype": a.dtype, "flags": a.flags, "job": a.job,
        "collective": a.collective, "src_rank": a.worker, "dst_rank": 0xFFFF, "chunk": 0, "worker": a.worker,
        "slot": a.slot, "count": a.count, "offset": a.offset, "psn": a.psn, "reserved": 0,
    }).as_value().value


def test_checks_are_the_models(rng):
    cases = [random_contribution(rng) for _ in range(600)]
    dut = ContributionCheck(4, max_jobs=4)
    got, held = [], []

    async def bench(ctx):
        for i, j in enumerate(JOBS):
            ctx.set(dut.jobs[i].as_value(), entry(j))
        rec = dut.record
        for k, (port, a) in enumerate(cases):   # (a new case every cycle: its verdict the cycle after)
            ctx.set(dut.header.as_value(), header(a))
            ctx.set(dut.port, port)
            if k:                               # (still the case before: the record is registered)
                held.append(ctx.get(rec.psn) == cases[k - 1][1].psn)
            await ctx.tick().repeat(dut.LATENCY)
            got.append((ctx.get(dut.reason), ctx.get(rec.job), ctx.get(rec.pool_slot), ctx.get(rec.set),
                        ctx.get(rec.workers), ctx.get(rec.port), ctx.get(rec.psn)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    reasons = set()
    assert len(got) == len(cases) and all(held) and dut.LATENCY == 1
    for (port, a), (reason, job, pool, s, n, rport, psn) in zip(cases, got):
        want = model_reason(port, a)
        assert reason == want, (port, a, reason, want)
        assert (rport, psn) == (port, a.psn)
        reasons.add(want)
        if reason == PASS:
            k = next(i for i, j in enumerate(JOBS) if j is not None and j.job == a.job)
            assert (job, pool, s, n) == (k, JOBS[k].slot_base + a.slot, int(bool(a.flags & FrameFlag.shadow)),
                                         JOBS[k].workers)
    assert reasons == set(AggDrop) - {AggDrop.stale, AggDrop.busy, AggDrop.duplicate} | {PASS}
