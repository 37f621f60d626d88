"""Plots for the benchmark scripts (matplotlib, PNG): each run.py passes the
figures it has just measured, so a plot always shows one run's numbers.
Imported lazily, so the benchmarks themselves run without matplotlib."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ENGINES = {"td": "tensord", "ort": "onnxruntime", "ov": "OpenVINO", "tf": "TensorFlow"}


def engine(rows, threads, path, keys=("td", "ort", "tf")):
    """rows: [(model, {(engine_key, batch): result})] from bench/engine/run.py."""
    models = [m for m, _ in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        label = ENGINES[key]
        xs = [j + (i - (len(keys) - 1) / 2) * width for j in range(len(models))]
        ax1.bar(xs, [r[key, 1]["p50_us"] for _, r in rows], width, label=label)
        ax2.bar(xs, [32e6 / r[key, 32]["p50_us"] for _, r in rows], width, label=label)
    for ax, title in ((ax1, "batch 1: p50 latency (µs, log, lower is better)"),
                      (ax2, "batch 32: inferences/s (log, higher is better)")):
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels(models, rotation=20)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    ax1.legend()
    fig.suptitle(f"Engine, {threads} thread(s), same run")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def batching(results, path):
    """results: the per-cell dicts of bench/batching/run.py."""
    panels = sorted({(r["model"], r["transport"]) for r in results})
    fig, axes = plt.subplots(2, len(panels), figsize=(4 * len(panels), 7), squeeze=False)
    for col, (model, transport) in enumerate(panels):
        cells = [r for r in results if (r["model"], r["transport"]) == (model, transport)]
        for name in sorted({r["batching"] for r in cells}, key=lambda n: (n != "off", n)):
            pts = sorted((r["clients"], r["rps"], r["p99_ms"]) for r in cells
                         if r["batching"] == name)
            xs = [p[0] for p in pts]
            axes[0][col].plot(xs, [p[1] for p in pts], marker="o", label=f"batching {name}")
            axes[1][col].plot(xs, [p[2] for p in pts], marker="o", label=f"batching {name}")
        axes[0][col].set_title(f"{model}, {transport}: requests/s", fontsize=10)
        axes[1][col].set_title(f"{model}, {transport}: p99 ms", fontsize=10)
        for row in (0, 1):
            axes[row][col].set_xscale("log", base=2)
            axes[row][col].set_xlabel("concurrent clients")
            axes[row][col].grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lifecycle(rows, events, swap_t0, path):
    """rows: (send time s, latency µs, status) per request; events: drop-in times."""
    if not rows:
        return
    t0 = min(r[0] for r in rows)
    fig, ax = plt.subplots(figsize=(12, 4))
    ok = [r for r in rows if r[2] == 200]
    ax.scatter([r[0] - t0 for r in ok], [r[1] / 1000 for r in ok], s=1, alpha=0.3,
               label="request latency")
    bad = [r for r in rows if r[2] != 200]
    if bad:
        ax.scatter([r[0] - t0 for r in bad], [r[1] / 1000 for r in bad], s=6, color="red",
                   label="failed request")
    for i, e in enumerate(events):
        ax.axvline(e - t0, color="orange", alpha=0.5, lw=0.8,
                   label="version dropped in" if i == 0 else None)
    ax.axvline(swap_t0 - t0, color="black", lw=1, ls="--", label="swap phase starts")
    ax.set_yscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("latency ms (log)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
