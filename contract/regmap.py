"""The register map, defined once: the RTL register block, the driver's constants, docs/registers.md and the
C header (build/ainic_regs.h) are all generated from :data:`REGISTERS`.

32-bit registers on an AXI4-Lite slave, byte addresses. Access: ``ro`` read-only (status from the NIC),
``rw`` read-write (configuration), ``w1c`` read, write one to clear (interrupt status), ``wo`` write-only
pulses (doorbells; read as 0). 64-bit quantities are LO/HI pairs, LO first. Writes honour the byte strobes. A
write to an ``ro`` register is answered OKAY and changes nothing; an access outside the map answers SLVERR
(a read returns 0). An ``rw`` register narrower than 32 bits stores only its low bits (its description says
which) and reads 0 above them.
"""

from dataclasses import dataclass, field

from .build import FULL, SMALL
from .enums import Codec, DropReason
from .in_network import BACKOFF_MAX, DEADLINE, DEFAULT_WINDOW, MAX_NIC_WINDOW, PAUSE_SHIFT, RETRANSMIT_TIMEOUT
from .limits import MAX_RANKS, NIC_WIDTHS
from .link import RING_DEADLINE
from .protocol import DEFAULT_LAG, DEFAULT_P, UDP_PORT

ID_VALUE = 0x41494E43          # "AINC"
VERSION_VALUE = 0x00010000     # 1.0.0: major.minor.patch in bits 31:16, 15:8, 7:0
#: cycles from a table register's write response until the hardware that reads the table sees the entry
TABLE_READ_CYCLES = 4


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    desc: str


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str
    reset: int
    desc: str
    fields: tuple = field(default_factory=tuple)
    count: int = 1              # an array of `count` registers, 4 bytes apart
    bits: int = 32              # an rw register stores bits bits-1:0; the rest read 0
    table: bool = False         # an rw array the hardware reads one entry at a time: kept in a RAM

    def __post_init__(self):
        if self.access not in ("ro", "rw", "w1c", "wo"):
            raise ValueError(f"{self.name}: unknown access {self.access!r}")
        if self.offset % 4:
            raise ValueError(f"{self.name}: offset {self.offset:#x} is not 32-bit aligned")
        if not 1 <= self.bits <= 32 or self.reset >> self.bits:
            raise ValueError(f"{self.name}: {self.bits} bits cannot hold reset value {self.reset:#x}")
        if self.table and (self.access != "rw" or self.count < 2 or self.bits % 8):
            raise ValueError(f"{self.name}: a table is an rw array of whole bytes")
        for f in self.fields:
            if f.lsb + f.width > self.bits:
                raise ValueError(f"{self.name}.{f.name} does not fit in {self.bits} bits")

    @property
    def mask(self) -> int:
        return (1 << self.bits) - 1


def _codec_mask():
    return sum(1 << code for code in Codec)


def caps_value(width: int, build=None) -> int:
    """CAPS of ``build`` (default: the full NIC, ``contract.build.FULL``) at datapath width ``width``."""
    return (build or FULL).caps(width)


class MapBuilder:
    """Lays registers out one after another: ``reg(...)`` appends one (``align``: start at the next multiple;
    ``reserve``: entries of room an array keeps whatever its ``count`` in this build)."""

    def __init__(self):
        self.regs, self.at = [], 0

    def reg(self, name, access, reset=0, desc="", fields=(), count=1, align=None, bits=32, reserve=None,
            table=False):
        if align:
            self.at = -(-self.at // align) * align
        if bits < 32:
            desc += f" Stores bits {bits - 1}:0; the others read 0."
        if table:
            desc += (" Held in a RAM that the NIC reads an entry at a time: an entry written is in use "
                     f"{TABLE_READ_CYCLES} cycles after its write's response.")
        self.regs.append(Register(name, self.at, access, reset, desc, tuple(fields), count, bits, table))
        self.at += 4 * max(count, reserve or 0)


class RegisterMap:
    """A device's registers: lookups by name, the generated Markdown table and C header. ``constants``:
    the ``ro`` registers whose value is fixed by the build (the register block answers them itself)."""

    def __init__(self, title: str, prefix: str, doc: str, registers, constants=("ID", "VERSION", "CAPS"),
                 source: str = "contract/regmap.py"):
        self.title, self.prefix, self.doc, self.source = title, prefix, doc, source
        self.registers = tuple(registers)
        self.by_name = {r.name: r for r in self.registers}
        self.span = max(r.offset + 4 * r.count for r in self.registers)
        self.constants = tuple(constants)
        spans = sorted((r.offset, r.offset + 4 * r.count, r.name) for r in self.registers)
        for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
            if b0 < a1:
                raise ValueError(f"registers {an} and {bn} overlap")

    def of(self, access: str) -> list:
        """The registers with this access (``ro``: the constants left out)."""
        return [r for r in self.registers if r.access == access and r.name not in self.constants]

    def offset(self, name: str, index: int = 0) -> int:
        """Byte offset of register ``name`` (element ``index`` of an array)."""
        try:
            r = self.by_name[name]
        except KeyError:
            raise KeyError(f"no register {name!r}") from None
        if not 0 <= index < r.count:
            raise IndexError(f"{name} has {r.count} entr{'y' if r.count == 1 else 'ies'}, index {index} is out of range")
        return r.offset + 4 * index

    def field_masks(self, name: str) -> dict:
        """{field: mask} of a register's one-bit-or-wider fields (``1 << lsb`` for flags)."""
        return {f.name: ((1 << f.width) - 1) << f.lsb for f in self.by_name[name].fields}

    def render_markdown(self, preamble: str = "") -> str:
        lines = [f"# {self.title}", "",
                 f"*Generated from `{self.source}` by `scripts/gen_regs.py`; do not edit by hand.*", "",
                 self.doc, ""]
        if preamble:
            lines += [preamble, ""]
        lines += ["| offset | name | access | reset | description |", "|--------|------|--------|-------|-------------|"]
        for r in self.registers:
            name = r.name if r.count == 1 else f"{r.name}[0..{r.count - 1}]"
            lines.append(f"| `{r.offset:#06x}` | `{name}` | {r.access} | `{r.reset:#x}` | {r.desc} |")
            for f in r.fields:
                bits = f"{f.lsb + f.width - 1}:{f.lsb}" if f.width > 1 else f"{f.lsb}"
                lines.append(f"| | `.{f.name}` | | bits {bits} | {f.desc} |")
        return "\n".join(lines) + "\n"

    def render_c_header(self, extra: str = "") -> str:
        """The C header; ``extra`` (more #defines) goes before the closing guard."""
        P, guard = self.prefix, f"{self.prefix}_REGS_H"
        out = [f"/* {P.lower()} register map. Generated from {self.source} by scripts/gen_regs.py; do not edit. */",
               f"#ifndef {guard}", f"#define {guard}", "",
               f"#define {P}_REG_SPAN 0x{self.span:x}u", ""]
        for r in self.registers:
            out.append(f"/* {r.desc} ({r.access}) */")
            out.append(f"#define {P}_{r.name} 0x{r.offset:04x}u")
            if r.count > 1:
                out.append(f"#define {P}_{r.name}_COUNT {r.count}u")
                out.append(f"#define {P}_{r.name}_AT(i) ({P}_{r.name} + 4u * (i))")
            if r.reset:
                out.append(f"#define {P}_{r.name}_RESET 0x{r.reset:x}u")
            for f in r.fields:
                out.append(f"#define {P}_{r.name}_{f.name.upper()}_SHIFT {f.lsb}u")
                out.append(f"#define {P}_{r.name}_{f.name.upper()}_MASK 0x{((1 << f.width) - 1) << f.lsb:x}u")
        out += ["", extra, f"#endif /* {guard} */", ""]
        return "\n".join(out)


def _build():
    mb = MapBuilder()
    reg = mb.reg
    reg("ID", "ro", ID_VALUE, 'Identifies an ainic NIC: "AINC".')
    reg("VERSION", "ro", VERSION_VALUE, "Register map version: major 31:16, minor 15:8, patch 7:0.")
    reg("CAPS", "ro", 0, "What this build has (contract/build.py; the reset column's 0 stands for the build's "
        "value): the full build " + ", ".join(f"`{caps_value(w):#010x}` at W = {w}" for w in sorted(NIC_WIDTHS))
        + f"; the small build `{caps_value(64, SMALL):#010x}` at W = 64.", [
        Field("data_width_bytes", 0, 8, "W/8: the datapath width in bytes (8 .. 128)"),
        Field("max_ranks_log2", 8, 8, f"log2 of the largest world size of a ring collective (peer table "
              f"entries: {MAX_RANKS} in the full build, the entries above it answer SLVERR)"),
        Field("codecs", 16, 8, f"bit per codec built (none = bit 0 ... bfp4 = bit 4); all five = {_codec_mask():#x}"),
        Field("dtypes", 24, 4, "bit per element type: fp32 = bit 0, int32 = bit 1"),
        Field("algorithms", 28, 2, "bit per algorithm: ring = bit 0 (always), switch = bit 1 (the switch client)"),
    ])
    reg("CONTROL", "rw", 0, "Global control.", [
        Field("enable", 0, 1, "1: the NIC takes descriptors and frames; 0: it finishes the current descriptor, "
              "then holds SQ_HEAD, SQ_TAIL and CQ_TAIL at 0 (configure the rings, then enable)"),
        Field("reset_stats", 1, 1, "write 1: clear every counter (self-clearing)"),
        Field("link_reset", 2, 1, "1: hold the ring's links in reset (psn, credits, the retransmission buffer, "
              "received frames not yet taken: all dropped; data frames arriving are dropped as link_down). "
              "After a timeout or a NIC reset, set it on every NIC of the ring, wait for the links to drain, "
              "clear it on all (docs/collective_engine.md, \"Reliable links\")"),
    ], bits=3)
    reg("RANK", "rw", 0, "This NIC's rank in the job (0 .. WORLD_SIZE-1).")
    reg("WORLD_SIZE", "rw", 1, f"Number of ranks (1 .. {MAX_RANKS}).")
    reg("UDP_PORT", "rw", UDP_PORT, "UDP port of ainic traffic, both directions.", bits=16)
    reg("PACKET_ELEMS", "rw", DEFAULT_P, "P: elements per packet, a multiple of 16 (of 32 on the W = 1024 NIC), 16 .. 1024.")
    reg("LOCAL_MAC_LO", "rw", 0, "This NIC's MAC address, bits 31:0: the address read as a 48-bit number, "
        "first octet most significant (02:00:00:00:00:01: LO = 0x00000001, HI = 0x0200).")
    reg("LOCAL_MAC_HI", "rw", 0, "This NIC's MAC address, bits 47:32 (its first two octets).", bits=16)
    reg("LOCAL_IP", "rw", 0, "This NIC's IPv4 address, first octet most significant (10.0.0.1 = 0x0a000001).")
    reg("LAG", "rw", DEFAULT_LAG, "Collective work order: packet k of phase p runs at key k + LAG*p (1 .. 255; "
        "docs/collective_engine.md). Every rank of a job must use the same value.", bits=8)
    reg("JOB_ID", "rw", 0, "Job id carried in every ainic header; a received frame of another job ends the "
        "collective with status network_mismatch.", bits=16)
    for name, bits, desc in (("SQ", "submission", "descriptors written by the host"),
                             ("CQ", "completion", "completion records written by the NIC")):
        reg(f"{name}_BASE_LO", "rw", 0, f"Host address of the {bits} ring ({desc}), bits 31:0; 64-byte aligned.",
            align=0x10 if name == "SQ" else None)
        reg(f"{name}_BASE_HI", "rw", 0, f"Host address of the {bits} ring, bits 63:32.")
        reg(f"{name}_SIZE_LOG2", "rw", 0, f"log2 of the {bits} ring's entry count (1 .. 15).", bits=5)
    reg("SQ_HEAD", "ro", 0, "Free-running 16-bit index of the next descriptor the NIC will fetch.")
    reg("SQ_DOORBELL", "wo", 0, "Write the free-running 16-bit producer index: the NIC fetches up to it. "
        "A value more than the ring size ahead of SQ_HEAD is ignored and sets ERROR_STATUS.doorbell.")
    reg("SQ_TAIL", "ro", 0, "The last accepted doorbell value (free-running 16-bit producer index).")
    reg("CQ_TAIL", "ro", 0, "Free-running 16-bit index of the next completion record the NIC will write.")
    reg("CQ_HEAD", "rw", 0, "Free-running 16-bit index the host has consumed completions up to; the NIC "
        "waits while the ring is full (CQ_TAIL - CQ_HEAD = size).", bits=16)
    reg("DESC_COMPLETED", "ro", 0, "Descriptors completed (any status, wraps).")
    reg("DESC_ERRORS", "ro", 0, "Descriptors completed with a status other than ok (wraps).")
    reg("IRQ_ENABLE", "rw", 0, "Interrupt enable, one bit per cause (as IRQ_STATUS).", bits=2)
    reg("IRQ_STATUS", "w1c", 0, "Interrupt causes; `irq` is high while (IRQ_STATUS & IRQ_ENABLE) != 0.", [
        Field("completion", 0, 1, "a completion record was written"),
        Field("error", 1, 1, "ERROR_STATUS became non-zero"),
    ])
    reg("ERROR_STATUS", "w1c", 0, "Sticky errors.", [
        Field("dma", 0, 1, "an AXI read or write returned SLVERR/DECERR"),
        Field("int32_overflow", 1, 1, "an int32 reduction saturated"),
        Field("framing", 2, 1, "the reduction unit saw inputs with different framing"),
        Field("doorbell", 3, 1, "an SQ_DOORBELL value more than the ring size ahead of SQ_HEAD was ignored"),
        Field("ring_config", 4, 1, "enabled with a ring size outside 1 .. 15 or a base not 64-byte aligned"),
        Field("completion_write", 5, 1, "writing a completion record failed (the descriptor is lost)"),
    ])
    reg("PEER_MAC_LO", "rw", 0, "Peer table: MAC address of rank i, bits 31:0 (as LOCAL_MAC_LO).", count=MAX_RANKS,
        align=0x100, table=True)
    reg("PEER_MAC_HI", "rw", 0, "Peer table: MAC address of rank i, bits 47:32 (as LOCAL_MAC_HI).", count=MAX_RANKS,
        bits=16, table=True)
    reg("PEER_IP", "rw", 0, "Peer table: IPv4 address of rank i (as LOCAL_IP).", count=MAX_RANKS, table=True)
    reg("RX_ACCEPTED", "ro", 0, "Frames the parser accepted.", align=0x100)
    reg("RX_BYTES", "ro", 0, "Bytes of accepted frames (wraps).")
    reg("TX_FRAMES", "ro", 0, "Frames the builder sent.")
    reg("TX_BYTES", "ro", 0, "Bytes of sent frames (wraps).")
    reg("RETRANSMISSIONS", "ro", 0, "Frames sent again after a loss (the ring's link and the switch client).")
    for reason in DropReason:
        reg(f"RX_DROP_{reason.name.upper()}", "ro", 0,
            f"Frames the parser dropped for `{reason.name}` (docs/protocol.md).")
    # in-network aggregation: descriptors with algorithm switch (docs/in_network.md, "The worker")
    reg("SWITCH_MAC_LO", "rw", 0, "The aggregation switch's MAC address, bits 31:0 (as LOCAL_MAC_LO).", align=0x100)
    reg("SWITCH_MAC_HI", "rw", 0, "The aggregation switch's MAC address, bits 47:32.", bits=16)
    reg("SWITCH_IP", "rw", 0, "The aggregation switch's IPv4 address (as LOCAL_IP).")
    reg("AGG_WINDOW_LOG2", "rw", DEFAULT_WINDOW.bit_length() - 1,
        f"log2 of the job's window S: slots this NIC keeps in flight (0 .. {MAX_NIC_WINDOW.bit_length() - 1}); "
        "the switch's job entry must have the same window.", bits=3)
    reg("AGG_PSN", "ro", 0, "The packet number g of this NIC's next contribution (docs/in_network.md): 0 after "
        "reset, advanced by the packet count of every switch all-reduce, set by AGG_PSN_SET.")
    reg("AGG_PSN_SET", "wo", 0, "Write: AGG_PSN takes the value written (every worker of a job must agree; "
        "write it while no collective runs).")
    reg("RETX_TIMEOUT", "rw", RETRANSMIT_TIMEOUT, "Cycles a NIC waits for a contribution's result after it "
        f"left before it sends it again, once a later one's result has come or no new result has come for "
        f"RETX_TIMEOUT >> {PAUSE_SHIFT} cycles; each "
        "resend of it doubles the wait, up to RETX_TIMEOUT << RETX_BACKOFF_MAX.")
    reg("RETX_BACKOFF_MAX", "rw", BACKOFF_MAX, "The most doublings of the retransmission wait (0 .. 7).", bits=3)
    reg("AGG_DEADLINE", "rw", DEADLINE, "Cycles without a new result after which a switch all-reduce completes "
        "with status timeout.")
    reg("AGG_DUP_RESULTS", "ro", 0, "Results dropped: a copy of one already taken, or for no packet in flight.")
    reg("AGG_TIMEOUTS", "ro", 0, "Switch all-reduces that ended with status timeout.")
    reg("AGG_STORED_RESENDS", "ro", 0, "Contributions sent again from the NIC's frame store (the other "
        "RETRANSMISSIONS of a switch all-reduce were read and encoded again: docs/in_network.md, \"The worker\").")
    # the ring's reliable links (contract/link.py, docs/collective_engine.md "Reliable links")
    reg("RING_DEADLINE", "rw", RING_DEADLINE, "Cycles in which no stage of a ring collective moved after which "
        "it completes with status timeout (0: never).", align=0x100)
    reg("LINK_TX_PSN", "ro", 0, "The psn of the next new frame to the next rank (frames sent since the link reset).")
    reg("LINK_TX_UNACKED", "ro", 0, "Frames sent to the next rank and not yet acknowledged (kept for resending).")
    reg("LINK_RX_PSN", "ro", 0, "The psn expected next from the previous rank (frames received in order since "
        "the link reset).")
    reg("LINK_TIMEOUTS", "ro", 0, "Times the retransmission timer ran out (each sends every unacknowledged frame "
        "again).")
    reg("LINK_NACKS_RECEIVED", "ro", 0, "Nacks received from the next rank (each sends again from its psn).")
    reg("LINK_PROBES", "ro", 0, "Frames sent again as a probe: waiting for credit with nothing unacknowledged, the "
        "timer ran out (the ack that held the credit may be lost; the copy makes the receiver ack).")
    reg("LINK_NACKS_SENT", "ro", 0, "Nacks sent to the previous rank (a frame after a missing one arrived).")
    reg("LINK_ACKS_SENT", "ro", 0, "Acks sent to the previous rank.")
    reg("RING_TIMEOUTS", "ro", 0, "Ring collectives that ended with status timeout.")
    reg("LINK_CREDIT_WAITS", "ro", 0, "Cycles in which the engine offered the link a new frame and the next "
        "rank's credits held it back: the credits binding.")
    return mb.regs


NIC = RegisterMap("Registers", "AINIC", __doc__.strip().split("\n\n", 1)[1].replace("\n", " ").replace("``", "`"),
                  _build())
REGISTERS, BY_NAME, SPAN = NIC.registers, NIC.by_name, NIC.span
offset, field_masks = NIC.offset, NIC.field_masks


def render_markdown() -> str:
    return NIC.render_markdown(
        "In RTL the map is `RegisterBlock` (`hdl/host/register_block.py`): `rw` registers drive its `cfg` outputs, "
        "`ro` registers read its `stat` inputs, `w1c` bits are set through `set`, `wo` writes pulse `strobe`; "
        "addresses outside the map answer SLVERR. C code includes `build/ainic_regs.h` (`make verilog`).")


render_c_header = NIC.render_c_header
