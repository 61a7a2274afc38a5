"""``ainic_switch.v`` (the aggregation switch for vendor tools): lint-clean at every DATA_WIDTH with the shipped
waivers, refuses an unsupported width, its manifest describes exactly the module's ports and the switch's
register map, and Yosys elaborates and checks its core. A small build (2 ports, 16 slots of 64 elements)
keeps the regression short; `make verilog` exports the default one and `make bench ARGS="--switch --synth"` maps
8 ports with synth_xilinx."""

import json
import re
import shutil
import subprocess

import pytest

from contract.switch_regmap import switch_regmap
from hdl.flow.export import build_dir
from hdl.flow.integration import LINT_WAIVERS, export_switch_core, export_switch_top, switch_core
from hdl.flow.synth import yosys_elaborate
from hdl.flow.toolchain import require, sim_env
from hdl.flow.tops import EXPORT_WIDTHS, module_name

# one worker takes the module (`make test` runs --dist loadgroup): its fixture exports the switch at four widths, and the
# other worker would wait on the export lock for it, idle (95 s of each worker in the fresh-clone run)
pytestmark = [pytest.mark.xdist_group("switch_export"), pytest.mark.heavy(150)]   # heavy: the group starts early

BUILD = {"ports": 2, "pool_slots": 16, "max_packet": 64}


@pytest.fixture(scope="module")
def top():
    return export_switch_top(build_dir() / "switch_export", **BUILD)


def lint(folder, *args):
    res = subprocess.run([require("verilator"), "--lint-only", "-Wall", LINT_WAIVERS, "ainic_switch.v",
                          "--top-module", "ainic_switch", *args], cwd=folder, env=sim_env(), capture_output=True,
                         text=True)
    return res.returncode, res.stdout + res.stderr


@pytest.mark.parametrize("width", EXPORT_WIDTHS)
def test_lint_clean_at_every_width(top, width, tmp_path):
    for f in ("ainic_switch.v", LINT_WAIVERS):
        shutil.copy(top[0].parent / f, tmp_path / f)
    rc, report = lint(tmp_path, f"-GDATA_WIDTH={width}")
    assert rc == 0 and "%Warning" not in report and "%Error" not in report, report[:3000]


def test_unsupported_width_fails(top):
    rc, report = lint(top[0].parent, "-GDATA_WIDTH=96")
    assert rc != 0 and "ainic_switch_DATA_WIDTH_must_be_64_128_256_or_512" in report


def test_manifest_matches_the_module(top):
    v, j = top
    m = json.loads(j.read_text())
    text = v.read_text()
    start = text.index("module ainic_switch #(")
    header = text[start:text.index(");", start)]
    declared = re.findall(r"(input|output)\s+wire\s+(?:\[([^\]]+)-1:0\]\s+|\[(\d+):0\]\s+)?(\w+),?", header)
    assert [(name, d, w if w else (str(int(c) + 1) if c else "1")) for d, w, c, name in declared] == \
        [(p["name"], p["direction"], p["width"]) for p in m["ports"]]
    names = {p["name"] for p in m["ports"]}
    assert {"s_axis_0_tdata", "m_axis_1_tuser", "s_axil_awaddr"} <= names and "s_axis_2_tdata" not in names
    assert m["build"] == BUILD and m["registers"][0]["reset"] == 0x41495357
    assert [r["name"] for r in m["registers"]] == [r.name for r in switch_regmap(BUILD["ports"], 4).registers]
    assert [r["count"] for r in m["registers"] if r["name"] == "PORT_IP"] == [2]


@pytest.mark.heavy(40)
def test_yosys_elaborates_the_core():
    """The W = 64 core through Yosys's elaboration and checks: every process turned into cells, the netlist
    checked (no loop, no double driver), the state and accumulator memories inferred. Read from the RTLIL of
    the same netlist, as the NIC's own check is (tests/flow/test_verilog.py): Yosys 0.23's Verilog front end
    took 74 s on this core, its RTLIL front end seconds; the Verilog itself is linted above. (``make report``
    maps an 8-port switch with synth_xilinx.)"""
    name = module_name(switch_core(**BUILD), 64)
    cells = yosys_elaborate(export_switch_core(64, build_dir() / "switch_export", fmt="rtlil", **BUILD), name,
                            build_dir() / "synth")
    assert cells.get("$mem_v2", 0) >= 2 * BUILD["ports"], cells         # per engine: slot state and sums
    assert cells.get("$add", 0) > 100 and cells.get("$dff", 0) > 100, cells
    assert not any(c.startswith("$proc") or c in ("$dlatch", "$sr") for c in cells), cells
