"""``ainic model``: one collective's cycles as ``ainic demo --json`` gives them, and the smart NIC preset's
speedup table and plot."""

import json

import pytest

from host_driver.cli import main
from host_driver.perf import collective_model as cm


def test_cycles_like_the_demo(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["model", "--nodes", "4", "--elements", str(1 << 20), "--codec", "bfp8", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert isinstance(r["cycles"], int) and r["bound_cycles"] < r["cycles"]
    assert r["time_us"] == pytest.approx(r["cycles"] / 250)
    # the RTL's own count of this configuration, from the calibration's points
    measured = [p["cycles"] for p in json.loads(cm.CALIBRATION.read_text())["points"]
                if (p["nodes"], p["elements"], p["codec"], p["op"]) == (4, 1 << 20, "bfp8", "allreduce")]
    assert measured and r["cycles"] == pytest.approx(measured[0], rel=0.05)
    assert "cycles" in capsys.readouterr().out


def test_a_tree_like_the_rtl(tmp_path, capsys):
    """`ainic model --leaves 2`: the cycles the RTL tree took (the calibration's points: 4 NICs over two
    leaves), not one switch's: a leaf's result bus carries every packet twice."""
    out = tmp_path / "t.json"
    argv = ["model", "--algorithm", "switch", "--nodes", "4", "--elements", str(1 << 19), "--codec", "bfp8"]
    assert main(argv + ["--leaves", "2", "--json", str(out)]) == 0
    tree = json.loads(out.read_text())
    assert "allreduce over 2 leaf switches and a spine" in capsys.readouterr().out
    measured = [p["cycles"] for p in json.loads(cm.CALIBRATION.read_text())["points"]
                if p.get("leaves") == 2 and (p["nodes"], p["elements"], p["codec"]) == (4, 1 << 19, "bfp8")]
    assert measured and tree["leaves"] == 2 and tree["cycles"] == pytest.approx(measured[0], rel=0.02)
    assert main(argv + ["--json", str(out)]) == 0
    assert tree["cycles"] > 1.9 * json.loads(out.read_text())["cycles"]
    assert main(argv + ["--nodes", "240", "--leaves", "16", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["cycles"] == pytest.approx(tree["cycles"], rel=0.01)


def test_the_smartnic_preset(tmp_path, capsys):
    png, out = tmp_path / "s.png", tmp_path / "s.json"
    assert main(["model", "--preset", "smartnic-mlp", "--json", str(out), "--plot", str(png)]) == 0
    r = json.loads(out.read_text())
    i6, i32 = r["nodes"].index(6), r["nodes"].index(32)
    for overlap in ("none", "backward"):
        table = r["overlap"][overlap]
        assert table["host ring"]["speedup"] == [1.0] * len(r["nodes"])
        # compression never makes the ring slower than uncompressed
        assert all(b >= n * 0.999 for b, n in zip(table["ainic ring bfp8"]["speedup"],
                                                   table["ainic ring none"]["speedup"]))
    # without overlap the compressed ring shortens every iteration
    for n in (i6, i32):
        assert r["overlap"]["none"]["ainic ring bfp8"]["speedup"][n] > 1
    assert png.read_bytes()[:4] == b"\x89PNG"
    text = capsys.readouterr().out
    assert "1.6x at 6 nodes" in text and "ainic ring bfp8" in text


@pytest.mark.parametrize("args,message", [
    (["--nodes", "1"], "nodes must be"),
    (["--algorithm", "switch", "--op", "allgather"], "allreduce only"),
])
def test_bad_arguments(args, message, capsys):
    assert main(["model", *args]) == 2
    assert message in capsys.readouterr().err


def test_the_model_says_when_the_rtl_is_not_the_one_it_was_calibrated_on(tmp_path, monkeypatch, capsys):
    """The calibration records the digest of the sources that elaborate the NIC and its benches; `ainic model`
    warns on stderr when the installed RTL differs, and says nothing when it is the same."""
    from hdl.flow.deps import timing_digest
    from host_driver.cli import model

    data = json.loads(cm.CALIBRATION.read_text())
    stale = tmp_path / "calibration.json"
    data["meta"]["rtl_digest"] = timing_digest()
    stale.write_text(json.dumps(data))
    assert model.calibration_warning(stale) == ""
    data["meta"]["rtl_digest"] = "0123456789abcdef"
    stale.write_text(json.dumps(data))
    monkeypatch.setattr(cm, "CALIBRATION", stale)
    assert main(["model", "--nodes", "4"]) == 0
    err = capsys.readouterr().err
    assert "warning: the RTL changed since the calibration was measured" in err and "0123456789abcdef" in err
    data["meta"]["rtl_digest"] = None
    stale.write_text(json.dumps(data))
    assert main(["model", "--nodes", "4"]) == 0
    assert "does not record the RTL" in capsys.readouterr().err
