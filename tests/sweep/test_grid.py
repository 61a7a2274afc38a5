"""A sweep's grid: values from the command line and from files, the product, defaults, what is left out."""

import json

import pytest

from contract import collective
from host_driver.sweep import grid as gr


def test_values_from_text():
    assert gr.parse_values("nodes", "2,4, 8") == [2, 4, 8]
    assert gr.parse_values("codec", "all") == list(collective.ARGUMENTS["codec"][2])
    assert gr.parse_values("drop", "0,0.001") == [0.0, 0.001]
    assert gr.parse_values("leaves", "default,2") == [None, 2]
    assert gr.parse_values("nodes", "4,4") == [4]
    assert gr.parse_values("drop", [0, 1]) == [0.0, 1.0]          # a file's ints where floats go


@pytest.mark.parametrize("name,text,match", [
    ("nodes", "2,four", "nodes: 'four' is not an int"),
    ("codec", "bfp8,gzip", "codec must be one of .*got 'gzip'"),
    ("speed", "1", "unknown parameter 'speed'"),
    ("nodes", [True], "nodes: True is not an int"),
    ("drop", "0.1,x", "drop: 'x' is not a number"),
])
def test_bad_values_are_named(name, text, match):
    with pytest.raises(ValueError, match=match):
        gr.parse_values(name, text)


def test_points_are_the_product_with_defaults_and_the_impossible_left_out():
    g = {"algorithm": ["ring", "switch"], "op": ["allreduce", "reduce_scatter"], "nodes": [2, 32]}
    good, skipped = gr.points(g)
    # ring: 2 ops x 2 node counts; switch: allreduce at N = 2 only (32 > a switch job's workers)
    assert [(p["algorithm"], p["op"], p["nodes"]) for p in good] == [
        ("ring", "allreduce", 2), ("ring", "allreduce", 32), ("ring", "reduce_scatter", 2),
        ("ring", "reduce_scatter", 32), ("switch", "allreduce", 2)]
    assert len(skipped) == 3 and all("switch" == p["algorithm"] for p, _ in skipped)
    assert {p["elements"] for p in good} == {collective.ARGUMENTS["elements"][1]}
    assert all(set(p) == set(gr.PARAMS) for p in good)


def test_run_parameters_are_checked_too():
    _, skipped = gr.points({"drop": [1.5]})
    assert "drop must be a probability" in skipped[0][1]
    _, skipped = gr.points({"algorithm": ["ring"], "window": [64]})
    assert "window and retransmit_timeout are the switch's" in skipped[0][1]


def test_a_key_is_the_whole_point_in_any_order():
    p = gr.points({"nodes": [4]})[0][0]
    assert gr.key(p) == gr.key(dict(reversed(list(p.items()))))
    assert gr.key(p) != gr.key(dict(p, seed=1))
    assert json.loads(gr.key(p)) == p


@pytest.mark.parametrize("suffix,text", [
    (".toml", '[grid]\nnodes = [2, 4]\ncodec = "bfp8"\nlink-gbps = [40, 80]\n'),
    (".yaml", "nodes: [2, 4]\ncodec: bfp8\nlink_gbps: [40, 80]\n"),
    (".json", '{"nodes": [2, 4], "codec": "bfp8", "link_gbps": [40, 80]}'),
])
def test_grid_files(tmp_path, suffix, text):
    f = tmp_path / ("g" + suffix)
    f.write_text(text)
    assert gr.load(f) == {"nodes": [2, 4], "codec": ["bfp8"], "link_gbps": [40.0, 80.0]}


def test_bad_grid_files(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        gr.load(tmp_path / "missing.toml")
    (tmp_path / "g.txt").write_text("nodes = 2")
    with pytest.raises(ValueError, match="a grid file is .toml"):
        gr.load(tmp_path / "g.txt")
    (tmp_path / "g.toml").write_text("nodes = [2,")
    with pytest.raises(ValueError, match="g.toml"):
        gr.load(tmp_path / "g.toml")
    (tmp_path / "g.json").write_text("[2, 4]")
    with pytest.raises(ValueError, match="expected a table"):
        gr.load(tmp_path / "g.json")
    (tmp_path / "h.json").write_text('{"nodez": 2}')
    with pytest.raises(ValueError, match="unknown parameter 'nodez'"):
        gr.load(tmp_path / "h.json")
