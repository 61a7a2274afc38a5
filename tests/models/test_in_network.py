"""The in-network aggregation model (host_driver/models/in_network.py) against its own rules
(docs/in_network.md): the semantics from independent arithmetic, the decision table case by case,
arrival-order independence, and the worker/switch protocol under faults."""

from fractions import Fraction

import numpy as np
import pytest

from contract.enums import AggDrop, Codec, Dtype, FrameFlag, FrameOpcode, names
from contract.in_network import (NIC_FRAME_STORE_BYTES, SWITCH_RANK, FaultStream, frame_stride, frames_fit, link_seed,
                                 psn_newer, slot_of, threshold, xorshift32)
from host_driver.models import in_network as inn
from host_driver.models import numerics as nm
from host_driver.models import protocol as proto


def _bits(a):
    return np.asarray(a).view(np.uint32)


# -- semantics -------------------------------------------------------------------------------------------
def test_allreduce_is_the_exact_sum_rounded_once(rng):
    """fp32, no codec: each element is the correctly rounded exact sum (Fractions as the reference)."""
    x = [(rng.standard_normal(300) * 2.0 ** rng.integers(-30, 30, 300)).astype(np.float32) for _ in range(5)]
    x[1][:20] = -x[0][:20]                                   # exact cancellation
    got = inn.allreduce(x)
    assert got.shape == (5, 300) and all(np.array_equal(_bits(got[0]), _bits(r)) for r in got)
    for i in range(300):
        exact = sum(Fraction(float(a[i])) for a in x)
        want = np.float32(float(exact))                      # one rounding from the exact rational
        # float(Fraction) rounds to float64 first; that double rounding is exact here unless it hits a tie
        assert got[0][i] == want or abs(Fraction(float(got[0][i])) - exact) <= abs(Fraction(float(want)) - exact)


@pytest.mark.parametrize("codec", [c for c in names(Codec) if c != "none"])
def test_allreduce_with_a_codec_decodes_sums_and_encodes_once(rng, codec):
    x = [rng.standard_normal(1000).astype(np.float32) for _ in range(3)]
    dq = np.stack([_bits(nm.roundtrip(a, codec)) for a in x])
    want = _bits(nm.roundtrip(nm.from_bits(nm.exact_sum_f32(dq)), codec))
    got = inn.allreduce(x, codec)
    assert all(np.array_equal(_bits(r), want) for r in got)


def test_allreduce_int32_saturates_once():
    big = np.int32(2**31 - 1)
    x = [np.array([big, big, 5], np.int32), np.array([big, -big, -7], np.int32), np.array([-big, 0, 1], np.int32)]
    got = inn.allreduce(x, dtype="int32")[0]
    # pairwise saturating addition would give big + big -> big, then - big -> 0; the exact sum is big
    assert got.tolist() == [2**31 - 1, 0, -1]


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="codec must be 'none'"):
        inn.allreduce([np.zeros(4, np.int32)], "bfp8", "int32")
    with pytest.raises(ValueError, match="same number"):
        inn.allreduce([np.zeros(4, np.float32), np.zeros(5, np.float32)])
    with pytest.raises(ValueError, match="at most 16"):
        inn.allreduce([np.zeros(4, np.float32)] * 17)


# -- packets and slots -----------------------------------------------------------------------------------
def test_packets_cover_the_tensor_and_map_to_slots():
    plan = inn.packets(1000, 64, 4, first=2**32 - 3)           # psn wraps
    assert [p.count for p in plan] == [64] * 15 + [40]
    assert [p.offset for p in plan] == list(range(0, 1000, 64))
    assert [p.psn for p in plan[:4]] == [2**32 - 3, 2**32 - 2, 2**32 - 1, 0]
    assert all((p.slot, p.set) == slot_of(p.psn, 4) for p in plan)
    assert psn_newer(0, 2**32 - 1) and not psn_newer(2**32 - 1, 0) and not psn_newer(5, 5)
    with pytest.raises(ValueError, match="power of two"):
        inn.packets(100, 16, 3)


# -- the decision table ----------------------------------------------------------------------------------
def _contribution(worker, g, x, window=2, job=7, codec=Codec.none, dtype=Dtype.fp32, offset=None, count=None,
                  retransmit=False):
    slot, s = slot_of(g, window)
    payload = np.asarray(x, np.float32).tobytes()
    return inn.Agg(FrameOpcode.aggregate, job, worker, slot, s, g, 16 * g if offset is None else offset,
                   len(x) if count is None else count, codec, dtype, payload, retransmit)


def _switch(ports=(0, 2, 3), window=2):
    sw = inn.SwitchModel(4, slots=8)
    sw.configure(1, inn.Job(7, ports, window, slot_base=4, packet=16))
    return sw


def test_a_window_of_frames_fits_the_frame_store_by_its_stride():
    # 256 fp32 (1 KiB) at W = 512: 16 beats a frame, 128 of them fill the store exactly, at every width
    assert frame_stride(1024, 512) == 4 and frame_stride(1024, 64) == 7 and frame_stride(1, 512) == 0
    assert frame_stride(264, 512) == 3               # bfp8's 256 elements: 5 beats, kept at a stride of 8
    for width in (64, 512, 1024):
        assert frames_fit(128, 1024, width) and not frames_fit(128, 1025, width)
        assert frames_fit(64, 2048, width) and not frames_fit(128, 2048, width)
    assert NIC_FRAME_STORE_BYTES == 128 * 1024       # docs/in_network.md, "The worker"


def test_decision_table_case_by_case():
    sw = _switch()
    a, b, c = (np.full(16, v, np.float32) for v in (1.0, 2.0, 4.0))
    assert sw.contribute(0, _contribution(0, 0, a)) == []                     # new, not complete: absorb
    assert sw.contribute(0, _contribution(0, 0, a, retransmit=True)) == []    # copy of incomplete: drop
    assert sw.drops["duplicate"] == 1
    assert sw.contribute(2, _contribution(1, 0, b)) == []
    out = sw.contribute(3, _contribution(2, 0, c))                            # completes: multicast
    assert [p for p, _ in out] == [0, 2, 3] and [r.worker for _, r in out] == [0, 1, 2]
    for _, r in out:
        assert r.opcode == FrameOpcode.aggregated and r.psn == 0 and not r.retransmit
        assert np.frombuffer(r.payload, np.float32).tolist() == [7.0] * 16
    again = sw.contribute(2, _contribution(1, 0, b, retransmit=True))         # copy of complete: unicast
    assert len(again) == 1 and again[0][0] == 2 and again[0][1].retransmit and again[0][1].payload == out[0][1].payload
    jc = sw.job_counters[1]
    assert (jc.absorbed, jc.completed, jc.unicast) == (3, 1, 1)
    # packet 2 reuses slot 0 set 1, packet 4 slot 0 set 0 again (a new round: the old result goes)
    assert sw.contribute(0, _contribution(0, 2, a)) == []
    assert sw.contribute(0, _contribution(0, 4, a)) == []                     # set 0: a new round starts
    assert sw.contribute(0, _contribution(0, 0, a)) == []                     # psn 0 is older now
    assert sw.drops["stale"] == 1
    assert sw.contribute(2, _contribution(1, 6, b)) == []                     # set 0 is mid-round: busy
    assert sw.drops["busy"] == 1
    assert sw.contribute(2, _contribution(1, 4, b, offset=999)) == []         # not the round's offset
    assert sw.drops["count"] == 1


@pytest.mark.parametrize("case, reason", [
    (dict(opcode=FrameOpcode.aggregated), AggDrop.opcode),
    (dict(job=8), AggDrop.unknown_job),
    (dict(worker=3), AggDrop.not_member),
    (dict(port=2), AggDrop.not_member),                 # worker 0 is behind port 0
    (dict(dtype=Dtype.int32), AggDrop.dtype),
    (dict(codec=Codec.fp16), AggDrop.dtype),
    (dict(slot=2), AggDrop.slot_range),
    (dict(count=17), AggDrop.count),
])
def test_unexpected_contributions_are_dropped_and_counted_without_touching_a_slot(case, reason):
    sw = _switch()
    port = case.pop("port", 0)
    good = _contribution(0, 0, np.ones(16, np.float32))
    bad = inn.Agg(**{**good.__dict__, **case})
    assert sw.contribute(port, bad) == []
    assert sw.drops[reason.name] == 1 and sum(sw.drops.values()) == 1
    assert all(s.psn is None for pair in sw.pool for s in pair)
    if reason not in (AggDrop.opcode, AggDrop.unknown_job):
        assert sw.job_counters[1].drops[reason.name] == 1


def test_job_table_refuses_overlaps_and_clears_slots_when_written():
    sw = inn.SwitchModel(4, slots=8)
    sw.configure(0, inn.Job(1, (0, 1), 4, slot_base=0))
    with pytest.raises(ValueError, match="overlap"):
        sw.configure(1, inn.Job(2, (2, 3), 4, slot_base=2))
    with pytest.raises(ValueError, match="already entry"):
        sw.configure(1, inn.Job(1, (2, 3), 4, slot_base=4))
    with pytest.raises(ValueError, match="beyond the pool"):
        sw.configure(1, inn.Job(2, (2, 3), 8, slot_base=4))
    with pytest.raises(ValueError, match="distinct ports"):
        inn.Job(2, (2, 2), 4)
    sw.contribute(0, inn.Agg(FrameOpcode.aggregate, 1, 0, 0, 0, 0, 0, 16, 0, 0, bytes(64)))
    assert sw.pool[0][0].psn == 0
    sw.configure(0, inn.Job(1, (0, 1), 4, slot_base=0))
    assert sw.pool[0][0].psn is None


def test_results_do_not_depend_on_arrival_order(rng):
    """Every permutation of the contributions (and copies of them) gives the same result bytes."""
    x = [(rng.standard_normal(16) * 2.0 ** rng.integers(-60, 60, 16)).astype(np.float32) for _ in range(4)]
    seen = set()
    for trial in range(30):
        sw = inn.SwitchModel(4, slots=2)
        sw.configure(0, inn.Job(7, (0, 1, 2, 3), 1, packet=16))
        order = list(rng.permutation(4)) + list(rng.integers(0, 4, 3))         # 3 extra copies
        rng.shuffle(order)
        out = []
        for w in order:
            out += sw.contribute(w, _contribution(w, 0, x[w], window=1, offset=0))
        payloads = {r.payload for _, r in out}
        assert len(payloads) == 1
        seen |= payloads
    assert len(seen) == 1
    assert np.array_equal(np.frombuffer(seen.pop(), np.uint32), _bits(inn.allreduce(x)[0]))


# -- frames ----------------------------------------------------------------------------------------------
def test_frames_forward_by_mac_and_results_reach_workers():
    sw = inn.SwitchModel(3, slots=4)
    sw.configure(0, inn.Job(5, (0, 1), 2, packet=16))
    # not for the switch: forwarded to the port of its MAC, unknown MACs dropped
    ring = proto.build_frame(bytes(64), dst_mac=sw.port_macs[2], src_mac=sw.port_macs[0])
    assert sw.receive(0, ring, mac_error=True) == [(2, ring, True)]
    assert sw.receive(0, proto.build_frame(bytes(64), dst_mac="02:00:00:00:99:99")) == []
    assert sw.port_counters[0].unknown_mac == 1 and sw.port_counters[0].forwarded == 1
    # for the switch: parsed as the NIC's parser does (rank SWITCH_RANK), then the decision table
    outs = []
    for w in (0, 1):
        a = _contribution(w, 0, np.full(16, 1.5, np.float32), window=2, job=5, offset=0)
        f = a.frame(sw.port_macs[w], sw.mac, sw.port_ips[w], sw.ip)
        assert sw.receive(w, f[:-1]) == [] and sw.port_counters[w].parser_drops["ip_length"] == 1
        outs += sw.receive(w, f)
    assert [p for p, _, _ in outs] == [0, 1]
    for p, f, err in outs:
        v = proto.check_frame(f, nic_mac=sw.port_macs[p], nic_ip=sw.port_ips[p], rank=p)
        assert v.accepted and not err, v
        h = v.header
        assert (h["opcode"], h["src_rank"], h["dst_rank"], h["worker"], h["job"]) == (FrameOpcode.aggregated, SWITCH_RANK, p, p, 5)
        assert np.frombuffer(f[-64:], np.float32).tolist() == [3.0] * 16
    assert [c.frames_out for c in sw.port_counters] == [1, 1, 1]          # a result each, the forwarded frame


def test_result_frame_flags():
    r = inn.Agg(FrameOpcode.aggregated, 1, 0, 3, 1, 9, 0, 16, 0, 0, bytes(64), retransmit=True)
    assert r.flags == FrameFlag.shadow | FrameFlag.retransmit


# -- fault injection -------------------------------------------------------------------------------------
def test_fault_stream_is_the_documented_generator():
    assert xorshift32(1) == 270369 and xorshift32(270369) == 67634689
    s = FaultStream(1, drop=threshold(0.5))
    first = s.next()
    assert first.drop == ((270369 & 0xFFFF) < 32768)
    assert link_seed(0, 0) != 0 and link_seed(1, 0) != link_seed(1, 1)
    with pytest.raises(ValueError):
        threshold(1.5)


@pytest.mark.parametrize("p", [0.01, 0.05])
def test_fault_rates_are_what_was_asked(p):
    s = FaultStream(link_seed(3, 1), threshold(p), threshold(p), threshold(p))
    n = 200_000
    d = [s.next() for _ in range(n)]
    for name, want in (("drop", p), ("corrupt", p * (1 - p)), ("duplicate", p * (1 - p))):
        rate = sum(getattr(x, name) for x in d) / n
        assert abs(rate - want) < 5 * (want / n) ** 0.5 + 1e-4, (name, rate, want)


# -- the protocol end to end -----------------------------------------------------------------------------
@pytest.mark.parametrize("codec, dtype", [("none", "fp32"), ("bfp8", "fp32"), ("fp16", "fp32"), ("none", "int32")])
def test_simulated_allreduce_is_bit_exact_without_faults(rng, codec, dtype):
    n, L = 3, 1001                                         # L odd; 16 packets of 64 > 2 x window 4
    x = [(rng.standard_normal(L) * 1000).astype(np.float32 if dtype == "fp32" else np.int32) for _ in range(n)]
    run = inn.simulate(x, codec, dtype, packet=64, window=4)
    assert run.status == ["ok"] * n
    want = inn.allreduce(x, codec, dtype)
    assert np.array_equal(_bits(run.results), _bits(want))
    assert [u.frames for u in run.uplinks] == [16] * n and [d.frames for d in run.downlinks] == [16] * n
    assert all(w.retransmitted == 0 and w.duplicates == 0 for w in run.workers)
    assert run.cycles >= inn.bound_cycles(L, 64, codec, 40.0)


def test_one_element_and_one_worker(rng):
    x = [rng.standard_normal(1).astype(np.float32) for _ in range(2)]
    run = inn.simulate(x, packet=16, window=1)
    assert np.array_equal(_bits(run.results), _bits(inn.allreduce(x)))
    solo = inn.simulate([np.arange(40, dtype=np.float32)], packet=16, window=2)
    assert solo.status == ["ok"] and np.array_equal(solo.results[0], np.arange(40, dtype=np.float32))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_faults_change_the_traffic_never_the_result(rng, seed):
    n, L = 4, 3000
    x = [rng.standard_normal(L).astype(np.float32) for _ in range(n)]
    want = _bits(inn.allreduce(x, "bfp8"))
    run = inn.simulate(x, "bfp8", packet=64, window=4, faults=inn.Faults(0.05, 0.05, 0.05, seed), timeout=2000)
    assert run.status == ["ok"] * n
    assert np.array_equal(_bits(run.results), want)
    links = run.uplinks + run.downlinks
    assert all(sum(getattr(c, k) for c in links) > 0 for k in ("dropped", "duplicated", "corrupted"))
    assert sum(w.retransmitted for w in run.workers) > 0 and sum(w.duplicates for w in run.workers) > 0
    assert run.switch.drops["duplicate"] + run.switch.job_counters[0].unicast > 0


def test_a_lost_multicast_is_recovered_by_unicast(rng):
    """Drop only results (downlinks): workers resend, the switch answers copies of complete rounds."""
    x = [rng.standard_normal(640).astype(np.float32) for _ in range(3)]
    faults = inn.Faults(drop=0.2, seed=9)
    run = inn.simulate(x, packet=64, window=2, faults=faults, timeout=1000)
    assert run.status == ["ok"] * 3 and np.array_equal(_bits(run.results), _bits(inn.allreduce(x)))
    assert sum(d.dropped for d in run.downlinks) > 0 and run.switch.job_counters[0].unicast > 0


def _result_for(w, psn, seq, prev):
    """The switch's result (zeros) for worker ``w``'s packet ``psn`` of job 3, numbered ``seq``, naming ``prev``."""
    p = w.plan[psn]
    bits = np.zeros(p.count, np.uint32)
    return inn.Agg(FrameOpcode.aggregated, 3, 0, p.slot, p.set, psn, p.offset, p.count, 0, 0, bits.tobytes(),
                   seq=seq, prev=prev)


def test_a_worker_resends_what_a_nack_or_a_result_gap_asks_for(rng):
    """An agg_nack for the packet in flight in its slot sends it again at once; a frame from the switch
    (result or agg_nack) whose number shows the one before it lost sends the lost one's contribution again
    (the psn it names: the switch answers with the stored result, or absorbs it), after a gap of two as after
    one; a nack or a gap naming a packet no longer in flight sends nothing. First sends go in order, each once
    its slot is free: a result that frees a slot ahead of the next packet's sends nothing."""
    job = inn.Job(3, (0, 1), 4, packet=16)
    w = inn.WorkerModel(0, job, np.arange(160, dtype=np.uint32))
    first = w.start(0)
    assert [(a.seq, a.prev) for a in first] == [(0, 0), (1, 0), (2, 1), (3, 2)]   # numbered, the psn before

    def result(psn, seq, prev):
        return _result_for(w, psn, seq, prev)

    def nack(psn, seq=0, prev=0):
        p = w.plan[psn]
        return inn.Agg(FrameOpcode.agg_nack, 3, 0, p.slot, p.set, psn, 0, 0, 0, 0, b"", seq=seq, prev=prev)

    again = w.receive(nack(2), 10)
    assert [(a.psn, a.retransmit, a.seq, a.prev) for a in again] == [(2, True, 4, 3)]
    assert w.receive(nack(9), 11) == []                             # not in flight
    out = w.receive(result(0, 0, 0), 20)                            # psn 0's result: psn 4 goes out
    assert [a.psn for a in out] == [4]
    out = w.receive(result(3, 2, 1), 30)                            # seq 1 (psn 1) lost: psn 1 again; 7 waits
    assert [(a.psn, a.retransmit) for a in out] == [(1, True)]      # for 5, whose slot psn 1 holds
    out = w.receive(result(2, 5, 9), 40)                            # a gap of two naming psn 9: not in
    assert out == []                                                # flight, nothing asked; 6 waits
    out = w.receive(result(1, 6, 2), 50)                            # psn 1's result: 5, 6 and 7 go, in order
    assert [(a.psn, a.retransmit) for a in out] == [(5, False), (6, False), (7, False)]
    out = w.receive(nack(5, 9, 6), 60)                              # a nack after two lost, the one before
    assert [(a.psn, a.retransmit) for a in out] == [(5, True), (6, True)]   # it naming psn 6: both again
    out = w.receive(result(5, 11, 7), 70)                           # a lost frame, psn 7's: 7 again (8 waits
    assert [(a.psn, a.retransmit) for a in out] == [(7, True)]      # for 4's slot: nothing launches)
    assert w.counters.asked == 5


def test_a_timer_runs_out_only_once_the_results_stop():
    """A packet's timer (200 cycles) that runs out while results still come (one every 20 cycles: less than
    the pause of 200 >> PAUSE_SHIFT = 25 that lets a timer run out) sends nothing: a result late behind the
    others' is on its way, and a loss would show in a later frame's number. Once the results stop, every
    packet whose timer ran out goes again, 25 cycles after the last result."""
    assert 200 >> inn.PAUSE_SHIFT == 25
    job = inn.Job(3, (0, 1), 4, packet=16)
    w = inn.WorkerModel(0, job, np.arange(64, dtype=np.uint32), timeout=200)
    assert [a.psn for a in w.start(0)] == [0, 1, 2, 3]              # timers due at 200
    for psn, t in ((0, 180), (1, 200)):
        assert w.receive(_result_for(w, psn, psn, max(psn - 1, 0)), t) == []
        assert w.next_timer() == t + 25 and w.tick(t + 24) == []
    assert w.receive(_result_for(w, 2, 2, 1), 220) == []
    assert w.next_timer() == 245 and w.tick(244) == []
    assert [(a.psn, a.retransmit) for a in w.tick(245)] == [(3, True)]
    assert w.next_timer() == 245 + 400                              # backed off: its wait doubled


def test_a_packet_overtaken_goes_at_its_timer():
    """A later packet's result has come (results come in order, so a late one would have come first): a
    packet whose timer ran out goes again at once, though results still come; one not overtaken waits for
    the pause."""
    job = inn.Job(3, (0, 1), 4, packet=16)
    w = inn.WorkerModel(0, job, np.arange(64, dtype=np.uint32), timeout=200)
    assert [a.psn for a in w.start(0)] == [0, 1, 2, 3]              # timers due at 200
    assert w.receive(_result_for(w, 2, 0, 0), 190) == []            # overtakes 0 and 1, not 3
    assert w.next_timer() == 200
    assert [(a.psn, a.retransmit) for a in w.tick(200)] == [(0, True), (1, True)]
    assert w.next_timer() == 215 and w.tick(214) == []              # 3: the pause (25 after 190)
    assert [a.psn for a in w.tick(215)] == [3]


def test_losses_are_asked_for_not_waited_out(rng):
    """At N = 8 with 3 % of frames lost both ways, most losses are recovered by asking (a nack from the
    switch, or a worker that sees a gap in its results): only the losses no later frame on their link
    reveals (the last ones of the run) wait for a timer. The sum is exact."""
    x = [rng.standard_normal(64 * 256).astype(np.float32) for _ in range(8)]
    run = inn.simulate(x, "bfp8", window=8, faults=inn.Faults(drop=0.03, seed=4), timeout=20_000)
    assert run.status == ["ok"] * 8 and np.array_equal(_bits(run.results), _bits(inn.allreduce(x, "bfp8")))
    lost = sum(c.dropped for c in run.uplinks + run.downlinks)
    asked = sum(w.asked for w in run.workers)
    # (a worker whose next packet waits for its slot sends nothing meanwhile, so a loss just before such a
    # wait is not revealed by a next frame: 0.81 to 0.96 of the losses are asked for over seeds 1 to 8, with
    # agg_nacks numbered and gaps of two or more asked for; 0.69 to 0.89 before)
    assert lost > 30 and run.switch.job_counters[0].nacks > 10 and asked >= 0.75 * lost


def test_a_dead_worker_ends_in_timeout_not_a_hang(rng):
    x = [rng.standard_normal(256).astype(np.float32) for _ in range(3)]
    run = inn.simulate(x, packet=64, window=2, dead=(2,), timeout=500, deadline=20_000)
    assert run.status == ["timeout"] * 3
    assert 20_000 <= run.cycles < 40_000
    # the live workers kept resending with back-off (500, 1000, 2000, ... capped at 500 << 4)
    assert 0 < run.workers[0].retransmitted < 2 * 20_000 // 500


def test_a_late_worker_only_delays(rng):
    """A worker that starts 50,000 cycles after the others: they resend into incomplete rounds meanwhile
    (dropped as duplicates), and the result is the same."""
    x = [rng.standard_normal(2048).astype(np.float32) for _ in range(3)]
    run = inn.simulate(x, packet=64, window=4, late={1: 50_000}, timeout=4096)
    assert run.status == ["ok"] * 3 and np.array_equal(_bits(run.results), _bits(inn.allreduce(x)))
    assert run.cycles > 50_000 and run.switch.drops["duplicate"] > 0 and run.workers[1].retransmitted == 0


def test_two_jobs_at_once_each_bit_exact(rng):
    """Two jobs with disjoint workers share the switch (slot ranges 0-3 and 4-7), each its own sum."""
    x = [rng.standard_normal(700).astype(np.float32) for _ in range(5)]
    run = inn.simulate(x, packet=64, window=4, jobs=[(0, 3), (4, 1, 2)], faults=inn.Faults(0.02, 0.02, 0.02, 5))
    assert run.status == ["ok"] * 5
    a, b = inn.allreduce([x[0], x[3]]), inn.allreduce([x[4], x[1], x[2]])
    for r, want in ((0, a), (3, a), (1, b), (2, b), (4, b)):
        assert np.array_equal(_bits(run.results[r]), _bits(want[0])), r
    assert [j.slot_base for j in run.jobs] == [0, 4] and all(c.completed == 11 for c in run.switch.job_counters)


def test_recorded_frames_are_what_the_links_took(rng):
    x = [rng.standard_normal(100).astype(np.float32) for _ in range(2)]
    run = inn.simulate(x, packet=32, window=2, record=True)
    up = [a for _, link, a in run.frames if link % 2 == 0]
    down = [a for _, link, a in run.frames if link % 2 == 1]
    assert len(up) == sum(u.frames for u in run.uplinks) == 8 and len(down) == 8
    assert {a.opcode for a in up} == {FrameOpcode.aggregate} and {a.opcode for a in down} == {FrameOpcode.aggregated}


def test_the_chosen_window_covers_the_round_trip():
    """The window a cluster picks holds three round trips of packets (the slower of link and datapath: a
    loss's recovery takes two more), within the pool the jobs share and less than the retransmission timer's
    worth of packets: 64 slots for fp32 at 80 Gb/s, 128 for bfp8 at W = 1024 (its frames are a third as
    long), 64 at W = 512 (the datapath's 16 cycles a packet: 128 of them are the timer), halved for two jobs
    in a pool of 128."""
    assert inn.chosen_window(512, "none", 256, 40.0, 125, pool=128) == 64
    assert inn.chosen_window(1024, "bfp8", 256, 40.0, 125, pool=128) == 128
    assert inn.chosen_window(512, "bfp8", 256, 40.0, 125, pool=128) == 64      # 128 x 16 cycles: the timer
    assert inn.chosen_window(512, "bfp8", 256, 40.0, 125, pool=128, timeout=4096) == 128
    # a switch at twice the NICs' width passes the window in half the time: no storm to fear at 128
    assert inn.chosen_window(512, "bfp8", 256, 40.0, 125, pool=128, speedup=2) == 128
    assert inn.chosen_window(512, "none", 256, 40.0, 125, pool=128, speedup=2) == 64      # the round trip
    assert inn.chosen_window(1024, "bfp8", 256, 40.0, 125, jobs=2, pool=128) == 64
    assert inn.chosen_window(64, "bfp8", 256, 40.0, 125) == 32             # W = 64: the datapath binds
    # a tree: two round trips' worth, a leaf's result bus taking a packet's time twice; at twice the NICs'
    # width, once
    assert inn.chosen_window(512, "none", 256, 40.0, 125, pool=128, leaves=2, timeout=4096) == 64
    assert inn.chosen_window(512, "none", 256, 40.0, 125, pool=128, leaves=2, timeout=4096, speedup=2) == 128
    # at W = 64 a leaf's bus takes 256 cycles a packet, the NIC 128: the window queues whole at the leaf, and the
    # timer holds it below the default (one switch keeps the default: its bus keeps up with the NICs)
    assert inn.chosen_window(64, "bfp8", 256, 40.0, 125, leaves=2, timeout=4096) == 8
    assert inn.chosen_window(64, "bfp8", 256, 40.0, 125, leaves=2, timeout=4096, speedup=2) == 32


def test_the_chosen_timer_outlasts_the_window():
    """Where the default window takes the timer or more to pass the switch (one switch at W = 64: 32 packets
    of 128 cycles), the chosen timer is doubled past it; elsewhere it is the default (a tree's, for a tree)."""
    assert inn.chosen_timeout(64, "bfp8", 256, 40.0, 32) == 8192
    assert inn.chosen_timeout(64, "bfp8", 256, 40.0, 32, speedup=2) == 4096
    assert inn.chosen_timeout(64, "bfp8", 256, 40.0, 8, leaves=2) == inn.TREE_RETRANSMIT_TIMEOUT
    assert inn.chosen_timeout(512, "bfp8", 256, 40.0, 64) == inn.RETRANSMIT_TIMEOUT
    assert inn.chosen_timeout(512, "none", 256, 40.0, 64, leaves=2) == inn.TREE_RETRANSMIT_TIMEOUT
    for w, c in [(64, "none"), (512, "bfp8"), (1024, "bfp8")]:
        for leaves in (None, 2):
            win = inn.chosen_window(w, c, 256, 40.0, 125, pool=128, leaves=leaves,
                                    timeout=inn.TREE_RETRANSMIT_TIMEOUT if leaves else inn.RETRANSMIT_TIMEOUT)
            t = inn.chosen_timeout(w, c, 256, 40.0, win, leaves=leaves)
            per = max((74 + nm.codec_bytes(c, 256) + 24) / 40.0, (2 if leaves else 1) * 256 / (w // 32))
            assert win * per < t
    for w, c in [(1024, "none"), (512, "none"), (512, "fp16")]:
        win = inn.chosen_window(w, c, 256, 40.0, 125)
        per = max((74 + nm.codec_bytes(c, 256) + 24) / 40.0, 256 / (w // 32))
        covers = win * per >= 3 * (250 + inn.ROUND_TRIP_EXTRA) > win / 2 * per
        assert win * per < inn.RETRANSMIT_TIMEOUT and (covers or win == 32 or 2 * win * per >= inn.RETRANSMIT_TIMEOUT)


# -- two levels: leaf switches and a spine ---------------------------------------------------------------
def test_tree_groups_split_the_ranks_evenly():
    assert inn.tree_groups(8, 2) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert inn.tree_groups(7, 3) == [(0, 1, 2), (3, 4), (5, 6)]
    for bad in (1, 9, 2.0, True):
        with pytest.raises(ValueError, match="leaves must be"):
            inn.tree_groups(8, bad)


@pytest.mark.parametrize("codec", names(Codec))
def test_a_tree_rounds_once_per_level(rng, codec):
    """Leaf k's partial is what one switch gives its members; the spine sums the partials the same way.
    Each level is independent of order: permuting the ranks within a leaf changes nothing."""
    x = [(rng.standard_normal(512) * 2.0 ** rng.integers(-8, 8, 512)).astype(np.float32) for _ in range(7)]
    got = inn.allreduce(x, codec, leaves=3)
    partials = [_bits(inn.allreduce([x[r] for r in g], codec)[0]) for g in inn.tree_groups(7, 3)]
    want = _bits(inn.allreduce([nm.from_bits(p) for p in partials], codec)[0])
    assert all(np.array_equal(_bits(r), want) for r in got)
    shuffled = [x[2], x[0], x[1], x[4], x[3], x[6], x[5]]
    assert np.array_equal(_bits(inn.allreduce(shuffled, codec, leaves=3)), _bits(got))
    if codec == "none":             # two roundings: not the flat sum in general
        assert not np.array_equal(_bits(got[0]), _bits(inn.allreduce(x, codec)[0]))


@pytest.mark.parametrize("codec", names(Codec))
def test_a_codec_reencodes_its_own_output_unchanged(rng, codec):
    """A leaf takes the spine's result as values and sends it on encoded again: Q(D(q)) = q must hold for
    every q the switch makes (blocks of every magnitude, zeros, subnormals, Inf and NaN)."""
    x = (rng.standard_normal(4096) * 2.0 ** rng.integers(-140, 120, 4096)).astype(np.float32)
    x[:16] = 0
    x[16:32] = np.float32(1e-40)
    x[32], x[48] = np.inf, np.nan
    q = nm.compress(x, codec)
    assert nm.compress(nm.decompress(q, codec, x.size), codec) == q


def _leaf(window=2):
    """A leaf: workers on ports 0 and 1, its trunk on port 2 (worker 3 of spine job 9)."""
    sw = inn.SwitchModel(3, slots=4)
    sw.configure(0, inn.Job(7, (0, 1), window, packet=16, up_port=2, up_job=9, up_worker=3))
    return sw


def _from_spine(g, values, seq, prev=0, window=2, opcode=FrameOpcode.aggregated, job=9, worker=3):
    slot, s = slot_of(g, window)
    payload = np.asarray(values, np.float32).tobytes() if opcode == FrameOpcode.aggregated else b""
    return inn.Agg(opcode, job, worker, slot, s, g, 16 * g, 16, Codec.none, Dtype.fp32, payload, seq=seq, prev=prev)


def test_a_leaf_sends_its_round_up_and_multicasts_the_spines_result():
    sw = _leaf()
    a, b = np.full(16, 1.0, np.float32), np.full(16, 2.0, np.float32)
    assert sw.contribute(0, _contribution(0, 0, a)) == []
    up = sw.contribute(1, _contribution(1, 0, b))
    assert [p for p, _ in up] == [2]                                        # the partial, to the spine only
    u = up[0][1]
    assert (u.opcode, u.job, u.worker, u.psn, u.retransmit) == (FrameOpcode.aggregate, 9, 3, 0, False)
    assert np.frombuffer(u.payload, np.float32).tolist() == [3.0] * 16
    # a member's resend while the spine has not answered: the partial goes up again (a resend)
    again = sw.contribute(0, _contribution(0, 0, a, retransmit=True))
    assert [p for p, _ in again] == [2] and again[0][1].retransmit and again[0][1].payload == u.payload
    assert again[0][1].seq == u.seq + 1 and again[0][1].prev == 0          # numbered on the trunk
    # the spine's result: multicast to the members, kept; a second copy is dropped
    out = sw.contribute(2, _from_spine(0, np.full(16, 10.0), seq=0))
    assert [p for p, _ in out] == [0, 1] and [r.worker for _, r in out] == [0, 1]
    assert all(r.job == 7 and r.opcode == FrameOpcode.aggregated and
               np.frombuffer(r.payload, np.float32).tolist() == [10.0] * 16 for _, r in out)
    assert sw.contribute(2, _from_spine(0, np.full(16, 10.0), seq=1)) == [] and sw.drops["duplicate"] == 1
    # now a member's resend is answered here, with the spine's result
    uni = sw.contribute(1, _contribution(1, 0, b, retransmit=True))
    assert [p for p, _ in uni] == [1] and uni[0][1].retransmit and uni[0][1].payload == out[0][1].payload
    jc = sw.job_counters[0]
    assert (jc.absorbed, jc.completed, jc.up, jc.down, jc.unicast) == (2, 1, 2, 1, 1)


def _asks(out):
    """The agg_nacks among a switch's frames: (port, worker, psn)."""
    return [(p, r.worker, r.psn) for p, r in out if r.opcode == FrameOpcode.agg_nack]


def test_a_spines_nack_makes_the_leaf_ask_its_member_0_whose_copy_sends_the_partial_up_again():
    sw = _leaf(window=4)
    for w in (0, 1):
        sw.contribute(w, _contribution(w, 1, np.ones(16, np.float32), window=4))
    # the spine lacks the partial of packet 1: the leaf asks member 0 (port 0) for its contribution of it
    out = sw.contribute(2, _from_spine(1, [], seq=0, window=4, opcode=FrameOpcode.agg_nack))
    assert _asks(out) == [(0, 0, 1)] and len(out) == 1
    nack = out[0][1]
    assert (nack.job, nack.slot, nack.set, nack.seq) == (7, 1, 0, 0)        # the leaf's job, numbered to port 0
    assert sw.drops["opcode"] == 0 and sw.job_counters[0].nacks == 1 and sw.job_counters[0].up == 1
    # the member's copy: the partial goes up again
    out = sw.contribute(0, _contribution(0, 1, np.ones(16, np.float32), window=4, retransmit=True))
    assert [(p, r.opcode, r.psn, r.retransmit) for p, r in out] == [(2, FrameOpcode.aggregate, 1, True)]


def test_a_gap_in_the_spines_frames_makes_the_leaf_ask_for_the_one_lost():
    """The spine's frames to the leaf are numbered: a result (or an agg_nack) that shows the one before it
    lost makes the leaf ask member 0 for the lost frame's psn (the answer to a lost result and to a lost
    agg_nack alike); an agg_nack that shows a loss asks for its own psn first. A copy asks for nothing."""
    sw = _leaf(window=4)
    for g in (0, 1, 2):
        for w in (0, 1):
            sw.contribute(w, _contribution(w, g, np.ones(16, np.float32), window=4))
    out = sw.contribute(2, _from_spine(0, np.full(16, 2.0), seq=0, window=4))
    assert _asks(out) == [] and [p for p, _ in out] == [0, 1]
    # frame 1 (the result of packet 1) lost: frame 2, the result of packet 2, names it
    out = sw.contribute(2, _from_spine(2, np.full(16, 2.0), seq=2, prev=1, window=4))
    assert _asks(out) == [(0, 0, 1)] and [p for p, r in out if r.opcode == FrameOpcode.aggregated] == [0, 1]
    assert sw.contribute(2, _from_spine(2, np.full(16, 2.0), seq=2, prev=1, window=4)) == []     # a copy
    assert sw.drops["duplicate"] == 1
    # an agg_nack for packet 2 that shows frame 3 lost (it named packet 0): packet 2 first, then packet 0
    out = sw.contribute(2, _from_spine(2, [], seq=4, prev=0, window=4, opcode=FrameOpcode.agg_nack))
    assert _asks(out) == [(0, 0, 2), (0, 0, 0)] and sw.job_counters[0].nacks == 3
    # member 0's copy of packet 1 (whose result was lost): the partial goes up again
    out = sw.contribute(0, _contribution(0, 1, np.ones(16, np.float32), window=4, retransmit=True))
    assert [(p, r.opcode, r.psn) for p, r in out] == [(2, FrameOpcode.aggregate, 1)]
    # an agg_nack on a member's port is still no frame for a switch
    assert sw.contribute(1, _from_spine(1, [], seq=0, window=4, opcode=FrameOpcode.agg_nack)) == []
    assert sw.drops["opcode"] == 1


@pytest.mark.parametrize("case, reason", [
    (dict(port=1), AggDrop.opcode),                     # a result on a member's port: no spine there
    (dict(job=8), AggDrop.unknown_job),
    (dict(worker=2), AggDrop.not_member),
    (dict(g=1), AggDrop.stale),                         # a round the leaf has not sent up
])
def test_unexpected_results_from_the_spine_are_dropped_and_counted(case, reason):
    sw = _leaf()
    for w in (0, 1):
        sw.contribute(w, _contribution(w, 0, np.ones(16, np.float32)))
    port = case.pop("port", 2)
    a = _from_spine(case.pop("g", 0), np.ones(16), seq=0, **case)
    assert sw.contribute(port, a) == [] and sw.drops[reason.name] == 1
    assert sw.pool[0][0].result is None


def test_a_leafs_job_needs_its_up_port_apart_from_its_workers():
    with pytest.raises(ValueError, match="up port"):
        inn.Job(1, (0, 1), 2, up_port=1)
    with pytest.raises(ValueError, match="up port 5 does not exist"):
        inn.SwitchModel(3).configure(0, inn.Job(1, (0, 1), 2, up_port=5))


def test_a_leaf_parses_the_spines_frames_as_its_worker():
    """The spine addresses its results to the leaf's worker index in its job (dst_rank), not SWITCH_RANK."""
    sw = _leaf()
    for w in (0, 1):
        sw.contribute(w, _contribution(w, 0, np.ones(16, np.float32)))
    f = _from_spine(0, np.full(16, 4.0), seq=0).frame("02:00:00:00:00:fe", sw.mac, "10.0.1.254", sw.ip)
    outs = sw.receive(2, f)
    assert [p for p, _, _ in outs] == [0, 1]
    assert sw.receive(0, f) == [] and sw.port_counters[0].parser_drops["dst_rank"] == 1


@pytest.mark.parametrize("codec", ["none", "bfp8"])
def test_a_tree_is_bit_exact_under_faults(rng, codec):
    x = [rng.standard_normal(3000).astype(np.float32) for _ in range(6)]
    want = _bits(inn.allreduce(x, codec, leaves=2))
    clean = inn.simulate(x, codec, window=8, leaves=2)
    assert clean.status == ["ok"] * 6 and np.array_equal(_bits(clean.results), want)
    assert [leaf.job_counters[0].up for leaf in clean.leaves] == [12, 12] and sum(w.retransmitted for w in clean.workers) == 0
    trunk_losses = 0
    for seed in (1, 2, 3):
        r = inn.simulate(x, codec, window=8, leaves=2, faults=inn.Faults(drop=0.05, dup=0.02, corrupt=0.02, seed=seed))
        assert r.status == ["ok"] * 6 and np.array_equal(_bits(r.results), want)
        trunk_losses += sum(c.dropped + c.corrupted for c in r.trunk_up + r.trunk_down)
    assert trunk_losses > 0                                                 # the trunks lost frames too
    with pytest.raises(ValueError, match="not both"):
        inn.simulate(x, leaves=2, jobs=[[0, 1, 2], [3, 4, 5]])
