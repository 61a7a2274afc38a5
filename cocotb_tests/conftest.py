import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import selected_sims  # noqa: E402


def pytest_generate_tests(metafunc):
    if "sim" in metafunc.fixturenames:
        metafunc.parametrize("sim", selected_sims())
