"""The training-time model: the overlap structures and scalings do what docs/performance.md says."""

import pytest

from host_driver.perf import collective_model as cm
from host_driver.perf.training_model import Ainic, HostRing, Layer, iteration_ns, mlp


class Fixed:
    """An all-reduce that takes ``ns`` whatever its size (0 for an empty gradient)."""

    def __init__(self, ns):
        self.ns = ns

    def allreduce_ns(self, size, nodes):
        return self.ns if size and nodes > 1 else 0.0


LAYERS = [Layer(f"l{i}", 10.0, 20.0, 30.0, 100.0) for i in range(5)]    # 60 ns of compute a layer


def test_no_overlap_adds_every_collective():
    r = iteration_ns(LAYERS, 4, Fixed(7.0), "none")
    assert r["compute_ns"] == 300 and r["total_ns"] == 300 + 5 * 7 and r["exposed_comm_ns"] == 35


def test_backward_overlap_hides_short_collectives():
    # each all-reduce (7 ns) finishes during the next layer's backward (50 ns): only the last one shows
    r = iteration_ns(LAYERS, 4, Fixed(7.0), "backward")
    assert r["total_ns"] == pytest.approx(300 + 7)


def test_backward_overlap_is_network_bound_when_collectives_are_long():
    # 100 ns each: the network runs them back to back from the first gradient (after the forward pass and
    # the last layer's backward, 50 + 50 ns): 100 + 5 * 100
    r = iteration_ns(LAYERS, 4, Fixed(100.0), "backward")
    assert r["total_ns"] == pytest.approx(100 + 500)


def test_the_depth_holds_the_host_back():
    # backward order: two short layers (50 ns), then a long one (200 ns); all-reduces of 100 ns. Two deep,
    # the long layer's compute runs beside the first two all-reduces: its own starts at 300, ends at 400.
    # One deep, the host waits for the second all-reduce (until 150) before the long layer: 450.
    layers = [Layer("first", 0, 100, 100, 1), Layer("mid", 0, 25, 25, 1), Layer("last", 0, 25, 25, 1)]
    assert iteration_ns(layers, 4, Fixed(100.0), "backward", depth=2)["total_ns"] == pytest.approx(400)
    assert iteration_ns(layers, 4, Fixed(100.0), "backward", depth=1)["total_ns"] == pytest.approx(450)


def test_strong_scaling_divides_compute():
    a = iteration_ns(LAYERS, 4, Fixed(0.0), "none", "strong", base_nodes=4)["compute_ns"]
    b = iteration_ns(LAYERS, 8, Fixed(0.0), "none", "strong", base_nodes=4)["compute_ns"]
    assert b == pytest.approx(a / 2)
    with pytest.raises(ValueError, match="base_nodes"):
        iteration_ns(LAYERS, 8, Fixed(0.0), "none", "strong")
    with pytest.raises(ValueError, match="overlap"):
        iteration_ns(LAYERS, 8, Fixed(0.0), "sometimes")


def test_the_mlp_and_the_host_ring():
    layers = mlp()
    assert len(layers) == 20 and layers[0].grad_bytes == 4 * 2048 * 2048
    # 2 · 1792 · 2048² operations at 2 TFLOP/s: 7.52 ms a pass
    assert layers[0].forward_ns == pytest.approx(2 * 1792 * 2048 ** 2 / 2e12 * 1e9)
    host = HostRing(link_gbps=40, mem_gbps=1e9, step_us=0, wire_efficiency=1.0)
    # wire-bound: 2 (N - 1) chunks of S/N at 5 GB/s
    assert host.allreduce_ns(16 << 20, 6) == pytest.approx(2 * 5 * (16 << 20) / 6 / 5)
    slow = HostRing(link_gbps=40, mem_gbps=1.0, step_us=0, wire_efficiency=1.0)   # reduction-bound reduce-scatter
    assert slow.allreduce_ns(6e6, 6) == pytest.approx(5 * 3e6 + 5 * 1e6 * 8 / 40)
    assert host.allreduce_ns(16 << 20, 1) == 0


def test_ainic_backends_time_the_calibrated_model():
    """The ring and the switch through the collective model, in ns at the clock; the switch's tree of
    8-port switches adds two links of latency a level (δ = 0 here: nothing else changes with N)."""
    k = cm.Constants({"bfp8": 1.0}, 0.4, 0.0, 0.0, 1.0, {"bfp8": 1.2}, {"bfp8": 0.0})
    constants = {"ring/allreduce": k, "switch/allreduce": k}
    ring, switch = Ainic("bfp8", 80.0, constants=constants), Ainic("bfp8", 80.0, "switch", constants=constants)
    assert ring.name == "ainic ring bfp8" and switch.name == "ainic switch bfp8"
    assert [switch.levels(n) for n in (2, 8, 9, 16)] == [1, 1, 2, 2]
    size = 4 << 20
    want = cm.predict(cm.Setup(6, 1 << 20, "bfp8", link_gbps=80.0), constants) * 4     # ns at 250 MHz
    assert ring.allreduce_ns(size, 6) == pytest.approx(want)
    assert switch.allreduce_ns(size, 16) - switch.allreduce_ns(size, 8) == pytest.approx(2 * 125 * 4)
    # no more ranks than the NIC's peer table (ring) or a switch job (contract.collective.check)
    with pytest.raises(ValueError, match="nodes must be an int in 2 .. 16"):
        switch.allreduce_ns(size, 17)
    with pytest.raises(ValueError, match="nodes must be an int in 2 .. 64"):
        ring.allreduce_ns(size, 65)
    assert switch.allreduce_ns(size, 8) == switch.allreduce_ns(size, 5)
    assert ring.allreduce_ns(size, 1) == 0 and switch.allreduce_ns(0, 8) == 0


def test_a_libra_workload_as_training_layers():
    """LIBRA's ResNet-50 read as is: one training layer a line, every phase's compute kept, the weight
    gradients' all-reduces as the gradients (other collectives of a file are left out)."""
    from pathlib import Path

    from host_driver.perf.libra_inputs import read_workload
    from host_driver.perf.training_model import from_libra
    path = Path(__file__).resolve().parents[2] / "host_driver" / "perf" / "libra" / "workload" / "ResNet_50.txt"
    raw = read_workload(path)
    layers = from_libra(raw)
    assert len(layers) == len(raw) == len([ln for ln in path.read_text().splitlines() if ln.strip()])
    assert sum(la.grad_bytes for la in layers) == sum(r.weight_grad.size_bytes for r in raw
                                                      if r.weight_grad.collective == "ALLREDUCE") > 0
    compute = sum(p.compute_ns for r in raw for p in r.phases)
    with_grad = sum(1 for la in layers if la.grad_bytes)
    r = iteration_ns(layers, 8, Fixed(1000.0), "none")
    assert r["compute_ns"] == pytest.approx(compute) and r["total_ns"] == pytest.approx(compute + 1000.0 * with_grad)
