"""The AXI-Stream helpers: an unsupported data width is refused with a clear error."""

import pytest


@pytest.mark.parametrize("top", ["reduction_unit", "compressor", "decompressor"])
def test_bad_width_is_rejected(top):
    from hdl.flow.tops import TOPS
    with pytest.raises(ValueError, match="width must be one of"):
        TOPS[top].factory(96)
