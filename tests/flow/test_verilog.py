"""Every exported top is lint-clean under Verilator -Wall (with justified waivers); every block maps with
synth_xilinx and the whole NIC elaborates in Yosys with its memories inferred; the ECP5 flow of `make report`
places and routes a block and reports its Fmax and critical path."""

import pytest

from hdl.flow.export import build_dir
from hdl.flow.synth import ecp5_fmax, lint, synth_xilinx, yosys_elaborate
from hdl.flow.tops import EXPORT_WIDTHS, NIC_TOPS, TOPS, export, module_name

BLOCKS = sorted(set(TOPS) - set(NIC_TOPS))      # every top but the whole NICs (checked on their own)


@pytest.mark.parametrize("width", EXPORT_WIDTHS)
@pytest.mark.parametrize("top", BLOCKS)
def test_lint_clean(top, width):
    """(The NIC's cores are linted at every width inside ainic_nic.v: tests/flow/test_integration.py.)"""
    report = lint(export(top, width))
    assert report == "", report[:4000]


@pytest.mark.parametrize("top", BLOCKS)
def test_synth_xilinx(top):
    """Every block top maps with synth_xilinx at W = 64, module by module (the whole NIC is mapped by
    `make bench ARGS=--synth`, flattened at the bench's width: over 10 minutes of Yosys at W = 64 even module by
    module, so out of the regression; the NIC's own check is the elaboration below)."""
    width = 64
    cells = synth_xilinx(export(top, width), module_name(top, width), build_dir() / "synth", flatten=False)
    luts = sum(n for cell, n in cells.items() if cell.startswith("LUT"))
    ffs = sum(n for cell, n in cells.items() if cell.startswith("FD"))
    assert luts > 100 and ffs > 50, cells           # a real netlist, not an empty module
    assert not any(c.startswith("$") for c in cells), f"unmapped cells: {cells}"


def test_nic_elaborates():
    """The whole NIC (W = 64) through the step every synthesis tool takes first: Yosys elaborates it, turns
    every process into cells, flattens it and finds no combinational loop, no wire with two drivers and
    nothing used but undriven (``check -assert``), and infers its buffers as memories (block RAM in a
    vendor flow: the receive buffers, the retransmission buffer, the FIFOs), not as flip-flops. Read from
    the RTLIL of the exported netlist: Yosys 0.23's Verilog front end spends minutes on the initialised
    receive buffer."""
    width = 64
    cells = yosys_elaborate(export("nic", width, fmt="rtlil"), module_name("nic", width), build_dir() / "synth")
    assert cells.get("$mem_v2", 0) >= 8, cells
    assert not any(c.startswith("$proc") or c in ("$dlatch", "$sr") for c in cells), cells


def test_ecp5_place_and_route_reports_fmax(tmp_path):
    """`make report`'s ECP5 flow (Yosys synth_ecp5 -abc9, nextpnr-ecp5 out of context) on one fp32 adder lane
    of the W = 64 reduction unit, a block inside a top as the report places the NIC's blocks: it is placed
    and routed, and the report names an Fmax, the cells used and the critical path's ends. Three seeds
    (``make report --seeds 3``): the figure is the median run's, every run's beside it."""
    width = 64
    name = f"{module_name('reduction_unit', width)}.fp0"
    r = ecp5_fmax(export("reduction_unit", width, fmt="rtlil"), name, tmp_path, {6: "25k"}, goal_mhz=100, seeds=3)
    assert "error" not in r, r.get("error")
    s6 = r["speed"]["6"]
    assert "error" not in s6, s6["error"]
    runs = s6["seeds"]
    assert sorted(runs) == ["1", "2", "3"] and all(runs.values()), runs
    assert s6["fmax_mhz"] == sorted(runs.values())[1] and s6["best_mhz"] == max(runs.values())
    for seed in runs:
        log = (tmp_path / f"{name.replace('$', '_')}.s6.seed{seed}.pnr.log").read_text()
        assert "Max frequency" in log            # a log of its own per seed
    (clock, fmax), = s6["clocks"].items()
    assert fmax == s6["fmax_mhz"] and 20 < fmax < 500 and s6["meets_goal"] == (fmax >= 100)
    assert r["utilization"]["TRELLIS_COMB"]["used"] > 300 and r["utilization"]["TRELLIS_FF"]["used"] > 100
    assert r["lut4"]["used"] == r["utilization"]["TRELLIS_COMB"]["used"] and r["fits"]
    cp = s6["critical_path"]
    assert cp["clock"] == clock and cp["source"] and cp["sink"] and cp["logic_ns"] + cp["routing_ns"] > 1


def test_lint_catches_a_bad_file(tmp_path):
    """The lint check is not vacuous: an undriven output fails it."""
    bad = tmp_path / "ainic_bad.v"
    bad.write_text("module ainic_bad(input clk, output [3:0] y);\nendmodule\n")
    assert "UNDRIVEN" in lint(bad)
