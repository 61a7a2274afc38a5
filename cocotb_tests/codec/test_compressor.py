"""The compressor against host_driver.models.numerics, bit for bit, every codec, both simulators (the cocotb
tests are in codec_tests.py, shared with the decompressor); the same tests on its ECP5 gate-level netlist."""

import pytest

from cocotb_tests.codec.codec_tests import TESTS_OF
from cocotb_tests.gate_level import run_gate_level
from host_driver.sim.runner import run
from host_driver.sim.testbench import SIM_WIDTHS

TESTS = "cocotb_tests.codec.codec_tests"


@pytest.mark.parametrize("width", SIM_WIDTHS)
def test_compressor(sim, width):
    run(sim, "compressor", width, TESTS, env={"COCOTB_TEST_FILTER": TESTS_OF["compressor"]}, tag="compressor")


def test_scoreboard_catches_one_wrong_bit():
    """The regression can fail: with one expected bit flipped, the codec test must report a difference."""
    with pytest.raises(AssertionError, match="first difference"):
        run("icarus", "compressor", 64, TESTS, testcase="compress_bfp4", env={"AINIC_FLIP_EXPECTED_BIT": "1"}, tag="flip")


@pytest.mark.heavy(110)
def test_compressor_gate_level():
    """Every codec's packets through the synthesised netlist (synth_ecp5, W = 64), bit for bit."""
    run_gate_level("compressor", TESTS, env={"COCOTB_TEST_FILTER": r"\.compress_"})
