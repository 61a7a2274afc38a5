"""The host interface (registers, command processor, DMA engine, codec loop) with the HDL host memory,
driven by the host driver: the same scenarios as the software model, compared with it record for record."""

import asyncio
import os

import cocotb
import numpy as np
import pytest

import nic_scenarios
from tb import rng, width
from host_driver.model import ModelBackend
from host_driver.nic import Nic
from host_driver.rtl import RtlBackend

ADDR_BITS = 24
MEMORY_MODES = {   # name -> HostMemory.configure arguments
    "ideal": {},
    "slow": {"latency": 40, "stall": 0.3, "seed": 7},
    "throttled": {"latency": 8, "rate": 51.2 * width() / 512 if "AINIC_WIDTH" in os.environ else 0, "stall": 0.1},
}


async def rtl_nic(dut, mode="ideal", **kw):
    backend = RtlBackend(dut, width(), ADDR_BITS)
    await backend.reset(**MEMORY_MODES[mode])
    return Nic(backend, **kw)


def model_nic(**kw):
    return Nic(ModelBackend(width(), ADDR_BITS), **kw)


async def same_on_model(scenario, salt, rtl_transcript, **kw):
    """Run the scenario on the software model with the same seed: the transcripts must be equal."""
    model = model_nic(**kw)
    got = await scenario(model, rng(salt))
    assert got == rtl_transcript, "RTL and model transcripts differ"


@cocotb.test()
async def smoke_copy(dut):
    nic = await rtl_nic(dut)
    await nic.start()
    x = np.arange(100, dtype=np.uint32) * 0x01010101
    src, dst = nic.alloc(400), nic.alloc(400)
    await nic.write(src, x)
    c = await nic.run("copy", src=src, dst=dst, count=100)
    assert np.array_equal(await nic.read(dst, 100, np.uint32), x)
    dut._log.info(f"completion {c}")
    assert nic.backend.memory.stats()["stat_violations"] == 0


@cocotb.test()
async def scenarios_against_model(dut):
    mode = os.environ.get("AINIC_MEMORY_MODE", "ideal")
    nic = await rtl_nic(dut, mode, sq_entries=8, cq_entries=8)
    transcript = await nic_scenarios.all_scenarios(nic, rng(1))
    assert nic.backend.memory.stats()["stat_violations"] == 0
    await same_on_model(nic_scenarios.all_scenarios, 1, transcript, sq_entries=8, cq_entries=8)


@pytest.mark.parametrize("width", [64, 512])
def test_host_interface(sim, width):
    from harness import run
    run(sim, "host_bench", width, "test_host_interface", )
