#!/usr/bin/env python3
"""Generate docs/registers.md and build/ainic_regs.h from host_driver/regmap.py (``--check``: only verify
that docs/registers.md is current)."""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from host_driver.regmap import render_c_header, render_markdown  # noqa: E402

DOC = ROOT / "docs" / "registers.md"
HEADER = ROOT / "build" / "ainic_regs.h"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    md = render_markdown()
    if args.check:
        if not DOC.exists() or DOC.read_text() != md:
            print(f"{DOC} is out of date: run scripts/gen_regs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(md)
    HEADER.parent.mkdir(parents=True, exist_ok=True)
    HEADER.write_text(render_c_header())
    print(DOC)
    print(HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
