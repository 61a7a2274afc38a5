"""The driver on the software model backend: the same scenario bodies the RTL tests run, plus the
driver's argument checks."""

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cocotb_tests"))

import nic_scenarios  # noqa: E402
from host_driver import descriptors as ds  # noqa: E402
from host_driver.model import ModelBackend  # noqa: E402
from host_driver.nic import Nic  # noqa: E402


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("width", [64, 512])
def test_scenarios(width, rng):
    nic = Nic(ModelBackend(width), sq_entries=8, cq_entries=8)
    out = run(nic_scenarios.all_scenarios(nic, rng))
    assert len(out["copies"]) == 12 and len(out["bad"]) == len(nic_scenarios.bad_descriptor_cases(0)[0])
