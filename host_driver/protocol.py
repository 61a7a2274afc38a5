"""The ainic wire protocol: a scapy layer for the all-reduce header, frame building, and the reference
validator that the RTL receive parser is checked against (docs/protocol.md is the prose of this file).

Frame: Ethernet II / IPv4 (IHL 5, DF) / UDP (destination port ``UDP_PORT`` by default) / ainic header
(32 bytes, big-endian) / payload (the packet's elements, encoded per docs/numerics.md).
"""

from dataclasses import dataclass

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers
from scapy.fields import BitEnumField, BitField, ByteEnumField, ByteField, IntField, ShortField, XIntField

from . import numerics as nm

VERSION = 1
UDP_PORT = 0x4149                   # 16713, "AI"
HEADER_BYTES = 32
DEFAULT_P = 256                     # elements per packet: 256 fp32 = 1024 bytes, a 1098-byte frame
MAX_P = 1024                        # elements per packet the parser accepts (fp32: a 4,170-byte jumbo frame)
MTU_FRAME_BYTES = 1514              # without FCS; larger frames are jumbo, accepted up to MAX_FRAME_BYTES
MAX_FRAME_BYTES = 9014

OPCODES = {0: "data", 1: "result", 2: "ack", 3: "nack"}
DTYPES = {0: "fp32", 1: "int32"}
CODEC_NAMES = {v: k for k, v in nm.CODECS.items()}
FLAG_RETRANSMIT = 0x01
FLAG_LAST_OF_CHUNK = 0x02
FLAG_SHADOW = 0x04                  # in-network aggregation: which of a slot's two pools (pool/shadow bit)

# Defaults of the NIC configuration that `ainic replay` and the testbenches use.
NIC_MAC = "02:00:00:00:00:01"
PEER_MAC = "02:00:00:00:00:02"
NIC_IP = "10.0.0.1"
PEER_IP = "10.0.0.2"
NIC_RANK = 0
PEER_RANK = 1


def mac_int(mac: str) -> int:
    """"02:00:00:00:00:01" -> the 48-bit integer a cfg_mac register holds."""
    return int(mac.replace(":", ""), 16)


def ip_int(ip: str) -> int:
    """"10.0.0.1" -> the 32-bit integer a cfg_ip register holds."""
    return int.from_bytes(bytes(int(x) for x in ip.split(".")), "big")


class Ainic(Packet):
    """The 32-byte ainic header. All fields big-endian (network order)."""

    name = "ainic"
    fields_desc = [
        ByteField("version", VERSION),
        ByteEnumField("opcode", 0, OPCODES),
        BitEnumField("codec", 0, 4, CODEC_NAMES),
        BitEnumField("dtype", 0, 4, DTYPES),
        ByteField("flags", 0),
        ShortField("job", 0),
        ShortField("collective", 0),
        ShortField("src_rank", PEER_RANK),
        ShortField("dst_rank", NIC_RANK),
        ShortField("chunk", 0),
        ShortField("worker", 0),
        ShortField("slot", 0),
        ShortField("count", 0),
        IntField("offset", 0),
        IntField("psn", 0),
        XIntField("reserved", 0),
    ]

    def extract_padding(self, s):
        return s, b""


bind_layers(UDP, Ainic, dport=UDP_PORT)


def header_fields():
    """[(name, bits)] of the ainic header in wire order: the one field list the RTL layouts derive from."""
    out = []
    for f in Ainic.fields_desc:
        bits = f.size if isinstance(f, BitField) else 8 * f.sz
        out.append((f.name, int(bits)))
    assert sum(b for _, b in out) == 8 * HEADER_BYTES
    return out


def payload_bytes(codec: int, count: int) -> int:
    return nm.codec_bytes(CODEC_NAMES[codec], count)


def build_frame(payload: bytes = b"", *, dst_mac=NIC_MAC, src_mac=PEER_MAC, src_ip=PEER_IP, dst_ip=NIC_IP,
                sport=UDP_PORT, dport=UDP_PORT, **header_fields) -> bytes:
    """A complete valid frame (no FCS) addressed to the default NIC configuration.

    ``header_fields`` are Ainic fields; ``count`` defaults to what the payload holds for the codec.
    """
    if "codec" in header_fields and isinstance(header_fields["codec"], str):
        header_fields["codec"] = nm.CODECS[header_fields["codec"]]
    if "count" not in header_fields:
        per = {0: 4, 1: 2, 2: 2}.get(header_fields.get("codec", 0))
        if per is None:
            raise ValueError("build_frame: a bfp payload does not tell its element count: pass count=")
        header_fields["count"] = len(payload) // per
    # IPv4 identification 0 (RFC 6864: atomic datagrams, DF set), UDP checksum 0: as the RTL builder sends
    pkt = (Ether(dst=dst_mac, src=src_mac) / IP(src=src_ip, dst=dst_ip, flags="DF", ttl=64, id=0)
           / UDP(sport=sport, dport=dport, chksum=0) / Ainic(**header_fields) / payload)
    return bytes(pkt)


#: Drop reasons, in the order the parser checks them (the first that applies is counted).
DROP_REASONS = [
    "mac_error",        # tuser (MAC-reported error) on any beat
    "runt",             # shorter than Ethernet + IPv4 + UDP + ainic headers
    "oversize",         # longer than MAX_FRAME_BYTES
    "not_for_us",       # destination MAC neither ours nor broadcast
    "ethertype",        # not IPv4 (ARP, IPv6, ... take the 'other' path: see docs/protocol.md)
    "ip_version_ihl",   # version != 4 or IHL != 5 (options unsupported)
    "ip_checksum",
    "ip_length",        # total length disagrees with the frame (truncated or longer than the frame)
    "ip_fragment",      # MF set or fragment offset != 0
    "ip_protocol",      # not UDP
    "ip_dst",           # destination IP not ours
    "udp_port",         # not our UDP port
    "udp_length",       # UDP length != IP total length - 20
    "version",          # ainic version
    "opcode",
    "codec_dtype",      # unknown codec or dtype, or a codec on int32
    "count",            # count = 0, > MAX_P, or payload length != codec bytes for count
    "dst_rank",
]


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
                rank=NIC_RANK) -> Verdict:
    """The reference verdict for one received frame (no FCS): what the RTL parser must decide."""
    b = bytes(frame)
    eth_ip_udp = 14 + 20 + 8
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
    if ip[9] != 17:
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
    if h.opcode not in OPCODES:
        return Verdict(False, "opcode")
    if h.codec not in CODEC_NAMES or h.dtype not in DTYPES or (h.dtype == 1 and h.codec != 0):
        return Verdict(False, "codec_dtype")
    payload_len = len(b) - eth_ip_udp - HEADER_BYTES
    if h.opcode in (0, 1):
        if not 1 <= h.count <= MAX_P or payload_len != payload_bytes(h.codec, h.count):
            return Verdict(False, "count")
    elif payload_len != 0:
        return Verdict(False, "count")
    if h.dst_rank != rank:
        return Verdict(False, "dst_rank")
    return Verdict(True, None, {f.name: getattr(h, f.name) for f in Ainic.fields_desc})
