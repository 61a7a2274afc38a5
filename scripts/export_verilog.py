#!/usr/bin/env python3
"""Export every synthesizable top at every supported width to build/verilog/ (``make verilog``), and the NIC at its
wide width (``ainic_nic_w1024.v``: docs/integration.md, "The wide datapath")."""

import argparse
import sys
from pathlib import Path

from contract.limits import WIDE_WIDTH
from hdl.flow.export import verilog_dir
from hdl.flow.integration import SWITCH_DEFAULT, export_nic_top, export_switch_top
from hdl.flow.tops import EXPORT_WIDTHS, TOPS, export


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--top", action="append", choices=sorted(TOPS), help="only this top (repeatable)")
    ap.add_argument("--width", action="append", type=int, choices=EXPORT_WIDTHS, help="only this width")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: build/verilog)")
    ap.add_argument("--switch-ports", type=int, default=SWITCH_DEFAULT["ports"],
                    help="ainic_switch.v: switch ports (2 .. 16; default %(default)s)")
    ap.add_argument("--switch-pool", type=int, default=SWITCH_DEFAULT["pool_slots"],
                    help="ainic_switch.v: pool slots, a power of two (default %(default)s)")
    ap.add_argument("--switch-max-packet", type=int, default=SWITCH_DEFAULT["max_packet"],
                    help="ainic_switch.v: the most elements a slot holds (default %(default)s)")
    args = ap.parse_args(argv)
    out = args.out or verilog_dir()
    for top in args.top or TOPS:
        for width in args.width or EXPORT_WIDTHS:
            print(export(top, width, out))
    if not args.top and not args.width:
        # the wide NIC: a core of its own, not one of ainic_nic.v's DATA_WIDTH values
        print(export("nic", WIDE_WIDTH, out))
        # the integration top: ainic_nic.v (every width behind a DATA_WIDTH parameter) + its manifest
        for path in export_nic_top(out):
            print(path)
        # the aggregation switch: ainic_switch.v (every width behind DATA_WIDTH, one port count) + manifest
        for path in export_switch_top(out, args.switch_ports, args.switch_pool, args.switch_max_packet):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
