"""The ring collectives through the RTL: N NICs in the cluster bench, results bit-exact with the golden model.

Each pytest item runs a list of jobs in one simulation (``host_driver/sim/cluster_job.py``); afterwards every
rank's result is compared bit for bit with ``host_driver.models.allreduce`` (allreduce, reduce_scatter or allgather:
the model backend), and
the links' frame and byte counts and each NIC's completion with the model's traffic. Sizes are small
(hundreds to a few thousand elements, P = 64) so that every case finishes in seconds on Icarus too; the
1M-element runs are in ``make bench`` and ``make demo``.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.l2 import Ether

from contract import credits
from contract.enums import Codec, Opcode, names
from contract.link import ACK_DELAY
from host_driver.models import allreduce as ar
from host_driver.models.protocol import Ainic
from host_driver.sim.cluster import HEADER, MODEL_OPS, Cluster, link_rate_fixed
from host_driver.sim.runner import run, selected_sims

W = 64
P = 64
CODECS = names(Codec)


def inputs(rng, n, L, dtype, extreme=False):
    if dtype == "int32":
        hi = 2**31 - 1 if extreme else 1000
        return rng.integers(-hi, hi, (n, L), dtype=np.int32, endpoint=True)
    x = (rng.standard_normal((n, L)) * np.exp(rng.uniform(-8, 8, (n, L)))).astype(np.float32)
    return x


def job(name, n, L, codec="none", dtype="fp32", lag=4, repeats=1, memory=None, link_latency=40, seed=0,
        op="allreduce", packet=P, stagger=0, early=None, capture=False):
    return dict(name=name, nodes=n, width=W, op=op, codec=codec, dtype=dtype, packet=packet, lag=lag, elements=L,
                stagger=stagger, early=early, capture=capture,
                repeats=repeats, link_latency=link_latency, link_rate=link_rate_fixed(80, 250), memory=memory or {},
                seed=seed)


def bench_top(bench) -> str:
    """The cluster top: ``bench`` nodes of the default NIC, or a top's name."""
    return bench if isinstance(bench, str) else f"cluster_n{bench}"


def plan_id(sim, bench) -> str:
    """A plan's test id: ``icarus-n3``, ``verilator-switch_cluster_n8``."""
    return f"{sim}-n{bench}" if isinstance(bench, int) else f"{sim}-{bench}"


def run_jobs(sim, bench, jobs, tmp_path):
    """Run ``jobs`` on the ``bench``-node cluster (or the top named ``bench``); check every result and its
    traffic against the model."""
    for j in jobs:
        rng = np.random.default_rng(j["seed"] + 7919 * j["nodes"] + j["elements"])
        x = inputs(rng, j["nodes"], j["elements"], j["dtype"], extreme=j["dtype"] == "int32")
        j["inputs"] = str(tmp_path / f"{j['name']}.in.npy")
        j["outputs"] = str(tmp_path / j["name"])
        np.save(j["inputs"], x)
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    run(sim, bench_top(bench), W, "host_driver.sim.cluster_job", env={"AINIC_JOB": str(path)}, tag=tmp_path.name)
    for j in jobs:
        x = np.load(j["inputs"])
        n, L = x.shape
        got = np.load(j["outputs"] + ".results.npy")
        op = j["op"]
        P = j["packet"]
        want = MODEL_OPS[op](list(x), j["codec"], j["dtype"], P)
        bad = [r for r in range(n) if not np.array_equal(got[r].view(np.uint32), want[r].view(np.uint32))]
        assert not bad, f"{j['name']}: ranks {bad} differ from the golden model " \
                        f"(first at {np.flatnonzero(got[bad[0]].view(np.uint32) != want[bad[0]].view(np.uint32))[:5]})"
        stats = json.loads(Path(j["outputs"] + ".stats.json").read_text())
        _, model = Cluster(n, "model", W, j["codec"], j["dtype"], P, lag=j["lag"]).collective(op, list(x))
        reps = j["repeats"]
        data = model.data_frames_per_link
        data_bytes = [b - HEADER * a for b, a in zip(model.frame_bytes_per_link, model.ack_frames_per_link)]
        regs = stats["nic_registers"]
        # every link carried the collectives' data frames, the acks its receiver counted and the probes its
        # sender sent while it waited for credit (a copy of its last frame each), nothing else: no loss here,
        # so no nack and no frame sent again
        acks = [regs[r]["LINK_ACKS_SENT"] for r in range(n)]
        probes = [regs[r]["LINK_PROBES"] for r in range(n)]
        assert stats["frames_per_link"] == [reps * f + a + p for f, a, p in zip(data, acks, probes)], j["name"]
        if not any(probes):         # (a probe is a copy of some frame of the job: its size varies)
            assert stats["bytes_per_link"] == [reps * b + HEADER * a for b, a in zip(data_bytes, acks)], j["name"]
        for r in range(n):
            prev = (r - 1) % n
            assert regs[r]["LINK_TX_PSN"] == reps * data[r] and regs[r]["LINK_RX_PSN"] == reps * data[prev]
            assert regs[r]["LINK_TX_UNACKED"] == 0, (j["name"], r, regs[r])   # the tail acked (the ack delay)
            assert all(regs[r][k] == 0 for k in ("RETRANSMISSIONS", "LINK_TIMEOUTS", "LINK_NACKS_SENT",
                                                 "RX_DROP_OUT_OF_ORDER")), (j["name"], r, regs[r])
            assert regs[r]["RX_DROP_DUPLICATE"] == regs[prev]["LINK_PROBES"], (j["name"], r, regs[r])
            # one ack per ACK_EVERY frames consumed at least (the credits); at most one per ACK_EVERY
            # received or consumed, and one after each quiet spell (the ack delay)
            consumed = reps * data[prev]
            assert consumed // credits.ACK_EVERY <= acks[r] <= 2 * consumed // credits.ACK_EVERY \
                + stats["wall_cycles"] // ACK_DELAY + 2, (j["name"], r, acks[r], consumed)
        assert stats["switch_unknown"] == 0 and stats["memory_violations"] == [0] * n
        # receive credits: no NIC ever held back a beat its link offered (a MAC would have dropped it)
        assert stats["rx_stall_cycles"] == [0] * n, (j["name"], stats["rx_stall_cycles"])
        if j["capture"]:                # the fabric's bytes: every data frame = the golden model's, in order
            got_frames = json.loads(Path(j["outputs"] + ".frames.json").read_text())
            model_frames = list(Cluster(n, "model", W, j["codec"], j["dtype"], P, lag=j["lag"]).frames(list(x), op))
            for r in range(n):
                rtl = [bytes.fromhex(f) for _, q, f in got_frames if q == r]
                mod = [f for q, f in model_frames if q == r]
                assert [f for f in rtl if Ether(f)[Ainic].opcode != 2] == [f for f in mod if Ether(f)[Ainic].opcode != 2]
                # acks: at least the model's, each reporting no less than it did when it left; the last
                # reports every frame received and consumed (contract/link.py)
                rtl_acks = [Ether(f)[Ainic] for f in rtl if Ether(f)[Ainic].opcode == 2]
                mod_acks = [Ether(f)[Ainic] for f in mod if Ether(f)[Ainic].opcode == 2]
                assert len(rtl_acks) >= len(mod_acks) and all(a.dst_rank == (r - 1) % n for a in rtl_acks)
                for field in ("psn", "offset"):
                    seq = [getattr(a, field) for a in rtl_acks]
                    assert seq == sorted(seq), (r, field, seq)
                limits = [a.psn + a.count for a in rtl_acks]
                assert limits == sorted(limits) and all(a.count <= credits.RX_FRAMES for a in rtl_acks)
                assert rtl_acks[-1].psn == data[(r - 1) % n] and rtl_acks[-1].count == credits.RX_FRAMES
        if j["early"]:                  # the rank before the late one sent at least its credit's worth
            assert stats["frames_before_last_start"][n - 2] >= j["early"], (j["name"], stats["frames_before_last_start"])
        # int32 near the limits saturates (the golden model's rule): the NICs that saw it say so
        saturated = j["dtype"] == "int32" and op != "allgather" and any(
            ar.allreduce(list(x), dtype="int32", packet=P)[0].view(np.int32) != np.sum(x.astype(np.int64), 0))
        assert any("int32_overflow" in w for w in stats["warnings"]) == saturated, (j["name"], stats["warnings"])
        for r, cs in enumerate(stats["completions"]):
            assert len(cs) == reps
            for i, c in enumerate(cs):
                assert (c["status"], c["opcode"], c["collective"]) == (0, Opcode[op], i), c
                prev = (r - 1) % n
                assert (c["packets_sent"], c["packets_received"]) == (data[r], data[prev]), (j["name"], r, c)
                assert (c["bytes_sent"], c["bytes_received"]) == (data_bytes[r], data_bytes[prev]), (j["name"], r, c)
                assert c["host_bytes"] == ar.Plan(n, L, P).host_bytes(r, op) and c["cycles"] > 0, (j["name"], r, c)


# (sim, bench) -> jobs; the bench is a number of NICs (the ring bench: NICs, links and an Ethernet switch)
# or a top's name. Every codec at N = 2, 3, 4, 5, 8; fp32 and int32; L odd, L < N*P (empty chunks), L a
# multiple of nothing; back-to-back collectives; throttled and stalling host memory. Icarus runs small
# rings of 2 and 3 on the ring bench; Verilator, whose cost is compiling the bench, runs the rings of 8 NICs
# and of 2 to 6 on part of it (25x faster than Icarus once built) on the 8-NIC bench of
# test_switch_cluster.py: the same NICs, links and fault injectors, the aggregation switch forwarding the
# ring's frames by MAC as the Ethernet switch does. One 8-NIC build (about 15 minutes of a core) serves both
# files. (The ring bench itself runs on Icarus here; `make demo` and `make bench` build it on Verilator.)
RING_BENCH = "switch_cluster_n8"
THROTTLED = {"latency": 30, "rate": 20.0, "stall": 0.2, "seed": 5}
PLANS = {
    ("icarus", 2): [job(f"n2_{c}", 2, 301, c) for c in CODECS] + [job("n2_int32", 2, 1000, dtype="int32")],
    # every codec once at N = 3 (bf16 and bfp4 in the halves below)
    ("icarus", 3): [job(f"n3_{c}", 3, 401, c, lag=2) for c in ("none", "fp16", "bfp8")]
                   + [job("n3_short", 3, 100, "bfp8")]                          # 100 < 3*64: chunk 2 empty
                   + [job(f"n3_{op}_{c}", 3, 301, c, op=op, capture=c == "bf16") for op in ("reduce_scatter", "allgather")
                      for c in ("bf16", "bfp4")],
    ("verilator", RING_BENCH): [job(f"n8_{c}", 8, 1043, c) for c in ("none", "bfp8", "bfp4")] + [job("n8_tiny", 8, 5)]
                   + [job(f"n8_{c}", 8, 555, c, lag=2) for c in ("fp16", "bf16")]
                   + [job("n8_rs_short", 8, 300, "fp16", op="reduce_scatter"),      # chunks 5..7 empty
                      job("n8_ag", 8, 1000, "bfp8", op="allgather", lag=3)]
                      + [job(f"n4_{c}", 4, 2001, c, capture=c in ("none", "bfp8")) for c in CODECS]
                      + [job(f"n5_{c}", 5, 417, c, lag=3) for c in CODECS]
                      + [job("n4_int32", 4, 999, dtype="int32"), job("n4_short", 4, 130, "fp16"),
                         job("n4_b2b", 4, 517, "bfp4", repeats=3),
                         job("n4_throttled", 4, 1500, "bf16", memory=THROTTLED, link_latency=200),
                         job("n2_on_n8", 2, 640, "bfp8"), job("n3_on_n8", 3, 333, "none", lag=1),
                         job("n4_rs_int32", 4, 1001, dtype="int32", op="reduce_scatter"),
                         job("n4_rs_b2b", 4, 700, "fp16", op="reduce_scatter", repeats=2),
                         job("n4_ag_bfp8", 4, 2001, "bfp8", op="allgather", memory=THROTTLED),
                         job("n2_ag_on_n8", 2, 333, "bf16", op="allgather"),
                         # rank 1 starts 20,000 cycles late: rank 0 runs ahead as far as its schedule lets it,
                         # its frames wait in rank 1's buffer, and rank 1's port never pushes back
                         job("n2_late_rank", 2, 20000, "bfp8", lag=16, stagger=20000, early=16),
                         # six ranks, the last 15,000 cycles late: its predecessor runs ahead as far as the
                         # work order lets it (66 of its 160 frames), all waiting in the late rank's buffer
                         job("n6_late_rank", 6, 6000, "none", stagger=15000, early=60)],
}


# heavy(seconds) is a plan's own run; the 8-NIC bench is built by the switch's plan, which starts first
# (cocotb_tests/sim/test_switch_cluster.py), so that these start once it is built instead of waiting for it
COST = {("verilator", RING_BENCH): 90, ("icarus", 3): 160, ("icarus", 2): 55}


@pytest.mark.parametrize("simulator,bench", [pytest.param(*k, marks=pytest.mark.heavy(COST[k])) for k in PLANS],
                         ids=[plan_id(*k) for k in PLANS])
def test_allreduce_bit_exact(simulator, bench, tmp_path):
    if simulator not in selected_sims():
        pytest.skip(f"AINIC_SIM excludes {simulator}")
    run_jobs(simulator, bench, [dict(j) for j in PLANS[(simulator, bench)]], tmp_path)


# -- the ring over faulty links (contract/link.py): every result bit-exact, or a clear timeout -------------------
def fault_job(name, n, L, codec="none", faults=None, **kw):
    j = job(name, n, L, codec, **{k: v for k, v in kw.items() if k in ("dtype", "lag", "repeats", "op", "seed")})
    j.update(faults=faults, retransmit_timeout=2048, deadline=kw.get("deadline", 100_000),
             **{k: v for k, v in kw.items() if k in ("outage", "kill", "reset", "stagger", "early")})
    if "kill" in kw or "reset" in kw:
        j["expect_status"] = None           # the first collective times out: judged here
    return j


def lossy(p, seed):
    return {"drop": p, "dup": p, "corrupt": p, "seed": seed}


FAULT_PLANS = {
    # (the late rank with faults, N = 6: test_credits_bind_on_a_tiny_receive_buffer)
    ("verilator", RING_BENCH): [fault_job("f8_bfp8", 8, 1043, "bfp8", lossy(0.05, 3))]
                      + [fault_job(f"f4_{c}", 4, 700, c, lossy(0.03, 10 + i)) for i, c in enumerate(CODECS)]
                      + [fault_job("f3_int32", 3, 500, dtype="int32", faults=lossy(0.05, 5)),
                         fault_job("f3_rs", 3, 500, "bf16", lossy(0.05, 6), op="reduce_scatter"),
                         fault_job("f4_ag", 4, 500, "bfp4", lossy(0.05, 7), op="allgather"),
                         # rank 1 cut off for 8,000 cycles mid-collective: its sender's whole window is lost
                         fault_job("f4_outage", 4, 2000, "fp16", outage={"rank": 1, "after": 1000, "cycles": 8000}),
                         # a dead peer: every rank times out, then (links reset) the next collective is right
                         fault_job("f4_dead", 4, 1200, "bfp8", kill={"rank": 2, "collectives": [0]}, repeats=2,
                                   deadline=20_000),
                         # one NIC reset mid-collective: the others time out; all of them reset mid-collective;
                         # either way the links are reset and the next collective is right
                         fault_job("f4_reset", 4, 1500, "bf16", reset={"rank": 1, "collective": 0, "after": 400},
                                   repeats=2, deadline=20_000),
                         fault_job("f3_reset_all", 3, 900, "none", reset={"rank": "all", "collective": 0, "after": 300},
                                   repeats=2, deadline=20_000)],
    ("icarus", 2): [fault_job("f2_bfp8", 2, 700, "bfp8", lossy(0.05, 8)),
                    fault_job("f2_dead", 2, 300, "none", kill={"rank": 1, "collectives": [0]}, repeats=2,
                              deadline=5_000),
                    fault_job("f2_reset", 2, 1000, "fp16", reset={"rank": 0, "collective": 0, "after": 200},
                              repeats=2, deadline=5_000)],
}
FAULT_COST = {("verilator", RING_BENCH): 150, ("icarus", 2): 90}


def check_fault_jobs(jobs, tmp_path):
    for j in jobs:
        x = np.load(j["inputs"])
        n, L = x.shape
        got = np.load(j["outputs"] + ".results.npy")
        want = MODEL_OPS[j["op"]](list(x), j["codec"], j["dtype"], j["packet"])
        bad = [r for r in range(n) if not np.array_equal(got[r].view(np.uint32), want[r].view(np.uint32))]
        assert not bad, f"{j['name']}: ranks {bad} differ from the golden model"
        stats = json.loads(Path(j["outputs"] + ".stats.json").read_text())
        regs, comps = stats["nic_registers"], stats["completions"]
        _, model = Cluster(n, "model", W, j["codec"], j["dtype"], j["packet"], lag=j["lag"]).collective(j["op"], list(x))
        data = model.data_frames_per_link
        scenario = j.get("kill") or j.get("reset")
        if scenario:
            first, last = [cs[0] for cs in comps], [cs[-1] for cs in comps]
            reset = j.get("reset", {}).get("rank")
            gone = range(n) if reset == "all" else [reset] if reset is not None else []
            assert all(first[r] is None for r in gone), (j["name"], first)
            # the others: a timeout, saying what they waited for
            assert all(c["status_name"] == "timeout" and c["stall"] for r, c in enumerate(first) if r not in gone), \
                (j["name"], first)
            assert all(c["status_name"] == "ok" for c in last), (j["name"], last)
            continue
        for r, cs in enumerate(comps):
            for c in cs:
                assert c["status_name"] == "ok", (j["name"], r, c)
                assert (c["packets_sent"], c["packets_received"]) == (data[r], data[(r - 1) % n]), (j["name"], r, c)
        faults = stats["fault_counters"]
        hit = sum(sum(f.values()) for side in faults.values() for f in side)
        resent = sum(rg["RETRANSMISSIONS"] for rg in regs)
        for r in range(n):
            rg = regs[r]
            # the link carried the data, what went again, and the receiver's acks and nacks
            assert stats["frames_per_link"][r] == data[r] + rg["RETRANSMISSIONS"] + rg["LINK_PROBES"] \
                + rg["LINK_ACKS_SENT"] + rg["LINK_NACKS_SENT"], (j["name"], r, rg, stats["frames_per_link"][r])
            assert rg["LINK_TX_UNACKED"] == 0 and rg["LINK_TX_PSN"] == data[r], (j["name"], r, rg)
        assert stats["rx_stall_cycles"] == [0] * n, (j["name"], stats["rx_stall_cycles"])
        if j["faults"] or j.get("outage"):
            assert hit and resent, (j["name"], hit, resent)
        if j.get("early"):
            assert stats["frames_before_last_start"][n - 2] >= j["early"], (j["name"], stats["frames_before_last_start"])


@pytest.mark.parametrize("simulator,bench", [pytest.param(*k, marks=pytest.mark.heavy(FAULT_COST[k]))
                                             for k in FAULT_PLANS], ids=[plan_id(*k) for k in FAULT_PLANS])
def test_ring_survives_faults(simulator, bench, tmp_path):
    """Loss, duplication and corruption on every link (up to 5 %), a NIC cut off for longer than its window,
    a dead peer: every finished collective is bit-exact with the golden model, and what could not finish
    ends with status timeout, after which the links are reset and the next collective is right
    (contract/link.py)."""
    if simulator not in selected_sims():
        pytest.skip(f"AINIC_SIM excludes {simulator}")
    run_fault_jobs(simulator, bench, FAULT_PLANS[(simulator, bench)], tmp_path)


def run_fault_jobs(simulator, bench, plan, work):
    """Run ``plan``'s fault jobs in one simulation of ``bench`` (nodes or a top's name) and check them."""
    jobs = [dict(j) for j in plan]
    for j in jobs:
        rng = np.random.default_rng(j["seed"] + 7919 * j["nodes"] + j["elements"])
        x = inputs(rng, j["nodes"], j["elements"], j["dtype"], extreme=j["dtype"] == "int32")
        j["inputs"], j["outputs"] = str(work / f"{j['name']}.in.npy"), str(work / j["name"])
        np.save(j["inputs"], x)
    path = work / "jobs.json"
    path.write_text(json.dumps(jobs))
    run(simulator, bench_top(bench), W, "host_driver.sim.cluster_job", env={"AINIC_JOB": str(path)},
        tag=f"{work.parent.name}-{work.name}")
    check_fault_jobs(jobs, work)


# six NICs built with a tiny receive side (contract.credits.TIGHT: 32 frames, 8 KiB; lag 1 at most), with
# and without faults, with long links and with a late rank whose predecessor fills its buffer and waits.
# Without loss the lag bound keeps every schedule's frames in flight within the room, even when the acks
# take longer to come back than the buffer lasts at line rate (t6_far: 300 cycles a link, 1,200 a round
# trip, against 1,024 cycles of buffer): no sender ever waits for credit. With loss, acks go missing and
# frames are held for resending: the senders do wait, and still no NIC refuses a beat.
TIGHT_PLAN = [job("t6_bfp8", 6, 5000, "bfp8"), job("t6_far", 6, 3001, "none", lag=8, link_latency=300),
              job("t6_late", 6, 6000, "fp16", stagger=12000, early=20)]
TIGHT_FAULT_PLAN = [fault_job("t6_faults", 6, 4000, "bfp4", lossy(0.03, 21)),
                    fault_job("t6_late_faults", 6, 5000, "none", lossy(0.02, 22), stagger=12000, early=20)]


def credit_waits(work, j) -> list:
    """Each rank's LINK_CREDIT_WAITS after job ``j``."""
    return [r["LINK_CREDIT_WAITS"] for r in json.loads((work / f"{j['name']}.stats.json").read_text())["nic_registers"]]


@pytest.mark.heavy(360)
def test_credits_bind_on_a_tiny_receive_buffer(tmp_path):
    """The same checks as above on the tight build: every result bit-exact, no NIC ever refused a beat
    (rx_stall_cycles 0), the late rank's predecessor stopped within the late rank's 32 frames of room, no
    sender waited for credit without loss, and senders did with loss."""
    if "verilator" not in selected_sims():
        pytest.skip("AINIC_SIM excludes verilator")
    run_jobs("verilator", "tight_cluster_n6", [dict(j) for j in TIGHT_PLAN], tmp_path)
    late = json.loads((tmp_path / "t6_late.stats.json").read_text())
    assert late["frames_before_last_start"][4] <= credits.TIGHT.rx_frames + 8, late["frames_before_last_start"]
    waits = {j["name"]: credit_waits(tmp_path, j) for j in TIGHT_PLAN}
    assert all(w == 0 for ws in waits.values() for w in ws), waits
    faulty = tmp_path / "faults"
    faulty.mkdir()
    run_fault_jobs("verilator", "tight_cluster_n6", TIGHT_FAULT_PLAN, faulty)
    # with loss the credits bind: senders had a new frame and no credit for it (LINK_CREDIT_WAITS), and
    # still no NIC refused a beat (check_fault_jobs: rx_stall_cycles 0)
    waits = [w for j in TIGHT_FAULT_PLAN for w in credit_waits(faulty, j)]
    assert sum(waits) > 0, waits
