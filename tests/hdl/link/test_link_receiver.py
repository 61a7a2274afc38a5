"""The link receiver against the receive rule of contract/link.py, cycle by cycle: which acks and nacks it
owes the sender, when, and what they say."""

from amaranth.sim import Simulator

from contract.credits import Credits
from contract.enums import FrameOpcode
from contract.link import ack_due, ack_fields

W = 64
CC = Credits(rx_frames=16, rx_buffer_bytes=2048, ack_every=4)
DELAY = 20


class Rule:
    """contract/link.py's receive rule as a state machine stepped once per cycle."""

    def __init__(self):
        self.expect = self.used = self.beats = self.received_at = self.used_at = 0
        self.dup = self.nack = False
        self.nacked = None
        self.idle = 0

    def offer(self):
        unreported = self.expect != self.received_at or self.used != self.used_at
        due = (ack_due(self.expect - self.received_at, self.used - self.used_at, CC.ack_every) or self.dup
               or (unreported and self.idle == DELAY))
        if not (due or self.nack):
            return None
        f = ack_fields(self.expect, self.used, self.beats, CC.advertised_beats(W), CC.rx_frames)
        return {"opcode": FrameOpcode.nack if self.nack else FrameOpcode.ack, **f}

    def step(self, sent, accepted, duplicate, out_of_order, consumed, beat):
        unreported = self.expect != self.received_at or self.used != self.used_at
        already = (self.nacked == self.expect) or (sent and self.nack)
        if sent:
            if self.nack:
                self.nacked = self.expect
            self.received_at, self.used_at, self.dup, self.nack, self.idle = self.expect, self.used, False, False, 0
        elif unreported and self.idle != DELAY:
            self.idle += 1
        if duplicate:
            self.dup = True
        if out_of_order and not already:
            self.nack = True
        self.expect += accepted
        self.used += consumed
        self.beats += beat


def test_link_receiver_follows_the_rule(rng):
    """Random receive events (in order, copies, gaps), consumption and backpressure for 20,000 cycles: each
    cycle the offered record (or none) is the rule's, and the counters agree."""
    from hdl.link.link_receiver import LinkReceiver
    dut = LinkReceiver(W, CC, ack_delay=DELAY)
    rule = Rule()
    seen = {"ack": 0, "nack": 0}

    async def bench(ctx):
        ctx.set(dut.cfg.rank, 2)
        ctx.set(dut.cfg.prev_rank, 1)
        ctx.set(dut.cfg.prev_mac, 0x020000000001)
        ctx.set(dut.cfg.prev_ip, 0x0A000001)
        backlog = 0                             # received, not yet consumed
        for cyc in range(20_000):
            busy = (cyc // 2000) % 2 == 0       # bursts of traffic, then quiet (the delayed ack)
            ev = rng.random() if busy else 1.0
            acc, dup, ooo = ev < 0.3, 0.3 <= ev < 0.35, 0.35 <= ev < 0.42
            if backlog >= CC.rx_frames:
                acc = False
            cons = backlog > 0 and rng.random() < 0.3
            beat = cons or rng.random() < 0.2
            for name, v in (("seq_accepted", acc), ("seq_duplicate", dup), ("seq_out_of_order", ooo),
                            ("consumed", cons), ("consumed_beats", beat)):
                ctx.set(getattr(dut, name), int(v))
            ctx.set(dut.m_ack.ready, int(rng.random() < 0.6))
            want = rule.offer()
            _, _, valid, ready, rec, expect = await ctx.tick().sample(dut.m_ack.valid, dut.m_ack.ready,
                                                                     dut.m_ack.payload, dut.expect)
            assert bool(valid) == (want is not None), (cyc, want)
            if valid:
                h = rec.ainic
                got = {"opcode": int(h.opcode), "psn": int(h.psn), "count": int(h.count), "offset": int(h.offset)}
                assert got == want, (cyc, got, want)
                assert (int(h.src_rank), int(h.dst_rank), int(rec.dst_ip)) == (2, 1, 0x0A000001)
                if ready:
                    seen["nack" if want["opcode"] == FrameOpcode.nack else "ack"] += 1
            rule.step(valid and ready, acc, dup, ooo, cons, beat)
            backlog += acc - cons
        assert ctx.get(dut.expect) == rule.expect
        assert (ctx.get(dut.acks_sent), ctx.get(dut.nacks_sent)) == (seen["ack"], seen["nack"])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["ack"] > 100 and seen["nack"] > 20
