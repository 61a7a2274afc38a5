"""Points on a Dask cluster, their results in a journal.

:func:`run` sends each point to a Dask worker (``fn(point)``: one worker process, one thread, one point at a
time) and appends each result to a :class:`Journal` as it comes back, on the machine that runs the sweep.
The cluster is a ``LocalCluster`` of this machine's cores, or the scheduler at an address a user started
with Dask's own tools (``dask scheduler`` / ``dask worker``, or dask-jobqueue: docs/sweeps.md).

* **Resume.** A point whose key (``grid.key``) is in the journal, with the same ``tag`` (e.g. the RTL's
  digest), is not run again.
* **A worker that dies** has its points run again on the others (Dask's scheduler reschedules what it
  held); a point that kills ``ALLOWED_FAILURES`` workers in turn fails. A result is journaled once, by this
  process, whatever ran it.
* **Builds once.** Points carry a build group (``group(point)``): the first point of each group runs
  first, the group's others once it is done, so that two workers never build the same simulator.
* **Nothing hangs.** With no worker for ``NO_WORKER_TIMEOUT`` seconds the sweep stops with
  :class:`SweepError`; so does a scheduler that does not answer within ``CONNECT_TIMEOUT``.
"""

import itertools
import json
import logging
import time
from pathlib import Path

#: seconds to reach a scheduler given by address
CONNECT_TIMEOUT = 30
#: seconds a sweep waits with points left and no worker before it stops
NO_WORKER_TIMEOUT = 120
#: workers a point may take down (each death reschedules it) before it fails (Dask's allowed-failures)
ALLOWED_FAILURES = 3


class SweepError(RuntimeError):
    """The sweep could not go on (no scheduler, no workers); the journal keeps what was done."""


def canonical(point) -> str:
    """A point's key when the point is its own identity (any JSON value): its canonical JSON."""
    return json.dumps(point, sort_keys=True)


class Journal:
    """Results as JSON lines, one a point: ``{"key", "point", "tag", "result"}``, appended as they come (a
    crash loses at most the line being written)."""

    def __init__(self, path, tag=None):
        self.path, self.tag = Path(path), tag

    def entries(self) -> list:
        """Every entry of this tag, in the order written (a line cut short by a crash is skipped)."""
        out = []
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if e.get("tag") == self.tag:
                    out.append(e)
        return out

    def done(self) -> dict:
        """{key: result} of the points already run (with this tag)."""
        return {e["key"]: e["result"] for e in self.entries()}

    def append(self, key: str, point: dict, result: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            fh.write(json.dumps({"key": key, "point": point, "tag": self.tag, "result": result}) + "\n")


def client(scheduler: str = None, workers: int = None, timeout: float = CONNECT_TIMEOUT):
    """A Dask client: on the scheduler at ``scheduler`` (:class:`SweepError` if none answers within ``timeout``
    seconds), or on a new ``LocalCluster`` of ``workers`` processes (default: this machine's cores) of one
    thread each."""
    import os

    from distributed import Client, LocalCluster
    if scheduler:
        try:
            return Client(scheduler, timeout=timeout, set_as_default=True)
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"no Dask scheduler answered at {scheduler} within {timeout:g} s ({exc})") from None
    n = workers or os.cpu_count() or 1
    # memory_limit=0: a worker's simulator is the size of its design (the nanny must not restart it); on
    # loopback, the scheduler's HTTP server on a free port (two sweeps at once must not collide on 8787)
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=0, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    return Client(cluster, set_as_default=True)


def run(points, fn, journal: Journal, *, key, group=None, scheduler: str = None, workers: int = None,
        say=print, describe=None) -> dict:
    """Run ``fn(point)`` for each of ``points`` not yet in ``journal``: {key: result} of every point (the
    journal's and the new), and the keys that failed with their error. ``key(point)`` names a point,
    ``group(point)`` its build group; ``say`` gets a line per result and progress; ``describe(point)`` names
    a point in those lines."""
    import dask
    from distributed import wait
    from distributed.client import FIRST_COMPLETED
    describe = describe or key
    done = journal.done()
    todo, seen = [], set(done)
    for p in points:
        k = key(p)
        if k not in seen:
            seen.add(k)
            todo.append(p)
    total = len(done) + len(todo)
    if done:
        say(f"sweep: {len(done)} of {total} points already in {journal.path}")
    failed = {}
    if not todo:
        return {"results": done, "failed": failed}
    groups = {}                         # build group -> its points (no group function: a point each)
    for i, p in enumerate(todo):
        groups.setdefault(group(p) if group else i, []).append(p)
    t0 = time.time()
    # a LocalCluster's scheduler lives in this process and reads this as it starts; a scheduler given by
    # address keeps its own setting
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
        c = client(scheduler, workers)
    numbers = itertools.count()
    futures = {}

    def submit(p):
        futures[c.submit(fn, p, pure=False, key=f"ainic-point-{next(numbers)}-{time.time_ns()}")] = p

    try:
        for members in groups.values():
            submit(members[0])
        firsts = {id(m[0]): g for g, m in groups.items()}
        new = 0
        idle_since = None
        while futures:
            try:
                finished, _ = wait(list(futures), timeout=5, return_when=FIRST_COMPLETED)
            except TimeoutError:
                finished = set()
            if not finished:
                n_workers = len(c.scheduler_info().get("workers", {}))
                idle_since = (idle_since or time.time()) if n_workers == 0 else None
                if idle_since and time.time() - idle_since > NO_WORKER_TIMEOUT:
                    raise SweepError(f"no Dask worker for {NO_WORKER_TIMEOUT} s with {len(futures)} points "
                                     f"left; {len(done)} of {total} are in {journal.path}")
                continue
            for f in finished:
                p = futures.pop(f)
                k = key(p)
                if f.status == "finished":
                    result = f.result()
                    journal.append(k, p, result)
                    done[k] = result
                    new += 1
                    line = _summary(result)
                else:
                    err = f.exception() if f.status == "error" else f.status
                    failed[k] = f"{type(err).__name__}: {err}" if f.status == "error" else str(err)
                    line = f"FAILED ({failed[k]})"
                if id(p) in firsts:         # its group is built: the group's other points may go
                    for q in groups[firsts.pop(id(p))][1:]:
                        submit(q)
                left = total - len(done) - len(failed)
                per_point = (time.time() - t0) / max(new, 1)        # wall seconds a point, all workers
                running = _running(c, futures)
                say(f"sweep: {len(done)}/{total} done, {running} running, {left - running} queued, "
                    f"{len(failed)} failed, ~{_duration(per_point * left)} left | {describe(p)}: {line}")
    finally:
        _close(c)
    lost = [key(p) for p in todo if key(p) not in done and key(p) not in failed]
    assert not lost, f"sweep engine: {len(lost)} points neither done nor failed"
    return {"results": done, "failed": failed}


def _running(c, futures) -> int:
    """How many of ``futures`` the workers are running now: of the points the scheduler has given a worker,
    at most one a thread (Dask may hand a worker more than it has threads; the rest wait there, queued).
    0 if the scheduler does not answer (the next wait says why)."""
    keys = {f.key for f in futures}
    try:
        threads = {a: w.get("nthreads", 1) for a, w in c.scheduler_info().get("workers", {}).items()}
        return sum(min(sum(1 for k in held if k in keys), threads.get(a, 1)) for a, held in c.processing().items())
    except Exception:          # noqa: BLE001 -- a scheduler going away
        return 0


def _close(c) -> None:
    cluster = c.cluster
    c.close()
    if cluster is not None:
        cluster.close()


def _summary(result: dict) -> str:
    if not isinstance(result, dict) or "cycles" not in result:
        return "done"
    cycles = f"{result['cycles']:,} cycles" if result.get("cycles") is not None else "no cycles"
    if "bit_exact" not in result:       # a measurement that checks its result itself (make calibrate)
        return f"{result.get('status', 'ok')}, {cycles}"
    exact = {True: "bit-exact", False: "NOT bit-exact", None: "no result"}[result["bit_exact"]]
    return f"{result.get('status', 'ok')}, {cycles}, {exact}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
