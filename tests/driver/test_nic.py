"""The driver on the software model backend: the same scenario bodies the RTL tests run, plus the
driver's argument checks."""

import asyncio

import numpy as np
import pytest

from cocotb_tests.nic import scenarios as nic_scenarios
from contract import descriptors as ds
from contract.build import FULL, SMALL, NicBuild, from_caps
from contract.enums import Codec, Status
from contract.limits import MAX_RANKS, NIC_WIDTHS
from host_driver.driver.nic import Nic, Unsupported
from host_driver.models.nic_model import ModelBackend


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("width", sorted(NIC_WIDTHS))
def test_scenarios(width, rng):
    nic = Nic(ModelBackend(width), sq_entries=8, cq_entries=8)
    out = run(nic_scenarios.all_scenarios(nic, rng))
    assert len(out["copies"]) == 12 and len(out["bad"]) == len(nic_scenarios.bad_descriptor_cases(0)[0])


def started(width=512, **kw):
    nic = Nic(ModelBackend(width), **kw)
    run(nic.start())
    return nic


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"opcode": "scatter"}, ValueError, "unknown opcode 'scatter'"),
    ({"dtype": "fp64"}, ValueError, "unknown dtype 'fp64'"),
    ({"codec": "int8"}, ValueError, "unknown codec 'int8'"),
    ({"algorithm": "tree"}, ValueError, "unknown algorithm 'tree'"),
    ({"count": 0}, ValueError, r"count must be in 1 \.\. 67108864, got 0"),
    ({"count": 2.0}, TypeError, "count must be an int, got float"),
    ({"count": True}, TypeError, "count must be an int, got bool"),
    ({"src": 0x1002}, ValueError, "src 0x1002 is not a multiple of 4"),
    ({"dst": -4}, ValueError, "dst must be in 0 .. "),
    ({"dst": (1 << 24) - 8}, ValueError, "run past the end of host memory"),
    ({"dtype": "int32", "codec": "bf16"}, ValueError, "applies to fp32 only"),
    ({"collective": 1 << 16}, ValueError, "collective must be in 0 .. 65535"),
    ({"tag": -1}, ValueError, "tag must be in 0 .. "),
])
def test_submit_rejects_bad_arguments(kwargs, exc, match):
    nic = started()
    args = {"opcode": "copy", "src": 0x1000, "dst": 0x2000, "count": 16, **kwargs}
    opcode = args.pop("opcode")
    with pytest.raises(exc, match=match):
        run(nic.submit(opcode, **args))
    assert nic.outstanding == {} and run(nic.read_reg("SQ_TAIL")) == 0     # nothing reached the NIC


def test_constructor_and_start_checks():
    with pytest.raises(ValueError, match="sq_entries must be a power of two, got 12"):
        Nic(ModelBackend(), sq_entries=12)
    with pytest.raises(ValueError, match=r"cq_entries must be in 2 \.\. 32768, got 1"):
        Nic(ModelBackend(), cq_entries=1)
    nic = Nic(ModelBackend())
    with pytest.raises(ValueError, match="packet_elems must be a multiple of 16 at W = 512, got 100"):
        run(nic.start(packet_elems=100))
    with pytest.raises(ValueError, match=r"rank must be in 0 \.\. 3, got 4"):
        run(nic.start(rank=4, world_size=4))
    with pytest.raises(KeyError, match="no register 'NOPE'"):
        run(nic.read_reg("NOPE"))
    with pytest.raises(IndexError, match="PEER_IP has 64 entries, index 64 is out of range"):
        run(nic.write_reg("PEER_IP", 1, index=64))
    with pytest.raises(ValueError, match="never submitted"):
        run(nic.wait(3))
    with pytest.raises(MemoryError, match="host memory exhausted"):
        nic.alloc(1 << 24)


def test_ring_wraps_and_fills():
    """Two-entry rings, 40 descriptors in flight at most two at a time: indices, phases and tags line up."""
    nic = started(sq_entries=2, cq_entries=2)
    src, dst = nic.alloc(64), nic.alloc(64)
    run(nic.write(src, np.arange(16, dtype=np.uint32)))

    async def go():
        indices = [await nic.submit("copy", src=src, dst=dst, count=16, tag=i) for i in range(40)]
        return [await nic.wait(i) for i in indices]
    done = run(go())
    assert [c.tag for c in done] == list(range(40)) and all(c.ok for c in done)
    assert [c.phase for c in done] == [1 - (i // 2) % 2 for i in range(40)]
    assert run(nic.read_reg("SQ_HEAD")) == 40 == run(nic.read_reg("DESC_COMPLETED"))


def test_doorbell_beyond_ring_is_ignored_and_flagged():
    nic = started(sq_entries=4)
    run(nic.write_reg("SQ_DOORBELL", 5))
    assert run(nic.read_reg("SQ_TAIL")) == 0
    assert run(nic.read_reg("ERROR_STATUS")) == 1 << 3


def test_completion_round_trips():
    c = ds.Completion(status=3, opcode=1, phase=1, sq_index=9, collective=2, cycles=123, tag=1 << 60,
                      bytes_sent=1, bytes_received=2, packets_sent=3, packets_received=4, retransmissions=5,
                      host_bytes=6)
    assert ds.Completion.from_bytes(c.to_bytes()) == c
    with pytest.raises(ValueError, match="status=256 does not fit in 8 bits"):
        ds.pack(ds.COMPLETION_BITS, {"status": 256})


def test_model_registers_keep_their_documented_bits():
    """The model stores what the register map says (as the RTL register block does): a narrow rw register
    keeps its low bits only; CAPS is the build's value."""
    from contract import regmap as rm
    backend = ModelBackend(128)
    narrow = [r for r in rm.REGISTERS if r.access == "rw" and r.bits < 32 and r.name != "CONTROL"]
    assert {r.name for r in narrow} >= {"UDP_PORT", "JOB_ID", "LAG", "CQ_HEAD", "LOCAL_MAC_HI", "PEER_MAC_HI"}
    for r in narrow:
        run(backend.write_reg(r.offset, 0xFFFFFFFF))
        assert run(backend.read_reg(r.offset)) == r.mask == (1 << r.bits) - 1, r.name
    assert run(backend.read_reg(rm.offset("CAPS"))) == rm.caps_value(128) == 0x331F0610


@pytest.mark.parametrize("build", [FULL, SMALL, NicBuild("bare", frozenset({Codec.none}), switch=False, max_ranks=2)])
def test_a_build_does_what_its_caps_say(build, rng):
    """The model backend of each build: CAPS decodes to the build, its codecs run, the others are refused
    by the driver and completed ``unsupported`` by the NIC (cocotb_tests/nic/test_nic.py runs the same body on
    the small build's RTL)."""
    nic = Nic(ModelBackend(64, build=build), sq_entries=8, cq_entries=8)
    run(nic.start(packet_elems=64))
    width, announced = from_caps(nic.caps)
    assert width == 64 and nic.build.features == announced.features == build.features
    out = run(nic_scenarios.build_features(nic, rng))
    assert [c["status"] for c in out[:len(Codec)]] == [0 if c in build.codecs else Status.unsupported for c in Codec]
    if build.max_ranks == MAX_RANKS:
        return
    # a ring larger than the peer table: refused by the driver, the peers above the table not written
    big = build.max_ranks + 1
    run(nic.start(world_size=big, rank=0, peers=[(i + 1, i + 1) for i in range(big)]))
    src, dst = nic.alloc(256), nic.alloc(256)
    with pytest.raises(Unsupported, match=f"a ring allreduce of {big} ranks: this NIC's peer table holds "
                                          f"{build.max_ranks}"):
        run(nic.submit("allreduce", src=src, dst=dst, count=64))
    if not build.switch:
        with pytest.raises(Unsupported, match="algorithm switch: this NIC was built without it"):
            run(nic.submit("allreduce", src=src, dst=dst, count=64, algorithm="switch"))


@pytest.mark.parametrize("kwargs,match", [({"max_ranks": 3}, "max_ranks must be a power of two"),
                                          ({"frame_store_bytes": 3000}, "frame_store_bytes must be a power of two"),
                                          ({"frame_store_bytes": 512}, "frame_store_bytes must be a power of two")])
def test_a_build_refuses_a_bad_geometry(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NicBuild("bad", **kwargs)
    assert SMALL.frame_store_bytes == 16 * 1024 and FULL.frame_store_bytes == 128 * 1024
