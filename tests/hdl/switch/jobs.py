"""Job table entries for the RTL from the model's Job (host_driver/models/in_network.py)."""

from contract.enums import Codec, Dtype
from hdl.switch.job_table import job_entry_value


def entry(job, enable: bool = True) -> int:
    """The packed JobEntry of ``in_network.Job`` ``job`` (or an empty, disabled entry for None)."""
    if job is None:
        return 0
    return job_entry_value(job.job, job.ports, job.window, job.slot_base, Dtype[job.dtype], Codec[job.codec],
                           job.packet, enable)
