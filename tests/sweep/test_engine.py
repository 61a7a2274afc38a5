"""The sweep engine on real Dask clusters: a scheduler and two workers as separate processes on loopback, one of
them killed mid-sweep (every point still completes, once, with the right cycles); a LocalCluster's sweep
interrupted and resumed without running a finished point again."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from host_driver.perf import collective_model as cm
from host_driver.sweep import engine, grid, point


def model_points(nodes, elements, codecs=("none", "bfp8")):
    return grid.points({"sim": ["model"], "nodes": nodes, "elements": [elements], "codec": list(codecs)})[0]


def predicted(p) -> int:
    """What the model backend must report for point ``p``: ``ainic model``'s cycles, computed here apart."""
    return round(cm.predict(cm.Setup(p["nodes"], p["elements"], p["codec"], p["op"], algorithm=p["algorithm"],
                                     packet=p["packet"], width=p["width"], link_gbps=p["link_gbps"],
                                     clock_mhz=p["clock_mhz"], link_latency=p["link_latency"])))


def journal_counts(path) -> Counter:
    return Counter(json.loads(line)["key"] for line in path.read_text().splitlines())


def _start(args, **kw):
    return subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, **kw)


def start_cluster(tmp_path, n_workers, procs):
    """A scheduler and ``n_workers`` workers (no nanny: a worker killed stays dead), each its own process on
    loopback, appended to ``procs``: (scheduler address, {pid: worker process})."""
    sfile = tmp_path / "scheduler.json"
    procs.append(_start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                         "--scheduler-file", str(sfile)]))
    deadline = time.time() + 60
    while not (sfile.exists() and sfile.stat().st_size):
        assert time.time() < deadline, "the Dask scheduler did not start in 60 s"
        time.sleep(0.2)
    address = json.loads(sfile.read_text())["address"]
    workers = {}
    for _ in range(n_workers):
        w = _start(["distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                    "--host", "127.0.0.1"], cwd=tmp_path)
        procs.append(w)
        workers[w.pid] = w
    if n_workers:
        from distributed import Client
        with Client(address, timeout=30) as c:
            c.wait_for_workers(n_workers, timeout=60)
    return address, workers


@pytest.fixture
def processes():
    """Processes a test starts, killed (with their children) when it ends."""
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


@pytest.fixture
def dask_cluster(tmp_path, processes):
    """A scheduler and two workers on loopback: (address, {pid: worker process})."""
    return start_cluster(tmp_path, 2, processes)


@pytest.mark.heavy(30)
def test_a_killed_worker_loses_nothing(dask_cluster, tmp_path):
    address, workers = dask_cluster
    points = model_points([2, 4, 8], 1 << 20)         # about 1.5 s a point on the golden model
    killed = []

    def say(line):
        # after the second result (both workers busy by then), kill a worker in the middle of a point
        if line.startswith("sweep: 2/") and not killed:
            from distributed import Client
            with Client(address, timeout=30) as c:
                busy = {a: keys for a, keys in c.processing().items() if keys}
                victim = next(iter(busy))
                killed.append((c.run(os.getpid, workers=[victim])[victim], busy[victim]))
            os.kill(killed[0][0], signal.SIGKILL)

    journal = engine.Journal(tmp_path / "j.jsonl", tag="t")
    out = engine.run(points, point.run, journal, key=grid.key, group=point.build_group, scheduler=address, say=say)
    assert killed and workers[killed[0][0]].wait(10) == -signal.SIGKILL and killed[0][1], killed
    assert out["failed"] == {}
    counts = journal_counts(tmp_path / "j.jsonl")
    assert sorted(counts) == sorted(grid.key(p) for p in points) and set(counts.values()) == {1}
    for p in points:
        r = out["results"][grid.key(p)]
        assert r["status"] == "ok" and r["bit_exact"] is True
        assert r["cycles"] == predicted(p), p
    # the point it was running was run again, by the worker left
    assert {int(r["worker"].split(":")[1]) for r in out["results"].values()} == set(workers)
    last = [json.loads(line)["result"]["worker"] for line in (tmp_path / "j.jsonl").read_text().splitlines()][2:]
    assert {int(w.split(":")[1]) for w in last} == set(workers) - {killed[0][0]}


@pytest.mark.heavy(20)
def test_an_interrupted_sweep_resumes_without_rerunning(tmp_path):
    points = model_points([2, 4, 8], 1 << 16)
    journal = engine.Journal(tmp_path / "j.jsonl", tag="t")

    def stop_after_two(line):
        if line.startswith("sweep: 2/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.run(points, point.run, journal, key=grid.key, group=point.build_group, workers=2, say=stop_after_two)
    first = journal_counts(tmp_path / "j.jsonl")
    assert len(first) == 2 and set(first.values()) == {1}
    before = {k: r["worker"] for k, r in journal.done().items()}
    lines = []
    out = engine.run(points, point.run, journal, key=grid.key, group=point.build_group, workers=2, say=lines.append)
    assert lines[0] == f"sweep: 2 of {len(points)} points already in {journal.path}"
    counts = journal_counts(tmp_path / "j.jsonl")
    assert sorted(counts) == sorted(grid.key(p) for p in points) and set(counts.values()) == {1}
    assert {k: out["results"][k]["worker"] for k in before} == before      # not run again
    assert all(out["results"][grid.key(p)]["cycles"] == predicted(p) for p in points)
    # another tag (other RTL, another calibration): nothing is reused
    other = engine.Journal(tmp_path / "j.jsonl", tag="u")
    assert other.done() == {}


def test_no_scheduler_is_a_clear_error(tmp_path):
    with pytest.raises(engine.SweepError, match="no Dask scheduler answered at tcp://127.0.0.1:9"):
        engine.client("tcp://127.0.0.1:9", timeout=2)


def test_a_point_that_raises_is_reported_not_journaled(tmp_path):
    points = model_points([2], 1 << 12, codecs=("none",))
    journal = engine.Journal(tmp_path / "j.jsonl", tag="t")
    out = engine.run(points, _fails, journal, key=grid.key, workers=1, say=lambda line: None)
    assert list(out["failed"].values()) == ["RuntimeError: this point cannot be run"]
    assert journal.done() == {}


def _fails(p):
    raise RuntimeError("this point cannot be run")


def test_points_without_a_build_group_all_run_at_once(tmp_path):
    """No ``group`` (nothing to build first, as the soak's batches): every point is sent at once and runs."""
    points = model_points([2, 3, 4], 1 << 12)
    out = engine.run(points, point.run, engine.Journal(tmp_path / "j.jsonl", tag="t"), key=grid.key, workers=2,
                     say=lambda line: None)
    assert out["failed"] == {} and sorted(out["results"]) == sorted(grid.key(p) for p in points)


PROGRESS = re.compile(r"sweep: (\d+)/(\d+) done, (\d+) running, (\d+) queued, (\d+) failed, ~")


@pytest.mark.heavy(15)
def test_progress_counts_points_running_and_queued(tmp_path):
    """Each progress line's counts add up to the sweep, and "running" is what the workers run: never more
    than one point a worker thread (two one-thread workers, six points of about 1.5 s: Dask hands a worker
    a second point while it runs the first)."""
    points = model_points([2, 3, 4], 1 << 20)
    lines = []
    engine.run(points, point.run, engine.Journal(tmp_path / "j.jsonl", tag="t"), key=grid.key, workers=2,
               say=lines.append)
    counts = [tuple(map(int, PROGRESS.match(line).groups())) for line in lines]
    assert [c[0] for c in counts] == list(range(1, len(points) + 1))
    for done, total, running, queued, failed in counts:
        assert total == len(points) and done + running + queued + failed == total and failed == 0
        assert 0 <= running <= 2, lines
    assert max(c[2] for c in counts) >= 1 and counts[-1][2:4] == (0, 0)


def test_a_scheduler_without_workers_stops_the_sweep(tmp_path, processes, monkeypatch):
    """Nothing hangs: with no worker for NO_WORKER_TIMEOUT seconds the sweep stops and says so."""
    address, _ = start_cluster(tmp_path, 0, processes)
    monkeypatch.setattr(engine, "NO_WORKER_TIMEOUT", 3)
    t = time.time()
    with pytest.raises(engine.SweepError, match=r"no Dask worker for 3 s with 2 points left; 0 of 2 are in"):
        engine.run(model_points([2], 1 << 12), point.run, engine.Journal(tmp_path / "j.jsonl", tag="t"),
                   key=grid.key, scheduler=address, say=lambda line: None)
    assert time.time() - t < 30
