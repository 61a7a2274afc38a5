"""LIBRA's input files read as LIBRA writes them, ainic's additions, and a precise error for each bad input."""

import pytest

from contract.enums import Codec
from host_driver.perf import libra_inputs as li

S = li.SHIPPED


def test_the_shipped_inputs_read():
    net = li.read_network(S / "network/4d_network.yml")
    assert [d.npus for d in net.dims] == [4, 8, 4, 32] and net.nodes == 4096
    assert [d.topology for d in net.dims] == ["Ring", "FullyConnected", "Ring", "Switch"]
    layers = li.read_workload(S / "workload/GPT_3.txt")
    assert len(layers) == 18 and layers[0].input_grad == li.Phase(9375000, "ALLREDUCE", 805306368)
    comm = li.read_communicator(S / "communicator/GPT_3_4d.yml", net)
    assert comm.groups["Forward"] == (4, 4, -1, -1)
    cost = li.read_cost_model(S / "cost_model/4d_cost_model.yml")
    # a switch dimension pays link, NIC and switch; a ring its links
    assert cost.unit_cost(net.dims[3]) == pytest.approx(7.80004 + 31.60004 + 18.00004)
    assert cost.unit_cost(net.dims[0]) == pytest.approx(2.00001)
    c = li.read_constraints(S / "constraints/multiple_constraints.yml", net)
    assert c.total == 1000 and c.fixed == {0: 500} and c.order == ((0, 1), (1, 2))
    assert c.sums == (((2, 3), "equal", 200.0),)


def test_ainic_dimensions_take_a_codec(tmp_path):
    (tmp_path / "n.yml").write_text("Topology: [AinicRing, 'AinicSwitch:bfp8']\nNpusCount: [4, 8]\n"
                                    "CostDimension: [InterNode, InterPod]\n")
    net = li.read_network(tmp_path / "n.yml")
    assert net.dims[1].codec == Codec.bfp8 and net.dims[0].codec == Codec.none


@pytest.mark.parametrize("text,match", [
    ("Topology: [Ring]\nNpusCount: [4, 2]\nCostDimension: [A]\n", "one entry per dimension"),
    ("Topology: [Torus]\nNpusCount: [4]\nCostDimension: [A]\n", "unknown topology 'Torus'"),
    ("Topology: ['Ring:bfp8']\nNpusCount: [4]\nCostDimension: [A]\n", "only ainic dimensions take a codec"),
    ("Topology: ['AinicRing:bfp9']\nNpusCount: [4]\nCostDimension: [A]\n", "unknown codec 'bfp9'"),
    ("Topology: [Ring]\nNpusCount: [0]\nCostDimension: [A]\n", "positive integer"),
    ("Topology: [Ring]\nCostDimension: [A]\n", "missing 'NpusCount'"),
    ("[1, 2]\n", "mapping"),
])
def test_bad_networks_are_named(tmp_path, text, match):
    (tmp_path / "n.yml").write_text(text)
    with pytest.raises(li.InputError, match=match):
        li.read_network(tmp_path / "n.yml")


@pytest.mark.parametrize("line,match", [
    ("a -1 1 NONE 0 1 NONE 0 1 NONE 0", "12 tokens"),
    ("a -1 1 NONE 0 1 BROADCAST 0 1 NONE 0 0", "unknown collective 'BROADCAST'"),
    ("a -1 x NONE 0 1 NONE 0 1 NONE 0 0", "must be numbers"),
    ("a -1 1 NONE -5 1 NONE 0 1 NONE 0 0", "negative"),
])
def test_bad_workloads_are_named_with_their_line(tmp_path, line, match):
    (tmp_path / "w.txt").write_text("ok -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n" + line + "\n")
    with pytest.raises(li.InputError, match=f"w.txt:2: .*{match}"):
        li.read_workload(tmp_path / "w.txt")


def test_bad_communicators_constraints_and_costs(tmp_path):
    net = li.read_network(S / "network/3d_network.yml")
    (tmp_path / "c.yml").write_text("Forward: [16, -1]\nInputGrad: [16, -1, -1]\nWeightGrad: [16, -1, -1]\n")
    with pytest.raises(li.InputError, match="Forward must list one group size per network dimension"):
        li.read_communicator(tmp_path / "c.yml", net)
    (tmp_path / "c.yml").write_text("Forward: [17, -1, -1]\nInputGrad: [16, -1, -1]\nWeightGrad: [16, -1, -1]\n")
    with pytest.raises(li.InputError, match=r"1..16, got 17"):
        li.read_communicator(tmp_path / "c.yml", net)
    (tmp_path / "k.yml").write_text("total: 10\nspeed: 3\n")
    with pytest.raises(li.InputError, match="unknown keys"):
        li.read_constraints(tmp_path / "k.yml", net)
    (tmp_path / "k.yml").write_text("order: [[0, 5]]\n")
    with pytest.raises(li.InputError, match="not a dimension"):
        li.read_constraints(tmp_path / "k.yml", net)
    (tmp_path / "k.yml").write_text("sums: [{dims: [0, 1]}]\n")
    with pytest.raises(li.InputError, match="a sum is"):
        li.read_constraints(tmp_path / "k.yml", net)
    cost = li.read_cost_model(S / "cost_model/3d_cost_model.yml")
    with pytest.raises(li.InputError, match="lacks Nic"):
        cost.unit_cost(li.Dimension("Switch", 8, "InterNode"))
    with pytest.raises(li.InputError, match="no section 'Mars'"):
        cost.unit_cost(li.Dimension("Ring", 8, "Mars"))
    with pytest.raises(li.InputError, match="No such file"):
        li.read_network(tmp_path / "missing.yml")
