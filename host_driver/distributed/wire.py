"""The messages between a rank and the fabric service (:mod:`host_driver.distributed.fabric`), and their framing.

A message is a 4-byte big-endian length, a JSON header of that many bytes, then ``header["nbytes"]`` bytes
of payload (a tensor's raw bytes, little-endian, or nothing). JSON and raw bytes only: nothing received is
ever unpickled or executed.

Rank → service: ``hello`` (rank, size, options, pid), ``collective`` (seq, what, reduce, dtype, numel, root;
the payload), ``bye``. Service → rank: ``welcome`` or ``error`` (to a hello), ``result`` (seq, ok, path,
stats; the payload) or ``error`` (seq, kind, message), and ``alive`` every :data:`HEARTBEAT_S` seconds while
the connection is open, so that a rank can tell a long collective (an RTL run) from a service that stopped.
"""

import json
import socket
import struct

#: seconds between the service's heartbeats; a rank that hears nothing for HEARTBEAT_MISSED of them says
#: the service stopped answering
HEARTBEAT_S = 2.0
HEARTBEAT_MISSED = 5
MAX_HEADER = 1 << 20
#: the collectives a rank can ask for (the payload each carries: docs/training.md)
WHATS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier")
#: torch's ReduceOp names the service understands; "sum" and "avg" of fp32/int32 go through the NICs
REDUCES = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")


class ConnectionClosed(ConnectionError):
    """The other end closed the connection (or it broke) before a whole message arrived."""


def send(sock: socket.socket, header: dict, payload: bytes = b"") -> None:
    """One message: ``header`` (``nbytes`` is set here) and ``payload``."""
    header = dict(header, nbytes=len(payload))
    head = json.dumps(header, separators=(",", ":")).encode()
    sock.sendall(struct.pack(">I", len(head)) + head + payload)


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionClosed(f"connection closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


def receive(sock: socket.socket) -> tuple:
    """(header, payload) of the next message; :class:`ConnectionClosed` when the other end is gone,
    ``socket.timeout`` when the socket's timeout passes first, ``ValueError`` for a malformed message."""
    try:
        (n,) = struct.unpack(">I", _exactly(sock, 4))
    except OSError as exc:
        if isinstance(exc, (socket.timeout, ConnectionClosed)):
            raise
        raise ConnectionClosed(str(exc)) from None
    if not 0 < n <= MAX_HEADER:
        raise ValueError(f"message header of {n} bytes (at most {MAX_HEADER})")
    header = json.loads(_exactly(sock, n))
    if not isinstance(header, dict) or not isinstance(header.get("nbytes"), int) or header["nbytes"] < 0:
        raise ValueError(f"malformed message header {header!r:.200}")
    return header, _exactly(sock, header["nbytes"])
