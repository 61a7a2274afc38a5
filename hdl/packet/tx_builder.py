"""Transmit builder: ainic header metadata + payload stream in, a complete Ethernet/IPv4/UDP frame out."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import DATA_OPCODES
from contract.protocol import (
    ETH_BYTES,
    ETHERTYPE_IPV4,
    FRAME_HEADER_BYTES,
    HEADER_BYTES,
    IP_PROTOCOL_UDP,
    IPV4_BYTES,
    IPV4_FIELDS,
    MAX_P,
    UDP_BYTES,
    UDP_FIELDS,
    UDP_PORT,
    field_byte,
)
from hdl.codec.wire_size import payload_bytes
from hdl.packet.headers import AinicHeader, FrameHeader, ip_word_sum, network_order, ones_complement_fold
from hdl.stream.axis import AxiStreamSignature, check_width, keep_mask

IP_FIXED = IPV4_BYTES + UDP_BYTES + HEADER_BYTES     # IPv4 total length without the payload
UDP_FIXED = UDP_BYTES + HEADER_BYTES                 # UDP length without the payload
#: the bytes where the header checksum, the IPv4 total length and the UDP length begin (the order of ``late``)
LATE_AT = (ETH_BYTES + field_byte(IPV4_FIELDS, "checksum"), ETH_BYTES + field_byte(IPV4_FIELDS, "total_length"),
           ETH_BYTES + IPV4_BYTES + field_byte(UDP_FIELDS, "length"))

#: ``s_meta``'s record: the ainic header to send, and where to: the next hop's IPv4 and MAC addresses
TxMeta = data.StructLayout({"ainic": AinicHeader, "dst_ip": 32, "dst_mac": 48})


class TxBuilder(wiring.Component):
    """For each record on ``s_meta``, one frame on ``m_axis``: Ethernet (``cfg_mac`` -> ``dst_mac``),
    IPv4 (IHL 5, DF, TTL 64, identification 0, checksum computed), UDP (both ports ``cfg_udp_port``,
    checksum 0, see docs/protocol.md), the ainic header, then the payload from ``s_axis``.

    * The payload stream must carry exactly ``codec_bytes(codec, count)`` bytes for an opcode that carries a
      payload (``DATA_OPCODES``), none for the others (acks and nacks: ``s_axis`` is not read, whatever
      ``count`` says); lengths in the headers come from the opcode, ``count`` and ``codec``.
    * Bit-exact with ``host_driver.models.protocol.build_frame`` for the same fields.
    * Throughput: one beat per cycle on ``m_axis`` for back-to-back frames while the payload keeps up;
      the next record is taken in the cycle the previous frame's last beat leaves.
    * Latency: 1 cycle from ``s_meta`` to the first beat. ``m_axis.tvalid`` never waits on ``tready``.
    * Timing: the record's header goes into a register as it is taken; the lengths and the IPv4 checksum
      (which need the payload's length) are computed from registers the cycle after, and registered again
      where they fall in a later beat than the first (W < 256: no path from ``s_meta`` through the checksum).
    """

    def __init__(self, width: int = 512):
        self.width = check_width(width, self)
        super().__init__({
            "s_meta": In(stream.Signature(TxMeta)),
            "s_axis": In(AxiStreamSignature(width)),
            "m_axis": Out(AxiStreamSignature(width)),
            "cfg_mac": In(48),
            "cfg_ip": In(32),
            "cfg_udp_port": In(16, init=UDP_PORT),
        })

    def elaborate(self, platform):
        m = Module()
        W, B = self.width, self.width // 8
        H = FRAME_HEADER_BYTES
        K = -(-H // B)
        o = H % B                                      # header bytes in the beat where the payload begins
        meta = self.s_meta.payload
        pin, out = self.s_axis, self.m_axis

        # -- the header of the frame offered on s_meta ---------------------------------------------------
        # acks and nacks carry no payload whatever their count says (the ring link's credit, contract/link.py)
        carries = Cat(*[meta.ainic.opcode == op for op in DATA_OPCODES]).any()
        plen = Signal(range(4 * MAX_P + 1), name="tx_plen")
        m.d.comb += plen.eq(Mux(carries, payload_bytes(m, meta.ainic.codec, meta.ainic.count, "tx_count_bytes"), 0))

        def header_of(ainic, dst_ip, dst_mac):
            """The header with the lengths' fixed parts (the payload's bytes are added a cycle later) and a
            zero checksum."""
            hv = Signal(FrameHeader)
            m.d.comb += [
                hv.eth.dst.eq(dst_mac), hv.eth.src.eq(self.cfg_mac), hv.eth.ethertype.eq(ETHERTYPE_IPV4),
                hv.ipv4.version.eq(4), hv.ipv4.ihl.eq(5), hv.ipv4.total_length.eq(IP_FIXED),
                hv.ipv4.flags.eq(0b010), hv.ipv4.ttl.eq(64), hv.ipv4.protocol.eq(IP_PROTOCOL_UDP),
                hv.ipv4.src.eq(self.cfg_ip), hv.ipv4.dst.eq(dst_ip),
                hv.udp.sport.eq(self.cfg_udp_port), hv.udp.dport.eq(self.cfg_udp_port), hv.udp.length.eq(UDP_FIXED),
                hv.ainic.eq(ainic),
            ]
            bus = Signal(8 * H)
            m.d.comb += bus.eq(network_order(hv.as_value(), H))
            return bus
        # the IPv4 words that come from the configuration (and constants), summed ahead in a register: a
        # record adds only its destination's two words
        cfg_sum = Signal(20)
        ip_part = slice(8 * ETH_BYTES, 8 * (ETH_BYTES + IPV4_BYTES))
        m.d.sync += cfg_sum.eq(ip_word_sum(m, header_of(0, 0, 0)[ip_part], "tx_ip_cfg"))
        header = header_of(meta.ainic, meta.dst_ip, meta.dst_mac)
        fixed_sum = cfg_sum + meta.dst_ip[16:] + meta.dst_ip[:16]

        # -- the lengths and the checksum, the cycle after the record is taken ------------------------------
        # (from registers: the plain sum plus the payload's bytes, folded; a field in the first beat takes
        # them as they are computed, a field in a later beat from a register)
        p_plen, p_sum = Signal.like(plen), Signal(20)
        total = Signal(20, name="tx_ip_total")
        m.d.comb += total.eq(p_sum + p_plen)
        csum, ip_len, udp_len = (Signal(16, name=f"tx_{n}") for n in ("ip_csum", "ip_len", "udp_len"))
        m.d.comb += [csum.eq(~ones_complement_fold(m, total, "tx_ip")), ip_len.eq(IP_FIXED + p_plen),
                     udp_len.eq(UDP_FIXED + p_plen)]
        late = Cat(csum, ip_len, udp_len)
        late_q = Signal(48)
        m.d.sync += late_q.eq(late)
        hdr = Signal(8 * H)
        full = Signal(8 * H)
        patched = {LATE_AT[i]: (late if LATE_AT[i] < B else late_q)[16 * i:16 * i + 16] for i in range(3)}
        parts, at = [], 0
        for off in sorted(patched):
            parts += [hdr[8 * at:8 * off], patched[off][8:], patched[off][:8]]      # big-endian
            at = off + 2
        m.d.comb += full.eq(Cat(*parts, hdr[8 * at:]))

        # -- frame state -------------------------------------------------------------------------------------
        active = Signal()
        idx = Signal(range(max(K + 1, 2)))              # output beat index, saturating at K
        left = Signal(17)                               # frame bytes still to send
        in_left = Signal(17)                            # payload bytes still to read
        prev_tail = Signal(8 * o)

        need_input = in_left != 0
        hdr_beats = Cat(full, C(0, 8 * (K * B - H)))
        beat_data = Signal(W)
        with m.If(idx < K - 1):
            m.d.comb += beat_data.eq(hdr_beats.word_select(idx, W))
        with m.Elif(idx == K - 1):
            m.d.comb += beat_data.eq(Cat(full[8 * (K - 1) * B:], pin.tdata[:8 * (B - o)]))
        with m.Else():
            m.d.comb += beat_data.eq(Cat(prev_tail, pin.tdata[:8 * (B - o)]))
        uses_input = (idx >= K - 1) & need_input
        kept = Signal(range(B + 1))
        m.d.comb += kept.eq(Mux(left > B, B, left))
        m.d.comb += [
            out.tvalid.eq(active & (~uses_input | pin.tvalid)),
            out.tdata.eq(beat_data),
            out.tkeep.eq(keep_mask(kept, B)),
            out.tlast.eq(left <= B),
        ]
        fire = out.tvalid & out.tready
        m.d.comb += pin.tready.eq(active & uses_input & out.tready)
        done = fire & out.tlast
        m.d.comb += self.s_meta.ready.eq(~active | done)

        with m.If(fire):
            m.d.sync += [idx.eq(Mux(idx == K, K, idx + 1)), left.eq(left - B)]
            with m.If(uses_input):
                m.d.sync += [prev_tail.eq(pin.tdata[8 * (B - o):]),
                             in_left.eq(Mux(in_left > B, in_left - B, 0))]
            with m.If(out.tlast):
                m.d.sync += active.eq(0)
        with m.If(self.s_meta.valid & self.s_meta.ready):
            m.d.sync += [active.eq(1), hdr.eq(header), idx.eq(0), left.eq(H + plen), in_left.eq(plen),
                         p_plen.eq(plen), p_sum.eq(fixed_sum)]
        return m
