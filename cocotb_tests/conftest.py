import os

from host_driver.sim.runner import selected_sims

# readable `assert` failures in the simulator, for the test modules only (host_driver/sim/runner.py)
os.environ.setdefault("COCOTB_REWRITE_ASSERTION_FILES", "test_*.py bench.py scenarios.py codec_tests.py")


def pytest_generate_tests(metafunc):
    if "sim" in metafunc.fixturenames:
        metafunc.parametrize("sim", selected_sims())


from tests.conftest import pytest_collection_modifyitems  # noqa: E402,F401  heavy items first
