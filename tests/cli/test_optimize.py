"""``ainic optimize``: every shipped LIBRA workload with both objectives (27 s in all on an idle machine, not
checked here: a wall-clock bound is for the bench); the JSON the issue names; a plot; precise errors."""

import json

import pytest

from host_driver.cli import main
from tests.perf.test_network_optimizer import CASES


def test_every_shipped_workload_both_objectives(tmp_path, capsys):
    for workload, communicator, dims in CASES:
        for objective in ("time", "time-cost"):
            out = tmp_path / f"{workload}_{dims}_{objective}.json"
            rc = main(["optimize", "--network", f"{dims}d_network", "--workload", workload, "--communicator",
                       communicator, "--cost-model", f"{dims}d_cost_model", "--constraints", "total_bw_500gbps",
                       "--objective", objective, "--json", str(out)])
            assert rc == 0, capsys.readouterr()
            r = json.loads(out.read_text())
            assert len(r["bandwidth_gbps"]) == dims and r["time_ns"] > 0 and r["cost"] > 0
            assert sum(r["bandwidth_gbps"]) == pytest.approx(500, rel=1e-6)
            assert r["methods_agree"] and set(r["methods"]) == {"cuts", "slsqp"}
            if objective == "time":
                assert r["speedup_over_equal_split"] >= 1 - 1e-9
            else:
                assert r["time_cost_gain_over_equal_split"] >= 1 - 1e-9


def test_table_plot_and_total_bw(tmp_path, capsys):
    png = tmp_path / "split.png"
    rc = main(["optimize", "--network", "4d_network", "--workload", "GPT_3", "--communicator", "GPT_3_4d",
               "--cost-model", "4d_cost_model", "--total-bw", "800", "--method", "cuts", "--plot", str(png),
               "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert rc == 0 and "FullyConnected" in out and "speedup" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sum(json.loads((tmp_path / "r.json").read_text())["bandwidth_gbps"]) == pytest.approx(800, rel=1e-6)


@pytest.mark.parametrize("args,message", [
    (["--workload", "GPT_4"], "workload 'GPT_4': no such file, nor a shipped one"),
    (["--total-bw", "-5"], "--total-bw must be positive"),
    (["--constraints", "none_such"], "constraints 'none_such'"),
    ([], "unbounded"),                                          # no total, no bounds
])
def test_bad_arguments_exit_2_with_a_reason(args, message, capsys):
    base = {"--network": "3d_network", "--workload": "GPT_3", "--communicator": "GPT_3_3d",
            "--cost-model": "3d_cost_model"}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    argv = ["optimize"] + [x for kv in base.items() for x in kv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
