"""The ainic wire protocol: a scapy layer for the all-reduce header, frame building, and the reference
validator that the RTL receive parser is checked against (docs/protocol.md is the prose of this file).

Frame: Ethernet II / IPv4 (IHL 5, DF) / UDP (destination port ``UDP_PORT`` by default) / ainic header
(32 bytes, big-endian) / payload (the packet's elements, encoded per docs/numerics.md).
"""

from dataclasses import dataclass

from scapy.fields import BitEnumField, BitField, ByteEnumField, ByteField, IntField, ShortField, XIntField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers

from contract.addresses import ip_int
from contract.enums import DATA_OPCODES, Codec, DropReason, Dtype, FrameOpcode
from contract.link import psn_diff
from contract.protocol import (
    BFP_MANTISSA_BITS,
    ETH_BYTES,
    HEADER_BYTES,
    HEADER_FIELDS,
    IP_PROTOCOL_UDP,
    IPV4_BYTES,
    MAX_FRAME_BYTES,
    MAX_P,
    UDP_BYTES,
    UDP_PORT,
    VERSION,
    codec_bytes,
)

# Defaults of the NIC configuration that `ainic replay` and the testbenches use.
NIC_MAC = "02:00:00:00:00:01"
PEER_MAC = "02:00:00:00:00:02"
NIC_IP = "10.0.0.1"
PEER_IP = "10.0.0.2"
NIC_RANK = 0
PEER_RANK = 1


def _enum_names(enum) -> dict:
    return {e.value: e.name for e in enum}


#: header fields whose values are enumerations, and fields with a default other than 0
_ENUM_FIELDS = {"opcode": FrameOpcode, "codec": Codec, "dtype": Dtype}
_DEFAULTS = {"version": VERSION, "src_rank": PEER_RANK, "dst_rank": NIC_RANK}


def _scapy_field(name: str, bits: int):
    """The scapy field of one ``contract.protocol.HEADER_FIELDS`` entry (big-endian, as on the wire)."""
    default, enum = _DEFAULTS.get(name, 0), _ENUM_FIELDS.get(name)
    if bits % 8:
        return BitEnumField(name, default, bits, _enum_names(enum)) if enum else BitField(name, default, bits)
    if bits == 8:
        return ByteEnumField(name, default, _enum_names(enum)) if enum else ByteField(name, default)
    if name == "reserved":
        return XIntField(name, default)
    return {16: ShortField, 32: IntField}[bits](name, default)


class Ainic(Packet):
    """The 32-byte ainic header, field for field ``contract.protocol.HEADER_FIELDS``; all big-endian."""

    name = "ainic"
    fields_desc = [_scapy_field(name, bits) for name, bits in HEADER_FIELDS]

    def extract_padding(self, s):
        return s, b""


bind_layers(UDP, Ainic, dport=UDP_PORT)


def payload_bytes(codec: int, count: int) -> int:
    return codec_bytes(codec, count)


def build_frame(payload: bytes = b"", *, dst_mac=NIC_MAC, src_mac=PEER_MAC, src_ip=PEER_IP, dst_ip=NIC_IP,
                sport=UDP_PORT, dport=UDP_PORT, **header_fields) -> bytes:
    """A complete valid frame (no FCS) addressed to the default NIC configuration.

    ``header_fields`` are Ainic fields; ``count`` defaults to what the payload holds for the codec.
    """
    if "codec" in header_fields and isinstance(header_fields["codec"], str):
        header_fields["codec"] = Codec[header_fields["codec"]]
    if "count" not in header_fields:
        codec = Codec(header_fields.get("codec", Codec.none))
        if codec in BFP_MANTISSA_BITS:
            raise ValueError("build_frame: a bfp payload does not tell its element count: pass count=")
        header_fields["count"] = len(payload) // codec_bytes(codec, 1)
    # IPv4 identification 0 (RFC 6864: atomic datagrams, DF set), UDP checksum 0: as the RTL builder sends
    pkt = (Ether(dst=dst_mac, src=src_mac) / IP(src=src_ip, dst=dst_ip, flags="DF", ttl=64, id=0)
           / UDP(sport=sport, dport=dport, chksum=0) / Ainic(**header_fields) / payload)
    return bytes(pkt)


#: drop reason names, in the order the parser checks them (``contract.enums.DropReason``)
DROP_REASONS = [r.name for r in DropReason]


@dataclass
class Verdict:
    accepted: bool
    reason: str | None = None
    header: dict | None = None

    def as_json(self):
        return {"verdict": "accepted" if self.accepted else "dropped", "reason": self.reason}


def _ip_checksum_ok(hdr: bytes) -> bool:
    s = sum(int.from_bytes(hdr[i:i + 2], "big") for i in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def check_frame(frame: bytes, mac_error: bool = False, *, nic_mac=NIC_MAC, nic_ip=NIC_IP, udp_port=UDP_PORT,
                rank=NIC_RANK, expect_psn: int = None, link_down: bool = False) -> Verdict:
    """The reference verdict for one received frame (no FCS): what the RTL parser must decide. With
    ``expect_psn`` (the ring link's receiver, contract/link.py) a data or result frame must also carry that
    psn and the link must not be held in reset (``link_down``)."""
    b = bytes(frame)
    eth_ip_udp = ETH_BYTES + IPV4_BYTES + UDP_BYTES
    if mac_error:
        return Verdict(False, "mac_error")
    if len(b) < 14 or (len(b) >= 14 and b[12:14] == b"\x08\x00" and len(b) < eth_ip_udp + HEADER_BYTES):
        return Verdict(False, "runt")
    if len(b) > MAX_FRAME_BYTES:
        return Verdict(False, "oversize")
    dst = b[0:6]
    if dst != bytes.fromhex(nic_mac.replace(":", "")) and dst != b"\xff" * 6:
        return Verdict(False, "not_for_us")
    if b[12:14] != b"\x08\x00":
        return Verdict(False, "ethertype")
    ip = b[14:34]
    if ip[0] != 0x45:
        return Verdict(False, "ip_version_ihl")
    if not _ip_checksum_ok(ip):
        return Verdict(False, "ip_checksum")
    total = int.from_bytes(ip[2:4], "big")
    if total != len(b) - 14:
        return Verdict(False, "ip_length")
    if (int.from_bytes(ip[6:8], "big") & 0x3FFF) != 0:
        return Verdict(False, "ip_fragment")
    if ip[9] != IP_PROTOCOL_UDP:
        return Verdict(False, "ip_protocol")
    if ip[16:20] != ip_int(nic_ip).to_bytes(4, "big"):
        return Verdict(False, "ip_dst")
    udp = b[34:42]
    if int.from_bytes(udp[2:4], "big") != udp_port:
        return Verdict(False, "udp_port")
    if int.from_bytes(udp[4:6], "big") != total - 20:
        return Verdict(False, "udp_length")
    h = Ainic(b[42:42 + HEADER_BYTES])
    if h.version != VERSION:
        return Verdict(False, "version")
    if h.opcode not in FrameOpcode._value2member_map_:
        return Verdict(False, "opcode")
    if (h.codec not in Codec._value2member_map_ or h.dtype not in Dtype._value2member_map_
            or (h.dtype == Dtype.int32 and h.codec != Codec.none)):
        return Verdict(False, "codec_dtype")
    payload_len = len(b) - eth_ip_udp - HEADER_BYTES
    if h.opcode in DATA_OPCODES:
        if not 1 <= h.count <= MAX_P or payload_len != payload_bytes(h.codec, h.count):
            return Verdict(False, "count")
    elif payload_len != 0:
        return Verdict(False, "count")
    if h.dst_rank != rank:
        return Verdict(False, "dst_rank")
    if expect_psn is not None and h.opcode in (FrameOpcode.data, FrameOpcode.result):
        if link_down:
            return Verdict(False, "link_down")
        d = psn_diff(h.psn, expect_psn)
        if d:
            return Verdict(False, "duplicate" if d < 0 else "out_of_order")
    return Verdict(True, None, {f.name: getattr(h, f.name) for f in Ainic.fields_desc})
