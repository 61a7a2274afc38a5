"""The saturating int32 adder lane against host_driver.models.numerics.add_i32, bit for bit."""

import numpy as np
import pytest

from hdl.arith.int32_adder import Int32SatAdderLane
from host_driver.models import numerics as nm
from tests.hdl.lanes import run_pipeline


@pytest.mark.parametrize("latency", [1, 4])
def test_int32_lane(rng, latency):
    a = rng.integers(-2**31, 2**31, 2000, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, 2000, dtype=np.int64).astype(np.int32)
    dut = Int32SatAdderLane(latency)
    got = run_pipeline(dut, [(dut.a, a.view(np.uint32)), (dut.b, b.view(np.uint32))],
                        {"sum": dut.sum, "ovf": dut.overflow}, latency)
    s, over = nm.add_i32(a, b)
    assert np.array_equal(got["sum"].astype(np.uint32), s.view(np.uint32))
    assert np.array_equal(got["ovf"].astype(bool), over) and over.any()
    with pytest.raises(ValueError, match="latency"):
        Int32SatAdderLane(0)
