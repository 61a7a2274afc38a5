"""The Ethernet switch: every frame reaches the port of its destination MAC, under random idle and backpressure;
with tuser, a frame's MAC-error mark reaches the port with it; the same with registered inputs (the
aggregation switch's build)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.switch.eth_switch import EthernetSwitch
from contract.addresses import mac_int
from tests.hdl.streams import W, collect, collect_marked, drive, drive_marked, mac, random_frame


@pytest.mark.parametrize("registered", [False, True])
@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.5)])
def test_switch_routes_every_frame(rng, idle, backpressure, registered):
    N = 3
    dut = EthernetSwitch(N, W, queue_depth=16, registered=registered)
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


@pytest.mark.parametrize("registered", [False, True])
def test_tuser_travels_with_the_frame(rng, registered):
    dut = EthernetSwitch(2, W, queue_depth=16, user_width=1, registered=registered)
    frames = [random_frame(rng, mac(1), k) for k in range(12)]
    marked = {k for k in range(12) if k % 3 == 0}
    got = []

    async def feed(ctx):
        ctx.set(dut.cfg_mac[1], mac_int(mac(1)))
        await drive_marked(ctx, dut.s_axis_0, frames, marked)

    async def sink(ctx):
        await collect_marked(ctx, dut.m_axis_1, got)

    async def wait(ctx):
        await ctx.tick().repeat(1500)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_process(sink)
    sim.add_testbench(wait)
    sim.run()
    assert [err for _, err in got] == [k in marked for k in range(12)]
