"""``ainic demo --algorithm switch`` on the RTL: the in-network all-reduce through the simulated aggregation
switch, with faults on every link, ends bit-exact and its table counts what the links did. (It shares the
Verilator build of the 8-NIC switch bench with cocotb_tests/sim/test_switch_cluster.py.)"""

import json

import pytest

from host_driver.cli import main


@pytest.mark.heavy(60)
def test_demo_switch_on_verilator_with_faults(tmp_path, capsys):
    out = tmp_path / "s.json"
    rc = main(["demo", "--algorithm", "switch", "--sim", "verilator", "--width", "64", "--nodes", "8",
               "--elements", "2000", "--packet", "64", "--window", "4", "--drop", "0.03", "--dup", "0.02",
               "--corrupt", "0.02", "--link-latency", "40", "--retransmit-timeout", "2048", "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed[-3000:]
    assert "bit-exact with golden model        yes" in printed and "identical on every rank            yes" in printed
    d = json.loads(out.read_text())
    fc = d["fault_counters"]
    # every link counts what entered it, as the model's links do, and the table sums them
    assert [c["frames"] for c in fc["up"]] == d["frames_per_link"]
    assert [c["frames"] for c in fc["down"]] == d["down_frames_per_link"]
    assert set(fc["up"][0]) == {"frames", "bytes", "dropped", "duplicated", "corrupted"}
    hits = {k: sum(c[k] for c in fc["up"] + fc["down"]) for k in ("frames", "dropped", "duplicated", "corrupted")}
    assert all(hits[k] > 0 for k in ("dropped", "duplicated", "corrupted")), hits
    assert (f"{hits['dropped']} / {hits['duplicated']} / {hits['corrupted']} of {hits['frames']:,}") in printed
    assert sum(d["retransmitted_per_rank"]) > 0
    assert "(faults: resends depend on timing)" in printed          # not a mismatch


@pytest.mark.heavy(40)
def test_demo_switch_dead_link_says_timeout(capsys):
    """Every frame lost: each rank's collective ends in timeout after the deadline, and the demo says so
    in one line (no simulator traceback) and exits 1."""
    rc = main(["demo", "--algorithm", "switch", "--sim", "verilator", "--width", "64", "--nodes", "8",
               "--elements", "300", "--packet", "64", "--drop", "1", "--deadline", "5000",
               "--retransmit-timeout", "1000"])
    err = capsys.readouterr().err
    assert rc == 1, err[-3000:]
    assert "ranks [0, 1, 2, 3, 4, 5, 6, 7] ended with ['timeout'" in err and "Traceback" not in err, err[-3000:]


@pytest.mark.heavy(60)
def test_demo_ring_on_verilator_with_faults(tmp_path, capsys):
    """The ring over links that drop, duplicate and corrupt frames (contract/link.py): bit-exact, and the
    table counts what the links did and what the NICs sent again. (Through the 8-NIC switch bench that
    cocotb_tests/sim/test_cluster.py and test_switch_cluster.py build: ``--fabric switch``.)"""
    out = tmp_path / "r.json"
    rc = main(["demo", "--sim", "verilator", "--fabric", "switch", "--width", "64", "--nodes", "8",
               "--elements", "3000", "--packet", "64",
               "--drop", "0.03", "--dup", "0.02", "--corrupt", "0.02", "--link-latency", "40",
               "--retransmit-timeout", "2048", "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed[-3000:]
    assert "bit-exact with golden model        yes" in printed and "identical on every rank            yes" in printed
    d = json.loads(out.read_text())
    hits = {k: sum(c[k] for c in d["fault_counters"]["up"] + d["fault_counters"]["down"])
            for k in ("dropped", "duplicated", "corrupted")}
    assert all(hits.values()), hits
    assert f"{hits['dropped']} / {hits['duplicated']} / {hits['corrupted']}" in printed
    assert sum(d["retransmitted_per_rank"]) > 0 and sum(d["duplicates_dropped_per_rank"]) > 0
    assert sum(d["corrupted_dropped_per_rank"]) > 0
    assert "retransmitted per rank" in printed and "(faults: resends depend on timing)" in printed


@pytest.mark.heavy(40)
def test_demo_ring_dead_rank_says_timeout_then_recovers(capsys):
    """A rank whose links drop everything: every rank ends with status timeout after the deadline and the
    demo names what each waited for, in a few lines, exit 1; after the links are reset the collective
    runs again and is bit-exact. (On the 8-NIC switch bench, as above.)"""
    rc = main(["demo", "--sim", "verilator", "--fabric", "switch", "--width", "64", "--nodes", "8",
               "--elements", "1000", "--packet", "64", "--dead-rank", "2", "--deadline", "20000",
               "--link-latency", "40"])
    err = capsys.readouterr().err
    assert rc == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    # all eight time out, each saying what it waited for; rank 3 for rank 2's frames
    assert "rank 3 timeout (waiting for a frame from rank 2" in err, err
    assert err.count(" timeout (waiting for ") == 8, err
    assert "after the link reset is bit-exact with the golden model on every rank" in err, err


def traced_demo(tmp_path, capsys, *how, n, L, P, W, codec):
    """``ainic demo ... --stage-trace`` on Verilator: (what it printed, its --json)."""
    out = tmp_path / "t.json"
    rc = main(["demo", *how, "--sim", "verilator", "--width", str(W), "--nodes", str(n), "--elements", str(L),
               "--packet", str(P), "--codec", codec, "--stage-trace", "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed[-3000:]
    return printed, json.loads(out.read_text())


@pytest.mark.heavy(40)
def test_demo_stage_trace_counts_every_beat(tmp_path, capsys):
    """``--stage-trace`` records every NIC's dbg_stages (contract/stages.py): each stage's busy cycles are
    exactly the beats it had to move, per rank and per phase kind, so a stage that were mislabelled, or a
    state that were counted in the wrong cycles, would show here. (The 8-NIC switch bench, as above.)"""
    from host_driver.models import allreduce as ar
    from host_driver.models import numerics as nm
    n, L, P, W, codec = 8, 3000, 64, 64, "bfp8"
    printed, d = traced_demo(tmp_path, capsys, "--fabric", "switch", n=n, L=L, P=P, W=W, codec=codec)
    assert "where rank 0's cycles went" in printed and "| read |" in printed
    B = W // 8
    plan, sends = ar.ring_sends(n, L, P)
    datapath = ar.datapath_bound_cycles(n, L, W, P)
    assert d["datapath_bound_cycles"] == datapath
    assert d["binding_efficiency"] == pytest.approx(max(d["bound_cycles"], datapath) / d["cycles"])
    beats = lambda count: -(-nm.codec_bytes(codec, count) // B)        # noqa: E731
    own_beats = lambda c: sum(-(-4 * min(P, plan.chunk(c).stop - o) // B)  # noqa: E731
                              for o in range(plan.chunk(c).start, plan.chunk(c).stop, P))
    assert len(d["stage_trace"]) == n
    for r, s in enumerate(d["stage_trace"]):
        busy = {name: v["cycles"]["busy"] for name, v in s["stages"].items()}
        assert sum(s["stages"]["read"]["cycles"].values()) == s["cycles"] >= d["nic_cycles"][r]
        assert busy["read"] == busy["compress"] == busy["write"] == datapath, (r, busy)
        assert busy["transmit"] == sum(beats(c) for _, src, _, c in sends if src == r)
        assert busy["receive"] == sum(beats(c) for _, src, _, c in sends if src == (r - 1) % n)
        # the sequencer: one item a cycle it hands out, phase p's are the packets of chunk r - p
        assert busy["sequencer"] == sum(plan.packets((r - p) % n) for p in range(2 * n - 1))
        read = s["stages"]["read"]["by_kind"]
        assert read["send"]["busy"] == own_beats(r)                     # phase 0: chunk r
        assert read["final"]["busy"] == own_beats((r + 1) % n)          # phase N-1: chunk r - (N-1)
        assert set(s["stages"]["write"]["by_kind"]) == {"final", "forward", "last"}
        assert len(s["stages"]["write"]["busy_share"]) == 20


@pytest.mark.heavy(40)
def test_demo_switch_stage_trace_counts_every_beat(tmp_path, capsys):
    """``--stage-trace`` with ``--algorithm switch`` records the switch client's stages (contract/stages.py,
    SWITCH_STAGES): each stage's busy cycles are exactly the beats (or commands, or records) it had to move,
    per rank, and the kinds say first sends and taken results (no loss: nothing sent again or dropped)."""
    from host_driver.models import in_network as inn
    from host_driver.models import numerics as nm
    n, L, P, W, codec = 8, 3000, 64, 64, "bfp8"
    printed, d = traced_demo(tmp_path, capsys, "--algorithm", "switch", n=n, L=L, P=P, W=W, codec=codec)
    assert "where rank 0's cycles went (docs/in_network.md" in printed and "| issue |" in printed
    B = W // 8
    counts = [p.count for p in inn.packets(L, P, 32)]
    raw = sum(-(-4 * c // B) for c in counts)                       # fp32 beats of every packet
    wire = sum(-(-nm.codec_bytes(codec, c) // B) for c in counts)   # encoded beats
    assert len(d["stage_trace"]) == n
    for r, s in enumerate(d["stage_trace"]):
        stages = s["stages"]
        busy = {name: v["cycles"]["busy"] for name, v in stages.items()}
        assert list(stages) == ["issue", "read", "transmit", "header", "receive", "result", "write"]
        assert sum(stages["issue"]["cycles"].values()) == s["cycles"] >= d["nic_cycles"][r]
        assert busy == {"issue": len(counts), "read": raw, "transmit": wire, "header": len(counts),
                        "receive": len(counts), "result": wire, "write": raw}, (r, busy)
        assert set(stages["issue"]["by_kind"]) == set(stages["receive"]["by_kind"]) == {"new"}
        assert stages["header"]["cycles"]["starved"] == 0
