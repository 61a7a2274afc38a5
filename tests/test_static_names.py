"""Every Python file of the project is free of the mistakes a reader cannot see until the line runs: a name
nothing defines, an f-string without a field, a duplicate dictionary key, a comparison with a literal by
identity (pyflakes). Unused imports and variables are left to review: they cost nothing at run time.

The scripts behind `make bench` and `make report` run for hours and nowhere else, so an undefined name there
(a copied line that read another function's local) was found only an hour into a bench."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = ("contract", "hdl", "host_driver", "scripts", "cocotb_tests", "tests")
#: what pyflakes may say that this check lets pass
TOLERATED = ("imported but unused", "redefinition of unused", "is assigned to but never used",
             "unable to detect undefined names")


def findings() -> list:
    out = subprocess.run([sys.executable, "-m", "pyflakes", *TREES], cwd=ROOT, capture_output=True, text=True)
    return [line for line in (out.stdout + out.stderr).splitlines() if line and not any(t in line for t in TOLERATED)]


def test_no_undefined_names_or_similar_mistakes():
    bad = findings()
    assert not bad, "pyflakes:\n" + "\n".join(bad)


def test_the_check_sees_an_undefined_name(tmp_path, monkeypatch):
    """The check itself: a file reading a name nothing defines is reported."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "bad.py").write_text("def f(st):\n    return trace['cycles']\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "TREES", ("scripts",))
    assert any("undefined name 'trace'" in line for line in findings())
