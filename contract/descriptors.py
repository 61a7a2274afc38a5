"""Submission descriptors and completion records, defined once: the RTL layouts (``hdl/nic/command_processor.py``),
the driver, the software model and ``docs/host_interface.md`` all read these tables.

Both records are 64 bytes, little-endian, fields packed from bit 0 of byte 0 in the order listed.
:func:`check` is the reference validation: the RTL applies the same checks in the same order and
completes a bad descriptor with the first failing check's status.
"""

from dataclasses import dataclass

from .build import FULL
from .enums import Algorithm, Codec, Dtype, Opcode, Status
from .in_network import MAX_JOB_WORKERS
from .limits import MAX_COUNT, MAX_RANKS
from .protocol import MAX_P, MIN_P, packet_quantum

RECORD_BYTES = 64

#: (name, bits, description)
DESCRIPTOR_FIELDS = (
    ("opcode", 8, "what to do: Opcode"),
    ("dtype", 8, "element type: Dtype"),
    ("codec", 8, "wire codec: Codec; for copy, a codec other than none is applied and undone"),
    ("algorithm", 8, "collective algorithm: Algorithm"),
    ("collective", 16, "collective id, echoed in the completion and carried in every packet"),
    ("flags", 16, "reserved, 0 (else bad_reserved)"),
    ("count", 32, "elements (1 .. MAX_COUNT)"),
    ("reserved0", 32, "0 (else bad_reserved)"),
    ("src", 64, "host address of the input, a multiple of 4"),
    ("dst", 64, "host address of the output, a multiple of 4"),
    ("tag", 64, "anything: echoed in the completion"),
    ("reserved1", 192, "0 (else bad_reserved)"),
)

COMPLETION_FIELDS = (
    ("status", 8, "Status code: 0 = ok"),
    ("opcode", 8, "the descriptor's opcode"),
    ("phase", 8, "1 on the ring's first pass, then 0, 1, ... alternately: a record is new when phase matches"),
    ("stall", 8, "status timeout of a ring collective: what it waited for (contract.link.Stall: 1 a frame from "
     "the previous rank, 2 credit or acks from the next, 4 host memory), else 0"),
    ("sq_index", 16, "submission-ring index of the descriptor (free-running, 16 bit)"),
    ("collective", 16, "the descriptor's collective id"),
    ("cycles", 64, "clock cycles from fetching the descriptor to its last write response"),
    ("tag", 64, "the descriptor's tag"),
    ("bytes_sent", 64, "bytes of frames sent to the network"),
    ("bytes_received", 64, "bytes of frames received from the network"),
    ("packets_sent", 32, "frames sent"),
    ("packets_received", 32, "frames received"),
    ("retransmissions", 32, "frames sent again after a loss"),
    ("reserved1", 32, "0"),
    ("host_bytes", 64, "bytes of the result written to host memory when the status is ok, else 0: the whole "
     "tensor, or for REDUCE_SCATTER the rank's own chunk only"),
)

#: what each completion status means, in check order for the descriptor checks
STATUS_MEANING = {
    Status.ok: "done",
    Status.bad_opcode: "opcode is not one of Opcode",
    Status.bad_dtype: "dtype is not one of Dtype",
    Status.bad_codec: "codec is not one of Codec",
    Status.codec_dtype: "a codec other than none on int32 elements",
    Status.bad_algorithm: "algorithm is not one of Algorithm",
    Status.bad_count: f"count is 0 or above MAX_COUNT ({MAX_COUNT})",
    Status.bad_alignment: "src or dst is not a multiple of 4",
    Status.bad_range: "src or dst + count*4 runs past the end of the 64-bit address space",
    Status.bad_world_size: f"collective with WORLD_SIZE outside 1 .. the build's peer table ({MAX_RANKS} in the "
                           f"full build; 1 .. {MAX_JOB_WORKERS} with algorithm switch) or RANK >= WORLD_SIZE",
    Status.bad_packet_size: f"a codec or collective with PACKET_ELEMS not in {MIN_P} .. {MAX_P} or not a multiple "
                            "of 16 (of W/32 where that is more: 32 at W = 1024)",
    Status.unsupported: "a valid operation this build does not execute: a codec or algorithm it was built "
                        "without (CAPS), or algorithm switch with an opcode other than allreduce",
    Status.bad_reserved: "a reserved field (flags, reserved0, reserved1) is not 0",
    Status.read_slverr: "a host-memory read returned SLVERR (the destination may be partly written)",
    Status.read_decerr: "a host-memory read returned DECERR (the destination may be partly written)",
    Status.write_slverr: "a host-memory write returned SLVERR",
    Status.write_decerr: "a host-memory write returned DECERR",
    Status.fetch_error: "reading the descriptor itself failed; the completion carries sq_index and phase (and "
                        "cycles), every other field 0",
    Status.network_mismatch: "a received packet's header disagreed with the packet the ring expected next (the "
                             "ranks are configured differently: another job's or collective's frame, another "
                             "codec, the wrong peer table; lost and corrupted frames are the links' to repair): "
                             "the result is not reliable",
    Status.ring_too_large: "the receive buffer cannot hold the frames this WORLD_SIZE keeps in flight at this "
                           "PACKET_ELEMS even with lag 1 (contract.credits.max_lag): use a smaller PACKET_ELEMS",
    Status.timeout: "nothing progressed for RING_DEADLINE cycles (ring: no stage moved; the completion's stall "
                    "says what it waited for) or AGG_DEADLINE cycles (switch: no new result): a peer, the switch "
                    "or a worker is gone; the destination is partly written",
}
assert list(STATUS_MEANING) == list(Status)


def _offsets(fields):
    at, out = 0, {}
    for name, bits, _ in fields:
        out[name] = (at, bits)
        at += bits
    assert at == 8 * RECORD_BYTES, (fields, at)
    return out


DESCRIPTOR_BITS = _offsets(DESCRIPTOR_FIELDS)
COMPLETION_BITS = _offsets(COMPLETION_FIELDS)


def pack(fields_bits, values: dict) -> bytes:
    word = 0
    for name, v in values.items():
        if name not in fields_bits:
            raise KeyError(f"no field {name!r}; fields: {', '.join(fields_bits)}")
        lsb, bits = fields_bits[name]
        v = int(v)
        if not 0 <= v < 1 << bits:
            raise ValueError(f"{name}={v} does not fit in {bits} bits")
        word |= v << lsb
    return word.to_bytes(RECORD_BYTES, "little")


def unpack(fields_bits, raw: bytes) -> dict:
    if len(raw) != RECORD_BYTES:
        raise ValueError(f"a record is {RECORD_BYTES} bytes, got {len(raw)}")
    word = int.from_bytes(raw, "little")
    return {name: (word >> lsb) & ((1 << bits) - 1) for name, (lsb, bits) in fields_bits.items()}


def pack_descriptor(**values) -> bytes:
    return pack(DESCRIPTOR_BITS, values)


@dataclass(frozen=True)
class Completion:
    status: int
    opcode: int
    phase: int
    sq_index: int
    collective: int
    cycles: int
    tag: int
    bytes_sent: int
    bytes_received: int
    packets_sent: int
    packets_received: int
    retransmissions: int
    host_bytes: int
    stall: int = 0          # status timeout of a ring collective: what it waited for (contract.link.Stall)

    @property
    def ok(self) -> bool:
        return self.status == 0

    @property
    def status_name(self) -> str:
        return Status(self.status).name if self.status in Status._value2member_map_ else f"unknown_{self.status}"

    def functional(self) -> dict:
        """Every field except timing (``cycles``): what the model backend reproduces exactly."""
        d = dict(self.__dict__)
        d.pop("cycles")
        return d

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Completion":
        d = unpack(COMPLETION_BITS, raw)
        return cls(**{k: v for k, v in d.items() if not k.startswith("reserved")})

    def to_bytes(self) -> bytes:
        return pack(COMPLETION_BITS, self.__dict__)


#: descriptor fields that must be 0 (a non-zero one completes with ``bad_reserved``)
RESERVED_FIELDS = ("flags", "reserved0", "reserved1")

#: opcodes this build checks but does not execute (they complete with ``unsupported``): none today
UNSUPPORTED_OPCODES = ()


def check(desc: dict, world_size: int, rank: int, packet_elems: int, width: int, build=None) -> int:
    """Status code for a descriptor (fields as :func:`unpack` gives them) under the NIC's registers, on a
    NIC of datapath width ``width`` and features ``build`` (``contract.build``; default the full build):
    0 when it may run, else the first failing check's code."""
    build = build or FULL
    op = desc["opcode"]
    if op not in Opcode._value2member_map_:
        return Status.bad_opcode
    if desc["dtype"] not in Dtype._value2member_map_:
        return Status.bad_dtype
    if desc["codec"] not in Codec._value2member_map_:
        return Status.bad_codec
    if desc["dtype"] == Dtype.int32 and desc["codec"] != Codec.none:
        return Status.codec_dtype
    if desc["algorithm"] not in Algorithm._value2member_map_:
        return Status.bad_algorithm
    if not 1 <= desc["count"] <= MAX_COUNT:
        return Status.bad_count
    if desc["src"] % 4 or desc["dst"] % 4:
        return Status.bad_alignment
    if desc["src"] + 4 * desc["count"] > 1 << 64 or desc["dst"] + 4 * desc["count"] > 1 << 64:
        return Status.bad_range
    collective = op != Opcode.copy
    limit = MAX_JOB_WORKERS if desc["algorithm"] == Algorithm.switch else build.max_ranks
    if collective and not (1 <= world_size <= limit and rank < world_size):
        return Status.bad_world_size
    if (collective or desc["codec"] != Codec.none) and not (
            packet_elems % packet_quantum(width) == 0 and MIN_P <= packet_elems <= MAX_P):
        return Status.bad_packet_size
    if op in UNSUPPORTED_OPCODES or (desc["algorithm"] == Algorithm.switch and op != Opcode.allreduce) \
            or build.missing(desc["codec"], desc["algorithm"]):
        return Status.unsupported
    if any(desc.get(name, 0) for name in RESERVED_FIELDS):      # (a field left out packs as 0)
        return Status.bad_reserved
    return 0


def render_markdown() -> str:
    """docs/descriptors.md: both record layouts, the codes, the checks in order."""
    def table(fields):
        rows = ["| byte | bits | field | meaning |", "|------|------|-------|---------|"]
        for name, bits, desc in fields:
            lsb, _ = (DESCRIPTOR_BITS if fields is DESCRIPTOR_FIELDS else COMPLETION_BITS)[name]
            rows.append(f"| {lsb // 8} | {bits} | `{name}` | {desc} |")
        return rows

    def codes(enum):
        return ", ".join(f"`{e.name}` = {e.value}" for e in enum)

    lines = ["# Descriptors and completions", "",
             "*Generated from `contract/descriptors.py` by `scripts/gen_regs.py`; do not edit by hand.*", "",
             f"Both records are {RECORD_BYTES} bytes, little-endian; a field starts at the byte shown (fields "
             "are packed from bit 0 of byte 0 in the order listed). How the rings work: "
             "[host_interface.md](host_interface.md).", "",
             "## Submission descriptor", "", *table(DESCRIPTOR_FIELDS), "",
             f"Opcodes: {codes(Opcode)}. Element types: {codes(Dtype)}. Codecs: {codes(Codec)}. "
             f"Algorithms: {codes(Algorithm)}. `MAX_COUNT` = {MAX_COUNT}.", "",
             "## Completion record", "", *table(COMPLETION_FIELDS), "",
             "## Status codes", "",
             "Descriptor checks run in this order; the first that fails is the status and nothing is read "
             "or written for that descriptor (registers: `WORLD_SIZE`, `RANK`, `PACKET_ELEMS`).", "",
             "| code | name | meaning |", "|------|------|---------|"]
    lines += [f"| {s.value} | `{s.name}` | {meaning} |" for s, meaning in STATUS_MEANING.items()]
    return "\n".join(lines) + "\n"


def render_c_defines() -> str:
    """Descriptor/completion byte offsets, opcodes and status codes for build/ainic_regs.h."""
    out = ["/* Descriptors and completions (contract/descriptors.py): byte offset and bits of each field. */",
           f"#define AINIC_RECORD_BYTES {RECORD_BYTES}u"]
    for prefix, fields, bits in (("DESC", DESCRIPTOR_FIELDS, DESCRIPTOR_BITS),
                                 ("CPL", COMPLETION_FIELDS, COMPLETION_BITS)):
        for name, _, _ in fields:
            if not name.startswith("reserved"):
                lsb, width = bits[name]
                out.append(f"#define AINIC_{prefix}_{name.upper()}_BYTE {lsb // 8}u")
                out.append(f"#define AINIC_{prefix}_{name.upper()}_BITS {width}u")
    for enum, prefix in ((Opcode, "OP"), (Dtype, "DTYPE"), (Codec, "CODEC"), (Algorithm, "ALGO")):
        out += [f"#define AINIC_{prefix}_{e.name.upper()} {e.value}u" for e in enum]
    out += [f"#define AINIC_STATUS_{s.name.upper()} {s.value}u" for s in Status]
    out.append(f"#define AINIC_MAX_COUNT {MAX_COUNT}u")
    return "\n".join(out) + "\n"
