"""Frame header layouts (Ethernet II, IPv4, UDP, ainic) and the one byte-order helper.

Byte order: AXI-Stream puts byte 0 of a frame in the low bits of ``tdata`` while network fields are
big-endian. Read as one big-endian integer, a header is a ``StructLayout`` whose fields are listed in
reverse wire order (the last field in the least significant bits). So the single rule is:
``View(layout, network_order(bus_bytes))``, where :func:`network_order` reverses the bytes. This holds for
sub-byte fields too (the ainic codec is the high nibble of its byte, IPv4 flags the top 3 bits of theirs).
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data

from contract.protocol import ETH_FIELDS, HEADER_FIELDS, IPV4_FIELDS, UDP_FIELDS


def network_layout(fields) -> data.StructLayout:
    """The StructLayout of a header given as [(name, bits)] in wire order (see the module docstring)."""
    return data.StructLayout({name: bits for name, bits in reversed(fields)})


EthernetHeader = network_layout(ETH_FIELDS)
Ipv4Header = network_layout(IPV4_FIELDS)
UdpHeader = network_layout(UDP_FIELDS)
AinicHeader = network_layout(HEADER_FIELDS)

FrameHeader = data.StructLayout({               # the whole header, read as one big-endian integer
    "ainic": AinicHeader, "udp": UdpHeader, "ipv4": Ipv4Header, "eth": EthernetHeader,
})


def network_order(value, nbytes: int):
    """Reverse the bytes of a bus value (byte 0 in the low bits) so that network fields read big-endian."""
    return Cat(*[value[8 * (nbytes - 1 - i):8 * (nbytes - i)] for i in range(nbytes)])


def _ip_total(m: Module, ip_bus, name):
    """The plain sum (20 bits) of the ten big-endian words of a 20-byte IPv4 header, as a balanced tree of
    adders (four deep, not a chain of nine)."""
    terms = [Cat(ip_bus[8 * (2 * i + 1):8 * (2 * i + 2)], ip_bus[8 * 2 * i:8 * (2 * i + 1)]) for i in range(10)]
    level = 0
    while len(terms) > 1:
        pairs = []
        for k in range(0, len(terms) - 1, 2):
            t = Signal(20, name=f"{name}_t{level}_{k // 2}")
            m.d.comb += t.eq(terms[k] + terms[k + 1])
            pairs.append(t)
        terms = pairs + terms[len(terms) - len(terms) % 2:]
        level += 1
    return terms[0]


def _ip_sum(m: Module, ip_bus, name):
    """One's-complement sum (folded to 16 bits) of the ten big-endian words of a 20-byte IPv4 header."""
    total = _ip_total(m, ip_bus, name)
    fold1 = Signal(17, name=f"{name}_fold1")
    m.d.comb += fold1.eq(total[:16] + total[16:])
    fold2 = Signal(16, name=f"{name}_fold2")
    m.d.comb += fold2.eq(fold1[:16] + fold1[16])
    return fold2


def ipv4_checksum_ok(m: Module, ip_bus, name="ip_csum"):
    """True if the 20-byte IPv4 header (bus order) has a valid checksum: its words sum to 0xFFFF in one's
    complement, i.e. their plain sum is a non-zero multiple of 0xFFFF (at most ten of them): equality
    compares beside each other in place of the two folding adders."""
    total = _ip_total(m, ip_bus, name)
    return Cat(*[total == k * 0xFFFF for k in range(1, 11)]).any()


def ipv4_checksum(m: Module, ip_bus, name="ip_csum_tx"):
    """The checksum to send for a 20-byte IPv4 header (bus order) whose checksum field is zero."""
    return ~_ip_sum(m, ip_bus, name)
