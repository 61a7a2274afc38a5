"""Every enumeration shared by the RTL, the wire, the registers, the driver and the models.

Members are lower case: their names are the words users type (``--codec bfp8``) and the docs print, so
``Codec["bfp8"]`` parses a name and ``Codec.bfp8.name`` prints one. Each is an ``enum.IntEnum``: the
value is what the hardware, the wire or a record carries, and Amaranth takes the class as a shape.
"""

from enum import IntEnum, IntFlag


class Codec(IntEnum):
    """Wire codec: 4-bit ``codec`` of the ainic header, descriptor ``codec`` byte (docs/numerics.md)."""
    none = 0
    fp16 = 1
    bf16 = 2
    bfp8 = 3
    bfp4 = 4


class Dtype(IntEnum):
    """Element type: 4-bit ``dtype`` of the header, descriptor ``dtype`` byte."""
    fp32 = 0
    int32 = 1


class Opcode(IntEnum):
    """Descriptor opcode (docs/descriptors.md)."""
    copy = 1
    allreduce = 2
    reduce_scatter = 3
    allgather = 4


class Collective(IntEnum):
    """A ring collective, as the engine's plan carries it: descriptor opcode minus ``Opcode.allreduce``."""
    allreduce = 0
    reduce_scatter = 1
    allgather = 2

    @property
    def opcode(self) -> Opcode:
        return Opcode(self + Opcode.allreduce)


class FrameOpcode(IntEnum):
    """``opcode`` byte of the ainic header (docs/protocol.md)."""
    data = 0            # a partial sum (reduce-scatter phases)
    result = 1          # a finished sum (all-gather phases)
    ack = 2             # receive credits, header only
    nack = 3            # the ring's link: the frame ``psn`` is missing, send again from it (header only)
    aggregate = 4       # in-network aggregation: a worker's contribution to a switch slot (docs/in_network.md)
    aggregated = 5      # in-network aggregation: the switch's sum of a slot, to the job's workers
    agg_nack = 6        # in-network aggregation: the switch asks a worker for a contribution lost on its link
                        # (header only: the lost frame's job, worker, slot, set and psn)


#: frame opcodes that carry a payload
DATA_OPCODES = (FrameOpcode.data, FrameOpcode.result, FrameOpcode.aggregate, FrameOpcode.aggregated)


class FrameFlag(IntFlag):
    """``flags`` byte of the ainic header."""
    retransmit = 0x01
    last_of_chunk = 0x02
    shadow = 0x04       # in-network aggregation: which of a slot's two pools


class AxiResp(IntEnum):
    """AXI4 / AXI4-Lite response (``xRESP``); a DMA status carries the worst one seen."""
    okay = 0
    exokay = 1
    slverr = 2
    decerr = 3


class Algorithm(IntEnum):
    """Descriptor ``algorithm`` byte."""
    ring = 0            # the NICs' ring (docs/allreduce.md)
    switch = 1          # in-network aggregation through an aggregation switch (docs/in_network.md)


class PhaseKind(IntEnum):
    """What a rank does in one phase of a ring collective (docs/collective_engine.md)."""
    send = 0            # phase 0: own chunk out
    reduce = 1          # received + own, sum out
    final = 2           # received + own: the finished sum, to the host and out
    forward = 3         # a finished sum received: to the host and on
    last = 4            # a finished sum received: to the host only
    gather = 5          # all-gather alone: own chunk to the host and out
    scatter_end = 6     # reduce-scatter alone: received + own, to the host only


class StageState(IntEnum):
    """What a stage of the collective engine did in one cycle (``dbg_stages``, contract/stages.py)."""
    idle = 0            # no item: nothing to do
    busy = 1            # a beat moved
    starved = 2         # an item, but its input offered no beat
    blocked = 3         # its input offered a beat that its output did not take


class DropReason(IntEnum):
    """Why the receive parser dropped a frame, in the order it checks (the first that applies counts)."""
    mac_error = 0       # tuser (MAC-reported error) on any beat
    runt = 1            # shorter than Ethernet + IPv4 + UDP + ainic headers
    oversize = 2        # longer than MAX_FRAME_BYTES
    not_for_us = 3      # destination MAC neither ours nor broadcast
    ethertype = 4       # not IPv4 (ARP, IPv6, ... : see docs/protocol.md)
    ip_version_ihl = 5  # version != 4 or IHL != 5 (options unsupported)
    ip_checksum = 6
    ip_length = 7       # total length disagrees with the frame
    ip_fragment = 8     # MF set or fragment offset != 0
    ip_protocol = 9     # not UDP
    ip_dst = 10         # destination IP not ours
    udp_port = 11       # not our UDP port
    udp_length = 12     # UDP length != IP total length - 20
    version = 13        # ainic version
    opcode = 14
    codec_dtype = 15    # unknown codec or dtype, or a codec on int32
    count = 16          # count = 0, > MAX_P, or payload length != codec bytes for count
    dst_rank = 17
    # the ring's reliable link (contract/link.py): data and result frames only, after every check above
    link_down = 18      # the link is held in reset (CONTROL.link_reset)
    duplicate = 19      # psn older than the one expected: a copy, or a frame sent again after a lost ack
    out_of_order = 20   # psn newer than the one expected: a frame before it was lost


class AggDrop(IntEnum):
    """Why the aggregation switch dropped a frame addressed to it that its parser accepted, in the order it
    checks (docs/in_network.md, "The decision table")."""
    opcode = 0          # not a contribution (``aggregate``): a result, an ack, ... sent to the switch
    unknown_job = 1     # no enabled job has this ``job`` id
    not_member = 2      # ``worker`` is not one of the job's workers, or the frame came from another port
    dtype = 3           # dtype or codec other than the job's
    slot_range = 4      # ``slot`` >= the job's window
    count = 5           # count above the job's packet size, or offset/count other than the round's
    stale = 6           # psn older than the round the slot set holds (a late copy)
    busy = 7            # psn newer, but the slot set's round is not complete (a worker out of step)
    duplicate = 8       # a second contribution of one worker to a round not yet complete


class Status(IntEnum):
    """Completion status (meanings: ``contract.descriptors.STATUS_MEANING``)."""
    ok = 0
    bad_opcode = 1
    bad_dtype = 2
    bad_codec = 3
    codec_dtype = 4
    bad_algorithm = 5
    bad_count = 6
    bad_alignment = 7
    bad_range = 8
    bad_world_size = 9
    bad_packet_size = 10
    unsupported = 11
    bad_reserved = 12
    read_slverr = 16
    read_decerr = 17
    write_slverr = 18
    write_decerr = 19
    fetch_error = 20
    network_mismatch = 21
    ring_too_large = 22
    timeout = 23


def names(enum) -> list:
    """The member names of ``enum`` in value order: what argument parsers offer."""
    return [e.name for e in enum]


def parse(enum, value, what: str = None):
    """``value`` (a member, its name or its int) as a member of ``enum``; ValueError naming the choices."""
    if isinstance(value, enum):
        return value
    try:
        if isinstance(value, str):
            return enum[value]
        if isinstance(value, int) and not isinstance(value, bool):
            return enum(value)
    except (KeyError, ValueError):
        pass
    raise ValueError(f"{what or enum.__name__} must be one of {', '.join(names(enum))}, got {value!r}")
