"""The packet crossbar: every record and its payload reach the output the record names, in each input's
order, under random idle on the inputs and random backpressure on the outputs; and an output's record,
once offered, stays offered and unchanged until it is taken (a stream may not change its mind: the
aggregation engine reads the slot a record names the cycle it is first offered)."""

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

    async def bench(ctx):
        ins = [(getattr(dut, f"s_meta_{i}"), getattr(dut, f"s_axis_{i}"), getattr(dut, f"dest_{i}")) for i in range(N)]
        outs = [(getattr(dut, f"m_meta_{k}"), getattr(dut, f"m_axis_{k}")) for k in range(K)]
        state = {i: ["meta", 0] for i in range(N)}          # per input: phase and beat of its head packet
        holding = {i: False for i in range(N)}              # per input: its record offered, not yet taken
        current = {k: None for k in range(K)}               # per output: the packet whose payload is passing
        offered = {k: None for k in range(K)}               # per output: record offered and not taken last cycle
        for _ in range(4000):
            for i, (sm, sa, dest) in enumerate(ins):
                phase, beat = state[i]
                live = bool(todo[i]) and rng.random() >= idle
                ctx.set(sm.valid, 0)
                ctx.set(sa.tvalid, 0)
                if todo[i] and phase == "meta" and (live or holding[i]):
                    holding[i] = True
                    tag, d, _ = todo[i][0]
                    ctx.set(sm.valid, 1)
                    ctx.set(sm.payload, {"tag": tag})
                    ctx.set(dest, d)
                elif todo[i] and phase == "pay" and live:
                    b = todo[i][0][2]
                    ctx.set(sa.tvalid, 1)
                    ctx.set(sa.tdata, b[beat])
                    ctx.set(sa.tkeep, 0xFF)
                    ctx.set(sa.tlast, beat == len(b) - 1)
            for k, (om, oa) in enumerate(outs):
                ready = int(rng.random() >= backpressure)
                ctx.set(om.ready, ready)
                ctx.set(oa.tready, int(rng.random() >= backpressure))
            # the handshakes of this cycle, all signals settled
            for k, (om, oa) in enumerate(outs):
                if ctx.get(om.valid):
                    rec = ctx.get(om.payload.tag)
                    if offered[k] is not None and offered[k] != rec:
                        violations.append((k, offered[k], rec))
                    if ctx.get(om.ready):
                        current[k] = (rec, [])
                        offered[k] = None
                    else:
                        offered[k] = rec
                elif offered[k] is not None:
                    violations.append((k, offered[k], None))
                    offered[k] = None
                if ctx.get(oa.tvalid) and ctx.get(oa.tready):
                    current[k][1].append(ctx.get(oa.tdata))
                    if ctx.get(oa.tlast):
                        got[k].append(current[k])
                        current[k] = None
            for i, (sm, sa, _) in enumerate(ins):
                if ctx.get(sm.valid) and ctx.get(sm.ready):
                    state[i], holding[i] = ["pay", 0], False
                elif ctx.get(sa.tvalid) and ctx.get(sa.tready):
                    state[i][1] += 1
                    if ctx.get(sa.tlast):
                        todo[i].pop(0)
                        state[i] = ["meta", 0]
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert violations == []
    for k in range(K):
        per_src = {i: [(t, b) for t, b in got[k] if t // 1000 == i] for i in range(N)}
        assert per_src == want[k], f"output {k}"
