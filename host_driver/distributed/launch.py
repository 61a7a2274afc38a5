"""Run a function on N ranks, one process each, as ``torchrun`` would: :func:`run`.

Each rank is a fresh (spawned) Python process with ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` and
``WORLD_SIZE`` set, so that ``init_process_group(backend)`` needs no other argument. ``run`` returns every
rank's return value, or raises :class:`RankFailed` with every rank's outcome (the exception's type and
message, or that it died with a signal) — it never leaves a rank running: on a failure or after ``timeout``
seconds the rest are killed.
"""

import multiprocessing as mp
import os
import queue
import socket
import time
import traceback


class RankFailed(RuntimeError):
    """At least one rank failed: ``outcomes[r]`` is ("ok", value), ("error", type name, message, traceback),
    ("died", exit code) or ("killed", why) for each rank."""

    def __init__(self, message, outcomes):
        super().__init__(message)
        self.outcomes = outcomes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(fn, rank, size, port, args, results, env):
    os.environ.update(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(size), LOCAL_RANK=str(rank))
    try:
        results.put((rank, ("ok", fn(rank, size, *args))))
    except BaseException as exc:            # noqa: BLE001 -- reported to the parent, whatever it is
        results.put((rank, ("error", type(exc).__name__, str(exc), traceback.format_exc())))


def run(fn, size: int, *args, timeout: float = 600.0, env: dict = None, wait_all: bool = False) -> list:
    """``fn(rank, size, *args)`` on ``size`` processes; their return values, by rank. ``fn`` and its
    arguments must pickle (a module-level function). ``wait_all``: after a rank fails, let the others end by
    themselves (a test of how they end) instead of killing them."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, size, port, args, results, dict(env or {})), daemon=True)
             for r in range(size)]
    for p in procs:
        p.start()
    outcomes = [None] * size
    deadline = time.monotonic() + timeout
    try:
        while any(o is None for o in outcomes):
            try:
                rank, outcome = results.get(timeout=0.2)
                outcomes[rank] = outcome
            except queue.Empty:
                pass
            for r, p in enumerate(procs):
                if outcomes[r] is None and not p.is_alive():
                    try:            # what it put just before it ended may still be in the pipe
                        rank, outcome = results.get(timeout=1.0)
                        outcomes[rank] = outcome
                    except queue.Empty:
                        outcomes[r] = ("died", p.exitcode)
            failed = any(o is not None and o[0] != "ok" for o in outcomes)
            if time.monotonic() > deadline or (failed and not wait_all):
                why = f"after {timeout:g} s" if time.monotonic() > deadline else "another rank failed"
                outcomes = [o or ("killed", why) for o in outcomes]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()
    if any(o[0] != "ok" for o in outcomes):
        lines = [f"rank {r}: {o[0]}" + (f" {o[1]}: {o[2]}" if o[0] == "error" else f" ({o[1]})" if len(o) > 1 else "")
                 for r, o in enumerate(outcomes)]
        raise RankFailed("; ".join(lines), outcomes)
    return [o[1] for o in outcomes]
