"""Cluster on the model backend and `ainic demo`: results, traffic statistics, the capture, bad arguments."""

import json

import numpy as np
import pytest
from scapy.layers.l2 import Ether

from contract.enums import Codec, FrameOpcode, names
from host_driver.cli import main
from host_driver.models import allreduce as ar
from host_driver.models import in_network as inn
from host_driver.models import numerics as nm
from host_driver.models.pcap import read_pcap
from host_driver.models.protocol import Ainic
from host_driver.sim.cluster import Cluster, CollectiveTimeout


@pytest.mark.parametrize("nodes", [2, 3, 5])
@pytest.mark.parametrize("codec", names(Codec))
def test_model_results_and_traffic(rng, nodes, codec):
    x = [rng.standard_normal(777).astype(np.float32) for _ in range(nodes)]
    results, stats = Cluster(nodes, codec=codec, packet=64).allreduce(x)
    assert np.array_equal(results.view(np.uint32), ar.allreduce(x, codec, packet=64).view(np.uint32))
    frames = list(Cluster(nodes, codec=codec, packet=64).frames(x))
    assert sum(stats.frames_per_link) == len(frames)
    assert [sum(len(f) for s, f in frames if s == r) for r in range(nodes)] == stats.frame_bytes_per_link
    assert stats.cycles is None and stats.bound_cycles > 0


def test_capture_fields(tmp_path):
    out = tmp_path / "ring.pcap"
    assert main(["demo", "--sim", "model", "--nodes", "3", "--elements", "100", "--codec", "bf16", "--packet", "16",
                 "--pcap", str(out), "--json", str(tmp_path / "s.json"), "--save", str(tmp_path / "r.npz")]) == 0
    pkts = [Ether(f) for f in read_pcap(out)]
    hdrs = [p[Ainic] for p in pkts]
    data = [h for h in hdrs if h.opcode != FrameOpcode.ack]
    assert {(h.src_rank, h.dst_rank) for h in data} == {(0, 1), (1, 2), (2, 0)}
    assert {h.opcode for h in data} == {FrameOpcode.data, FrameOpcode.result} and all(h.codec == Codec["bf16"] for h in data)
    # acks go the other way round the ring, one per 8 frames consumed, with the receiver's limits
    acks = [h for h in hdrs if h.opcode == FrameOpcode.ack]
    assert {(h.src_rank, h.dst_rank) for h in acks} == {(1, 0), (2, 1), (0, 2)}
    # (the psn expected next; room for 128 frames beyond it: contract/link.py)
    assert sorted(h.psn for h in acks if h.src_rank == 1) == [8 * (i + 1) for i in range(len(acks) // 3)]
    assert {h.count for h in acks} == {128}
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["bit_exact"] and stats["identical_on_all_ranks"] and sum(stats["frames_per_link"]) == len(pkts)
    saved = np.load(tmp_path / "r.npz")
    assert saved["inputs"].shape == saved["results"].shape == (3, 100)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"nodes": 0}, ValueError, "nodes must be an int in 2 .. 64"),
    ({"nodes": 1}, ValueError, "nodes must be an int in 2 .. 64"),
    ({"nodes": 17}, ValueError, "the simulated cluster holds at most 16 nodes"),
    ({"nodes": 17, "algorithm": "switch"}, ValueError, r"nodes must be an int in 2 .. 16 \(the switch's workers"),
    ({"nodes": 4, "backend": "fpga"}, ValueError, "backend must be one of"),
    ({"nodes": 4, "codec": "zip"}, ValueError, "codec must be one of"),
    ({"nodes": 4, "dtype": "int32", "codec": "bf16"}, ValueError, "uncompressed"),
    ({"nodes": 4, "packet": 100}, ValueError, "multiple of 16"),
    ({"nodes": 1, "backend": "verilator"}, ValueError, "nodes must be an int in 2"),
    ({"nodes": 4, "fabric": "switch"}, ValueError, "the model backend has no fabric"),
    ({"nodes": 4, "waves": True}, ValueError, "the model backend has no fabric to choose, record"),
    ({"nodes": 4, "width": 96}, ValueError, "width must be one of"),
    ({"nodes": 4, "width": 1024, "packet": 48}, ValueError, "multiple of 32 in 16 .. 1024 elements at W = 1024"),
    ({"nodes": 4, "width": 1024, "algorithm": "switch", "packet": 48}, ValueError, "multiple of 32"),
    ({"nodes": 4, "link_latency": -1}, ValueError, "link_latency"),
    ({"nodes": 4, "lag": 0}, ValueError, "lag must be None"),
    ({"nodes": 4, "lag": True}, ValueError, "lag must be None"),
    ({"nodes": 4, "bench_nodes": 3}, ValueError, "bench_nodes"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Cluster(**kwargs)


def test_lag_is_chosen_per_ring_unless_given():
    """Without ``lag`` each run gets allreduce.chosen_lag's (capped by the receive credits, as the NIC caps
    it: the model's stats report what the NIC runs); a given lag is kept."""
    x = [np.ones(1 << 20, np.float32)] * 8
    auto = Cluster(8, codec="bfp8")
    assert auto.lag_for(1 << 20) == 3
    assert auto.allreduce(x)[1].lag == 3
    assert Cluster(8, codec="none").allreduce(x)[1].lag == 7        # 8, and credits.max_lag(8, 256) is 7
    assert Cluster(8, codec="bfp8", lag=2).allreduce(x)[1].lag == 2


def test_a_switch_job_gets_a_window_and_a_timer_unless_given():
    """Without ``window`` or ``retransmit_timeout`` a switch job gets in_network's chosen ones (what the NICs
    are configured with): at W = 64 one switch keeps 32 slots with a timer they take less than, a tree at the
    NICs' width 8 slots; given ones are kept."""
    one = Cluster(8, "verilator", 64, "bfp8", algorithm="switch")
    assert (one.window, one.retransmit_timeout) == (32, 8192)
    tree = Cluster(8, "verilator", 64, "bfp8", algorithm="switch", leaves=2)
    assert (tree.window, tree.retransmit_timeout) == (8, 4096)
    wide = Cluster(8, "verilator", 512, "bfp8", algorithm="switch")
    assert (wide.window, wide.retransmit_timeout) == (64, 2048)
    given = Cluster(8, "verilator", 64, "bfp8", algorithm="switch", window=16, retransmit_timeout=1000)
    assert (given.window, given.retransmit_timeout) == (16, 1000)
    assert Cluster(8, "verilator", 64, "bfp8", algorithm="switch", window=4).retransmit_timeout == 2048


def test_bad_arrays():
    c = Cluster(2)
    with pytest.raises(ValueError, match="expected 2 arrays"):
        c.allreduce([np.zeros(4, np.float32)])
    with pytest.raises(TypeError, match="array 1 is float64"):
        c.allreduce([np.zeros(4, np.float32), np.zeros(4)])


# -- in-network aggregation (algorithm="switch") ---------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "bfp4"])
def test_switch_model_results_traffic_and_bound(rng, codec):
    n, L, P = 4, 5000, 256
    x = [rng.standard_normal(L).astype(np.float32) for _ in range(n)]
    c = Cluster(n, codec=codec, algorithm="switch", window=4)
    results, stats = c.allreduce(x)
    assert np.array_equal(results.view(np.uint32), inn.allreduce(x, codec).view(np.uint32))
    J = -(-L // P)
    assert stats.frames_per_link == [J] * n and stats.down_frames_per_link == [J] * n
    wire = sum(nm.codec_bytes(codec, min(P, L - k)) + 74 + 24 for k in range(0, L, P))
    assert stats.bound_cycles == pytest.approx(wire / 40.0)
    assert stats.retransmitted_per_rank == [0] * n and stats.switch_counters["jobs"][0]["completed"] == J
    assert stats.compression_ratio == pytest.approx(4 * L / (stats.payload_bytes_per_link[0]))


def test_switch_model_with_faults_and_two_jobs(rng):
    x = [rng.standard_normal(3000).astype(np.float32) for _ in range(6)]
    c = Cluster(6, algorithm="switch", jobs=2, window=8, faults={"drop": 0.03, "dup": 0.03, "corrupt": 0.03, "seed": 4})
    results, stats = c.allreduce(x)
    assert c.job_ranks() == [[0, 1, 2], [3, 4, 5]]
    assert np.array_equal(results.view(np.uint32), c.golden(x).view(np.uint32))
    assert not np.array_equal(results[0], results[3])
    assert sum(stats.retransmitted_per_rank) > 0
    assert sum(f["dropped"] + f["corrupted"] for f in stats.fault_counters["up"] + stats.fault_counters["down"]) > 0


def test_switch_frames_are_valid_aggregation_frames(rng):
    x = [rng.standard_normal(100).astype(np.float32) for _ in range(2)]
    frames = list(Cluster(2, algorithm="switch", packet=32, window=2).frames(x))
    hdrs = [(s, Ether(f)[Ainic]) for s, f in frames]
    up = [h for s, h in hdrs if s >= 0]
    down = [h for s, h in hdrs if s == -1]
    assert len(up) == len(down) == 8
    assert {h.opcode for h in up} == {FrameOpcode.aggregate} and {h.opcode for h in down} == {FrameOpcode.aggregated}
    assert sorted((h.worker, h.psn) for h in down) == sorted((w, j) for w in range(2) for j in range(4))


def test_switch_timeout_is_an_exception_naming_the_ranks(rng):
    x = [rng.standard_normal(64).astype(np.float32) for _ in range(2)]
    c = Cluster(2, algorithm="switch", packet=16, window=2, faults={"drop": 1.0}, deadline=50_000,
                retransmit_timeout=1000)
    with pytest.raises(CollectiveTimeout, match=r"ranks \[0, 1\] timed out") as e:
        c.allreduce(x)
    assert e.value.status == ["timeout", "timeout"] and e.value.stats.retransmitted_per_rank[0] > 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(backend="icarus", dead_rank=4), r"dead_rank must be a rank in 0 .. 3"),
    (dict(algorithm="switch", dead_rank=1), "dead_rank is for the ring"),
    (dict(deadline=0), "deadline must be a positive int"),
    (dict(algorithm="tree"), "algorithm must be one of"),
    (dict(algorithm="switch", backend="verilator", packet=512), "packets of at most 256"),
    (dict(algorithm="switch", window=3), "power of two"),
    (dict(algorithm="switch", jobs=5), "jobs must be"),
    (dict(jobs=2), "jobs > 1 needs algorithm='switch'"),
    (dict(algorithm="switch", faults={"drop": 2}), r"probability must be in \[0, 1\]"),
    (dict(algorithm="switch", faults={"loss": 0.1}), "unknown keys"),
    (dict(algorithm="switch", switch_speedup=2), "the model backend has no switch to build"),
    (dict(backend="verilator", switch_speedup=2), "it needs algorithm 'switch', got 'ring'"),
    (dict(backend="verilator", algorithm="switch", switch_speedup=3), r"switch_speedup must be 1, or 2 .*got 3"),
    (dict(backend="verilator", algorithm="switch", switch_speedup=True), r"switch_speedup must be 1, or 2 .*got True"),
    (dict(backend="verilator", algorithm="switch", width=1024, switch_speedup=2), "wider than any supported"),
    (dict(backend="verilator", algorithm="switch", packet=48, switch_speedup=2),
     r"packet must be a multiple of 32 .* at W = 512 \(switches at 1024\), got 48"),
])
def test_switch_arguments_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Cluster(4, **kwargs)


def test_a_faster_switch_is_its_own_bench():
    assert Cluster(4, "verilator", algorithm="switch", switch_speedup=2).top == "switch_cluster_n4_x2"
    assert Cluster(4, "verilator", algorithm="switch").top == "switch_cluster_n4"
    assert Cluster(4, "verilator", algorithm="switch", leaves=2, switch_speedup=2).top == "tree_cluster_n4_l2_x2"


def test_switch_op_other_than_allreduce_is_refused(rng):
    x = [rng.standard_normal(64).astype(np.float32) for _ in range(2)]
    with pytest.raises(ValueError, match="allreduce only"):
        Cluster(2, algorithm="switch").reduce_scatter(x)


def test_demo_switch_with_faults(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["demo", "--sim", "model", "--algorithm", "switch", "--nodes", "8", "--elements", "20000", "--drop", "0.01",
                 "--dup", "0.01", "--corrupt", "0.01", "--json", str(out), "--pcap", str(tmp_path / "s.pcap")]) == 0
    text = capsys.readouterr().out
    assert "in-network bound" in text and "bit-exact with golden model        yes" in text
    d = json.loads(out.read_text())
    assert d["bit_exact"] and d["identical_on_all_ranks"] and d["algorithm"] == "switch"
    assert sum(d["retransmitted_per_rank"]) > 0
    assert len(read_pcap(tmp_path / "s.pcap")) > 2 * 8 * 79
    assert main(["demo", "--sim", "model", "--drop", "0.05", "--nodes", "3", "--elements", "3000"]) == 0
    text = capsys.readouterr().out
    assert "retransmitted per rank" in text and "bit-exact with golden model        yes" in text


def test_ring_model_with_faults(rng):
    """The model backend's ring over faulty links: the golden result, and link counters that add up: each
    frame a rank sends (data, resends, probes, acks, nacks) passes its uplink's injector once."""
    x = [rng.standard_normal(5000).astype(np.float32) for _ in range(4)]
    c = Cluster(4, codec="bfp8", link_latency=50, faults={"drop": 0.02, "dup": 0.02, "corrupt": 0.02, "seed": 9})
    results, stats = c.allreduce(x)
    assert np.array_equal(results.view(np.uint32), c.golden(x).view(np.uint32))
    fc = stats.fault_counters
    assert stats.frames_per_link == [u["frames"] for u in fc["up"]]
    assert all(f > d for f, d in zip(stats.frames_per_link, stats.data_frames_per_link))
    assert sum(stats.retransmitted_per_rank) > 0 and sum(stats.nacks_sent_per_rank) > 0
    assert sum(stats.duplicates_dropped_per_rank) > 0 and sum(stats.corrupted_dropped_per_rank) > 0
    assert sum(u["dropped"] + u["corrupted"] for u in fc["up"] + fc["down"]) > 0
    # the same faults, none: nothing resent, the loss-free traffic
    _, clean = Cluster(4, codec="bfp8", faults={"drop": 0.0, "seed": 9}).allreduce(x)
    assert clean.retransmitted_per_rank is None and clean.frames_per_link == [d + a for d, a in
                                                                             zip(clean.data_frames_per_link, clean.ack_frames_per_link)]


def test_ring_model_dead_rank(rng):
    x = [rng.standard_normal(300).astype(np.float32) for _ in range(3)]
    c = Cluster(3, dead_rank=1)
    with pytest.raises(CollectiveTimeout, match=r"rank 2 timeout \(waiting for a frame from rank 1\)") as e:
        c.allreduce(x)
    assert e.value.status == ["timeout"] * 3 and e.value.stats.recovered
    assert np.array_equal(e.value.results.view(np.uint32), c.golden(x).view(np.uint32))


def test_fabric_picks_the_bench_and_is_checked():
    assert Cluster(4, "verilator").top == "cluster_n4"
    assert Cluster(4, "verilator", fabric="switch").top == "switch_cluster_n4"      # the ring, forwarded by MAC
    assert Cluster(4, "verilator", algorithm="switch", bench_nodes=8).top == "switch_cluster_n8"
    with pytest.raises(ValueError, match="fabric must be one of"):
        Cluster(4, "icarus", fabric="mesh")
    with pytest.raises(ValueError, match="runs on fabric='switch'"):
        Cluster(4, "verilator", algorithm="switch", fabric="ring")


def test_the_ranks_must_agree_on_the_size_and_the_ring_has_a_deadline_on_the_model(rng):
    """Arrays of different lengths are refused (they were summed as far as the shortest); a ring whose links
    lose everything ends in CollectiveTimeout after ``deadline`` cycles without a delivery, as the NIC's
    RING_DEADLINE ends it (it raised 'not done after 1e+09 cycles' from the link model)."""
    with pytest.raises(ValueError, match="the same number of elements: array 1 has 99"):
        Cluster(2).allreduce([np.ones(100, np.float32), np.ones(99, np.float32)])
    c = Cluster(3, faults={"drop": 1.0}, deadline=50_000)
    with pytest.raises(CollectiveTimeout, match=r"rank 1 timeout \(waiting for a frame from rank 0\).*delivered "
                       r"nothing for 50,000 cycles \(0 of \d+ frames through; faults: drop 1"):
        c.allreduce([rng.standard_normal(1000).astype(np.float32) for _ in range(3)])


@pytest.mark.parametrize("clock", [125.0, 250.0])
def test_bench_states_time_and_gbps_at_the_clock(rng, clock):
    """make bench --clock-mhz: a run's time and its busiest link's Gb/s at the clock the cluster ran at (the
    link's bytes per cycle follow the clock: half the clock, twice the bytes)."""
    from dataclasses import replace

    from scripts.bench import at_clock
    x = [rng.standard_normal(500).astype(np.float32) for _ in range(4)]
    _, st = Cluster(4, codec="none", packet=64, clock_mhz=clock).allreduce(x)
    assert st.link_bytes_per_cycle == pytest.approx(80e9 / 8 / (clock * 1e6))
    st = replace(st, cycles=10_000)             # (the model backend counts no cycles)
    busiest = max(st.frame_bytes_per_link) * 8
    assert at_clock(st) == {"clock_mhz": clock, "time_us": round(10_000 / clock, 3),
                            "achieved_gbps": round(busiest / (10_000 / (clock * 1e6)) / 1e9, 2)}
