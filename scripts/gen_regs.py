#!/usr/bin/env python3
"""Generate docs/registers.md and build/ainic_regs.h from contract/regmap.py, docs/switch_registers.md and
build/ainic_switch_regs.h from contract/switch_regmap.py, and docs/descriptors.md from contract/descriptors.py
(``--check``: only verify that the documents are current)."""

import argparse
import sys
from pathlib import Path

from contract import descriptors
from contract.switch_regmap import SWITCH
from contract.regmap import render_c_header, render_markdown
from hdl.flow.export import build_dir

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "registers.md"
DESC_DOC = ROOT / "docs" / "descriptors.md"
SWITCH_DOC = ROOT / "docs" / "switch_registers.md"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    docs = {DOC: render_markdown(), DESC_DOC: descriptors.render_markdown(), SWITCH_DOC: SWITCH.render_markdown(
        "In RTL the map is the `RegisterBlock` of `SwitchTop` (`hdl/switch/switch_top.py`), exported as "
        "`ainic_switch.v` (docs/integration.md). The values to write for a job come from "
        "`contract.switch_regmap.job_config_value` and `job_ports_values`. C code includes "
        "`build/ainic_switch_regs.h` (`make verilog`).")}
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
    switch_header = build_dir() / "ainic_switch_regs.h"
    switch_header.write_text(SWITCH.render_c_header())
    print(switch_header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
