"""docs/hardware.md's block index is a contract: every RTL file of the design is in it, and every test file
it names exists (a renamed or deleted test, or a new block without a row, fails here)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RTL_SUBSYSTEMS = ("stream", "arith", "codec", "packet", "host", "engine", "nic", "switch", "sim")


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


def test_in_network_rule_in_the_docs_is_the_golden_model(rng):
    """docs/in_network.md's NumPy block computes what numerics.exact_sum_f32 and sum_i32 compute."""
    import numpy as np

    from host_driver.models import numerics as nm
    from host_driver.models.vectors import edge_f32_bits

    text = (ROOT / "docs" / "in_network.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    space = {}
    exec(code, space)
    terms = np.stack([edge_f32_bits(rng, 3000) for _ in range(4)])
    terms[1, :500] = terms[0, :500] ^ 0x80000000                     # exact cancellation
    terms[:, 500:600] = 0x80000000                                   # all -0
    terms[:, 600:700] = rng.integers(0x7F000000, 0x7F800000, (4, 100))   # overflow to inf
    with np.errstate(all="ignore"):
        got = space["exact_sum_f32"](terms.view(np.float32)).view(np.uint32)
    want = nm.exact_sum_f32(terms)
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:8]
    ints = rng.integers(-2**31, 2**31, (5, 1000)).astype(np.int32)
    assert np.array_equal(space["sum_i32"](ints), nm.sum_i32(ints)[0])


def test_generated_figures_are_current():
    """Every `<!-- begin generated: ... -->` block of README.md and docs/ is what scripts/gen_docs.py renders from
    results/ now: a figure measured once reads the same wherever it is quoted."""
    import subprocess
    import sys
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr


def _numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


def test_every_lut_count_quoted_is_a_measured_one():
    """A LUT count in prose (README.md, docs/) is one that `make report` or `make bench` recorded: the switch's
    LUTs once read 209,506 in one document and 208,870 in another."""
    import json
    measured = set()
    for name in ("report.json", "bench.json"):
        measured |= set(_numbers(json.loads((ROOT / "results" / name).read_text())))
    quoted = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in re.finditer(r"(\d[\d,]*) (?:LUTs|LUT4s)\b", path.read_text()):
            quoted.append((path.name, int(m.group(1).replace(",", ""))))
    assert len(quoted) >= 5
    stray = [(f, n) for f, n in quoted if n not in measured]
    assert not stray, f"LUT counts that no results file holds: {stray}"


def test_the_builds_table_is_contract_build():
    """docs/hardware.md's "Builds" table says what contract/build.py builds: every shipped build, its codecs,
    switch client, peer table, frame store and CAPS value at W = 64."""
    from contract.build import BUILDS
    text = (ROOT / "docs" / "hardware.md").read_text()
    section = text.split("\n## Builds\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| `")]
    assert sorted(r[0].strip("`") for r in rows) == sorted(BUILDS)
    for name, codecs, switch, table, store, top, caps in rows:
        b = BUILDS[name.strip("`")]
        named = {"all five"} if len(b.codecs) == 5 else {", ".join(c.name for c in sorted(b.codecs))}
        assert codecs in named, (name, codecs)
        assert (switch == "yes") == b.switch and int(table) == b.max_ranks, name
        assert store == f"{b.frame_store_bytes // 1024} KiB", (name, store)
        assert int(caps.strip("`"), 16) == b.caps(64), (name, caps)
        assert top.strip("`") == ("ainic_nic_w<W>" if b.name == "full" else f"ainic_nic_{b.name}_w<W>")
