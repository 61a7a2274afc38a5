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


def training_curves(result: dict, path) -> Path:
    """``ainic train``'s comparison: held-out accuracy (top) and loss (bottom) per epoch, means over the seeds,
    the baseline and each algorithm's configurations in their own column; on the right every configuration's
    final accuracy and loss (mean, with the seeds' min and max)."""
    plt = _pyplot()
    summary = result["summary"]
    base = next(iter(summary))
    algorithms = list(dict.fromkeys(n.split()[0] for n in summary if n != base))
    seeds = len(result["meta"]["seeds"])
    fig, axes = plt.subplots(2, len(algorithms) + 1, figsize=(5.2 * (len(algorithms) + 1), 8.0), squeeze=False)
    for row, (key, label) in enumerate((("test_accuracy", "held-out accuracy %"), ("test_loss", "held-out loss"))):
        for ax, algorithm in zip(axes[row], algorithms):
            for name, s in summary.items():
                if name == base or name.split()[0] == algorithm:
                    y = [(100 if row == 0 else 1) * v for v in s["curves"][key]]
                    ax.plot(range(1, len(y) + 1), y, label=name, lw=2.4 if name == base else 1.1, zorder=3 if name == base else 2,
                            ls="--" if "+EF" in name else "-", color="black" if name == base else None)
            ax.set_title(f"{algorithm}: {label} (mean of {seeds} seeds)", fontsize=10)
            ax.set_xlabel("epoch")
            ax.set_ylabel(label)
            if row == 0:
                ax.set_ylim(85, 100)
            else:
                ax.set_yscale("log")
            ax.legend(fontsize=7, ncol=2)
        ax = axes[row][-1]
        names = list(summary)
        final = {"test_accuracy": ("accuracy_mean", "accuracy_min", "accuracy_max", 100),
                 "test_loss": ("test_loss_mean", None, None, 1)}[key]
        mean = [final[3] * summary[n][final[0]] for n in names]
        if final[1]:
            err = [[m - 100 * summary[n][final[1]] for m, n in zip(mean, names)],
                   [100 * summary[n][final[2]] - m for m, n in zip(mean, names)]]
        else:
            losses = [summary[n]["final_test_loss"] for n in names]
            err = [[m - min(v) for m, v in zip(mean, losses)], [max(v) - m for m, v in zip(mean, losses)]]
        ax.barh(range(len(names)), mean, xerr=err, color=["black"] + ["C0"] * (len(names) - 1), capsize=2)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.invert_yaxis()
        lo = min(m - d for m, d in zip(mean, err[0]))
        hi = max(m + d for m, d in zip(mean, err[1]))
        pad = 0.1 * (hi - lo) or 0.05 * abs(hi) or 1.0      # every configuration the same: still a range
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_xlabel(f"final {label} ({result['meta']['nodes']} ranks; bars: min .. max over seeds)", fontsize=9)
    return _save(plt, fig, path)
