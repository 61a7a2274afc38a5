"""README.md is true: the commands of "Your first five minutes" print what it shows (run here, on the golden
model and the shipped calibration), and what it links to exists."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
#: a line whose last figure is a solver's tolerance, which varies with the SciPy release: compared up to it
LOOSE = ("agree within",)
NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:e[-+]?\d+)?")


def same(got: str, want: str) -> bool:
    """The same words, and the same numbers to 1e-3 (a solver's last digit may move with the SciPy release that a
    fresh `make setup` installs; the golden model's figures do not, and are equal)."""
    if NUMBER.sub("#", got) != NUMBER.sub("#", want):
        return False
    pairs = zip(NUMBER.findall(got), NUMBER.findall(want))
    return all(abs(float(g.replace(",", "")) - float(w.replace(",", ""))) <= 1e-3 * abs(float(w.replace(",", "")))
               for g, w in pairs)


def shown():
    """(command, output) of every ```console block: `$ .venv/bin/ainic ARGS` and what follows."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", README, re.S):
        first, *rest = block.rstrip("\n").split("\n")
        assert first.startswith("$ .venv/bin/ainic "), first
        out.append((first.removeprefix("$ .venv/bin/ainic ").split(), rest))
    return out


@pytest.mark.parametrize("argv, want", shown(), ids=lambda v: " ".join(v[:2]) if v and isinstance(v[0], str) else "")
def test_the_first_five_minutes_print_what_the_readme_shows(argv, want):
    res = subprocess.run([sys.executable, "-m", "host_driver.cli", *argv], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    got = res.stdout.rstrip("\n").split("\n")
    cut = lambda line: next((line[:line.index(k) + len(k)] for k in LOOSE if k in line), line)  # noqa: E731
    assert len(got) == len(want) and all(same(cut(g.rstrip()), cut(w.rstrip())) for g, w in zip(got, want)), \
        "\n".join(got)


def test_the_comparison_sees_a_changed_figure():
    assert same("ratio 3.76 at 1,024 nodes", "ratio 3.7601 at 1,024 nodes")
    assert not same("ratio 3.77 at 1,024 nodes", "ratio 3.76 at 1,024 nodes")
    assert not same("ratio 3.76 at 1,024 nodes", "ratio 3.76 at 1,025 ranks")


def test_there_is_something_to_check():
    assert {a[0] for a, _ in shown()} >= {"demo", "codec", "model", "optimize"}


def test_every_relative_link_exists():
    links = re.findall(r"\]\(([^)#:]+)\)", README)
    assert len(links) > 10
    missing = [p for p in links if not (ROOT / p).exists()]
    assert not missing, missing
