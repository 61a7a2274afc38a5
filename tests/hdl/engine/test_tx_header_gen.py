"""Transmit headers generated from the sequencer's items equal the golden model's frames field for field."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from contract.enums import Codec
from contract.addresses import ip_int, mac_int, rank_ip, rank_mac
from tests.hdl.engine.sequencing import sequencer_driving, start_sequence


@pytest.mark.parametrize("n, length, p, lag, codec", [(3, 1000, 16, 2, "bf16"), (4, 300, 64, 8, "none")])
def test_tx_headers_match_the_model_frames(rng, n, length, p, lag, codec):
    """Sequencer -> TxHeaderGen in RTL gives, frame for frame, the headers of Cluster.frames() (psn 0: the
    link sender numbers the frames)."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    from hdl.engine.tx_header_gen import TxHeaderGen
    from host_driver.models import allreduce as ar
    from host_driver.models.protocol import Ainic
    from host_driver.sim.cluster import Cluster

    x = [rng.standard_normal(length).astype(np.float32) for _ in range(n)]
    frames = list(Cluster(n, codec=codec, packet=p, lag=lag).frames(x))
    plan = ar.Plan(n, length, p)
    for rank in range(n):
        want = []
        for src, f in frames:
            if src == rank and Ether(f)[Ainic].opcode != 2:      # data frames (acks come from the engine)
                e = Ether(f)
                want.append((e[Ainic].opcode, e[Ainic].flags, e[Ainic].src_rank, e[Ainic].dst_rank, e[Ainic].chunk,
                             e[Ainic].count, e[Ainic].offset, 0, e[Ainic].codec, e[IP].dst, e.dst))
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
            ctx.set(gen.m_meta.ready, 1)
            for _ in range(100_000):
                _, _, valid, busy, v = await ctx.tick().sample(gen.m_meta.valid, seq.busy, gen.m_meta.payload)
                if valid:
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
