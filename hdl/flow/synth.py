"""Open-tool checks of the exported Verilog: Verilator lint and Yosys ``synth_xilinx`` resource counts."""

import re
import subprocess
from pathlib import Path

from hdl.flow.toolchain import require, sim_env

WAIVERS = Path(__file__).resolve().parent / "lint_waivers.vlt"

# synth_xilinx with its `coarse` step spelt out minus `share`: SAT-based sharing of the codecs' mutually
# exclusive shifters costs minutes (254 s of a 289 s run for the W=64 compressor) for ~10 % fewer LUTs.
_SYNTH = ("read_verilog {src}; synth_xilinx -flatten -top {top} -run :coarse; "
          "techmap -map +/cmp2lut.v -map +/cmp2lcu.v -D LUT_WIDTH=6; alumacc; opt; memory -nomap; opt_clean; "
          "synth_xilinx -flatten -top {top} -run map_memory:; tee -o {stat} stat")


def lint(source: Path, *extra: str) -> str:
    """``verilator --lint-only -Wall`` with the justified waivers (``extra``: more arguments, e.g. ``-GX=1``);
    returns the diagnostics ('' if clean)."""
    res = subprocess.run([require("verilator"), "--lint-only", "-Wall", *extra, str(WAIVERS), str(source)],
                         env=sim_env(), capture_output=True, text=True)
    return (res.stdout + res.stderr).strip() if res.returncode or res.stderr.strip() else ""


def synth_xilinx(source: Path, top: str, workdir: Path) -> dict:
    """Run Yosys synth_xilinx on one exported top; return cell counts by type (LUT6, FDRE, CARRY4, ...)."""
    workdir.mkdir(parents=True, exist_ok=True)
    stat = workdir / f"{top}.stat"
    script = _SYNTH.format(src=source, top=top, stat=stat)
    res = subprocess.run([require("yosys"), "-q", "-p", script], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"yosys synth_xilinx failed for {top}:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    cells = {}
    for line in stat.read_text().splitlines():
        m = re.match(r"\s+(\S+)\s+(\d+)$", line)
        if m:
            cells[m.group(1)] = int(m.group(2))
    return cells
