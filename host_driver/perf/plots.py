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
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["bandwidth_split"]
