"""The performance commands' pictures (matplotlib, PNG, no display needed)."""

from pathlib import Path


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("plots need matplotlib: `make setup` installs it (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(plt, fig, path) -> Path:
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def bandwidth_split(result: dict, path, title: str = "") -> Path:
    """Bars of the bandwidth per dimension: the optimum beside the equal split (if there is one)."""
    plt = _pyplot()
    dims = result["dimensions"]
    labels = [f"{i}: {d['topology']}" + (f":{d['codec']}" if d["codec"] != "none" else "") + f" ×{d['npus']}"
              for i, d in enumerate(dims)]
    x = range(len(dims))
    fig, ax = plt.subplots(figsize=(1.6 * len(dims) + 3, 3.6))
    eq = result.get("equal_split")
    w = 0.38 if eq else 0.6
    ax.bar([i - (w / 2 if eq else 0) for i in x], result["bandwidth_gbps"], w,
           label=f"optimum ({result['objective']}): {result['time_ns'] / 1e6:.3f} ms")
    if eq:
        ax.bar([i + w / 2 for i in x], eq["bandwidth_gbps"], w, label=f"equal split: {eq['time_ns'] / 1e6:.3f} ms")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("GB/s per node")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def speedup_vs_nodes(result: dict, path) -> Path:
    """Speedup over the hosts' ring against nodes (log scale), per backend, one panel per overlap."""
    plt = _pyplot()
    overlaps = list(result["overlap"])
    fig, axes = plt.subplots(1, len(overlaps), figsize=(5.2 * len(overlaps), 3.8), sharey=True)
    axes = list(axes) if len(overlaps) > 1 else [axes]
    for ax, overlap in zip(axes, overlaps):
        for name, r in result["overlap"][overlap].items():
            style = "k--" if name == "host ring" else "s:" if "switch" in name else "o-"
            speedup = [float("nan") if s is None else s for s in r["speedup"]]     # None: more ranks than it holds
            ax.semilogx(result["nodes"], speedup, style, ms=3, label=name, base=2)
        for n, s in result.get("paper", {}).items():
            ax.plot([int(n)], [s], "r*", ms=10)
        ax.set_xlabel("nodes")
        ax.set_title(f"overlap: {overlap}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("speedup over the hosts' ring all-reduce")
    axes[0].legend(fontsize=7, title="red stars: the paper", title_fontsize=7)
    return _save(plt, fig, path)


def predicted_vs_measured(rows: list, path) -> Path:
    """The calibration: predicted against measured cycles, fitted and held-out points apart."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 4.6))
    for role, marker in (("fit", "o"), ("held_out", "x")):
        pts = [(r["measured_cycles"], r["predicted_cycles"]) for r in rows if r["role"] == role]
        if pts:
            ax.loglog(*zip(*pts), marker, ms=4, label=role.replace("_", " "))
    lo = min(r["measured_cycles"] for r in rows)
    hi = max(r["measured_cycles"] for r in rows)
    ax.loglog([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.loglog([lo, hi], [1.05 * lo, 1.05 * hi], "k:", lw=0.6)
    ax.loglog([lo, hi], [0.95 * lo, 0.95 * hi], "k:", lw=0.6, label="±5 %")
    ax.set_xlabel("measured cycles (RTL, Verilator)")
    ax.set_ylabel("predicted cycles (model)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return _save(plt, fig, path)


__all__ = ["bandwidth_split", "predicted_vs_measured", "speedup_vs_nodes"]
