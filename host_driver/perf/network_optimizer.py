"""LIBRA's problem on open solvers: the bandwidth of each dimension of a hierarchical network for a workload.

Variables: bw_d, GB/s per node in dimension d. A training iteration (LIBRA's ``no_overlap`` loop) takes

    T(bw) = Σ compute + Σ_c max_d B_cd / bw_d

over the workload's collectives c (a layer's forward, input-gradient and weight-gradient collectives), with
B_cd the bytes of c in dimension d (:mod:`~host_driver.perf.collective_traffic`): bytes / (GB/s) = ns.
The network costs C(bw) = nodes · Σ_d bw_d · u_d (u_d: $ per GB/s of the dimension's link, plus NIC and switch
for a switch dimension: LIBRA's cost model summed over its building blocks). The constraints are linear
(:class:`~host_driver.perf.libra_inputs.Constraints`).

* objective ``time``: minimise T. T is convex in bw (a sum of maxima of B/bw), so the minimum is global.
* objective ``time-cost``: minimise T · C. Not convex, but for a fixed cost K the least time T*(K) is a
  convex problem (C(bw) = K is one more linear constraint); the product is minimised by a search over K
  between the least and the greatest cost the constraints allow (a grid, then golden-section refinement).

Two independent methods solve each convex step, so that each checks the other:

* ``cuts`` (the default): Kelley's cutting planes. Each term B/bw is replaced by tangent lines
  (B/bw ≥ 2B/b₀ − B·bw/b₀², exact at b₀); the linear program (HiGHS, through SciPy) is solved and tangents
  are added where the true B/bw exceeds its estimate, until it exceeds it by at most ``tol`` of the time.
* ``slsqp``: SciPy's sequential quadratic programming on the same epigraph form (t_c ≥ B_cd/bw_d), from the
  equal split.
"""

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog, minimize

from host_driver.perf.collective_traffic import dimension_bytes
from host_driver.perf.libra_inputs import PASSES, Constraints, InputError

OBJECTIVES = ("time", "time-cost")
METHODS = ("cuts", "slsqp")


class InfeasibleError(ValueError):
    """The constraints admit no bandwidths, or leave them unbounded (time would go to zero)."""


@dataclass(frozen=True)
class Problem:
    network: object
    layers: tuple
    communicator: object
    cost_model: object
    constraints: Constraints

    def __post_init__(self):
        D = len(self.network.dims)
        comm = [self.communicator.groups[p] for p in PASSES]
        topo = [d.topology for d in self.network.dims]
        codecs = [d.codec for d in self.network.dims]
        terms = {}
        compute = 0.0
        for layer in self.layers:
            for phase, groups in zip(layer.phases, comm):
                compute += phase.compute_ns
                b = dimension_bytes(phase.collective, phase.size_bytes, groups, topo, codecs)
                if any(b):
                    key = tuple(b)
                    terms[key] = terms.get(key, 0) + 1
        object.__setattr__(self, "compute_ns", compute)
        # the distinct collectives (bytes per dimension) and how many times each occurs
        object.__setattr__(self, "bytes", np.array(list(terms), dtype=float).reshape(-1, D))
        object.__setattr__(self, "counts", np.array(list(terms.values()), dtype=float))
        object.__setattr__(self, "unit_cost", np.array([self.cost_model.unit_cost(d) for d in self.network.dims]))

    @property
    def dims(self) -> int:
        return len(self.network.dims)

    def time_ns(self, bw) -> float:
        bw = np.asarray(bw, dtype=float)
        if not len(self.bytes):
            return self.compute_ns
        return float(self.compute_ns + self.counts @ np.max(self.bytes / bw, axis=1))

    def comm_ns(self, bw) -> float:
        return self.time_ns(bw) - self.compute_ns

    def cost(self, bw) -> float:
        return float(self.network.nodes * self.unit_cost @ np.asarray(bw, dtype=float))

    # -- the linear constraints, as (A_ub, b_ub, A_eq, b_eq, bounds) over bw -------------------------------
    def linear(self, cost_equal: float = None):
        c, D = self.constraints, self.dims
        A_ub, b_ub, A_eq, b_eq = [], [], [], []

        def row(coeffs):
            r = np.zeros(D)
            for d, v in coeffs:
                r[d] += v
            return r
        if c.total is not None:
            A_eq.append(np.ones(D)), b_eq.append(c.total)
        if c.total_at_most is not None:
            A_ub.append(np.ones(D)), b_ub.append(c.total_at_most)
        for a, b in c.order:                                    # bw[a] >= bw[b]
            A_ub.append(row([(b, 1), (a, -1)])), b_ub.append(0.0)
        for dims, kind, v in c.sums:
            r = row([(d, 1) for d in dims])
            if kind == "equal":
                A_eq.append(r), b_eq.append(v)
            elif kind == "at_most":
                A_ub.append(r), b_ub.append(v)
            else:
                A_ub.append(-r), b_ub.append(-v)
        if cost_equal is not None:                              # scaled to a right-hand side of 1
            A_eq.append(self.network.nodes * self.unit_cost / cost_equal), b_eq.append(1.0)
        bounds = []
        for d in range(D):
            lo, hi = max(c.floor, c.min.get(d, 0.0)), c.max.get(d)
            if d in c.fixed:
                lo = hi = c.fixed[d]
            bounds.append((lo, hi))
        mat = lambda rows: np.array(rows).reshape(-1, D) if rows else None     # noqa: E731
        return mat(A_ub), (np.array(b_ub) if b_ub else None), mat(A_eq), (np.array(b_eq) if b_eq else None), bounds


@dataclass(frozen=True)
class Solution:
    bandwidth_gbps: tuple
    time_ns: float
    comm_ns: float
    cost: float
    objective: str
    method: str


def _feasible_range(problem: Problem, vector) -> tuple:
    """(min, max) of vector · bw under the constraints; raises InfeasibleError if none or unbounded."""
    A_ub, b_ub, A_eq, b_eq, bounds = problem.linear()
    out = []
    for sign in (1, -1):
        r = linprog(sign * np.asarray(vector), A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds,
                    method="highs")
        if r.status == 2:
            raise InfeasibleError("the constraints admit no bandwidths")
        if r.status == 3:
            raise InfeasibleError("the constraints leave the bandwidths unbounded: give a total "
                                  "(--total-bw) or bounds on every dimension")
        if r.status != 0:
            raise InfeasibleError(f"the linear program failed: {r.message}")
        out.append(sign * r.fun)
    return out[0], out[1]


def _min_time_cuts(problem: Problem, cost_equal=None, tol=1e-6, max_rounds=1000) -> np.ndarray:
    A_ub, b_ub, A_eq, b_eq, bounds = problem.linear(cost_equal)
    D, w = problem.dims, problem.counts
    C = len(problem.bytes)
    if C == 0:
        return _equalish_start(problem, cost_equal)
    # variables: bw (D), then t (C); the tangents of B_cd / bw_d, with B scaled to at most 1 (the linear
    # program's coefficients stay well conditioned), first at a point inside the feasible set
    Bm = problem.bytes / problem.bytes.max()
    start = _equalish_start(problem, cost_equal)
    cuts = [(c, d, start[d]) for c in range(C) for d in range(D) if Bm[c, d] > 0]
    have = set(cuts)
    n = D + C
    obj = np.concatenate([np.zeros(D), w])
    ub_rows = [] if A_ub is None else [np.concatenate([r, np.zeros(C)]) for r in A_ub]
    eq_rows = None if A_eq is None else np.hstack([A_eq, np.zeros((len(A_eq), C))])
    all_bounds = bounds + [(0, None)] * C
    for _ in range(max_rounds):
        rows, rhs = list(ub_rows), list(b_ub) if b_ub is not None else []
        for c, d, b0 in cuts:               # 2B/b0 - B bw/b0^2 - t <= 0
            r = np.zeros(n)
            r[d] = -Bm[c, d] / b0 ** 2
            r[D + c] = -1.0
            rows.append(r)
            rhs.append(-2 * Bm[c, d] / b0)
        res = linprog(obj, A_ub=np.array(rows), b_ub=np.array(rhs), A_eq=eq_rows, b_eq=b_eq, bounds=all_bounds,
                      method="highs")
        if res.status == 2:
            raise InfeasibleError("the constraints admit no bandwidths")
        if res.status != 0:
            raise InfeasibleError(f"the linear program failed: {res.message}")
        bw, t = res.x[:D], res.x[D:]
        # the tangents bound the time from below, the bandwidths found give it exactly: stop when they meet
        lower, gap = float(w @ t), Bm / bw - t[:, None]
        upper = float(w @ np.max(Bm / bw, axis=1))
        if upper - lower <= tol * upper:
            return bw
        new = [(c, d, bw[d]) for c, d in zip(*np.nonzero(gap > 0)) if (c, d, bw[d]) not in have]
        if not new:
            # the linear program returns a point it already has tangents at: its own tolerance (about 1e-7
            # of each row) is the limit; accept a gap ten times ours, not more
            if upper - lower <= 10 * tol * upper:
                return bw
            raise RuntimeError(f"cutting planes stalled {(upper - lower) / upper:.1e} from the optimum")
        cuts += new
        have.update(new)
    raise RuntimeError(f"cutting planes did not converge in {max_rounds} rounds")


def _min_time_slsqp(problem: Problem, cost_equal=None) -> np.ndarray:
    """The epigraph form in x = log bw (so bw > 0 always): minimise Σ w_c t_c with t_c ≥ B_cd·e^(−x_d)."""
    A_ub, b_ub, A_eq, b_eq, bounds = problem.linear(cost_equal)
    D, w = problem.dims, problem.counts
    Bm = problem.bytes / problem.bytes.max()
    C = len(Bm)
    start = _equalish_start(problem, cost_equal)
    if C == 0:
        return start
    pairs = [(c, d) for c in range(C) for d in range(D) if Bm[c, d] > 0]
    pc, pd = np.array([c for c, _ in pairs]), np.array([d for _, d in pairs])
    pb = Bm[pc, pd]
    t0 = np.max(Bm / start, axis=1)
    scale = float(w @ t0)
    z0 = np.concatenate([np.log(start), t0 / scale])       # t in units of the start's time

    def epi(z):                                             # t_c - B_cd e^{-x_d} / scale >= 0
        return z[D + pc] - pb * np.exp(-z[pd]) / scale

    def epi_jac(z):
        j = np.zeros((len(pairs), D + C))
        j[np.arange(len(pairs)), pd] = pb * np.exp(-z[pd]) / scale
        j[np.arange(len(pairs)), D + pc] = 1.0
        return j
    cons = [{"type": "ineq", "fun": epi, "jac": epi_jac}]
    if A_ub is not None:
        cons.append({"type": "ineq", "fun": lambda z: (b_ub - A_ub @ np.exp(z[:D])) / _norm(b_ub),
                     "jac": lambda z: np.hstack([-A_ub * np.exp(z[:D]), np.zeros((len(A_ub), C))]) / _norm(b_ub)})
    if A_eq is not None:
        cons.append({"type": "eq", "fun": lambda z: (A_eq @ np.exp(z[:D]) - b_eq) / _norm(b_eq),
                     "jac": lambda z: np.hstack([A_eq * np.exp(z[:D]), np.zeros((len(A_eq), C))]) / _norm(b_eq)})
    zb = [(np.log(lo), None if hi is None else np.log(hi)) for lo, hi in bounds] + [(0, None)] * C
    res = minimize(lambda z: float(w @ z[D:]), z0, jac=lambda z: np.concatenate([np.zeros(D), w]),
                   method="SLSQP", bounds=zb, constraints=cons, options={"maxiter": 10000, "ftol": 1e-15})
    bw = np.exp(res.x[:D])
    # SLSQP stops with "positive directional derivative" (status 8) when it is at the optimum to machine
    # precision: accept that, provided the point satisfies the constraints
    if res.status not in (0, 8) or not _satisfies(bw, A_ub, b_ub, A_eq, b_eq, bounds):
        raise RuntimeError(f"SLSQP did not converge: {res.message}")
    return bw


def _satisfies(bw, A_ub, b_ub, A_eq, b_eq, bounds, tol=1e-6) -> bool:
    ok = all(bw[d] >= lo * (1 - tol) and (hi is None or bw[d] <= hi * (1 + tol)) for d, (lo, hi) in enumerate(bounds))
    if A_ub is not None:
        ok &= bool(np.all(A_ub @ bw <= b_ub + tol * _norm(b_ub)))
    if A_eq is not None:
        ok &= bool(np.all(np.abs(A_eq @ bw - b_eq) <= tol * _norm(b_eq)))
    return ok


def _norm(b) -> float:
    return max(float(np.max(np.abs(b))), 1.0)


def _equalish_start(problem: Problem, cost_equal=None) -> np.ndarray:
    """A feasible point near the middle: the LP's centre along the all-ones direction."""
    A_ub, b_ub, A_eq, b_eq, bounds = problem.linear(cost_equal)
    D = problem.dims
    # maximise the smallest bandwidth: a point well inside the feasible set
    obj = np.concatenate([np.zeros(D), [-1.0]])
    rows = [] if A_ub is None else [np.concatenate([r, [0.0]]) for r in A_ub]
    rhs = [] if b_ub is None else list(b_ub)
    for d in range(D):
        r = np.zeros(D + 1)
        r[d], r[D] = -1.0, 1.0              # s <= bw_d
        rows.append(r), rhs.append(0.0)
    eq = None if A_eq is None else np.hstack([A_eq, np.zeros((len(A_eq), 1))])
    res = linprog(obj, A_ub=np.array(rows), b_ub=np.array(rhs), A_eq=eq, b_eq=b_eq, bounds=bounds + [(0, None)],
                  method="highs")
    if res.status != 0:
        raise InfeasibleError(f"the constraints admit no bandwidths: {res.message}")
    return res.x[:D]


_MIN_TIME = {"cuts": _min_time_cuts, "slsqp": _min_time_slsqp}


def optimize(problem: Problem, objective: str = "time", method: str = "cuts") -> Solution:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    lo, hi = _feasible_range(problem, problem.network.nodes * problem.unit_cost)
    solve = _MIN_TIME[method]
    if objective == "time":
        bw = solve(problem)
    else:
        bw = _min_time_cost(problem, solve, lo, hi)
    return Solution(tuple(float(b) for b in bw), problem.time_ns(bw), problem.comm_ns(bw), problem.cost(bw),
                    objective, method)


def _min_time_cost(problem: Problem, solve, lo: float, hi: float, grid: int = 24) -> np.ndarray:
    """min over K in [lo, hi] of K · T*(K): a grid, then golden-section search around its best point."""
    if hi - lo <= 1e-6 * hi:
        return solve(problem)                   # the constraints fix the cost
    cache = {}

    def f(k):
        if k not in cache:
            bw = solve(problem, cost_equal=k)
            cache[k] = (problem.cost(bw) * problem.time_ns(bw), bw)
        return cache[k][0]
    # the ends of the range are single points or faces of the feasible set: stay a hair inside
    eps = 1e-6 * (hi - lo)
    ks = np.linspace(lo + eps, hi - eps, grid + 1)
    vals = [f(k) for k in ks]
    i = int(np.argmin(vals))
    a, b = ks[max(i - 1, 0)], ks[min(i + 1, grid)]
    g = (np.sqrt(5) - 1) / 2
    x1, x2 = b - g * (b - a), a + g * (b - a)
    for _ in range(60):
        if f(x1) < f(x2):
            b, x2 = x2, x1
            x1 = b - g * (b - a)
        else:
            a, x1 = x1, x2
            x2 = a + g * (b - a)
        if b - a <= 1e-7 * hi:
            break
    best = min(cache, key=lambda k: cache[k][0])
    return cache[best][1]


def equal_split(problem: Problem) -> np.ndarray:
    """The same total bandwidth shared equally between the dimensions (LIBRA's baseline)."""
    c = problem.constraints
    total = c.total if c.total is not None else c.total_at_most
    if total is None:
        raise InputError("an equal split needs a total bandwidth (--total-bw or `total` in the constraints)")
    return np.full(problem.dims, total / problem.dims)


__all__ = ["InfeasibleError", "METHODS", "OBJECTIVES", "Problem", "Solution", "equal_split", "optimize"]
