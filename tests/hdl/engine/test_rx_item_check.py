"""Received headers checked against the expected items: the model's frames pass, a corrupted field is flagged."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from tests.hdl.engine.sequencing import sequencer_driving, start_sequence


@pytest.mark.parametrize("corrupt", [None, "offset", "chunk"])
def test_rx_item_check_accepts_the_model_frames(rng, corrupt):
    """Headers of the previous rank's frames (Cluster.frames) pass RxItemCheck against this rank's
    sequencer; a corrupted field is flagged on exactly that packet."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    from hdl.engine.rx_item_check import FIELDS, RxItemCheck
    from host_driver.models import allreduce as ar
    from contract.addresses import ip_int, rank_ip
    from host_driver.models.protocol import Ainic
    from host_driver.sim.cluster import Cluster

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
        shift = {"offset": 64, "chunk": 144}[corrupt]
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
        for _ in range(100_000):
            ctx.set(chk.s_meta.valid, i < len(metas))
            if i < len(metas):
                ctx.set(chk.s_meta.payload.as_value(), metas[i])
            _, _, took, valid, mism, busy = await ctx.tick().sample(
                chk.s_meta.ready, chk.checked.valid, chk.checked.payload.mismatch, seq.busy)
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
