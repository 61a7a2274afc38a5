"""``ainic_nic.v`` (the integration top) and its manifest: lint-clean at every DATA_WIDTH, elaborates in Yosys,
refuses an unsupported width, and the manifest describes exactly the module's ports."""

import json
import re
import subprocess

import pytest

from contract import regmap as rm
from hdl.flow.integration import export_nic_top
from hdl.flow.synth import lint
from hdl.flow.toolchain import require
from hdl.flow.tops import EXPORT_WIDTHS


@pytest.fixture(scope="module")
def top():
    return export_nic_top()


@pytest.mark.parametrize("width", EXPORT_WIDTHS)
def test_lint_clean_at_every_width(top, width):
    report = lint(top[0], f"-GDATA_WIDTH={width}", "--top-module", "ainic_nic")
    assert report == "", report[:3000]


def test_unsupported_width_fails_elaboration(top):
    assert "ainic_nic_DATA_WIDTH_must_be_64_128_256_or_512" in lint(top[0], "-GDATA_WIDTH=96", "--top-module",
                                                                     "ainic_nic")


def test_yosys_elaborates_the_parameterised_top(top):
    res = subprocess.run([require("yosys"), "-q", "-p", f"read_verilog {top[0]}; chparam -set DATA_WIDTH 64 ainic_nic; "
                          "hierarchy -check -top ainic_nic; stat -top ainic_nic"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def test_manifest_matches_the_module(top):
    v, j = top
    m = json.loads(j.read_text())
    text = v.read_text()
    header = text[text.index("module ainic_nic #("):text.index(");", text.index("module ainic_nic #("))]
    declared = re.findall(r"(input|output)\s+wire\s+(?:\[([^\]]+)-1:0\]\s+|\[(\d+):0\]\s+)?(\w+),?", header)
    got = [(name, d, w if w else (str(int(c) + 1) if c else "1")) for d, w, c, name in declared]
    want = [(p["name"], p["direction"], p["width"]) for p in m["ports"]]
    assert got == want
    names = [p["name"] for p in m["ports"]]
    for prefix in ("s_axil_", "m_axi_", "s_axis_rx_", "m_axis_tx_"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert {"clk", "rst", "irq"} <= set(names)
    assert m["parameters"]["DATA_WIDTH"]["allowed"] == sorted(EXPORT_WIDTHS)
    assert [r["name"] for r in m["registers"]] == [r.name for r in rm.REGISTERS]
    assert m["registers"][0]["reset"] == rm.ID_VALUE
