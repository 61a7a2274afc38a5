"""The aggregation switch's job table entry, and the lookups on it that its blocks share."""

from amaranth import Cat, Mux, Signal
from amaranth.lib import data

from contract.enums import Codec, Dtype
from contract.in_network import MAX_JOB_WORKERS, MAX_SWITCH_PORTS, MAX_WINDOW, POOL_BITS
from contract.protocol import MAX_P

PORT_BITS = (MAX_SWITCH_PORTS - 1).bit_length()            # 4
WORKER_BITS = (MAX_JOB_WORKERS - 1).bit_length()           # 4
WINDOW_LOG2_BITS = MAX_WINDOW.bit_length().bit_length()    # window_log2 in 0 .. 8

#: one job (docs/in_network.md, "The switch"): worker w is behind port ``ports[w]``; its window of
#: 2**window_log2 slots starts at pool slot ``slot_base``; packets of at most ``packet`` elements. With
#: ``up``, a leaf's job (docs/in_network.md, "Two levels"): a complete round goes to port ``up_port`` as
#: worker ``up_worker``'s contribution to job ``up_job`` of the spine behind it, and the spine's result is
#: what the members get
JobEntry = data.StructLayout({
    "enable": 1,
    "job": 16,
    "workers": range(MAX_JOB_WORKERS + 1),
    "ports": data.ArrayLayout(PORT_BITS, MAX_JOB_WORKERS),
    "window_log2": WINDOW_LOG2_BITS,
    "slot_base": POOL_BITS,
    "dtype": Dtype,
    "codec": Codec,
    "packet": range(MAX_P + 1),
    "up": 1,
    "up_port": PORT_BITS,
    "up_job": 16,
    "up_worker": WORKER_BITS,
})


def job_entry_value(job: int, ports, window: int, slot_base: int, dtype, codec, packet: int,
                    enable: bool = True, up_port: int = None, up_job: int = 0, up_worker: int = 0) -> int:
    """A JobEntry as the integer its port takes: job id ``job``, worker w behind ``ports[w]``, a window of
    ``window`` slots (a power of two) from pool slot ``slot_base``, and its dtype, codec and packet size;
    a leaf's job: its ``up_port``, the spine's job ``up_job`` and its worker index there ``up_worker``."""
    ports = list(ports)
    return JobEntry.const({
        "enable": int(enable), "job": job, "workers": len(ports), "ports": ports + [0] * (MAX_JOB_WORKERS - len(ports)),
        "window_log2": window.bit_length() - 1, "slot_base": slot_base, "dtype": Dtype(dtype), "codec": Codec(codec),
        "packet": packet, "up": int(up_port is not None), "up_port": up_port or 0, "up_job": up_job,
        "up_worker": up_worker,
    }).as_value().value


def member_mask(m, entry, ports: int, name: str):
    """The ports (a bit each) of the job's workers."""
    mask = Signal(ports, name=name)
    m.d.comb += mask.eq(Cat(*[Cat(*[(w < entry.workers) & (entry.ports[w] == p)
                                    for w in range(MAX_JOB_WORKERS)]).any() for p in range(ports)]))
    return mask


def worker_of_port(m, entry, port, name: str):
    """The index of the job's worker behind ``port`` (the lowest, should two share it: they cannot)."""
    w = Signal(WORKER_BITS, name=name)
    for i in reversed(range(MAX_JOB_WORKERS)):
        with m.If((i < entry.workers) & (entry.ports[i] == port)):
            m.d.comb += w.eq(i)
    return w


def first_hit(m, match: list, name: str) -> list:
    """One-hot: the first of the ``match`` conditions (one per job table entry) that holds."""
    hits = [Signal(name=f"{name}_hit{i}") for i in range(len(match))]
    for i, hit in enumerate(hits):
        m.d.comb += hit.eq(match[i] & ~Cat(0, *match[:i]).any())
    return hits


def pick(jobs, index):
    """The entry at ``index`` (a Value) of a list of JobEntry views."""
    out = jobs[0].as_value()
    for i in range(1, len(jobs)):
        out = Mux(index == i, jobs[i].as_value(), out)
    return data.View(JobEntry, out)
