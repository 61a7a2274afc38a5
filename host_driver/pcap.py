"""pcap files of raw Ethernet frames (no FCS): written from simulation, read for replay."""

from pathlib import Path

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
        return [bytes(p) for p in rdpcap(str(path))]
    except (OSError, EOFError) as exc:
        raise ValueError(f"cannot read pcap {path}: {exc}") from exc
