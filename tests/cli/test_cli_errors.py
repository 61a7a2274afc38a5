"""The command line never throws a traceback at a user and never ignores what it was given (issue 30): each
case a new user hit is a one-line error (exit 2: usage, before anything runs; 1: a run that failed) or works.
All on the golden model: seconds."""

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest

from host_driver import cli
from host_driver.cli import main


def one_line_error(capsys, prefix: str) -> str:
    """stderr is exactly one line starting with ``prefix`` (no traceback); returns it."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix) and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("argv", [
    ["demo", "--sim", "model", "--elements", "1000", "--json", "{missing}/s.json"],
    ["demo", "--sim", "model", "--elements", "1000", "--save", "{missing}/r.npz"],
    ["demo", "--sim", "model", "--elements", "1000", "--pcap", "{missing}/f.pcap"],
    ["demo", "--sim", "verilator", "--elements", "1000", "--waves", "{missing}/w.fst"],
    ["model", "--json", "{missing}/m.json"],
    ["model", "--preset", "smartnic-mlp", "--plot", "{missing}/p.png"],
    ["optimize", "--network", "3d_network", "--workload", "ResNet_50", "--communicator", "ResNet_50_3d",
     "--cost-model", "3d_cost_model", "--json", "{missing}/o.json"],
    ["replay", "--pcap", "{tmp}/any.pcap", "--json", "{missing}/r.json"],
    ["train", "--json", "{missing}/t.json"],
    ["train", "--plot", "{missing}/t.png"],
])
def test_an_output_into_a_missing_folder_is_refused_before_the_run(argv, tmp_path, capsys, monkeypatch):
    """It raised FileNotFoundError after the whole run (minutes of RTL lost): now nothing runs at all."""
    ran = []
    monkeypatch.setattr(cli.demo, "run", lambda args: ran.append(args) or 0)
    argv = [a.format(missing=tmp_path / "nope", tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    assert "the folder" in one_line_error(capsys, f"ainic {argv[0]}: --") and not ran


def test_an_output_that_is_a_folder_is_refused(tmp_path, capsys):
    assert main(["model", "--json", str(tmp_path)]) == 2
    assert "is a folder" in one_line_error(capsys, "ainic model: --json")


def test_a_ring_whose_links_lose_everything_times_out_with_one_line(capsys):
    """`demo --sim model --drop 1.0` raised RuntimeError('link 0: not done after 1e+09 cycles')."""
    assert main(["demo", "--sim", "model", "--elements", "4096", "--drop", "1.0"]) == 1
    line = one_line_error(capsys, "ainic demo: ring allreduce on the model: rank 0 timeout")
    assert "delivered nothing for 1,000,000 cycles" in line


def test_replay_of_a_file_that_is_not_a_capture(tmp_path, capsys):
    bad = tmp_path / "notes.pcap"
    bad.write_text("not a capture\n")
    assert main(["replay", "--pcap", str(bad)]) == 2
    assert "Not a supported capture file" in one_line_error(capsys, f"ainic replay: cannot read pcap {bad}")


def test_a_closed_pipe_ends_quietly():
    """`ainic demo ... | head -1` raised BrokenPipeError in the reader's face."""
    res = subprocess.run(f"{sys.executable} -m host_driver.cli demo --sim model --elements 2000 | head -1",
                         shell=True, capture_output=True, text=True, timeout=120)
    assert res.stdout.startswith("ainic demo: allreduce, 4 nodes") and res.stdout.count("\n") == 1
    assert res.stderr == ""


@pytest.mark.parametrize("argv, message", [
    (["model", "--plot", "x.png"], "--plot draws the speedup table of a training setup: give --preset"),
    (["model", "--preset", "smartnic-mlp", "--elements", "100"], "--elements does not apply"),
    (["model", "--preset", "smartnic-mlp", "--op", "allgather"], "--op does not apply"),
    (["demo", "--sim", "model", "--inputs", "a.npy", "b.npy", "c.npy", "d.npy", "--elements", "500"],
     "--inputs gives the data: --elements and --seed do not apply"),
    (["demo", "--sim", "model", "--fabric", "switch"], "the model backend has no fabric"),
    (["demo", "--sim", "model", "--waves"], "the model backend has no fabric to choose, record"),
    (["demo", "--sim", "model", "--window", "8"], "--window is the switch's slots per job"),
    (["demo", "--sim", "model", "--algorithm", "switch", "--switch-speedup", "2"], "--switch-speedup builds the RTL"),
    (["demo", "--sim", "verilator", "--switch-speedup", "2"], "it needs --algorithm switch"),
    (["model", "--switch-speedup", "2"], "it needs algorithm 'switch', got 'ring'"),
    (["model", "--algorithm", "switch", "--width", "1024", "--switch-speedup", "2"], "wider than any supported"),
    (["model", "--preset", "smartnic-mlp", "--switch-speedup", "2"], "--switch-speedup does not apply"),
    (["demo", "--sim", "verilator", "--algorithm", "switch", "--width", "1024", "--switch-speedup", "2"],
     "wider than any supported width"),
    (["demo", "--sim", "model", "--algorithm", "switch", "--lag", "4"], "--lag is the ring's work order"),
    (["demo", "--sim", "model", "--fault-seed", "3"], "--fault-seed seeds the links' faults"),
    (["demo", "--sim", "model", "--drop", "1.5"], "--drop is a probability in 0 .. 1"),
    (["demo", "--sim", "model", "--leaves", "2"], "leaves (a two-level tree of switches) needs algorithm 'switch'"),
    (["demo", "--sim", "model", "--algorithm", "switch", "--leaves", "2", "--jobs", "2"], "give leaves or jobs"),
    (["demo", "--sim", "model", "--algorithm", "switch", "--nodes", "4", "--leaves", "5"],
     "leaves must be an int in 2 .. 4"),
    (["demo", "--sim", "model", "--algorithm", "switch", "--nodes", "17"], "nodes must be an int in 2 .. 16"),
    (["demo", "--sim", "model", "--algorithm", "switch", "--nodes", "32", "--leaves", "2"],
     "16 on a leaf: a leaf switch holds at most 15"),
    (["demo", "--algorithm", "switch", "--nodes", "32", "--leaves", "4"], "holds at most 16 nodes"),
    (["codec", "x.npy", "--elements", "10"], "a FILE gives the tensor: --elements and --seed do not apply"),
    (["codec", "--elements", "0"], "--elements must be >= 1"),
    (["verilog", "--integration", "--width", "64"], "--top and --width do not apply"),
    (["verilog", "--switch-ports", "17"], "--switch-ports must be in 2 .. 16"),
])
def test_an_option_that_does_not_apply_is_refused(argv, message, capsys):
    assert main(argv) == 2
    assert message in one_line_error(capsys, f"ainic {argv[0]}: ")


@pytest.mark.parametrize("bad, message", [
    (["--nodes", "1"], "nodes must be an int in 2 .. 64"),
    (["--nodes", "100000"], "nodes must be an int in 2 .. 64"),
    (["--nodes", "17", "--algorithm", "switch"], "nodes must be an int in 2 .. 16"),
    (["--packet", "4096"], "packet must be a multiple of 16 in 16 .. 1024"),
    (["--packet", "48", "--width", "1024"], "packet must be a multiple of 32"),
    (["--width", "1024", "--algorithm", "switch", "--packet", "48"], "packet must be a multiple of 32"),
    (["--algorithm", "switch", "--op", "reduce_scatter"], "in-network aggregation runs allreduce only"),
    (["--leaves", "2"], "leaves (a two-level tree of switches) needs algorithm 'switch'"),
    (["--algorithm", "switch", "--nodes", "241", "--leaves", "16"], "nodes must be an int in 2 .. 240"),
    (["--algorithm", "switch", "--nodes", "40", "--leaves", "2"], "20 on a leaf: a leaf switch holds at most 15"),
    (["--algorithm", "switch", "--nodes", "40", "--leaves", "17"], "leaves must be an int in 2 .. 16"),
    (["--elements", "0"], "elements must be an int in 1 .."),
    (["--link-gbps", "0"], "link_gbps must be a positive number"),
    (["--link-latency", "-1"], "link_latency must be an int in 0 .."),
])
def test_demo_and_model_validate_alike(bad, message, capsys):
    """One check (contract.collective.check) for both commands: the same refusal, word for word."""
    assert main(["demo", "--sim", "model", *bad]) == 2
    demo = one_line_error(capsys, "ainic demo: ").removeprefix("ainic demo: ")
    assert main(["model", *bad]) == 2
    model = one_line_error(capsys, "ainic model: ").removeprefix("ainic model: ")
    assert demo == model and message in demo


def test_the_preset_takes_nodes_codec_and_link(tmp_path, capsys):
    """`model --preset smartnic-mlp --nodes 8 --codec bfp4` printed the whole default table."""
    out = tmp_path / "p.json"
    assert main(["model", "--preset", "smartnic-mlp", "--nodes", "8", "--codec", "bfp4", "--link-gbps", "100",
                 "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["nodes"] == [8] and r["assumptions"]["link_gbps"] == 100
    assert set(r["overlap"]["none"]) == {"host ring", "ainic ring bfp4", "ainic switch bfp4"}
    assert "100 Gb/s" in capsys.readouterr().out
    # beyond a switch job's 16 workers the switch has no figure, the ring has one up to its 64
    assert main(["model", "--preset", "smartnic-mlp", "--nodes", "32", "--json", str(out)]) == 0
    table = json.loads(out.read_text())["overlap"]["none"]
    assert table["ainic switch bfp8"]["speedup"] == [None] and table["ainic ring bfp8"]["speedup"][0] > 0
    assert "—" in capsys.readouterr().out


def _every_parser():
    ap = cli.parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return [("ainic", ap)] + [(f"ainic {name}", p) for name, p in sub.choices.items()]


@pytest.mark.parametrize("name, parser", _every_parser(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_option_has_help_and_shows_its_default(name, parser):
    """An option with a default shows it (the help formatter adds it); one without says what its absence means."""
    formatter = parser._get_formatter()
    assert isinstance(formatter, cli.HelpFormatter), name
    for action in parser._actions:
        if not action.option_strings or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        assert action.help and len(action.help) > 10, (name, action.option_strings)
        if action.default not in (None, False):
            shown = formatter._get_help_string(action) % {"default": action.default}
            assert f"(default: {action.default})" in shown, (name, action.option_strings)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("ainic ")


def test_the_codec_ratio_is_rounded_once(capsys):
    """bfp8's ratio is 4 x 16 / 17 = 3.7647: the table said 3.77 (3.765 rounded again), the docs 3.76."""
    assert main(["codec", "--codec", "bfp8", "--elements", "4096"]) == 0
    assert " 3.76 " in capsys.readouterr().out
    assert main(["codec", "--codec", "bfp8", "--elements", "4096", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["ratio"] == 4 * 16 / 17


def test_the_switch_demo_shows_its_own_bus_bound(capsys):
    assert main(["demo", "--sim", "model", "--algorithm", "switch", "--elements", "2048"]) == 0
    out = capsys.readouterr().out
    assert "bus-bandwidth bound S/B" in out and "2(N-1)/N" not in out


def test_the_tree_demo_shows_its_leaves(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["demo", "--sim", "model", "--algorithm", "switch", "--nodes", "5", "--leaves", "2", "--elements",
                 "3000", "--codec", "bfp8", "--drop", "0.02", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "a tree: leaves of ranks [[0, 1, 2], [3, 4]] on a spine" in text and "bit-exact with golden model        yes" in text
    leaves = json.loads(out.read_text())["switch_counters"]["leaves"]
    assert len(leaves) == 2 and all(c["jobs"][0]["down"] == 12 and c["jobs"][0]["up"] >= 12 for c in leaves)
    assert "leaf 1: rounds / partials up / results down / resent" in text


def test_a_run_that_breaks_says_so_in_one_line(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("the simulator died")
    monkeypatch.setattr(cli, "_codec", broken)
    monkeypatch.setattr(cli.demo, "run", broken)
    assert main(["demo", "--sim", "model"]) == 1
    assert "RuntimeError: the simulator died" in one_line_error(capsys, "ainic demo: failed: ")
    monkeypatch.setenv("AINIC_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["demo", "--sim", "model"])


def test_inputs_must_agree_with_dtype_and_each_other(tmp_path, capsys):
    files = []
    for i, (n, dt) in enumerate([(100, np.float32), (100, np.float32), (99, np.float32), (100, np.float32)]):
        files.append(str(tmp_path / f"{i}.npy"))
        np.save(files[-1], np.ones(n, dt))
    assert main(["demo", "--sim", "model", "--inputs", *files]) == 2
    assert "the same number of elements" in one_line_error(capsys, "ainic demo: ")
    np.save(files[2], np.ones(100, np.float64))
    assert main(["demo", "--sim", "model", "--inputs", *files]) == 2
    assert "holds float64, --dtype fp32 needs float32" in one_line_error(capsys, "ainic demo: ")


def test_train_without_the_torch_extra_says_how_to_get_it(monkeypatch, capsys):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["train", "--seeds", "1"]) == 2
    line = one_line_error(capsys, "ainic train: needs the extra ainic[torch] (torch missing)")
    assert "pip install 'ainic[torch]' (make setup installs it)" in line
