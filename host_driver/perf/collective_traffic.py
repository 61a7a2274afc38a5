"""Bytes each node moves in each dimension of a hierarchical network for one collective (LIBRA's rule, and
ainic's dimensions beside it).

A collective of S bytes per node over dimensions d = 0, 1, ... with group sizes n_d (dimensions a
communicator does not use are skipped), S_0 = S:

* ALLREDUCE: 2·S_d·(n_d − 1)/n_d in dimension d, then S_{d+1} = S_d/n_d (a reduce-scatter on the way up,
  an all-gather on the way down);
* REDUCESCATTER: S_d·(n_d − 1)/n_d, S_{d+1} = S_d/n_d;
* ALLGATHER: dimensions in reverse, S_d·(n_d − 1), then S_{d−1} = S_d·n_d;
* ALLTOALL: S·(n_d − 1)/n_d in every dimension.

Time in dimension d is bytes / bandwidth (bytes / (GB/s) = ns); a collective takes its slowest dimension.

ainic's dimensions change what crosses the wire, not the chunking:

* ``AinicRing``: the ring's bytes, compressed: × :func:`wire_factor` of the dimension's codec (the frame's
  bytes, headers and Ethernet overhead included, per byte of fp32 payload, at ``DEFAULT_P`` elements a packet);
* ``AinicSwitch``: in-network aggregation. Its ALLREDUCE sends each contribution once and receives each
  result once: S_d·(n_d + 1)/n_d the busier way (the reduce-scatter part sends S_d and receives S_d/n_d, the
  all-gather part the reverse, on full-duplex links), × the wire factor. Other collectives as ``AinicRing``.
"""

from contract.enums import Codec
from contract.protocol import DEFAULT_P, FRAME_HEADER_BYTES, WIRE_OVERHEAD_BYTES, codec_bytes


def wire_factor(codec, elements: int = DEFAULT_P) -> float:
    """Bytes on the wire per byte of fp32 payload, with a packet of ``elements`` elements."""
    return (codec_bytes(codec, elements) + FRAME_HEADER_BYTES + WIRE_OVERHEAD_BYTES) / (4 * elements)


def dimension_bytes(collective: str, size: float, groups, topologies=None, codecs=None) -> list:
    """Bytes per node in each dimension: ``groups`` the group size per dimension (-1 or 1: not used),
    ``topologies`` / ``codecs`` per dimension (default: LIBRA's plain dimensions)."""
    D = len(groups)
    topologies = topologies or ("Ring",) * D
    codecs = codecs or (Codec.none,) * D
    out = [0.0] * D
    if collective == "NONE" or size == 0:
        return out
    used = [d for d in range(D) if groups[d] > 1]
    chunk = float(size)
    if collective == "ALLREDUCE":
        for d in used:
            n = groups[d]
            out[d] = chunk * (n + 1) / n if topologies[d] == "AinicSwitch" else 2 * chunk * (n - 1) / n
            chunk /= n
    elif collective == "REDUCESCATTER":
        for d in used:
            n = groups[d]
            out[d] = chunk * (n - 1) / n
            chunk /= n
    elif collective == "ALLGATHER":
        for d in reversed(used):
            n = groups[d]
            out[d] = chunk * (n - 1)
            chunk *= n
    elif collective == "ALLTOALL":
        for d in used:
            n = groups[d]
            out[d] = chunk * (n - 1) / n
    else:
        raise ValueError(f"unknown collective {collective!r}")
    for d in used:
        if topologies[d] in ("AinicRing", "AinicSwitch"):
            out[d] *= wire_factor(codecs[d])
    return out


__all__ = ["dimension_bytes", "wire_factor"]
