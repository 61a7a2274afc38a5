"""Cluster on the model backend and `ainic demo`: results, traffic statistics, the capture, bad arguments."""

import json

import numpy as np
import pytest
from scapy.layers.l2 import Ether

from contract.enums import Codec, FrameOpcode, names
from host_driver.cli import main
from host_driver.models import allreduce as ar
from host_driver.models.pcap import read_pcap
from host_driver.models.protocol import Ainic
from host_driver.sim.cluster import Cluster


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
    assert main(["demo", "--nodes", "3", "--elements", "100", "--codec", "bf16", "--packet", "16",
                 "--pcap", str(out), "--json", str(tmp_path / "s.json"), "--save", str(tmp_path / "r.npz")]) == 0
    pkts = [Ether(f) for f in read_pcap(out)]
    hdrs = [p[Ainic] for p in pkts]
    data = [h for h in hdrs if h.opcode != FrameOpcode.ack]
    assert {(h.src_rank, h.dst_rank) for h in data} == {(0, 1), (1, 2), (2, 0)}
    assert {h.opcode for h in data} == {FrameOpcode.data, FrameOpcode.result} and all(h.codec == Codec["bf16"] for h in data)
    # acks go the other way round the ring, one per 8 frames consumed, with the receiver's limits
    acks = [h for h in hdrs if h.opcode == FrameOpcode.ack]
    assert {(h.src_rank, h.dst_rank) for h in acks} == {(1, 0), (2, 1), (0, 2)}
    assert sorted(h.psn for h in acks if h.src_rank == 1) == [8 * (i + 1) + 128 for i in range(len(acks) // 3)]
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["bit_exact"] and stats["identical_on_all_ranks"] and sum(stats["frames_per_link"]) == len(pkts)
    saved = np.load(tmp_path / "r.npz")
    assert saved["inputs"].shape == saved["results"].shape == (3, 100)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"nodes": 0}, ValueError, "nodes must be an int in 1 .. 16"),
    ({"nodes": 4, "backend": "fpga"}, ValueError, "backend must be one of"),
    ({"nodes": 4, "codec": "zip"}, ValueError, "unknown codec"),
    ({"nodes": 4, "dtype": "int32", "codec": "bf16"}, ValueError, "uncompressed"),
    ({"nodes": 4, "packet": 100}, ValueError, "multiple of 16"),
    ({"nodes": 1, "backend": "verilator"}, ValueError, "at least 2 nodes"),
    ({"nodes": 4, "width": 96}, ValueError, "width must be one of"),
    ({"nodes": 4, "link_latency": -1}, ValueError, "link_latency"),
    ({"nodes": 4, "bench_nodes": 3}, ValueError, "bench_nodes"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Cluster(**kwargs)


def test_bad_arrays():
    c = Cluster(2)
    with pytest.raises(ValueError, match="expected 2 arrays"):
        c.allreduce([np.zeros(4, np.float32)])
    with pytest.raises(TypeError, match="array 1 is float64"):
        c.allreduce([np.zeros(4, np.float32), np.zeros(4)])
