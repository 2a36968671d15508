"""What a sweep costs on each executor: the same grid (the dumbbell at 3 bottleneck rates x 2
queue limits x N seeds, D seconds each) in this process, on a local pool of two processes, and
on a Dask cluster of one scheduler and two worker processes started here (loopback). Checks
that all three give the same numbers, then prints a Markdown table for BENCHMARKS.md.

    .venv/bin/python bench/sweep_dask.py [--seeds 4] [--duration 2s] [--repeat 3]

Each executor's time is the best of ``--repeat`` runs of the whole grid; the Dask cluster is
started once, before timing (``--scheduler`` assumes a running cluster).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from latnet import sweep

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "experiments" / "dumbbell.toml"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--duration", default="2s")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    vary = [
        ("links[0].rate", ["50Mbps", "100Mbps", "200Mbps"]),
        ("links[0].queue.limit_packets", ["20", "100"]),
    ]
    sets = [("sim.duration", args.duration), ("flows[bursty3].start", "0s")]
    seeds = list(range(1, args.seeds + 1))
    n = len(sweep.points(vary)) * len(seeds)

    def timed(**where) -> tuple[float, list[dict]]:
        best, runs = float("inf"), []
        for _ in range(args.repeat):
            t0 = time.monotonic()
            runs = sweep.run_sweep(SCENARIO, vary=vary, seeds=seeds, sets=sets, **where)
            best = min(best, time.monotonic() - t0)
        return best, runs

    t_one, one = timed(workers=1)
    t_pool, pool = timed(workers=2)
    with sweep.local_cluster(workers=2) as address:
        t_dask, dask = timed(scheduler=address)
    same = sweep.flows_frame(one).equals(sweep.flows_frame(pool)) and sweep.flows_frame(one).equals(
        sweep.flows_frame(dask)
    )
    if not same:
        raise SystemExit("the executors disagree: not a benchmark, a bug")
    print(
        f"{n} runs of {SCENARIO.name} ({args.duration} each), best of {args.repeat}, "
        f"{os.cpu_count()} CPUs, {platform.python_version()}; results identical on all three\n"
    )
    print("| executor | wall time (s) | runs/s | vs one process |")
    print("|---|---:|---:|---:|")
    for name, t in (
        ("this process (`--workers 1`)", t_one),
        ("local pool, 2 processes (default here)", t_pool),
        ("Dask, 2 worker processes on loopback (`--scheduler`)", t_dask),
    ):
        print(f"| {name} | {t:.2f} | {n / t:.1f} | {t_one / t:.2f}x |")


if __name__ == "__main__":
    main()
