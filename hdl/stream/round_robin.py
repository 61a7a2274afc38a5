"""Round-robin choice among requesters, with no cycle of arbitration."""

from amaranth import Signal


def round_robin(m, want, last, n: int, name: str):
    """The first requester after ``last`` (a bit per requester in ``want``, ``n`` of them), in the same
    cycle; ``any`` is whether there is one. Returns (pick, any)."""
    pick = Signal(range(max(n, 2)), name=f"{name}_pick")
    anyone = Signal(name=f"{name}_any")
    with m.Switch(last):
        for start in range(n):
            with m.Case(start):
                for i in reversed([(start + k) % n for k in range(1, n + 1)]):
                    with m.If(want[i]):
                        m.d.comb += [pick.eq(i), anyone.eq(1)]
    return pick, anyone
