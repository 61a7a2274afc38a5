"""Command processor: fetches descriptors from the submission ring, checks them, runs them, writes completions."""

from types import SimpleNamespace

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from contract import descriptors as ds
from contract import regmap as rm
from contract.build import FULL, NicBuild
from contract.enums import Algorithm, Codec, Dtype, Opcode, Status
from contract.in_network import MAX_JOB_WORKERS
from contract.limits import MAX_COUNT
from contract.protocol import MAX_P, MIN_P, packet_quantum
from hdl.engine.collective_engine import EngineStatus, NetCounters
from hdl.engine.plan_calculator import PlanCalculator
from hdl.engine.ring_sequencer import PlanLayout
from hdl.host.axi import RESP_SLVERR
from hdl.host.dma_engine import dma_user_members
from hdl.stream.axis import AxiStreamSignature, check_width

Descriptor = data.StructLayout({name: bits for name, bits, _ in ds.DESCRIPTOR_FIELDS})
CompletionRecord = data.StructLayout({name: bits for name, bits, _ in ds.COMPLETION_FIELDS})
S = Status

#: what the command processor reads from the register block
RingConfig = data.StructLayout({
    "enable": 1, "sq_base": 64, "sq_size_log2": 5, "cq_base": 64, "cq_size_log2": 5, "cq_head": 16,
    "world_size": 32, "rank": 32, "packet_elems": 32, "lag": 8,
})
#: what it reports
RingStatus = data.StructLayout({"sq_head": 16, "sq_tail": 16, "cq_tail": 16, "completed": 32, "errors": 32})
ERR = rm.field_masks("ERROR_STATUS")
IRQ = rm.field_masks("IRQ_STATUS")


def _any(values):
    out = C(0, 1)
    for v in values:
        out = out | v
    return out


def check_descriptor(m, d, cfg, width, build=FULL):
    """Status of descriptor ``d`` under ``cfg`` at datapath width ``width`` in a NIC built as ``build``
    (``contract.build``): :func:`contract.descriptors.check` in RTL, same order."""
    count_bytes = Cat(C(0, 2), d.count)
    src_end = Signal(65)
    dst_end = Signal(65)
    m.d.comb += [src_end.eq(d.src + count_bytes), dst_end.eq(d.dst + count_bytes)]

    def past_end(end):
        return end[64] & (end[:64] != 0)

    collective = d.opcode != Opcode.copy
    switch = d.algorithm == Algorithm.switch
    limit = Mux(switch, MAX_JOB_WORKERS, build.max_ranks)
    p = cfg.packet_elems
    quantum_bits = packet_quantum(width).bit_length() - 1
    checks = [
        (~((d.opcode >= min(Opcode)) & (d.opcode <= max(Opcode))), Status.bad_opcode),
        (d.dtype > max(Dtype), Status.bad_dtype),
        (d.codec > max(Codec), Status.bad_codec),
        ((d.dtype == Dtype.int32) & (d.codec != Codec.none), Status.codec_dtype),
        (d.algorithm > max(Algorithm), Status.bad_algorithm),
        ((d.count == 0) | (d.count > MAX_COUNT), Status.bad_count),
        ((d.src[:2] != 0) | (d.dst[:2] != 0), Status.bad_alignment),
        (past_end(src_end) | past_end(dst_end), Status.bad_range),
        (collective & ((cfg.world_size == 0) | (cfg.world_size > limit) | (cfg.rank >= cfg.world_size)),
         Status.bad_world_size),
        ((collective | (d.codec != Codec.none)) & ((p[:quantum_bits] != 0) | (p < MIN_P) | (p > MAX_P)),
         Status.bad_packet_size),
    ]
    unsupported = switch & (d.opcode != Opcode.allreduce)
    for c in Codec:                         # what the build left out
        if c not in build.codecs:
            unsupported = unsupported | (d.codec == c)
    if not build.switch:
        unsupported = unsupported | switch
    if ds.UNSUPPORTED_OPCODES:
        unsupported = unsupported | _any(d.opcode == op for op in ds.UNSUPPORTED_OPCODES)
    checks.append((unsupported, Status.unsupported))
    checks.append((_any(getattr(d, name) != 0 for name in ds.RESERVED_FIELDS), Status.bad_reserved))
    status = Signal(8, name="check_status")
    with m.If(checks[0][0]):
        m.d.comb += status.eq(checks[0][1])
    for cond, code in checks[1:]:
        with m.Elif(cond):
            m.d.comb += status.eq(code)
    return status


class CommandProcessor(wiring.Component):
    """Runs the submission ring one descriptor at a time (docs/host_interface.md).

    For each descriptor between SQ_HEAD and the doorbell: wait for a free completion slot, read the
    64-byte descriptor through the DMA engine, check it (:func:`check_descriptor`), run it (the local-copy
    opcode: DMA read -> optional codec round trip -> DMA write, read and write concurrently), then write
    the 64-byte completion record, advance the indices and raise the completion interrupt. A bad
    descriptor is completed with its status and costs no data movement; a DMA error ends the copy with
    a read/write status (the rest of the copy goes out with ``wstrb`` = 0) and the NIC goes on.

    Ports: ``cfg``/``stat`` to the register block, ``doorbell`` (strobe + value), ``set_irq`` /
    ``set_error`` (bits to set in IRQ_STATUS / ERROR_STATUS), the DMA engine's command, data and status
    streams, and the codec loop's streams.

    An ALLREDUCE with WORLD_SIZE 1 is a plain copy (no codec: docs/allreduce.md). With more ranks the
    processor computes the ring plan (:class:`PlanCalculator`, about 100 cycles), strobes
    ``engine_start`` and hands the DMA ports to the collective engine (``engine_active``) until its
    ``engine_busy`` falls; the completion then carries the engine's status and the network counters'
    growth over the descriptor (frames and bytes sent and received).
    """

    def __init__(self, width: int = 512, build: NicBuild = FULL):
        self.width = check_width(width, self)
        self.build = build
        self.credits = build.credits
        W = width
        super().__init__({
            "cfg": In(RingConfig),
            "stat": Out(RingStatus),
            "doorbell": In(1),
            "doorbell_value": In(16),
            "set_irq": Out(32),
            "set_error": Out(32),
            **dma_user_members(W),
            "wr_poison": Out(1),
            "loop_in": Out(AxiStreamSignature(W)),
            "loop_out": In(AxiStreamSignature(W)),
            "loop_codec": Out(Codec),
            "loop_count": Out(32),
            "loop_start": Out(1),
            "busy": Out(1),
            # the collective engine: the descriptor and plan it runs, a start strobe, ``engine_active`` while
            # it owns the DMA ports, and its busy/status
            "desc": Out(Descriptor),
            "plan": Out(PlanLayout),
            "engine_start": Out(1),
            "engine_active": Out(1),
            "use_switch": Out(1),           # the descriptor runs on the switch client (algorithm switch)
            "engine_busy": In(1),
            "engine_status": In(EngineStatus),
            "net": In(NetCounters),
        })

    def elaborate(self, platform):
        """One descriptor at a time through the states below; ``s`` carries the registers they share."""
        m = Module()
        s = self._ring_indices(m)
        self._descriptor_and_record(m, s)
        self._dma_stream_errors(m, s)
        with m.FSM():
            self._wait_for_work(m, s)           # IDLE
            self._fetch_descriptor(m, s)        # FETCH, FETCH_DATA
            self._check_and_dispatch(m, s)      # CHECK
            self._run_collective(m, s)          # PLAN, LAUNCH, COLLECTIVE
            self._copy(m, s)                    # COPY
            self._write_completion(m, s)        # COMPLETE, RECORD, RECORD_WAIT
        self._raise_interrupts(m, s)
        return m

    def _ring_indices(self, m):
        """SQ head and tail, CQ tail, the counters, the rings' sizes and checks, and the doorbell: it accepts
        a producer index at most one ring ahead of the consumer. ``s.err``: the ERROR_STATUS bits to set."""
        cfg, st = self.cfg, self.stat
        s = SimpleNamespace(sq_head=Signal(16), sq_tail=Signal(16), cq_tail=Signal(16),
                            completed=Signal(32), errors=Signal(32))
        m.d.comb += [st.sq_head.eq(s.sq_head), st.sq_tail.eq(s.sq_tail), st.cq_tail.eq(s.cq_tail),
                     st.completed.eq(s.completed), st.errors.eq(s.errors)]

        def ring_ok(base, log2):
            return (base[:6] == 0) & (log2 >= 1) & (log2 <= 15)
        s.rings_ok = ring_ok(cfg.sq_base, cfg.sq_size_log2) & ring_ok(cfg.cq_base, cfg.cq_size_log2)
        s.sq_size, s.cq_size = Signal(17), Signal(17)
        m.d.comb += [s.sq_size.eq(1 << cfg.sq_size_log2[:4]), s.cq_size.eq(1 << cfg.cq_size_log2[:4])]
        s.cq_used = Signal(16)
        m.d.comb += s.cq_used.eq(s.cq_tail - cfg.cq_head)

        s.err = {name: Signal(name=f"err_{name}")
                 for name in ("dma", "doorbell", "ring_config", "completion_write", "int32_overflow", "framing")}
        s.irq_done = Signal()
        ahead = Signal(16)
        m.d.comb += ahead.eq(self.doorbell_value - s.sq_head)
        with m.If(self.doorbell & cfg.enable):
            with m.If(ahead <= s.sq_size):
                m.d.sync += s.sq_tail.eq(self.doorbell_value)
            with m.Else():
                m.d.comb += s.err["doorbell"].eq(1)
        with m.If(cfg.enable & ~s.rings_ok):
            m.d.comb += s.err["ring_config"].eq(1)
        return s

    def _descriptor_and_record(self, m, s):
        """The descriptor register, its verdict (:func:`check_descriptor`), the ring plan computed from it
        (:class:`PlanCalculator`), the cycle counter, and the completion record they fill in."""
        cfg = self.cfg
        s.desc = desc = Signal(Descriptor)
        s.status = Signal(8)
        s.stall = Signal(8)
        s.cycles = Signal(64)
        s.timing = Signal()
        s.host_bytes = Signal(64)
        s.fetch_resp = Signal(2)
        s.record_beats = max(1, 512 // self.width)       # a 64-byte record: one beat from W = 512 on
        s.beat = Signal(range(s.record_beats + 1))      # the record beat being written
        s.head = Signal()                   # writing the record's first beat (phase byte) rather than the rest
        with m.If(s.timing):
            m.d.sync += s.cycles.eq(s.cycles + 1)
        s.verdict = check_descriptor(m, desc, cfg, self.width, self.build)
        m.submodules.plan = s.plan = plan = PlanCalculator(self.credits)
        m.d.comb += [
            plan.elements.eq(desc.count), plan.nodes.eq(cfg.world_size), plan.packet.eq(cfg.packet_elems),
            plan.rank.eq(cfg.rank), plan.lag.eq(cfg.lag), self.plan.eq(plan.plan), self.desc.eq(desc),
            # allreduce, reduce_scatter, allgather (opcodes 2, 3, 4) -> ring_sequencer.OPS 0, 1, 2
            plan.op.eq(desc.opcode - Opcode.allreduce),
            # the descriptor register holds still from CHECK until the next fetch: the codec loop's settings
            self.loop_codec.eq(desc.codec), self.loop_count.eq(desc.count),
        ]
        s.net0, s.net_delta = Signal(NetCounters), Signal(NetCounters)
        s.record = record = Signal(CompletionRecord)
        phase = ~(s.cq_tail >> cfg.cq_size_log2[:4])[0]
        m.d.comb += [
            record.status.eq(s.status), record.stall.eq(s.stall), record.opcode.eq(desc.opcode), record.phase.eq(phase),
            record.sq_index.eq(s.sq_head), record.collective.eq(desc.collective), record.cycles.eq(s.cycles),
            record.tag.eq(desc.tag), record.host_bytes.eq(s.host_bytes),
            record.packets_sent.eq(s.net_delta.tx_frames), record.bytes_sent.eq(s.net_delta.tx_bytes),
            record.packets_received.eq(s.net_delta.rx_frames), record.bytes_received.eq(s.net_delta.rx_bytes),
            record.retransmissions.eq(s.net_delta.retransmissions),
            self.use_switch.eq(desc.algorithm == Algorithm.switch),
        ]

    def _dma_stream_errors(self, m, s):
        """The worst response of the read stream since the last reset of ``s.read_resp``, and the write
        poison: a beat read with an error is never written (poisoned in the cycle it passes, as the straight
        copy hands read beats to the writer in the same cycle, and every beat after it) while ``s.poison``."""
        rd = self.rd_data
        s.read_resp = Signal(2)
        with m.If(rd.tvalid & rd.tready & (rd.tuser > s.read_resp)):
            m.d.sync += s.read_resp.eq(rd.tuser)
        s.poison = Signal()
        m.d.comb += self.wr_poison.eq(s.poison & ((s.read_resp >= RESP_SLVERR)
                                                  | (rd.tvalid & (rd.tuser >= RESP_SLVERR))))

    def _wait_for_work(self, m, s):
        """IDLE: a pending descriptor and a free completion slot start one (disabled: the indices reset)."""
        with m.State("IDLE"):
            with m.If(~self.cfg.enable):
                m.d.sync += [s.sq_head.eq(0), s.sq_tail.eq(0), s.cq_tail.eq(0)]
            with m.Elif(s.rings_ok & (s.sq_head != s.sq_tail) & (s.cq_used < s.cq_size)):
                m.d.sync += [s.cycles.eq(0), s.timing.eq(1), s.fetch_resp.eq(0), s.read_resp.eq(0), s.beat.eq(0),
                             s.host_bytes.eq(0), s.head.eq(s.record_beats == 1)]
                m.next = "FETCH"

    def _fetch_descriptor(self, m, s):
        """FETCH, FETCH_DATA: read the 64-byte descriptor at SQ_HEAD; ``s.fetch_resp``, its worst response."""
        W, rd = self.width, self.rd_data
        with m.State("FETCH"):
            m.d.comb += [
                self.rd_cmd.valid.eq(1),
                self.rd_cmd.payload.addr.eq(self.cfg.sq_base + ((s.sq_head & (s.sq_size - 1)) << 6)),
                self.rd_cmd.payload.length.eq(ds.RECORD_BYTES),
            ]
            with m.If(self.rd_cmd.ready):
                m.next = "FETCH_DATA"
        with m.State("FETCH_DATA"):
            m.d.comb += rd.tready.eq(1)
            with m.If(rd.tvalid):
                m.d.sync += s.desc.eq(Cat(s.desc.as_value()[W:], rd.tdata) if W < 512 else rd.tdata)
                with m.If(rd.tlast):
                    m.d.sync += s.fetch_resp.eq(Mux(rd.tuser > s.read_resp, rd.tuser, s.read_resp))
                    m.next = "CHECK"

    def _check_and_dispatch(self, m, s):
        """CHECK: a failed fetch or a bad descriptor goes straight to its completion; a collective over
        more than one rank to the plan; anything else (a copy, a one-rank collective) to the copy."""
        desc, plan = s.desc, s.plan
        is_collective = (desc.opcode != Opcode.copy) & (self.cfg.world_size > 1)
        s.sent_rd, s.sent_wr, s.use_loop = Signal(), Signal(), Signal()
        with m.State("CHECK"):
            m.d.sync += [s.read_resp.eq(0), s.sent_rd.eq(0), s.sent_wr.eq(0), s.net0.eq(self.net), s.stall.eq(0),
                         s.net_delta.eq(0),
                         s.use_loop.eq((desc.codec != Codec.none) & (desc.opcode == Opcode.copy))]
            with m.If(s.fetch_resp >= RESP_SLVERR):
                m.d.comb += s.err["dma"].eq(1)
                m.d.sync += [s.status.eq(Status.fetch_error), desc.eq(0)]
                m.next = "COMPLETE"
            with m.Elif(s.verdict != 0):
                m.d.sync += s.status.eq(s.verdict)
                m.next = "COMPLETE"
            with m.Elif(is_collective & (desc.algorithm == Algorithm.switch)):
                m.d.sync += s.status.eq(0)
                m.next = "LAUNCH"                  # the switch needs no ring plan
            with m.Elif(is_collective):
                m.d.sync += [s.status.eq(0), plan.start.eq(1)]
                m.next = "PLAN"
            with m.Else():
                m.d.sync += s.status.eq(0)
                m.d.comb += self.loop_start.eq(1)
                m.next = "COPY"

    def _run_collective(self, m, s):
        """PLAN: compute the ring plan (a lag the credits cannot carry completes with ``ring_too_large``);
        LAUNCH, COLLECTIVE: the engine owns the DMA ports until its busy falls, then its status and the
        network counters' growth over the descriptor go into the record."""
        plan = s.plan
        with m.State("PLAN"):
            m.d.sync += plan.start.eq(0)
            with m.If(plan.done):
                with m.If(plan.lag_ok):
                    m.next = "LAUNCH"
                with m.Else():
                    m.d.sync += [s.status.eq(Status.ring_too_large), s.timing.eq(0)]
                    m.next = "COMPLETE"
        with m.State("LAUNCH"):
            m.d.comb += [self.engine_start.eq(1), self.engine_active.eq(1)]
            m.next = "COLLECTIVE"
        with m.State("COLLECTIVE"):
            m.d.comb += self.engine_active.eq(1)
            es, net, net0 = self.engine_status, self.net, s.net0
            with m.If(~self.engine_busy):
                m.d.comb += [s.err["int32_overflow"].eq(es.overflow), s.err["framing"].eq(es.framing),
                             s.err["dma"].eq((es.read_resp >= RESP_SLVERR) | (es.write_resp >= RESP_SLVERR))]
                m.d.sync += [
                    s.timing.eq(0),
                    s.net_delta.tx_frames.eq(net.tx_frames - net0.tx_frames),
                    s.net_delta.tx_bytes.eq(net.tx_bytes - net0.tx_bytes),
                    s.net_delta.rx_frames.eq(net.rx_frames - net0.rx_frames),
                    s.net_delta.rx_bytes.eq(net.rx_bytes - net0.rx_bytes),
                    s.net_delta.retransmissions.eq(net.retransmissions - net0.retransmissions),
                ]
                with m.If(es.read_resp >= RESP_SLVERR):
                    m.d.sync += s.status.eq(Mux(es.read_resp == RESP_SLVERR, Status.read_slverr, Status.read_decerr))
                with m.Elif(es.write_resp >= RESP_SLVERR):
                    m.d.sync += s.status.eq(Mux(es.write_resp == RESP_SLVERR,
                                                Status.write_slverr, Status.write_decerr))
                with m.Elif(es.timeout):
                    m.d.sync += [s.status.eq(Status.timeout), s.stall.eq(es.stall)]
                with m.Elif(es.mismatch != 0):
                    m.d.sync += s.status.eq(Status.network_mismatch)
                with m.Else():
                    # what the engine wrote: the whole result, or the rank's own chunk (reduce-scatter)
                    m.d.sync += s.host_bytes.eq(es.host_bytes)
                m.next = "COMPLETE"

    def _copy(self, m, s):
        """COPY: one DMA read and one DMA write of the whole tensor, concurrently; the data goes straight
        across or through the codec loop (a copy with a codec). Done when the write is answered."""
        desc, rd, wr = s.desc, self.rd_data, self.wr_data
        length = Cat(C(0, 2), desc.count)
        with m.State("COPY"):
            m.d.comb += [
                s.poison.eq(1),
                self.rd_cmd.valid.eq(~s.sent_rd),
                self.rd_cmd.payload.addr.eq(desc.src), self.rd_cmd.payload.length.eq(length),
                self.wr_cmd.valid.eq(~s.sent_wr),
                self.wr_cmd.payload.addr.eq(desc.dst), self.wr_cmd.payload.length.eq(length),
            ]
            with m.If(self.rd_cmd.valid & self.rd_cmd.ready):
                m.d.sync += s.sent_rd.eq(1)
            with m.If(self.wr_cmd.valid & self.wr_cmd.ready):
                m.d.sync += s.sent_wr.eq(1)
            with m.If(s.use_loop):
                m.d.comb += [
                    self.loop_in.tdata.eq(rd.tdata), self.loop_in.tkeep.eq(rd.tkeep),
                    self.loop_in.tlast.eq(rd.tlast), self.loop_in.tvalid.eq(rd.tvalid),
                    rd.tready.eq(self.loop_in.tready),
                    wr.tdata.eq(self.loop_out.tdata), wr.tkeep.eq(self.loop_out.tkeep),
                    wr.tlast.eq(self.loop_out.tlast), wr.tvalid.eq(self.loop_out.tvalid),
                    self.loop_out.tready.eq(wr.tready),
                ]
            with m.Else():
                m.d.comb += [
                    wr.tdata.eq(rd.tdata), wr.tkeep.eq(rd.tkeep), wr.tlast.eq(rd.tlast),
                    wr.tvalid.eq(rd.tvalid), rd.tready.eq(wr.tready),
                ]
            resp = self.wr_status.payload
            m.d.comb += self.wr_status.ready.eq(1)
            with m.If(self.wr_status.valid):
                m.d.sync += s.timing.eq(0)
                m.d.comb += s.err["dma"].eq((s.read_resp >= RESP_SLVERR) | (resp >= RESP_SLVERR))
                with m.If(s.read_resp >= RESP_SLVERR):
                    m.d.sync += s.status.eq(Mux(s.read_resp == RESP_SLVERR, Status.read_slverr, Status.read_decerr))
                with m.Elif(resp >= RESP_SLVERR):
                    m.d.sync += s.status.eq(Mux(resp == RESP_SLVERR, Status.write_slverr, Status.write_decerr))
                with m.Else():
                    m.d.sync += s.host_bytes.eq(length)
                m.next = "COMPLETE"

    def _write_completion(self, m, s):
        """COMPLETE, RECORD, RECORD_WAIT: write the completion record, then advance the indices.

        The record's phase byte (byte 2) must reach memory last, so that a host polling it never reads a
        torn record: at W < 512 the record is two writes, beats 1 .. R-1 first, then (once that write is
        answered) beat 0 with the phase. From W = 512 on it is one beat (the low 64 bytes of it), written at once."""
        W, cfg, wr = self.width, self.cfg, self.wr_data
        record_beats, beat, head = s.record_beats, s.beat, s.head
        with m.State("COMPLETE"):
            record_addr = cfg.cq_base + ((s.cq_tail & (s.cq_size - 1)) << 6)
            m.d.sync += [s.timing.eq(0), beat.eq(Mux(head, 0, 1))]
            m.d.comb += [
                self.wr_cmd.valid.eq(1),
                self.wr_cmd.payload.addr.eq(record_addr + Mux(head, 0, W // 8)),
                self.wr_cmd.payload.length.eq(Mux(head, min(W // 8, ds.RECORD_BYTES),
                                                  max(0, ds.RECORD_BYTES - W // 8))),
            ]
            with m.If(self.wr_cmd.ready):
                m.next = "RECORD"
        with m.State("RECORD"):
            m.d.comb += [
                wr.tdata.eq(s.record.as_value().word_select(beat, W) if W < 512 else s.record.as_value()),
                wr.tkeep.eq((1 << min(W // 8, ds.RECORD_BYTES)) - 1),
                wr.tlast.eq(head | (beat == record_beats - 1)),
                wr.tvalid.eq(1),
            ]
            with m.If(wr.tready):
                m.d.sync += beat.eq(beat + 1)
                with m.If(wr.tlast):
                    m.next = "RECORD_WAIT"
        with m.State("RECORD_WAIT"):
            resp = self.wr_status.payload
            m.d.comb += self.wr_status.ready.eq(1)
            with m.If(self.wr_status.valid):
                with m.If(~head & (resp < RESP_SLVERR)):
                    m.d.sync += head.eq(1)                  # the body is in memory: now the phase
                    m.next = "COMPLETE"
                with m.Else():
                    # a failed write of either part leaves the phase as it was: the record is lost whole
                    with m.If(resp >= RESP_SLVERR):
                        m.d.comb += [s.err["completion_write"].eq(1), s.err["dma"].eq(1)]
                    with m.Else():
                        m.d.comb += s.irq_done.eq(1)
                    m.d.sync += [s.sq_head.eq(s.sq_head + 1), s.cq_tail.eq(s.cq_tail + 1),
                                 s.completed.eq(s.completed + 1), s.errors.eq(s.errors + (s.status != 0))]
                    m.next = "IDLE"

    def _raise_interrupts(self, m, s):
        """IRQ_STATUS and ERROR_STATUS bits to set, and ``busy`` while a descriptor is timed.

        Whole-word assignments: Yosys' Verilog for constant bits of a partly assigned signal is an
        `always @*` without inputs, which Icarus never runs."""
        any_error = Signal()
        m.d.comb += any_error.eq(_any(s.err.values()))
        m.d.comb += [
            self.set_error.eq(sum(Mux(bit, ERR[name], 0) for name, bit in s.err.items())),
            self.set_irq.eq(Mux(s.irq_done, IRQ["completion"], 0) | Mux(any_error, IRQ["error"], 0)),
            self.busy.eq(s.timing),
        ]
