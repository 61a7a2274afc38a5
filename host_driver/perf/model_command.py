"""``ainic model``: the calibrated collective time model, and training-time speedups from it.

* ``ainic model --nodes N --elements L --codec C [--op OP] [--width W] [--link-gbps G] ... [--json FILE]``:
  the cycles of one collective, as ``ainic demo --json`` reports them for the RTL (``cycles``, ``time_us``,
  ``bound_cycles``);
* ``ainic model --preset smartnic-mlp [--json FILE] [--plot FILE.png]``: the Intel AI smart NIC paper's setup
  (a 20-layer MLP of 2048 × 2048 fp32, 1,792 samples a node, 28-core Xeon hosts, 40 Gb/s Ethernet): the
  speedup of ainic's ring and switch (each codec) over the hosts' own ring all-reduce, N = 2 to 1,024, weak scaling,
  with and without overlap; next to the paper's 1.6x at 6 nodes and 2.5x projected at 32.
"""

import json
import sys
from pathlib import Path

from contract.enums import Codec, names
from contract.limits import NIC_WIDTHS
from contract.protocol import DEFAULT_P
from host_driver.perf import collective_model as cm
from host_driver.perf import training_model as tm

#: the seed paper's setup and what ainic's model assumes about it (docs/performance.md, "The smart NIC's MLP")
SMARTNIC_MLP = {
    "layers": 20, "width": 2048, "batch_per_node": 1792, "link_gbps": 40.0,
    # a 28-core Xeon: 28 cores x 2.0 GHz x 64 fp32 operations a cycle (two AVX-512 FMA units) is 3.6 TFLOP/s
    # at peak; dense matrix products of this size sustain about half of it
    "host_flops": 1.8e12,
    # the reduction of the hosts' ring (read two chunks, write one) at a single stream's memory bandwidth
    "host_mem_gbps": 20.0,
    # MPI's software cost per ring step (send, receive, synchronise)
    "host_step_us": 10.0,
    "nodes": [2, 4, 6, 8, 16, 32, 64, 128, 256, 512, 1024],
    "paper": {"6": 1.6, "32": 2.5},
}
PRESETS = {"smartnic-mlp": SMARTNIC_MLP}


def add_parser(sub) -> None:
    m = sub.add_parser("model", help="collective and training time from the model calibrated on the RTL")
    m.add_argument("--preset", choices=sorted(PRESETS), help="a training setup: the speedup table")
    m.add_argument("--nodes", type=int, default=4)
    m.add_argument("--elements", type=int, default=1 << 20)
    m.add_argument("--codec", default="none", choices=names(Codec))
    m.add_argument("--op", default="allreduce", choices=cm.OPS)
    m.add_argument("--algorithm", default="ring", choices=cm.ALGORITHMS)
    m.add_argument("--packet", type=int, default=DEFAULT_P)
    m.add_argument("--width", type=int, default=512, choices=NIC_WIDTHS)
    m.add_argument("--link-gbps", type=float, default=80.0)
    m.add_argument("--clock-mhz", type=float, default=250.0)
    m.add_argument("--link-latency", type=int, default=125, help="cycles per link")
    m.add_argument("--json", help="write the result here")
    m.add_argument("--plot", help="--preset: write the speedup against nodes (PNG)")
    m.set_defaults(func=run)


def run(args) -> int:
    try:
        if args.preset:
            return _preset(args)
        setup = cm.Setup(args.nodes, args.elements, args.codec, args.op, args.algorithm, args.packet, args.width,
                         args.link_gbps, args.clock_mhz, args.link_latency)
        cycles = cm.predict(setup)
    except (ValueError, FileNotFoundError) as exc:
        print(f"ainic model: {exc}", file=sys.stderr)
        return 2
    f = setup.features()
    result = {"nodes": setup.nodes, "elements": setup.elements, "codec": setup.codec, "op": setup.op,
              "algorithm": setup.algorithm, "width": setup.width, "link_gbps": setup.link_gbps,
              "clock_mhz": setup.clock_mhz, "cycles": round(cycles), "time_us": round(cycles) / setup.clock_mhz,
              "bound_cycles": round(f["wire"]), "datapath_bound_cycles": round(f["datapath"]),
              "efficiency": f["wire"] / cycles, "model": "calibrated on the RTL (host_driver/perf/calibration.json)"}
    print(f"{setup.algorithm} {setup.op}, N = {setup.nodes}, {setup.elements:,} elements, {setup.codec}, "
          f"W = {setup.width}, {setup.link_gbps:g} Gb/s: {result['cycles']:,} cycles = {result['time_us']:.1f} us "
          f"(link bound {result['bound_cycles']:,}, datapath bound {result['datapath_bound_cycles']:,})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def speedups(preset: dict, codecs=None) -> dict:
    """{overlap: {backend name: [speedup over the host ring at each N]}} and the iteration times."""
    layers = tm.mlp(preset["layers"], preset["width"], preset["batch_per_node"], preset["host_flops"])
    host = tm.HostRing(preset["link_gbps"], preset["host_mem_gbps"], preset["host_step_us"])
    calibrated = cm.load()
    backends = [tm.Ainic(c, preset["link_gbps"], algorithm) for algorithm in cm.ALGORITHMS
                if f"{algorithm}/allreduce" in calibrated for c in (codecs or ("none", "fp16", "bfp8", "bfp4"))]
    out = {}
    for overlap in tm.OVERLAPS:
        base = [tm.iteration_ns(layers, n, host, overlap)["total_ns"] for n in preset["nodes"]]
        table = {host.name: {"iteration_ms": [b / 1e6 for b in base], "speedup": [1.0] * len(base)}}
        for b in backends:
            t = [tm.iteration_ns(layers, n, b, overlap)["total_ns"] for n in preset["nodes"]]
            table[b.name] = {"iteration_ms": [x / 1e6 for x in t], "speedup": [h / x for h, x in zip(base, t)]}
        out[overlap] = table
    return out


def _preset(args) -> int:
    preset = PRESETS[args.preset]
    table = speedups(preset)
    nodes = preset["nodes"]
    for overlap, rows in table.items():
        print(f"speedup over the hosts' ring all-reduce, overlap {overlap} (weak scaling, "
              f"{preset['link_gbps']:g} Gb/s):")
        print(f"  {'nodes':18s}" + "".join(f"{n:>7d}" for n in nodes))
        for name, r in rows.items():
            print(f"  {name:18s}" + "".join(f"{s:7.2f}" for s in r["speedup"]))
        host_ms = rows["host ring"]["iteration_ms"]
        print(f"  {'host iteration ms':18s}" + "".join(f"{t:7.0f}" for t in host_ms))
    print("the paper: " + ", ".join(f"{v}x at {k} nodes" for k, v in preset["paper"].items()))
    result = {"preset": args.preset, "assumptions": {k: v for k, v in preset.items() if k != "paper"},
              "paper": preset["paper"], "nodes": nodes, "overlap": table}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        from host_driver.perf.plots import speedup_vs_nodes
        speedup_vs_nodes(result, args.plot)
    return 0


__all__ = ["PRESETS", "SMARTNIC_MLP", "add_parser", "run", "speedups"]
