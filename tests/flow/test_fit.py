"""The small NIC (contract.build.SMALL) at W = 64 fits the ECP5 it is placed on (LFE5UM5G-85F): its memories map
to no more 18 kbit block RAMs than the part has (``hdl.flow.synth.ecp5_memories``: Yosys' own memory mapping,
seconds; ``make report`` packs the whole build and says the same of its LUT4s). And the count is the part's
geometry: a memory of known shape maps to the blocks it must."""

import pytest

from hdl.flow.export import build_dir
from hdl.flow.synth import ecp5_memories
from hdl.flow.tops import export, module_name
from scripts.report import ECP5_85K

MEMORY = """
module mem(input clk, input we, input [{a}:0] wa, input [{a}:0] ra, input [{d}:0] wd, output reg [{d}:0] rd);
  reg [{d}:0] m [0:{depth}];
  always @(posedge clk) begin
    if (we) m[wa] <= wd;
    rd <= m[ra];
  end
endmodule
"""


@pytest.mark.parametrize("depth,bits,blocks", [(1024, 18, 1), (512, 36, 1), (2048, 73, 9), (16384, 64, 64)])
def test_a_memory_maps_to_the_blocks_its_shape_needs(tmp_path, depth, bits, blocks):
    src = tmp_path / "mem.v"
    src.write_text(MEMORY.format(a=depth.bit_length() - 2, d=bits - 1, depth=depth - 1))
    got = ecp5_memories(src, "mem", tmp_path / "work")
    assert got["bram"] == blocks, got


def test_the_small_nic_fits_its_part():
    small = ecp5_memories(export("nic_small", 64, fmt="rtlil"), module_name("nic_small", 64), build_dir() / "fit")
    assert small["bram"] <= ECP5_85K["bram"], \
        f"the small NIC at W = 64 needs {small['bram']} block RAMs, the LFE5UM5G-85F has {ECP5_85K['bram']}: " \
        f"{small['by_module']}"
    # its buffers are the ones the build sizes: the frame store at 16 KiB (9 blocks), the receive buffer 128 KiB
    assert small["by_module"][f"{module_name('nic_small', 64)}.core.client.store"] <= 9, small["by_module"]
