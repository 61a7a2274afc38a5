"""The Verilog export cache is keyed on every source file the elaboration imports: a contract value the RTL
reads rebuilds the export, a file it does not read does not."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from hdl.flow import deps, tops

ROOT = Path(__file__).resolve().parents[2]


def test_the_key_covers_what_the_nic_reads():
    files = {str(p.relative_to(ROOT)) for p in deps.source_files(tops.get("nic").module)}
    # the stale-Verilog bug: the NIC reads the credit rules, so they must be part of its key
    assert {"contract/credits.py", "contract/regmap.py", "contract/enums.py", "contract/protocol.py",
            "hdl/link/send_credits.py", "hdl/nic/nic.py", "hdl/stream/axis.py"} <= files
    assert not any(f.startswith(("host_driver/", "hdl/sim/", "hdl/flow/")) for f in files), files


def test_function_local_imports_are_followed():
    # host_driver.sim.cluster imports the simulation runner inside the method that runs the RTL
    files = {str(p.relative_to(ROOT)) for p in deps.source_files("host_driver.sim.cluster")}
    assert "host_driver/sim/runner.py" in files and "hdl/flow/tops.py" in files


EXPORT = "from hdl.flow.tops import export; print(export('tx_builder', 64))"


def _export(root: Path) -> tuple:
    env = {**os.environ, "PYTHONPATH": str(root), "AINIC_BUILD_DIR": str(root / "build")}
    res = subprocess.run([sys.executable, "-c", EXPORT], cwd=root, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    path = Path(res.stdout.strip())
    assert path.is_relative_to(root / "build")
    return path.read_text(), path.stat().st_mtime_ns, path.with_name(path.name + ".digest").read_text()


def test_export_is_rebuilt_when_a_contract_value_changes(tmp_path):
    for name in ("contract", "hdl"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    text, mtime, digest = _export(tmp_path)
    assert "8'h11" in text                                  # IPv4 protocol UDP, in the header it builds

    # a file the tx_builder does not import: nothing is rebuilt
    sim = tmp_path / "hdl" / "sim" / "link_model.py"
    sim.write_text(sim.read_text() + "\n# an edit elsewhere\n")
    assert _export(tmp_path) == (text, mtime, digest)

    # a contract value it reads: rebuilt, with the new value
    proto = tmp_path / "contract" / "protocol.py"
    proto.write_text(proto.read_text().replace("IP_PROTOCOL_UDP = 17", "IP_PROTOCOL_UDP = 18"))
    text2, _, digest2 = _export(tmp_path)
    assert digest2 != digest and text2 != text and "8'h12" in text2
