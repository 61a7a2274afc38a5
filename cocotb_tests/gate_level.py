"""Gate-level regression: a block's own cocotb tests (its golden-model scoreboard) run on its ECP5 netlist after
``synth_ecp5 -abc9`` (the mapping ``make report`` places), simulated with Yosys' cell models, so that a
synthesis or mapping bug fails a test and not a board (docs/hardware.md, "Gate-level simulation")."""

import re

import pytest

from hdl.flow.export import build_dir
from hdl.flow.synth import ecp5_netlist
from hdl.flow.tops import export, module_name
from host_driver.sim.runner import run, selected_sims

#: the width the gate-level runs are at: the ECP5 timing's (make report)
WIDTH = 64
#: Icarus: it compiles a netlist of 10,000 cells in seconds where Verilator's C++ takes minutes
SIM = "icarus"


def run_gate_level(top: str, module: str, env: dict = None) -> None:
    """Check that ``top``'s netlist is made of ECP5 cells only (no behavioural logic left), then run the
    cocotb tests of ``module`` on it, in the traffic mode that stresses most (idle and backpressure at once)."""
    if SIM not in selected_sims():
        pytest.skip(f"AINIC_SIM excludes {SIM}, which runs the gate-level netlists")
    name = module_name(top, WIDTH)
    text = ecp5_netlist(export(top, WIDTH, fmt="rtlil"), name, build_dir() / "gates").read_text()
    cells = set(re.findall(r"^\s+\\?([A-Z][A-Z0-9_]+) #?\(?", text, re.M))
    assert {"LUT4", "TRELLIS_FF", "CCU2C"} <= cells, f"{name}: not a mapped ECP5 netlist ({sorted(cells)})"
    assert not re.search(r"^\s*always\b", text, re.M), f"{name}: behavioural logic left in the netlist"
    run(SIM, top, WIDTH, module, env={"AINIC_TRAFFIC": "stress", **(env or {})}, tag="gates", gates=True)
