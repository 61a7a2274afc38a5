"""Receive parser: validates Ethernet/IPv4/UDP/ainic frames, drops bad ones whole, realigns the payload."""

from types import SimpleNamespace

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import DATA_OPCODES, Codec, DropReason, Dtype, FrameOpcode
from contract.protocol import (
    ETH_BYTES,
    ETHERTYPE_IPV4,
    FRAME_HEADER_BYTES,
    HEADER_BYTES,
    IP_PROTOCOL_UDP,
    IPV4_BYTES,
    MAX_FRAME_BYTES,
    MAX_P,
    UDP_BYTES,
    UDP_PORT,
    VERSION,
)
from hdl.codec.wire_size import payload_bytes
from hdl.memory import scratch_memory
from hdl.packet.headers import AinicHeader, FrameHeader, ip_sum_ok, ip_words, ipv4_checksum_ok, network_order, sum_tree
from hdl.stream.axis import AxiStreamSignature, check_width, keep_count
from hdl.stream.sync_fifo import SyncFifo

#: the checks of the ring link's sequence (the last three)
SEQ_CHECKS = (DropReason.link_down, DropReason.duplicate, DropReason.out_of_order)

#: the checks that the frame header alone decides (the receive parser's first verdict stage), in
#: ``DropReason`` order
HEADER_CHECKS = [r for r in DropReason if r not in (
    DropReason.mac_error, DropReason.runt, DropReason.oversize, DropReason.ip_length, *SEQ_CHECKS)]


def _frame_end(*path) -> int:
    """Where (the byte after) a field of the frame header ends in the frame: ``path`` names it in
    :data:`FrameHeader` (the header's bus is the frame's bytes in network order, its bit 0 the last byte's)."""
    layout, offset = FrameHeader, 0
    for name in path:
        offset += layout[name].offset
        layout = layout[name].shape
    return FRAME_HEADER_BYTES - offset // 8


#: the ends of the fields that the frame's expected lengths are found from
FIELD_ENDS = (_frame_end("ipv4", "total_length"), _frame_end("ainic", "opcode"), _frame_end("ainic", "codec"),
              _frame_end("ainic", "count"))

#: the fields of the frame header each header check reads (its value is known once the last of them is in)
CHECK_FIELDS = {
    DropReason.not_for_us: [("eth", "dst")],
    DropReason.ethertype: [("eth", "ethertype")],
    DropReason.ip_version_ihl: [("ipv4", "version"), ("ipv4", "ihl")],
    DropReason.ip_checksum: [("ipv4", "dst")],          # (the whole IPv4 header: it ends with dst)
    DropReason.ip_fragment: [("ipv4", "flags"), ("ipv4", "frag_offset")],
    DropReason.ip_protocol: [("ipv4", "protocol")],
    DropReason.ip_dst: [("ipv4", "dst")],
    DropReason.udp_port: [("udp", "dport")],
    DropReason.udp_length: [("udp", "length"), ("ipv4", "total_length")],
    DropReason.version: [("ainic", "version")],
    DropReason.opcode: [("ainic", "opcode")],
    DropReason.codec_dtype: [("ainic", "codec"), ("ainic", "dtype")],
    DropReason.count: [("ainic", "opcode"), ("ainic", "count")],
    DropReason.dst_rank: [("ainic", "dst_rank")],
}

#: ``m_meta``'s record: the accepted frame's ainic header and the sender's IPv4 address
RxMeta = data.StructLayout({"ainic": AinicHeader, "src_ip": 32})


class RxParser(wiring.Component):
    """Frames in on ``s_axis`` (``tuser`` = MAC error on any beat); for each accepted frame, one record on
    ``m_meta`` (an :data:`RxMeta`: the ainic header and the source IPv4 address) and its payload
    on ``m_axis``, realigned so that payload byte 0 is byte 0 of a beat.

    * Checks, in the order of ``contract.enums.DropReason`` (the first failing one is counted in
      ``stat_drops[reason]``); accepted frames count in ``stat_accepted``. The verdict of every frame is
      the one ``host_driver.models.protocol.check_frame`` gives.
    * Store and forward: a frame's payload is written to a buffer as it arrives and published (or rolled
      back) after its last beat, so a bad frame never leaves and never stalls the next one.
    * Throughput: one beat per cycle on ``s_axis`` for back-to-back frames while the outputs keep up.
    * Latency: the payload's first beat and the record leave 5 cycles after the frame's last beat (the
      first of them in the input register).
    * Backpressure: ``s_axis.tready`` is a registered check of buffer room; nothing accepted is lost.
    * Sequence check (the ring's reliable link, contract/link.py), while ``seq_enable``: a data or result
      frame that passes every other check is accepted only if its ``psn`` is ``seq_expect`` and
      ``seq_block`` is low; else it is dropped as ``link_down``, ``duplicate`` (an older psn) or
      ``out_of_order`` (a newer one), and its payload is not written from the moment its header is in.
      ``seq_accepted``, ``seq_duplicate`` and ``seq_out_of_order`` pulse with each verdict of the kind.
      ``seq_expect`` must advance the cycle after ``seq_accepted`` (a register: the link receiver's
      ``expect``), as the psn is compared with it when the header's last beat is taken.
    """

    def __init__(self, width: int = 512, buffer_beats: int = None):
        self.width = check_width(width, self)
        nbytes = width // 8
        self.header_beats = -(-FRAME_HEADER_BYTES // nbytes)
        self.offset = FRAME_HEADER_BYTES % nbytes            # payload's first byte within its beat
        self.payload_cap = -(-(4 * MAX_P) // nbytes) + 1      # beats the largest valid payload needs
        # payload buffer entries: a power of two, at least two of the largest payloads
        self.depth = 1 << (max(2 * self.payload_cap + 4, buffer_beats or 0) - 1).bit_length()
        super().__init__({
            "s_axis": In(AxiStreamSignature(width, 1)),
            "m_axis": Out(AxiStreamSignature(width)),
            "m_meta": Out(stream.Signature(RxMeta)),
            "cfg_mac": In(48),
            "cfg_ip": In(32),
            "cfg_udp_port": In(16, init=UDP_PORT),
            "cfg_rank": In(16),
            "seq_enable": In(1),
            "seq_block": In(1),
            "seq_expect": In(32),
            "seq_accepted": Out(1),
            "seq_duplicate": Out(1),
            "seq_out_of_order": Out(1),
            "stat_accepted": Out(32),
            "stat_drops": Out(data.ArrayLayout(32, len(DropReason))),
        })

    def elaborate(self, platform):
        m = Module()
        W, B = self.width, self.width // 8
        K, o = self.header_beats, self.offset
        entry = W + B + 1

        m.submodules.mem = mem = scratch_memory(shape=entry, depth=self.depth)
        wp = mem.write_port()
        rp = mem.read_port()
        # (the records: written a cycle after the verdict, so up to five frames of one beat each are on their way
        # while ``room`` is seen low; 8 entries cost the same distributed RAM as 4)
        m.submodules.meta = meta = SyncFifo(width=RxMeta.size, depth=8)
        ptr_bits = self.depth.bit_length()
        wr_ptr, commit, rd_ptr = (Signal(ptr_bits, name=n) for n in ("wr_ptr", "commit", "rd_ptr"))

        # -- input side -------------------------------------------------------------------------------
        # (``room``: for the beats that the registered check and the input register keep on their way)
        room = Signal()
        m.d.sync += room.eq((self.depth - (wr_ptr - rd_ptr)[:ptr_bits] > 4) & (meta.level < 3))
        m.d.comb += self.s_axis.tready.eq(room)
        # every beat taken passes an input register, with its byte count: nothing below waits on tkeep's decode
        s = SimpleNamespace(tdata=Signal(W, name="in_data", reset_less=True),
                            tkeep=Signal(B, name="in_keep", reset_less=True),
                            tlast=Signal(name="in_last", reset_less=True), tuser=Signal(name="in_user", reset_less=True))
        take = Signal(name="in_take")
        count = Signal(range(B + 1), name="in_count", reset_less=True)
        m.d.sync += [take.eq(self.s_axis.tvalid & self.s_axis.tready), s.tdata.eq(self.s_axis.tdata),
                     s.tkeep.eq(self.s_axis.tkeep), s.tlast.eq(self.s_axis.tlast), s.tuser.eq(self.s_axis.tuser),
                     count.eq(keep_count(m, self.s_axis.tkeep, "rx_count"))]

        beat = Signal(range(max(K + 1, 2)))            # beat index, saturating at K
        hdr = Signal(8 * B * K)
        h = self._view(hdr)
        # whether the frame's psn is the one expected: with a header of two beats or more, found as its last
        # beat is taken, from the registered header and that beat (the expected psn is then the one this frame
        # meets: the frame before it was judged at least a cycle before, and ``seq_expect`` follows
        # ``seq_accepted`` by a cycle, as the link receiver's does); from the header in a register else
        psn_match = Signal()
        if K >= 2:
            last_hdr = Cat(*[s.tdata if i == K - 1 else hdr[8 * B * i:8 * B * (i + 1)] for i in range(K)])
            with m.If(take & (beat == K - 1)):
                m.d.sync += psn_match.eq(self._view(last_hdr).ainic.psn == self.seq_expect)
        else:
            m.d.comb += psn_match.eq(h.ainic.psn == self.seq_expect)
        seq = self._sequence(m, h.ainic, psn_match)
        length = Signal(16)                             # frame bytes so far (saturating)
        err = Signal()
        prev_tail = Signal(8 * (B - o))                 # bytes o.. of the previous beat
        written = Signal(ptr_bits)                      # payload beats written for this frame
        capped = written >= self.payload_cap

        # the verdict runs the cycle after the last beat, from registers (see the verdict's stages)
        pending = Signal()
        flush = Signal()
        flush_data = Signal(8 * (B - o))
        flush_keep = Signal(B)
        f_len = Signal(16)
        f_err = Signal()

        wr_data = Signal(entry)
        wr_en = Signal()
        m.d.comb += [wp.addr.eq(wr_ptr[:ptr_bits - 1]), wp.data.eq(wr_data), wp.en.eq(wr_en)]

        new_len = Signal(17)
        m.d.comb += new_len.eq(Mux(beat == 0, 0, length) + count)
        m.d.sync += pending.eq(0)
        with m.If(take):
            for i in range(K):
                with m.If(beat == i):
                    m.d.sync += hdr[8 * B * i:8 * B * (i + 1)].eq(s.tdata)
            m.d.sync += [
                beat.eq(Mux(s.tlast, 0, Mux(beat == K, K, beat + 1))),
                length.eq(Mux(new_len > 0xFFFF, 0xFFFF, new_len)),
                err.eq(Mux(beat == 0, 0, err) | s.tuser),
                prev_tail.eq(s.tdata[8 * o:]),
            ]
            with m.If((beat == K) & ~capped & ~seq.bad):     # a frame out of sequence takes no room
                # a payload beat: the previous beat's tail (whole: only a last beat is partial), then this beat's
                # first o bytes, kept as this beat's tkeep says (contiguous: no count needed)
                full = s.tlast & ~s.tkeep[o]                # the frame ends within those o bytes
                m.d.comb += [
                    wr_en.eq(1),
                    wr_data.eq(Cat(prev_tail, s.tdata[:8 * o], C((1 << (B - o)) - 1, B - o), s.tkeep[:o], full)),
                ]
                m.d.sync += [wr_ptr.eq(wr_ptr + 1), written.eq(written + 1)]
            with m.If(s.tlast):
                # (the bytes past the first o: a tail to flush, its keep bits this beat's from byte o on)
                m.d.sync += [
                    pending.eq(1),
                    flush.eq((beat >= K - 1) & s.tkeep[o] & ~capped),
                    flush_data.eq(s.tdata[8 * o:]),
                    flush_keep.eq(Cat(s.tkeep[o:], C(0, o))),
                    f_len.eq(Mux(new_len > 0xFFFF, 0xFFFF, new_len)),
                    f_err.eq(Mux(beat == 0, 0, err) | s.tuser),
                    written.eq(0),
                ]

        # -- verdict, in two stages ----------------------------------------------------------------------
        # 1. as the header's beats are taken, the checks of the header alone (below), registered, so that
        #    they hold the whole header's the cycle after its last beat; ``hdr_next``: the header with this
        #    beat in
        hdr_next = Signal.like(hdr)
        for i in range(K):
            m.d.comb += hdr_next[8 * B * i:8 * B * (i + 1)].eq(
                Mux(beat == i, s.tdata, hdr[8 * B * i:8 * B * (i + 1)]))
        # the IPv4 checksum (the deepest check) from the registered header, a cycle behind, where the IPv4
        # header ends before the last header beat: then it is whole by the cycle of the frame's last beat
        # (a frame shorter than the header is a runt, or of another ethertype: the checksum does not decide)
        ip_at, udp_at = ETH_BYTES, ETH_BYTES + IPV4_BYTES
        early_csum = (udp_at - 1) // B < K - 1
        # the lengths the header calls for, from the registered header where the fields that decide them (the
        # IPv4 length, the opcode, codec and count) end before the header's last beat (a frame that ends
        # sooner is shorter than the header: a runt, or of another ethertype, whose lengths do not decide);
        # else from the header with this beat in
        ends = max(FIELD_ENDS) - 1
        exp_ip_len, exp_len = self._expected_lengths(m, hdr if ends // B < K - 1 else hdr_next)
        exp_ip_len_r, exp_len_r = Signal.like(exp_ip_len), Signal.like(exp_len)
        with m.If(take):
            m.d.sync += [exp_ip_len_r.eq(exp_ip_len), exp_len_r.eq(exp_len)]
        # each header check is found as the beat its fields end in is taken, from the header registered with
        # the beats before it and that beat as it comes (wires: no multiplexer before the compares), and held.
        # (A frame that ends sooner keeps an earlier frame's value of it, which never decides: such a frame is
        # shorter than the header, a runt, unless its ethertype, in a beat it has, drops it first.)
        hf_r = Signal(len(HEADER_CHECKS))
        at_beat = {}
        for r in HEADER_CHECKS:
            if not (r == DropReason.ip_checksum and early_csum):
                end = max(_frame_end(*f) for f in CHECK_FIELDS[r])
                at_beat.setdefault(min(K - 1, (end - 1) // B), []).append(r)
        for j, checks in sorted(at_beat.items()):
            bus = Cat(*[s.tdata if i == j else hdr[8 * B * i:8 * B * (i + 1)] for i in range(K)])
            with m.If(take & (beat == j)):
                m.d.sync += [hf_r[HEADER_CHECKS.index(r)].eq(v) for r, v in self._header_checks(m, bus, checks).items()]
        # 2. the cycle after the last beat: the frame's length, MAC error and sequence beside them
        R = DropReason
        fails = {r: hf_r[i] for i, r in enumerate(HEADER_CHECKS)}
        if early_csum:
            # (its words' pair sums, the tree's first level, registered with the beat as the header is)
            words = ip_words(hdr_next[8 * ip_at:8 * udp_at])
            pair_sums = [Signal(17, name=f"ip_pair{i}") for i in range(5)]
            with m.If(take):
                m.d.sync += [p.eq(words[2 * i] + words[2 * i + 1]) for i, p in enumerate(pair_sums)]
            csum_ok = Signal()
            m.d.sync += csum_ok.eq(ip_sum_ok(sum_tree(m, pair_sums, "ip_csum")))
            fails[R.ip_checksum] = ~csum_ok
        fails.update({
            R.mac_error: f_err,
            R.runt: (f_len < ETH_BYTES) | (~hf_r[HEADER_CHECKS.index(R.ethertype)] & (f_len < FRAME_HEADER_BYTES)),
            R.oversize: f_len > MAX_FRAME_BYTES,
            R.ip_length: f_len != exp_ip_len_r,
            R.count: hf_r[HEADER_CHECKS.index(R.count)] | (f_len != exp_len_r),
            R.link_down: seq.ring & self.seq_block,
            R.duplicate: seq.ring & seq.older,
            R.out_of_order: seq.ring & seq.newer,
        })
        fails = {r: fails[r] for r in DropReason}
        fail_bits = Cat(*fails.values())
        # (the sequence's part of it from the equality, not the subtraction that tells older from newer)
        accept = ~Cat(*[v for r, v in fails.items() if r not in SEQ_CHECKS]).any() & ~seq.bad
        # the seq pulses: a drop for duplicate or out_of_order is one that no earlier check claims
        before_seq = Cat(*[v for r, v in fails.items() if r < R.duplicate]).any()
        # the drop's reason (the first failing check) is counted a cycle later
        drop, drop_bits = Signal(), Signal.like(fail_bits)
        m.d.sync += [drop.eq(0), drop_bits.eq(fail_bits)]
        with m.If(drop):
            for i in range(len(DropReason)):
                with m.If(drop_bits[i] & ~drop_bits[:i].any()):
                    m.d.sync += self.stat_drops[i].eq(self.stat_drops[i] + 1)

        # 3. the cycle after the verdict, an accepted frame's record is written (from a register: the next
        #    frame's first beat may replace the header's meanwhile) and counted
        record, put = Signal(RxMeta), Signal()
        with m.If(pending):
            m.d.sync += [record.ainic.eq(network_order(hdr[8 * (udp_at + UDP_BYTES):8 * FRAME_HEADER_BYTES],
                                                       HEADER_BYTES)),
                         record.src_ip.eq(h.ipv4.src)]
        m.d.sync += put.eq(pending & accept)
        m.d.comb += [meta.w_data.eq(record), meta.w_en.eq(put)]
        with m.If(put):
            m.d.sync += self.stat_accepted.eq(self.stat_accepted + 1)
        with m.If(pending):
            m.d.comb += [self.seq_accepted.eq(accept & seq.ring),
                         self.seq_duplicate.eq(~before_seq & seq.ring & seq.older),
                         self.seq_out_of_order.eq(~before_seq & seq.ring & seq.newer)]
            with m.If(flush & ~seq.bad):
                m.d.comb += [wr_en.eq(1), wr_data.eq(Cat(flush_data, C(0, 8 * o), flush_keep, 1))]
            with m.If(accept):
                m.d.sync += [wr_ptr.eq(wr_ptr + flush), commit.eq(wr_ptr + flush)]   # (accept: seq.bad is 0)
            with m.Else():
                m.d.sync += [wr_ptr.eq(commit), drop.eq(1)]

        # -- output side ---------------------------------------------------------------------------------
        # (``avail``: the buffer holds a published beat, a flip-flop: from the commit pointer as it was a cycle
        # before, so that a frame's payload is seen the cycle after its publication; the read enable of the
        # buffer's block RAMs is one gate from registers)
        out = self.m_axis
        out_valid, avail = Signal(), Signal()
        fetch = avail & (~out_valid | out.tready)
        m.d.comb += [rp.addr.eq(rd_ptr[:ptr_bits - 1]), rp.en.eq(fetch)]
        m.d.sync += avail.eq(Mux(fetch, commit != (rd_ptr + 1)[:ptr_bits], commit != rd_ptr))
        with m.If(fetch):
            m.d.sync += [rd_ptr.eq(rd_ptr + 1), out_valid.eq(1)]
        with m.Elif(out.tready):
            m.d.sync += out_valid.eq(0)
        m.d.comb += [
            out.tvalid.eq(out_valid),
            out.tdata.eq(rp.data[:W]),
            out.tkeep.eq(rp.data[W:W + B]),
            out.tlast.eq(rp.data[W + B]),
            self.m_meta.valid.eq(meta.r_rdy),
            self.m_meta.payload.eq(meta.r_data),
            meta.r_en.eq(self.m_meta.ready),
        ]
        return m

    @staticmethod
    def _view(bus):
        """The frame header ``bus`` (bus order) as a :data:`FrameHeader`."""
        return data.View(FrameHeader, network_order(bus[:8 * FRAME_HEADER_BYTES], FRAME_HEADER_BYTES))

    def _expected_lengths(self, m, bus):
        """What the length of the frame whose header is ``bus`` (bus order) must be: ``ip.total_length`` + the
        Ethernet header, and the whole header + the payload that ``count`` elements of ``codec`` need (a data
        frame; else the header alone). Only the fields of :data:`FIELD_ENDS` are read."""
        h = self._view(bus)
        a = h.ainic
        data_op = Cat(*[a.opcode == op for op in DATA_OPCODES]).any()
        exp_ip_len, exp_len = Signal(17), Signal(20)
        m.d.comb += [exp_ip_len.eq(h.ipv4.total_length + ETH_BYTES),
                     exp_len.eq(FRAME_HEADER_BYTES + Mux(data_op, payload_bytes(m, a.codec, a.count), 0))]
        return exp_ip_len, exp_len

    def _header_checks(self, m, bus, which):
        """The checks ``which`` (of :data:`HEADER_CHECKS`) on the frame header ``bus`` (bus order): {reason: a
        bit that is 1 where the check fails}. Each reads the fields :data:`CHECK_FIELDS` names."""
        h = self._view(bus)
        a, ip, udp, eth = h.ainic, h.ipv4, h.udp, h.eth
        ip_at, udp_at = ETH_BYTES, ETH_BYTES + IPV4_BYTES
        data_op = Cat(*[a.opcode == op for op in DATA_OPCODES]).any()
        R = DropReason
        checks = {
            R.not_for_us: lambda: (eth.dst != self.cfg_mac) & (eth.dst != 0xFFFFFFFFFFFF),
            R.ethertype: lambda: eth.ethertype != ETHERTYPE_IPV4,
            R.ip_version_ihl: lambda: (ip.version != 4) | (ip.ihl != 5),
            R.ip_checksum: lambda: ~ipv4_checksum_ok(m, bus[8 * ip_at:8 * udp_at]),
            R.ip_fragment: lambda: ip.flags[0] | (ip.frag_offset != 0),
            R.ip_protocol: lambda: ip.protocol != IP_PROTOCOL_UDP,
            R.ip_dst: lambda: ip.dst != self.cfg_ip,
            R.udp_port: lambda: udp.dport != self.cfg_udp_port,
            R.udp_length: lambda: udp.length != ip.total_length - IPV4_BYTES,
            R.version: lambda: a.version != VERSION,
            R.opcode: lambda: a.opcode > max(FrameOpcode),
            R.codec_dtype: lambda: (a.codec > max(Codec)) | (a.dtype > max(Dtype))
                           | ((a.dtype == Dtype.int32) & (a.codec != Codec.none)),
            R.count: lambda: data_op & ((a.count == 0) | (a.count > MAX_P)),    # (+ the length: stage 2)
            R.dst_rank: lambda: a.dst_rank != self.cfg_rank,
        }
        assert list(checks) == HEADER_CHECKS == list(CHECK_FIELDS)
        return {r: checks[r]() for r in which}

    def _sequence(self, m, a, psn_match):
        """The sequence check of the header ``a`` (the reliable link's receive rule): ``ring`` (a data or
        result frame while ``seq_enable``), ``older``/``newer`` than ``seq_expect``, ``bad`` (any reason to
        drop it: blocked, older or newer; ``psn_match``: its psn is ``seq_expect``)."""
        ring, older, newer, bad = (Signal(name=f"seq_{n}") for n in ("ring", "older", "newer", "bad"))
        diff = Signal(32, name="seq_diff")
        m.d.comb += [
            ring.eq(self.seq_enable & ((a.opcode == FrameOpcode.data) | (a.opcode == FrameOpcode.result))),
            diff.eq(a.psn - self.seq_expect),
            older.eq(diff[31]), newer.eq(~diff[31] & ~psn_match),
            bad.eq(ring & (self.seq_block | ~psn_match)),       # (older or newer: an equality)
        ]
        return SimpleNamespace(ring=ring, older=older, newer=newer, bad=bad)
