"""One aggregation engine of the switch: its share of the slot pool, the decision table's state rows, the
exact sums, and the results (docs/in_network.md, "The switch")."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from contract.enums import AggDrop, Codec, Dtype
from contract.in_network import MAX_JOB_WORKERS
from contract.protocol import MAX_P
from hdl.arith.exact_adder import (NEUTRAL_ADDEND, AccElem, ExactAddend, ExactAdderLane, ExactTerm, exact_term,
                                  place_term)
from hdl.arith.exact_rounder import ExactRounderLane
from hdl.memory import scratch_memory
from hdl.stream.axis import AxiStreamSignature, check_width
from hdl.stream.pipeline import register
from hdl.stream.sync_fifo import SyncFifo
from hdl.switch.contribution_check import JOB_BITS, PASS, Contribution
from hdl.switch.job_table import POOL_BITS, JobEntry, member_mask, pick

#: one set of one slot: the round it holds
SlotState = data.StructLayout({
    "valid": 1,                         # a round exists since the slot was last emptied
    "psn": 32,
    "bitmap": MAX_JOB_WORKERS,
    "count": range(MAX_JOB_WORKERS + 1),
    "offset": 32,
    "elements": range(MAX_P + 1),
    "collective": 16,
    "up": 1,                            # a leaf's round, complete and sent up: waiting for the spine's result
})


def result_layout(ports: int) -> data.StructLayout:
    """A result on its way to the egress ports ``dest`` (a bit per port)."""
    return data.StructLayout({
        "job": JOB_BITS, "job_id": 16, "slot": 16, "set": 1, "psn": 32, "offset": 32,
        "count": range(MAX_P + 1), "collective": 16, "codec": Codec, "dtype": Dtype, "retransmit": 1,
        "dest": ports,
        "up": 1,                        # a leaf's partial: a contribution to the spine (on its up port)
    })


#: cycles from a beat's read-add-write to its rounded result: a register, then the rounding lane
ROUND_LATENCY = 1 + ExactRounderLane.LATENCY
#: beats taken that the result queue's room does not see yet: the two cycles between its sample and the
#: decision, the two stages before the sum (the term's alignment, then its placement and the read)
ROOM_MARGIN = 5

#: what happened to one contribution, for the counters: ``reason`` is PASS unless it was dropped
EngineEvent = data.StructLayout({
    "valid": 1, "job": JOB_BITS, "absorbed": 1, "completed": 1, "unicast": 1, "reason": range(PASS + 1),
    "up": 1, "down": 1,                 # a leaf: a partial sent up; the spine's result taken
})


class AggregationEngine(wiring.Component):
    """Engine ``index`` of ``engines``: it owns pool slots p with p mod engines = index (``slots`` of them:
    a power of two), two sets each. ``index`` is an input, constant in the switch (so that the engines are
    one module, which a simulator compiles once).

    * ``s_meta`` / ``s_axis``: a contribution that passed the job checks (a
      :data:`~hdl.switch.contribution_check.Contribution`) and its payload as binary32 or int32 beats
      (decoded), W/32 elements a beat, the last one partial.
    * Decision (docs/in_network.md, the second table): start a round, absorb, unicast the stored result,
      or drop (``stale``, ``busy``, ``count``, ``duplicate``); one :data:`EngineEvent` per contribution.
    * A leaf's job (docs/in_network.md, "Two levels"): a complete round's result goes to the up port as
      the leaf's contribution (the set waits for the spine: ``up``), and so does a member's copy while it
      waits; the spine's result (a record with ``down``) is written into the set's accumulator as a fresh
      term (exact: it rounds to itself) and multicast to the members, and the set answers copies after.
    * The sum of each element is exact (:class:`~hdl.arith.exact_adder.ExactAdderLane`, read-add-write
      of the accumulator memory, one beat a cycle); a round's result is rounded once
      (:class:`~hdl.arith.exact_rounder.ExactRounderLane`) as the completing contribution passes, and
      again from memory for a unicast; the result's record (with its destination ports) is offered on
      ``m_meta`` and its rounded beats on ``m_axis`` (binary32 or int32, W/32 elements a beat): the
      switch's :class:`~hdl.switch.result_bus.ResultBus` encodes them with the job's codec.
    * Throughput: a contribution of k beats takes max(k, 3) cycles: the next record is looked up and
      decided while the payload before it passes, and its payload follows at once (while the result queue
      has room for two packets besides what it holds: a contribution waits for that room whether or not
      it completes its round). The decision's writes (the slot's state, the result's record, the event)
      follow a cycle later, from registers; the state it leaves is forwarded to a decision on the same
      set that comes before the write lands. ``clear`` empties the engine's slots in
      [``clear_base``, ``clear_base + clear_count``) (2 cycles a slot); reset empties all of them. While
      ``clearing`` no contribution is taken.
    * Memory: ``2 · slots · max_packet / (W/32)`` words of W/32 · 337 bits (the accumulators) and
      ``2 · slots`` words of the slot state.
    """

    def __init__(self, width: int, ports: int, slots: int, engines: int = 1,
                 max_packet: int = 256, max_jobs: int = 4):
        self.width = check_width(width, self)
        if slots < 1 or slots & (slots - 1) or engines < 1 or engines & (engines - 1):
            self._MustUse__silence = True
            raise ValueError(f"slots and engines must be powers of two, got {slots}, {engines}")
        self.ports, self.slots, self.engines = ports, slots, engines
        self.max_packet, self.max_jobs = max_packet, max_jobs
        self.lanes = width // 32
        self.beats = -(-max_packet // self.lanes)
        self.result = result_layout(ports)
        super().__init__({
            "index": In(range(max(engines, 2))),
            "s_meta": In(stream.Signature(Contribution)),
            "s_axis": In(AxiStreamSignature(width)),
            "m_meta": Out(stream.Signature(self.result)),
            "m_axis": Out(AxiStreamSignature(width)),
            "jobs": In(data.ArrayLayout(JobEntry, max_jobs)),
            "clear": In(1),
            "clear_base": In(POOL_BITS),
            "clear_count": In(POOL_BITS + 1),
            "clearing": Out(1),
            "event": Out(EngineEvent),
        })

    def elaborate(self, platform):
        m = Module()
        W, B, lanes, beats = self.width, self.width // 8, self.lanes, self.beats
        sets = 2 * self.slots
        beat_bits = max(beats - 1, 1).bit_length()
        shift = (self.engines - 1).bit_length()

        m.submodules.state = state_mem = Memory(shape=SlotState, depth=sets, init=[])
        st_w = state_mem.write_port()
        # (not transparent: no read meets a write to its row in the same cycle, and without it the read's
        # register stays at the output of the distributed RAM, where the decision's path starts)
        st_r = state_mem.read_port()
        acc_word = data.ArrayLayout(AccElem, lanes)
        m.submodules.acc = acc_mem = scratch_memory(shape=acc_word, depth=sets * beats)
        acc_w = acc_mem.write_port()
        # (not transparent: a sum is written two cycles after its row is read, and a row is read again no
        # earlier than three cycles after it was (a short packet is followed by a gap, below), so no read
        # meets a write to its row; and soft transparency would put a comparator and a multiplexer after the
        # block RAM)
        acc_r = acc_mem.read_port()

        meta = self.s_meta.payload
        jobs = [self.jobs[i] for i in range(self.max_jobs)]
        job = pick(jobs, meta.job)
        local = Signal(range(self.slots), name="local_slot")
        m.d.comb += local.eq(meta.pool_slot[shift:])
        set_addr = Signal(range(sets), name="set_addr")
        m.d.comb += set_addr.eq(Cat(meta.set, local))

        # -- emptying slots: after reset, and on `clear` ---------------------------------------------------
        walking = Signal(init=1)
        walk = Signal(range(sets + 1))
        lo, hi = Signal(POOL_BITS + 1), Signal(POOL_BITS + 1)
        m.d.comb += self.clearing.eq(walking)
        with m.If(self.clear):
            m.d.sync += [walking.eq(1), walk.eq(0), lo.eq(self.clear_base),
                         hi.eq(self.clear_base + self.clear_count)]

        # -- the decision, one contribution at a time ----------------------------------------------------
        st = Signal(SlotState)                  # the set's state: read from memory, or forwarded (below)
        n = meta.workers
        bit = Signal(MAX_JOB_WORKERS)
        m.d.comb += bit.eq(1 << meta.worker)
        newer = Signal()
        m.d.comb += newer.eq(~st.valid | ((meta.psn - st.psn)[:32] != 0) & ~(meta.psn - st.psn)[31])
        same = st.valid & (meta.psn == st.psn)
        seen = (st.bitmap & bit) != 0
        complete_now = st.count >= n
        R = AggDrop
        reason = Signal(range(PASS + 1))
        start, absorb, unicast, load = Signal(), Signal(), Signal(), Signal()
        with m.If(meta.down):                       # the spine's result for a round this leaf sent up
            with m.If(~same | ~complete_now):
                m.d.comb += reason.eq(R.stale)
            with m.Elif((meta.offset != st.offset) | (meta.count != st.elements)):
                m.d.comb += reason.eq(R.count)
            with m.Elif(~st.up):
                m.d.comb += reason.eq(R.duplicate)
            with m.Else():
                m.d.comb += [reason.eq(PASS), load.eq(1)]
        with m.Elif(newer):
            with m.If(st.valid & ~complete_now):
                m.d.comb += reason.eq(R.busy)
            with m.Else():
                m.d.comb += [reason.eq(PASS), start.eq(1)]
        with m.Elif(~same):
            m.d.comb += reason.eq(R.stale)
        with m.Elif((meta.offset != st.offset) | (meta.count != st.elements)):
            m.d.comb += reason.eq(R.count)
        with m.Elif(seen):
            with m.If(complete_now):
                m.d.comb += [reason.eq(PASS), unicast.eq(1)]
            with m.Else():
                m.d.comb += reason.eq(R.duplicate)
        with m.Else():
            m.d.comb += [reason.eq(PASS), absorb.eq(1)]
        completes = Signal()
        m.d.comb += completes.eq(Mux(start, n == 1, absorb & (st.count + 1 == n)))
        emits = completes | unicast | load
        # to the spine: a leaf's round as it completes, and a member's copy while the spine has not answered
        goes_up = Signal()
        m.d.comb += goes_up.eq(completes & job.up | unicast & st.up)
        writes = start | absorb | load
        new_state = Signal(SlotState)
        with m.If(start):
            m.d.comb += [new_state.valid.eq(1), new_state.psn.eq(meta.psn), new_state.bitmap.eq(bit),
                         new_state.count.eq(1), new_state.offset.eq(meta.offset),
                         new_state.elements.eq(meta.count), new_state.collective.eq(meta.collective),
                         new_state.up.eq(completes & job.up)]
        with m.Elif(load):
            m.d.comb += [new_state.eq(st), new_state.up.eq(0)]
        with m.Else():
            m.d.comb += [new_state.eq(st), new_state.bitmap.eq(st.bitmap | bit), new_state.count.eq(st.count + 1),
                         new_state.up.eq(completes & job.up)]

        # results waiting for the result bus: room for two whole packets (the one passing and the one decided
        # ahead of it) and the rounder's pipeline first
        fifo_depth = 1 << (3 * beats + ROUND_LATENCY + ROOM_MARGIN - 1).bit_length()
        m.submodules.rq = rq = SyncFifo(width=W + B + 1, depth=fifo_depth)
        m.submodules.rmeta = rmeta = SyncFifo(width=self.result.size, depth=4)
        in_flight = Signal(range(fifo_depth + 1))         # beats inside the rounder pipeline
        # room for a result, from registers and with a margin for what they do not show yet: asked before
        # the decision (whether the contribution completes its slot is not known then), the payload still
        # passing and this one (two packets), the beats on their way to the rounder (ROOM_MARGIN), and the
        # result record written the cycle after a decision
        room = Signal()
        m.d.sync += room.eq((rq.level + in_flight + 2 * beats + ROOM_MARGIN <= fifo_depth)
                            & (rmeta.level + 2 <= rmeta.depth))

        # what a decision writes (the slot's state, the result's record, the event) is written the cycle
        # after, from registers: the decision's own path ends in flip-flops
        act_state, act_result, act_event = Signal(), Signal(), Signal()
        act_addr = Signal(range(sets))
        act_new = Signal(SlotState)
        act_r = Signal(self.result)
        act_ev = Signal(EngineEvent)
        m.d.sync += [act_state.eq(0), act_result.eq(0), act_event.eq(0)]
        m.d.comb += [rmeta.w_data.eq(act_r), rmeta.w_en.eq(act_result), self.event.eq(act_ev),
                     self.event.valid.eq(act_event)]

        # -- the decisions, a record at a time, while the payload before it passes --------------------------
        # A record offered is looked up (its set's state read) in one cycle and decided in the next; the
        # decision is the payload's mode, or waits as the one ahead (``pend``) while the payload before it
        # passes. The state a decision leaves is forwarded to the next decision on the same set (the
        # memory's write lands a cycle after the decision, when the next read may already have happened).
        Mode = data.StructLayout({"emit": 1, "write": 1, "fresh": 1, "read": 1, "base": range(sets * beats),
                                  "is_int": 1})
        mode, pend_mode = Signal(Mode), Signal(Mode)
        streaming, pend = Signal(), Signal()        # a payload is being taken; a decision waits for its turn
        looking = Signal()                          # the record's state was read last cycle: decide now
        fw_valid, fw_hit = Signal(), Signal()
        fw_addr = Signal(range(sets))
        fw_state = Signal(SlotState)
        m.d.comb += st.eq(Mux(fw_hit, fw_state, st_r.data))
        b = Signal(beat_bits + 1)
        gap = Signal(2)                             # cycles before the next payload's first beat may come
        s = self.s_axis
        m.d.comb += s.tready.eq(streaming & (gap == 0))
        take = s.tvalid & s.tready
        ends = take & s.tlast

        decide = looking
        look = self.s_meta.valid & room & ~looking & ~pend & ~walking & ~decide
        m.d.sync += looking.eq(look)
        with m.If(look):
            m.d.comb += [st_r.addr.eq(set_addr), st_r.en.eq(1)]
            m.d.sync += fw_hit.eq(fw_valid & (fw_addr == set_addr))
        # emptying slots (reset, ``clear``) while no record is looked up and no decision writes
        with m.If(walking & ~looking & ~act_state):
            m.d.comb += [st_w.addr.eq(walk), st_w.data.eq(0)]
            pool = Cat(self.index[:shift], walk[1:]) if shift else walk[1:]
            m.d.comb += st_w.en.eq((pool >= lo) & (pool < hi) | (hi == 0))
            m.d.sync += [walk.eq(walk + 1), fw_valid.eq(0)]
            with m.If(walk == sets - 1):
                m.d.sync += [walking.eq(0), walk.eq(0)]
        with m.If(act_state):
            m.d.comb += [st_w.addr.eq(act_addr), st_w.data.eq(act_new), st_w.en.eq(1)]

        new_mode = Signal(Mode)
        m.d.comb += [new_mode.emit.eq(emits), new_mode.write.eq(writes), new_mode.fresh.eq(start | load),
                     new_mode.read.eq(absorb | unicast), new_mode.base.eq(set_addr * beats),
                     new_mode.is_int.eq(meta.dtype == Dtype.int32)]
        free = ~streaming | ends                    # the payload slot is free from the next cycle
        with m.If(take):
            m.d.sync += b.eq(b + 1)
        with m.If(gap != 0):
            m.d.sync += gap.eq(gap - 1)
        with m.If(ends):
            # the accumulator's read-add-write takes three cycles: a beat's row is read again no earlier than
            # three cycles after it was, so a packet of fewer than three beats is followed by a gap
            m.d.sync += [streaming.eq(0), gap.eq(Mux(b == 0, 2, Mux(b == 1, 1, 0)))]
        with m.If(decide):
            m.d.comb += self.s_meta.ready.eq(1)
            m.d.sync += [act_event.eq(1), act_ev.job.eq(meta.job), act_ev.absorbed.eq(start | absorb),
                         act_ev.completed.eq(completes), act_ev.unicast.eq(unicast & ~st.up),
                         act_ev.reason.eq(reason), act_ev.up.eq(goes_up), act_ev.down.eq(load),
                         act_state.eq(writes), act_addr.eq(set_addr), act_new.eq(new_state),
                         act_result.eq(emits),
                         fw_valid.eq(1), fw_addr.eq(set_addr), fw_state.eq(Mux(writes, new_state, st))]
            r = Signal(self.result)
            m.d.comb += [r.job.eq(meta.job), r.job_id.eq(job.job), r.slot.eq(meta.slot),
                         r.set.eq(meta.set), r.psn.eq(Mux(start, meta.psn, st.psn)),
                         r.offset.eq(meta.offset), r.count.eq(meta.count),
                         r.collective.eq(Mux(start, meta.collective, st.collective)),
                         r.codec.eq(meta.codec), r.dtype.eq(meta.dtype), r.retransmit.eq(unicast), r.up.eq(goes_up),
                         r.dest.eq(Mux(goes_up, 1 << job.up_port,
                                       Mux(unicast, 1 << meta.port, member_mask(m, job, self.ports, "dest"))))]
            m.d.sync += act_r.eq(r)
            with m.If(free):
                m.d.sync += [mode.eq(new_mode), streaming.eq(1), b.eq(0)]
            with m.Else():
                m.d.sync += [pend_mode.eq(new_mode), pend.eq(1)]
        with m.Elif(pend & free):
            m.d.sync += [mode.eq(pend_mode), streaming.eq(1), pend.eq(0), b.eq(0)]

        # -- read, add, write: one beat a cycle, in stages: p (the term aligned), q (placed in its limbs, while
        # its sum is read), the sum into a register (``round_in``), from which it is written back and rounded
        def stage(prefix, fields):
            """The fields of a beat through a register (the valid bit reset with the engine)."""
            return {k: register(m, v, f"{prefix}_{k}", reset=k == "valid") for k, v in fields.items()}
        p = stage("p", {"valid": take, "keep": s.tkeep, "last": s.tlast, "addr": mode.base + b, "write": mode.write,
                        "fresh": mode.fresh | ~mode.read, "emit": mode.emit, "is_int": mode.is_int})
        p_terms = [register(m, exact_term(m, Mux(s.tkeep[4 * i], s.tdata[32 * i:32 * (i + 1)], 0), mode.is_int,
                                          f"term{i}"), f"p_term{i}") for i in range(lanes)]
        q = stage("q", p)
        m.d.comb += [acc_r.addr.eq(p["addr"]), acc_r.en.eq(p["valid"])]
        acc_in = data.View(acc_word, acc_r.data)
        summed = Signal(acc_word)
        for i in range(lanes):
            # a contribution that only reads (a resend of a result) adds the neutral addend
            q_add = Signal(ExactAddend, name=f"q_add{i}")
            m.d.sync += q_add.eq(Mux(p["write"], place_term(m, data.View(ExactTerm, p_terms[i]), f"place{i}"),
                                     ExactAddend.const(NEUTRAL_ADDEND)))
            m.submodules[f"add{i}"] = add = ExactAdderLane(prepared=True)
            m.d.comb += [add.acc.eq(acc_in[i]), add.term.eq(q_add), add.fresh.eq(q["fresh"]), summed[i].eq(add.sum)]

        L = ROUND_LATENCY
        round_in = data.View(acc_word, register(m, summed, "round_in"))
        is_int_q = register(m, q["is_int"], "is_int_q")      # with round_in: the beat's own dtype
        w = stage("w", {k: q[k] for k in ("valid", "write", "addr")})
        m.d.comb += [acc_w.addr.eq(w["addr"]), acc_w.data.eq(round_in), acc_w.en.eq(w["valid"] & w["write"])]
        r_valid = Signal(L)
        r_keep = Signal(B * L)
        r_last = Signal(L)
        go = q["valid"] & q["emit"]
        m.d.sync += [r_valid.eq(Cat(go, r_valid[:-1])), r_keep.eq(Cat(q["keep"], r_keep[:-B])),
                     r_last.eq(Cat(q["last"], r_last[:-1]))]
        rounded = Signal(W)
        for i in range(lanes):
            m.submodules[f"round{i}"] = rnd = ExactRounderLane()
            m.d.comb += [rnd.acc.eq(round_in[i]), rnd.is_int.eq(is_int_q), rounded[32 * i:32 * (i + 1)].eq(rnd.result)]
        out_valid = r_valid[-1]
        m.d.comb += [rq.w_data.eq(Cat(rounded, r_keep[-B:], r_last[-1])), rq.w_en.eq(out_valid)]
        m.d.sync += in_flight.eq(in_flight + go - out_valid)

        # -- the results: records and rounded beats, in order (the result bus encodes them) ----------------
        m.d.comb += [self.m_meta.payload.eq(rmeta.r_data), self.m_meta.valid.eq(rmeta.r_rdy),
                     rmeta.r_en.eq(self.m_meta.ready & rmeta.r_rdy)]
        head = rq.r_data
        o = self.m_axis
        m.d.comb += [o.tdata.eq(head[:W]), o.tkeep.eq(head[W:W + B]), o.tlast.eq(head[W + B]), o.tvalid.eq(rq.r_rdy),
                     rq.r_en.eq(o.tready & rq.r_rdy)]
        return m
