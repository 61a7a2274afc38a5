"""The collective time model: its fit recovers known constants, and the calibration shipped in the repo is
the fit of its own points, within 5 % on the points it was not fitted to."""

import json

import pytest

from host_driver.perf import collective_model as cm


def test_the_fit_recovers_the_constants_it_was_made_from():
    truth = cm.Constants(alpha0=900.0, alpha1=40.0, alpha2=1.0, beta=1.02,
                         gamma={"none": 1.1, "fp16": 1.2, "bfp8": 1.3, "bfp4": 1.25},
                         eta={"none": 0.5, "fp16": 0.6, "bfp8": 0.9, "bfp4": 0.8},
                         delta={"none": 0.2, "fp16": 0.5, "bfp8": 0.4, "bfp4": 0.1})
    points = [(s, truth.cycles(s.features(), s.codec))
              for s in (cm.Setup(n, L, c) for n in (2, 3, 4, 8) for L in (1 << 14, 1 << 17, 1 << 20)
                        for c in ("none", "fp16", "bfp8", "bfp4"))]
    # the compressed codecs are bound by the datapath at small N and by the receive side at large N
    f2, f8 = cm.Setup(2, 1 << 20, "bfp8").features(), cm.Setup(8, 1 << 20, "bfp8").features()
    assert 1.3 * f2["datapath"] > max(f2["wire"], 0.9 * f2["engine"])
    assert 0.9 * f8["engine"] > max(f8["wire"], 1.3 * f8["datapath"])
    got = cm.fit(points)
    assert got.gamma["bfp8"] == pytest.approx(1.3, rel=1e-3) and got.eta["bfp8"] == pytest.approx(0.9, rel=1e-3)
    assert got.beta == pytest.approx(1.02, rel=1e-3) and got.delta["bfp8"] == pytest.approx(0.4, rel=1e-2)
    for s, y in points:
        assert got.cycles(s.features(), s.codec) == pytest.approx(y, rel=1e-4)
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
    with pytest.raises(ValueError, match="allreduce only"):
        cm.Setup(4, 100, op="allgather", algorithm="switch")
    with pytest.raises(ValueError, match="nodes must be"):
        cm.Setup(1, 100)


def test_a_prediction_is_never_below_the_physical_bound():
    """Constants that would predict faster than the link or the datapath allow (issue 30: 4 x 1M `none` came
    out below its link bound) are held at the bound, and the fit never makes a link faster than itself."""
    fast = cm.Constants(alpha0=-5000.0, alpha1=0.0, alpha2=1.0, beta=0.9, gamma={"none": 0.5}, eta={"none": 0.0},
                        delta={"none": 0.0})
    for s in (cm.Setup(4, 1 << 20, "none"), cm.Setup(8, 1 << 16, "none", "reduce_scatter")):
        assert fast.cycles(s.features(), "none") < s.bound_cycles()
        assert cm.predict(s, {cm.key(s): fast}) == s.bound_cycles()
    truth = cm.Constants(alpha0=100.0, alpha1=0.0, alpha2=1.0, beta=0.97, gamma={"none": 0.0}, eta={"none": 0.0},
                         delta={"none": 0.0})
    points = [(s, truth.cycles(s.features(), "none")) for s in (cm.Setup(n, L, "none") for n in (2, 4, 8)
                                                              for L in (1 << 16, 1 << 20))]
    assert cm.fit(points).beta >= 1.0


def test_the_shipped_calibration_is_its_points_fit():
    """The constants in the repo are this code's fit of the points beside them, and the held-out error the
    file records is the one they give: within 5 % (results/model_error.json has the table).

    The fit is a bounded nonlinear least squares over a max() of terms: where it ends depends on the
    SciPy / NumPy release (a fresh `make setup` takes the newest). So the refit must predict every point
    within 1 % of the stored constants (numpy 2.4.6 / scipy 1.17.1 against the file's fit: 0.63 %; a stale
    file, fitted before a change of the model's terms, is off by far more), and its held-out error must stay
    within the limit; the stored constants' own held-out error is exactly the one the file records."""
    data = json.loads(cm.CALIBRATION.read_text())
    points = data["points"]
    setups = [(cm.Setup(**{k: p[k] for k in cm.Setup.__dataclass_fields__}), p) for p in points]
    assert {p["role"] for p in points} == {"fit", "held_out"}
    stored = cm.load()
    worst, worst_refit = {}, {}
    for k in stored:
        fitted = cm.fit([(s, p["cycles"]) for s, p in setups if cm.key(s) == k and p["role"] == "fit"])
        for s, p in setups:
            if cm.key(s) != k:
                continue
            mine, theirs = fitted.cycles(s.features(), s.codec), stored[k].cycles(s.features(), s.codec)
            assert theirs == pytest.approx(mine, rel=1e-2), (k, s)
            if p["role"] == "held_out":
                worst[k] = max(worst.get(k, 0.0), abs(theirs / p["cycles"] - 1))
                worst_refit[k] = max(worst_refit.get(k, 0.0), abs(mine / p["cycles"] - 1))
    assert max(worst.values()) == pytest.approx(data["meta"]["held_out_max_abs_error"], abs=1e-6)
    assert max(worst.values()) <= 0.05 and max(worst_refit.values()) <= 0.05
