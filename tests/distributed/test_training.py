"""Training through the backend as users run it: an unchanged DDP script under torchrun, and steps on the
RTL bit-identical to the golden model's."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is the optional extra ainic[torch] (make setup installs it)")

from host_driver.distributed import digits, launch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.heavy(30)
def test_an_unchanged_ddp_script_trains_under_torchrun(tmp_path):
    env = dict(os.environ, AINIC_CODEC="bfp8", AINIC_ALGORITHM="switch")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
           str(launch.free_port()), str(ROOT / "scripts" / "ddp_digits.py"), "--backend", "ainic", "--epochs", "2"]
    # a session of its own: on a timeout the workers go with torchrun
    with subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    accuracy = [float(x.split("accuracy ")[1].split(" %")[0]) for x in lines if x.startswith("epoch ")]
    assert len(accuracy) == 2 and accuracy[-1] > 80, done.stdout
    assert "(ainic, 2 ranks, codec bfp8)" in done.stdout
    assert "weights identical on every rank: True" in lines


@pytest.mark.heavy(90)
def test_steps_on_the_rtl_are_bit_identical_to_the_golden_model():
    # the 8-NIC switch bench at W = 64 that cocotb_tests/sim/test_switch_cluster.py builds
    rows = digits.rtl_check("verilator", nodes=2, steps=2, codecs=["bfp8"], algorithms=["switch"], width=64,
                            bench_nodes=8)
    (row,) = rows
    assert row["identical"], row
    assert row["steps"] == 2 and row["collectives"]["nic"] >= 4 and row["collectives"]["host"] == 0
    assert len(row["cycles"]) == row["collectives"]["nic"] and min(row["cycles"]) > 0
