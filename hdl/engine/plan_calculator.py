"""From a descriptor's element count and the ring's size to the sequencer's plan, with one serial divider."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract import credits as cr
from hdl.engine.ring_sequencer import PlanLayout


class SerialDivider(wiring.Component):
    """Unsigned ``quotient, remainder = divmod(dividend, divisor)`` in ``width`` cycles (restoring
    division, one bit per cycle) after ``start``; ``done`` pulses when they are valid. A zero divisor
    gives quotient all ones and remainder = dividend (the caller never asks)."""

    def __init__(self, width: int = 32):
        self.w = width
        super().__init__({
            "dividend": In(width), "divisor": In(width), "start": In(1),
            "quotient": Out(width), "remainder": Out(width), "done": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.w
        step = Signal(range(w + 1))
        rem = Signal(w + 1)
        quo = Signal(w)
        divisor = Signal(w)
        run = Signal()                          # step != 0, as a register (the steps' enable)
        last = Signal()                         # step == 1, as a register
        m.d.comb += [self.quotient.eq(quo), self.remainder.eq(rem[:w]), self.busy.eq(run)]
        m.d.sync += self.done.eq(0)
        with m.If(self.start & ~run):
            m.d.sync += [step.eq(w), rem.eq(0), quo.eq(self.dividend), divisor.eq(self.divisor), run.eq(1),
                         last.eq(w == 1)]
        with m.Elif(run):
            shifted = Signal(w + 1)
            diff = Signal(w + 2)                # one subtraction: its borrow says whether the divisor fits
            m.d.comb += [shifted.eq((rem << 1) | quo[w - 1]), diff.eq(shifted - divisor)]
            fits = ~diff[w + 1]
            m.d.sync += [
                rem.eq(Mux(fits, diff[:w + 1], shifted)),
                quo.eq((quo << 1) | fits),
                step.eq(step - 1),
                last.eq(step == 2),
            ]
            with m.If(last):
                m.d.sync += [self.done.eq(1), run.eq(0)]
        return m


class PlanCalculator(wiring.Component):
    """``plan`` for ``elements`` L over ``nodes`` N with ``packet`` P (host_driver.models.allreduce.Plan):
    K = ceil(L / (N P)) P, full chunks = floor(L / K), the rest's packets and last-packet size. Three
    divisions, about 100 cycles after ``start``; ``done`` pulses when ``plan`` holds (rank and op are
    passed through). Two more divisions bound the lag by what the receive buffer holds
    (``contract.credits.max_lag``): ``plan.lag`` = min(``lag``, that bound), and ``lag_ok`` is low
    when not even lag 1 fits (the collective must not start)."""

    def __init__(self, credits: cr.Credits = cr.DEFAULT):
        self.credits = credits
        super().__init__({
            "elements": In(32), "nodes": In(7), "packet": In(11), "rank": In(6), "lag": In(8), "op": In(2),
            "start": In(1), "plan": Out(PlanLayout), "done": Out(1), "lag_ok": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.div = div = SerialDivider(32)
        pl = self.plan
        L, P = self.elements, self.packet
        NP = Signal(32)
        K = Signal(32)
        m.d.sync += [div.start.eq(0), self.done.eq(0)]
        m.d.comb += [pl.rank.eq(self.rank), pl.nodes.eq(self.nodes), pl.packet.eq(P), pl.op.eq(self.op)]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += NP.eq(self.nodes * P)   # each product in a cycle of its own
                    m.next = "NP"
            with m.State("NP"):
                # ceil(L / (N P)) = (L + N P - 1) // (N P)
                m.d.sync += [div.dividend.eq(L + NP - 1), div.divisor.eq(NP), div.start.eq(1)]
                m.next = "KP"
            with m.State("KP"):
                with m.If(div.done):
                    m.d.sync += [pl.chunk_packets.eq(div.quotient), K.eq(div.quotient * P)]
                    m.next = "K"
            with m.State("K"):
                m.d.sync += [div.dividend.eq(L), div.divisor.eq(K), div.start.eq(1)]
                m.next = "FULL"
            with m.State("FULL"):
                with m.If(div.done):
                    m.d.sync += [pl.full_chunks.eq(div.quotient),
                                 div.dividend.eq(div.remainder + P - 1), div.divisor.eq(P), div.start.eq(1)]
                    m.next = "REST"
            with m.State("REST"):
                with m.If(div.done):
                    # ceil(rest / P) packets; the last holds rest - (packets - 1) P elements: the division's
                    # remainder + 1 ((rest + P - 1) mod P + 1; P when rest is 0)
                    m.d.sync += [pl.rest_packets.eq(div.quotient), pl.rest_last.eq(div.remainder + 1),
                                 div.dividend.eq(self.credits.rx_buffer_bytes), div.divisor.eq(P << 2), div.start.eq(1)]
                    m.next = "FIT"
            with m.State("FIT"):
                with m.If(div.done):
                    cc = self.credits
                    q = Mux(div.quotient > cc.rx_frames, cc.rx_frames, div.quotient)
                    # q = frames the receive buffer holds: min(RX_FRAMES, RX_BUFFER_BYTES // 4P)
                    m.d.sync += [div.dividend.eq(Mux(q > cc.ack_margin, q - cc.ack_margin, 0)),
                                 div.divisor.eq(2 * self.nodes - 2), div.start.eq(1)]
                    m.next = "LAG"
            with m.State("LAG"):
                with m.If(div.done):
                    # max_lag = quotient - 1 (>= 0); the plan runs min(lag, max_lag)
                    bound = Signal(32)
                    m.d.comb += bound.eq(Mux(div.quotient > 256, 255, Mux(div.quotient == 0, 0, div.quotient - 1)))
                    m.d.sync += [pl.lag.eq(Mux(self.lag < bound, self.lag, bound)), self.lag_ok.eq(bound != 0),
                                 self.done.eq(1)]
                    m.next = "IDLE"
        return m
