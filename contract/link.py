"""The ring's reliable links: what a NIC's link sender and receiver do, shared by the RTL (``hdl/link/``) and
the golden model (``host_driver/models/ring_link.py``); docs/collective_engine.md, "Reliable links".

Each ring hop (rank r to rank r + 1) is a reliable, in-order channel:

* **psn.** The sender numbers its data and result frames from 0 since the link was last reset (a NIC reset,
  or ``CONTROL.link_reset``), one per new frame, modulo 2**32. A frame sent again keeps its psn and carries
  ``FrameFlag.retransmit``.
* **Receiver.** It accepts only the psn it expects next; any other data or result frame is dropped before
  its payload takes room (``DropReason.duplicate`` for an older psn, ``out_of_order`` for a newer one).
  It acknowledges with an **ack** (header only): ``psn`` = the psn it expects next (every frame before it
  is received), ``count`` = frames of room beyond that psn (its frame credit: frames consumed +
  ``RX_FRAMES`` − ``psn``), ``offset`` = its beat credit (payload beats consumed + the advertised buffer,
  contract/credits.py). An ack is due when ``ACK_EVERY`` frames were received, or consumed, since the last
  one; at once after a duplicate (the sender missed an ack); and ``ACK_DELAY`` cycles after anything was
  received or consumed that no ack has reported. A newer psn than expected sends one **nack** (opcode
  ``nack``, the same fields: ``psn`` is the missing frame) per expected psn.
* **Sender.** It keeps every frame not yet acknowledged (header and payload, in block RAM: the credit
  window bounds them, ``RX_FRAMES`` records and the receive buffer's beats). An ack frees the frames before
  its psn and sets the credits. A nack, or ``RETX_TIMEOUT << backoff`` cycles without progress while frames
  are outstanding, sends every outstanding frame again from the oldest (go-back-N); each timeout doubles
  the wait up to ``RETX_BACKOFF_MAX`` doublings, and progress (an ack that frees a frame) resets it.
* **Deadline.** A collective in which no stage moved for ``RING_DEADLINE`` cycles ends with status
  ``timeout``: the engine finishes its items without the network (what it was waiting for is in the
  completion's ``stall``) and is ready for the next descriptor. The links then hold stale state: the driver
  holds ``CONTROL.link_reset`` on every NIC of the ring for ``quiet_cycles`` and releases them together.
"""

from enum import IntFlag

from .credits import ACK_EVERY, RX_FRAMES

#: cycles a receiver waits before it acknowledges what no ack has reported yet (the last frames of a
#: collective, fewer than ACK_EVERY). Shorter than any sensible RETX_TIMEOUT, so the tail is acknowledged
#: before the sender's timer runs out.
ACK_DELAY = 256
#: RING_DEADLINE after reset: cycles without progress before a ring collective ends with status timeout
#: (4 ms at 250 MHz); 0 disables the deadline
RING_DEADLINE = 1_000_000
PSN_MOD = 1 << 32


class Stall(IntFlag):
    """What a ring collective was waiting for when its deadline ran out: the completion's ``stall`` byte."""
    receive = 0x01      # a frame from the previous rank
    send = 0x02         # credit or an ack from the next rank (its receive side, or the link to it)
    host = 0x04         # host memory (a DMA read or write not answered)


def psn_diff(a: int, b: int) -> int:
    """a − b as a signed distance modulo 2**32 (−2**31 .. 2**31 − 1)."""
    d = (a - b) % PSN_MOD
    return d - PSN_MOD if d >= PSN_MOD // 2 else d


def ack_fields(expected: int, consumed_frames: int, consumed_beats: int, advertised_beats: int,
               rx_frames: int = RX_FRAMES) -> dict:
    """The header fields of an ack or nack: what the receiver expects next and its credits."""
    room = (consumed_frames + rx_frames - expected) % PSN_MOD
    if room > rx_frames:
        raise ValueError(f"expected psn {expected} is more than {rx_frames} frames past {consumed_frames} consumed")
    return {"psn": expected % PSN_MOD, "count": room, "offset": (consumed_beats + advertised_beats) % PSN_MOD}


def ack_due(received_since: int, consumed_since: int, ack_every: int = ACK_EVERY) -> bool:
    """Whether the frames received and consumed since the last ack call for one now (the counting rule)."""
    return received_since >= ack_every or consumed_since >= ack_every


def retransmit_wait(timeout: int, backoff: int, backoff_max: int) -> int:
    """Cycles the sender waits without progress before it goes back, after ``backoff`` timeouts in a row."""
    return timeout << min(backoff, backoff_max)
