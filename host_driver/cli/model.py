"""``ainic model``: the calibrated collective time model, and training-time speedups from it.

* ``ainic model --nodes N --elements L --codec C [--op OP] [--width W] [--link-gbps G] ... [--json FILE]``:
  the cycles of one collective, as ``ainic demo --json`` reports them for the RTL (``cycles``, ``time_us``,
  ``bound_cycles``);
* ``ainic model --preset smartnic-mlp [--json FILE] [--plot FILE.png]``: the Intel AI smart NIC paper's setup
  (a 20-layer MLP of 2048 × 2048 fp32, 1,792 samples a node, 28-core Xeon hosts, 40 Gb/s Ethernet): the
  speedup of ainic's ring and switch (each codec) over the hosts' own ring all-reduce, N = 2 to 64, weak scaling,
  with and without overlap; next to the paper's 1.6x at 6 nodes and 2.5x projected at 32.
"""

import json
import sys
from pathlib import Path

from contract import collective
from host_driver.cli.common import UsageError
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
    # up to what one NIC's peer table holds (contract.limits.MAX_RANKS); in-network aggregation up to a
    # switch job's workers (MAX_JOB_WORKERS): beyond, the table says "—"
    "nodes": [2, 4, 6, 8, 16, 32, 64],
    "codecs": ["none", "fp16", "bfp8", "bfp4"],
    "paper": {"6": 1.6, "32": 2.5},
}
PRESETS = {"smartnic-mlp": SMARTNIC_MLP}
#: what --preset takes from the command line: these narrow or change its table; the rest do not apply
PRESET_OPTIONS = ("nodes", "codec", "algorithm", "width", "link_gbps", "clock_mhz", "link_latency")


def add_parser(sub, formatter) -> None:
    m = sub.add_parser("model", formatter_class=formatter,
                       help="collective and training time from the model calibrated on the RTL",
                       description="A collective's cycles from the model fitted to the RTL (make calibrate), never "
                       "below its physical bound; with --preset, the training speedup of ainic's all-reduce over "
                       "the hosts' own. fp32 elements.")
    m.add_argument("--preset", choices=sorted(PRESETS),
                   help="a training setup: the speedup table (docs/performance.md); --nodes, --codec, --algorithm, "
                        "--width, --link-gbps, --clock-mhz and --link-latency narrow or change it")
    collective.add_arguments(m)
    m.add_argument("--json", metavar="FILE", help="write the result here")
    m.add_argument("--plot", metavar="FILE", help="with --preset: the speedup against nodes (PNG)")
    m.set_defaults(func=run, outputs=("json", "plot"))


def run(args) -> int:
    given = collective.resolve(args)
    if args.preset:
        refused = sorted(given - set(PRESET_OPTIONS))
        if refused:
            raise UsageError(f"--preset {args.preset} sets its own gradients and collective: "
                             f"--{refused[0].replace('_', '-')} does not apply")
        return _preset(args, given)
    if args.plot:
        raise UsageError("--plot draws the speedup table of a training setup: give --preset")
    try:
        setup = cm.Setup(args.nodes, args.elements, args.codec, args.op, args.algorithm, args.packet, args.width,
                         args.link_gbps, args.clock_mhz, args.link_latency, leaves=args.leaves,
                         switch_speedup=args.switch_speedup)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _warn_if_stale()
    cycles = round(cm.predict(setup))
    f = setup.features()
    bound = setup.bound_cycles()
    result = {"nodes": setup.nodes, "elements": setup.elements, "codec": setup.codec, "op": setup.op,
              "algorithm": setup.algorithm, "leaves": setup.leaves,
              "switch_speedup": setup.switch_speedup, "packet": setup.packet, "width": setup.width,
              "link_gbps": setup.link_gbps, "clock_mhz": setup.clock_mhz, "link_latency": setup.link_latency,
              "cycles": cycles, "time_us": cycles / setup.clock_mhz,
              "bound_cycles": round(f["wire"]), "datapath_bound_cycles": round(f["datapath"]),
              "efficiency": f["wire"] / cycles, "binding_efficiency": bound / cycles,
              "model": "calibrated on the RTL (host_driver/perf/calibration.json; docs/performance.md)"}
    tree = f" over {setup.leaves} leaf switches and a spine" if setup.leaves else ""
    if setup.switch_speedup > 1:
        tree += f", switch{'es' if setup.leaves else ''} at {setup.width * setup.switch_speedup} bits"
    print(f"{setup.algorithm} {setup.op}{tree}, N = {setup.nodes}, {setup.elements:,} elements, {setup.codec}, "
          f"W = {setup.width}, {setup.link_gbps:g} Gb/s: {cycles:,} cycles = {result['time_us']:,.1f} us at "
          f"{setup.clock_mhz:g} MHz (link bound {result['bound_cycles']:,}, datapath bound "
          f"{result['datapath_bound_cycles']:,}: {result['binding_efficiency']:.3f} of what binds)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def _warn_if_stale() -> None:
    warning = calibration_warning(cm.CALIBRATION)
    if warning:
        print(f"ainic model: warning: {warning}", file=sys.stderr)


def calibration_warning(path) -> str:
    """Why the calibration at ``path`` may not describe this RTL ('' when it was measured on it): its
    ``meta.rtl_digest`` against :func:`hdl.flow.deps.timing_digest` of the sources installed here."""
    from hdl.flow.deps import timing_digest     # the digest reads the sources as text: no Amaranth imported
    try:
        measured = json.loads(Path(path).read_text())["meta"].get("rtl_digest")
    except (OSError, ValueError, KeyError):
        return f"cannot read the calibration {path}"
    if measured is None:
        return "the calibration does not record the RTL it was measured on: run `make calibrate`"
    now = timing_digest()
    if measured != now:
        return (f"the RTL changed since the calibration was measured (digest {now}, calibrated on {measured}): "
                "the prediction may be off; `make calibrate` measures it again, and `make test` checks a few "
                "collectives against it (cocotb_tests/sim/test_model_tracks_rtl.py)")
    return ""


def speedups(preset: dict, codecs=None, algorithms=None, nodes=None, **ainic) -> dict:
    """{overlap: {backend name: {"iteration_ms": [...], "speedup": [...]}}}: each backend's iteration time and its
    speedup over the hosts' ring at each of ``nodes`` (the preset's by default); None where the NIC cannot run
    that many ranks. ``ainic``: :class:`training_model.Ainic` fields (link_gbps, width, clock_mhz, ...)."""
    layers = tm.mlp(preset["layers"], preset["width"], preset["batch_per_node"], preset["host_flops"])
    link = ainic.pop("link_gbps", preset["link_gbps"])
    host = tm.HostRing(link, preset["host_mem_gbps"], preset["host_step_us"])
    return tm.speedup_table(layers, nodes or preset["nodes"], host,
                            tm.ainic_backends(codecs or preset["codecs"], algorithms, link_gbps=link, **ainic))


def _preset(args, given: set) -> int:
    preset = PRESETS[args.preset]
    algorithms = [args.algorithm] if "algorithm" in given else None
    nodes = [args.nodes] if "nodes" in given else None
    if nodes:
        for algorithm in algorithms or cm.ALGORITHMS:
            try:
                collective.check(args.nodes, algorithm=algorithm)
            except ValueError as exc:
                if algorithm == "ring" or algorithms:
                    raise UsageError(str(exc)) from None
    ainic = {k: getattr(args, k) for k in ("width", "link_gbps", "clock_mhz", "link_latency") if k in given}
    if "width" in ainic:
        for algorithm in algorithms or cm.ALGORITHMS:
            try:
                collective.check(2, algorithm=algorithm, width=args.width)
            except ValueError as exc:
                raise UsageError(f"{exc}: give --algorithm ring" if algorithm == "switch" and not algorithms
                                 else str(exc)) from None
    _warn_if_stale()
    table = speedups(preset, [args.codec] if "codec" in given else None, algorithms, nodes, **dict(ainic))
    nodes = nodes or preset["nodes"]
    link = ainic.get("link_gbps", preset["link_gbps"])
    for overlap, rows in table.items():
        print(f"speedup over the hosts' ring all-reduce, overlap {overlap} (weak scaling, {link:g} Gb/s):")
        print(f"  {'nodes':18s}" + "".join(f"{n:>7d}" for n in nodes))
        for name, r in rows.items():
            print(f"  {name:18s}" + "".join("      —" if s is None else f"{s:7.2f}" for s in r["speedup"]))
        host_ms = rows["host ring"]["iteration_ms"]
        print(f"  {'host iteration ms':18s}" + "".join(f"{t:7.0f}" for t in host_ms))
    if any(s is None for rows in table.values() for r in rows.values() for s in r["speedup"]):
        print("—: more ranks than the NIC holds (the ring: 64, a switch job: 16 workers)")
    print("the paper: " + ", ".join(f"{v}x at {k} nodes" for k, v in preset["paper"].items()))
    assumptions = {k: v for k, v in preset.items() if k != "paper"} | {"nodes": nodes, "link_gbps": link}
    result = {"preset": args.preset, "assumptions": assumptions | {"ainic": ainic},
              "paper": preset["paper"], "nodes": nodes, "overlap": table}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        from host_driver.perf.plots import speedup_vs_nodes
        speedup_vs_nodes(result, args.plot)
    return 0


__all__ = ["PRESETS", "SMARTNIC_MLP", "add_parser", "run", "speedups"]
