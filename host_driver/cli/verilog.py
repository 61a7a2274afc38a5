"""``ainic verilog``: the synthesizable Verilog, for vendor tools (docs/integration.md).

With no option it writes what ``make verilog`` does: every block at every width, then the integration tops.
``--integration`` writes only those: ``ainic_nic.v`` (the NIC, flat AXI port names, a DATA_WIDTH parameter)
with its manifest ``ainic_nic.json`` and Verilator waivers ``ainic_nic_lint.vlt``, the wide NIC
``ainic_nic_w1024.v``, and the aggregation switch ``ainic_switch.v`` with ``ainic_switch.json``. ``--top`` and
``--width`` select blocks. Each file is rewritten only when what elaborates it changed.
"""

from pathlib import Path

from contract.in_network import MAX_SWITCH_PORTS, MIN_SWITCH_PORTS, POOL_BITS, SWITCH_DEFAULT
from contract.limits import WIDTHS
from host_driver.cli.common import UsageError


def add_parser(sub, formatter) -> None:
    v = sub.add_parser("verilog", formatter_class=formatter, help="write the Verilog for vendor tools",
                       description=__doc__.split("\n\n")[1].replace("``", ""))
    v.add_argument("--integration", action="store_true",
                   help="only the integration tops: ainic_nic.v (+ .json, lint waivers), ainic_nic_w1024.v, "
                        "ainic_switch.v (+ .json)")
    v.add_argument("--top", action="append", metavar="BLOCK",
                   help="only this block (repeatable): reduction_unit, compressor, decompressor, rx_parser, "
                        "tx_builder, packet_loopback, register_block, dma_engine, nic")
    v.add_argument("--width", action="append", type=int, choices=WIDTHS, help="only this width (repeatable)")
    v.add_argument("--out", metavar="DIR", help="output folder, created if missing (default: build/verilog of a "
                   "checkout, ~/.cache/ainic/verilog of an installed package, $AINIC_BUILD_DIR/verilog if set)")
    v.add_argument("--switch-ports", type=int, default=SWITCH_DEFAULT["ports"],
                   help=f"ainic_switch.v: switch ports, {MIN_SWITCH_PORTS} .. {MAX_SWITCH_PORTS}")
    v.add_argument("--switch-pool", type=int, default=SWITCH_DEFAULT["pool_slots"],
                   help=f"ainic_switch.v: pool slots, a power of two up to {1 << POOL_BITS}")
    v.add_argument("--switch-max-packet", type=int, default=SWITCH_DEFAULT["max_packet"],
                   help="ainic_switch.v: the most elements a slot holds")
    v.set_defaults(func=run, outputs=())


def run(args) -> int:
    from hdl.flow.export import verilog_dir
    from hdl.flow.integration import export_integration
    from hdl.flow.tops import TOPS, export
    unknown = [t for t in args.top or () if t not in TOPS]
    if unknown:
        raise UsageError(f"unknown block {unknown[0]!r}; one of {', '.join(TOPS)}")
    if args.integration and (args.top or args.width):
        raise UsageError("--integration writes the integration tops at every width: --top and --width do not apply")
    switch = (args.switch_ports, args.switch_pool, args.switch_max_packet)
    if (args.top or args.width) and switch != tuple(SWITCH_DEFAULT.values()):
        raise UsageError("--switch-* shape ainic_switch.v, which --top/--width do not write")
    if not MIN_SWITCH_PORTS <= args.switch_ports <= MAX_SWITCH_PORTS:
        raise UsageError(f"--switch-ports must be in {MIN_SWITCH_PORTS} .. {MAX_SWITCH_PORTS}, got {args.switch_ports}")
    if not 1 <= args.switch_pool <= 1 << POOL_BITS or args.switch_pool & (args.switch_pool - 1):
        raise UsageError(f"--switch-pool must be a power of two up to {1 << POOL_BITS}, got {args.switch_pool}")
    out = Path(args.out) if args.out else verilog_dir()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {out}: {exc.strerror}") from None
    if not args.integration:
        for top in args.top or TOPS:
            for width in args.width or WIDTHS:
                print(export(top, width, out))
    if args.integration or not (args.top or args.width):
        try:
            paths = export_integration(out, *switch)
        except ValueError as exc:           # a switch build the RTL refuses (its own check, its own words)
            raise UsageError(f"ainic_switch.v: {exc}") from None
        for path in paths:
            print(path)
    return 0
