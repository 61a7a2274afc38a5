"""Test-vector generators shared by the golden-model tests and the RTL testbenches.

Random fp32 bit patterns drawn uniformly hit almost only large normal numbers; these generators
bias exponents and mantissas towards the places where float arithmetic goes wrong.
"""

import numpy as np
from scapy.layers.inet import IP
from scapy.layers.l2 import ARP, Ether

from contract.protocol import MAX_FRAME_BYTES
from host_driver.models import protocol as pr

_EXPONENTS = np.array([0, 0, 1, 2, 23, 24, 25, 100, 126, 127, 128, 150, 200, 253, 254, 254, 255], dtype=np.uint32)
_MANTISSAS = np.array([0, 1, 2, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFE, 0x7FFFFF, 0x1000, 0xFFF], dtype=np.uint32)


def edge_f32_bits(rng: np.random.Generator, n: int, finite: bool = False) -> np.ndarray:
    """n fp32 bit patterns: half uniform, half with edge exponents and/or edge mantissas."""
    u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    exps = _EXPONENTS[:-1] if finite else _EXPONENTS
    pick_e = rng.random(n) < 0.5
    u = np.where(pick_e, (u & 0x807FFFFF) | (rng.choice(exps, n) << 23), u)
    pick_m = rng.random(n) < 0.25
    u = np.where(pick_m, (u & 0xFF800000) | rng.choice(_MANTISSAS, n), u).astype(np.uint32)
    if finite:
        u = np.where((u >> 23) & 0xFF == 0xFF, u & 0xBFFFFFFF, u).astype(np.uint32)
    return u


def adder_edge_pairs():
    """Every pair of a list of named edge values, both orders: (a, b) uint32 arrays."""
    vals = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
            0x00400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
            0xFFC00001, 0x3F800000, 0xBF800000, 0x3F800001, 0x33800000, 0xB3800000, 0x33800001,
            0x4B000000, 0x4B000001, 0x3F7FFFFF, 0x34000000, 0x01000000, 0x81000000, 0x00FFFFFF]
    v = np.array(vals, dtype=np.uint32)
    a, b = np.meshgrid(v, v)
    return a.ravel().astype(np.uint32), b.ravel().astype(np.uint32)


# ---------------------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------------------

def _with_ip(f: bytes, **ip_fields) -> bytes:
    p = Ether(f)
    for k, v in ip_fields.items():
        setattr(p[IP], k, v)
    del p[IP].chksum
    return bytes(p)


def _set(f: bytes, offset: int, value: bytes) -> bytes:
    return f[:offset] + value + f[offset + len(value):]


def malformed_frames():
    """One frame (and its MAC-error flag) per drop reason of host_driver.models.protocol.DROP_REASONS."""
    good = pr.build_frame(np.arange(64, dtype=np.float32).tobytes())
    return {
        "mac_error": (good, True),
        "runt": (good[:60], False),
        "oversize": (pr.build_frame(bytes(MAX_FRAME_BYTES), count=1), False),
        "not_for_us": (pr.build_frame(bytes(4), dst_mac="02:00:00:00:00:99"), False),
        "ethertype": (bytes(Ether(dst=pr.NIC_MAC) / ARP()), False),
        "ip_version_ihl": (_with_ip(good, ihl=6), False),
        "ip_checksum": (_set(good, 24, b"\x12\x34"), False),
        "ip_length": (good[:-4], False),
        "ip_fragment": (_with_ip(good, flags="MF"), False),
        "ip_protocol": (_with_ip(good, proto=6), False),
        "ip_dst": (pr.build_frame(bytes(4), dst_ip="10.0.0.9"), False),
        "udp_port": (pr.build_frame(bytes(4), dport=4791), False),
        "udp_length": (_set(good, 38, b"\x00\x10"), False),
        "version": (pr.build_frame(bytes(4), version=2), False),
        "opcode": (pr.build_frame(bytes(4), opcode=9), False),
        "codec_dtype": (pr.build_frame(bytes(4), codec=1, dtype=1, count=2), False),
        "count": (pr.build_frame(bytes(8), count=3), False),
        "dst_rank": (pr.build_frame(bytes(4), dst_rank=5), False),
    }
