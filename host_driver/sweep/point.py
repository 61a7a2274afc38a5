"""One point of a sweep: one collective through the simulated cluster (``ainic demo``'s run, without its
table), every rank checked bit for bit against the golden model.

:func:`run` is what a sweep's workers call: it takes a point (host_driver.sweep.grid) and returns its figures
as plain JSON values. The RTL builds are cached per configuration in the build directory (as ``ainic demo``'s
are), so a worker builds a bench once and every later point on it only simulates.
"""

import os
import socket
import time

import numpy as np

#: what a result holds besides the point, for the table's columns (in this order)
FIELDS = ("status", "bit_exact", "cycles", "cycles_from", "bound_cycles", "efficiency", "time_us",
          "retransmissions", "frames_lost", "window_used", "lag_used", "sim_seconds", "wall_seconds", "worker")


def inputs(point: dict) -> list:
    """The ranks' arrays, as ``ainic demo --seed`` draws them."""
    rng = np.random.default_rng(point["seed"])
    n, L = point["nodes"], point["elements"]
    if point["dtype"] == "fp32":
        return [rng.standard_normal(L).astype(np.float32) for _ in range(n)]
    return [rng.integers(-1000, 1000, L, dtype=np.int32) for _ in range(n)]


def cluster(point: dict):
    """The :class:`~host_driver.sim.cluster.Cluster` of ``point``."""
    from host_driver.sim.cluster import Cluster
    p = point
    return Cluster(p["nodes"], backend=p["sim"], width=p["width"], codec=p["codec"], dtype=p["dtype"],
                   packet=p["packet"], link_gbps=p["link_gbps"], clock_mhz=p["clock_mhz"], lag=p["lag"],
                   link_latency=p["link_latency"], algorithm=p["algorithm"], window=p["window"],
                   retransmit_timeout=p["retransmit_timeout"],
                   faults={"drop": p["drop"], "dup": p["dup"], "corrupt": p["corrupt"], "seed": p["fault_seed"]},
                   leaves=p["leaves"],
                   # the golden model's results do not depend on the switches' width: `ainic model` gives its cycles
                   switch_speedup=1 if p["sim"] == "model" else p["switch_speedup"])


def run(point: dict) -> dict:
    """Run ``point``: its figures (:data:`FIELDS`). ``status`` is the collective's (``ok``, or ``timeout``
    when a rank gave up: its cycles are then None); ``bit_exact`` whether every rank ended with the golden
    model's result. On the model, ``cycles`` is ``ainic model``'s prediction (``cycles_from`` says which)."""
    from host_driver.perf import collective_model as cm
    from host_driver.sim.cluster import CollectiveTimeout
    t = time.time()
    c = cluster(point)
    x = inputs(point)
    op = point["op"]
    status = "ok"
    try:
        results, st = c.collective(op, x)
    except CollectiveTimeout as exc:
        status, st, results = "timeout", exc.stats, None
    bit_exact = None
    if results is not None:
        want = c.golden(x, op)
        bit_exact = all(np.array_equal(np.asarray(results[r]).view(np.uint32), np.asarray(want[r]).view(np.uint32))
                        for r in range(point["nodes"]))
    setup = cm.Setup(point["nodes"], point["elements"], point["codec"], op, algorithm=point["algorithm"],
                     packet=point["packet"], width=point["width"], link_gbps=point["link_gbps"],
                     clock_mhz=point["clock_mhz"], link_latency=point["link_latency"], leaves=point["leaves"],
                     switch_speedup=point["switch_speedup"])
    bound = setup.bound_cycles()
    if point["sim"] == "model":
        cycles, source = round(cm.predict(setup)), "model"
    else:
        cycles, source = (int(st.cycles) if status == "ok" else None), "rtl"
    retx = getattr(st, "retransmitted_per_rank", None)
    faults = getattr(st, "fault_counters", None) or {}
    lost = sum(c_["dropped"] for links in faults.values() if isinstance(links, list) for c_ in links
               if isinstance(c_, dict) and "dropped" in c_)
    return {
        "status": status, "bit_exact": bit_exact, "cycles": cycles, "cycles_from": source,
        "bound_cycles": round(bound), "efficiency": round(bound / cycles, 4) if cycles else None,
        "time_us": round(cycles / point["clock_mhz"], 3) if cycles else None,
        "retransmissions": int(sum(retx)) if retx else 0, "frames_lost": int(lost),
        "window_used": getattr(c, "window", None), "lag_used": getattr(st, "lag", None),
        "sim_seconds": round(st.sim_seconds, 2) if getattr(st, "sim_seconds", None) else None,
        "wall_seconds": round(time.time() - t, 2), "worker": f"{socket.gethostname()}:{os.getpid()}",
    }


def build_group(point: dict) -> tuple:
    """What a point's simulator build depends on: points of one group share a build (the first one builds)."""
    if point["sim"] == "model":
        return ("model",)
    return (point["sim"], cluster(point).top, point["width"])
