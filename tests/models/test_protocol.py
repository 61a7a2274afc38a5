"""The wire protocol's reference codec and validator, and the Wireshark dissector, on real frames."""

import numpy as np
import pytest
from scapy.layers.l2 import Ether

from contract.enums import Codec, FrameFlag, names
from contract.protocol import MTU_FRAME_BYTES
from host_driver.models import numerics as nm
from host_driver.models import protocol as pr
from host_driver.models.pcap import tshark_fields, write_pcap
from host_driver.models.vectors import malformed_frames


def frame(n=256, codec="none", **kw):
    x = np.arange(n, dtype=np.float32)
    return pr.build_frame(nm.compress(x, codec), codec=codec, count=n, **kw)


@pytest.mark.parametrize("codec", names(Codec))
def test_built_frames_are_accepted_and_round_trip(codec):
    f = frame(100, codec, chunk=5, offset=1234, psn=99, flags=FrameFlag.last_of_chunk, job=7, slot=3)
    v = pr.check_frame(f)
    assert v.accepted, v.reason
    h = v.header
    assert (h["count"], h["chunk"], h["offset"], h["psn"], h["job"], h["slot"]) == (100, 5, 1234, 99, 7, 3)
    assert h["codec"] == Codec[codec]
    pkt = Ether(f)
    assert bytes(pkt[pr.Ainic].payload) == nm.compress(np.arange(100, dtype=np.float32), codec)
    assert len(f) <= MTU_FRAME_BYTES


def test_every_drop_reason_is_provoked():
    """Every reason has a frame that provokes it: the malformed ones, and the ring link's sequence check
    (a data frame against the psn expected next, or while the link is held in reset)."""
    seen = {}
    for reason, (f, mac_error) in malformed_frames().items():
        seen[reason] = pr.check_frame(f, mac_error).reason
    for psn, down, reason in ((4, True, "link_down"), (3, False, "duplicate"), (6, False, "out_of_order")):
        seen[reason] = pr.check_frame(frame(16, "none", psn=psn), expect_psn=5 - (psn == 4), link_down=down).reason
    assert pr.check_frame(frame(16, "none", psn=5), expect_psn=5).accepted
    assert pr.check_frame(frame(16, "none", psn=0, opcode=5), expect_psn=5).accepted    # not a ring frame
    assert seen == {r: r for r in pr.DROP_REASONS}


def test_fuzzed_frames_never_raise(rng):
    good = frame(64, "bfp8")
    for _ in range(3000):
        f = bytearray(good)
        if rng.random() < 0.5:
            f = f[:int(rng.integers(0, len(f)))]
        for _ in range(int(rng.integers(0, 4))):
            if f:
                f[int(rng.integers(0, len(f)))] ^= 1 << int(rng.integers(0, 8))
        v = pr.check_frame(bytes(f))
        assert v.accepted or v.reason in pr.DROP_REASONS
        if len(f) < len(good):
            assert not v.accepted, "a truncated frame passed"      # the IPv4 total length catches it
        if v.accepted and bytes(f[:42 + 20]) == good[:42 + 20]:
            assert v.header["count"] == 64


def test_tshark_dissects_every_field(tmp_path):
    frames = [frame(256, "none", chunk=3, psn=7, flags=3, worker=2, slot=9), frame(37, "bfp4", opcode=1)]
    pcap = write_pcap(tmp_path / "a.pcap", frames)
    fields = ["ainic.version", "ainic.opcode", "ainic.codec", "ainic.count", "ainic.chunk", "ainic.psn",
              "ainic.flags.last", "ainic.worker", "ainic.slot", "ip.checksum.status", "_ws.malformed"]
    rows = tshark_fields(pcap, fields)
    assert rows[0] == ["1", "0", "0", "256", "3", "7", "1", "2", "9", "1", ""]
    assert rows[1] == ["1", "1", "4", "37", "0", "0", "0", "0", "0", "1", ""]
