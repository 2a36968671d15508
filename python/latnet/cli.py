"""The `latnet` command.

latnet run SCENARIO.toml [--out DIR] [--seed N] [--set KEY=VALUE ...] [--no-packets] [--pcap]
           [--queues INTERVAL] [--plot] [--quiet]
           [--mode sim|emu|both]
latnet check SCENARIO.toml
latnet reproduce SEED [--quick] [--out DIR] [--emulated] [--scheduler ADDRESS]
latnet sweep SCENARIO.toml --vary KEY=V1,V2 [--set KEY=VALUE] [--seeds N] [--scheduler ADDRESS]
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path

from . import LatnetError, ScenarioError, UsageError, __version__
from . import check as check_scenario
from . import run as run_scenario
from ._latnet import duration_ns
from .commands import add_keep_cpus_awake, register_all, scenario_warnings, seed
from .progress import time_bar
from .reproduce import EMULATED, SEEDS, SWEEPS, load
from .table import flow_table, tcp_table

EPILOG = """\
scenario files: TOML with [sim], [defaults], [[nodes]], [[links]], [[routes]], [[flows]] and
[output]; the format is documented in docs/scenario.md and examples live in experiments/.

exit status: 0 on success, 2 for a scenario or usage error (the message names the file, line,
key and what was expected), 1 for anything else.
"""


def _interval(text: str) -> str:
    """argparse type of --queues: a positive duration as scenario files write it."""
    try:
        ok = duration_ns(text) > 0
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected an interval such as 1ms: {e}") from None
    if not ok:
        raise argparse.ArgumentTypeError("expected an interval above zero, such as 1ms")
    return text


def cmd_run(args: argparse.Namespace) -> int:
    """--set: run a copy of the scenario with the keys set (in a temporary folder, under the
    file's name, so outputs land where they would without --set)."""
    if not args.set:
        return _cmd_run(args)
    import tempfile

    from .sweep import with_sets

    path = Path(args.scenario)
    with scenario_warnings():  # the copy's, said once, naming the file and the keys set
        text = with_sets(path, [(k, v[0]) for k, v in args.set])
    with tempfile.TemporaryDirectory(prefix="latnet-set-") as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(text)
        args.scenario = str(copy)
        args.warned = True
        return _cmd_run(args)


def _set_arg(text: str) -> tuple[str, list[str]]:
    """argparse type of --set: KEY=VALUE."""
    from .sweep import parse_assignment

    try:
        return parse_assignment(text, many=False)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _cmd_run(args: argparse.Namespace) -> int:
    if args.mode != "sim":
        from .commands.emulate import cmd_run_emu

        return cmd_run_emu(args)
    path = Path(args.scenario)
    cb, close = time_bar(not args.quiet and sys.stderr.isatty(), path.stem)
    try:
        with scenario_warnings(show=not getattr(args, "warned", False)):
            res = run_scenario(
                path,
                seed=args.seed,
                packets=args.packets,
                pcap=args.pcap or None,
                queues=args.queues,
                progress=cb,
            )
    finally:
        close()
    out = Path(args.out) if args.out else Path("out") / res.summary["scenario"]
    written = res.write(out)
    cdf = out / "latency_cdf.png"
    if args.plot and res.packets is not None:
        from .plot import latency_cdf

        written.append(latency_cdf(res, cdf))
    elif cdf.is_file():
        cdf.unlink()  # an earlier run's: the directory holds one run (see Results.write)
    print(flow_table(res))
    tcp = tcp_table(res)
    if tcp is not None:
        print("\n" + tcp)
    if not args.quiet:
        files = [Path(w) for w in written]
        names = [w.name for w in files if w.parent.name != "pcap"]
        pcaps = len(files) - len(names)
        if pcaps:
            names.append(f"pcap/ ({pcaps} link captures)")
        print(f"\nwrote {', '.join(names)} to {out}/")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from . import load as load_run
    from .table import emulation_timing

    try:
        res = load_run(args.dir)
    except FileNotFoundError as e:
        raise UsageError(f"{args.dir}: {e.strerror}") from None
    print(flow_table(res))
    tcp = tcp_table(res)
    if tcp is not None:
        print("\n" + tcp)
    timing = emulation_timing(res.summary)
    if timing is not None:
        print(timing)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    with scenario_warnings():
        print(check_scenario(Path(args.scenario)))
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    if args.emulated and args.seed not in EMULATED:
        print(
            f"latnet reproduce {args.seed} --emulated: no emulated reproduction of this seed "
            f"(emulated: {', '.join(EMULATED)})",
            file=sys.stderr,
        )
        return 2
    if args.scheduler and (args.emulated or args.seed not in SWEEPS):
        print(
            f"latnet reproduce {args.seed}{' --emulated' if args.emulated else ''} --scheduler: "
            f"this reproduction runs in one process; --scheduler is for the seeds whose runs "
            f"are a sweep: {', '.join(SWEEPS)}",
            file=sys.stderr,
        )
        return 2
    mod = load(args.seed, emulated=args.emulated)
    if mod is None:
        print(
            f"latnet reproduce {args.seed}: not available yet in this version "
            f"({SEEDS[args.seed]} has not landed)",
            file=sys.stderr,
        )
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra = {"scheduler": args.scheduler} if args.scheduler else {}
    doc = mod.run(quick=args.quick, out=out, **extra)
    target = out / f"reproduce-{args.seed}{'-emulated' if args.emulated else ''}.json"
    target.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {target}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latnet",
        description="latnet: forward, schedule and admit traffic so that each flow gets the "
        "latency it was promised, and prove it by simulation, real packets and network calculus.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"latnet {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser(
        "run",
        help="run one scenario in the simulator and print its flow table",
        description="Run one scenario in the deterministic simulator. Prints one "
        "row per flow (packets, loss, throughput, latency min/mean/p99/max and "
        "jitter in microseconds), a TCP table when the scenario has TCP flows, and "
        "writes results.json, flows.csv, timeseries.csv (TCP flows) and, with "
        "per-packet records, packets.csv and hops.csv into the output directory (queues.csv and "
        "pcap/ with --queues and --pcap).",
    )
    r.add_argument("scenario", help="scenario file (TOML)")
    r.add_argument("--out", metavar="DIR", help="output directory (default: out/<scenario name>)")
    r.add_argument("--seed", type=seed, help="override the scenario's seed")
    r.add_argument(
        "--set",
        action="append",
        type=_set_arg,
        metavar="KEY=VALUE",
        help="set a key of the scenario for this run (repeatable): links[0].rate=50Mbps, "
        "flows[video].size=500, sim.duration=2s; see `latnet sweep --help`",
    )
    per_packet = r.add_mutually_exclusive_group()
    per_packet.add_argument(
        "--packets",
        dest="packets",
        action="store_true",
        default=None,
        help="record every packet and hop (packets.csv, hops.csv; emulated runs: the packets "
        "received, from the receivers' logs, and every hop and drop, from the switches)",
    )
    per_packet.add_argument(
        "--no-packets",
        dest="packets",
        action="store_false",
        help="do not record per-packet data even if the scenario asks",
    )
    r.add_argument(
        "--pcap",
        action="store_true",
        help="write a packet capture of every link direction (pcap/<node>-<peer>.pcap, "
        "nanosecond timestamps from the scenario's time zero; simulated and emulated runs)",
    )
    r.add_argument(
        "--queues",
        metavar="INTERVAL",
        type=_interval,
        help="sample every port's queue each INTERVAL (e.g. 1ms) into queues.csv (simulated and "
        "emulated runs)",
    )
    r.add_argument(
        "--plot",
        action="store_true",
        help="also draw latency_cdf.png (implies per-packet records; simulated and emulated runs)",
    )
    r.add_argument("--quiet", action="store_true", help="no progress bar, table only")
    r.add_argument(
        "--mode",
        choices=["sim", "emu", "both"],
        default="sim",
        help="sim: the simulator (default); emu: real packets between network namespaces "
        "through latnet-switch (root); both: run both and print them side by side",
    )
    r.add_argument(
        "--switch-processes",
        choices=["auto", "per-node", "one"],
        default="auto",
        help="emulation: a latnet-switch process per switch, or one process running every "
        "switch in one loop; auto (default): one when the switches outnumber the CPUs",
    )
    r.add_argument(
        "--host-nics",
        choices=["shaped", "veth"],
        default="shaped",
        help="emulation: shaped (default): a host with TCP flows sends through a token bucket "
        "at its link's rate, as a NIC does, so that TCP small queues hold its segments back; "
        "veth: the bare veth, which takes every frame at once",
    )
    add_keep_cpus_awake(r)
    r.set_defaults(func=cmd_run)

    sh = sub.add_parser(
        "show",
        help="print the tables of a run's output directory (latnet run --out) again",
    )
    sh.add_argument("dir", metavar="DIR", help="a run's output directory (holds results.json)")
    sh.set_defaults(func=cmd_show)

    c = sub.add_parser("check", help="validate a scenario file without running it")
    c.add_argument("scenario", help="scenario file (TOML)")
    c.set_defaults(func=cmd_check)

    rep = sub.add_parser(
        "reproduce",
        help="reproduce a seed paper's tables",
        description="Run the experiments of one seed paper and print its tables "
        "with the paper's numbers beside ours; writes DIR/reproduce-SEED.json.\n\n"
        + "\n".join(f"  {k:10s} {v}" for k, v in SEEDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rep.add_argument(
        "seed", choices=sorted(SEEDS), metavar="SEED", help="one of: " + ", ".join(SEEDS)
    )
    rep.add_argument(
        "--quick",
        action="store_true",
        help="a smaller version that finishes in well under a minute",
    )
    rep.add_argument("--out", metavar="DIR", default="out", help="output directory (default: out)")
    rep.add_argument(
        "--emulated",
        action="store_true",
        help="run on an emulated testbed (latnet-switch and real Linux UDP / TCP between "
        "network namespaces; root) instead of the simulator; writes "
        "DIR/reproduce-SEED-emulated.json. Seeds: " + ", ".join(EMULATED),
    )
    rep.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the seed's runs on the Dask cluster of this scheduler (tcp://host:8786; its "
        "workers need this version of latnet) instead of local processes. Seeds: "
        + ", ".join(SWEEPS),
    )
    add_keep_cpus_awake(rep)
    rep.set_defaults(func=cmd_reproduce)

    register_all(sub)
    return p


def emulates(args: argparse.Namespace) -> bool:
    """Whether the command parsed runs real-time emulation: ``--keep-cpus-awake`` acts only
    then (``run`` without ``--mode emu|both``, ``reproduce`` or ``chameleon verify`` without
    ``--emulated`` only simulate, and the loops would burn the CPUs' idle time for nothing)."""
    return getattr(args, "mode", "emu") != "sim" and getattr(args, "emulated", True)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "plot", False):
        if args.packets is False:
            print(
                f"latnet {args.command}: --plot draws per-packet records, which --no-packets "
                "leaves out",
                file=sys.stderr,
            )
            return 2
        args.packets = True
    awake = nullcontext()
    if getattr(args, "keep_cpus_awake", False):
        from .emu import cpus_kept_awake

        if emulates(args):
            awake = cpus_kept_awake()
        else:
            print(
                f"latnet {args.command}: --keep-cpus-awake: nothing here is emulated "
                "(no --mode emu|both or --emulated); no loops started",
                file=sys.stderr,
            )
    try:
        with awake:
            return args.func(args)
    except (ScenarioError, UsageError) as e:
        print(f"latnet: {e}", file=sys.stderr)
        return 2
    except (LatnetError, OSError) as e:
        print(f"latnet: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("latnet: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
