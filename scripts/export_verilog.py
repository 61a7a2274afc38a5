#!/usr/bin/env python3
"""Export every synthesizable top at every supported width to build/verilog/ (``make verilog``)."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.export import VERILOG_DIR, export  # noqa: E402
from hdl.nic_top import export_nic_top  # noqa: E402
from hdl.tops import EXPORT_WIDTHS, TOPS  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--top", action="append", choices=sorted(TOPS), help="only this top (repeatable)")
    ap.add_argument("--width", action="append", type=int, choices=EXPORT_WIDTHS, help="only this width")
    ap.add_argument("--out", type=Path, default=VERILOG_DIR)
    args = ap.parse_args(argv)
    for top in args.top or TOPS:
        for width in args.width or EXPORT_WIDTHS:
            print(export(top, width, args.out))
    if not args.top and not args.width:
        # the integration top: ainic_nic.v (every width behind a DATA_WIDTH parameter) + its manifest
        for path in export_nic_top(args.out):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
