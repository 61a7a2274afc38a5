"""The cluster fabric in Amaranth's simulator: the Ethernet switch and the link model, with random frames,
idle and backpressure; every frame must arrive whole, in order per source, at the right port and time."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from contract.enums import Codec
from hdl.sim.eth_switch import EthernetSwitch
from hdl.sim.link_model import LinkModel
from host_driver.models.protocol import mac_int

W = 64
B = W // 8


def beats(frame: bytes):
    for k in range(0, len(frame), B):
        chunk = frame[k:k + B]
        yield int.from_bytes(chunk.ljust(B, b"\0"), "little"), (1 << len(chunk)) - 1, k + B >= len(frame)


def mac(i):
    return f"02:00:00:00:01:{i:02x}"


def random_frame(rng, dst_mac: str, tag: int):
    n = int(rng.integers(14, 200))
    body = bytes(rng.integers(0, 256, n, dtype=np.uint8))
    return bytes.fromhex(dst_mac.replace(":", "")) + tag.to_bytes(4, "little") + body


async def drive(ctx, port, frames, rng, idle):
    for f in frames:
        for data, keep, last in beats(f):
            while idle and rng.random() < idle:
                ctx.set(port.tvalid, 0)
                await ctx.tick()
            ctx.set(port.tdata, data)
            ctx.set(port.tkeep, keep)
            ctx.set(port.tlast, last)
            ctx.set(port.tvalid, 1)
            await ctx.tick().until(port.tready)
    ctx.set(port.tvalid, 0)


async def collect(ctx, port, out, rng, backpressure, cycles_log=None):
    buf = b""
    while True:
        ctx.set(port.tready, int(not (backpressure and rng.random() < backpressure)))
        _, _, valid, ready, data, keep, last = await ctx.tick().sample(port.tvalid, port.tready, port.tdata,
                                                                      port.tkeep, port.tlast)
        if valid and ready:
            n = bin(keep).count("1")
            buf += int(data).to_bytes(B, "little")[:n]
            if last:
                out.append(buf)
                if cycles_log is not None:
                    cycles_log.append(ctx)
                buf = b""


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.5)])
def test_switch_routes_every_frame(rng, idle, backpressure):
    N = 3
    dut = EthernetSwitch(N, W, queue_depth=16)
    frames = {i: [] for i in range(N)}
    want = {j: {i: [] for i in range(N)} for j in range(N)}
    unknown = 0
    for i in range(N):
        for k in range(25):
            j = int(rng.integers(0, N + 1))
            if j == N:
                frames[i].append(random_frame(rng, "ff:ff:ff:ff:ff:ff", k))
                unknown += 1
            else:
                f = random_frame(rng, mac(j), 1000 * i + k)
                frames[i].append(f)
                want[j][i].append(f)
    got = {j: [] for j in range(N)}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def config(ctx):
        for j in range(N):
            ctx.set(dut.cfg_mac[j], mac_int(mac(j)))
    sim.add_testbench(config)
    def driver(i):
        async def run(ctx):
            await drive(ctx, getattr(dut, f"s_axis_{i}"), frames[i], np.random.default_rng(i), idle)
        return run

    def collector(j):
        async def run(ctx):
            await collect(ctx, getattr(dut, f"m_axis_{j}"), got[j], np.random.default_rng(10 + j), backpressure)
        return run
    for i in range(N):
        sim.add_testbench(driver(i))
        sim.add_process(collector(i))

    seen = {}

    async def until_done(ctx):
        await ctx.tick().repeat(6000)
        seen["unknown"] = ctx.get(dut.stat_unknown)
    sim.add_testbench(until_done)
    sim.run()
    delivered = sum(len(v) for v in got.values())
    expected = sum(len(w) for d in want.values() for w in d.values())
    assert (seen["unknown"], delivered) == (unknown, expected)
    for j in range(N):
        per_src = {i: [f for f in got[j] if int.from_bytes(f[6:10], "little") // 1000 == i] for i in range(N)}
        assert per_src == want[j], f"port {j}"
    assert sum(len(v) for v in got.values()) == sum(len(w) for d in want.values() for w in d.values())


def test_link_latency_and_rate(rng):
    dut = LinkModel(W, depth=256)
    frames = [random_frame(rng, mac(0), k) for k in range(30)]
    got = []
    times = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    rate = 4.0                   # bytes per cycle: half of the 8-byte bus
    latency = 50

    async def feed(ctx):
        ctx.set(dut.cfg_latency, latency)
        ctx.set(dut.cfg_rate, int(rate * 256))
        ctx.set(dut.cfg_overhead, 24)
        await drive(ctx, dut.s_axis, frames, rng, 0.0)

    async def sink(ctx):
        cycle = 0
        buf = b""
        ctx.set(dut.m_axis.tready, 1)
        while True:
            _, _, valid, data, keep, last = await ctx.tick().sample(dut.m_axis.tvalid, dut.m_axis.tdata,
                                                                   dut.m_axis.tkeep, dut.m_axis.tlast)
            cycle += 1
            if valid:
                buf += int(data).to_bytes(B, "little")[:bin(keep).count("1")]
                if last:
                    got.append(buf)
                    times.append(cycle)
                    buf = b""

    async def wait(ctx):
        await ctx.tick().repeat(4000)
    sim.add_testbench(feed)
    sim.add_process(sink)
    sim.add_testbench(wait)
    sim.run()
    assert got == frames
    total = sum(len(f) + 24 for f in frames)
    span = times[-1] - times[0]
    expect = (total - len(frames[0]) - 24) / rate
    assert abs(span - expect) <= 0.05 * expect + 4, (span, expect)
    assert times[0] >= latency


@pytest.mark.parametrize("n, length, p, lag", [(2, 100, 16, 1), (3, 1000, 16, 2), (4, 100, 256, 1),
                                              (5, 5000, 64, 3), (8, 777, 16, 4), (8, 5, 64, 4),
                                              (3, 100, 64, 2), (16, 1000, 16, 5), (13, 300, 16, 2)])
@pytest.mark.parametrize("op", ["allreduce", "reduce_scatter", "allgather"])
def test_ring_sequencer_matches_schedule(n, length, p, lag, op):
    from contract.credits import effective_lag
    from hdl.engine.ring_sequencer import RingSequencer, plan_fields
    from host_driver.models import allreduce as ar
    plan = ar.Plan(n, length, p)
    run_lag = effective_lag(lag, n, p)      # what the NIC runs: at N = 16 the receive buffer caps the lag
    assert run_lag == lag or n == 16
    for rank in sorted({0, n - 1, n // 2, n - 2}):
        want = []
        for ph, k, c, kind in ar.rank_schedule(rank, plan, run_lag, op):
            s = plan.chunk(c)
            want.append((ph, kind, c, k, s.start + k * p, min(p, s.stop - s.start - k * p)))
        dut = RingSequencer()
        got = []
        sim = Simulator(dut)
        sim.add_clock(1e-8)

        async def bench(ctx):
            for name, v in plan_fields(plan, rank, lag, op).items():
                ctx.set(getattr(dut.plan, name), v)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.items.ready, 1)
            for cycle in range(200_000):
                _, _, valid, busy, item = await ctx.tick().sample(dut.items.valid, dut.busy, dut.items.payload)
                if valid:
                    got.append((item.phase, item.kind, item.chunk, item.packet, item.offset, item.count))
                if not busy and cycle > 2:
                    break
        sim.add_testbench(bench)
        sim.run()
        assert got == want, (rank, got[:5], want[:5])


def test_plan_calculator_matches_plan(rng):
    from hdl.engine.plan_calculator import PlanCalculator
    from hdl.engine.ring_sequencer import plan_fields
    from host_driver.models import allreduce as ar
    cases = [(2, 1, 16), (4, 100, 256), (3, 1000, 16), (16, 1 << 26, 1024), (5, 4095, 64)]
    cases += [(int(rng.integers(2, 17)), int(rng.integers(1, 1 << 24)), 16 * int(rng.integers(1, 65)))
              for _ in range(20)]
    dut = PlanCalculator()
    got = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        for n, length, p in cases:
            ctx.set(dut.elements, length)
            ctx.set(dut.nodes, n)
            ctx.set(dut.packet, p)
            ctx.set(dut.rank, 1)
            ctx.set(dut.lag, 3)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await ctx.tick().until(dut.done)
            got.append({name: ctx.get(getattr(dut.plan, name)) for name in plan_fields(ar.Plan(2, 16, 16), 0, 0)})
    sim.add_testbench(bench)
    sim.run()
    for (n, length, p), g in zip(cases, got):
        assert g == plan_fields(ar.Plan(n, length, p), 1, 3), (n, length, p)


@pytest.mark.parametrize("enable_b", [1, 0])
def test_stream_fork_delivers_every_beat_to_each_branch(rng, enable_b):
    from hdl.stream.stream_fork import StreamFork
    dut = StreamFork(W)
    frames = [random_frame(rng, mac(0), k) for k in range(20)]
    got_a, got_b = [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def feed(ctx):
        ctx.set(dut.enable_b, enable_b)
        await drive(ctx, dut.s_axis, frames, np.random.default_rng(1), 0.3)

    async def sink_a(ctx):
        await collect(ctx, dut.m_axis_a, got_a, np.random.default_rng(2), 0.5)

    async def sink_b(ctx):
        await collect(ctx, dut.m_axis_b, got_b, np.random.default_rng(3), 0.3)

    async def wait(ctx):
        await ctx.tick().repeat(3000)
    sim.add_testbench(feed)
    sim.add_process(sink_a)
    sim.add_process(sink_b)
    sim.add_testbench(wait)
    sim.run()
    assert got_a == frames
    assert got_b == (frames if enable_b else [])


def sequencer_driving(block):
    """A module with a RingSequencer feeding ``block.items``; returns (module, sequencer)."""
    from amaranth import Module
    from amaranth.lib import wiring

    from hdl.engine.ring_sequencer import RingSequencer
    m = Module()
    m.submodules.seq = seq = RingSequencer()
    m.submodules.block = block
    wiring.connect(m, seq.items, block.items)
    return m, seq


async def start_sequence(ctx, seq, block, plan, rank, lag, cfg):
    """Load the plan and the block's configuration, then pulse ``start`` on both."""
    from hdl.engine.ring_sequencer import plan_fields
    for name, v in plan_fields(plan, rank, lag).items():
        ctx.set(getattr(seq.plan, name), v)
    for name, v in cfg.items():
        ctx.set(getattr(block.cfg, name), v)
    ctx.set(seq.start, 1)
    ctx.set(block.start, 1)
    await ctx.tick()
    ctx.set(seq.start, 0)
    ctx.set(block.start, 0)


@pytest.mark.parametrize("n, length, p, lag, codec", [(3, 1000, 16, 2, "bf16"), (4, 300, 64, 8, "none")])
def test_tx_headers_match_the_model_frames(rng, n, length, p, lag, codec):
    """Sequencer -> TxHeaderGen in RTL gives, frame for frame, the headers of Cluster.frames()."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    from hdl.engine.tx_header_gen import TxHeaderGen
    from hdl.packet.tx_builder import TxMeta
    from host_driver.models import allreduce as ar
    from host_driver.models.protocol import Ainic, ip_int, mac_int
    from host_driver.sim.cluster import Cluster, rank_ip, rank_mac

    x = [rng.standard_normal(length).astype(np.float32) for _ in range(n)]
    frames = list(Cluster(n, codec=codec, packet=p, lag=lag).frames(x))
    plan = ar.Plan(n, length, p)
    for rank in range(n):
        want = []
        for src, f in frames:
            if src == rank and Ether(f)[Ainic].opcode != 2:      # data frames (acks come from the engine)
                e = Ether(f)
                want.append((e[Ainic].opcode, e[Ainic].flags, e[Ainic].src_rank, e[Ainic].dst_rank, e[Ainic].chunk,
                             e[Ainic].count, e[Ainic].offset, e[Ainic].psn, e[Ainic].codec, e[IP].dst, e.dst))
        gen = TxHeaderGen()
        m, seq = sequencer_driving(gen)
        got = []
        sim = Simulator(m)
        sim.add_clock(1e-8)

        async def bench(ctx):
            nxt = (rank + 1) % n
            await start_sequence(ctx, seq, gen, plan, rank, lag, {
                "rank": rank, "nodes": n, "codec": Codec[codec], "dtype": 0,
                "next_mac": mac_int(rank_mac(nxt)), "next_ip": ip_int(rank_ip(nxt))})
            ctx.set(gen.m_meta.tready, 1)
            for _ in range(100_000):
                _, _, valid, busy, tdata = await ctx.tick().sample(gen.m_meta.tvalid, seq.busy, gen.m_meta.tdata)
                if valid:
                    v = TxMeta.from_bits(tdata)
                    h = v.ainic
                    mac = int(v.dst_mac)
                    got.append((int(h.opcode), int(h.flags), int(h.src_rank), int(h.dst_rank), int(h.chunk),
                                int(h.count), int(h.offset), int(h.psn), int(h.codec),
                                ".".join(str(int(v.dst_ip) >> s & 255) for s in (24, 16, 8, 0)),
                                ":".join(f"{mac >> s & 255:02x}" for s in range(40, -8, -8))))
                if not busy:
                    break
        sim.add_testbench(bench)
        sim.run()
        assert got == want, (rank, got[:3], want[:3])



@pytest.mark.parametrize("corrupt", [None, "offset", "psn"])
def test_rx_item_check_accepts_the_model_frames(rng, corrupt):
    """Headers of the previous rank's frames (Cluster.frames) pass RxItemCheck against this rank's
    sequencer; a corrupted field is flagged on exactly that packet."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    from hdl.engine.rx_item_check import FIELDS, RxItemCheck
    from host_driver.models import allreduce as ar
    from host_driver.models.protocol import Ainic, ip_int
    from host_driver.sim.cluster import Cluster, rank_ip

    n, length, p, lag, rank = 3, 700, 16, 4, 1
    x = [rng.standard_normal(length).astype(np.float32) for _ in range(n)]
    metas = []
    for src, f in Cluster(n, codec="bfp8", packet=p, lag=lag).frames(x):
        if src == rank - 1 and Ether(f)[Ainic].opcode != 2:     # the engine takes acks out before the check
            e = Ether(f)
            hdr = int.from_bytes(bytes(e[Ainic])[:32], "big")
            metas.append(hdr | ip_int(e[IP].src) << 256)
    bad_at = 5
    if corrupt:
        shift = {"offset": 64, "psn": 32}[corrupt]
        metas[bad_at] ^= 1 << shift
    chk = RxItemCheck()
    m, seq = sequencer_driving(chk)
    flagged = []
    sim = Simulator(m)
    sim.add_clock(1e-8)

    async def bench(ctx):
        await start_sequence(ctx, seq, chk, ar.Plan(n, length, p), rank, lag, {
            "rank": rank, "nodes": n, "codec": 3, "dtype": 0, "prev_ip": ip_int(rank_ip(rank - 1))})
        ctx.set(chk.checked.ready, 1)
        i = 0
        received = 0
        for _ in range(100_000):
            ctx.set(chk.s_meta.tvalid, i < len(metas))
            if i < len(metas):
                ctx.set(chk.s_meta.tdata, metas[i])
            _, _, took, valid, mism, busy = await ctx.tick().sample(
                chk.s_meta.tready, chk.checked.valid, chk.checked.payload.mismatch, seq.busy)
            if took and i < len(metas):
                if mism:
                    flagged.append((i, [f for b, f in enumerate(FIELDS) if mism >> b & 1]))
                i += 1
            if not busy:
                break
        flagged.append(("consumed", i, ctx.get(chk.stat_mismatches)))
    sim.add_testbench(bench)
    sim.run()
    assert flagged[-1][:2] == ("consumed", len(metas))
    if corrupt:
        assert flagged[:-1] == [(bad_at, [corrupt])] and flagged[-1][2] == 1
    else:
        assert flagged[:-1] == [] and flagged[-1][2] == 0


def test_send_credits_hold_the_sender_within_the_limits(rng):
    """The sender's gate against contract.credits' rule, cycle by cycle: with no ack it stops at the
    receiver's room (frames or beats, whichever binds first), an ack moves the limits, a stale (smaller)
    limit stops it, and random acks and packet sizes never let it past either limit."""
    from contract.credits import Credits
    from hdl.engine.send_credits import SendCredits
    cc = Credits(rx_frames=8, rx_buffer_bytes=2048, ack_every=2)
    dut = SendCredits(64, cc)
    log = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    def allowed(lf, lb, sf, sb, beats):
        fl, bl = (lf - sf) % 2**32, (lb - sb) % 2**32
        return fl != 0 and fl < 2**31 and bl < 2**31 and bl >= beats

    async def bench(ctx):
        lf, lb, sf, sb = cc.rx_frames, cc.advertised_beats(64), 0, 0

        async def attempt(beats, ack=None, want_take=True):
            nonlocal lf, lb, sf, sb
            ctx.set(dut.beats, beats)
            ctx.set(dut.limit_valid, ack is not None)
            if ack is not None:
                ctx.set(dut.limit_frames, ack[0])
                ctx.set(dut.limit_beats, ack[1])
            ok = ctx.get(dut.ok)
            assert ok == allowed(lf, lb, sf, sb, beats), (lf, lb, sf, sb, beats)
            took = ok and want_take
            ctx.set(dut.take, took)
            await ctx.tick()
            if took:
                sf, sb = sf + 1, sb + beats
            if ack is not None:
                lf, lb = ack
            return took
        # no ack: 32-beat packets stop at the beat limit (252 // 32 = 7 < 8 frames)
        assert sum([await attempt(32) for _ in range(20)]) == 7
        # 1-beat packets: now the frame limit binds (8 frames in all)
        assert sum([await attempt(1) for _ in range(20)]) == 1
        # an ack with 3 more frames lets exactly 3 more go; a stale one (below what was sent) stops it
        await attempt(1, ack=(sf + 3, sb + 1000), want_take=False)
        assert sum([await attempt(1) for _ in range(10)]) == 3
        await attempt(1, ack=(sf - 5, sb + 1000), want_take=False)
        assert sum([await attempt(1) for _ in range(10)]) == 0
        # random: the receiver consumes some of what was sent and advertises its room
        used_f, used_b = sf - 5, sb - 40
        for _ in range(3000):
            ack = None
            if rng.random() < 0.1:
                used_f += int(rng.integers(0, sf - used_f + 1))
                used_b = min(sb, used_b + int(rng.integers(0, 200)))
                ack = ((used_f + cc.rx_frames) % 2**32, (used_b + cc.advertised_beats(64)) % 2**32)
            await attempt(int(rng.integers(1, 80)), ack, want_take=rng.random() < 0.7)
            assert (sf - used_f) <= cc.rx_frames
        log.append(sf)
        assert ctx.get(dut.sent_frames) == sf and ctx.get(dut.sent_beats) == sb
    sim.add_testbench(bench)
    sim.run()
    assert log and log[0] > 100             # the random phase did send (the limits moved)
