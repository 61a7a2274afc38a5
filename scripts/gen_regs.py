#!/usr/bin/env python3
"""Generate docs/registers.md and build/ainic_regs.h from contract/regmap.py, and docs/descriptors.md
from contract/descriptors.py (``--check``: only verify that both documents are current)."""

import argparse
import sys
from pathlib import Path

from contract import descriptors
from contract.regmap import render_c_header, render_markdown
from hdl.flow.export import build_dir

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "registers.md"
DESC_DOC = ROOT / "docs" / "descriptors.md"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    docs = {DOC: render_markdown(), DESC_DOC: descriptors.render_markdown()}
    if args.check:
        stale = [p for p, text in docs.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"{p} is out of date: run `make verilog`", file=sys.stderr)
        return 1 if stale else 0
    for p, text in docs.items():
        p.write_text(text)
        print(p)
    header = build_dir() / "ainic_regs.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(render_c_header(descriptors.render_c_defines()))
    print(header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
