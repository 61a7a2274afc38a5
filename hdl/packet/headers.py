"""Frame header layouts (Ethernet II, IPv4, UDP, ainic) and the one byte-order helper.

Byte order: AXI-Stream puts byte 0 of a frame in the low bits of ``tdata`` while network fields are
big-endian. Read as one big-endian integer, a header is a ``StructLayout`` whose fields are listed in
reverse wire order (the last field in the least significant bits). So the single rule is:
``View(layout, network_order(bus_bytes))``, where :func:`network_order` reverses the bytes. This holds for
sub-byte fields too (the ainic codec is the high nibble of its byte, IPv4 flags the top 3 bits of theirs).
"""

from amaranth import Cat, Module, Mux, Signal
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


def ip_words(ip_bus):
    """The ten big-endian 16-bit words of a 20-byte IPv4 header (bus order)."""
    return [Cat(ip_bus[8 * (2 * i + 1):8 * (2 * i + 2)], ip_bus[8 * 2 * i:8 * (2 * i + 1)]) for i in range(10)]


def sum_tree(m: Module, terms, name, width=20):
    """The plain sum of ``terms`` as a balanced tree of adders (log2 deep, not a chain)."""
    level = 0
    while len(terms) > 1:
        pairs = []
        for k in range(0, len(terms) - 1, 2):
            t = Signal(width, name=f"{name}_t{level}_{k // 2}")
            m.d.comb += t.eq(terms[k] + terms[k + 1])
            pairs.append(t)
        terms = pairs + terms[len(terms) - len(terms) % 2:]
        level += 1
    return terms[0]


def ip_word_sum(m: Module, ip_bus, name):
    """The plain sum (20 bits) of the ten words of a 20-byte IPv4 header, four adders deep."""
    return sum_tree(m, ip_words(ip_bus), name)


def ip_sum_ok(total):
    """Whether the plain sum of an IPv4 header's ten words says its checksum is right: their
    one's-complement sum is 0xFFFF exactly when the plain sum is a non-zero multiple of 0xFFFF (at most ten
    of them): equality compares beside each other in place of the two folding adders."""
    return Cat(*[total == k * 0xFFFF for k in range(1, 11)]).any()


def ones_complement_fold(m: Module, total, name):
    """A plain sum of at most 16 words (20 bits) folded to its 16-bit one's-complement sum: the low half
    plus the high bits, and the end-around carry chosen between that sum and the sum plus one (one adder
    deep, not two in a row)."""
    low, high = total[:16], total[16:]
    plain, plus1 = Signal(17, name=f"{name}_fold"), Signal(17, name=f"{name}_fold_plus1")
    m.d.comb += [plain.eq(low + high), plus1.eq(low + high + 1)]
    return Mux(plain[16], plus1[:16], plain[:16])


def ipv4_checksum_ok(m: Module, ip_bus, name="ip_csum"):
    """True if the 20-byte IPv4 header (bus order) has a valid checksum (:func:`ip_sum_ok`)."""
    return ip_sum_ok(ip_word_sum(m, ip_bus, name))
