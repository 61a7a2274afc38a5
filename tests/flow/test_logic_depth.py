"""Logic levels of a mapped Xilinx netlist (hdl/flow/logic_depth.py) on small hand-made netlists: a chain of LUTs
between registers, a carry chain counted once, an inverter absorbed, a LUT-RAM read, a loop refused."""

import pytest

from hdl.flow.logic_depth import critical_path, logic_levels

OUT = {"O": "output"}


def cell(kind, ins: dict, outs: dict) -> dict:
    """A cell of a Yosys JSON netlist: ``ins``/``outs`` map a port to its net bits."""
    return {"type": kind, "port_directions": {**{p: "input" for p in ins}, **{p: "output" for p in outs}},
            "connections": {**ins, **outs}}


def module(cells: dict, names: dict = None) -> dict:
    return {"cells": cells, "netnames": {n: {"bits": b} for n, b in (names or {}).items()}}


def test_luts_between_registers_count_each():
    cells = {"ff0": cell("FDRE", {"D": [1]}, {"Q": [2]}),
             **{f"lut{i}": cell("LUT6", {"I0": [2 + i]}, {"O": [3 + i]}) for i in range(5)},
             "ff1": cell("FDRE", {"D": [7]}, {"Q": [8]})}
    assert logic_levels(module(cells, {"sum": [7], "$tmp": [6]})) == {"levels": 5, "end": "sum"}


def test_the_critical_path_names_its_cells_from_the_register_it_starts_at():
    cells = {"ff0": cell("FDRE", {"D": [1]}, {"Q": [2]}),
             "short": cell("LUT2", {"I0": [2]}, {"O": [20]}),
             **{f"lut{i}": cell("LUT6", {"I0": [2 + i]}, {"O": [3 + i]}) for i in range(3)},
             "join": cell("LUT3", {"I0": [5], "I1": [20]}, {"O": [6]}),
             "ff1": cell("FDRE", {"D": [6]}, {"Q": [7]})}
    found = critical_path(module(cells, {"count": [2], "a": [3], "b": [4], "c": [5], "s": [20], "join": [6]}))
    assert found["levels"] == 4 and found["start"] == "count"
    assert found["path"] == [("LUT6", "a"), ("LUT6", "b"), ("LUT6", "c"), ("LUT3", "join")]


def test_a_carry_chain_counts_once_and_an_inverter_not_at_all():
    cells = {"ff": cell("FDRE", {"D": [1]}, {"Q": [2]}),
             "inv": cell("INV", {"I": [2]}, {"O": [3]}),
             "lut": cell("LUT2", {"I0": [3], "I1": [2]}, {"O": [4]}),
             "c0": cell("CARRY4", {"S": [4], "CI": [0]}, {"CO": [5], "O": [6]}),
             "c1": cell("CARRY4", {"S": [2], "CI": [5]}, {"CO": [7], "O": [8]}),
             "c2": cell("CARRY4", {"S": [2], "CI": [7]}, {"CO": [9], "O": [10]}),
             "out": cell("LUT1", {"I0": [10]}, {"O": [11]})}
    # inv (0) -> lut (1) -> c0 (2) -> c1, c2 along CI (2) -> out (3)
    assert logic_levels(module(cells))["levels"] == 3


def test_a_lut_ram_read_is_a_level_from_its_address_only():
    cells = {"a": cell("LUT3", {"I0": [1]}, {"O": [2]}),
             "d": cell("LUT3", {"I0": [1]}, {"O": [3]}),
             "d2": cell("LUT3", {"I0": [3]}, {"O": [4]}),
             "ram": cell("RAM32M", {"ADDRA": [2], "DIA": [4], "WE": [1]}, {"DOA": [5]}),
             "use": cell("LUT2", {"I0": [5]}, {"O": [6]})}
    assert logic_levels(module(cells))["levels"] == 3        # a -> ram -> use; the data input's two do not add


def test_a_combinational_loop_is_refused():
    cells = {"x": cell("LUT2", {"I0": [2]}, {"O": [1]}), "y": cell("LUT2", {"I0": [1]}, {"O": [2]})}
    with pytest.raises(ValueError, match="loop"):
        logic_levels(module(cells))
