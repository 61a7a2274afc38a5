"""host_driver.sim.stage_trace: the run-length trace of dbg_stages, read and summarised (the RTL's side is
tests/cli/test_demo_rtl.py::test_demo_stage_trace_counts_every_beat)."""

import pytest

from contract import stages as st
from contract.enums import PhaseKind, StageState
from host_driver.sim import stage_trace


def value(**stages):
    """dbg_stages with the named stages at (state, kind), the others idle."""
    v = 0
    for name, (state, kind) in stages.items():
        i = st.NAMES.index(name)
        v |= (int(state) | int(kind) << 2) << (st.BITS * i)
    return v


def test_summary_counts_cycles_per_state_and_kind(tmp_path):
    busy, starved, blocked = StageState.busy, StageState.starved, StageState.blocked
    send, reduce = PhaseKind.send, PhaseKind.reduce
    f = tmp_path / "stages0.txt"
    f.write_text("junk of an earlier run\n")
    offset = f.stat().st_size
    with open(f, "a") as fh:
        fh.write(f"100 {value(read=(busy, send)):x}\n"                            # 100 .. 110: read busy
                 f"110 {value(read=(blocked, reduce), compress=(starved, reduce)):x}\n"  # 110 .. 140
                 f"140 {value(read=(busy, reduce), compress=(busy, reduce)):x}\n"   # 140 .. 200
                 "200 end\n")
    cycles, values, end = stage_trace.read(f, offset)
    assert list(cycles) == [100, 110, 140] and end == 200
    s = stage_trace.summarise(cycles, values, end, bins=4)
    assert s["cycles"] == 100
    read = s["stages"]["read"]
    assert read["cycles"] == {"idle": 0, "busy": 70, "starved": 0, "blocked": 30}
    assert read["by_kind"] == {"send": {"busy": 10}, "reduce": {"busy": 60, "blocked": 30}}
    assert read["busy_share"] == [0.4, 0.4, 1.0, 1.0]       # slices 100-125, 125-150, 150-175, 175-200
    comp = s["stages"]["compress"]
    assert comp["cycles"] == {"idle": 10, "busy": 60, "starved": 30, "blocked": 0}
    assert comp["by_kind"] == {"reduce": {"busy": 60, "starved": 30}}
    assert s["stages"]["write"]["cycles"]["idle"] == 100 and s["stages"]["write"]["by_kind"] == {}
    table = stage_trace.table(s)
    assert "| read | 70.0% | 0.0% | 30.0% | 0.0% | — | reduce (30%) |" in table
    assert "| compress | 60.0% | 30.0% | 0.0% | 10.0% | reduce (30%) | — |" in table


def test_a_trace_without_its_end_is_an_error(tmp_path):
    f = tmp_path / "stages0.txt"
    f.write_text("5 0\n9 20\n")
    with pytest.raises(ValueError, match="no complete stage trace"):
        stage_trace.read(f)
    f.write_text("")
    with pytest.raises(ValueError, match="no complete stage trace"):
        stage_trace.read(f)


def test_unpack_is_the_bit_layout():
    v = value(sequencer=(StageState.blocked, PhaseKind.last), write=(StageState.busy, PhaseKind.final))
    got = st.unpack(v)
    assert got[0] == (3, PhaseKind.last) and got[-1] == (1, PhaseKind.final)
    assert all(x == (0, 0) for x in got[1:-1])
    assert st.WIDTH == 40 and len(st.NAMES) == 8
