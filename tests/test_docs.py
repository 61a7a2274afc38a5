"""docs/hardware.md's block index is a contract: every RTL file of the design is in it, and every test file
it names exists (a renamed or deleted test, or a new block without a row, fails here)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RTL_SUBSYSTEMS = ("stream", "arith", "codec", "packet", "host", "engine", "nic", "sim")


def index_rows():
    text = (ROOT / "docs" / "hardware.md").read_text()
    section = text.split("## Block index", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert table[0].startswith("| block | RTL | golden model | tests | doc |"), table[0]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in table[2:]]


def paths(cell: str):
    """The .py files a cell names: a bare name is in the folder of the path before it (`a/b.py`, `c.py`)."""
    folder, out = None, []
    for token in re.findall(r"`([^`]+)`", cell):
        token = token.split()[0]
        if not token.endswith(".py"):
            continue
        if "/" in token:
            folder = Path(token).parent
            out.append(Path(token))
        elif folder is not None:
            out.append(folder / token)
    return out


def test_every_rtl_file_has_a_row():
    named = {p for row in index_rows() for p in paths(row[1])}
    rtl = {p.relative_to(ROOT) for sub in RTL_SUBSYSTEMS for p in (ROOT / "hdl" / sub).glob("*.py")
           if p.name != "__init__.py"}
    assert rtl - named == set(), f"RTL files missing from docs/hardware.md's block index: {sorted(rtl - named)}"
    assert all((ROOT / p).is_file() for p in named), [p for p in named if not (ROOT / p).is_file()]


def test_every_named_test_file_exists():
    named = [p for row in index_rows() for p in paths(row[3])]
    assert len(named) > 30
    missing = [str(p) for p in named if not (ROOT / p).is_file()]
    assert not missing, f"docs/hardware.md names test files that do not exist: {missing}"
