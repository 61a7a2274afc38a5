"""The command processor's descriptor checks (``check_descriptor``) equal the reference
``contract.descriptors.check`` on every status and on random descriptors, registers included. (Running
descriptors end to end, with the host memory, is cocotb_tests/nic/test_nic.py.)"""

import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from contract import descriptors as ds
from contract.build import FULL, SMALL, NicBuild
from contract.enums import Codec, Opcode, Status
from contract.limits import MAX_COUNT
from hdl.nic.command_processor import Descriptor, RingConfig, check_descriptor


def pick(rng, values):
    return values[int(rng.integers(0, len(values)))]     # (rng.choice would round 2**64 - 8 through float)


GOOD = {"opcode": 1, "dtype": 0, "codec": 0, "algorithm": 0, "count": 40, "src": 0x1000, "dst": 0x2000}
#: a build with the least in it: codec none, no switch client, 2 ranks
BARE = NicBuild("bare", frozenset({Codec.none}), switch=False, max_ranks=2)


def cases(rng):
    """Descriptors near every check's edge, then random field soup."""
    good = GOOD
    regs = {"world_size": 4, "rank": 1, "packet_elems": 256}
    edge = [({}, {}), ({"opcode": 0}, {}), ({"opcode": 5}, {}), ({"dtype": 2}, {}), ({"codec": 5}, {}),
            ({"dtype": 1, "codec": 1}, {}), ({"algorithm": 2}, {}), ({"algorithm": 1}, {}),
            ({"algorithm": 1, "opcode": Opcode.reduce_scatter}, {}), ({"algorithm": 1}, {"world_size": 17}), ({"count": 0}, {}),
            ({"count": MAX_COUNT}, {}), ({"count": MAX_COUNT + 1}, {}), ({"src": 0x1002}, {}),
            ({"dst": (1 << 64) - 4, "count": 1}, {}), ({"dst": (1 << 64) - 4, "count": 2}, {}),
            ({"opcode": Opcode.allreduce}, {"world_size": 0}), ({"opcode": Opcode.allreduce}, {"world_size": 65}),
            ({"opcode": Opcode.allreduce}, {"world_size": 8, "rank": 0}),
            ({"opcode": Opcode.allreduce}, {"world_size": 9, "rank": 0}), ({"codec": 4}, {}), ({"codec": 2}, {}),
            ({"opcode": Opcode.allgather}, {"rank": 4}), ({"codec": 2}, {"packet_elems": 100}),
            ({"opcode": Opcode.allreduce}, {"packet_elems": 48}),
            ({"opcode": Opcode.reduce_scatter}, {"packet_elems": 2048}), ({"flags": 1}, {}),
            ({"reserved0": 7}, {}), ({"reserved1": 1 << 100}, {})]
    for fields, r in edge:
        yield {**good, **fields}, {**regs, **r}
    for _ in range(400):
        d = {"opcode": int(rng.integers(0, 7)), "dtype": int(rng.integers(0, 3)), "codec": int(rng.integers(0, 7)),
             "algorithm": int(rng.integers(0, 3)), "count": pick(rng, [0, 1, 100, MAX_COUNT, MAX_COUNT + 1]),
             "src": pick(rng, [0, 2, 0x1000, (1 << 64) - 8]), "dst": pick(rng, [0, 4, 0x2000]),
             "flags": int(rng.random() < 0.1)}
        r = {"world_size": int(rng.choice([0, 1, 2, 3, 8, 9, 64, 65])), "rank": int(rng.choice([0, 1, 63])),
             "packet_elems": int(rng.choice([8, 16, 48, 100, 256, 1024, 1040]))}
        yield d, r


@pytest.mark.parametrize("width,build", [(512, FULL), (1024, FULL), (64, SMALL), (64, BARE)])
def test_checks_equal_the_reference(rng, width, build):
    """Every build's checks: what it left out completes ``unsupported``, a ring larger than its peer table
    ``bad_world_size``."""
    m = Module()
    desc, cfg = Signal(Descriptor), Signal(RingConfig)
    status = check_descriptor(m, desc, cfg, width, build)
    todo = list(cases(rng))
    seen = set()

    async def bench(ctx):
        for fields, regs in todo:
            raw = ds.unpack(ds.DESCRIPTOR_BITS, ds.pack(ds.DESCRIPTOR_BITS, fields))
            for name, value in raw.items():
                ctx.set(getattr(desc, name), value)
            for name, value in regs.items():
                ctx.set(getattr(cfg, name), value)
            want = ds.check(raw, regs["world_size"], regs["rank"], regs["packet_elems"], width, build)
            got = ctx.get(status)
            assert got == want, f"{fields} {regs}: RTL {got}, reference {want}"
            seen.add(want)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    checks = {s for s in Status if 1 <= s <= Status.bad_reserved}
    assert checks <= seen | {Status.ok}, f"statuses never produced: {checks - seen}"
    if build is not FULL:       # the build's own refusals were reached (and agreed on)
        refused = [ds.check({**GOOD, "codec": c}, 2, 0, 256, width, build) for c in Codec if c not in build.codecs]
        assert refused and set(refused) == {Status.unsupported}
        assert ds.check({**GOOD, "opcode": Opcode.allreduce}, build.max_ranks + 1, 0, 256, width, build) \
            == Status.bad_world_size
        assert ds.check({**GOOD, "opcode": Opcode.allreduce}, build.max_ranks, 0, 256, width, build) == 0
        if not build.switch:
            assert ds.check({**GOOD, "opcode": Opcode.allreduce, "algorithm": 1}, 2, 0, 256, width, build) \
                == Status.unsupported
