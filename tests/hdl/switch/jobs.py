"""Job table entries for the RTL from the model's Job (host_driver/models/in_network.py), and the model's
contribution frames."""

import numpy as np

from contract.enums import Codec, Dtype, FrameOpcode
from hdl.switch.job_table import job_entry_value
from host_driver.models import in_network as inn
from host_driver.models import numerics as nm


def entry(job, enable: bool = True) -> int:
    """The packed JobEntry of ``in_network.Job`` ``job`` (or an empty, disabled entry for None)."""
    if job is None:
        return 0
    return job_entry_value(job.job, job.ports, job.window, job.slot_base, Dtype[job.dtype], Codec[job.codec],
                           job.packet, enable, job.up_port, job.up_job, job.up_worker)


def contribution(sw, job_, w, g, values, **changes):
    """(port, frame): worker ``w`` of job ``job_`` (``changes`` may hold a ``job`` field) contributes ``values`` as packet ``g`` through switch ``sw``
    (a SwitchModel: its addresses); ``changes`` override header fields."""
    job = job_
    slot, s = inn.slot_of(g, job.window)
    bits = nm.as_bits(np.asarray(values, np.float32 if job.dtype == "fp32" else np.int32).view(np.uint32))
    payload = bits.tobytes() if job.codec == "none" else nm.compress(bits, job.codec)
    a = inn.Agg(FrameOpcode.aggregate, job.job, w, slot, s, g, g * job.packet, len(values), Codec[job.codec],
                Dtype[job.dtype], payload)
    a = inn.Agg(**{**a.__dict__, **changes})
    port = job.ports[w]
    return port, a.frame(sw.port_macs[port], sw.mac, sw.port_ips[port], sw.ip)


def spine_result(sw, job_, g, values, seq, **changes):
    """(port, frame): the spine's result for round ``g`` of leaf job ``job_`` (to its up port)."""
    job = job_
    slot, s = inn.slot_of(g, job.window)
    bits = nm.as_bits(np.asarray(values, np.float32).view(np.uint32))
    payload = bits.tobytes() if job.codec == "none" else nm.compress(bits, job.codec)
    a = inn.Agg(FrameOpcode.aggregated, job.up_job, job.up_worker, slot, s, g, g * job.packet, len(values),
                Codec[job.codec], Dtype[job.dtype], payload, seq=seq)
    a = inn.Agg(**{**a.__dict__, **changes})
    return job.up_port, a.frame("02:00:00:00:00:fe", sw.mac, "10.0.1.254", sw.ip)
