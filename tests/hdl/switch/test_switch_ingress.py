"""One port's way into the switch (hdl/switch/switch_ingress.py): frames back to back, some with a payload
and some without, some passing and some dropped, while the engines hold the decoded payloads back. Every
record that passes leaves with its own payload, decoded, whole and in order; the spine's agg_nacks ask
member 0; nothing is lost or shifted."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from contract.addresses import ip_int, mac_int
from contract.enums import FrameOpcode
from hdl.switch.switch_ingress import SwitchIngress
from host_driver.models import in_network as inn
from host_driver.models import numerics as nm
from tests.hdl.streams import collect, drive_marked
from tests.hdl.switch.jobs import entry, spine_result

W = 64
PORTS = 3
UP = 2                          # the leaf's up port: the port under test


def frames_and_expectations(rng, codec):
    """Frames onto the up port of a leaf (members on ports 0 and 1), back to back: the spine's results, its
    agg_nacks (no payload), and frames the checks drop with and without a payload. Returns (frames, the
    passing results' (psn, decoded payload bytes), the psns member 0 is asked for)."""
    job = inn.Job(7, (1, 0), 4, slot_base=4, codec=codec, packet=32, up_port=UP, up_job=9, up_worker=3)
    sw = inn.SwitchModel(PORTS, slots=8, max_jobs=2)
    sw.configure(1, job)
    frames, results, asks, seq = [], [], [], 0
    for g in range(12):
        n = int(rng.integers(1, 33))
        values = (rng.standard_normal(n) * 4).astype(np.float32)
        frames.append(spine_result(sw, job, g, values, seq)[1])
        bits = nm.as_bits(values)
        decoded = bits if codec == "none" else nm.as_bits(nm.decompress(nm.compress(bits, codec), codec, n))
        results.append((g, decoded.astype("<u4").tobytes()))
        seq += 1
        if g % 3 == 1:            # the spine lost the leaf's partial of g: an agg_nack, numbered with the results
            frames.append(spine_result(sw, job, g, [], seq, opcode=FrameOpcode.agg_nack, count=0, payload=b"",
                                       prev=g)[1])
            asks.append(g)
            seq += 1
        if g % 4 == 2:            # dropped by the checks, no payload (no leaf job for spine job 10)
            frames.append(spine_result(sw, job, g, [], seq, opcode=FrameOpcode.agg_nack, count=0, payload=b"",
                                       job=10)[1])
        if g % 4 == 3:            # dropped by the checks, with a payload (not the leaf's worker index)
            frames.append(spine_result(sw, job, g, values, seq, worker=2)[1])
    return sw, job, frames, results, asks


@pytest.mark.parametrize("codec", ["none", "bfp8"])
def test_payloads_stay_whole_past_frames_without_one(codec):
    """The engines take nothing for the first 300 cycles (the parser fills up behind the ingress), then take
    records and beats with random backpressure: a frame with no payload (an agg_nack, passed or dropped) must
    take no beat of the payload queued behind it, which once cost the next result its first beat (a tree's
    leaf then multicast garbage: docs/in_network.md, "Two levels")."""
    rng, backpressure = np.random.default_rng(5), 0.6
    sw, job, frames, want, asks = frames_and_expectations(rng, codec)
    dut = SwitchIngress(W, PORTS, max_jobs=2)
    records, payloads, ask_records = [], [], []
    started = []

    async def feed(ctx):
        ctx.set(dut.port, UP)
        ctx.set(dut.cfg_mac, mac_int(sw.mac))
        ctx.set(dut.cfg_ip, ip_int(sw.ip))
        ctx.set(dut.jobs[1].as_value(), entry(job))
        await ctx.tick().repeat(3)                      # the rank register takes the job's up_worker
        await drive_marked(ctx, dut.s_axis, frames)

    async def hold(ctx):
        await ctx.tick().repeat(300)
        started.append(1)

    async def meta(ctx):
        r = np.random.default_rng(1)
        while True:
            ctx.set(dut.m_meta.ready, int(bool(started) and r.random() >= backpressure))
            ctx.set(dut.m_ask.ready, 1)
            _, _, mv, mr, mp, av, ap = await ctx.tick().sample(dut.m_meta.valid, dut.m_meta.ready,
                                                               dut.m_meta.payload, dut.m_ask.valid, dut.m_ask.payload)
            if mv and mr:
                records.append(mp)
            if av:
                ask_records.append(ap)

    async def beats(ctx):
        while not started:
            await ctx.tick()
        await collect(ctx, dut.m_axis, payloads, np.random.default_rng(2), backpressure)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_process(hold)
    sim.add_testbench(meta, background=True)
    sim.add_testbench(beats, background=True)
    sim.run_until(1e-8 * 4000)

    assert [int(r.psn) for r in records] == [g for g, _ in want]
    assert [int(r.count) for r in records] == [len(p) // 4 for _, p in want]
    assert payloads == [p for _, p in want]
    assert [(int(a.port), int(a.nack.worker), int(a.nack.psn)) for a in ask_records] == [(1, 0, g) for g in asks]
