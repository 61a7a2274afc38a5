"""``ainic_nic.v`` (the integration top) and its manifest: lint-clean at every DATA_WIDTH, elaborates in Yosys,
refuses an unsupported width, and the manifest describes exactly the module's ports."""

import json
import re
import shutil
import subprocess

import pytest
from amaranth import Shape
from amaranth.lib import wiring

from contract import regmap as rm
from hdl.flow.integration import LINT_WAIVERS, export_nic_top, wrapper
from hdl.flow.synth import lint
from hdl.flow.toolchain import require, sim_env
from hdl.flow.tops import EXPORT_WIDTHS, module_name
from hdl.nic.nic import nic_signature

# one worker takes the module (--dist loadgroup): its fixture exports ainic_nic.v, which the other worker would
# wait for, idle
pytestmark = [pytest.mark.xdist_group("nic_top"), pytest.mark.heavy(200)]   # heavy: the group starts early


@pytest.fixture(scope="module")
def top():
    return export_nic_top()


def verilator_lint(folder, *args):
    """``verilator --lint-only -Wall`` as an integrator runs it, with the waivers shipped beside the top."""
    res = subprocess.run([require("verilator"), "--lint-only", "-Wall", LINT_WAIVERS, "ainic_nic.v", *args],
                         cwd=folder, env=sim_env(), capture_output=True, text=True)
    return res.returncode, res.stdout + res.stderr


@pytest.mark.parametrize("width", EXPORT_WIDTHS)
def test_lint_clean_at_every_width(top, width, tmp_path):
    """With only the two shipped files, in a folder of their own."""
    for f in ("ainic_nic.v", LINT_WAIVERS):
        shutil.copy(top[0].parent / f, tmp_path / f)
    rc, report = verilator_lint(tmp_path, f"-GDATA_WIDTH={width}", "--top-module", "ainic_nic")
    assert rc == 0 and "%Warning" not in report and "%Error" not in report, report[:3000]


# heavy: it runs early and alone, and makes the top (every width's NIC) that the module's other tests then
# find built; two of them at once on two workers would have one wait minutes for the other's export
@pytest.mark.heavy(230)
def test_lint_without_the_waivers_is_not_clean(top):
    """The waivers are what makes it clean (so shipping them matters)."""
    res = subprocess.run([require("verilator"), "--lint-only", "-Wall", "ainic_nic.v", "-GDATA_WIDTH=64",
                          "--top-module", "ainic_nic"], cwd=top[0].parent, env=sim_env(), capture_output=True,
                         text=True)
    assert res.returncode != 0 and "%Warning" in res.stdout + res.stderr


def test_unsupported_width_fails_elaboration(top):
    assert "ainic_nic_DATA_WIDTH_must_be_64_128_256_or_512" in lint(top[0], "-GDATA_WIDTH=96", "--top-module",
                                                                     "ainic_nic")


def _core_stubs() -> str:
    """Blackbox declarations of the four cores' ports, from the signature the cores are built from."""
    out = []
    for w in EXPORT_WIDTHS:
        sig = nic_signature(w)
        ports = [("input", "clk", 1), ("input", "rst", 1)] + [
            ("output" if member.flow == wiring.Out else "input", "__".join(map(str, path)),
             Shape.cast(member.shape).width) for path, member, _ in sig.flatten(sig.create())]
        decl = ",\n".join(f"  {d} wire [{n - 1}:0] {name}" for d, name, n in ports)
        out.append(f"(* blackbox *)\nmodule {module_name('nic', w)} (\n{decl}\n);\nendmodule\n")
    return "\n".join(out)


@pytest.mark.parametrize("width", [*EXPORT_WIDTHS, 96])
def test_yosys_elaborates_the_parameterised_top(top, width, tmp_path):
    """Yosys reads the wrapper at the head of ainic_nic.v, sets DATA_WIDTH, and finds the core it selects
    with every port the wrapper connects (``hierarchy -check``); an unsupported width fails. The cores are
    read as blackbox port declarations: Yosys 0.23's Verilog front end takes minutes over a core's 128 KiB
    receive buffer initialisation (the cores are elaborated by the Verilator lint above at every width, and
    mapped by Yosys in tests/flow/test_verilog.py)."""
    head = wrapper()
    assert top[0].read_text().startswith(head)
    (tmp_path / "wrapper.v").write_text(head)
    (tmp_path / "cores.v").write_text(_core_stubs())
    script = (f"read_verilog -defer wrapper.v; read_verilog cores.v; chparam -set DATA_WIDTH {width} ainic_nic; "
              "hierarchy -check -top ainic_nic; stat -top ainic_nic")
    res = subprocess.run([require("yosys"), "-p", script], cwd=tmp_path, capture_output=True, text=True)
    if width == 96:
        assert res.returncode != 0 and "ainic_nic_DATA_WIDTH_must_be_64_128_256_or_512" in res.stdout + res.stderr
        return
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    used = re.findall(r"^\s+(ainic_nic_w\d+)\s+1$", res.stdout, re.M)
    assert used == [module_name("nic", width)], res.stdout[-2000:]


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
