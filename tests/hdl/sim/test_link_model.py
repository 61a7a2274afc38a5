"""The link model: latency and rate as configured, every beat delivered."""

from amaranth.sim import Simulator

from hdl.sim.link_model import LinkModel
from tests.hdl.streams import B, W, drive, mac, random_frame


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
