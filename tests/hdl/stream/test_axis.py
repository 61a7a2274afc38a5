"""The AXI-Stream helpers: an unsupported data width is refused with a clear error; a contiguous tkeep's byte
count is its number of ones at every width."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from hdl.stream.axis import keep_count


@pytest.mark.parametrize("top", ["reduction_unit", "compressor", "decompressor"])
def test_bad_width_is_rejected(top):
    from hdl.flow.tops import TOPS
    with pytest.raises(ValueError, match="width must be one of"):
        TOPS[top].factory(96)


@pytest.mark.parametrize("nbytes", [1, 2, 3, 8, 16, 64, 128])
def test_keep_count_is_the_number_of_kept_bytes(nbytes):
    m = Module()
    keep = Signal(nbytes)
    count = keep_count(m, keep)
    counts = list(range(nbytes + 1))
    if nbytes > 16:                           # every count at these widths, and some twice
        counts += random.Random(nbytes).choices(counts, k=16)
    seen = []

    async def bench(ctx):
        for c in counts:
            ctx.set(keep, (1 << c) - 1)
            seen.append(ctx.get(count))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert seen == counts
