"""One collective's parameters, and the one check of them that every caller shares.

``ainic demo`` (through :class:`host_driver.sim.cluster.Cluster`), ``ainic model`` (through
:class:`host_driver.perf.collective_model.Setup`) and the driver ask the same question of a collective --
could a NIC run it? -- and give the same answer: :func:`check` raises ``ValueError`` naming the first
parameter that is wrong and the range it must be in. The limits are the hardware's (the descriptor checks of
:mod:`contract.descriptors`, the widths the NIC and the switch are built at); what a simulated cluster can
hold besides (``MAX_CLUSTER_NODES``, the RTL switch's packet limit) is the harness's own check on top.
"""

from contract.enums import Algorithm, Codec, Collective, Dtype, names
from contract.in_network import MAX_JOB_WORKERS, MAX_TREE_RANKS, tree_groups
from contract.limits import DEFAULT_WIDTH, MAX_COUNT, MAX_RANKS, NIC_WIDTHS
from contract.protocol import DEFAULT_P, MAX_P, MIN_P, packet_quantum

#: the collectives of the ring; in-network aggregation runs ALLREDUCE only (docs/in_network.md)
OPS = tuple(names(Collective))
ALGORITHMS = tuple(names(Algorithm))
#: the link latency a simulated fabric accepts, in cycles per link
MAX_LINK_LATENCY = 60_000


def _int_in(name: str, v, lo: int, hi: int, why: str = "") -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name} must be an int in {lo:,} .. {hi:,}{why}, got {v!r}")


def max_nodes(algorithm: str, leaves: int = None) -> int:
    """The most ranks one collective may have: a ring NIC's peer table (``MAX_RANKS``), a switch job's
    workers (``MAX_JOB_WORKERS``), a two-level tree's leaves of members (``MAX_TREE_RANKS``)."""
    if algorithm == "switch":
        return MAX_TREE_RANKS if leaves is not None else MAX_JOB_WORKERS
    return MAX_RANKS


def check(nodes: int, elements: int = None, *, codec: str = "none", dtype: str = "fp32", op: str = "allreduce",
          algorithm: str = "ring", packet: int = DEFAULT_P, width: int = DEFAULT_WIDTH, link_gbps: float = 80.0,
          clock_mhz: float = 250.0, link_latency: int = 125, leaves: int = None, switch_speedup: int = 1) -> None:
    """Raise ``ValueError`` (one sentence: the parameter, its range, the value given) unless a NIC of width
    ``width`` could run this collective (``elements`` None: any count). A collective has at least 2 ranks:
    world size 1 is legal for the hardware, and is the NIC's local copy (nothing crosses the network)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    if algorithm == "switch" and op != "allreduce":
        raise ValueError(f"in-network aggregation runs allreduce only (reduce-scatter and allgather run on the "
                         f"ring: docs/in_network.md), got op {op!r}")
    if leaves is not None and algorithm != "switch":
        raise ValueError(f"leaves (a two-level tree of switches) needs algorithm 'switch', got {algorithm!r}")
    why = {"ring": " (the NIC's peer table)", "switch": " (the switch's workers per job)"}[algorithm]
    _int_in("nodes", nodes, 2, max_nodes(algorithm, leaves), why if leaves is None else " (a tree's leaves of members)")
    if leaves is not None:
        tree_groups(nodes, leaves)
    if elements is not None:
        _int_in("elements", elements, 1, MAX_COUNT, " (a descriptor's count)")
    if codec not in names(Codec):
        raise ValueError(f"codec must be one of {', '.join(names(Codec))}, got {codec!r}")
    if dtype not in names(Dtype):
        raise ValueError(f"dtype must be one of {', '.join(names(Dtype))}, got {dtype!r}")
    if dtype == "int32" and codec != "none":
        raise ValueError(f"int32 data travels uncompressed: codec must be 'none', got {codec!r}")
    if width not in NIC_WIDTHS:
        raise ValueError(f"width must be one of {', '.join(map(str, sorted(NIC_WIDTHS)))} bits, got {width!r}")
    if isinstance(switch_speedup, bool) or switch_speedup not in (1, 2):
        raise ValueError(f"switch_speedup must be 1, or 2 (the switches at twice the NICs' width), got "
                         f"{switch_speedup!r}")
    if switch_speedup == 2 and algorithm != "switch":
        raise ValueError(f"switch_speedup 2 builds the aggregation switches wider: it needs algorithm 'switch', "
                         f"got {algorithm!r}")
    if switch_speedup == 2 and 2 * width not in NIC_WIDTHS:
        raise ValueError(f"switch_speedup 2 builds the switches at 2 x {width} bits, wider than any supported "
                         f"width ({', '.join(map(str, sorted(NIC_WIDTHS)))})")
    q = packet_quantum(width * switch_speedup)        # a packet in whole beats of the NIC and of the switch
    if isinstance(packet, bool) or not isinstance(packet, int) or not (MIN_P <= packet <= MAX_P and packet % q == 0):
        at = f"W = {width}" + (f" (switches at {width * switch_speedup})" if switch_speedup > 1 else "")
        raise ValueError(f"packet must be a multiple of {q} in {MIN_P} .. {MAX_P} elements at {at}, got {packet!r}")
    for name, v in (("link_gbps", link_gbps), ("clock_mhz", clock_mhz)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise ValueError(f"{name} must be a positive number, got {v!r}")
    _int_in("link_latency", link_latency, 0, MAX_LINK_LATENCY, " cycles")


#: the collective's parameters as the command line takes them (``ainic demo``, ``ainic model``):
#: name -> (type, default, choices, help). One definition: the defaults, the choices and what each means.
ARGUMENTS = {
    "nodes": (int, 4, None, f"ranks taking part: 2 .. {MAX_RANKS} on the ring (the NIC's peer table), "
                            f"2 .. {MAX_JOB_WORKERS} in-network (a switch job's workers), 2 .. {MAX_TREE_RANKS} over "
                            "a tree of switches (--leaves)"),
    "elements": (int, 1 << 20, None, f"elements each rank contributes, 1 .. {MAX_COUNT:,}"),
    "codec": (str, "bfp8", tuple(names(Codec)), "the wire codec: none; fp16 or bf16 (2 bytes an element); bfp8 or "
                                                "bfp4 (block floating point: docs/numerics.md)"),
    "op": (str, "allreduce", OPS, "the collective: the whole ring, or either half alone (in-network: allreduce)"),
    "algorithm": (str, "ring", ALGORITHMS, "ring: the NICs' ring all-reduce; switch: in-network aggregation "
                                           "(docs/in_network.md)"),
    "packet": (int, DEFAULT_P, None, f"elements per packet (P): a multiple of 16 (of 32 at W = 1024) in {MIN_P} .. "
                               f"{MAX_P}"),
    "width": (int, DEFAULT_WIDTH, tuple(NIC_WIDTHS), "datapath bits (1024: the wide NIC)"),
    "link_gbps": (float, 80.0, None, "each link's rate, Gb/s"),
    "clock_mhz": (float, 250.0, None, "the NIC's clock, MHz: turns cycles into time and the link's rate into "
                                      "bytes a cycle"),
    "link_latency": (int, 125, None, "cycles a frame spends on one link (a ring hop through the Ethernet switch "
                                     "is two links)"),
    "leaves": (int, None, None, "switch: a two-level tree, the nodes on K leaf switches (contiguous groups) and the "
                                "leaves on a spine (docs/in_network.md, \"Two levels\"; default: one switch)"),
    "switch_speedup": (int, 1, (1, 2), "switch: 2 builds the aggregation switches (a tree's too) at twice the NICs' "
                                       "width behind width converters, faster than their links as a switch chip's "
                                       "core is (docs/in_network.md)"),
}


def add_arguments(parser, names_=tuple(ARGUMENTS)) -> None:
    """``--nodes``, ``--elements``, ... (those of ``names_``) on an ``argparse`` parser. Their default is None
    in the namespace, so that :func:`resolve` can tell what the user gave; the help states the real one."""
    metavars = {"nodes": "N", "elements": "L", "packet": "P", "link_gbps": "GBPS", "clock_mhz": "MHZ",
                "link_latency": "CYCLES", "leaves": "K",
                "switch_speedup": "{1,2}"}
    for name in names_:
        kind, default, choices, text = ARGUMENTS[name]
        parser.add_argument("--" + name.replace("_", "-"), type=kind, choices=choices, default=None,
                            metavar=metavars.get(name),
                            help=text if default is None else f"{text} (default: {default})")


def resolve(args, names_=tuple(ARGUMENTS)) -> set:
    """Fill the defaults of :func:`add_arguments` in ``args``; return the names the user gave."""
    given = {n for n in names_ if getattr(args, n, None) is not None}
    for name in names_:
        if name not in given:
            setattr(args, name, ARGUMENTS[name][1])
    return given
