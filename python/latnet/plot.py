"""Plots of results (PNG, matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def latency_cdf(results, path: str | os.PathLike[str], flows: list[str] | None = None) -> str:
    """Draw the end-to-end latency CDF of each flow (or of ``flows``) into a PNG at ``path``.

    Needs per-packet records (``latnet.run(..., packets=True)``, the default).
    """
    pk = results.packets
    if pk is None:
        raise ValueError("latency_cdf needs per-packet records: run with packets=True")
    names = flows or [f["name"] for f in results.summary["flows"]]
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
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)
