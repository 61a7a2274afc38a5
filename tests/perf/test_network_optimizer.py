"""The network optimizer (LIBRA's problem on open solvers): closed forms, two methods that agree on every
shipped workload, constraints honoured, clear errors."""

import itertools

import numpy as np
import pytest

from host_driver.perf import libra_inputs as li
from host_driver.perf.collective_traffic import dimension_bytes, wire_factor
from host_driver.perf.network_optimizer import InfeasibleError, Problem, equal_split, optimize

S = li.SHIPPED
#: every shipped workload with its communicators (3-D and 4-D networks)
CASES = [(w, c, n) for w, c, n in [
    ("GPT_3", "GPT_3_3d", 3), ("GPT_3", "GPT_3_4d", 4), ("MSFT_1T", "MSFT_1T_3d", 3), ("MSFT_1T", "MSFT_1T_4d", 4),
    ("Turing_NLG", "Turing_NLG_3D", 3), ("Turing_NLG", "Turing_NLG_4D", 4), ("ResNet_50", "ResNet_50_3d", 3),
    ("ResNet_50", "ResNet_50_4d", 4), ("DLRM", "DLRM_3d", 3), ("DLRM", "DLRM_4d", 4)]]


def _problem(workload, communicator, dims, constraints="total_bw_500gbps", network=None) -> Problem:
    net = network or li.read_network(S / f"network/{dims}d_network.yml")
    cons = constraints if isinstance(constraints, li.Constraints) else \
        li.read_constraints(S / f"constraints/{constraints}.yml", net)
    return Problem(net, li.read_workload(S / f"workload/{workload}.txt"),
                   li.read_communicator(S / f"communicator/{communicator}.yml", net),
                   li.read_cost_model(S / f"cost_model/{dims}d_cost_model.yml"), cons)


def test_every_shipped_workload_has_a_communicator():
    shipped = {p.stem for p in (S / "workload").glob("*.txt")}
    assert shipped == {w for w, _, _ in CASES}


def test_libra_traffic_rules():
    # all-reduce of 1200 bytes over groups (4, 3): 2·1200·3/4 in dim 0, then 2·300·2/3 in dim 1
    assert dimension_bytes("ALLREDUCE", 1200, (4, 3)) == pytest.approx([1800, 400])
    assert dimension_bytes("REDUCESCATTER", 1200, (4, -1, 3)) == pytest.approx([900, 0, 200])
    # all-gather: dimensions in reverse, the chunk growing: 100·2 in dim 1, then 300·3 in dim 0
    assert dimension_bytes("ALLGATHER", 100, (4, 3)) == pytest.approx([900, 200])
    assert dimension_bytes("ALLTOALL", 1200, (4, 3)) == pytest.approx([900, 800])
    assert dimension_bytes("NONE", 1200, (4, 3)) == [0, 0]
    # an ainic switch dimension sends each contribution once and receives each result once
    f = wire_factor("none")
    assert dimension_bytes("ALLREDUCE", 1200, (4,), ("AinicSwitch",)) == pytest.approx([1200 * 5 / 4 * f])
    assert wire_factor("bfp8") < 0.35 * wire_factor("none")


def test_a_single_allreduce_splits_the_total_in_proportion_to_each_dimensions_traffic(tmp_path):
    # one data-parallel all-reduce and only a total: every dimension then takes the same time,
    # bw_d = total · B_d / Σ B, and the time is Σ B / total
    (tmp_path / "w.txt").write_text("only -1 0 NONE 0 0 NONE 0 1000 ALLREDUCE 1048576000 0\n")
    (tmp_path / "c.yml").write_text("Forward: [-1, -1, -1]\nInputGrad: [-1, -1, -1]\nWeightGrad: [16, 8, 32]\n")
    net = li.read_network(S / "network/3d_network.yml")
    p = Problem(net, li.read_workload(tmp_path / "w.txt"), li.read_communicator(tmp_path / "c.yml", net),
                li.read_cost_model(S / "cost_model/3d_cost_model.yml"), li.Constraints(total=300))
    B = np.array(dimension_bytes("ALLREDUCE", 1048576000, (16, 8, 32)))
    for method in ("cuts", "slsqp"):
        s = optimize(p, "time", method)
        assert np.array(s.bandwidth_gbps) == pytest.approx(300 * B / B.sum(), rel=1e-4), method
        assert s.time_ns == pytest.approx(1000 + B.sum() / 300, rel=1e-6)


@pytest.mark.parametrize("workload,communicator,dims", CASES)
def test_two_methods_agree_and_beat_the_equal_split(workload, communicator, dims):
    p = _problem(workload, communicator, dims)
    eq = p.time_ns(equal_split(p))
    for objective in ("time", "time-cost"):
        a, b = optimize(p, objective, "cuts"), optimize(p, objective, "slsqp")
        value = (lambda s: s.time_ns) if objective == "time" else (lambda s: s.time_ns * s.cost)
        assert value(a) == pytest.approx(value(b), rel=1e-4), (objective, a, b)
        assert sum(a.bandwidth_gbps) == pytest.approx(500, rel=1e-6)
        if objective == "time":
            assert a.time_ns <= eq * (1 + 1e-9)
            # no other split of the same total does better (a coarse grid of the simplex)
            for split in itertools.product(range(1, 10), repeat=dims - 1):
                if sum(split) < 10:
                    bw = np.array([*split, 10 - sum(split)]) * 50.0
                    assert p.time_ns(bw) >= a.time_ns * (1 - 1e-6)


def test_multiple_constraints_are_honoured():
    p = _problem("GPT_3", "GPT_3_4d", 4, "multiple_constraints")
    for objective, method in itertools.product(("time", "time-cost"), ("cuts", "slsqp")):
        bw = optimize(p, objective, method).bandwidth_gbps
        assert sum(bw) == pytest.approx(1000, rel=1e-6)
        assert bw[0] == pytest.approx(500, rel=1e-6)
        assert bw[0] >= bw[1] * (1 - 1e-6) and bw[1] >= bw[2] * (1 - 1e-6)
        assert bw[2] + bw[3] == pytest.approx(200, rel=1e-6)


def test_bounds_and_an_upper_total():
    net = li.read_network(S / "network/3d_network.yml")
    c = li.Constraints(total_at_most=400, min={2: 50.0}, max={0: 100.0})
    p = _problem("MSFT_1T", "MSFT_1T_3d", 3, c, net)
    bw = optimize(p).bandwidth_gbps
    assert sum(bw) == pytest.approx(400, rel=1e-6)          # more bandwidth is never slower
    assert bw[0] <= 100 * (1 + 1e-6) and bw[2] >= 50 * (1 - 1e-6)


def test_time_cost_trades_time_for_cost():
    p = _problem("ResNet_50", "ResNet_50_4d", 4)
    t, tc = optimize(p, "time"), optimize(p, "time-cost")
    assert tc.cost < t.cost and tc.time_ns > t.time_ns
    assert tc.cost * tc.time_ns < t.cost * t.time_ns


def test_unbounded_and_infeasible_constraints_are_refused():
    net = li.read_network(S / "network/3d_network.yml")
    with pytest.raises(InfeasibleError, match="unbounded"):
        optimize(_problem("GPT_3", "GPT_3_3d", 3, li.Constraints(), net))
    with pytest.raises(InfeasibleError, match="no bandwidths"):
        optimize(_problem("GPT_3", "GPT_3_3d", 3, li.Constraints(total=100, min={0: 200.0}), net))
    with pytest.raises(ValueError, match="objective"):
        optimize(_problem("GPT_3", "GPT_3_3d", 3), "speed")
