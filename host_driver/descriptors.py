"""Submission descriptors and completion records, defined once: the RTL layouts (``hdl/command_processor.py``),
the driver, the software model and ``docs/host_interface.md`` all read these tables.

Both records are 64 bytes, little-endian, fields packed from bit 0 of byte 0 in the order listed.
:func:`check` is the reference validation: the RTL applies the same checks in the same order and
completes a bad descriptor with the first failing check's status.
"""

from dataclasses import dataclass

from . import numerics as nm
from .regmap import MAX_RANKS

RECORD_BYTES = 64

#: (name, bits, description)
DESCRIPTOR_FIELDS = (
    ("opcode", 8, "what to do: OPCODES"),
    ("dtype", 8, "element type: DTYPES"),
    ("codec", 8, "wire codec (numerics.CODECS); for copy, a codec other than none is applied and undone"),
    ("algorithm", 8, "collective algorithm: ALGORITHMS"),
    ("collective", 16, "collective id, echoed in the completion and carried in every packet"),
    ("flags", 16, "reserved, 0"),
    ("count", 32, "elements (1 .. MAX_COUNT)"),
    ("reserved0", 32, "0"),
    ("src", 64, "host address of the input, a multiple of 4"),
    ("dst", 64, "host address of the output, a multiple of 4"),
    ("tag", 64, "anything: echoed in the completion"),
    ("reserved1", 192, "0"),
)

COMPLETION_FIELDS = (
    ("status", 8, "STATUS code: 0 = ok"),
    ("opcode", 8, "the descriptor's opcode"),
    ("phase", 8, "1 on the ring's first pass, then 0, 1, ... alternately: a record is new when phase matches"),
    ("reserved0", 8, "0"),
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
    ("host_bytes", 64, "bytes written to host memory (the result)"),
)

OPCODES = {"copy": 1, "allreduce": 2, "reduce_scatter": 3, "allgather": 4}
COLLECTIVES = ("allreduce", "reduce_scatter", "allgather")
DTYPES = {"fp32": 0, "int32": 1}
ALGORITHMS = {"ring": 0}
MAX_COUNT = 1 << 26                 # elements per descriptor (256 MiB of fp32)
MIN_P, MAX_P = 16, 1024

#: code -> (name, meaning), in check order for the descriptor checks
STATUS = {
    0: ("ok", "done"),
    1: ("bad_opcode", "opcode is not one of OPCODES"),
    2: ("bad_dtype", "dtype is not one of DTYPES"),
    3: ("bad_codec", "codec is not one of numerics.CODECS"),
    4: ("codec_dtype", "a codec other than none on int32 elements"),
    5: ("bad_algorithm", "algorithm is not one of ALGORITHMS"),
    6: ("bad_count", f"count is 0 or above MAX_COUNT ({MAX_COUNT})"),
    7: ("bad_alignment", "src or dst is not a multiple of 4"),
    8: ("bad_range", "src or dst + count*4 runs past the end of the 64-bit address space"),
    9: ("bad_world_size", f"collective with WORLD_SIZE outside 1 .. {MAX_RANKS} or RANK >= WORLD_SIZE"),
    10: ("bad_packet_size", f"a codec or collective with PACKET_ELEMS not a multiple of 16 in {MIN_P} .. {MAX_P}"),
    11: ("unsupported", "a valid operation this build does not execute (none today; the code is kept stable)"),
    16: ("read_slverr", "a host-memory read returned SLVERR (the destination may be partly written)"),
    17: ("read_decerr", "a host-memory read returned DECERR (the destination may be partly written)"),
    18: ("write_slverr", "a host-memory write returned SLVERR"),
    19: ("write_decerr", "a host-memory write returned DECERR"),
    20: ("fetch_error", "reading the descriptor itself failed; the completion carries only sq_index"),
    21: ("network_mismatch", "a received packet's header disagreed with the packet the ring expected next "
         "(wrong peer configuration, or a lost or corrupted frame): the result is not reliable"),
    22: ("ring_too_large", "the receive buffer cannot hold the frames this WORLD_SIZE keeps in flight at this "
         "PACKET_ELEMS even with lag 1 (host_driver.credits.max_lag): use a smaller PACKET_ELEMS"),
}
STATUS_CODE = {name: code for code, (name, _) in STATUS.items()}


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

    @property
    def ok(self) -> bool:
        return self.status == 0

    @property
    def status_name(self) -> str:
        return STATUS.get(self.status, (f"unknown_{self.status}", ""))[0]

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


#: opcodes this build checks but does not execute (they complete with ``unsupported``): none today
UNSUPPORTED_OPCODES = ()


def check(desc: dict, world_size: int, rank: int, packet_elems: int) -> int:
    """Status code for a descriptor (fields as :func:`unpack` gives them) under the NIC's registers:
    0 when it may run, else the first failing check's code."""
    op = desc["opcode"]
    if op not in OPCODES.values():
        return STATUS_CODE["bad_opcode"]
    if desc["dtype"] not in DTYPES.values():
        return STATUS_CODE["bad_dtype"]
    if desc["codec"] not in nm.CODECS.values():
        return STATUS_CODE["bad_codec"]
    if desc["dtype"] == DTYPES["int32"] and desc["codec"] != nm.CODECS["none"]:
        return STATUS_CODE["codec_dtype"]
    if desc["algorithm"] not in ALGORITHMS.values():
        return STATUS_CODE["bad_algorithm"]
    if not 1 <= desc["count"] <= MAX_COUNT:
        return STATUS_CODE["bad_count"]
    if desc["src"] % 4 or desc["dst"] % 4:
        return STATUS_CODE["bad_alignment"]
    if desc["src"] + 4 * desc["count"] > 1 << 64 or desc["dst"] + 4 * desc["count"] > 1 << 64:
        return STATUS_CODE["bad_range"]
    collective = op != OPCODES["copy"]
    if collective and not (1 <= world_size <= MAX_RANKS and rank < world_size):
        return STATUS_CODE["bad_world_size"]
    if (collective or desc["codec"] != nm.CODECS["none"]) and not (
            packet_elems % 16 == 0 and MIN_P <= packet_elems <= MAX_P):
        return STATUS_CODE["bad_packet_size"]
    if op in UNSUPPORTED_OPCODES:
        return STATUS_CODE["unsupported"]
    return 0


def render_markdown() -> str:
    """docs/descriptors.md: both record layouts, the codes, the checks in order."""
    def table(fields):
        rows = ["| byte | bits | field | meaning |", "|------|------|-------|---------|"]
        for name, bits, desc in fields:
            lsb, _ = (DESCRIPTOR_BITS if fields is DESCRIPTOR_FIELDS else COMPLETION_BITS)[name]
            rows.append(f"| {lsb // 8} | {bits} | `{name}` | {desc} |")
        return rows

    def codes(table_):
        return ", ".join(f"`{k}` = {v}" for k, v in table_.items())

    lines = ["# Descriptors and completions", "",
             "*Generated from `host_driver/descriptors.py` by `scripts/gen_regs.py`; do not edit by hand.*", "",
             f"Both records are {RECORD_BYTES} bytes, little-endian; a field starts at the byte shown (fields "
             "are packed from bit 0 of byte 0 in the order listed). How the rings work: "
             "[host_interface.md](host_interface.md).", "",
             "## Submission descriptor", "", *table(DESCRIPTOR_FIELDS), "",
             f"Opcodes: {codes(OPCODES)}. Element types: {codes(DTYPES)}. Codecs: {codes(nm.CODECS)}. "
             f"Algorithms: {codes(ALGORITHMS)}. `MAX_COUNT` = {MAX_COUNT}.", "",
             "## Completion record", "", *table(COMPLETION_FIELDS), "",
             "## Status codes", "",
             "Descriptor checks run in this order; the first that fails is the status and nothing is read "
             "or written for that descriptor (registers: `WORLD_SIZE`, `RANK`, `PACKET_ELEMS`).", "",
             "| code | name | meaning |", "|------|------|---------|"]
    lines += [f"| {code} | `{name}` | {meaning} |" for code, (name, meaning) in STATUS.items()]
    return "\n".join(lines) + "\n"


def render_c_defines() -> str:
    """Descriptor/completion byte offsets, opcodes and status codes for build/ainic_regs.h."""
    out = ["/* Descriptors and completions (host_driver/descriptors.py): byte offset and bits of each field. */",
           f"#define AINIC_RECORD_BYTES {RECORD_BYTES}u"]
    for prefix, fields, bits in (("DESC", DESCRIPTOR_FIELDS, DESCRIPTOR_BITS),
                                 ("CPL", COMPLETION_FIELDS, COMPLETION_BITS)):
        for name, _, _ in fields:
            if not name.startswith("reserved"):
                lsb, width = bits[name]
                out.append(f"#define AINIC_{prefix}_{name.upper()}_BYTE {lsb // 8}u")
                out.append(f"#define AINIC_{prefix}_{name.upper()}_BITS {width}u")
    for table, prefix in ((OPCODES, "OP"), (DTYPES, "DTYPE"), (nm.CODECS, "CODEC"), (ALGORITHMS, "ALGO")):
        out += [f"#define AINIC_{prefix}_{k.upper()} {v}u" for k, v in table.items()]
    out += [f"#define AINIC_STATUS_{name.upper()} {code}u" for code, (name, _) in STATUS.items()]
    out.append(f"#define AINIC_MAX_COUNT {MAX_COUNT}u")
    return "\n".join(out) + "\n"
