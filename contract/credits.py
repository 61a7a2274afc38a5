"""Receive credits: the constants and rules that the RTL (hdl/engine/collective_engine.py, hdl/engine/plan_calculator.py)
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

from dataclasses import dataclass


@dataclass(frozen=True)
class Credits:
    """One receive-side geometry: the build's constants (``DEFAULT``; a test build uses ``TIGHT``)."""
    rx_frames: int = 128                 # frame records the receive side holds
    rx_buffer_bytes: int = 128 * 1024    # payload buffer of the receive parser
    ack_every: int = 8                   # consumed frames per ack

    @property
    def ack_margin(self) -> int:
        """Frames of room the lag bound keeps for acks not yet sent or in flight."""
        return self.ack_every + 2

    def buffer_beats(self, width: int) -> int:
        """Payload beats the receiver grants at bus width ``width`` (whole beats of its buffer)."""
        return self.rx_buffer_bytes // (width // 8)

    def advertised_beats(self, width: int) -> int:
        """Beats a receiver grants: its buffer less the parser's 4-beat guard (it asks for room for 4 more)."""
        return self.buffer_beats(width) - 4

    def frames_that_fit(self, packet: int) -> int:
        """Frames of ``packet`` uncompressed 32-bit elements the receiver holds (any bus width: a payload
        of 4·P bytes, P a multiple of ``protocol.packet_quantum(W)``, fills whole beats)."""
        return min(self.rx_frames, self.rx_buffer_bytes // (4 * packet))

    def max_lag(self, nodes: int, packet: int) -> int:
        """The largest lag whose in-flight frames fit the receiver (0: not even lag 1 fits)."""
        if nodes < 2:
            return 255
        return max(0, min(255, max(0, self.frames_that_fit(packet) - self.ack_margin) // (2 * nodes - 2) - 1))

    def effective_lag(self, lag: int, nodes: int, packet: int) -> int:
        """The lag the NIC runs with register LAG = ``lag``."""
        return min(lag, self.max_lag(nodes, packet))

    def acks_sent(self, frames_consumed: int) -> int:
        """Acks a rank has sent after consuming this many frames since reset."""
        return frames_consumed // self.ack_every


DEFAULT = Credits()         # what the NIC is built with (a contract.build.NicBuild may take another)
#: a test build whose credits bind at small sizes: 32 frame records and 8 KiB of payload (32 frames of 64 fp32)
TIGHT = Credits(rx_frames=32, rx_buffer_bytes=8 * 1024)

RX_FRAMES, RX_BUFFER_BYTES, ACK_EVERY = DEFAULT.rx_frames, DEFAULT.rx_buffer_bytes, DEFAULT.ack_every
buffer_beats = DEFAULT.buffer_beats
advertised_beats = DEFAULT.advertised_beats
frames_that_fit = DEFAULT.frames_that_fit
max_lag = DEFAULT.max_lag
effective_lag = DEFAULT.effective_lag
acks_sent = DEFAULT.acks_sent


def payload_beats(width: int, payload_bytes: int) -> int:
    """Beats a payload occupies in the receive buffer (it is realigned to byte 0 of a beat)."""
    return -(-payload_bytes // (width // 8))
