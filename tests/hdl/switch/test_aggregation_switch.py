"""The aggregation switch against SwitchModel, frame by frame: every frame in (contributions, copies, late
and malformed ones, frames to forward), the same frames out on the same ports, and the same counters."""

import numpy as np
import pytest
from amaranth import Signal
from amaranth.sim import Simulator

from contract.addresses import ip_int, mac_int
from contract.enums import AggDrop, FrameOpcode
from hdl.switch.aggregation_switch import AggregationSwitch
from host_driver.models import in_network as inn
from host_driver.models import numerics as nm
from host_driver.models import protocol as proto
from tests.hdl.streams import collect_marked, drive_marked
from tests.hdl.switch.jobs import contribution, entry, spine_result

W = 64
PORTS = 3


def configure(ctx, dut, sw):
    ctx.set(dut.cfg_mac, mac_int(sw.mac))
    ctx.set(dut.cfg_ip, ip_int(sw.ip))
    for p in range(PORTS):
        ctx.set(dut.cfg_port_mac[p], mac_int(sw.port_macs[p]))
        ctx.set(dut.cfg_port_ip[p], ip_int(sw.port_ips[p]))
    for i, j in enumerate(sw.jobs):
        ctx.set(dut.cfg_jobs[i].as_value(), entry(j))


class Bench:
    """The switch in the Amaranth simulator: frames in on a port, frames (and their MAC error) out."""

    def __init__(self, dut, sw, rng, backpressure=0.0):
        self.dut, self.sw, self.rng = dut, sw, rng
        self.out = {p: [] for p in range(PORTS)}
        self.backpressure = backpressure

    async def send(self, ctx, port, frame, mac_error=False):
        await drive_marked(ctx, getattr(self.dut, f"s_axis_{port}"), [frame], marked=(0,) if mac_error else ())

    def collector(self, port):
        async def run(ctx):
            await collect_marked(ctx, getattr(self.dut, f"m_axis_{port}"), self.out[port],
                                 np.random.default_rng(port), self.backpressure)
        return run


def run(dut, sw, script, rng, backpressure=0.0, settle=400, workers=()):
    """``script(bench, ctx)``: an async function that sends frames; ``workers``: more of them, run at the
    same time (one per port). Returns (bench, counters) once all are done and the switch has settled."""
    bench = Bench(dut, sw, rng, backpressure)
    stats = {}
    done = []

    def concurrent(fn):
        async def go(ctx):
            await ctx.tick().until(configured)
            await fn(bench, ctx)
            done.append(fn)
        return go

    configured = Signal()

    async def main(ctx):
        configure(ctx, dut, sw)
        await ctx.tick().until(~dut.clearing)
        ctx.set(configured, 1)
        await script(bench, ctx)
        while len(done) < len(workers):
            await ctx.tick()
        await ctx.tick().repeat(settle)
        st = dut.stats
        stats["drops"] = {r.name: ctx.get(st.drops[r]) for r in AggDrop}
        stats["jobs"] = [(ctx.get(st.job_absorbed[j]), ctx.get(st.job_completed[j]), ctx.get(st.job_unicast[j]))
                         for j in range(len(sw.jobs))]
        stats["nacks"] = [ctx.get(st.job_nacks[j]) for j in range(len(sw.jobs))]
        stats["updown"] = [(ctx.get(st.job_up[j]), ctx.get(st.job_down[j])) for j in range(len(sw.jobs))]
        stats["job_drops"] = [{r.name: ctx.get(st.job_drops[j][r]) for r in AggDrop} for j in range(len(sw.jobs))]
        stats["unknown_mac"] = ctx.get(st.unknown_mac)
        stats["frames_in"] = [ctx.get(st.port_frames_in[p]) for p in range(PORTS)]
        stats["frames_out"] = [ctx.get(st.port_frames_out[p]) for p in range(PORTS)]
        stats["parser"] = [{r.name: ctx.get(st.port_parser_drops[p][r]) for r in proto.DropReason if
                            ctx.get(st.port_parser_drops[p][r])} for p in range(PORTS)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(main)
    for fn in workers:
        sim.add_testbench(concurrent(fn))
    for p in range(PORTS):
        sim.add_process(bench.collector(p))
    sim.run()
    return bench, stats


def one_at_a_time(frames, got):
    """A script that sends ``frames`` ((port, frame) each) one at a time, the switch settling after each, and
    appends to ``got`` the frames out that each caused (sorted (port, frame, mac_error))."""
    async def script(bench, ctx):
        for port, f in frames:
            before = {p: len(v) for p, v in bench.out.items()}
            await bench.send(ctx, port, f)
            await ctx.tick().repeat(150)
            got.append(sorted((p, fr, e) for p, v in bench.out.items() for fr, e in v[before[p]:]))
    return script


def same_frames_and_counters(dut, sw, frames, want, rng) -> dict:
    """Send ``frames`` one at a time; each one's frames out must be ``want``'s (the model's), and the drops and
    the jobs' rounds the model's counters. Returns the switch's counters."""
    got = []
    _, stats = run(dut, sw, one_at_a_time(frames, got), rng)
    for i, ((port, f), w, g) in enumerate(zip(frames, want, got)):
        assert g == w, (i, port, proto.Ainic(f[42:74]).summary() if len(f) > 74 else f[:16].hex(), len(w), len(g))
    assert stats["drops"] == sw.drops
    assert stats["jobs"] == [(c.absorbed, c.completed, c.unicast) for c in sw.job_counters]
    return stats


def model_switch(jobs):
    sw = inn.SwitchModel(PORTS, slots=8, max_jobs=2)
    for i, j in enumerate(jobs):
        sw.configure(i, j)
    return sw


@pytest.fixture(scope="module")
def dut():
    return AggregationSwitch(PORTS, W, engines=2, pool_slots=8, max_jobs=2, max_packet=32)


def test_frame_by_frame_against_the_model(dut, rng):
    """One frame at a time (the switch settles between frames): every output frame equals the model's."""
    jobs = [inn.Job(7, (0, 2, 1), 2, slot_base=0, packet=32), inn.Job(9, (1, 0), 2, slot_base=4, codec="bfp8", packet=32)]
    sw = model_switch(jobs)
    frames = []
    for g in range(5):                                   # 5 packets over a window of 2: both sets, reused
        for w in rng.permutation(3):
            n = 32 if g < 4 else 13                      # the last packet short, odd
            frames.append(contribution(sw, jobs[0], int(w), g, rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20)))
            if rng.random() < 0.3:                       # a copy: dropped, or answered with the stored result
                frames.append(frames[-1])
        for w in (g % 2, 1 - g % 2):
            frames.append(contribution(sw, jobs[1], w, g, rng.standard_normal(32)))
    frames += [contribution(sw, jobs[0], 0, 0, np.ones(32)),                   # stale now
               contribution(sw, jobs[0], 1, 7, np.ones(32)),                   # busy: round 5 is incomplete
               contribution(sw, jobs[0], 0, 4, np.ones(12)),                   # count other than the round's
               contribution(sw, jobs[0], 2, 0, np.ones(32), job=99),           # unknown job
               contribution(sw, jobs[0], 1, 0, np.ones(32), worker=2),         # not from worker 2's port
               contribution(sw, jobs[0], 0, 0, np.ones(32), slot=5),           # slot out of range
               (0, proto.build_frame(bytes(40), dst_mac=sw.port_macs[2], src_mac=sw.port_macs[0])),   # forward
               (1, proto.build_frame(bytes(40), dst_mac="02:00:00:00:99:99"))]                        # unknown
    want = []
    for port, f in frames:
        want.append(sorted(sw.receive(port, f)))

    stats = same_frames_and_counters(dut, sw, frames, want, rng)
    assert stats["job_drops"] == [c.drops for c in sw.job_counters]
    assert stats["unknown_mac"] == 1
    assert stats["frames_in"] == [c.frames_in for c in sw.port_counters]
    assert stats["frames_out"] == [c.frames_out for c in sw.port_counters]
    assert [c.completed for c in sw.job_counters] == [5, 5] and sum(len(w) for w in want) >= 5 * 3 + 5 * 2 + 1


def test_a_lost_contribution_is_asked_for_by_number(dut, rng):
    """Contributions numbered on each worker's link (``chunk``, the psn before in ``reserved``), some lost on
    the way: the frame after a lost one makes the switch send that worker an agg_nack for it (after two lost
    in a row, for the second, whose psn the next frame names: the timers have the first), the resends
    complete the rounds, results and agg_nacks are numbered per port; every frame out equals the model's,
    byte for byte, and so do the counters (``job_nacks``)."""
    job = inn.Job(7, (0, 2, 1), 2, slot_base=0, packet=32)
    sw = model_switch([job])
    seq, prev = [0] * 3, [0] * 3
    frames, lost = [], []

    def send(w, g, values, retransmit=False, lose=False):
        port, f = contribution(sw, job, w, g, values, seq=seq[w], prev=prev[w], retransmit=retransmit)
        seq[w], prev[w] = seq[w] + 1, g
        (lost if lose else frames).append((port, f, (w, g, values)))

    values = {(w, g): rng.standard_normal(32) for w in range(3) for g in range(6)}
    # (worker, round) lost -> the round after which the worker sends it again (asked, or by its timer);
    # worker 0 loses two in a row: a nack for the second
    drop = {(1, 1): 2, (2, 2): 3, (0, 3): 5, (0, 4): 5}
    for g in range(6):
        for w in rng.permutation(3):
            send(int(w), g, values[int(w), g], lose=(int(w), g) in drop)
        for (w, gl), after in sorted(drop.items()):
            if after == g:
                send(w, gl, values[w, gl], retransmit=True)
    want = [sorted(sw.receive(port, f)) for port, f, _ in frames]
    nacks = [(p, proto.Ainic(fr[42:74])) for w in want for p, fr, _ in w
             if proto.Ainic(fr[42:74]).opcode == FrameOpcode.agg_nack]
    assert sorted((p, h.psn) for p, h in nacks) == [(0, 4), (1, 2), (2, 1)]
    # numbered with the results to their port: a nack's chunk follows the frame before it there
    for p, h in nacks:
        before = [proto.Ainic(fr[42:74]) for w in want for q, fr, _ in w if q == p]
        i = next(k for k, b in enumerate(before) if b.opcode == FrameOpcode.agg_nack and b.psn == h.psn)
        assert h.chunk == i and (i == 0 or h.reserved == before[i - 1].psn)
    assert sw.job_counters[0].completed == 6

    got = []
    _, stats = run(dut, sw, one_at_a_time([(port, f) for port, f, _ in frames], got), rng)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, (i, frames[i][2][:2])
    assert stats["jobs"][0] == (sw.job_counters[0].absorbed, sw.job_counters[0].completed, sw.job_counters[0].unicast)
    assert stats["nacks"][0] == sw.job_counters[0].nacks == 3


@pytest.mark.parametrize("dtype, codec", [("fp32", "none"), ("int32", "none"), ("fp32", "bf16")])
def test_all_ports_at_once_under_backpressure(dut, rng, dtype, codec):
    """Every worker sends all its packets at once (contributions of a window per worker, then the next
    packet of a slot after its result, as a worker does), with random backpressure on every output: every
    worker gets every result, each the golden sum of that packet, in whatever order the engines finish."""
    job = inn.Job(3, (1, 2, 0), 4, slot_base=0, dtype=dtype, codec=codec, packet=32)
    sw = model_switch([job])
    L = 7 * 32 + 5
    x = [(rng.standard_normal(L) * 1e3).astype(np.float32 if dtype == "fp32" else np.int32) for _ in range(3)]
    want = inn.allreduce(x, codec, dtype).view(np.uint32)[0]
    plans = inn.packets(L, 32, 4)

    def worker(w):
        async def go(bench, ctx):
            port = job.ports[w]
            for j, p in enumerate(plans):
                if j >= job.window:          # the slot's previous packet must have its result
                    need = plans[j - job.window].psn
                    while not any(proto.Ainic(f[42:74]).psn == need for f, _ in bench.out[port]):
                        await ctx.tick()
                await bench.send(ctx, port, contribution(sw, job, w, p.psn, x[w][p.offset:p.offset + p.count])[1])
        return go

    async def script(bench, ctx):
        pass

    bench, stats = run(dut, sw, script, rng, backpressure=0.4, workers=[worker(w) for w in range(3)])
    for w in range(3):
        frames = bench.out[job.ports[w]]
        assert len(frames) == len(plans), (w, len(frames))
        got = np.zeros(L, np.uint32)
        for f, err in frames:
            h = proto.Ainic(f[42:74])
            assert not err and h.opcode == FrameOpcode.aggregated and h.worker == w and h.dst_rank == w
            body = f[74:]
            bits = (np.frombuffer(body, np.uint32) if codec == "none"
                    else nm.as_bits(nm.decompress(body, codec, h.count)))
            got[h.offset:h.offset + h.count] = bits
        assert np.array_equal(got, want), w
    assert stats["jobs"][0] == (3 * len(plans), len(plans), 0)


@pytest.mark.parametrize("codec", ["none", "bfp8"])
def test_a_leaf_frame_by_frame_against_the_model(dut, rng, codec):
    """A leaf (docs/in_network.md, "Two levels"): members on ports 0 and 1, the spine on port 2. Complete
    rounds go up as the leaf's contributions, copies while the spine has not answered go up again, the
    spine's results (one a copy, one for a round not sent up, a NaN with a payload) are multicast to the
    members and answer their copies after; every frame out equals the model's, and so do the counters."""
    job = inn.Job(7, (1, 0), 2, slot_base=4, codec=codec, packet=32, up_port=2, up_job=9, up_worker=3)
    sw = model_switch([None, job])
    frames, spine_seq = [], 0

    def member(w, g, values, **changes):
        frames.append(contribution(sw, job, w, g, values, **changes))

    def spine(g, values, **changes):
        nonlocal spine_seq
        frames.append(spine_result(sw, job, g, values, spine_seq, **changes))
        spine_seq += 1

    for g in range(4):
        n = 32 if g < 3 else 13
        vals = {w: rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20) for w in (0, 1)}
        for w in rng.permutation(2):
            member(int(w), g, vals[int(w)])
        member(0, g, vals[0], retransmit=True)                 # a copy while the spine has not answered: up
        result = (rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20)).astype(np.float32)
        if g == 1 and codec == "none":
            result.view(np.uint32)[3] = 0x7F812345              # a NaN with a payload: taken as the rounder does
        spine(g, result)
        if g == 0:
            spine(g, result)                                    # a copy: dropped (duplicate)
        member(1, g, vals[1], retransmit=True)                  # answered here now (unicast)
    spine(3, np.ones(13), worker=2)                             # not the leaf's worker index
    spine(3, np.ones(13), job=10)                               # no leaf job for that spine job
    spine(5, np.ones(32))                                       # a round the leaf does not hold: stale
    frames.append(spine_result(sw, job, 2, np.ones(32), 9, opcode=FrameOpcode.agg_nack, count=0, payload=b""))
    frames.append((0, spine_result(sw, job, 2, np.ones(32), 9)[1]))    # on a member's port: dst_rank
    want = [sorted(sw.receive(port, f)) for port, f in frames]
    ups = [fr for w in want for p, fr, _ in w if p == 2]
    assert len(ups) == 8 and sw.job_counters[1].down == 4 and sw.job_counters[1].unicast == 4

    stats = same_frames_and_counters(dut, sw, frames, want, rng)
    assert stats["updown"] == [(c.up, c.down) for c in sw.job_counters]
    assert stats["job_drops"] == [c.drops for c in sw.job_counters]
    assert stats["parser"] == [{k: v for k, v in c.parser_drops.items() if v} for c in sw.port_counters]


def test_a_leaf_asks_member_0_for_what_its_trunk_lost(dut, rng):
    """The spine's frames to a leaf are numbered (docs/in_network.md, "Two levels"): a result that shows the
    one before it lost, and the spine's agg_nack (the leaf's partial lost on the way up; its own psn first,
    then the one a gap names), make the leaf ask its member 0 for that psn (an agg_nack on member 0's port,
    numbered there with the results), and member 0's copy sends the partial up again. Every frame out equals
    the model's, and so do the counters (``job_nacks``)."""
    job = inn.Job(7, (1, 0), 4, slot_base=4, packet=32, up_port=2, up_job=9, up_worker=3)
    sw = model_switch([None, job])
    frames = []
    vals = {(w, g): rng.standard_normal(32) for w in (0, 1) for g in range(4)}
    for g in range(4):
        for w in (1, 0):
            frames.append(contribution(sw, job, w, g, vals[w, g]))
    result = {g: rng.standard_normal(32).astype(np.float32) for g in range(4)}
    frames.append(spine_result(sw, job, 0, result[0], 0))
    frames.append(spine_result(sw, job, 2, result[2], 2, prev=1))        # frame 1 (packet 1's result) lost
    frames.append(contribution(sw, job, 0, 1, vals[0, 1], retransmit=True))    # member 0's copy: up again
    frames.append(spine_result(sw, job, 1, result[1], 3, prev=2))
    frames.append(spine_result(sw, job, 3, [], 4, opcode=FrameOpcode.agg_nack, count=0, payload=b"", prev=1))
    frames.append(contribution(sw, job, 0, 3, vals[0, 3], retransmit=True))
    frames.append(spine_result(sw, job, 3, result[3], 6, prev=0))          # frame 5 lost: it named packet 0
    frames.append(spine_result(sw, job, 3, result[3], 6, prev=0))          # a copy: no ask, a duplicate
    want = [sorted(sw.receive(port, f)) for port, f in frames]
    asks = [(i, p, proto.Ainic(fr[42:74])) for i, w in enumerate(want) for p, fr, _ in w
            if proto.Ainic(fr[42:74]).opcode == FrameOpcode.agg_nack]
    assert [(i, p, h.worker, h.job, h.psn) for i, p, h in asks] == [
        (9, 1, 0, 7, 1), (12, 1, 0, 7, 3), (14, 1, 0, 7, 0)]
    ups = [(i, proto.Ainic(fr[42:74]).psn) for i, w in enumerate(want) for p, fr, _ in w if p == 2]
    assert ups[-2:] == [(10, 1), (13, 3)] and sw.job_counters[1].nacks == 3

    stats = same_frames_and_counters(dut, sw, frames, want, rng)
    assert stats["nacks"] == [c.nacks for c in sw.job_counters]
    assert stats["updown"] == [(c.up, c.down) for c in sw.job_counters]
