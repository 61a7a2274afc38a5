"""The collective engine's work order: every (phase, packet) item of a ring all-reduce, in RTL.

``host_driver.models.allreduce.rank_schedule`` is the reference; docs/collective_engine.md explains the order.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.credits import effective_lag
from contract.enums import Collective, PhaseKind
from hdl.stream.register_slice import skid_buffer

#: the plan of one collective (host_driver.models.allreduce.Plan), as the sequencer needs it
PlanLayout = data.StructLayout({
    "rank": 6, "nodes": 7, "packet": 11, "lag": 8,
    "chunk_packets": 24,      # K / P: packets of a full chunk
    "full_chunks": 7,         # chunks 0 .. full_chunks-1 are full; chunk full_chunks holds the rest
    "rest_packets": 24,       # packets of that partial chunk (0: it is empty too)
    "rest_last": 11,          # elements in the partial chunk's last packet
    "op": Collective,         # which phases run: all-reduce, reduce-scatter alone, all-gather alone
})

Item = data.StructLayout({
    "phase": 6, "kind": PhaseKind, "chunk": 6, "packet": 24, "offset": 32, "count": 11, "last_of_chunk": 1,
})


class RingSequencer(wiring.Component):
    """On ``start``, streams the items of ``plan`` on ``items`` in the order of ``rank_schedule``: keys
    d = packet + lag * phase ascending, phases ascending within a key. Each item carries its phase, kind
    (``PhaseKind``), chunk, packet index, element offset in the tensor and element count and whether it is
    its chunk's last packet. ``plan.op`` selects the phases: 0 .. 2N-2 (all-reduce), 0 .. N-1
    (reduce-scatter, phase N-1 is ``scatter_end``) or N-1 .. 2N-2 (all-gather, phase N-1 is ``gather``).
    ``busy`` is high from ``start`` until the last item is taken.

    It looks at one (key, phase) candidate per cycle and emits the valid ones (one item per cycle at best,
    through a register slice: an item leaves the cycle after it is found);
    the engine spends several cycles on each item, so the sequencer keeps ahead except where keys hold few
    items (the first and last 2N-2 keys).
    """

    def __init__(self):
        super().__init__({
            "plan": In(PlanLayout),
            "start": In(1),
            "items": Out(stream.Signature(Item)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        pl = self.plan
        d = Signal(32)
        p = Signal(6)
        k = Signal(33)                   # d - lag*p, two's complement
        chunk = Signal(6)
        first_phase = Signal(7)
        last_phase = Signal(7)
        m.d.comb += [first_phase.eq(Mux(pl.op == Collective.allgather, pl.nodes - 1, 0)),
                     last_phase.eq(Mux(pl.op == Collective.reduce_scatter, pl.nodes - 1, 2 * pl.nodes - 2))]
        # products of the plan, registered while the sequencer prepares (PREP): nothing multiplies on the way
        # from one item to the next; the item's offset is carried as chunk * K + packet * P
        d_start = Signal(16)             # the first key with an item: lag * first_phase
        d_end = Signal(32)
        chunk_el, lag_el, first_off, wrap_off = (Signal(32, name=n) for n in ("chunk_el", "lag_el", "first_off",
                                                                              "wrap_off"))
        first_chunk = Signal(6)
        full_last, rest_last = Signal(24), Signal(24)   # the last packet's index in a full / the partial chunk
        m.d.sync += [full_last.eq(pl.chunk_packets - 1), rest_last.eq(pl.rest_packets - 1)]
        m.d.sync += [d_start.eq(pl.lag * first_phase), d_end.eq(pl.chunk_packets - 1 + pl.lag * last_phase),
                     chunk_el.eq(pl.chunk_packets * pl.packet), lag_el.eq(pl.lag * pl.packet),
                     first_off.eq(first_chunk * chunk_el), wrap_off.eq((pl.nodes - 1) * chunk_el)]
        chunk_off = Signal(32)           # chunk * K (elements)
        k_off = Signal(34)               # k * P, two's complement
        dk_off = Signal(32)              # (d - d_start) * P

        # valid: 0 <= k < the packets of this phase's chunk (full chunks, then the partial one, then none),
        # with k against both packet counts at once and the chunk choosing after
        in_full, in_rest = (k[:32] < pl.chunk_packets), (k[:32] < pl.rest_packets)
        valid = ~k[32] & Mux(chunk < pl.full_chunks, in_full, (chunk == pl.full_chunks) & in_rest)
        kind = Signal(3)
        with m.If(p == 0):
            m.d.comb += kind.eq(PhaseKind.send)
        with m.Elif(p < pl.nodes - 1):
            m.d.comb += kind.eq(PhaseKind.reduce)
        with m.Elif(p == pl.nodes - 1):
            with m.Switch(pl.op):
                with m.Case(Collective.reduce_scatter):
                    m.d.comb += kind.eq(PhaseKind.scatter_end)
                with m.Case(Collective.allgather):
                    m.d.comb += kind.eq(PhaseKind.gather)
                with m.Default():
                    m.d.comb += kind.eq(PhaseKind.final)
        with m.Elif(p < last_phase):
            m.d.comb += kind.eq(PhaseKind.forward)
        with m.Else():
            m.d.comb += kind.eq(PhaseKind.last)
        is_rest_last = (chunk == pl.full_chunks) & (k[:24] == rest_last)

        # the items leave through a register slice: the offset's sum and the count's compares end in flip-flops
        it, it_valid, it_ready = Signal(Item), Signal(), Signal()
        skid_buffer(m, "items", it_valid, it_ready, self.items.valid, self.items.ready,
                    [(it, self.items.payload)])
        m.d.comb += [
            it.phase.eq(p), it.kind.eq(kind), it.chunk.eq(chunk), it.packet.eq(k[:24]),
            it.offset.eq((chunk_off + k_off)[:32]),
            it.count.eq(Mux(is_rest_last, pl.rest_last, pl.packet)),
            # (k against both last indices, the chunk choosing after, as for valid)
            it.last_of_chunk.eq(Mux(chunk < pl.full_chunks, k[:24] == full_last, is_rest_last)),
        ]

        # chunk of the first phase: (rank - first_phase) mod N, i.e. rank, or rank + 1 for the all-gather
        with m.If(pl.op == Collective.allgather):
            m.d.comb += first_chunk.eq(Mux(pl.rank == pl.nodes - 1, 0, pl.rank + 1))
        with m.Else():
            m.d.comb += first_chunk.eq(pl.rank)

        def first_phase_of(next_d, next_dk_off):
            return [p.eq(first_phase), chunk.eq(first_chunk), k.eq(next_d - d_start), chunk_off.eq(first_off),
                    k_off.eq(next_dk_off), dk_off.eq(next_dk_off)]

        prep = Signal(2)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start & (pl.nodes >= 2)):
                    m.d.sync += prep.eq(2)
                    m.next = "PREP"
            with m.State("PREP"):               # the products above settle (two registers deep)
                m.d.comb += self.busy.eq(1)
                m.d.sync += prep.eq(prep - 1)
                with m.If(prep == 0):
                    m.d.sync += [d.eq(d_start), *first_phase_of(d_start, 0)]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [self.busy.eq(1), it_valid.eq(valid)]
                advance = ~valid | it_ready
                with m.If(advance):
                    with m.If(p == last_phase):
                        with m.If(d == d_end):
                            m.next = "IDLE"
                        m.d.sync += [d.eq(d + 1), *first_phase_of(d + 1, dk_off + pl.packet)]
                    with m.Else():
                        m.d.sync += [p.eq(p + 1), k.eq(k - pl.lag), k_off.eq(k_off - lag_el),
                                     chunk.eq(Mux(chunk == 0, pl.nodes - 1, chunk - 1)),
                                     chunk_off.eq(Mux(chunk == 0, wrap_off, chunk_off - chunk_el))]
        with m.If(self.items.valid):            # (the last item may still wait in the slice)
            m.d.comb += self.busy.eq(1)
        return m


def plan_fields(plan, rank: int, lag: int, op: str = "allreduce") -> dict:
    """The PlanLayout values for a ``host_driver.models.allreduce.Plan`` (what the command processor computes;
    the lag is bounded by the receive buffer, ``contract.credits``)."""
    kp = plan.chunk_elems // plan.packet
    full = plan.elements // plan.chunk_elems
    rest = plan.elements - full * plan.chunk_elems
    return {"rank": rank, "nodes": plan.nodes, "packet": plan.packet,
            "lag": effective_lag(lag, plan.nodes, plan.packet), "chunk_packets": kp,
            "full_chunks": full, "rest_packets": -(-rest // plan.packet),
            "rest_last": (rest - 1) % plan.packet + 1 if rest else plan.packet, "op": Collective[op]}
