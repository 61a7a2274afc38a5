"""`ainic replay`: a capture mixing valid frames and every malformed class gets check_frame's verdicts from
the RTL, and nothing after a bad frame is disturbed."""

import json

import numpy as np

from host_driver.cli import main
from host_driver.models import protocol as pr
from host_driver.models.pcap import read_pcap, write_pcap
from host_driver.models.vectors import malformed_frames


def test_replay_gives_reference_verdicts(tmp_path, capsys):
    x = np.arange(256, dtype=np.float32)
    frames = []
    for reason, (f, mac_error) in malformed_frames().items():
        if mac_error:
            continue                              # a pcap cannot carry the MAC's error flag
        frames += [f, pr.build_frame(x[:17].tobytes(), psn=len(frames))]
    pcap = write_pcap(tmp_path / "mix.pcap", frames)
    assert read_pcap(pcap) == frames
    out = tmp_path / "v.json"
    assert main(["replay", "--pcap", str(pcap), "--sim", "icarus", "--width", "64", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    want = [pr.check_frame(f).as_json() for f in frames]
    got = [{"verdict": r["verdict"], "reason": r["reason"]} for r in result["frames"]]
    assert got == want
    assert result["counters"]["accepted"] == sum(w["verdict"] == "accepted" for w in want)
    assert "dropped (ip_checksum)" in capsys.readouterr().out
