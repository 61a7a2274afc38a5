#!/usr/bin/env python3
"""`make depth`: the deepest register-to-register path of a block, in minutes, with the cells on it.

``make report`` maps whole tops (the NIC at W = 512 in a quarter of an hour, the switch in two) and gives each
block's depth; this maps one block alone through the same ``synth_xilinx -family xcup`` and prints its path:
where it starts (a register, a memory or a port), each cell on it and where it ends. The loop for a timing
change::

    make depth ARGS="nic_w512:dec0,rx"          # two blocks of the NIC at W = 512
    make depth ARGS="nic_w64"                   # every block of the NIC at W = 64
    make depth ARGS="switch_p8_w512:switch.in0" # port 0's ingress of the 8-port switch
    make depth ARGS="decompressor_w1024 --abc9" # a top alone, with Yosys' timing-driven mapping

A spec is ``TOP_wW`` (every block of a NIC or of the switch, or the top itself where it has no blocks) or
``TOP_wW:BLOCK,BLOCK`` (blocks as ``make report --blocks`` names them: the NIC's without ``core.``).
Exits 1 when a block is deeper than ``--limit`` (default: the 7 levels of a 250 MHz UltraScale+ stage).
"""

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from hdl.flow.export import build_dir
from hdl.flow.synth import block_depth
from scripts.report import LEVELS_AT_250, _netlist, nic_blocks, switch_blocks


def modules(spec: str) -> list:
    """The (label, source, module) of each block a spec names (the sources exported here, once a top)."""
    top_key, _, wanted = spec.partition(":")
    if "_w" not in top_key:
        raise ValueError(f"{spec!r}: a spec is TOP_wWIDTH[:BLOCK,...], e.g. nic_w512:dec0,rx")
    source, name = _netlist(top_key)
    width = int(top_key.rpartition("_w")[2])
    if top_key.startswith("switch_p8"):
        known = {b: b for b in switch_blocks(width, (source, name))}
    elif top_key.rpartition("_w")[0] in ("nic", "nic_small", "nic_tight"):
        known = {b: f"core.{b}" for b in nic_blocks(width, source, top_key.rpartition("_w")[0])}
    else:
        known = {}
    if not wanted:
        return [(f"{top_key}:{b}", source, f"{name}.{path}") for b, path in known.items()] or \
            [(top_key, source, name)]
    out = []
    for b in wanted.split(","):
        if b not in known:
            raise ValueError(f"unknown block {b!r} of {top_key}; its blocks: {', '.join(known) or '(none)'}")
        out.append((f"{top_key}:{b}", source, f"{name}.{known[b]}"))
    return out


def _one(job):
    label, source, module, abc9 = job
    return label, block_depth(source, module, build_dir() / "depth", abc9=abc9)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", metavar="TOP_wW[:BLOCK,...]")
    ap.add_argument("--abc9", action="store_true", help="Yosys' timing-driven mapping (synth_xilinx -abc9)")
    ap.add_argument("--limit", type=int, default=LEVELS_AT_250,
                    help=f"levels a block may have (default {LEVELS_AT_250}: a 250 MHz UltraScale+ stage)")
    ap.add_argument("--quiet", action="store_true", help="only each block's levels, not its path")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    try:
        jobs = [(label, src, mod, args.abc9) for spec in args.specs for label, src, mod in modules(spec)]
    except ValueError as exc:
        ap.error(str(exc))
    over = 0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for label, r in pool.map(_one, jobs):
            luts = sum(n for c, n in r["cells"].items() if c.startswith("LUT"))
            mark = "" if r["levels"] <= args.limit else f"  (over {args.limit})"
            over += r["levels"] > args.limit
            print(f"{label}: {r['levels']} levels, {luts:,} LUTs, {r['seconds']} s{mark}", flush=True)
            if not args.quiet and r["path"]:
                print(f"    from {r['start']}")
                for kind, net in r["path"]:
                    print(f"    {kind:8} {net}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
