"""Job table entries for the RTL from the model's Job (host_driver/models/in_network.py)."""

from contract.enums import Codec, Dtype
from hdl.switch.job_table import JobEntry


def entry(job, enable: bool = True) -> int:
    """The packed JobEntry of ``in_network.Job`` ``job`` (or an empty, disabled entry for None)."""
    if job is None:
        return 0
    ports = list(job.ports) + [0] * (16 - len(job.ports))
    value = JobEntry.const({
        "enable": int(enable), "job": job.job, "workers": job.workers, "ports": ports,
        "window_log2": job.window.bit_length() - 1, "slot_base": job.slot_base,
        "dtype": Dtype[job.dtype], "codec": Codec[job.codec], "packet": job.packet,
    })
    return value.as_value().value
