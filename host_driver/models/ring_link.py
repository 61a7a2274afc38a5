"""The ring's reliable link as a model (contract/link.py; docs/collective_engine.md, "Reliable links").

:class:`ReceiverModel` and :class:`SenderModel` are the two ends' rules, frame by frame: what a receiver
takes, when it owes an ack or a nack and what they say; what a sender may send, what it keeps, and where an
ack, a nack or its timer sends it back to. The RTL (``hdl/link/``) is checked against them
(``tests/hdl/link/``). :func:`simulate_link` runs one link's frames through both ends and two faulty
directions (``contract.in_network.FaultStream``, the generator of the RTL's fault injector) in an event
model of time: what the model backend reports for a ring over faulty links. The ring's result does not
depend on any of this (the receiver takes each frame once, in order): it is the golden model's.
"""

import heapq
from dataclasses import dataclass, field

from contract import credits as cr
from contract.in_network import FaultStream, link_seed, threshold
from contract.link import ACK_DELAY, PSN_MOD, ack_due, ack_fields, psn_diff, retransmit_wait


class ReceiverModel:
    """The receiving end: the psn it expects, what it has consumed, and the acks and nacks it owes."""

    def __init__(self, width: int = 512, credits: cr.Credits = cr.DEFAULT):
        self.width, self.credits = width, credits
        self.expect = self.used = self.used_beats = 0
        self.received_at = self.used_at = 0
        self.nacked = None
        self.duplicates = self.out_of_order = self.acks = self.nacks = 0

    def receive(self, psn: int):
        """A data frame with ``psn`` arrived (intact): (verdict, reply). The verdict is "accepted",
        "duplicate" or "out_of_order" (the parser's drop reasons); the reply an ack or nack due at once,
        or None."""
        d = psn_diff(psn, self.expect)
        if d < 0:
            self.duplicates += 1
            return "duplicate", self.reply("ack")
        if d > 0:
            self.out_of_order += 1
            if self.nacked != self.expect:
                self.nacked = self.expect
                return "out_of_order", self.reply("nack")
            return "out_of_order", None
        self.expect = (self.expect + 1) % PSN_MOD
        return "accepted", self.reply("ack") if self._count_due() else None

    def consume(self, beats: int):
        """The engine took the oldest accepted frame (``beats`` payload beats): an ack if it is due."""
        self.used += 1
        self.used_beats += beats
        return self.reply("ack") if self._count_due() else None

    def unreported(self) -> bool:
        """Something was received or consumed that no ack has told (an ack is due ACK_DELAY later)."""
        return self.expect != self.received_at or self.used != self.used_at

    def _count_due(self) -> bool:
        return ack_due((self.expect - self.received_at) % PSN_MOD, self.used - self.used_at, self.credits.ack_every)

    def reply(self, kind: str) -> dict:
        """An ack or nack as it leaves now: its header fields (``contract.link.ack_fields``)."""
        self.received_at, self.used_at = self.expect, self.used
        if kind == "nack":
            self.nacks += 1
        else:
            self.acks += 1
        return {"opcode": kind, **ack_fields(self.expect, self.used, self.used_beats,
                                             self.credits.advertised_beats(self.width), self.credits.rx_frames)}


class SenderModel:
    """The sending end: psn, credits, the frames kept for resending, go-back-N and the timer."""

    def __init__(self, width: int = 512, credits: cr.Credits = cr.DEFAULT, timeout: int = 2048,
                 backoff_max: int = 4):
        self.width, self.credits, self.timeout, self.backoff_max = width, credits, timeout, backoff_max
        self.kept = {}                  # psn -> payload beats of every frame not yet acknowledged
        self.nxt = self.tx = self.high = self.una = 0
        self.sent_beats = 0
        self.limit_frames, self.limit_beats = credits.rx_frames, credits.advertised_beats(width)
        self.backoff = 0
        self.retransmissions = self.timeouts = self.nacks = self.probes = 0
        self.probing = False

    def may_take(self, beats: int) -> bool:
        """Whether a new frame of ``beats`` payload beats is within the receiver's credits."""
        frames_left = (self.limit_frames - self.nxt) % PSN_MOD
        beats_left = (self.limit_beats - self.sent_beats) % PSN_MOD
        return 0 < frames_left < PSN_MOD // 2 and beats_left < PSN_MOD // 2 and beats_left >= beats

    def take(self, beats: int) -> int:
        """Take a new frame from the engine (only while :meth:`may_take`): its psn."""
        if not self.may_take(beats):
            raise ValueError(f"no credit for a frame of {beats} beats (limits {self.limit_frames} frames, "
                             f"{self.limit_beats} beats)")
        psn = self.nxt
        self.kept[psn] = beats
        self.nxt = (self.nxt + 1) % PSN_MOD
        self.sent_beats += beats
        return psn

    def next_frame(self):
        """The frame to send now, or None: (psn, sent before); its pointer moves on."""
        if self.tx == self.nxt:
            return None
        psn, again = self.tx, self.tx != self.high
        if again:
            if self.probing:
                self.probes += 1
            else:
                self.retransmissions += 1
        else:
            self.high = (self.high + 1) % PSN_MOD
        self.tx = (self.tx + 1) % PSN_MOD
        return psn, again

    @property
    def replaying(self) -> bool:
        return self.tx != self.high

    @property
    def outstanding(self) -> bool:
        return self.una != self.high

    def on_ack(self, fields: dict) -> bool:
        """An ack or nack from the receiver: frees what it acknowledges, sets the credits, rewinds on a nack.
        Returns whether it was progress (a frame freed: the timer starts again)."""
        psn = fields["psn"]
        ahead = (psn - self.una) % PSN_MOD
        if ahead > (self.high - self.una) % PSN_MOD:
            return False                # stale: ignored
        for p in range(ahead):
            self.kept.pop((self.una + p) % PSN_MOD, None)
        self.una = psn
        self.limit_frames, self.limit_beats = (psn + fields["count"]) % PSN_MOD, fields["offset"]
        if ahead:
            self.backoff = 0
        if fields["opcode"] == "nack" and not self.replaying and psn != self.high:
            self.nacks += 1
            self.tx, self.probing = psn, False
        elif psn_diff(psn, self.tx) > 0:
            self.tx = psn               # the receiver has these: skip them
        return bool(ahead)

    def wait(self) -> int:
        """Cycles without progress before the timer runs out (while it runs)."""
        return retransmit_wait(self.timeout, self.backoff, self.backoff_max)

    def timer_runs(self, starved: bool) -> bool:
        """Whether the timer counts: frames outstanding, or waiting for credit with nothing outstanding and
        nothing to send (``starved``), and no replay running."""
        return not self.replaying and (self.outstanding or (starved and self.tx == self.nxt and self.high != 0))

    def expire(self) -> None:
        """The timer ran out: go back to the oldest unacknowledged frame, or probe with the last one."""
        if self.outstanding:
            self.timeouts += 1
            self.tx, self.probing = self.una, False
        else:
            self.tx, self.probing = (self.high - 1) % PSN_MOD, True
        self.backoff = min(self.backoff + 1, 7)


@dataclass
class Injector:
    """One fault injector a frame passes (its generator), with the RTL injector's counters."""
    stream: FaultStream
    frames: int = 0
    dropped: int = 0
    duplicated: int = 0
    corrupted: int = 0

    def counters(self) -> dict:
        return {"frames": self.frames, "dropped": self.dropped, "duplicated": self.duplicated,
                "corrupted": self.corrupted}


@dataclass
class LinkRun:
    """What one link did in :func:`simulate_link`."""
    frames: int                          # data frames the engine handed the sender
    cycles: float = 0.0                  # when the last one was consumed (the model's time, not a measurement)
    sent: int = 0                        # data frames that entered the link, resends and probes included
    acks: int = 0
    nacks: int = 0
    retransmissions: int = 0
    timeouts: int = 0
    probes: int = 0
    dropped: int = 0
    duplicated: int = 0
    corrupted: int = 0
    corrupt_arrived: list = field(default_factory=lambda: [0, 0])   # frames dropped as corrupt: there, back
    bytes_sent: int = 0                  # wire bytes of the data frames that entered the link
    duplicates: int = 0                  # frames the receiver dropped as copies
    out_of_order: int = 0
    delivered: list = field(default_factory=list)   # psns the receiver took, in order


class LinkStalled(RuntimeError):
    """The link delivered nothing new for ``deadline`` cycles: a collective behind it ends in timeout, as
    the NIC's RING_DEADLINE ends it (``delivered`` of ``frames`` got through, the last at ``cycle``)."""

    def __init__(self, link: int, delivered: int, frames: int, cycle: float, deadline: int):
        super().__init__(f"link {link}: no frame delivered for {deadline:,} cycles ({delivered:,} of {frames:,} "
                         f"delivered, the last at cycle {cycle:,.0f})")
        self.link, self.delivered, self.frames, self.cycle = link, delivered, frames, cycle


def simulate_link(beats: list, *, latency: int = 250, bytes_per_cycle: float = 40.0, frame_bytes=None,
                  faults=None, link: int = 0, width: int = 512, credits: cr.Credits = cr.DEFAULT,
                  timeout: int = 2048, backoff_max: int = 4, limit_cycles: float = 1e9, paths=None,
                  deadline: int = None) -> LinkRun:
    """One link's data frames (``beats`` payload beats each, ``frame_bytes`` wire bytes each: 98 + payload
    by default) from a sender whose engine always has the next one, to a receiver that consumes at once,
    over a ``latency``-cycle path each way that carries ``bytes_per_cycle``. ``faults`` (drop, dup,
    corrupt probabilities and a seed, ``in_network.Faults``-like) hit data frames on the way there and acks on
    the way back, drawn per frame from the RTL injector's generator (link ``2 * link`` there, ``2 * link +
    1`` back). ``paths`` instead: the :class:`Injector` s a frame passes there and back, in order (the
    ring's cluster bench has two each way: the sender's uplink, the receiver's downlink), counted in them.
    Returns what happened (:class:`LinkRun`); raises :class:`LinkStalled` when ``deadline`` cycles pass
    without a frame delivered or acknowledged, RuntimeError past ``limit_cycles``."""
    frame_bytes = frame_bytes or [98 + b * (width // 8) for b in beats]
    if paths is None:
        f = faults or {}
        paths = [[Injector(FaultStream(link_seed(f.get("seed", 1), 2 * link + d), threshold(f.get("drop", 0)),
                                       threshold(f.get("dup", 0)), threshold(f.get("corrupt", 0))))]
                 for d in (0, 1)]
    tx, rx = SenderModel(width, credits, timeout, backoff_max), ReceiverModel(width, credits)
    run = LinkRun(len(beats))
    events, seq = [], 0                  # (time, order, kind, payload)

    def push(t, kind, payload=None):
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, payload))
        seq += 1

    def through(t, direction, kind, payload, nbytes, hop=0, bad=False):
        """A frame enters direction 0 (there) or 1 (back) at t: the injectors on the way decide what
        arrives (a corrupted frame goes on with its error mark; the receiver's MAC drops it)."""
        path = paths[direction]
        if hop == len(path):
            if bad:
                run.corrupt_arrived[direction] += 1
            else:
                push(t + latency, kind, payload)
            return
        inj = path[hop]
        d = inj.stream.next()
        inj.frames += 1
        if d.drop:
            inj.dropped += 1
            run.dropped += 1
            return
        if d.corrupt:
            inj.corrupted += 1
            run.corrupted += 1
        through(t, direction, kind, payload, nbytes, hop + 1, bad or d.corrupt)
        if d.duplicate:                  # an exact copy right behind it
            inj.duplicated += 1
            run.duplicated += 1
            through(t + nbytes / bytes_per_cycle, direction, kind, payload, nbytes, hop + 1, bad or d.corrupt)

    def reply(t, r):
        if r is not None:
            through(t, 1, "ack", r, 98)

    now, busy_until, timer_from, taken = 0.0, 0.0, 0.0, 0
    last_delay_check = None
    progress = (0, 0, 0.0)               # (delivered, acknowledged, when either last grew)
    while len(run.delivered) < len(beats) or tx.una != tx.high:
        if (len(run.delivered), tx.una) != progress[:2]:
            progress = (len(run.delivered), tx.una, now)
        elif deadline is not None and now - progress[2] > deadline:
            raise LinkStalled(link, len(run.delivered), len(beats), progress[2], deadline)
        if now > limit_cycles:
            raise RuntimeError(f"link {link}: not done after {limit_cycles:g} cycles ({len(run.delivered)} of "
                               f"{len(beats)} frames delivered)")
        # the sender: take what the credits allow, then send one frame if the wire is free
        while taken < len(beats) and tx.may_take(beats[taken]):
            tx.take(beats[taken])
            taken += 1
        if busy_until <= now:
            nxt = tx.next_frame()
            if nxt is not None:
                psn, _ = nxt
                nbytes = frame_bytes[psn % len(frame_bytes)] if psn < len(frame_bytes) else frame_bytes[-1]
                busy_until = now + nbytes / bytes_per_cycle
                run.sent += 1
                run.bytes_sent += nbytes
                through(busy_until, 0, "data", psn, nbytes)
                continue
        # the timer
        starved = taken < len(beats) and not tx.may_take(beats[taken])
        if tx.timer_runs(starved) and now >= timer_from + tx.wait():     # (one expression: float-safe)
            tx.expire()
            timer_from = now
            continue
        # the next event: an arrival, the wire free again, the timer, or the receiver's delayed ack
        times = [t for t in (events[0][0] if events else None,
                             busy_until if busy_until > now and tx.tx != tx.nxt else None,
                             timer_from + tx.wait() if tx.timer_runs(starved) else None,
                             last_delay_check) if t is not None and t >= now]
        if not times:
            raise RuntimeError(f"link {link}: nothing left to happen ({len(run.delivered)} of {len(beats)} "
                               "frames delivered): the protocol is stuck")
        now = max(now, min(times))
        if last_delay_check is not None and now >= last_delay_check:
            last_delay_check = None
            if rx.unreported():
                reply(now, rx.reply("ack"))
        while events and events[0][0] <= now:
            t, _, kind, payload = heapq.heappop(events)
            if kind == "data":
                verdict, r = rx.receive(payload)
                if verdict == "accepted":
                    run.delivered.append(payload)
                    r = rx.consume(beats[payload % len(beats)] if payload < len(beats) else 1) or r
                    run.cycles = t
                reply(t, r)
                if rx.unreported():
                    last_delay_check = t + ACK_DELAY
            else:
                if tx.on_ack(payload):
                    timer_from = t
        if not tx.timer_runs(starved):
            timer_from = now
    run.acks, run.nacks = rx.acks, rx.nacks
    run.retransmissions, run.timeouts, run.probes = tx.retransmissions, tx.timeouts, tx.probes
    run.duplicates, run.out_of_order = rx.duplicates, rx.out_of_order
    return run
