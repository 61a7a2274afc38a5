"""The packet crossbar: every record and its payload reach the output the record names, in each input's
order, under random idle on the inputs and random backpressure on the outputs; and an output's record,
once offered, stays offered and unchanged until it is taken (a stream may not change its mind: the
aggregation engine reads the slot a record names the cycle it is first offered). Records run a packet
ahead of payloads on both sides (an output and a source each have a record taken while a payload of theirs
passes), and with no idle and no backpressure an output's payloads follow each other without a cycle
between them (the switch's line rate depends on it: the engine decides the next record while it sums).
Sources here offer their next record whenever they have one, whatever their payloads do."""

import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from hdl.switch.packet_crossbar import PacketCrossbar

W = 64
Record = data.StructLayout({"tag": 16})


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.4, 0.6)])
def test_every_packet_reaches_its_output_and_records_hold(rng, idle, backpressure):
    N, K = 3, 2
    dut = PacketCrossbar(N, K, Record, W)
    todo = {i: [(1000 * i + k, int(rng.integers(0, K)), [int(x) for x in rng.integers(0, 2**63, int(rng.integers(1, 6)))])
                for k in range(40)] for i in range(N)}
    want = {k: {i: [(t, b) for t, d, b in todo[i] if d == k] for i in range(N)} for k in range(K)}
    got = {k: [] for k in range(K)}
    violations = []
    overlaps = {k: 0 for k in range(K)}      # records taken while a payload of the same output was passing
    src_ahead = {i: 0 for i in range(N)}     # records taken while a payload of the same source was passing
    gaps = {k: 0 for k in range(K)}          # cycles an output's next payload was there to pass and did not

    async def bench(ctx):
        ins = [(getattr(dut, f"s_meta_{i}"), getattr(dut, f"s_axis_{i}"), getattr(dut, f"dest_{i}")) for i in range(N)]
        outs = [(getattr(dut, f"m_meta_{k}"), getattr(dut, f"m_axis_{k}")) for k in range(K)]
        # per input: its records still to offer (the head offered until taken, whatever the payloads do),
        # and the payloads of records taken, in order, with the beat of the first
        records = {i: list(todo[i]) for i in range(N)}
        payloads = {i: [] for i in range(N)}
        beat = {i: 0 for i in range(N)}
        holding = {i: False for i in range(N)}              # per input: its record offered, not yet taken
        taken = {k: [] for k in range(K)}                   # per output: records taken, payload not all out
        offered = {k: None for k in range(K)}               # per output: record offered and not taken last cycle
        for _ in range(4000):
            for i, (sm, sa, dest) in enumerate(ins):
                ctx.set(sm.valid, 0)
                ctx.set(sa.tvalid, 0)
                if records[i] and (holding[i] or rng.random() >= idle):
                    holding[i] = True
                    tag, d, _ = records[i][0]
                    ctx.set(sm.valid, 1)
                    ctx.set(sm.payload, {"tag": tag})
                    ctx.set(dest, d)
                if payloads[i] and rng.random() >= idle:
                    b = payloads[i][0][1]
                    ctx.set(sa.tvalid, 1)
                    ctx.set(sa.tdata, b[beat[i]])
                    ctx.set(sa.tkeep, 0xFF)
                    ctx.set(sa.tlast, beat[i] == len(b) - 1)
            for k, (om, oa) in enumerate(outs):
                ready = int(rng.random() >= backpressure)
                ctx.set(om.ready, ready)
                ctx.set(oa.tready, int(rng.random() >= backpressure))
            # which outputs have their next payload at the head of its source's stream (a beat could move)
            due = {k for k in range(K) if taken[k] and any(payloads[i] and payloads[i][0][0] == taken[k][0][0]
                                                          for i in range(N))}
            # the handshakes of this cycle, all signals settled
            for k, (om, oa) in enumerate(outs):
                if ctx.get(om.valid):
                    rec = ctx.get(om.payload.tag)
                    if offered[k] is not None and offered[k] != rec:
                        violations.append((k, offered[k], rec))
                    if ctx.get(om.ready):
                        if taken[k]:
                            overlaps[k] += 1
                        taken[k].append((rec, []))
                        offered[k] = None
                    else:
                        offered[k] = rec
                elif offered[k] is not None:
                    violations.append((k, offered[k], None))
                    offered[k] = None
                moved = ctx.get(oa.tvalid) and ctx.get(oa.tready)
                if k in due and not moved:
                    gaps[k] += 1
                if moved:
                    taken[k][0][1].append(ctx.get(oa.tdata))
                    if ctx.get(oa.tlast):
                        got[k].append(taken[k].pop(0))
            for i, (sm, sa, _) in enumerate(ins):
                if ctx.get(sm.valid) and ctx.get(sm.ready):
                    if payloads[i]:
                        src_ahead[i] += 1
                    tag, _, b = records[i].pop(0)
                    payloads[i].append((tag, b))
                    holding[i] = False
                if ctx.get(sa.tvalid) and ctx.get(sa.tready):
                    beat[i] += 1
                    if ctx.get(sa.tlast):
                        payloads[i].pop(0)
                        beat[i] = 0
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert violations == []
    for k in range(K):
        per_src = {i: [(t, b) for t, b in got[k] if t // 1000 == i] for i in range(N)}
        assert per_src == want[k], f"output {k}"
        assert overlaps[k] > 0
    assert all(v > 0 for v in src_ahead.values()), src_ahead
    if not idle and not backpressure:
        assert gaps == {k: 0 for k in range(K)}
