"""``ainic demo --waves FILE`` records the whole RTL run on either simulator, says where, and the trace
opens: an FST reader finds the top's clock toggling every half cycle for the whole run."""

import pytest
import pywellen

from hdl.flow.toolchain import SIMULATORS
from host_driver.cli import main


@pytest.mark.parametrize("sim", [pytest.param(s, marks=pytest.mark.heavy(120 if s == "verilator" else 40))
                                 for s in SIMULATORS])
def test_demo_writes_a_waveform(sim, tmp_path, capsys):
    out = tmp_path / "demo.fst"
    rc = main(["demo", "--sim", sim, "--nodes", "2", "--elements", "300", "--width", "64", "--waves", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed[-3000:]
    assert f"waveform (FST) written to {out}" in printed
    wave = pywellen.Waveform(str(out))
    top = next(s for s in wave.all_scopes() if s.name == "ainic_cluster_n2_w64")   # (under $rootio on Verilator)
    clk = next(v for v in top.vars() if v.name == "clk")
    changes = list(clk.tv)
    half = 2000                                             # ps: the 4 ns clock of the testbenches
    assert len(changes) > 1000 and all(b[0] - a[0] == half for a, b in zip(changes, changes[1:]))
    assert {v for _, v in changes} == {0, 1}
