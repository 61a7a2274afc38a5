"""Checks of a frame addressed to the aggregation switch against its job table (the decision table's first
six rows), and the record that routes a contribution to its aggregation engine."""

from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import AggDrop, Codec, Dtype, FrameFlag, FrameOpcode
from contract.in_network import MAX_SWITCH_JOBS
from contract.protocol import MAX_P
from hdl.packet.headers import AinicHeader
from hdl.switch.job_table import POOL_BITS, PORT_BITS, WORKER_BITS, JobEntry, first_hit

MAX_JOBS = MAX_SWITCH_JOBS
JOB_BITS = (MAX_JOBS - 1).bit_length()

#: a contribution on its way to an aggregation engine: where it goes and what the round is
Contribution = data.StructLayout({
    "job": JOB_BITS,                    # job table entry
    "job_id": 16,
    "pool_slot": POOL_BITS,             # slot_base + slot
    "slot": 16,                         # within the job's window (the result's header carries it back)
    "set": 1,
    "psn": 32,
    "offset": 32,
    "count": range(MAX_P + 1),
    "collective": 16,
    "worker": WORKER_BITS,
    "workers": range(17),
    "port": PORT_BITS,
    "codec": Codec,
    "dtype": Dtype,
    "down": 1,                          # the spine's result for a leaf's round (on the job's up port)
})

#: ``reason`` when every check passed
PASS = len(AggDrop)


class ContributionCheck(wiring.Component):
    """``reason``: the first failing check of docs/in_network.md's decision table, rows 1-6 (an
    ``AggDrop``: opcode, unknown_job, not_member, dtype, slot_range, count), or :data:`PASS`. A result
    (``aggregated``) or an ``agg_nack`` on a leaf job's up port is the spine's (docs/in_network.md, "Two
    levels"): its job is the entry whose ``up_job`` it names, its worker must be the entry's
    ``up_worker`` (``record.down`` marks a result; the caller tells an ``agg_nack`` by its opcode). ``record``:
    the contribution's routing record, both :data:`LATENCY` cycle after ``header``, ``port`` and ``jobs``.
    The job table has ``max_jobs`` entries, each checked beside the others into a register (whether it is
    the frame's job, each check's verdict against it, its pool slot); the cycle after, the matching entry's
    verdicts are chosen (not looked up and then computed)."""

    LATENCY = 1

    def __init__(self, ports: int, max_jobs: int = 4):
        if not 1 <= max_jobs <= MAX_JOBS:
            self._MustUse__silence = True
            raise ValueError(f"max_jobs must be in 1 .. {MAX_JOBS}, got {max_jobs!r}")
        self.ports, self.max_jobs = ports, max_jobs
        super().__init__({
            "header": In(AinicHeader),
            "port": In(range(ports)),
            "jobs": In(data.ArrayLayout(JobEntry, max_jobs)),
            "reason": Out(range(PASS + 1)),
            "record": Out(Contribution),
        })

    def elaborate(self, platform):
        m = Module()
        h = self.header
        jobs = [self.jobs[i] for i in range(self.max_jobs)]
        R = AggDrop
        # 1. every entry's checks beside the others', registered, with the header and the port
        def entry_regs(name, values, width=1):
            regs = [Signal(width, name=f"{name}{i}") for i in range(len(values))]
            m.d.sync += [r.eq(v) for r, v in zip(regs, values)]
            return regs

        r = self.record
        codec_bits, dtype_bits = len(Value.cast(r.codec)), len(Value.cast(r.dtype))
        # a spine's frame (its result, or its agg_nack for the leaf's partial), if an up port is this one
        down = (h.opcode == FrameOpcode.aggregated) | (h.opcode == FrameOpcode.agg_nack)
        up_here = [j.enable & j.up & (j.up_port == self.port) for j in jobs]
        hit = entry_regs("hit", first_hit(m, [Mux(down, u & (j.up_job == h.job), j.enable & (j.job == h.job))
                                              for u, j in zip(up_here, jobs)], "job"))
        spine = entry_regs("spine", [Cat(*up_here).any()])[0]      # an up port: results are taken here
        window_bad = entry_regs("window_bad", [h.slot >= (Const(1, 9) << j.window_log2) for j in jobs])
        member = entry_regs("member", [Mux(down, h.worker == j.up_worker,
                                           (h.worker < j.workers) & (j.ports[h.worker[:WORKER_BITS]] == self.port))
                                       for j in jobs])
        dtype_bad = entry_regs("dtype_bad", [(h.dtype != j.dtype) | (h.codec != j.codec) for j in jobs])
        count_bad = entry_regs("count_bad", [h.count > j.packet for j in jobs])
        pool = entry_regs("pool", [(j.slot_base + h.slot[:9])[:POOL_BITS] for j in jobs], POOL_BITS)
        workers = entry_regs("workers", [j.workers for j in jobs], len(r.workers))
        codecs = entry_regs("codec", [j.codec for j in jobs], codec_bits)
        dtypes = entry_regs("dtype", [j.dtype for j in jobs], dtype_bits)
        hq, port = Signal.like(h), Signal.like(self.port)
        m.d.sync += [hq.eq(h), port.eq(self.port)]

        # 2. the hit entry's verdicts (one-hot: the first enabled entry with the frame's job id)
        def chosen(values, width):
            """The hit entry's value (0 when none is hit)."""
            out = Signal(width)
            acc = 0
            for k, v in zip(hit, values):
                acc = acc | Mux(k, v, 0)
            m.d.comb += out.eq(acc)
            return out

        found = Cat(*hit).any()
        fails = [
            (R.opcode, (hq.opcode != FrameOpcode.aggregate)
             & ~(((hq.opcode == FrameOpcode.aggregated) | (hq.opcode == FrameOpcode.agg_nack)) & spine)),
            (R.unknown_job, ~found),
            (R.not_member, ~chosen(member, 1)),
            (R.dtype, chosen(dtype_bad, 1)),
            (R.slot_range, chosen(window_bad, 1)),
            (R.count, chosen(count_bad, 1)),
        ]
        m.d.comb += self.reason.eq(PASS)
        for reason, bad in reversed(fails):
            with m.If(bad):
                m.d.comb += self.reason.eq(reason)
        index = chosen(list(range(self.max_jobs)), JOB_BITS)
        m.d.comb += [
            r.job.eq(index), r.job_id.eq(hq.job),
            r.pool_slot.eq(chosen(pool, POOL_BITS)),
            r.slot.eq(hq.slot), r.set.eq((hq.flags & FrameFlag.shadow) != 0), r.psn.eq(hq.psn),
            r.offset.eq(hq.offset), r.count.eq(hq.count), r.collective.eq(hq.collective), r.worker.eq(hq.worker),
            r.workers.eq(chosen(workers, len(r.workers))), r.port.eq(port),
            r.codec.eq(chosen(codecs, codec_bits)),
            r.dtype.eq(chosen(dtypes, dtype_bits)),
            r.down.eq(hq.opcode == FrameOpcode.aggregated),
        ]
        return m
