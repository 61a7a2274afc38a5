"""The sender's credit gate against the credit rule (contract.credits), cycle by cycle."""

from amaranth.sim import Simulator


def test_send_credits_hold_the_sender_within_the_limits(rng):
    """The sender's gate against contract.credits' rule, cycle by cycle: with no ack it stops at the
    receiver's room (frames or beats, whichever binds first), an ack moves the limits, a stale (smaller)
    limit stops it, and random acks and packet sizes never let it past either limit."""
    from contract.credits import Credits
    from hdl.link.send_credits import SendCredits
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
