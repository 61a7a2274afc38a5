"""``ainic train``: the comparison table and its JSON and plot; the RTL check; what it refuses."""

import json

import pytest

from host_driver.cli import main

pytest.importorskip("torch", reason="torch is the optional extra ainic[torch] (make setup installs it)")


@pytest.mark.heavy(30)
def test_train_compares_the_codecs_with_gloo(tmp_path, capsys):
    out, png = tmp_path / "t.json", tmp_path / "t.png"
    rc = main(["train", "--nodes", "2", "--seeds", "1", "--epochs", "2", "--codec", "bfp4", "--algorithm", "ring",
               "--json", str(out), "--plot", str(png)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    d = json.loads(out.read_text())
    assert list(d["summary"]) == ["gloo fp32", "ring bfp4", "ring bfp4 +EF"]
    steps = 2 * (1347 // 2 // 16)
    for name, s in d["summary"].items():
        assert s["ranks_agree"], name
        assert s["accuracy_mean"] > 0.8, (name, s["accuracy_mean"])      # it learned
        assert len(s["curves"]["test_accuracy"]) == 2
        if name != "gloo fp32":
            # every step's gradients went through the NICs, nothing through the host
            assert s["collectives"]["nic"] >= steps and s["collectives"]["host"] == 0, s["collectives"]
    assert all(r["steps"] == steps for r in d["records"])
    # the codec changed the training (bfp4 is 4.5 bits an element), and the table prints each configuration
    assert d["summary"]["ring bfp4"]["test_loss_mean"] != d["summary"]["gloo fp32"]["test_loss_mean"]
    for name in d["summary"]:
        assert f"  {name:16s}" in printed
    st = d["step_time"]
    assert st["digits"]["compute_source"] == "measured here" and st["digits"]["gradient_bytes"] == 4 * 9610
    assert set(st["ResNet_50"]["overlap"]["backward"]) == {"host ring", "ainic ring bfp4", "ainic switch bfp4"}
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize("argv,message", [
    (["--nodes", "1"], "--nodes must be in 2 .. 16, got 1"),
    (["--epochs", "0"], "--epochs must be >= 1, got 0"),
    (["--sim", "verilator", "--plot", "x.png"], "--plot draws the comparison on the golden model"),
])
def test_train_usage_errors(argv, message, capsys):
    assert main(["train", *argv]) == 2
    assert message in capsys.readouterr().err
