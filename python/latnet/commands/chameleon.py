"""`latnet chameleon eval`, `verify`, `transitions`, `serve` and `live`: the Chameleon admission
controller (`serve` and `live` in ``_chameleon_service``).

latnet chameleon eval --system chameleon|chameleon-noreroute|silo|silo-noburst|qjump
                      --scenario N --runs R --k K --queues Q [--hosts-per-edge M] ...
latnet chameleon verify --k K --queues Q [--scenario N] [--emulated [--dilation K]] ...
latnet chameleon transitions --k K --queues Q [--tries N] [--orders ...] ...
latnet chameleon serve (--k K | --topology FILE) [--db FILE] [--listen ADDR:PORT] ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..chameleon import SYSTEMS, crosscheck, evaluate, summarize, transitions
from ..table import render
from . import add_ca_file, add_keep_cpus_awake, client_cert, run_progress, whole
from ._chameleon_service import cmd_live, register_serve


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=whole(1), default=4, help="fat-tree arity (even; default 4)")
    p.add_argument(
        "--hosts-per-edge",
        type=whole(1),
        metavar="M",
        help="servers per edge switch (default k/2, the standard fat-tree; the paper's "
        "scalability study uses 40*k/2)",
    )
    p.add_argument("--topology", metavar="FILE", help="a topology file instead of a fat-tree")
    p.add_argument("--queues", type=whole(1), default=8, help="queues per switch port (default 8)")
    p.add_argument("--scenario", type=whole(0), default=8, help="workload scenario 1..8 (Table 2)")
    p.add_argument("--seed", type=whole(0), default=1, help="seed of the request streams")
    p.add_argument(
        "--per-hop-us",
        type=float,
        default=0.0,
        help="constant per hop added to the end-to-end delay (us, default 0)",
    )


def _topo_kwargs(args) -> dict:
    if args.topology:
        from .. import UsageError

        try:
            Path(args.topology).read_bytes()
        except OSError as e:
            why = f"cannot read the file: {e.strerror}"
            raise UsageError(f"--topology {args.topology}: {why}") from None
        return {"k": None, "topology_file": args.topology}
    return {"k": args.k, "hosts_per_edge": args.hosts_per_edge}


def cmd_eval(args: argparse.Namespace) -> int:
    cb, close = run_progress(not args.quiet and sys.stderr.isatty(), args.runs, args.system)
    try:
        runs = evaluate(
            args.system,
            scenario=args.scenario,
            runs=args.runs,
            queues=args.queues,
            seed=args.seed,
            workers=args.workers,
            scheduler=args.scheduler,
            progress=cb,
            routing=args.routing,
            reroute_limit=args.reroute_limit,
            multiplier=args.multiplier,
            per_hop_ns=int(args.per_hop_us * 1000),
            shaping=not args.no_shaping,
            burst=args.burst,
            **_topo_kwargs(args),
        )
    except ValueError as e:
        print(f"latnet: {e}", file=sys.stderr)
        return 2
    finally:
        close()
    s = summarize(runs)
    where = args.topology or f"k={args.k}"
    print(
        f"{args.system}, scenario {args.scenario}, {where}, {args.queues} queues, "
        f"{s['runs']} runs, seed {args.seed}"
    )
    a, u, t = s["accepted"], s["utilisation"], s["runtime_ms"]
    rows = [
        ["accepted flows", f"{a['mean']:.1f}", f"{a['p1']:.0f}", f"{a['p99']:.0f}", ""],
        ["reconfigured flows", f"{s['reconfigured']:.1f}", "", "", ""],
        ["link utilisation", f"{u['mean']:.3f}", f"{u['p10']:.3f}", f"{u['p90']:.3f}", ""],
        ["runtime per request (ms)", f"{t['mean']:.3f}", "", f"{t['p99']:.3f}", ""],
    ]
    rows[2][4] = f"p50 {u['p50']:.3f}, max {u['max']:.3f}"
    rows[3][4] = f"p50 {t['p50']:.3f}, max {t['max']:.3f}"
    rows[1][4] = f"{s['reroutes']:.1f} reroutes per run"
    print(render(["", "mean", "p1 / p10", "p99 / p90", ""], rows))
    ended = ", ".join(f"{k} x{v}" for k, v in s["ended_by"].items())
    print(f"\nruns ended by: {ended}; {t['requests']:,} requests timed")
    print("utilisation: reserved rate / capacity of switch-to-switch links (host links excluded)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": s, "runs": runs}, f)
        print(f"wrote {args.json}")
    return 0


#: Most flows `verify --emulated` runs: each is a sender process in its host's namespace, and
#: two cores keep a few dozen of them on time at the dilations used here.
MAX_EMULATED_FLOWS = 64


def cmd_verify(args: argparse.Namespace) -> int:
    if args.emulated:
        from ..testbed import require_root

        require_root("latnet chameleon verify --emulated")
    if args.dilation < 1:
        print("latnet: --dilation: expected a whole factor of at least 1", file=sys.stderr)
        return 2
    from .. import LatnetError

    try:
        cert = client_cert(args)
        if args.controller:
            from ..chameleon import Client, replay

            client = Client(
                args.controller,
                token_file=args.token_file,
                ca_file=args.ca_file,
                client_cert=cert,
                crl_file=args.crl_file,
            )
            ctl = replay(client)
            doc = json.loads(
                ctl.cross_check(
                    duration_ms=args.duration_ms,
                    background=not args.no_background,
                    seed=args.seed,
                    phases=args.phases,
                    scenarios=args.emulated,
                )
            )
            who = f"the service at {args.controller}"
        else:
            doc = crosscheck(
                queues=args.queues,
                scenario=args.scenario,
                seed=args.seed,
                system=args.system,
                per_hop_ns=int(args.per_hop_us * 1000),
                duration_ms=args.duration_ms,
                background=not args.no_background,
                tries=args.tries,
                phases=args.phases,
                scenarios=args.emulated,
                **_topo_kwargs(args),
            )
            who = args.system
    except ValueError as e:
        print(f"latnet: {e}", file=sys.stderr)
        return 2
    except LatnetError as e:
        print(f"latnet: {e}", file=sys.stderr)
        return 1
    c = doc["check"]
    print(
        f"{who}: {doc['admitted']} flows admitted, {c['flows']} simulated "
        f"({c['skipped']} skipped), {c['background_flows']} best-effort background flows"
    )
    rows = []
    for p in c["phases"]:
        viol = p["deadline_violations"] + p["budget_violations"] + p["bound_violations"]
        rows.append(
            [
                p["phase"],
                p["sent"],
                p["received"],
                p["dropped"],
                viol + p["misrouted"],
                f"{p['max_e2e_over_deadline']:.3f}",
                f"{p['max_e2e_over_guarantee']:.3f}",
                f"{p['max_queue_over_budget']:.3f}",
                f"{p['max_queue_over_bound']:.3f}",
            ]
        )
    headers = ["phase", "sent", "recv", "drop", "violations"]
    headers += ["e2e/deadline", "e2e/guarantee", "queue/budget", "queue/bound"]
    print("simulated:")
    print(render(headers, rows))
    bad = sum(
        p["deadline_violations"] + p["budget_violations"] + p["bound_violations"] + p["dropped"]
        for p in c["phases"]
    )
    if not args.emulated:
        return 1 if bad else 0
    senders = c["flows"] + c["background_flows"]
    if senders > MAX_EMULATED_FLOWS:
        print(
            f"latnet: --emulated: {senders} flows (admitted and background) is more than the "
            f"emulated testbed runs here (at most {MAX_EMULATED_FLOWS}: one sender process "
            "each); offer fewer requests with --tries, or --no-background",
            file=sys.stderr,
        )
        return 2
    from pathlib import Path

    from ..chameleon import emulate

    out = Path(args.out)
    try:
        emu = emulate(doc, out, dilation=args.dilation)
    except (LatnetError, ValueError) as e:
        print(f"latnet: {e}", file=sys.stderr)
        return 1
    slower = f", {args.dilation} times slower than real time" if args.dilation > 1 else ""
    print(f"emulated (real packets{slower}; latencies from the sender's socket to the receiver's):")
    rows = [
        [
            r["phase"],
            r["sent"],
            r["received"],
            r["lost"],
            r["misrouted"],
            r["deadline_violations"],
            r["guarantee_violations"],
            f"{r['max_e2e_over_deadline']:.3f}",
            f"{r['max_e2e_over_guarantee']:.3f}",
        ]
        for r in emu
    ]
    headers = ["phase", "sent", "recv", "lost", "misrouted", "over deadline", "over guarantee"]
    headers += ["e2e/deadline", "e2e/guarantee"]
    print(render(headers, rows))
    from ..emu import print_stalls

    for r in emu:
        if r["timing"]:
            print(f"{r['phase']}: {r['timing']}")
        if r["stall_ns"] is not None:
            print_stalls(r["phase"], r["attempts"], r["stall_ns"])
    doc["emulated"] = emu
    del doc["scenarios"]
    (out / "verify.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out / 'verify.json'} and each phase's run under {out}/")
    bad += sum(r["deadline_violations"] + r["lost"] + r["misrouted"] for r in emu)
    return 1 if bad else 0


def cmd_transitions(args: argparse.Namespace) -> int:
    from .. import LatnetError

    opts = {
        "duration_ms": args.duration_ms,
        "background": not args.no_background,
        "seed": args.seed,
        "orders": args.orders,
        "phases": args.phases,
        "at_ms": args.at_ms,
        "lag_ms": args.lag_ms,
    }
    try:
        cert = client_cert(args)
        if args.controller:
            from ..chameleon import Client

            client = Client(
                args.controller,
                token_file=args.token_file,
                ca_file=args.ca_file,
                client_cert=cert,
                crl_file=args.crl_file,
            )
            doc = _service_transitions(client, args.max_transitions, opts)
            print(
                f"the service at {args.controller}: {doc['requests']} logged requests, "
                f"{doc['with_moves']} of them moved admitted flows"
            )
        else:
            doc = transitions(
                queues=args.queues,
                scenario=args.scenario,
                system=args.system,
                per_hop_ns=int(args.per_hop_us * 1000),
                tries=args.tries,
                max_transitions=args.max_transitions,
                **opts,
                **_topo_kwargs(args),
            )
            print(
                f"{args.system}: {doc['requests']} requests, {doc['admitted']} admitted, "
                f"{doc['refused']} refused; {doc['with_moves']} of them moved admitted flows"
            )
    except ValueError as e:
        print(f"latnet: {e}", file=sys.stderr)
        return 2
    except LatnetError as e:
        print(f"latnet: {e}", file=sys.stderr)
        return 1
    print(
        f"the first {len(doc['transitions'])} simulated in each order (moves applied to the "
        f"sources {args.at_ms} ms into the run; new-first: {args.lag_ms} ms after the new flow)"
    )
    rows = []
    bad = 0
    for t in doc["transitions"]:
        new = "-" if t["new_flow"] is None else t["new_flow"]
        for r in t["runs"]:
            p = r["result"]
            viol = p["deadline_violations"] + p["budget_violations"]
            viol += p["dropped"] + p["misrouted"]
            if r["order"] == "sequential":
                bad += viol
            rows.append(
                [
                    t["request"],
                    new,
                    len(t["moved"]),
                    p["phase"],
                    r["order"],
                    r["old_path_packets"],
                    p["sent"],
                    p["received"],
                    p["deadline_violations"],
                    p["budget_violations"],
                    p["dropped"] + p["misrouted"],
                    f"{p['max_e2e_over_deadline']:.3f}",
                    f"{p['max_queue_over_budget']:.3f}",
                ]
            )
    first = "log entry" if args.controller else "request"
    headers = [first, "new flow", "moved", "phase", "order", "old-path pkts"]
    headers += ["sent", "recv", "over deadline", "over budget", "drop+misrouted"]
    headers += ["e2e/deadline", "queue/budget"]
    if rows:
        print(render(headers, rows))
    if args.json:
        from pathlib import Path

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 1 if bad else 0


def _service_transitions(client, most: int, opts: dict) -> dict:
    """The moves a running service made (its log replayed here), the first ``most`` of them
    simulated as ``transitions`` does; ``request`` is the log entry's number."""
    from ..chameleon import replay

    found: list[dict] = []
    counts = {"with_moves": 0}

    def on_move(before, after, e):
        counts["with_moves"] += 1
        if len(found) >= most:
            return
        new = e["id"] if e["outcome"] == "admitted" else None
        moved = e.get("rerouted") or e.get("moved")
        t = json.loads(after.transitions(before, new, moved, **opts))
        found.append(t | {"request": e["seq"]})

    replay(client, on_move=on_move)
    st = client.stats()
    counts["requests"] = st["admitted"] + st["rejected"]
    return counts | {"transitions": found}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "chameleon",
        help="the Chameleon admission controller: admission study, packet-level check",
        description="Chameleon (CoNEXT 2020): network-calculus admission per priority queue, "
        "queue-level routing, rerouting; with the Silo and QJump baselines.",
    )
    sub = p.add_subparsers(dest="chameleon_command", required=True, metavar="COMMAND")

    e = sub.add_parser(
        "eval",
        help="add requests until the first rejection, over several runs",
        description="Run one system over a workload scenario of the paper (Tables 1 and 2): "
        "each run adds seeded requests until the first rejection. Prints accepted flows "
        "(mean, p1, p99 over runs), link utilisation, per-request runtime and reconfigured "
        "flows.",
    )
    e.add_argument("--system", choices=SYSTEMS, default="chameleon")
    e.add_argument("--runs", type=whole(1), default=10, help="runs (default 10)")
    _common(e)
    e.add_argument(
        "--routing",
        default="least-delay",
        choices=["least-delay", "larac", "min-hops"],
        help="Chameleon's path search (default least-delay, the paper's text; larac as shipped)",
    )
    e.add_argument(
        "--reroute-limit",
        type=whole(0),
        default=20,
        help="candidate flows tried per failed request (paper 20, shipped 10)",
    )
    e.add_argument("--multiplier", type=whole(0), default=30000, help="rerouting cost multiplier")
    e.add_argument("--burst", default="real", choices=["none", "real", "worst-case"])
    e.add_argument("--no-shaping", action="store_true", help="no input-link shaping")
    e.add_argument("--workers", type=whole(1), help="parallel runs (default: one per core)")
    e.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on the Dask cluster of this scheduler (tcp://host:8786) instead of local "
        "threads; its workers need this version of latnet",
    )
    e.add_argument("--json", metavar="FILE", help="also write the summary and every run")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=cmd_eval)

    v = sub.add_parser(
        "verify",
        help="simulate an admitted set packet by packet and compare with the bounds",
        description="Admit a scenario's requests until the first rejection, then run the "
        "admitted set in the simulator (tag-stack source routing, strict priority, greedy "
        "token-bucket sources in several phases) and report the largest observed / bound "
        "ratios. Exit status 1 if any packet missed its deadline or any queue its budget.",
    )
    v.add_argument("--system", default="chameleon", choices=SYSTEMS[:4])
    _common(v)
    v.add_argument("--duration-ms", type=whole(1), default=20, help="sending time (default 20 ms)")
    v.add_argument("--tries", type=whole(0), help="offer this many requests, keep what is admitted")
    v.add_argument("--no-background", action="store_true", help="no best-effort background")
    v.add_argument(
        "--controller",
        metavar="URL",
        help="check the flows a running `latnet chameleon serve` admitted (its settings and "
        "log replayed here) instead of drawing requests; --k, --topology, --queues, "
        "--scenario, --system, --tries and --per-hop-us are then the service's",
    )
    v.add_argument(
        "--token-file",
        metavar="FILE",
        help="the token of a service started with --tokens (a read token will do)",
    )
    add_ca_file(v)
    v.add_argument(
        "--phases",
        nargs="+",
        metavar="PHASE",
        help="phases to run: sync, aligned-0, aligned-1, random-2ms (default all)",
    )
    v.add_argument(
        "--emulated",
        action="store_true",
        help="also run each phase on real packets in the emulated testbed (root; network "
        "namespaces, latnet-switch) and check every packet against its deadline and guarantee",
    )
    v.add_argument(
        "--dilation",
        type=int,  # (checked in cmd_verify, exit 2 naming it)
        default=1,
        metavar="K",
        help="with --emulated: run K times slower than real time (default 1)",
    )
    v.add_argument(
        "--out",
        default="out/chameleon-verify",
        metavar="DIR",
        help="with --emulated: where the runs go (default out/chameleon-verify)",
    )
    add_keep_cpus_awake(v)
    v.set_defaults(func=cmd_verify)

    t = sub.add_parser(
        "transitions",
        help="simulate admissions that moved flows, in each order a host agent may apply them",
        description="Offer a scenario's requests; for each of the first that moved admitted "
        "flows, simulate the change packet by packet in each order: sequential (moves one "
        "at a time, each after the previous old path drained, the new flow last: only states "
        "the controller checked), together (all at once) and new-first (the new flow, then "
        "all the moves --lag-ms later, whether or not the old paths drained by then). "
        "Sources send their whole burst every burst/rate; each packet is held to the path it "
        "was sent on. Exit status 1 if the sequential order missed a deadline or a budget (the "
        "others are reported).",
    )
    t.add_argument("--system", default="chameleon", choices=["chameleon"])
    _common(t)
    t.add_argument("--tries", type=whole(0), default=1000, help="requests offered (default 1000)")
    t.add_argument(
        "--max-transitions",
        type=whole(0),
        default=3,
        metavar="N",
        help="simulate the first N requests that moved flows (default 3)",
    )
    t.add_argument(
        "--orders",
        nargs="+",
        metavar="ORDER",
        help="sequential, together, new-first (default all)",
    )
    t.add_argument(
        "--phases",
        nargs="+",
        metavar="PHASE",
        help="how the sources start: sync, aligned-0, aligned-1, random-2ms "
        "(default sync random-2ms)",
    )
    t.add_argument(
        "--at-ms",
        type=whole(0),
        default=3,
        help="the change begins this far into the run (default 3, after the random phase's starts)",
    )
    t.add_argument(
        "--lag-ms",
        type=whole(0),
        default=5,
        help="new-first: the moves reach the sources this long after the new flow starts "
        "(default 5)",
    )
    t.add_argument(
        "--duration-ms",
        type=whole(1),
        default=10,
        help="sending time after the change's last step (default 10 ms)",
    )
    t.add_argument("--no-background", action="store_true", help="no best-effort background")
    t.add_argument(
        "--controller",
        metavar="URL",
        help="check the moves a running `latnet chameleon serve` made (its settings and log "
        "replayed here) instead of drawing requests; --k, --topology, --queues, --scenario, "
        "--tries and --per-hop-us are then the service's",
    )
    t.add_argument(
        "--token-file",
        metavar="FILE",
        help="the token of a service started with --tokens (a read token will do)",
    )
    add_ca_file(t)
    t.add_argument("--json", metavar="FILE", help="also write every run")
    t.set_defaults(func=cmd_transitions)
    register_serve(sub)

    li = sub.add_parser(
        "live",
        help="a running service programs an emulated network (host agents) while traffic runs",
        description="Build the network of a running `latnet chameleon serve` as an emulated "
        "testbed (root), start a host agent for its hosts (a BPF tagger on each host's egress "
        "and an HTB shaper per admitted flow, programmed from the service's log), make the "
        "spec's requests of the service at their instants and run its traffic; then check "
        "every packet against what the controller had decided when it was created (its path, "
        "and for admitted flows arrival within the deadline). Writes OUT/live.json, hops.csv, "
        "packets.csv. Exit status 1 if an admitted flow lost a packet or missed its deadline, "
        "or a packet left the path it was given.",
    )
    li.add_argument("spec", help="a live spec: [sim], [[flows]], [[requests]] (docs/chameleon.md)")
    li.add_argument("--controller", required=True, metavar="URL", help="the service (http://...)")
    li.add_argument("--out", default="out/chameleon-live", metavar="DIR")
    li.add_argument(
        "--poll-ms",
        type=whole(1),
        default=10,
        help="the agent polls the service this often when it does not hold polls (--wait-ms 0)",
    )
    li.add_argument(
        "--wait-ms",
        type=whole(0),
        default=500,
        help="each poll of the agent waits at the service up to this long for the next "
        "decision (a long poll; default 500; 0: plain polls every --poll-ms)",
    )
    li.add_argument("--shaper", choices=["htb", "none"], default="htb", help="default htb")
    li.add_argument(
        "--order",
        choices=["sequential", "together"],
        default="sequential",
        help="how the agent applies a request's moves: one at a time, each once the previous "
        "flow's old path drained, the new flow last (default: the states the controller "
        "checked), or all at once",
    )
    li.add_argument(
        "--agents",
        type=whole(1),
        default=1,
        help="host agents sharing the hosts (round robin); more than one keep the sequential "
        "order between them through the service (default 1)",
    )
    li.add_argument(
        "--peer-wait-ms",
        type=whole(0),
        default=5000,
        help="with --agents: how long an agent waits for another's step before its own (0: "
        "each keeps the order among its own hosts only; default 5000)",
    )
    li.add_argument("--switch-processes", choices=["one", "per-node"])
    li.add_argument(
        "--token-file",
        metavar="FILE",
        help="the token of a service started with --tokens (a write token: the spec's "
        "requests admit and remove flows)",
    )
    add_ca_file(li)
    add_keep_cpus_awake(li)
    li.set_defaults(func=cmd_live)
