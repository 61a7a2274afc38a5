"""The fp32 adder lane against host_driver.models.numerics.add_f32, bit for bit."""

import numpy as np

from hdl.arith.fp32_adder import Fp32AdderLane
from host_driver.models import numerics as nm
from host_driver.models.vectors import adder_edge_pairs, edge_f32_bits
from tests.hdl.lanes import diff, run_pipeline


def test_fp32_lane(rng):
    a0, b0 = adder_edge_pairs()
    a = np.concatenate([a0, edge_f32_bits(rng, 3000)])
    b = np.concatenate([b0, edge_f32_bits(rng, 3000)])
    dut = Fp32AdderLane()
    got = run_pipeline(dut, [(dut.a, a), (dut.b, b)], {"sum": dut.sum}, dut.LATENCY)["sum"]
    want = nm.add_f32(a, b).view(np.uint32)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, diff(a, b, got, want, bad=bad)
