"""Per-request runtime of the Chameleon controller: whole admission runs (scenario 8, until the
first rejection) on fat-trees k = 4, 8, 12 with 4 queues, with and without rerouting, one run
at a time (no other worker competing), for two server counts: 40 per edge switch (the issue's
setting) and 40 x k/2 per edge switch (the paper's 640 to 17,280 servers).

    .venv/bin/python bench/chameleon_runtime.py [--runs N] [--ks 4,8,12] [--json FILE]

Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

from latnet import chameleon


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ks", default="4,8,12")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    rows = []
    for per_edge in ("40", "40k/2"):
        for k in ks:
            m = 40 if per_edge == "40" else chameleon.default_hosts_per_edge(k)
            for system in ("chameleon-noreroute", "chameleon"):
                t0 = time.monotonic()
                runs = chameleon.evaluate(
                    system, scenario=8, runs=args.runs, k=k, queues=4, hosts_per_edge=m, workers=1
                )
                s = chameleon.summarize(runs)
                rows.append(
                    {
                        "servers": k * k * m // 2,
                        "k": k,
                        "per_edge": m,
                        "system": system,
                        "accepted": s["accepted"]["mean"],
                        "reconfigured": s["reconfigured"],
                        **{f"rt_{q}": s["runtime_ms"][q] for q in ("p50", "mean", "p99", "max")},
                        "requests": s["runtime_ms"]["requests"],
                        "wall_s": time.monotonic() - t0,
                    }
                )
                r = rows[-1]
                print(
                    f"k={k} M={m} {system}: {r['accepted']:.0f} flows, p50 {r['rt_p50']:.3f} ms, "
                    f"p99 {r['rt_p99']:.3f} ms, max {r['rt_max']:.1f} ms ({r['wall_s']:.0f} s)",
                    flush=True,
                )
    print(f"\n{platform.processor() or platform.machine()}, {args.runs} runs per row\n")
    print(
        "| k | servers | system | accepted (mean) | reconfigured | p50 ms | mean ms | p99 ms "
        "| max ms | requests |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['k']} | {r['servers']:,} | {r['system']} | {r['accepted']:,.0f} "
            f"| {r['reconfigured']:.0f} | {r['rt_p50']:.3f} | {r['rt_mean']:.3f} "
            f"| {r['rt_p99']:.3f} | {r['rt_max']:.1f} | {r['requests']:,} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
