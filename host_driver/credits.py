"""Receive credits: the constants and rules that the RTL (hdl/collective_engine.py, hdl/plan_calculator.py)
and the model share (docs/collective_engine.md, "Flow control").

A NIC never has to refuse a frame: each rank sends to the next only while the next has room for it. The
receiver's room is ``RX_FRAMES`` frame records and ``buffer_beats(W)`` payload beats. Every rank counts,
since reset, the frames and payload beats it has sent and the ones its engine has consumed; every
``ACK_EVERY`` consumed frames it sends the previous rank an **ack** (opcode 2, no payload) carrying its
limits: ``psn`` = frames consumed + RX_FRAMES, ``offset`` = beats consumed + advertised_beats(W) (both modulo
2**32). A sender starts from those limits with nothing consumed and sends a frame only while it stays
within both.

Credits stop overflow, but a ring whose ranks each run ``lag`` keys ahead of their successor needs about
(lag + 1)·(2N − 2) frames of room per receiver, or every rank ends up waiting for credits from the next:
:func:`max_lag` is the largest lag that fits, and the NIC runs ``min(LAG, max_lag)``.
"""

RX_BUFFER_BYTES = 128 * 1024     # payload buffer of the receive parser
RX_FRAMES = 128                  # frame records the receive side holds
ACK_EVERY = 8                    # consumed frames per ack
ACK_MARGIN = ACK_EVERY + 2       # frames of room the lag bound keeps for acks not yet sent or in flight


def buffer_beats(width: int) -> int:
    """Entries of the receive parser's payload buffer."""
    return RX_BUFFER_BYTES // (width // 8)


def advertised_beats(width: int) -> int:
    """Beats a receiver grants: its buffer less the parser's 4-beat guard (it asks for room for 4 more)."""
    return buffer_beats(width) - 4


def payload_beats(width: int, payload_bytes: int) -> int:
    """Beats a payload occupies in the receive buffer (it is realigned to byte 0 of a beat)."""
    return -(-payload_bytes // (width // 8))


def frames_that_fit(packet: int) -> int:
    """Frames of ``packet`` uncompressed 32-bit elements the receiver holds (any bus width: a payload of
    4·P bytes, P a multiple of 16, fills whole beats)."""
    return min(RX_FRAMES, RX_BUFFER_BYTES // (4 * packet))


def max_lag(nodes: int, packet: int) -> int:
    """The largest lag whose in-flight frames fit the receiver (0: not even lag 1 fits)."""
    if nodes < 2:
        return 255
    return max(0, min(255, max(0, frames_that_fit(packet) - ACK_MARGIN) // (2 * nodes - 2) - 1))


def effective_lag(lag: int, nodes: int, packet: int) -> int:
    """The lag the NIC runs with register LAG = ``lag``."""
    return min(lag, max_lag(nodes, packet))


def acks_sent(frames_consumed: int) -> int:
    """Acks a rank has sent after consuming this many frames since reset."""
    return frames_consumed // ACK_EVERY
