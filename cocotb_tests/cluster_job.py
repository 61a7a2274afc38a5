"""cocotb test module: run the cluster job named by ``AINIC_JOB`` (host_driver.cluster_rtl)."""

import json
import os

import cocotb

from host_driver.cluster_rtl import run_job


@cocotb.test()
async def cluster_job(dut):
    with open(os.environ["AINIC_JOB"]) as fh:
        job = json.load(fh)
    stats = await run_job(dut, job)
    bad = [c for cs in stats["completions"] for c in cs if c["status"] != 0]
    assert not bad, f"completions with errors: {bad}"
