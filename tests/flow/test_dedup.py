"""The export's module merge (hdl.flow.dedup): copies of one block become one module, blocks that differ stay
apart, and the merged Verilog is the same hardware as Amaranth's (Yosys proves it equivalent)."""

import subprocess

import pytest
from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hdl.flow.dedup import dedup
from hdl.flow.toolchain import require


class _Block(wiring.Component):
    """A FIFO (its ports are numbered names in the Verilog: ``\\port$123$0``) and an adder of ``bias``."""

    def __init__(self, bias: int):
        self.bias = bias
        super().__init__({"i": In(8), "i_valid": In(1), "o": Out(8), "o_valid": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.q = q = SyncFIFOBuffered(width=8, depth=4)
        m.d.comb += [q.w_data.eq(self.i + self.bias), q.w_en.eq(self.i_valid), q.r_en.eq(1),
                     self.o.eq(q.r_data), self.o_valid.eq(q.r_rdy)]
        return m


class _Top(wiring.Component):
    """Three copies of one block, and one that differs in a constant."""

    def __init__(self):
        super().__init__({"i": In(8), "i_valid": In(1), "o": Out(32), "o_valid": Out(4)})

    def elaborate(self, platform):
        m = Module()
        blocks = [_Block(3), _Block(3), _Block(5), _Block(3)]
        for k, b in enumerate(blocks):
            m.submodules[f"b{k}"] = b
            m.d.comb += [b.i.eq(self.i + k), b.i_valid.eq(self.i_valid),
                         self.o[8 * k:8 * k + 8].eq(b.o), self.o_valid[k].eq(b.o_valid)]
        return m


@pytest.fixture(scope="module")
def exported():
    text = verilog.convert(_Top(), name="top", emit_src=False)
    merged, removed = dedup(text)
    return text, merged, removed


def _modules(text: str) -> list:
    return [line.split()[1] for line in text.splitlines() if line.startswith("module ")]


def test_copies_become_one_module_and_a_different_block_stays(exported):
    text, merged, removed = exported
    before, after = _modules(text), _modules(merged)
    # b0, b1, b3 are the same (with their FIFOs); b2 adds another constant, but its FIFO is the same
    assert removed == 5, (before, after)
    assert len(after) == len(before) - 5
    assert {"\\top.b0", "\\top.b2"} <= set(after) and not {"\\top.b1", "\\top.b3"} & set(after)
    assert "\\top.b2.q" not in after and "\\top.b0.q" in after
    # every instantiation now names a module that exists
    kept = set(after)
    for line in merged.splitlines():
        if line.startswith("  \\top."):
            assert line.split()[0] in kept, line


def _equivalence(gold: str, gate: str, workdir):
    """Yosys' equivalence check of two Verilog texts of top module ``top`` (both flattened)."""
    (workdir / "gold.v").write_text(gold)
    (workdir / "gate.v").write_text(gate)
    prep = "hierarchy -top top; proc; memory; flatten; opt_clean"
    script = (f"read_verilog gold.v; {prep}; rename top gold; design -stash gold; "
              f"read_verilog gate.v; {prep}; rename top gate; design -stash gate; "
              "design -copy-from gold -as gold gold; design -copy-from gate -as gate gate; "
              "equiv_make gold gate equiv; hierarchy -top equiv; async2sync; equiv_simple -seq 4; equiv_induct; "
              "equiv_status -assert")
    return subprocess.run([require("yosys"), "-p", script], cwd=workdir, capture_output=True, text=True)


def test_merged_verilog_is_the_same_hardware(exported, tmp_path):
    text, merged, _ = exported
    res = _equivalence(text, merged, tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_a_wrong_merge_would_be_caught(exported, tmp_path):
    # the equivalence check above can fail: point b2's instance at b0's module (a merge of blocks that differ)
    text, merged, _ = exported
    wrong = merged.replace("  \\top.b2  b2 (", "  \\top.b0  b2 (")
    assert wrong != merged
    res = _equivalence(text, wrong, tmp_path)
    assert res.returncode != 0 and "unproven $equiv cells" in res.stderr, res.stdout[-3000:] + res.stderr[-3000:]


def test_a_file_without_modules_is_unchanged():
    assert dedup("// nothing\n") == ("// nothing\n", 0)
