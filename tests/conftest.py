import numpy as np
import pytest


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None, help="seed for the numeric tests (default: random, printed)")


@pytest.fixture
def rng(request):
    seed = request.config.getoption("--seed")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"seed={seed} (rerun with --seed {seed})")
    return np.random.default_rng(seed)
