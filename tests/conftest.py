import os

import numpy as np
import pytest

# Verilator models compile at -O1 in the regression (their run-once code at -O0): the C++ of a NIC costs
# minutes at -Os, and -O0 simulates the clusters 4x slower (host_driver/sim/runner.py).
# Demo and bench keep the default.
os.environ.setdefault("AINIC_SIM_CXX_OPT", "-O1")


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None, help="seed for the numeric tests (default: random, printed)")


@pytest.fixture
def rng(request):
    seed = request.config.getoption("--seed")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"seed={seed} (rerun with --seed {seed})")
    return np.random.default_rng(seed)


def pytest_collection_modifyitems(config, items):
    """Items marked ``heavy(seconds)`` run first, longest first, so that on two workers they overlap the many
    short ones instead of starting last and stretching the wall time."""
    def cost(item):
        mark = item.get_closest_marker("heavy")
        return -(mark.args[0] if mark and mark.args else 60 if mark else 0)
    items.sort(key=cost)
