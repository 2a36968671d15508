"""`latnet sweep`: one scenario over the cross product of parameter values and seeds.

latnet sweep SCENARIO.toml --vary KEY=V1,V2,... [--vary ...] [--set KEY=VALUE ...]
             [--seeds N | --seed-list S1,S2,...] [--scheduler ADDRESS] [--workers N]
             [--out DIR] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from .. import sweep
from ..plot import SWEEP_METRICS
from . import run_progress, scenario_warnings, whole


def _assignment(many: bool):
    def parse(text: str) -> tuple[str, list[str]]:
        try:
            return sweep.parse_assignment(text, many)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected seeds as integers separated by commas, such as 1,2,3, got {text!r}"
        ) from None
    if any(not 0 <= s < 2**64 for s in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(
            f"expected distinct seeds from 0 to 2^64 - 1, got {text!r}"
        )
    return seeds


_positive = whole(1)


def _clean(x):
    """JSON has no NaN: null instead."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def cmd_sweep(args: argparse.Namespace) -> int:
    path = Path(args.scenario)
    seeds = args.seed_list or list(range(1, args.seeds + 1))
    vary = args.vary or []
    sets = [(k, v[0]) for k, v in args.set or []]
    both = sorted({k for k, _ in sets} & {k for k, _ in vary})
    try:
        if both:
            raise ValueError(f"{', '.join(both)}: given to both --set and --vary")
        npoints = len(sweep.points(vary))
        if args.plot_metrics == []:
            args.plot_metrics = ["latency_p99_ns"]
        if args.plot_metrics and not vary:
            raise ValueError("--plot needs a --vary key for its x axis")
    except ValueError as e:
        print(f"latnet sweep: {e}", file=sys.stderr)
        return 2
    total = npoints * len(seeds)
    where = f"Dask scheduler {args.scheduler}" if args.scheduler else "local processes"
    if not args.quiet:
        print(f"{npoints} points x {len(seeds)} seeds = {total} runs on {where}", file=sys.stderr)
    cb, close = run_progress(not args.quiet and sys.stderr.isatty(), total, "sweep")
    try:
        with scenario_warnings():
            runs = sweep.run_sweep(
                path,
                vary=vary,
                seeds=seeds,
                sets=sets,
                scheduler=args.scheduler,
                workers=args.workers,
                progress=cb,
            )
    finally:
        close()
    out = Path(args.out) if args.out else Path("out") / f"sweep-{path.stem}"
    out.mkdir(parents=True, exist_ok=True)
    sweep.flows_frame(runs).to_csv(out / "sweep.csv", index=False)
    sweep.summary_frame(runs).to_csv(out / "sweep-summary.csv", index=False)
    doc = {
        "scenario": str(path),
        "vary": [{"key": k, "values": v} for k, v in vary],
        "set": [{"key": k, "value": v} for k, v in sets],
        "seeds": seeds,
        "scheduler": args.scheduler,
        "runs": runs,
    }
    (out / "sweep.json").write_text(json.dumps(_clean(doc), indent=2) + "\n")
    written = ["sweep.csv", "sweep-summary.csv", "sweep.json"]
    spread = "ci95" if args.ci else "sd"
    if args.plot_metrics:
        from ..plot import sweep as plot_sweep

        for metric in args.plot_metrics:
            name = f"sweep-{metric.removesuffix('_ns').removesuffix('_bps')}.png"
            plot_sweep(runs, out / name, metric=metric, spread=spread)
            written.append(name)
    print(sweep.summary_table(runs, spread=spread))
    if not args.quiet:
        print(f"\nwrote {', '.join(written)} to {out}/")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="run one scenario over a grid of parameter values and seeds (locally or on Dask)",
        description="Run one scenario in the simulator at every combination of the --vary "
        "values and every seed, on local processes or a Dask cluster (--scheduler). Prints, "
        "per point and flow, the mean ± sd over seeds of throughput, loss and latency "
        "p50 / p99 / max; writes sweep.csv (one row per run and flow), sweep-summary.csv and "
        "sweep.json. Every point is checked before anything runs.\n\n"
        "KEY is a path into the scenario file: sim.duration, links[0].rate, "
        "links[0].queue.limit_packets, flows[video].traffic.rate (an array element by index "
        'or by its name). A value is TOML (50, true, "1ms", { kind = "fifo" }) or else a '
        "string (50Mbps, 1ms).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", help="scenario file (TOML)")
    p.add_argument(
        "--vary",
        action="append",
        type=_assignment(True),
        metavar="KEY=V1,V2,...",
        help="a key and its values (repeat for a grid; commas inside [ ], { } or quotes do "
        "not split)",
    )
    p.add_argument(
        "--set",
        action="append",
        type=_assignment(False),
        metavar="KEY=VALUE",
        help="set a key for every run (repeatable)",
    )
    s = p.add_mutually_exclusive_group()
    s.add_argument("--seeds", type=_positive, default=3, metavar="N", help="seeds 1..N (default 3)")
    s.add_argument("--seed-list", type=_seed_list, metavar="S1,S2,...", help="these seeds")
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on the Dask cluster of this scheduler (tcp://host:8786; its workers need "
        "this version of latnet); default: a local process pool",
    )
    p.add_argument("--workers", type=_positive, help="local processes (default: one per core)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: out/sweep-<name>)")
    p.add_argument(
        "--plot",
        dest="plot_metrics",
        nargs="*",
        choices=sorted(SWEEP_METRICS),
        metavar="METRIC",
        help="draw sweep-METRIC.png (METRIC less its _ns or _bps: sweep-latency_p99.png): the "
        "metric against the first varied key, a line per flow "
        "(and per value of the other keys), mean ± sd (or --ci) over seeds; METRIC is one of "
        + ", ".join(SWEEP_METRICS)
        + " (default: latency_p99_ns)",
    )
    p.add_argument(
        "--ci",
        action="store_true",
        help="show the 95 %% confidence interval of each mean (Student's t over the seeds) "
        "instead of the standard deviation, in the table and the plots (the CSV has both)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress, table only")
    p.set_defaults(func=cmd_sweep)
