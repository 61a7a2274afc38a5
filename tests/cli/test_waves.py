"""``ainic demo --waves FILE`` records the whole RTL run on either simulator, says where, and the trace
opens: an FST reader finds the top's clock toggling every half cycle for the whole run. (The demo on
Icarus; on Verilator the runner's part of it, on a small top: a cluster's trace build costs minutes.)"""

import pytest
import pywellen

from host_driver.cli import main
from host_driver.models import protocol as pr
from host_driver.models.pcap import write_pcap
from host_driver.sim.runner import WAVES_FILE, run


def clock_toggles_every_half_cycle(wave, top: str, cycles: int) -> None:
    scope = next(s for s in wave.all_scopes() if s.name == top)          # (under $rootio on Verilator)
    clk = next(v for v in scope.vars() if v.name == "clk")
    changes = list(clk.tv)
    half = 2000                                             # ps: the 4 ns clock of the testbenches
    assert len(changes) > 2 * cycles and all(b[0] - a[0] == half for a, b in zip(changes, changes[1:]))
    assert {v for _, v in changes} == {0, 1}


@pytest.mark.heavy(40)
def test_demo_writes_a_waveform(tmp_path, capsys):
    """The demo's ``--waves`` on Icarus (the cluster bench, about 10 s to build); the same plumbing on
    Verilator is below, on a top that builds in seconds rather than a cluster's minutes."""
    sim = "icarus"
    out = tmp_path / "demo.fst"
    rc = main(["demo", "--sim", sim, "--nodes", "2", "--elements", "300", "--width", "64", "--waves", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed[-3000:]
    assert f"waveform (FST) written to {out}" in printed
    clock_toggles_every_half_cycle(pywellen.Waveform(str(out)), "ainic_cluster_n2_w64", 500)


def test_verilator_writes_a_waveform(tmp_path):
    """What ``--waves`` asks of the runner on Verilator (a ``--trace-fst`` build of its own, the trace the
    simulation writes in its run folder: ``WAVES_FILE``), on the receive parser replaying two frames."""
    pcap = tmp_path / "frames.pcap"
    write_pcap(pcap, [pr.build_frame(bytes(64)), pr.build_frame(bytes(256))])
    run_dir = run("verilator", "rx_parser", 64, "host_driver.sim.replay", tag="waves", waves=True,
                  env={"AINIC_REPLAY_PCAP": str(pcap), "AINIC_REPLAY_OUT": str(tmp_path / "replay.json")})
    assert (tmp_path / "replay.json").exists()
    clock_toggles_every_half_cycle(pywellen.Waveform(str(run_dir / WAVES_FILE["verilator"])), "ainic_rx_parser_w64", 20)
