"""Plots of results (PNG, matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def latency_cdf(results, path: str | os.PathLike[str], flows: str | list[str] | None = None) -> str:
    """Draw the end-to-end latency CDF of each flow (or of ``flows``: a name or a list of
    names) into a PNG at ``path``; a flow that received nothing has no line.

    Needs per-packet records (``latnet.run(..., packets=True)``, the default).
    """
    pk = results.packets
    if pk is None:
        raise ValueError("latency_cdf needs per-packet records: run with packets=True")
    known = [f["name"] for f in results.summary["flows"]]
    names = known if flows is None else [flows] if isinstance(flows, str) else list(flows)
    unknown = [n for n in names if n not in known]
    if unknown or (flows is not None and not names):
        raise ValueError(
            f"flows: expected names of the run's flows ({', '.join(known) or 'none'}), "
            f"got {', '.join(map(repr, unknown)) or 'none'}"
        )
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for name in names:
        lat = pk.loc[(pk["flow"] == name) & pk["received"], "latency_ns"].to_numpy()
        if lat.size == 0:
            continue
        x = np.sort(lat) / 1e3
        y = np.arange(1, x.size + 1) / x.size
        ax.step(x, y, where="post", label=f"{name} (n={x.size})")
    ax.set_xlabel(f"latency (us, {results.latency_convention})")
    ax.set_ylabel("fraction of packets")
    ax.set_title(f"{results.summary['scenario']}: end-to-end latency CDF")
    ax.grid(True, alpha=0.3)
    if ax.get_lines():
        ax.legend(loc="lower right", fontsize="small")
    else:
        ax.text(0.5, 0.5, "no packet received", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)


#: What ``sweep`` can draw: column of the sweep summary, axis label, scale to that unit.
SWEEP_METRICS = {
    "latency_p99_ns": ("latency p99 (us)", 1e3),
    "latency_p50_ns": ("latency p50 (us)", 1e3),
    "latency_max_ns": ("latency max (us)", 1e3),
    "throughput_bps": ("throughput (Mbit/s)", 1e6),
    "loss_rate": ("loss (%)", 0.01),
}


def sweep(
    runs: list[dict],
    path: str | os.PathLike[str],
    metric: str = "latency_p99_ns",
    spread: str = "sd",
) -> str:
    """Draw one metric of a sweep (``latnet.sweep.run_sweep``'s runs) into a PNG at ``path``:
    the first varied key along x (in the order given), one line per flow and combination of the
    other keys, the mean over seeds with error bars of ``spread`` (``sd``: the sample standard
    deviation; ``ci95``: the 95 % confidence interval of the mean)."""
    from .sweep import summary_frame

    if metric not in SWEEP_METRICS:
        raise ValueError(f"metric: expected one of {', '.join(SWEEP_METRICS)}, got {metric!r}")
    if spread not in ("sd", "ci95"):
        raise ValueError(f"spread: expected sd or ci95, got {spread!r}")
    if not runs or not runs[0]["point"]:
        raise ValueError("a sweep plot needs at least one varied key")
    label, scale = SWEEP_METRICS[metric]
    sf = summary_frame(runs)
    keys = list(runs[0]["point"])
    xkey, others = keys[0], keys[1:]
    xs = list(dict.fromkeys(str(r["point"][xkey]) for r in runs))
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for group, df in sf.groupby([*others, "flow"], sort=False):
        group = group if isinstance(group, tuple) else (group,)
        rest = [f"{k}={v}" for k, v in zip(others, group[:-1], strict=True)]
        name = ", ".join([*rest, str(group[-1])])
        pos = [xs.index(str(v)) for v in df[xkey]]
        ax.errorbar(
            pos,
            df[f"{metric}_mean"] / scale,
            yerr=df[f"{metric}_{spread}"].fillna(0.0) / scale,
            marker="o",
            capsize=3,
            label=name,
        )
    ax.set_xticks(range(len(xs)), xs)
    ax.set_xlabel(xkey)
    ax.set_ylabel(label)
    seeds = int(sf["runs"].max())
    what = "sd" if spread == "sd" else "95 % CI"
    ax.set_title(f"mean ± {what} over {seeds} seed{'s' if seeds != 1 else ''}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)
