"""The architecture holds: the layers of docs/contributing.md (checked by import-linter with the contracts in
pyproject.toml) and no import cycle between any two modules, function-local imports included. Both checks
are shown to fail on a scratch copy of the tree with a violation put in."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("contract", "hdl", "host_driver")

# Run in a subprocess so that the tree it checks is whatever PYTHONPATH puts first (a scratch copy).
CYCLES = r"""
import sys, grimp
graph = grimp.build_graph(*sys.argv[1:], include_external_packages=False)
index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in graph.find_modules_directly_imported_by(v):
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        scc = []
        while True:
            w = stack.pop(); on.discard(w); scc.append(w)
            if w == v: break
        if len(scc) > 1: out.append(sorted(scc))
sys.setrecursionlimit(10000)
for v in sorted(graph.modules):
    if v not in index: visit(v)
for scc in out: print(" <-> ".join(scc))
sys.exit(1 if out else 0)
"""


def lint_imports(root: Path):
    env = {**os.environ, "PYTHONPATH": str(root)}
    exe = Path(sys.executable).parent / "lint-imports"
    return subprocess.run([str(exe), "--no-cache"], cwd=root, env=env, capture_output=True, text=True)


def import_cycles(root: Path):
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", CYCLES, *PACKAGES], cwd=root, env=env, capture_output=True,
                          text=True)


def test_layers_hold():
    res = lint_imports(ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout


def test_no_import_cycles():
    res = import_cycles(ROOT)
    assert res.returncode == 0, f"import cycles:\n{res.stdout}{res.stderr[-2000:]}"


@pytest.fixture
def scratch(tmp_path):
    for name in (*PACKAGES, "cocotb_tests", "tests"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


@pytest.mark.parametrize("file, line, contract", [
    ("contract/limits.py", "import numpy", "The contract depends on nothing"),
    ("host_driver/models/allreduce.py", "from host_driver.sim import runner", "Layers"),
    ("hdl/stream/axis.py", "from hdl.engine import ring_sequencer", "RTL subsystems"),
    ("hdl/packet/headers.py", "from host_driver.models import protocol", "The RTL reads the contract"),
    ("host_driver/sim/cluster.py", "from cocotb_tests.nic import scenarios", "Nothing the product runs"),
])
def test_layer_check_catches_a_violation(scratch, file, line, contract):
    path = scratch / file
    path.write_text(path.read_text() + f"\n\ndef _violation():\n    {line}\n")     # function-local counts too
    res = lint_imports(scratch)
    assert res.returncode != 0
    verdict = res.stdout[res.stdout.index(contract):]          # a long contract name wraps over two lines
    verdict = min((verdict.find(v), v) for v in ("KEPT", "BROKEN") if v in verdict)[1]
    assert verdict == "BROKEN", res.stdout[-3000:]


def test_cycle_check_catches_a_cycle(scratch):
    path = scratch / "hdl" / "flow" / "export.py"
    path.write_text(path.read_text() + "\n\ndef _cycle():\n    from hdl.flow import tops\n")
    res = import_cycles(scratch)
    assert res.returncode == 1 and "hdl.flow.export <-> hdl.flow.tops" in res.stdout, res.stdout + res.stderr
