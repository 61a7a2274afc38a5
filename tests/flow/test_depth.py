"""`make depth` (scripts/depth.py, hdl.flow.synth.block_depth): a block mapped alone by Yosys' synth_xilinx, its
deepest register-to-register path found with the cells on it; deeper logic reads deeper, and the command fails
where a block is over the limit."""

import pytest

from hdl.flow.synth import block_depth
from scripts import depth

ADDERS = """
module chain(input clk, input [31:0] a, input [31:0] b, output reg [31:0] q);
  reg [31:0] ra, rb;
  always @(posedge clk) begin
    ra <= a; rb <= b;
    q <= {expr};
  end
endmodule
"""


@pytest.mark.parametrize("terms", [4])
def test_a_deeper_sum_reads_deeper_and_its_path_runs_between_registers(tmp_path, terms):
    one = tmp_path / "one.v"
    one.write_text(ADDERS.replace("{expr}", "ra + rb"))
    many = tmp_path / "many.v"
    # every term depends on the one before: a chain of additions, each waiting on the last
    many.write_text(ADDERS.replace("{expr}", " + ".join(["((ra ^ rb) * 0 + ra + rb)"] * terms)
                                   .replace("* 0", "") + " + (ra >> rb[4:0])"))
    shallow = block_depth(one, "chain", tmp_path / "work")
    deep = block_depth(many, "chain", tmp_path / "work")
    assert 1 <= shallow["levels"] < deep["levels"]
    assert shallow["start"] in ("ra", "rb") and deep["path"], (shallow, deep)
    assert sum(n for c, n in deep["cells"].items() if c.startswith("LUT")) > 0


def test_the_command_fails_where_a_block_is_over_the_limit(tmp_path, monkeypatch, capsys):
    src = tmp_path / "chain.v"
    src.write_text(ADDERS.replace("{expr}", "ra + rb + (ra >> rb[4:0])"))
    monkeypatch.setattr(depth, "modules", lambda spec: [("chain", src, "chain")])
    monkeypatch.setattr(depth, "build_dir", lambda: tmp_path)
    assert depth.main(["chain", "--limit", "1", "--jobs", "1"]) == 1
    printed = capsys.readouterr().out
    assert "(over 1)" in printed and "from r" in printed
    assert depth.main(["chain", "--limit", "99", "--jobs", "1"]) == 0


def test_an_unknown_block_is_named_with_the_known_ones():
    with pytest.raises(SystemExit):
        depth.main(["decompressor_w64:no_such_block"])
