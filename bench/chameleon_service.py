"""What the REST service and its SQLite store cost per admission: one fixed pseudo-random
stream of requests (host pairs, 1-20 Mbit/s, bursts of 1,500-15,000 bytes, deadlines of 2-20
ms) offered to the controller in this process (`chameleon.Controller.request`) and over HTTP
to `latnet chameleon serve` (one request per connection, committed to SQLite before the
answer; through `chameleon.Client`). Checks that both give the same answer to every request,
then prints a Markdown table for BENCHMARKS.md.

    .venv/bin/python bench/chameleon_service.py [--requests 400] [--k 4] [--queues 8]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from latnet import chameleon


def stream(hosts: list[str], n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.sample(hosts, 2)
        out.append(
            {
                "src": a,
                "dst": b,
                "rate_bps": rng.choice([1, 2, 5, 10, 20]) * 1_000_000,
                "burst_bytes": rng.choice([1500, 3000, 15000]),
                "deadline_ns": rng.choice([2, 5, 10, 20]) * 1_000_000,
            }
        )
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--queues", type=int, default=8)
    args = ap.parse_args()
    ctl = chameleon.Controller(k=args.k, queues=args.queues)
    reqs = stream(ctl.hosts(), args.requests)

    def offer(target) -> tuple[list[float], list[dict]]:
        times, answers = [], []
        for r in reqs:
            t0 = time.perf_counter()
            args = (r["src"], r["dst"], r["rate_bps"], r["burst_bytes"], r["deadline_ns"])
            d = target.request(*args)
            times.append(time.perf_counter() - t0)
            answers.append(d)
        return times, answers

    local, local_answers = offer(ctl)

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "controller.db"
        argv = [sys.executable, "-m", "latnet.cli", "chameleon", "serve", "--k", str(args.k)]
        argv += ["--queues", str(args.queues), "--db", str(db), "--listen", "127.0.0.1:0"]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        try:
            base = p.stdout.readline().split()[2]
            remote, remote_answers = offer(chameleon.Client(base))
        finally:
            p.terminate()
            p.wait(timeout=10)
    if local_answers != remote_answers:
        raise SystemExit("the service and the library disagree: not a benchmark, a bug")
    admitted = sum(a["admitted"] for a in local_answers)
    print(
        f"{args.requests} requests, k={args.k}, {args.queues} queues, {admitted} admitted; "
        "the same answer to every request in both\n"
    )
    print("| path | p50 (us) | p99 (us) | mean (us) | requests/s |")
    print("|---|---:|---:|---:|---:|")
    for name, xs in (
        ("`Controller.request` in this process", local),
        ("`POST /flows` to `latnet chameleon serve` (HTTP + SQLite commit)", remote),
    ):
        us = [x * 1e6 for x in xs]
        print(
            f"| {name} | {pct(us, 0.5):.0f} | {pct(us, 0.99):.0f} | "
            f"{statistics.fmean(us):.0f} | {len(xs) / sum(xs):.0f} |"
        )


if __name__ == "__main__":
    main()
