#!/usr/bin/env python3
"""Export every synthesizable top at every supported width to build/verilog/ (``make verilog``)."""

import argparse
import sys
from pathlib import Path

from hdl.flow.export import verilog_dir
from hdl.flow.integration import export_nic_top
from hdl.flow.tops import EXPORT_WIDTHS, TOPS, export


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--top", action="append", choices=sorted(TOPS), help="only this top (repeatable)")
    ap.add_argument("--width", action="append", type=int, choices=EXPORT_WIDTHS, help="only this width")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: build/verilog)")
    args = ap.parse_args(argv)
    out = args.out or verilog_dir()
    for top in args.top or TOPS:
        for width in args.width or EXPORT_WIDTHS:
            print(export(top, width, out))
    if not args.top and not args.width:
        # the integration top: ainic_nic.v (every width behind a DATA_WIDTH parameter) + its manifest
        for path in export_nic_top(out):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
