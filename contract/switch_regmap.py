"""The aggregation switch's register map (``ainic_switch.v``), defined once like the NIC's
(:mod:`contract.regmap`): the RTL register block, docs/switch_registers.md and build/ainic_switch_regs.h are
generated from :func:`switch_regmap`.

32-bit registers on an AXI4-Lite slave, with the NIC's rules (``ro``, ``rw``, ``wo``; LO/HI pairs; strobes
honoured; SLVERR outside the map). Per-port and per-job arrays are as long as the build has ports and job
entries (CAPS says how many) and keep room for the most, so an offset never depends on the build.
Configure with no traffic for the job being changed: a job entry is live as soon as it is written.
"""

from .enums import AggDrop, Codec, DropReason, Dtype, parse
from .in_network import MAX_JOB_WORKERS, MAX_SWITCH_JOBS, MAX_SWITCH_PORTS, MAX_WINDOW, POOL_BITS
from .protocol import MAX_P, UDP_PORT
from .regmap import VERSION_VALUE, Field, MapBuilder, RegisterMap

SWITCH_ID_VALUE = 0x41495357        # "AISW"

#: JOB_CONFIG's fields: (name, lsb, width, description)
JOB_CONFIG_FIELDS = (
    ("enable", 0, 1, "1: the entry is live"),
    ("workers", 1, 5, f"workers of the job (1 .. {MAX_JOB_WORKERS})"),
    ("window_log2", 8, 4, f"log2 of its window S (slots; 0 .. {MAX_WINDOW.bit_length() - 1})"),
    ("dtype", 12, 1, "Dtype of its contributions (fp32 = 0, int32 = 1)"),
    ("codec", 13, 3, "Codec of its contributions and results (none = 0 ... bfp4 = 4)"),
    ("packet", 16, 11, f"P: the most elements a contribution carries (16 .. {MAX_P})"),
)
PORT_NIBBLES = 8            # JOB_PORTS_LO: workers 0..7, JOB_PORTS_HI: workers 8..15, 4 bits each
#: JOB_UP's fields: a leaf's job in a two-level tree (docs/in_network.md, "Two levels")
JOB_UP_FIELDS = (
    ("up", 0, 1, "1: a leaf's job: a complete round goes up to the spine, the spine's result comes down to "
                 "the workers"),
    ("up_port", 4, 4, "the port of the trunk to the spine"),
    ("up_worker", 8, 4, f"the leaf's worker index in the spine's job (0 .. {MAX_JOB_WORKERS - 1})"),
    ("up_job", 16, 16, "the spine's job id (its frames on the trunk carry it)"),
)


def caps_value(width: int, ports: int, jobs: int, engines: int) -> int:
    return (width // 8) | ports << 8 | jobs << 16 | engines << 24


def job_config_value(enable: bool, workers: int, window: int, dtype, codec, packet: int) -> int:
    """JOB_CONFIG for a job of ``workers`` workers, a window of ``window`` slots (a power of two); dtype
    and codec as members, names or codes."""
    values = {"enable": int(enable), "workers": workers, "window_log2": window.bit_length() - 1,
              "dtype": int(parse(Dtype, dtype, "dtype")), "codec": int(parse(Codec, codec, "codec")), "packet": packet}
    return _pack("JOB_CONFIG", JOB_CONFIG_FIELDS, values)


def job_up_value(up_port: int = None, up_job: int = 0, up_worker: int = 0) -> int:
    """JOB_UP of a leaf's job whose trunk is port ``up_port`` (None: not a leaf, 0), worker ``up_worker`` of
    the spine's job ``up_job``."""
    values = {"up": int(up_port is not None), "up_port": up_port or 0, "up_worker": up_worker, "up_job": up_job}
    return _pack("JOB_UP", JOB_UP_FIELDS, values)


def _pack(register: str, fields, values: dict) -> int:
    out = 0
    for name, lsb, width, _ in fields:
        if isinstance(values[name], bool) or not isinstance(values[name], int) or not 0 <= values[name] < 1 << width:
            raise ValueError(f"{register}.{name} = {values[name]!r} does not fit {width} bits")
        out |= values[name] << lsb
    return out


def job_ports_values(ports) -> tuple:
    """(JOB_PORTS_LO, JOB_PORTS_HI): worker w's switch port in bits 4(w mod 8) + 3 .. 4(w mod 8)."""
    ports = list(ports)
    lo = sum(p << 4 * w for w, p in enumerate(ports[:PORT_NIBBLES]))
    hi = sum(p << 4 * w for w, p in enumerate(ports[PORT_NIBBLES:]))
    return lo, hi


def switch_regmap(ports: int = MAX_SWITCH_PORTS, jobs: int = MAX_SWITCH_JOBS) -> RegisterMap:
    """The map of a switch with ``ports`` ports and ``jobs`` job entries."""
    mb = MapBuilder()
    reg = mb.reg
    reg("ID", "ro", SWITCH_ID_VALUE, 'Identifies an ainic aggregation switch: "AISW".')
    reg("VERSION", "ro", VERSION_VALUE, "Register map version: major 31:16, minor 15:8, patch 7:0.")
    reg("CAPS", "ro", 0, "What this build has (its value depends on the build).", [
        Field("data_width_bytes", 0, 8, "W/8: the datapath width in bytes"),
        Field("ports", 8, 8, f"switch ports (2 .. {MAX_SWITCH_PORTS})"),
        Field("jobs", 16, 8, f"job table entries (1 .. {MAX_SWITCH_JOBS})"),
        Field("engines", 24, 8, "aggregation engines (pool slot s is summed by engine s mod engines)"),
    ])
    reg("POOL_SLOTS", "ro", 0, "Slots in the pool (each holds both sets of one packet); depends on the build.")
    reg("MAX_PACKET", "ro", 0, "The most elements one slot holds; depends on the build.")
    reg("SWITCH_MAC_LO", "rw", 0, "The switch's own MAC address, bits 31:0 (the address read as a 48-bit "
        "number, first octet most significant): frames for it are aggregation traffic.", align=0x20)
    reg("SWITCH_MAC_HI", "rw", 0, "The switch's MAC address, bits 47:32.", bits=16)
    reg("SWITCH_IP", "rw", 0, "The switch's IPv4 address (results come from it), first octet most significant.")
    reg("UDP_PORT", "rw", UDP_PORT, "UDP port of ainic traffic.", bits=16)
    reg("POOL_CLEAR", "wo", 0, "Write: empty pool slots [base, base + count) in every engine (both sets); "
        "POOL_CLEARING reads 1 until done. Do it before a job's window is used by another job.", [
            Field("base", 0, POOL_BITS, "first slot"), Field("count", 16, POOL_BITS + 1, "slots")])
    reg("POOL_CLEARING", "ro", 0, "1 while a POOL_CLEAR runs.")
    reg("PORT_MAC_LO", "rw", 0, "Port i: the MAC address of the station behind it, bits 31:0 (frames for it "
        "leave by port i; results to a worker behind port i carry it).", count=ports, reserve=MAX_SWITCH_PORTS,
        align=0x100)
    reg("PORT_MAC_HI", "rw", 0, "Port i: MAC address bits 47:32.", count=ports, reserve=MAX_SWITCH_PORTS,
        bits=16)
    reg("PORT_IP", "rw", 0, "Port i: the IPv4 address of the station behind it (results' destination).",
        count=ports, reserve=MAX_SWITCH_PORTS)
    reg("JOB_ID", "rw", 0, "Job entry k: the job id its frames carry.", count=jobs, reserve=MAX_SWITCH_JOBS,
        align=0x100, bits=16)
    reg("JOB_CONFIG", "rw", 0, "Job entry k: enable, workers, window, dtype, codec, packet size.",
        [Field(*f) for f in JOB_CONFIG_FIELDS], count=jobs, reserve=MAX_SWITCH_JOBS, bits=27)
    reg("JOB_SLOT_BASE", "rw", 0, "Job entry k: the first pool slot of its window (its slots are "
        "[base, base + S)).", count=jobs, reserve=MAX_SWITCH_JOBS, bits=POOL_BITS)
    reg("JOB_PORTS_LO", "rw", 0, "Job entry k: the switch port of workers 0..7, 4 bits each (worker w in bits "
        "4w+3:4w).", count=jobs, reserve=MAX_SWITCH_JOBS)
    reg("JOB_PORTS_HI", "rw", 0, "Job entry k: the switch port of workers 8..15 (worker w in bits "
        "4(w-8)+3:4(w-8)).", count=jobs, reserve=MAX_SWITCH_JOBS)
    reg("JOB_UP", "rw", 0, "Job entry k: 0, or a leaf's job of a two-level tree (docs/in_network.md, \"Two "
        "levels\"): its complete rounds go up the trunk as one worker's contributions to the spine's job, and the "
        "spine's results come down to its workers.", [Field(*f) for f in JOB_UP_FIELDS], count=jobs,
        reserve=MAX_SWITCH_JOBS)
    reg("UNKNOWN_MAC", "ro", 0, "Frames for no port's MAC and not for the switch: dropped.", align=0x100)
    for reason in AggDrop:
        reg(f"DROP_{reason.name.upper()}", "ro", 0,
            f"Aggregation frames dropped for `{reason.name}` (docs/in_network.md), any job.")
    reg("PORT_FRAMES_IN", "ro", 0, "Port i: frames received.", count=ports, reserve=MAX_SWITCH_PORTS, align=0x100)
    reg("PORT_FRAMES_OUT", "ro", 0, "Port i: frames sent.", count=ports, reserve=MAX_SWITCH_PORTS)
    reg("PORT_ACCEPTED", "ro", 0, "Port i: frames for the switch its parser accepted.", count=ports,
        reserve=MAX_SWITCH_PORTS)
    for reason in DropReason:
        reg(f"PORT_RX_DROP_{reason.name.upper()}", "ro", 0,
            f"Port i: frames for the switch its parser dropped for `{reason.name}` (docs/protocol.md).",
            count=ports, reserve=MAX_SWITCH_PORTS)
    reg("JOB_ABSORBED", "ro", 0, "Job entry k: contributions summed into a slot.", count=jobs,
        reserve=MAX_SWITCH_JOBS, align=0x100)
    reg("JOB_COMPLETED", "ro", 0, "Job entry k: slots completed (results multicast).", count=jobs,
        reserve=MAX_SWITCH_JOBS)
    reg("JOB_UNICAST", "ro", 0, "Job entry k: stored results sent again to one worker (a retransmission).",
        count=jobs, reserve=MAX_SWITCH_JOBS)
    for reason in AggDrop:
        reg(f"JOB_DROP_{reason.name.upper()}", "ro", 0, f"Job entry k: its frames dropped for `{reason.name}`.",
            count=jobs, reserve=MAX_SWITCH_JOBS)
    reg("JOB_NACKS", "ro", 0, "Job entry k: contributions found lost on a worker's link (a gap in its numbered "
        "frames) and asked for again with an `agg_nack` (docs/in_network.md, \"Losses\"); a leaf's also counts "
        "its asks to member 0 for partials lost on its trunk (\"Two levels\").", count=jobs,
        reserve=MAX_SWITCH_JOBS)
    reg("JOB_UP_SENT", "ro", 0, "Job entry k, a leaf's: partial sums sent up to the spine (resends included).",
        count=jobs, reserve=MAX_SWITCH_JOBS)
    reg("JOB_DOWN_TAKEN", "ro", 0, "Job entry k, a leaf's: the spine's results taken and multicast to its workers.",
        count=jobs, reserve=MAX_SWITCH_JOBS)
    return RegisterMap("Aggregation switch registers", "AINIC_SWITCH", __doc__.strip().split("\n\n", 1)[1]
                       .replace("\n", " ").replace("``", "`"), mb.regs,
                       constants=("ID", "VERSION", "CAPS", "POOL_SLOTS", "MAX_PACKET"), source="contract/switch_regmap.py")


SWITCH = switch_regmap()
