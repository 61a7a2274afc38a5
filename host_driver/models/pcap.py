"""pcap files of raw Ethernet frames (no FCS): written from simulation, read for replay."""

import shutil
import subprocess
from pathlib import Path

from scapy.error import Scapy_Exception
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap


def write_pcap(path, frames, times=None) -> Path:
    """Write frames (bytes) to a pcap with Ethernet link type; ``times``: seconds per frame (optional)."""
    pkts = []
    for i, f in enumerate(frames):
        p = Ether(bytes(f))
        if times is not None:
            p.time = times[i]
        pkts.append(p)
    wrpcap(str(path), pkts, linktype=1)
    return Path(path)


def read_pcap(path) -> list[bytes]:
    """The frames of a pcap, as bytes."""
    try:
        with open(path, "rb") as fh:       # ours to close: scapy leaves a file it could not read open
            return [bytes(p) for p in rdpcap(fh)]
    except (OSError, EOFError, Scapy_Exception) as exc:     # missing, truncated, not a capture at all
        raise ValueError(f"cannot read pcap {path}: {exc}") from None


DISSECTOR = Path(__file__).resolve().parent / "ainic.lua"   # the Wireshark/tshark dissector


def tshark_fields(path, fields) -> list[list[str]]:
    """tshark's reading of a capture with the ainic dissector and IPv4 checksum validation: one row of
    ``fields`` per frame."""
    exe = shutil.which("tshark")
    if exe is None:
        raise RuntimeError("tshark is missing: `make setup` installs it")
    res = subprocess.run([exe, "-X", f"lua_script:{DISSECTOR}", "-o", "ip.check_checksum:TRUE", "-r", str(path),
                          "-T", "fields", *[a for f in fields for a in ("-e", f)]],
                         capture_output=True, text=True, check=True)
    return [line.split("\t") for line in res.stdout.rstrip("\n").split("\n")]
