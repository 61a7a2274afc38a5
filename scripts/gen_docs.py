#!/usr/bin/env python3
"""The figures of README.md and docs/ from their one source each, the measurement files in results/ and the
collective model's calibration: every block between

    <!-- begin generated: NAME ... -->   and   <!-- end generated -->

is rewritten from the renderer NAME below (``--check``: only say which are stale, exit 1; the regression
runs it, tests/test_docs.py). ``make bench``, ``make report`` and ``make calibrate`` run it after they write their
results, so a number measured once appears the same wherever it is quoted: the demo's time, the LUT counts,
the model's accuracy."""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- begin generated: (\S+)[^>]*-->\n)(.*?)(<!-- end generated -->)", re.S)


def _load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


#: make report's tops, as its tables name them
TOPS = {"nic_w64": "NIC, W = 64", "nic_small_w64": "NIC, small build, W = 64", "nic_w512": "NIC, W = 512", "nic_w1024": "NIC, W = 1024 (the wide configuration)",
        "switch_p8_w64": "aggregation switch, 8 ports, W = 64", "switch_p8_w512": "aggregation switch, 8 ports, W = 512"}


def xilinx_rows(keys=None) -> str:
    """results/report.json's ``synth_xilinx``: LUTs, FFs, ... and the share of an Alveo U280, a row a top."""
    xil = _load("report.json")["synth_xilinx"]
    out = ["| top | LUTs | FFs | CARRY4 | LUTRAM | BRAM (RAMB18) | DSP | share of a U280 (LUT / FF / BRAM) |",
           "|---|---|---|---|---|---|---|---|"]
    for key in sorted(keys or xil, key=lambda k: list(TOPS).index(k) if k in TOPS else len(TOPS)):
        r, sh = xil[key], xil[key]["u280_share"]
        family = {"xcup": "UltraScale+", "xc7": "7-series"}[r.get("family", "xc7")]
        out.append(f"| {TOPS.get(key, key)} ({family} cells) | {r['luts']:,} | {r['ffs']:,} | {r['carry4']:,} | {r['lutram']:,} | "
                   f"{r['bram']:,} | {r['dsp']:,} | {sh['luts']:.1%} / {sh['ffs']:.1%} / {sh['bram']:.1%} |")
    return "\n".join(out)


#: the NIC's blocks (the submodules of its core, hdl/nic/nic.py), as the ECP5 table names them
NIC_BLOCKS = {"comp": "compressor", "dec0": "decompressor (each of two)", "engine": "collective engine (with the "
              "reduction unit)", "client": "switch client", "cmd": "command processor", "dma": "DMA engine",
              "rx": "receive parser", "tx": "transmit builder", "link_tx": "link sender", "link_rx": "link receiver",
              "regs": "register block", "loop": "codec loop", "axil_slice": "AXI4-Lite slice",
              "axi_slice": "AXI4 slice", "rx_slice": "receive slice", "tx_slice": "transmit slice",
              "rx_route": "receive route FIFO", "dma_ports": "DMA ports' slices", "comp_ports": "compressor's slices",
              "dec0_ports": "decompressor's slices (each of two)", "rx_out": "receive parser's output slices",
              "tx_in": "transmit builder's input slices"}


#: the 8-port switch's blocks (hdl/switch/aggregation_switch.py; port 0's stand for the eight)
SWITCH_BLOCKS = {"switch.engine0": "aggregation engine (each of 8)", "switch.in0": "ingress (each of 8)",
                 "switch.out0": "egress (each of 8)", "switch.forward": "forwarding queues",
                 "switch.xbar": "packet crossbar", "switch.results": "result bus (one encoder)",
                 "regs": "register block"}


def _cell(name) -> str:
    """A register's name in nextpnr's report without the cell and pin nextpnr appends."""
    return re.sub(r"(_TRELLIS_FF_Q|_TRELLIS|\$DPRAM|\$CCU2|_LUT4|_CCU2C|\.storage).*$", "", name or "").lstrip("\\")


def _ecp5_label(key: str) -> str:
    top, _, block = key.partition(":")
    if not block:
        return f"{TOPS.get(top, top)}, whole"
    if top.startswith("switch"):
        return f"switch: {SWITCH_BLOCKS.get(block, block)} (`{block}`)"
    short = block.rpartition(".")[2]
    return f"{NIC_BLOCKS.get(short, short)} (`{short}`)"


def ecp5_rows() -> str:
    """results/report.json's ``ecp5``: per block (and whole top), the Fmax at each speed grade, the
    resources and the critical path, slowest first."""
    ecp = _load("report.json")["ecp5"]
    grades = sorted({g for e in ecp.values() for g in e.get("speed", {})}, key=lambda g: -int(g))
    parts = {g: d for e in ecp.values() for g, d in e.get("devices", {}).items()}  # (a row may place one grade)
    out = ["| block (W = 64, out of context) | " + " | ".join(f"Fmax (MHz), {parts.get(g, '')} grade {g}" for g in grades)
           + f" | LUT4 | FF | DP16KD | critical path at grade {grades[0] if grades else ''} (start → end; logic + "
           "routing ns) |", "|---|" + "---|" * len(grades) + "---|---|---|---|"]

    def fmax(e):
        return e.get("speed", {}).get(grades[0], {}).get("fmax_mhz") or 0 if grades else 0

    for key, e in sorted(ecp.items(), key=lambda kv: (":" in kv[0], fmax(kv[1]))):
        need = e.get("lut4")
        if "error" in e and not e.get("speed"):
            over = {c: v for c, v in e.get("packed", {}).items() if v["used"] > v["available"]} or \
                ({"LUT4": need} if need and need["used"] > need["available"] else {})
            why = ("does not fit: " + ", ".join(f"{v['used']:,} {c} of {v['available']:,}" for c, v in over.items())
                   if over and not e.get("fits") else "failed: see results/report.json")
            out.append(f"| {_ecp5_label(key)} | {why} |" + " |" * (len(grades) + 3))
            continue
        if not e.get("speed"):              # packed, not placed (make report without --whole)
            p = e.get("packed", {})
            out.append(f"| {_ecp5_label(key)} | " + " | ".join("not placed" for _ in grades)
                       + f" | {p.get('TRELLIS_COMB', {}).get('used', 0):,} | {p.get('TRELLIS_FF', {}).get('used', 0):,} | "
                       f"{p.get('DP16KD', {}).get('used', 0):,} | fits: {e['lut4']['used'] / e['lut4']['available']:.0%} "
                       "of the LUT4s |")
            continue
        u = e.get("utilization", {})
        cp = e["speed"].get(grades[0], {}).get("critical_path", {})
        out.append(f"| {_ecp5_label(key)} | " + " | ".join(_fmax_cell(e["speed"].get(g, {})) for g in grades)
                   + f" | {u.get('TRELLIS_COMB', {}).get('used', 0):,} | {u.get('TRELLIS_FF', {}).get('used', 0):,} | "
                   f"{u.get('DP16KD', {}).get('used', 0):,} | `{_cell(cp.get('source'))}` → `{_cell(cp.get('sink'))}`; "
                   f"{cp.get('logic_ns', 0)} + {cp.get('routing_ns', 0)} |")
    return "\n".join(out)


def _fmax_cell(run: dict) -> str:
    """A grade's Fmax: one run's, or the median of several seeds' with their range (``--seeds``)."""
    if "fmax_mhz" not in run:
        return "—"
    seeds = [v for v in run.get("seeds", {}).values() if v]
    if len(seeds) < 2:
        return str(run["fmax_mhz"])
    return f"{run['fmax_mhz']} (median of {len(seeds)} seeds: {min(seeds)}–{max(seeds)})"


def logic_levels() -> str:
    """results/report.json's ``synth_xilinx`` ``levels``: each block's deepest path in logic levels, a column a
    synthesised top, the blocks over the 250 MHz budget in bold."""
    xil = {k: v for k, v in _load("report.json")["synth_xilinx"].items() if "levels" in v}
    if not xil:
        return "(no logic levels in results/report.json yet: `make report ARGS=\"--only xilinx\"`)"
    tops = sorted(xil, key=lambda k: list(TOPS).index(k) if k in TOPS else len(TOPS))
    budget = next(iter(xil.values()))["levels_at_250"]
    blocks = []
    for key in tops:
        blocks += [b for b in xil[key]["levels"] if b not in blocks]

    def label(block):
        short = block.removeprefix("core.")
        return SWITCH_BLOCKS.get(block, NIC_BLOCKS.get(short, short)) + f" (`{short}`)"
    out = ["| block | " + " | ".join(TOPS.get(k, k) for k in tops) + " |", "|---|" + "---|" * len(tops)]
    for b in blocks:
        cells = []
        for key in tops:
            lv = xil[key]["levels"].get(b)
            cells.append("—" if lv is None else (f"**{lv['levels']}**" if lv["levels"] > budget else str(lv["levels"])))
        out.append(f"| {label(b)} | " + " | ".join(cells) + " |")
    out.append("")
    family = xil[tops[0]].get("levels_family", xil[tops[0]].get("family"))
    out.append(f"Logic levels: LUTs, carry blocks and wide multiplexers on the deepest register-to-register path "
               f"(Yosys `synth_xilinx -family {family}`, hdl/flow/logic_depth.py); in bold, "
               f"more than the {budget} a 250 MHz stage allows on an UltraScale+ -2.")
    return "\n".join(out)


def block_fmax(ecp: dict, top: str, grade: str) -> list:
    """(Fmax, block) of every placed block of one top of results/report.json's ``ecp5`` at one speed grade,
    slowest first."""
    return sorted((e["speed"][grade]["fmax_mhz"], k.partition(":")[2]) for k, e in ecp.items()
                  if k.startswith(f"{top}:") and e.get("speed", {}).get(grade, {}).get("fmax_mhz"))


def clocks_reached() -> str:
    """Which clock each configuration has reached, on which part, and how it was measured (results/report.json)."""
    rep = _load("report.json")
    ecp, xil = rep["ecp5"], rep.get("synth_xilinx", {})

    out = ["| configuration | part | clock reached | how |", "|---|---|---|---|"]
    for top, name in (("nic_w64", "NIC, W = 64 (full and small builds)"), ("switch_p8_w64", "8-port switch, W = 64")):
        for grade, part in (("8", "LFE5UM5G-85F (ECP5, grade 8)"), ("6", "LFE5U-85F (ECP5, grade 6)")):
            low = next(iter(block_fmax(ecp, top, grade)), None)
            if low:
                out.append(f"| {name} | {part} | at most {low[0]} MHz (its slowest block, `{low[1]}`) | each block "
                           "placed and routed alone, out of context |")
    for key, e in ecp.items():
        if ":" not in key and e.get("speed", {}).get("8", {}).get("fmax_mhz"):
            out.append(f"| {TOPS.get(key, key)}, whole | {e['device']} (grade 8) | {e['speed']['8']['fmax_mhz']} MHz | "
                       "placed and routed whole |")
    for key in ("nic_w512", "nic_w1024"):
        lv = xil.get(key, {}).get("levels")
        if lv:
            deep = max(lv.items(), key=lambda kv: kv[1]["levels"])
            out.append(f"| {TOPS.get(key, key)} | UltraScale+ (U280) | not placed (no open place and route): deepest "
                       f"block `{deep[0].removeprefix('core.')}` {deep[1]['levels']} logic levels against the "
                       f"{xil[key]['levels_at_250']} of a 250 MHz stage | Yosys `synth_xilinx`, logic levels |")
    out.append("")
    out.append("Every cycle count of ainic (`make bench`, `ainic demo`, `ainic model`) is a count of cycles; the times "
               "and Gb/s beside them assume the clock given with `--clock-mhz` (default 250 MHz), which no "
               "configuration has reached on a part yet.")
    return "\n".join(out)


def resources() -> str:
    return xilinx_rows() + "\n\n" + ecp5_rows()


def switch_resources() -> str:
    xil = _load("report.json")["synth_xilinx"]
    return xilinx_rows([k for k in ("switch_p8_w512", "switch_p8_w64") if k in xil])


def model_accuracy() -> str:
    """The collective model's error: on the calibration's held-out points, and the check `make test` runs."""
    cal = json.loads((ROOT / "host_driver" / "perf" / "calibration.json").read_text())["meta"]
    rows = _load("model_error.json")["rows"]
    held = [r for r in rows if r["role"] == "held_out"]
    by = {}
    for r in sorted(held, key=lambda r: (r["algorithm"], ["allreduce", "reduce_scatter", "allgather"].index(r["op"]),
                                         r.get("leaves") or 0, r.get("switch_speedup", 1))):
        k = f"{r['algorithm']} {r['op'].replace('_', '-')}" + (" over a tree" if r.get("leaves") else "") \
            + (" of switches twice as wide" if r.get("switch_speedup", 1) > 1 else "")
        by[k] = max(by.get(k, 0.0), abs(r["error"]))
    parts = ", ".join(f"{v:.1%} ({k})" for k, v in by.items())
    return (f"The model's largest error on the {len(held)} calibration points it was not fitted to: {parts} "
            f"(`make calibrate`, {cal['date'][:10]}, `results/model_error.json`). `make test` runs five collectives "
            f"through the RTL that the calibration never measured and fails if the model is more than 5 % off "
            f"any of them (`cocotb_tests/sim/test_model_tracks_rtl.py`).")


def model_error_table() -> str:
    """The calibration's error per algorithm and collective, on its fitted and its held-out points."""
    rows = _load("model_error.json")["rows"]
    out = ["| algorithm and collective | points | fitted points: largest / mean error | held-out points: largest / mean error |",
           "|---|---|---|---|"]
    def group(r):       # a tree's points (leaves: fitted with the switch's, one set of constants) apart
        return r["algorithm"], r["op"], r.get("leaves") or 0, r.get("switch_speedup", 1)
    for alg, op, leaves, speedup in sorted(
            {group(r) for r in rows},
            key=lambda k: (k[0], ["allreduce", "reduce_scatter", "allgather"].index(k[1]), k[2], k[3])):
        cells = []
        for role in ("fit", "held_out"):
            e = [abs(r["error"]) for r in rows if group(r) == (alg, op, leaves, speedup) and r["role"] == role]
            cells.append(f"{max(e):.1%} / {sum(e) / len(e):.1%}" if e else "—")
        n = sum(1 for r in rows if group(r) == (alg, op, leaves, speedup))
        tree = f" over {leaves} leaf switches (the switch's constants)" if leaves else ""
        if speedup > 1:
            tree = f" over {leaves} leaf switches twice as wide as the NICs (held out only)"
        out.append(f"| {alg} {op.upper()}{tree} | {n} | {cells[0]} | {cells[1]} |")
    return "\n".join(out)


def smartnic_table() -> str:
    """`ainic model --preset smartnic-mlp`'s speedups at a few node counts (the shipped calibration)."""
    from host_driver.cli.model import SMARTNIC_MLP, speedups
    nodes = [6, 32, 64]
    table = speedups(SMARTNIC_MLP, nodes=nodes)
    out = ["| overlap | algorithm | codec | " + " | ".join(f"{n} nodes" for n in nodes) + " |",
           "|---|---|---|" + "---|" * len(nodes)]
    for overlap, rows in table.items():
        for name, r in rows.items():
            if name == "host ring" or (overlap == "backward" and not name.endswith("bfp8")):
                continue
            _, algorithm, codec = name.split()
            out.append(f"| {overlap} | {algorithm} | {codec} | "
                       + " | ".join("—" if s is None else f"{s:.2f}x" for s in r["speedup"]) + " |")
    host = table["none"]["host ring"]["iteration_ms"]
    out.append("")
    out.append("The hosts' own iteration: " + ", ".join(f"{t:,.0f} ms at {n} nodes" for n, t in zip(nodes, host))
               + " (no overlap).")
    return "\n".join(out)


def demo_time() -> str:
    """`ainic demo`'s wall time as `make bench` measured it (build cached, golden-model check included)."""
    b = _load("bench.json")
    parts = []
    for key, r in b["demo"].items():
        codec = key.split("_")[1]
        parts.append(f"`{codec}` {r['wall_seconds']:.1f} s ({r['cycles']:,} cycles, {r['sim_seconds']:.1f} s of it "
                     f"simulating: {r['cycles'] / r['sim_seconds']:,.0f} cycles/s)")
    return (f"`ainic demo` wall time, build cached, golden-model check included (`make bench`, key `demo`, commit "
            f"{section_commit(b, 'demo')}): 4 × 1M " + ", ".join(parts) + "; `make demo` runs the `bfp8` one.")


def section_commit(b: dict, section: str) -> str:
    """The commit ``section`` of bench.json was measured at (a part rerun since the full run names its own)."""
    return b["meta"].get("section_commits", {}).get(section, b["meta"]["commit"])


def bench_sources(b: dict) -> str:
    """"commit X" of bench.json, with the sections rerun at other commits."""
    reruns = sorted((c, k) for k, c in b["meta"].get("section_commits", {}).items() if c != b["meta"]["commit"])
    return f"commit {b['meta']['commit']}" + "".join(f"; `{k}` {c}" for c, k in reruns)


def switch_measured() -> str:
    """docs/in_network.md: switch mode against the ring at N = 4 and 8, and its efficiency under loss."""
    from contract.enums import Codec, names
    b = _load("bench.json")
    sw = b["switch_allreduce"]["verilator"]
    out = [f"Commit {section_commit(b, 'switch_allreduce')}:", "",
           "| N | codec | switch cycles | in-network bound | datapath bound | efficiency (what binds) | rank 0 read busy "
           "| ring cycles | speedup | bound allows |",
           "|---|-------|---------------|------------------|----------------|-------------------------|------------------"
           "|-------------|---------|--------------|"]
    for codec in names(Codec):
        for n in (4, 8):
            r = sw.get(f"n{n}_{codec}_L1048576_w512")
            if r is None:
                continue
            busy = r.get("rank0_busy", {}).get("read")
            out.append(f"| {n} | {codec} | {r['cycles']:,} | {r['bound_cycles']:,} | {r['datapath_bound_cycles']:,} | "
                       f"{r['binding_efficiency']:.3f} | {'—' if busy is None else f'{busy:.1%}'} | "
                       f"{r['ring_same_fabric']['cycles']:,} | "
                       f"{r['speedup_over_ring']:.2f}x | {r['ring_bound_ratio']:.2f}x |")
    wide = [(n, codec, sw[f"n{n}_{codec}_L1048576_w1024"]) for codec in names(Codec) for n in (4, 8)
            if f"n{n}_{codec}_L1048576_w1024" in sw]
    if wide:
        out += ["", "The wide NIC (W = 1024; the same switch at 1,024 bits): where the link binds the switch mode, it "
                "must beat the ring by 0.95 × 2(N − 1)/N (issue 33); where its datapath binds (bfp4: its frames "
                "leave faster than the NIC reads them), a switch could beat a ring at its link bound only by that bound "
                "over the datapath bound, less than 2(N − 1)/N:", "",
                "| N | codec | switch cycles | in-network bound | datapath bound | efficiency (what binds) | binds "
                "| ring cycles | speedup | 0.95 × 2(N − 1)/N |",
                "|---|-------|---------------|------------------|----------------|-------------------------|-------"
                "|-------------|---------|-------------------|"]
        for n, codec, r in wide:
            binds = "link" if r["bound_cycles"] >= r["datapath_bound_cycles"] else "datapath"
            out.append(f"| {n} | {codec} | {r['cycles']:,} | {r['bound_cycles']:,} | {r['datapath_bound_cycles']:,} | "
                       f"{r['binding_efficiency']:.3f} | {binds} | {r['ring_same_fabric']['cycles']:,} | "
                       f"{r['speedup_over_ring']:.2f}x | {0.95 * r['ring_bound_ratio']:.3f}x |")
    losses = sorted({r["loss_per_link"] for k, r in sw.items() if "_loss" in k and k.endswith(tuple(
        f"_w512_loss{p:g}" for p in (1e-4, 1e-3, 1e-2)))})
    rows, tree = [], False
    for n in (4, 8):
        for codec in ("none", "bfp8"):
            for suffix, switch in (("", "as its links"), ("_x2", "twice as wide"),
                                   ("_x2_l2", "a tree of two leaves and a spine, twice as wide")):
                got = {p: sw.get(f"n{n}_{codec}_L1048576_w512{suffix}_loss{p:g}") for p in losses}
                if any(got.values()):
                    tree |= suffix.endswith("_l2")
                    rows.append(f"| {n} | {codec} | {switch} | " + " | ".join(
                        "—" if r is None else f"{r['relative_to_lossless']:.3f} ({r['retransmissions']:,} resent)"
                        for r in got.values()) + " |")
    if rows:
        out += ["", "Under loss on every link, both ways (W = 512, the links' seeded drop), efficiency as a share of the "
                "loss-free run's (`results/switch_loss.png`), with the switch as wide as its links and twice as wide "
                "(`switch_speedup` 2)" + (", and N = 8 over a tree of switches twice as wide (every link and trunk "
                                          "lossy)" if tree else "") + ":", "",
                "| N | codec | switch | " + " | ".join(f"{p:.2%} lost" for p in losses) + " |",
                "|---|---|---|" + "---|" * len(losses)] + rows
    return "\n".join(out)


def readme_figures() -> str:
    """The headline figures, each with where it was measured."""
    b, rep = _load("bench.json"), _load("report.json")
    ring, demo = b["allreduce"]["verilator"], b["demo"]
    sw = b["switch_allreduce"]["verilator"]
    loss = b["ring_loss"]["verilator"]
    clock = b["meta"]["clock_mhz"]
    d8, d0 = demo["n4_bfp8_L1048576_w512"], demo["n4_none_L1048576_w512"]
    r8, r0 = ring["n4_bfp8_L1048576_w512"], ring["n4_none_L1048576_w512"]
    w8, w0 = ring["n4_bfp8_L1048576_w1024"], ring["n4_none_L1048576_w1024"]
    xil, ecp = rep["synth_xilinx"], rep["ecp5"]
    fmax, sw_fmax = ({g: [f for f, _ in block_fmax(ecp, top, g)] for g in ("8", "6")}
                     for top in ("nic_w64", "switch_p8_w64"))
    nic64 = ecp.get("nic_w64", {}).get("lut4", {})
    def cells(entry):       # the primitives a synth_xilinx row counts
        return {"xcup": "UltraScale+ cells", "xc7": "7-series cells"}[entry.get("family", "xc7")]
    eff = lambda key: min(ring[f"n{n}_{c}_L1048576_w512"]["binding_efficiency"]  # noqa: E731
                          for n in (4, 8) for c in ("none", "fp16", "bf16", "bfp8", "bfp4") if (n == 4) == key)
    rows = [
        ("`make demo`: 4 × 1M fp32 all-reduce, bfp8, ring, W = 512",
         f"{d8['cycles']:,} cycles = {d8['cycles'] / clock:,.0f} µs at {clock} MHz, "
         f"{r8['binding_efficiency']:.3f} of the bound that binds; {d8['sim_seconds']:.1f} s of simulation "
         f"({d8['wall_seconds']:.1f} s wall) once built"),
        ("the same, uncompressed", f"{d0['cycles']:,} cycles, {r0['efficiency']:.3f} of the link bound; bfp8 is "
                                   f"{d0['cycles'] / d8['cycles']:.2f}x faster"),
        ("every codec, ring, 1M a rank, W = 512", f"N = 4: ≥ {eff(True):.3f} of what binds; N = 8: ≥ {eff(False):.3f}"),
        ("the wide NIC (W = 1024), 4 × 1M", f"bfp8 {w8['cycles']:,} cycles, {w0['cycles'] / w8['cycles']:.2f}x "
                                             f"faster than uncompressed ({w0['cycles']:,})"),
        ("in-network aggregation, uncompressed, 1M a rank",
         f"{sw['n4_none_L1048576_w512']['speedup_over_ring']:.2f}x (N = 4) and "
         f"{sw['n8_none_L1048576_w512']['speedup_over_ring']:.2f}x (N = 8) faster than the ring; with bfp8 "
         f"{sw['n4_bfp8_L1048576_w512']['speedup_over_ring']:.2f}x and {sw['n8_bfp8_L1048576_w512']['speedup_over_ring']:.2f}x"
         + (" (slower)" if min(sw[f"n{n}_bfp8_L1048576_w512"]["speedup_over_ring"] for n in (4, 8)) < 1 else "")),
        ("the ring under loss (N = 4, uncompressed)",
         ", ".join(f"{loss[f'n4_none_L1048576_w512_loss{p}']['relative_to_lossless']:.3f} at {float(p):.2%}"
                   for p in ("0.0001", "0.001", "0.01")) + " of the loss-free speed"),
        ("NIC resources, Yosys `synth_xilinx`",
         f"W = 512: {xil['nic_w512']['luts']:,} LUTs ({cells(xil['nic_w512'])}), {xil['nic_w512']['bram']} RAMB18 "
         f"({xil['nic_w512']['u280_share']['luts']:.1%} of an Alveo U280's LUTs); W = 64: {xil['nic_w64']['luts']:,} "
         f"({cells(xil['nic_w64'])})"),
        ("timing on an ECP5 (LFE5UM5G-85F, nextpnr, each block of the W = 64 NIC)",
         f"{fmax['8'][0]} – {fmax['8'][-1]} MHz per block at speed grade 8 ({fmax['6'][0]} – {fmax['6'][-1]} at "
         f"grade 6), against the {clock} MHz every time above assumes"
         + (f"; the whole W = 64 NIC needs {nic64['used']:,} LUT4s of {nic64['available']:,}" if nic64 else "")),
    ]
    if sw_fmax["8"]:
        rows.append(("the same for each block of the 8-port switch (W = 64)",
                     f"{sw_fmax['8'][0]} – {sw_fmax['8'][-1]} MHz at speed grade 8 ({sw_fmax['6'][0]} – "
                     f"{sw_fmax['6'][-1]} at grade 6)"))
    out = ["| | measured |", "|---|---|"] + [f"| {a} | {v} |" for a, v in rows]
    out.append("")
    out.append(f"Sources: `results/bench.json` (`make bench`, {bench_sources(b)}), `results/report.json` "
               f"(`make report`); the cycles are Verilator's, the microseconds assume the clock.")
    return "\n".join(out)


def _training() -> dict:
    return _load("train_digits.json")


def _gap(s: dict) -> str:
    g = s["points_below_baseline"]
    return "±0.00" if abs(g) < 5e-3 else f"{-g:+.2f}"


def training_accuracy() -> str:
    """results/train_digits.json (``ainic train``): every configuration's final held-out accuracy."""
    t = _training()
    m = t["meta"]
    out = ["| configuration | held-out accuracy % (mean) | min .. max | test loss | points vs gloo fp32 |",
           "|---|---|---|---|---|"]
    for name, s in t["summary"].items():
        out.append(f"| {name} | {100 * s['accuracy_mean']:.2f} | {100 * s['accuracy_min']:.2f} .. "
                   f"{100 * s['accuracy_max']:.2f} | {s['test_loss_mean']:.4f} | {_gap(s)} |")
    sch = m["schedule"]
    summ = t["summary"]

    def worst(pred):
        return max(summ[n]["points_below_baseline"] for n in summ if pred(n))
    bfp8 = worst(lambda n: n.split()[1] == "bfp8")
    bfp4 = worst(lambda n: n.split()[1] == "bfp4" and n.endswith("+EF"))
    loss = {n: summ[n]["test_loss_mean"] for n in summ}
    base = loss["gloo fp32"]
    most = max(loss, key=loss.get)
    out += ["", f"The goals: bfp8 within 0.5 point of gloo fp32 — {'met' if bfp8 <= 0.5 else 'missed'}, the worst "
                f"bfp8 configuration {max(bfp8, 0):.2f} points below; bfp4 with error feedback within 1 point — "
                f"{'met' if bfp4 <= 1 else 'missed'}, {max(bfp4, 0):.2f} below. One held-out image is "
                f"{100 / 450:.2f} points, so on this task the codecs differ in the loss more than in the accuracy: "
                f"the highest held-out loss is {most}'s, {loss[most]:.4f}, {100 * (loss[most] / base - 1):.1f} % "
                f"above gloo fp32's {base:.4f}."]
    out += ["", f"{m['nodes']} ranks, seeds {', '.join(map(str, m['seeds']))}, {sch['epochs']} epochs of "
                f"{sch['batch']} images a rank a step, SGD (lr {sch['lr']:g}, momentum {sch['momentum']:g}); "
                f"{m['parameters']:,} parameters; {m['data']}; {m['backend']}. "
                f"Source: `results/train_digits.json` (`ainic train`, in `make bench`; {m['wall_seconds'] / 60:.0f} "
                "minutes on two cores)."]
    return "\n".join(out)


def training_step_time() -> str:
    """results/train_digits.json: the step time each all-reduce gives, this network and a LIBRA workload."""
    st = _training()["step_time"]
    workloads = [k for k, v in st.items() if isinstance(v, dict) and "overlap" in v]
    names = list(st[workloads[0]]["overlap"]["backward"])
    out = ["| all-reduce | " + " | ".join(f"{w}: step ms (speedup)" for w in workloads) + " |",
           "|---|" + "---|" * len(workloads)]
    for n in names:
        cells = [f"{st[w]['overlap']['backward'][n]['step_ms']:.3f} ({st[w]['overlap']['backward'][n]['speedup']:.2f}x)"
                 for w in workloads]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    parts = [f"{w}: {st[w]['compute_ms']:.3f} ms of compute a step ({st[w]['compute_source']}), "
             f"{st[w]['gradient_bytes'] / 1e6:.3g} MB of gradients" for w in workloads]
    out += ["", f"N = {st['nodes']}, every link {st['link_gbps']:g} Gb/s, the all-reduces overlapping the backward "
                f"pass; {'; '.join(parts)}. The hosts' ring: {st['host']['step_us']:g} µs of software a step, "
                f"{st['host']['mem_gbps']:g} GB/s for its reductions (docs/performance.md)."]
    return "\n".join(out)


def training_rtl() -> str:
    """results/train_rtl.json (``ainic train --sim verilator``): steps on the RTL against the golden model."""
    rows = _load("train_rtl.json")
    out = ["| algorithm | codec | steps | final weights vs the golden model | collectives through the NICs | cycles each |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['algorithm']} | {r['codec']} | {r['steps']} | "
                   f"{'identical, bit for bit' if r['identical'] else 'DIFFERENT'} | {r['collectives']['nic']} | "
                   f"{min(r['cycles']):,} .. {max(r['cycles']):,} |")
    out += ["", f"The digits network on {rows[0].get('nodes', 4)} NICs, Verilator; source: `results/train_rtl.json` "
                "(`ainic train --sim verilator`, in `make bench`)."]
    return "\n".join(out)


def training_summary() -> str:
    """One line for the README: how far each lossy codec lands from gloo fp32."""
    t = _training()
    s = t["summary"]
    pick = [n for n in ("ring bfp8", "ring bfp4", "ring bfp4 +EF", "switch bfp8", "switch bfp4 +EF") if n in s]
    return (f"Training the digits network on {t['meta']['nodes']} ranks through the NICs (golden model, "
            f"{len(t['meta']['seeds'])} seeds): gloo fp32 reaches {100 * s['gloo fp32']['accuracy_mean']:.2f} % "
            "held-out accuracy; " + ", ".join(f"{n} {_gap(s[n])} points" for n in pick)
            + " ([training](docs/training.md)).")


RENDERERS = {"training-accuracy": training_accuracy, "training-step-time": training_step_time,
             "training-summary": training_summary, "training-rtl": training_rtl, "resources": resources, "logic-levels": logic_levels, "clocks-reached": clocks_reached, "switch-resources": switch_resources, "model-accuracy": model_accuracy,
             "model-error-table": model_error_table, "smartnic-table": smartnic_table, "demo-time": demo_time,
             "readme-figures": readme_figures, "switch-measured": switch_measured}


def render(text: str) -> str:
    def one(m):
        name = m.group(2)
        if name not in RENDERERS:
            raise ValueError(f"unknown generated block {name!r}; one of {', '.join(RENDERERS)}")
        return m.group(1) + RENDERERS[name]().rstrip("\n") + "\n" + m.group(4)
    return BLOCK.sub(one, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report stale documents (exit 1)")
    args = ap.parse_args(argv)
    stale = []
    for path in DOCUMENTS:
        text = path.read_text()
        new = render(text)
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new)
    for path in stale:
        print(f"{path.relative_to(ROOT)}: " + ("out of date: run scripts/gen_docs.py" if args.check else "updated"),
              file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
