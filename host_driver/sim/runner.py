"""Build-and-run plumbing shared by every RTL test and the CLI: export, compile once per configuration, run cocotb.

A build directory is kept per (simulator, module), i.e. per configuration; Icarus and Verilator only
rebuild when the exported Verilog changed. Builds are serialised per configuration with a file lock so
pytest-xdist workers never compile the same thing twice at once. The cocotb test module is named by its
dotted path (``cocotb_tests.test_rx_parser``, ``host_driver.sim.replay``); cocotb's runner hands the
simulator this process's ``sys.path``, so whatever this process can import, the simulator can.
"""

import os
import re
import shutil

from cocotb_tools.check_results import get_results
from cocotb_tools.runner import get_runner

from hdl.flow import tops
from hdl.flow.dedup import repeated_modules
from hdl.flow.export import build_dir, file_lock
from hdl.flow.toolchain import SIMULATORS, apply_sim_env

TIMESCALE = ("1ns", "1ps")
#: the trace a run with ``waves`` writes in its run directory (FST on both simulators)
WAVES_FILE = {"icarus": "waves.fst", "verilator": "dump.fst"}


def selected_sims():
    """Simulators to run: ``AINIC_SIM`` (icarus, verilator or all; default all)."""
    want = os.environ.get("AINIC_SIM", "all")
    if want == "all":
        return list(SIMULATORS)
    if want not in SIMULATORS:
        raise ValueError(f"AINIC_SIM must be one of {SIMULATORS} or 'all', got {want!r}")
    return [want]


_BUILT = {}


def use_ccache() -> bool:
    """Verilator's C++ through ccache (``make setup`` installs it; ``AINIC_CCACHE=0`` turns it off): the
    cache is ``$CCACHE_DIR``, else ``build/ccache``."""
    flag = os.environ.get("AINIC_CCACHE", "1")
    if flag not in ("0", "1"):
        raise ValueError(f"AINIC_CCACHE must be 0 or 1, got {flag!r}")
    return flag == "1" and shutil.which("ccache") is not None


def build_top(sim: str, top: str, width: int, waves: bool = False, gates: bool = False):
    """Export, then compile (or find up to date) one configuration; once per process and configuration.
    ``gates``: the top's ECP5 gate-level netlist (``synth_ecp5``, hdl.flow.synth.ecp5_netlist) with Yosys'
    cell models, in place of its RTL."""
    key = (sim, top, width, waves, gates)
    if key not in _BUILT:
        _BUILT[key] = _build(sim, top, width, waves, gates)
    return _BUILT[key]


def _build(sim: str, top: str, width: int, waves: bool, gates: bool = False):
    apply_sim_env()
    spec = tops.get(top)
    name = tops.module_name(top, width)
    if gates:
        from hdl.flow.synth import ecp5_cell_models, ecp5_netlist
        if spec.sources(width):
            raise ValueError(f"{top} instantiates simulation models: it has no gate-level netlist")
        cells = ecp5_cell_models()
        sources = [cells, ecp5_netlist(tops.export(top, width, fmt="rtlil"), name, build_dir() / "gates")]
    else:
        sources = [*spec.sources(width), tops.export(top, width)]
    # AINIC_SIM_CXX_OPT (-O2 unless set): the C++ optimisation of Verilator's model's per-cycle code, in place
    # of Verilator's -Os; its run-once code (construction, initial values: Verilator's "slow" files) is
    # compiled at -O0. -O2 made make demo's 4-NIC W = 512 model about 25 % faster than -Os (side by side,
    # docs/collective_engine.md). The regression sets -O1: an 8-NIC cluster compiles in about 4 minutes on
    # two cores and simulates 4x faster than at -O0 (14,500 against 3,500 ns/s), at -Os speed.
    cxx_opt = os.environ.get("AINIC_SIM_CXX_OPT", "-O2") if sim == "verilator" else ""
    if cxx_opt and not re.fullmatch(r"-O[0-3sg]", cxx_opt):
        raise ValueError(f"AINIC_SIM_CXX_OPT must be a gcc -O level such as -O0 or -Os, got {cxx_opt!r}")
    # A cluster bench's NICs as Verilator hierarchical blocks, each verilated and compiled once as a library
    # (Verilator otherwise writes every instance's scheduled code apart: an 8-NIC bench compiled the NIC eight
    # times). Measured on the regression's cluster tests side by side: 918 s of CPU against 1,479 s, the
    # simulations no slower at W = 64 (about 10 % slower at W = 512, docs/contributing.md).
    # AINIC_SIM_HIER=0 turns it off; traced builds (waves) keep the flat model.
    hier_env = os.environ.get("AINIC_SIM_HIER", "1")
    if hier_env not in ("0", "1"):
        raise ValueError(f"AINIC_SIM_HIER must be 0 or 1, got {hier_env!r}")
    hier = list(spec.instanced(width)) if sim == "verilator" and hier_env == "1" and not waves else []
    build = build_dir() / "sim" / sim / (name + ("-gates" if gates else "") + ("-waves" if waves else "") + cxx_opt
                                         + ("-hier" if hier else ""))
    runner = get_runner(sim)
    build_args = []
    config = ""                             # Verilator configuration file's text (part of the build's stamp)
    if sim == "icarus":
        # Yosys marks every `always @*` with a `reg ... = 0` whose change at time 0 makes the block run once;
        # under -g2012 Icarus initialises such regs before time 0 without an event, so blocks whose inputs
        # never change (constant configuration) would hold X forever. Verilog-2005 semantics keep the event.
        build_args = ["-g2005"] + (["-I", str(cells.parent)] if gates else [])
        if waves:
            # cocotb's own dump module declares a SystemVerilog `string`, which -g2005 refuses: ours is plain
            # Verilog, and the trace is FST as on Verilator (the runner passes vvp -fst)
            dump = build_dir() / "verilog" / f"{name}_waves.v"
            dump.parent.mkdir(parents=True, exist_ok=True)
            dump.write_text(f"module ainic_wave_dump;\n  initial begin\n    $dumpfile(\"{WAVES_FILE[sim]}\");\n"
                            f"    $dumpvars(0, {name});\n  end\nendmodule\n")
            sources.append(dump)
            build_args += ["-s", "ainic_wave_dump"]
    if sim == "verilator":
        # The exported Verilog is lint-clean under -Wall (see tests/test_verilog.py); the cocotb build
        # itself only needs the warnings that matter for simulation.
        build_args = ["-Wno-fatal", "-O3", "--x-assign", "fast", "--x-initial", "fast"]
        if gates:       # the cell models' include files; their specify blocks and initial <= are harmless
            build_args += [f"-I{cells.parent}", "-Wno-SPECIFYIGN", "-Wno-INITIALDLY"]
        # cocotb's runner passes --public-flat-rw, which keeps every internal signal of the design as a
        # VPI-visible variable and stops Verilator from inlining or folding any of them. The testbenches
        # only touch the top level's ports (host memory goes through the backdoor files), so only those are
        # made public; this makes the wide NIC datapaths several times faster to simulate. A bench that
        # watches something inside brings it out as a port (the host bench's ``probe_*``).
        vlt = build_dir() / "verilog" / f"{name}_sim.vlt"
        vlt.parent.mkdir(parents=True, exist_ok=True)
        # Modules the top instantiates several times (a cluster's NICs; the switch's engines and ports, a
        # bench's links, written once by the export's merge) are kept as modules rather than inlined at
        # every instance: Verilator then generates, and the compiler compiles, each of them once.
        repeated = [mod.lstrip("\\") for mod in repeated_modules(sources[-1].read_text())]
        config = (f'`verilator_config\npublic_flat_rw -module "{name}" -var "*"\n'
                  + "".join(f'hier_block -module "{mod}"\n' for mod in hier)
                  + "".join(f'no_inline -module "{mod}"\n' for mod in
                            [*(() if hier else spec.instanced(width)), *repeated]))
        vlt.write_text(config)
        build_args += ["--no-public-flat-rw", str(vlt)] + (["--hierarchical"] if hier else [])
        if waves:
            build_args += ["--trace-fst"]           # cocotb's Verilator main then writes dump.fst
    with file_lock(f"build-{sim}-{name}"):
        # the simulators rebuild when sources change, not when flags do: start over if the flags changed
        stamp = build / "build_args.txt"
        if stamp.exists() and stamp.read_text() != repr(build_args) + config:
            shutil.rmtree(build)
        build.mkdir(parents=True, exist_ok=True)
        stamp.write_text(repr(build_args) + config)
        makeflags = os.environ.get("MAKEFLAGS", "")
        extra = ""
        if cxx_opt:         # variables in MAKEFLAGS override the assignments of Verilator's makefiles
            extra += f" OPT_FAST={cxx_opt} OPT_SLOW=-O0 OPT_GLOBAL={cxx_opt}"
        if sim == "verilator" and use_ccache():
            # every Verilator build compiles the same runtime (verilated.cpp, its VPI and threads, cocotb's
            # main): about 12 s of C++ each, twenty-odd builds in the regression; ccache compiles it once
            extra += " OBJCACHE=ccache"
            os.environ.setdefault("CCACHE_DIR", str(build_dir() / "ccache"))
        if extra:
            os.environ["MAKEFLAGS"] = makeflags + extra
        try:
            runner.build(sources=sources, hdl_toplevel=name, build_dir=build, timescale=TIMESCALE,
                         build_args=build_args, log_file=build / "build.log", waves=waves and sim != "icarus")
        finally:
            os.environ["MAKEFLAGS"] = makeflags
    return runner, build, name


def run(sim: str, top: str, width: int, module: str, testcase=None, env=None, seed=None, tag="test",
        waves: bool = False, gates: bool = False):
    """Run the cocotb tests of ``module`` (a dotted module name) against one top; fail (assert) if any
    cocotb test failed; return the run directory. With ``waves``, the simulator records an FST trace of the
    whole design there (``WAVES_FILE[sim]``); with ``gates``, the top is its ECP5 gate-level netlist."""
    runner, build, name = build_top(sim, top, width, waves, gates)
    test_dir = build / f"run-{module.rpartition('.')[2]}-{tag}-{os.getpid()}"
    extra_env = {
        "AINIC_WIDTH": str(width),
        "AINIC_SIM_NAME": sim,
        "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "INFO"),
        # cocotb installs pytest's assertion rewriter for every imported file matching this pattern, "*.py"
        # by default: numpy, scapy and the driver were re-parsed and recompiled on every run (about 1.6 s
        # of a 4-node demo). None by default; the test suite names its own modules (cocotb_tests/conftest.py).
        "COCOTB_REWRITE_ASSERTION_FILES": os.environ.get("COCOTB_REWRITE_ASSERTION_FILES", ""),
        **(env or {}),
    }
    xml = test_dir / "results.xml"
    try:
        runner.test(test_module=module, hdl_toplevel=name, build_dir=build, test_dir=test_dir,
                    testcase=testcase, extra_env=extra_env, seed=seed, timescale=TIMESCALE, waves=waves,
                    results_xml=str(xml), log_file=test_dir / "sim.log")
    except SystemExit:
        pass                        # the runner exits on a failed test; the results file says which
    log = (test_dir / "sim.log").read_text(errors="replace") if (test_dir / "sim.log").exists() else ""
    assert xml.exists(), f"simulation of {module} on {sim} ended abnormally:\n{_failures(log)}"
    num_tests, num_failed = get_results(xml)
    assert num_tests > 0, f"no cocotb test ran in {module} on {sim}:\n{log[-4000:]}"
    assert num_failed == 0, f"{num_failed}/{num_tests} cocotb tests failed in {module} on {sim} " \
                            f"(log: {test_dir / 'sim.log'}):\n{_failures(log)}"
    return test_dir


def _failures(log: str) -> str:
    """The part of a cocotb log worth reading: from the first failure or error on, plus the seed."""
    lines = [ln for ln in log.splitlines() if "DeprecationWarning" not in ln and "setimmediatevalue" not in ln]
    seed = next((ln.strip() for ln in lines if "Seeding Python random module" in ln or "RANDOM_SEED" in ln), "")
    start = next((i for i, ln in enumerate(lines) if " failed" in ln or "Error" in ln or "FAIL" in ln), 0)
    return "\n".join([seed, *lines[max(start - 5, 0):start + 60]])
