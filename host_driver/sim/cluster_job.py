"""cocotb test module: run the cluster job(s) named by ``AINIC_JOB`` (host_driver.cluster_rtl).

The file holds one job or a list of jobs; a list runs in one simulation, one after the other (the bench is
reset between them). Whether the results are right is for the caller to judge (it has the golden model);
here a job fails only if a completion reports an error it did not expect (``expect_status``; None: any
status, judged by the caller).
"""

import json
import os

import cocotb

from host_driver.sim.cluster_run import run_job


@cocotb.test()
async def cluster_job(dut):
    with open(os.environ["AINIC_JOB"]) as fh:
        jobs = json.load(fh)
    for job in jobs if isinstance(jobs, list) else [jobs]:
        stats = await run_job(dut, job)
        want = job.get("expect_status", 0)
        if want is None:        # the caller reads every completion's status (Cluster raises CollectiveTimeout)
            continue
        bad = [c for cs in stats["completions"] for c in cs if c["status"] != want]
        assert not bad, f"job {job.get('name', '')}: completions with an unexpected status: {bad}"
