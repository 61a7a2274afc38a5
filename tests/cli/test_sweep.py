"""``ainic sweep`` end to end on the golden model: the table and the plot, a rerun that runs nothing, a dry run,
and the usage errors (one line, exit 2, nothing run)."""

import csv
import json

import pytest

from host_driver.cli import main


@pytest.mark.heavy(15)
def test_sweep_runs_tabulates_plots_and_resumes(tmp_path, capsys):
    out = tmp_path / "s"
    argv = ["sweep", "--sim", "model", "--nodes", "2,4", "--codec", "none,bfp8", "--algorithm", "ring,switch",
            "--op", "allreduce,allgather", "--elements", "4096", "--out", str(out), "--workers", "2",
            "--x", "nodes", "--y", "efficiency", "--by", "codec,algorithm,op"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    # switch allgather is not something a NIC runs: 4 points of 16 left out, with the reason once
    assert "left out 4 points" in printed and "in-network aggregation runs allreduce only" in printed
    with open(out / "table.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 12 and {r["bit_exact"] for r in rows} == {"True"} and {r["status"] for r in rows} == {"ok"}
    assert all(int(r["cycles"]) >= int(r["bound_cycles"]) for r in rows)
    assert len(json.loads((out / "table.json").read_text())) == 12
    assert (out / "plot.png").stat().st_size > 10_000
    assert "efficiency against nodes, 6 lines" in printed
    lines = (out / "points.jsonl").read_text()
    assert main(argv) == 0                                # everything is done: nothing runs again
    assert "12 of 12 points already in" in capsys.readouterr().out
    assert (out / "points.jsonl").read_text() == lines
    assert main(argv[:-6] + ["--nodes", "2,4,8", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("done  ") == 12 and printed.count("to do ") == 6 and "18 points, 12 already done" in printed


@pytest.mark.parametrize("args,message", [
    (["--nodes", "2,x"], "nodes: 'x' is not an int"),
    (["--codec", "zip"], "codec must be one of"),
    (["--algorithm", "switch", "--nodes", "64"], "no point of the grid is one a NIC could run"),
    (["--scheduler", "tcp://127.0.0.1:9", "--workers", "2"], "--workers sizes the LocalCluster"),
    (["--x", "speed"], "--x must be a parameter"),
    (["--by", "nodes,colour"], "--by must name parameters"),
    (["--workers", "0"], "--workers must be >= 1"),
    (["--grid", "missing.toml"], "cannot read missing.toml"),
])
def test_usage_errors(tmp_path, capsys, args, message):
    assert main(["sweep", "--sim", "model", "--out", str(tmp_path / "s"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "s").exists()
