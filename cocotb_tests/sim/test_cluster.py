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


def run_jobs(sim, bench, jobs, tmp_path):
    """Run ``jobs`` on the ``bench``-node cluster; check every result and its traffic against the model."""
    for j in jobs:
        rng = np.random.default_rng(j["seed"] + 7919 * j["nodes"] + j["elements"])
        x = inputs(rng, j["nodes"], j["elements"], j["dtype"], extreme=j["dtype"] == "int32")
        j["inputs"] = str(tmp_path / f"{j['name']}.in.npy")
        j["outputs"] = str(tmp_path / j["name"])
        np.save(j["inputs"], x)
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    run(sim, f"cluster_n{bench}", W, "host_driver.sim.cluster_job", env={"AINIC_JOB": str(path)}, tag=tmp_path.name)
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
        # acks: one per ACK_EVERY frames consumed since reset, over all the job's collectives
        acks = [credits.acks_sent(reps * data[(r - 1) % n]) for r in range(n)]
        assert stats["frames_per_link"] == [reps * f + a for f, a in zip(data, acks)], j["name"]
        assert stats["bytes_per_link"] == [reps * b + HEADER * a for b, a in zip(data_bytes, acks)], j["name"]
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
                # acks: as many as the model's, each reporting at least what the model's did when it left
                rtl_acks = [Ether(f)[Ainic] for f in rtl if Ether(f)[Ainic].opcode == 2]
                mod_acks = [Ether(f)[Ainic] for f in mod if Ether(f)[Ainic].opcode == 2]
                assert len(rtl_acks) == len(mod_acks) == acks[r]
                assert all(a.psn >= b.psn and a.offset >= b.offset and a.dst_rank == b.dst_rank
                           for a, b in zip(rtl_acks, mod_acks))
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


# (sim, bench nodes) -> jobs. Every codec at N = 2, 3, 4, 5, 8; fp32 and int32; L odd, L < N*P (empty
# chunks), L a multiple of nothing; back-to-back collectives; throttled and stalling host memory. Icarus
# runs the small rings; Verilator, whose cost is compiling the bench, runs one 8-NIC bench with the rings of
# 8 NICs and the rings of 2 to 4 on part of it.
THROTTLED = {"latency": 30, "rate": 20.0, "stall": 0.2, "seed": 5}
PLANS = {
    ("icarus", 2): [job(f"n2_{c}", 2, 301, c) for c in CODECS] + [job("n2_int32", 2, 1000, dtype="int32")],
    ("icarus", 3): [job(f"n3_{c}", 3, 1237, c, lag=2) for c in CODECS]
                   + [job("n3_short", 3, 100, "bfp8")]                          # 100 < 3*64: chunk 2 empty
                   + [job(f"n3_{op}_{c}", 3, 901, c, op=op, capture=c == "bf16") for op in ("reduce_scatter", "allgather")
                      for c in ("none", "bf16", "bfp4")],
    ("icarus", 5): [job(f"n5_{c}", 5, 777, c, lag=3) for c in CODECS],
    ("verilator", 8): [job(f"n8_{c}", 8, 1043, c) for c in ("none", "bfp8", "bfp4")] + [job("n8_tiny", 8, 5)]
                   + [job(f"n8_{c}", 8, 555, c, lag=2) for c in ("fp16", "bf16")]
                   + [job("n8_rs_short", 8, 300, "fp16", op="reduce_scatter"),      # chunks 5..7 empty
                      job("n8_ag", 8, 1000, "bfp8", op="allgather", lag=3)]
                      + [job(f"n4_{c}", 4, 2001, c, capture=c in ("none", "bfp8")) for c in CODECS]
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
                         job("n2_late_rank", 2, 20000, "bfp8", lag=16, stagger=20000, early=16)],
}


COST = {("verilator", 8): 300, ("icarus", 5): 200, ("icarus", 3): 160, ("icarus", 2): 40}


@pytest.mark.parametrize("simulator,bench", [pytest.param(*k, marks=pytest.mark.heavy(COST[k])) for k in PLANS],
                         ids=[f"{s}-n{b}" for s, b in PLANS])
def test_allreduce_bit_exact(simulator, bench, tmp_path):
    if simulator not in selected_sims():
        pytest.skip(f"AINIC_SIM excludes {simulator}")
    run_jobs(simulator, bench, [dict(j) for j in PLANS[(simulator, bench)]], tmp_path)
