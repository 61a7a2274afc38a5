"""The exported switch (SwitchTop): configured through its registers alone (docs/switch_registers.md), it
runs two jobs as SwitchModel does, frame for frame, and so does a leaf of a two-level tree (JOB_UP); its
counter registers read the model's counters."""

import numpy as np
from amaranth.sim import Simulator

from contract.addresses import ip_int, mac_int
from contract.enums import AggDrop, DropReason
from contract.regmap import VERSION_VALUE
from contract.switch_regmap import (
    SWITCH_ID_VALUE,
    caps_value,
    job_config_value,
    job_ports_values,
    job_up_value,
)
from hdl.host.axi import RESP_OKAY, RESP_SLVERR
from hdl.switch.switch_top import SwitchTop
from host_driver.models import in_network as inn
from host_driver.models import protocol as proto
from tests.hdl.host import axil
from tests.hdl.streams import collect_marked, drive_marked
from tests.hdl.switch.jobs import contribution, entry, spine_result

W, PORTS, POOL, JOBS = 64, 3, 8, 2
JOB_LIST = [inn.Job(7, (0, 2, 1), 2, slot_base=0, packet=32),
            inn.Job(9, (1, 0), 2, slot_base=4, codec="bfp8", packet=32)]


def config_writes(sw, top, jobs):
    """[(register, index, value)]: everything the switch needs, from the model's configuration."""
    m = top.regmap
    out = [("SWITCH_MAC_LO", 0, mac_int(sw.mac) & 0xFFFFFFFF), ("SWITCH_MAC_HI", 0, mac_int(sw.mac) >> 32),
           ("SWITCH_IP", 0, ip_int(sw.ip))]
    for p in range(PORTS):
        mac = mac_int(sw.port_macs[p])
        out += [("PORT_MAC_LO", p, mac & 0xFFFFFFFF), ("PORT_MAC_HI", p, mac >> 32),
                ("PORT_IP", p, ip_int(sw.port_ips[p]))]
    for k, j in enumerate(jobs):
        lo, hi = job_ports_values(j.ports)
        out += [("JOB_ID", k, j.job), ("JOB_SLOT_BASE", k, j.slot_base), ("JOB_PORTS_LO", k, lo),
                ("JOB_PORTS_HI", k, hi), ("JOB_UP", k, job_up_value(j.up_port, j.up_job, j.up_worker)),
                ("JOB_CONFIG", k, job_config_value(True, j.workers, j.window, j.dtype, j.codec, j.packet))]
    return [(m.offset(name, i), v) for name, i, v in out]


def model_of(jobs):
    sw = inn.SwitchModel(PORTS, slots=POOL, max_jobs=JOBS)
    for k, j in enumerate(jobs):
        sw.configure(k, j)
    return sw


def run_top(sw, jobs, frames):
    """Configure a SwitchTop through its registers for ``jobs`` (what ``sw`` holds), send ``frames`` one at a
    time: (the frames out after each, the registers read)."""
    top = SwitchTop(PORTS, W, engines=2, pool_slots=POOL, max_jobs=JOBS, max_packet=32)
    out = {p: [] for p in range(PORTS)}
    seen, regs = [], {}
    m = top.regmap

    async def bench(ctx):
        bus = top.s_axil
        regs["constants"] = [(await axil.read(ctx, bus, m.offset(n)))[0]
                             for n in ("ID", "VERSION", "CAPS", "POOL_SLOTS", "MAX_PACKET")]
        regs["outside"] = await axil.read(ctx, bus, m.span + 4)
        for addr, value in config_writes(sw, top, jobs):
            assert await axil.write(ctx, bus, addr, value) == RESP_OKAY
        regs["entries"] = [ctx.get(top.switch.cfg_jobs[k].as_value()) for k in range(JOBS)]
        # POOL_CLEAR of the first job's window: POOL_CLEARING reads 1 until it is done
        assert await axil.write(ctx, bus, m.offset("POOL_CLEAR"), 0 | 4 << 16) == RESP_OKAY
        regs["clearing"] = (await axil.read(ctx, bus, m.offset("POOL_CLEARING")))[0]
        while (await axil.read(ctx, bus, m.offset("POOL_CLEARING")))[0]:
            pass
        for port, f in frames:
            before = {p: len(v) for p, v in out.items()}
            await drive_marked(ctx, getattr(top, f"s_axis_{port}"), [f])
            await ctx.tick().repeat(150)
            seen.append(sorted((p, fr, e) for p, v in out.items() for fr, e in v[before[p]:]))

        async def counter(name, i=0):
            return (await axil.read(ctx, bus, m.offset(name, i)))[0]
        regs["drops"] = {r.name: await counter(f"DROP_{r.name.upper()}") for r in AggDrop}
        regs["jobs"] = [(await counter("JOB_ABSORBED", k), await counter("JOB_COMPLETED", k),
                         await counter("JOB_UNICAST", k)) for k in range(JOBS)]
        regs["updown"] = [(await counter("JOB_UP_SENT", k), await counter("JOB_DOWN_TAKEN", k)) for k in range(JOBS)]
        regs["job_drops"] = [{r.name: await counter(f"JOB_DROP_{r.name.upper()}", k) for r in AggDrop}
                             for k in range(JOBS)]
        regs["ports"] = [(await counter("PORT_FRAMES_IN", p), await counter("PORT_FRAMES_OUT", p))
                         for p in range(PORTS)]
        regs["parser"] = [sum([await counter(f"PORT_RX_DROP_{r.name.upper()}", p) for r in DropReason])
                          for p in range(PORTS)]
        regs["unknown_mac"] = await counter("UNKNOWN_MAC")

    def collector(p):
        async def run(ctx):
            await collect_marked(ctx, getattr(top, f"m_axis_{p}"), out[p])
        return run

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    for p in range(PORTS):
        sim.add_process(collector(p))
    sim.run()
    return seen, regs


def same_as_the_model(sw, jobs, want, seen, regs):
    assert regs["entries"] == [entry(j) for j in jobs] + [0] * (JOBS - len(jobs))
    for i, (w, g) in enumerate(zip(want, seen)):
        assert g == w, i
    assert regs["drops"] == sw.drops
    assert regs["jobs"] == [(c.absorbed, c.completed, c.unicast) for c in sw.job_counters[:JOBS]]
    assert regs["updown"] == [(c.up, c.down) for c in sw.job_counters[:JOBS]]
    assert regs["job_drops"] == [c.drops for c in sw.job_counters[:JOBS]]
    assert regs["ports"] == [(c.frames_in, c.frames_out) for c in sw.port_counters]


def test_registers_drive_the_switch(rng):
    sw = model_of(JOB_LIST)
    frames = []
    for g in range(3):
        for w in rng.permutation(3):
            frames.append(contribution(sw, JOB_LIST[0], int(w), g, rng.standard_normal(32)))
        for w in (0, 1):
            frames.append(contribution(sw, JOB_LIST[1], w, g, rng.standard_normal(32)))
    frames.append(frames[0])                                                        # a copy: answered again
    frames.append(contribution(sw, JOB_LIST[0], 0, 3, np.ones(32), job=99))       # unknown job
    frames.append(contribution(sw, JOB_LIST[0], 1, 3, np.ones(32), slot=6))       # slot out of range
    frames.append((2, proto.build_frame(bytes(40), dst_mac="02:00:00:00:99:99")))  # unknown MAC
    frames.append((2, proto.build_frame(bytes(40), dst_mac=sw.port_macs[0], src_mac=sw.port_macs[2])))  # forward
    want = [sorted(sw.receive(p, f)) for p, f in frames]
    seen, regs = run_top(sw, JOB_LIST, frames)
    same_as_the_model(sw, JOB_LIST, want, seen, regs)
    assert regs["constants"] == [SWITCH_ID_VALUE, VERSION_VALUE, caps_value(W, PORTS, JOBS, 2), POOL, 32]
    assert regs["outside"] == (0, RESP_SLVERR)
    assert regs["clearing"] == 1
    assert sum(len(w) for w in want) == 3 * 3 + 3 * 2 + 1 + 1      # multicasts, the stored result, the forward
    assert regs["drops"]["unknown_job"] == 1 and regs["drops"]["slot_range"] == 1
    assert regs["updown"] == [(0, 0)] * JOBS
    assert regs["parser"] == [0] * PORTS and regs["unknown_mac"] == 1


def test_registers_make_a_leaf(rng):
    """JOB_UP makes entry 1 a leaf's job (members on ports 1 and 0, the trunk on port 2, worker 3 of the
    spine's job 9): its complete rounds go up, a member's copy goes up again, the spine's results come down
    to both members and answer a copy after; JOB_UP_SENT and JOB_DOWN_TAKEN read the model's counters."""
    leaf = inn.Job(5, (1, 0), 2, slot_base=4, codec="bfp8", packet=32, up_port=2, up_job=9, up_worker=3)
    jobs = [inn.Job(7, (0, 1), 2, slot_base=0, packet=32), leaf]
    sw = model_of(jobs)
    frames = []
    for g in range(3):
        vals = {w: rng.standard_normal(32) for w in (0, 1)}
        for w in rng.permutation(2):
            frames.append(contribution(sw, leaf, int(w), g, vals[int(w)]))
        frames.append(contribution(sw, leaf, 0, g, vals[0], retransmit=True))      # no result yet: up again
        frames.append(spine_result(sw, leaf, g, rng.standard_normal(32), g))
        frames.append(contribution(sw, leaf, 1, g, vals[1], retransmit=True))      # answered from the store
        frames.append(contribution(sw, jobs[0], g % 2, g, rng.standard_normal(32)))  # the other job alongside
    want = [sorted(sw.receive(p, f)) for p, f in frames]
    assert sw.job_counters[1].up == 6 and sw.job_counters[1].down == 3
    seen, regs = run_top(sw, jobs, frames)
    same_as_the_model(sw, jobs, want, seen, regs)
    ups = [fr for w in seen for p, fr, _ in w if p == 2]
    assert len(ups) == 6 and regs["updown"][1] == (6, 3)
