"""The decompressor against host_driver.models.numerics, bit for bit, every codec, both simulators (the cocotb
tests are in codec_tests.py, shared with the compressor); the same tests on its ECP5 gate-level netlist (but the
exhaustive fp16/bf16 sweep, which the RTL runs)."""

import pytest

from cocotb_tests.codec.codec_tests import TESTS_OF
from cocotb_tests.gate_level import run_gate_level
from host_driver.sim.runner import run
from host_driver.sim.testbench import SIM_WIDTHS

TESTS = "cocotb_tests.codec.codec_tests"


@pytest.mark.parametrize("width", SIM_WIDTHS)
def test_decompressor(sim, width):
    run(sim, "decompressor", width, TESTS, env={"COCOTB_TEST_FILTER": TESTS_OF["decompressor"]}, tag="decompressor")


def test_scoreboard_catches_one_wrong_bit():
    """The regression can fail: with one expected bit flipped, the codec test must report a difference."""
    with pytest.raises(AssertionError, match="first difference"):
        run("icarus", "decompressor", 64, TESTS, testcase="decompress_fp16", env={"AINIC_FLIP_EXPECTED_BIT": "1"}, tag="flip")


@pytest.mark.heavy(150)
def test_decompressor_gate_level():
    """Every codec's packets, and the short bfp packets, through the synthesised netlist (synth_ecp5, W = 64)."""
    tests = r"\.decompress_(none|fp16|bf16|bfp8|bfp4)$|bfp_short"
    run_gate_level("decompressor", TESTS, env={"COCOTB_TEST_FILTER": tests})
