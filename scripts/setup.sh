#!/usr/bin/env bash
# One-time (and idempotent) installation for ainic: system simulators, then a .venv with the package.
# Re-running is fast: apt is skipped when the tools are present, pip when pyproject.toml has not changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=()
command -v iverilog >/dev/null || APT_PACKAGES+=(iverilog)
command -v yosys    >/dev/null || APT_PACKAGES+=(yosys)
command -v tshark   >/dev/null || APT_PACKAGES+=(tshark)     # dissector tests (host_driver/models/ainic.lua)
# every Verilator build compiles the same runtime C++: ccache compiles it once (host_driver/sim/runner.py)
command -v ccache   >/dev/null || APT_PACKAGES+=(ccache)
# Verilator's FST waveform writer (ainic demo --waves on Verilator) compiles against lz4 and zlib
[ -f /usr/include/lz4.h ]  || APT_PACKAGES+=(liblz4-dev)
[ -f /usr/include/zlib.h ] || APT_PACKAGES+=(zlib1g-dev)
if [ ${#APT_PACKAGES[@]} -gt 0 ]; then
    echo "setup: installing ${APT_PACKAGES[*]} with apt-get"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then SUDO="sudo"; else
            echo "setup: ERROR: ${APT_PACKAGES[*]} missing and not root (no sudo): install them, then re-run make setup" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" || {
        echo "setup: ERROR: apt-get could not install ${APT_PACKAGES[*]}" >&2; exit 1; }
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PY" -m venv .venv
fi
STAMP=.venv/.ainic-installed
HASH=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$HASH" ]; then
    echo "setup: installing ainic and its test dependencies into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[test,bench,torch]"
    echo "$HASH" > "$STAMP"
fi
.venv/bin/python -m hdl.flow.toolchain --check
