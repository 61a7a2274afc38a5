"""The receiver's link-number check against its golden model (contract.in_network.seq_gap), frame by frame."""

from amaranth.sim import Simulator

from contract.in_network import SEQ_MOD, seq_gap
from hdl.link.link_numbers import LinkNumbers


def test_link_numbers_follow_seq_gap(rng):
    """Frames numbered as a lossy, duplicating, reordering link delivers them (gaps of one and more, copies,
    older frames, numbers wrapping past 2**16, a first frame at any number): each frame waits a random number
    of cycles (at least one), and its verdicts are those of ``seq_gap`` against the newest frame taken; a
    frame not taken (the receiver drops it for another reason) leaves the newest as it was."""
    dut = LinkNumbers()
    numbers = [int(rng.integers(SEQ_MOD))]
    for _ in range(3000):
        step = rng.choice([1, 1, 1, 2, 2, 3, 0, -1, -5, 17, SEQ_MOD // 2, SEQ_MOD // 2 + 1])
        numbers.append((numbers[-1] + int(step)) % SEQ_MOD)
    checked = {"lost": 0, "newer": 0, "older": 0}

    async def bench(ctx):
        newest = None
        for number in numbers:
            ctx.set(dut.number, number)
            for _ in range(int(rng.integers(1, 4))):
                await ctx.tick()
            gap = 0 if newest is None else seq_gap(newest, number)
            assert ctx.get(dut.lost) == (newest is not None and gap >= 1), (newest, number)
            assert ctx.get(dut.newer) == (gap >= 0), (newest, number)
            checked["lost" if gap >= 1 else "newer" if gap >= 0 else "older"] += 1
            take = rng.random() < 0.9
            ctx.set(dut.take, take)
            await ctx.tick()
            ctx.set(dut.take, 0)
            if take and gap >= 0:
                newest = number

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert min(checked.values()) > 100, checked
