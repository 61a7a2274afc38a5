"""In-network aggregation through the RTL: N NICs around the aggregation switch, fault injection on every
link, results bit-exact with the golden model (host_driver/models/in_network.py) whatever the faults.

Each pytest item runs a list of jobs in one simulation (the bench is reset between them). Sizes are small
(P = 64, hundreds to a few thousand elements, windows of 2 to 8 so that slots are reused in both sets).
"""

import json
from pathlib import Path

import numpy as np
import pytest

from contract.enums import Status
from host_driver.models import in_network as inn
from host_driver.sim.cluster import MODEL_OPS, link_rate_fixed
from host_driver.sim.runner import run, selected_sims

W = 64
P = 64
FAULTS = {"drop": 0.05, "dup": 0.05, "corrupt": 0.05}


def job(name, n, L, codec="none", dtype="fp32", window=4, faults=None, jobs=None, stagger=0, deadline=400_000,
        timeout=2048, expect=Status.ok, algorithm="switch", seed=0, leaves=None):
    return dict(name=name, nodes=n, width=W, op="allreduce", codec=codec, dtype=dtype, packet=P, lag=4, elements=L,
                stagger=stagger, repeats=1, link_latency=40, link_rate=link_rate_fixed(80, 250), memory={},
                algorithm=algorithm, window=window, jobs=jobs or [list(range(n))], retransmit_timeout=timeout,
                deadline=deadline, faults=dict(faults or {}, seed=seed + 1), expect_status=int(expect), seed=seed,
                leaves=leaves)


def inputs(rng, n, L, dtype):
    if dtype == "int32":
        return rng.integers(-2**31, 2**31, (n, L), dtype=np.int64).astype(np.int32)
    return (rng.standard_normal((n, L)) * np.exp(rng.uniform(-20, 20, (n, L)))).astype(np.float32)


def run_jobs(sim, top, jobs, tmp_path):
    for j in jobs:
        rng = np.random.default_rng(j["seed"] + 7919 * j["nodes"] + j["elements"])
        x = inputs(rng, j["nodes"], j["elements"], j["dtype"])
        j["inputs"] = str(tmp_path / f"{j['name']}.in.npy")
        j["outputs"] = str(tmp_path / j["name"])
        np.save(j["inputs"], x)
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    run(sim, top, W, "host_driver.sim.cluster_job", env={"AINIC_JOB": str(path)},
        tag=tmp_path.name)
    nacks = 0
    for j in jobs:
        x = np.load(j["inputs"])
        n, L = x.shape
        got = np.load(j["outputs"] + ".results.npy").view(np.uint32)
        stats = json.loads(Path(j["outputs"] + ".stats.json").read_text())
        if j["expect_status"] != Status.ok:
            assert {c[-1]["status_name"] for c in stats["completions"]} == {Status(j["expect_status"]).name}
            assert all(r["AGG_TIMEOUTS"] == 1 for r in stats["nic_registers"]), stats["nic_registers"]
            continue
        if j["algorithm"] == "ring":       # forwarded by MAC through the aggregation switch
            want = MODEL_OPS["allreduce"](list(x), j["codec"], j["dtype"], P).view(np.uint32)
            assert np.array_equal(got, want), j["name"]
            continue
        J = len(inn.packets(L, P, j["window"]))
        for g in j["jobs"]:
            want = inn.allreduce([x[r] for r in g], j["codec"], j["dtype"], leaves=j["leaves"]).view(np.uint32)
            for r in g:
                assert np.array_equal(got[r], want[0]), (j["name"], r, np.flatnonzero(got[r] != want[0])[:5])
        sw = stats["switch_counters"]
        assert [c["completed"] for c in sw["jobs"]] == [J] * len(j["jobs"]), (j["name"], sw["jobs"])
        # every switch's jobs (a tree: the spine's, then each leaf's: docs/in_network.md, "Two levels")
        everyone = [c for s in [sw] + stats.get("leaf_counters", []) for c in s["jobs"]]
        for leaf in stats.get("leaf_counters", []):     # each round went up at least once, and came down once
            assert leaf["jobs"][0]["completed"] == J and leaf["jobs"][0]["down"] == J, (j["name"], leaf["jobs"])
            assert leaf["jobs"][0]["up"] >= J
        for r in range(n):
            assert stats["nic_registers"][r]["AGG_PSN"] == J and stats["completions"][r][-1]["host_bytes"] == 4 * L
        fc = stats["fault_counters"]
        links = fc["up"] + fc["down"] + fc.get("trunk_up", []) + fc.get("trunk_down", [])
        hits = {k: sum(c[k] for c in links) for k in ("dropped", "duplicated", "corrupted")}
        if j["stagger"]:       # the others resend while the last rank is late: copies the switch drops
            assert stats["frames_per_link"][-1] == J and min(stats["frames_per_link"][:-1]) > J, stats["frames_per_link"]
            assert sw["drops"]["duplicate"] > 0 and hits == {"dropped": 0, "duplicated": 0, "corrupted": 0}
        elif not any(j["faults"].get(k) for k in ("drop", "dup", "corrupt")):
            assert stats["frames_per_link"] == [J] * n and stats["down_frames_per_link"] == [J] * n, j["name"]
            assert hits == {"dropped": 0, "duplicated": 0, "corrupted": 0}
            assert all(c[-1]["retransmissions"] == 0 for c in stats["completions"])
            assert all(v == 0 for s in [sw] + stats.get("leaf_counters", []) for v in s["drops"].values()), sw["drops"]
            assert all(c.get("up", 0) in (0, J) for c in everyone)
        else:
            assert all(v > 0 for v in hits.values()), (j["name"], hits)
            assert sum(c[-1]["retransmissions"] for c in stats["completions"]) > 0, j["name"]
            # every resend went from the NICs' frame stores (the window's frames fit: contract.in_network)
            assert all(r["AGG_STORED_RESENDS"] == r["RETRANSMISSIONS"] for r in stats["nic_registers"]), \
                stats["nic_registers"]
            lost_down = sum(c["dropped"] + c["corrupted"] for c in fc["down"])
            assert lost_down == 0 or sum(c["unicast"] for c in everyone) > 0, (j["name"], everyone)
            nacks += sum(c["nacks"] for c in everyone)
            if "trunk_up" in fc:        # the trunks lost frames too, and the partials went up again
                assert sum(c["dropped"] + c["corrupted"] for c in fc["trunk_up"] + fc["trunk_down"]) > 0, j["name"]
                assert sum(leaf["jobs"][0]["up"] for leaf in stats["leaf_counters"]) > len(stats["leaf_counters"]) * J
    if any(j["faults"].get("drop") and j["elements"] > 1000 for j in jobs):
        assert nacks > 0            # lost contributions asked for by number (docs/in_network.md, "Losses")


# Verilator, one 8-port bench: N = 8 with faults up to 5 % of every kind on every link, every dtype and
# codec, L odd and L below one packet a worker, more packets than two windows (both sets of every slot,
# reused); N = 2 to 5 on part of it; two jobs at once (4 + 4, and 2 + 2 with the other ports idle), a worker
# that starts late, a dead link (timeout, then a good collective), and the ring all-reduce forwarded through
# the same switch at N = 8 and 4. Icarus: two small cases.
PLANS = {
    ("verilator", 8): [
        job("n8_none_faults", 8, 1201, window=8, faults=FAULTS, timeout=1024, seed=4),
        job("n8_bfp8", 8, 1500, "bfp8", window=4),
        job("n8_int32_faults", 8, 700, dtype="int32", window=2, faults=FAULTS, timeout=1024, seed=5),
        job("n8_bf16_short", 8, 300, "bf16"),                          # 300 < 8 * 64: one packet, five short
        job("n8_two_jobs", 8, 1200, "bfp4", jobs=[[0, 1, 2, 3], [7, 6, 5, 4]], faults=FAULTS, seed=6),
        job("n5_fp16_faults", 5, 1201, "fp16", window=8, faults={"drop": 0.03, "dup": 0.01, "corrupt": 0.02}, seed=2),
        job("n3_bfp8_faults", 3, 1001, "bfp8", faults=FAULTS),
        job("n4_int32_faults", 4, 700, dtype="int32", window=2, faults=FAULTS, seed=1),
        job("n2_short", 2, 40, "bf16"),
        job("two_jobs", 4, 900, "bfp4", jobs=[[0, 2], [3, 1]], faults={"drop": 0.02, "dup": 0.02, "corrupt": 0.02}),
        job("n3_late", 3, 1000, window=2, stagger=10_000),
        job("n2_dead", 2, 256, faults={"drop": 1.0}, deadline=10_000, timeout=1000, expect=Status.timeout),
        job("n2_after_dead", 2, 256),
        job("n8_ring_through_switch", 8, 1199, "bfp8", algorithm="ring"),
        job("n4_ring_through_switch", 4, 999, "fp16", algorithm="ring"),
    ],
    ("icarus", 2): [job("n2_none", 2, 333), job("n2_bfp4_faults", 2, 1000, "bfp4", faults=FAULTS, seed=3)],
}
# the Verilator plan builds the 8-NIC bench (about 10 minutes) that the ring's plans also run on: it starts first
COST = {("verilator", 8): 740, ("icarus", 2): 190}


@pytest.mark.parametrize("simulator,bench", [pytest.param(*k, marks=pytest.mark.heavy(COST[k])) for k in PLANS],
                         ids=[f"{s}-n{b}" for s, b in PLANS])
def test_switch_allreduce_bit_exact(simulator, bench, tmp_path):
    if simulator not in selected_sims():
        pytest.skip(f"AINIC_SIM excludes {simulator}")
    run_jobs(simulator, f"switch_cluster_n{bench}", [dict(j) for j in PLANS[(simulator, bench)]], tmp_path)


# Two levels (docs/in_network.md, "Two levels"): 4 NICs on two leaf switches of 2, the leaves on a spine, every
# link and both trunks with faults; bit-exact with the golden model's tree (rounded once per level)
TREE = [job("tree_none", 4, 1201, window=4, leaves=2),
        job("tree_bfp8_faults", 4, 2001, "bfp8", window=8, faults=FAULTS, timeout=1024, leaves=2, seed=8),
        job("tree_int32_faults", 4, 700, dtype="int32", window=2, faults=FAULTS, timeout=1024, leaves=2, seed=9)]


@pytest.mark.heavy(600)
def test_a_tree_of_switches_is_bit_exact(tmp_path):
    if "verilator" not in selected_sims():
        pytest.skip("AINIC_SIM excludes verilator")
    run_jobs("verilator", "tree_cluster_n4_l2", [dict(j) for j in TREE], tmp_path)


# Switches faster than their links (ClusterBench's switch_speedup: every switch at 2W = 128, behind width
# converters at the NICs' ports, hdl/stream/width_converter.py; the trunks 2W wide), here a tree of them (the
# converters and the wide switch are those of one such switch; the trunks are the tree's): the same sums,
# bit-exact, under the same faults
SPEEDUP = [job("x2_tree_none", 4, 1201, window=4, leaves=2),
           job("x2_tree_bfp8_faults", 4, 2001, "bfp8", window=8, faults=FAULTS, timeout=1024, leaves=2, seed=10),
           job("x2_tree_int32_faults", 4, 700, dtype="int32", window=2, faults=FAULTS, timeout=1024, leaves=2,
               seed=11)]


@pytest.mark.heavy(600)
def test_switches_faster_than_their_links_are_bit_exact(tmp_path):
    if "verilator" not in selected_sims():
        pytest.skip("AINIC_SIM excludes verilator")
    run_jobs("verilator", "tree_cluster_n4_l2_x2", [dict(j) for j in SPEEDUP], tmp_path)


@pytest.mark.parametrize("kwargs, message", [
    (dict(switch_speedup=2), "switch_speedup is 1, or 2 for aggregation switches"),
    (dict(aggregation=True, switch_speedup=3), "switch_speedup is 1, or 2"),
    (dict(width=1024, aggregation=True, switch_speedup=2), "the switch's width must be one of"),
])
def test_the_bench_refuses_a_speedup_it_cannot_build(kwargs, message):
    from hdl.sim.cluster_bench import ClusterBench
    with pytest.raises(ValueError, match=message):
        ClusterBench(4, **{"width": 512, **kwargs})
