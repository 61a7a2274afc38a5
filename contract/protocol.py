"""The wire protocol's definitions: header field lists, sizes and limits (docs/protocol.md).

Frame: Ethernet II / IPv4 (IHL 5, DF) / UDP (destination port ``UDP_PORT`` by default) / ainic header
(32 bytes, big-endian) / payload (the packet's elements, encoded per docs/numerics.md). The field lists
are in wire order, as (name, bits); the scapy layer (``host_driver.models.protocol``) and the RTL header
layouts (``hdl.packet.headers``) are both derived from them.
"""

from .enums import Codec

VERSION = 1
UDP_PORT = 0x4149                   # 16713, "AI"
ETHERTYPE_IPV4 = 0x0800
IP_PROTOCOL_UDP = 17

ETH_FIELDS = (("dst", 48), ("src", 48), ("ethertype", 16))
IPV4_FIELDS = (("version", 4), ("ihl", 4), ("dscp_ecn", 8), ("total_length", 16), ("ident", 16), ("flags", 3),
               ("frag_offset", 13), ("ttl", 8), ("protocol", 8), ("checksum", 16), ("src", 32), ("dst", 32))
UDP_FIELDS = (("sport", 16), ("dport", 16), ("length", 16), ("checksum", 16))
#: the ainic header; ``opcode`` is a FrameOpcode, ``codec`` a Codec, ``dtype`` a Dtype, ``flags`` FrameFlags
HEADER_FIELDS = (
    ("version", 8), ("opcode", 8), ("codec", 4), ("dtype", 4), ("flags", 8), ("job", 16), ("collective", 16),
    ("src_rank", 16), ("dst_rank", 16), ("chunk", 16), ("worker", 16), ("slot", 16), ("count", 16),
    ("offset", 32), ("psn", 32), ("reserved", 32),
)


def _bytes(fields) -> int:
    bits = sum(b for _, b in fields)
    assert bits % 8 == 0, fields
    return bits // 8


def field_byte(fields, name: str) -> int:
    """Where field ``name`` begins, in bytes from the start of its header (``fields`` in wire order)."""
    bits = 0
    for field, width in fields:
        if field == name:
            assert bits % 8 == 0, (name, bits)
            return bits // 8
        bits += width
    raise KeyError(name)


ETH_BYTES, IPV4_BYTES, UDP_BYTES = _bytes(ETH_FIELDS), _bytes(IPV4_FIELDS), _bytes(UDP_FIELDS)   # 14, 20, 8
HEADER_BYTES = _bytes(HEADER_FIELDS)                                                             # 32
#: every header in front of the payload: 14 + 20 + 8 + 32 = 74 bytes
FRAME_HEADER_BYTES = ETH_BYTES + IPV4_BYTES + UDP_BYTES + HEADER_BYTES
#: what a link spends per frame beyond its bytes: FCS, preamble + SFD, inter-frame gap
WIRE_OVERHEAD_BYTES = 4 + 8 + 12

DEFAULT_P = 256                     # elements per packet: 256 fp32 = 1024 bytes, a 1098-byte frame
DEFAULT_LAG = 8                     # the work order's lag, register LAG after reset (docs/collective_engine.md)
MIN_P, MAX_P = 16, 1024             # PACKET_ELEMS: a multiple of packet_quantum(W) in this range (fp32 MAX_P: 4,170-byte frame)
MTU_FRAME_BYTES = 1514              # without FCS; larger frames are jumbo, accepted up to MAX_FRAME_BYTES
MAX_FRAME_BYTES = 9014

BFP_BLOCK = 16                      # elements per block-floating-point block

#: mantissa bits per element of the block-floating-point codecs
BFP_MANTISSA_BITS = {Codec.bfp8: 8, Codec.bfp4: 4}


def bfp_block_bytes(codec) -> int:
    """Bytes of one block record: a shared exponent byte, then 16 mantissas."""
    return 1 + BFP_BLOCK * BFP_MANTISSA_BITS[Codec(codec)] // 8


def codec_bytes(codec, count: int) -> int:
    """Bytes on the wire for ``count`` fp32 (or int32, uncompressed) elements under ``codec`` (a Codec, its
    code or its name)."""
    codec = Codec[codec] if isinstance(codec, str) else Codec(codec)
    if count < 0:
        raise ValueError(f"element count must be >= 0, got {count}")
    if codec == Codec.none:
        return 4 * count
    if codec in (Codec.fp16, Codec.bf16):
        return 2 * count
    return -(-count // BFP_BLOCK) * bfp_block_bytes(codec)


def packet_quantum(width: int) -> int:
    """PACKET_ELEMS must be a multiple of this at datapath width ``width``: a BFP block (16), and whole
    beats of fp32 (W/32: 32 at W = 1024), so that a packet starts on a beat and a block."""
    return max(BFP_BLOCK, width // 32)
