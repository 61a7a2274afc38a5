"""scripts/report.py's bookkeeping: a run of some rows (``--tops``) replaces those rows, keeps the rest and the
whole run's date and commit, and its rows name the commit they were measured at."""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from scripts import report


def xilinx(key, out):       # (named as the job it stands for: --tops picks jobs by name)
    report._store(out, "synth_xilinx", key, {"luts": 7, "commit": report._commit()})


@pytest.fixture
def fake_jobs(monkeypatch):
    """report.main with stand-in syntheses, in threads, no plot; the jobs it knows are set by the test."""
    monkeypatch.setattr(report, "xilinx", xilinx)
    monkeypatch.setattr(report, "jobs", lambda: report.JOBS)
    monkeypatch.setattr(report, "ProcessPoolExecutor", ThreadPoolExecutor)
    monkeypatch.setattr(report, "plot_fmax", lambda *a: None)
    return lambda keys: monkeypatch.setattr(report, "JOBS", [(xilinx, k) for k in keys])


def test_a_run_of_one_top_keeps_the_rest_of_the_report_and_its_commit(tmp_path, fake_jobs):
    out = tmp_path / "report.json"
    before = {"meta": {"date": "2026-01-01T00:00:00+00:00", "commit": "aaaaaaa", "yosys": "old"},
              "synth_xilinx": {"nic_w512": {"luts": 1, "commit": "aaaaaaa"},
                               "switch_p8_w512": {"luts": 2, "commit": "aaaaaaa"}},
              "ecp5": {"nic_w64:core.rx": {"commit": "aaaaaaa"}}}
    out.write_text(json.dumps(before))
    fake_jobs(["nic_w512", "switch_p8_w512"])
    assert report.main(["--tops", "switch_p8_w512", "--out", str(out)]) == 0
    after = json.loads(out.read_text())
    assert after["meta"]["date"] == before["meta"]["date"] and after["meta"]["commit"] == "aaaaaaa"
    assert after["meta"]["yosys"] == report.yosys_version()
    assert after["synth_xilinx"]["nic_w512"] == before["synth_xilinx"]["nic_w512"]
    assert after["synth_xilinx"]["switch_p8_w512"] == {"luts": 7, "commit": report._commit()}
    assert after["ecp5"] == before["ecp5"]


def test_a_whole_run_dates_the_report(tmp_path, fake_jobs):
    out = tmp_path / "report.json"
    out.write_text(json.dumps({"meta": {"date": "2026-01-01T00:00:00+00:00", "commit": "aaaaaaa"},
                               "synth_xilinx": {"gone_w8": {"luts": 1}}}))
    fake_jobs(["nic_w512"])
    assert report.main(["--out", str(out)]) == 0
    after = json.loads(out.read_text())
    assert after["meta"]["commit"] == report._commit() and after["meta"]["date"] != "2026-01-01T00:00:00+00:00"
    assert set(after["synth_xilinx"]) == {"nic_w512"}       # a top no longer built leaves no stale row
