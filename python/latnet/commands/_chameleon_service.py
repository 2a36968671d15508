"""`latnet chameleon serve` (the controller as a service) and `latnet chameleon live` (a run
whose hosts the service programs while traffic runs)."""

from __future__ import annotations

import argparse
import sys

from ..table import duration_text, render
from . import client_cert, whole


def cmd_live(args: argparse.Namespace) -> int:
    from ..live import _short, live
    from ..table import emulation_timing
    from ..testbed import require_root

    require_root("latnet chameleon live")
    doc = live(
        args.controller,
        args.spec,
        args.out,
        poll_ms=args.poll_ms,
        shaper=args.shaper == "htb",
        switch_processes=args.switch_processes,
        order=args.order,
        token_file=args.token_file,
        ca_file=args.ca_file,
        client_cert=client_cert(args),
        crl_file=args.crl_file,
        wait_ms=args.wait_ms,
        agents=args.agents,
        peer_wait_ms=args.peer_wait_ms,
    )
    k = doc["dilation"]
    ms = lambda ns: "-" if ns is None else f"{ns / 1e6:.3f}"  # noqa: E731
    print(
        f"{doc['spec']} on the network of {doc['controller']}"
        + (f", {k} times slower than real time" if k > 1 else "")
        + f" (requests reserve {doc['tag_allowance_bytes']} B per frame for tags)\n"
    )
    rows = []
    for r in doc["requests"]:
        a = r["answer"]
        if a["admitted"]:
            what = f"admitted (id {a['id']})" + (
                f", moved {', '.join(map(str, r['rerouted']))}" if r["rerouted"] else ""
            )
        else:
            what = f"refused: {a['code']}"
        path = "-".join(r.get("path") or []) or "-"
        rows.append([r["flow"], ms(r["at_ns"]), what, path, ms(r.get("guarantee_ns"))])
    print(render(["flow", "at ms", "answer", "path", "guarantee ms"], rows, "requests"))
    ms_real = lambda us: "-" if us is None else f"{us / 1e3:.1f}"  # noqa: E731
    rows = [
        [ms(c["t_ns"]), c["flow"], c["what"], "-".join(c["path"]) or "(best effort)"]
        + [ms_real(c["after_request_us"]), ms_real(c["lag_after_answer_us"])]
        for c in doc["changes"]
    ]
    hdr = ["t ms", "flow", "change", "path", "after the request, ms (real)", "after the answer"]
    print("\n" + render(hdr, rows, "what the host agent applied"))
    rows = []
    for f in doc["flows"]:
        paths = _short(f["paths"])
        lat = f["latency_ns"]
        rows.append(
            [f["name"], "yes" if f["admitted"] else "no", f["sent"], f["received"]]
            + [f["lost_while_admitted"], paths, f["misrouted"], ms(lat["p50"]), ms(lat["p99"])]
            + [ms(lat["max"]), ms(f["deadline_ns"]), f["over_deadline"]]
        )
    hdr = ["flow", "admitted", "sent", "received", "lost", "paths (packets)", "misrouted"]
    hdr += ["p50 ms", "p99 ms", "max ms", "deadline ms", "over"]
    print("\n" + render(hdr, rows, "every packet against the controller's decision"))
    for m in doc["not_applied"]:
        what = "removal"
        if m["path"]:
            what = "-".join(m["path"]) + " tags " + ",".join(map(str, m["tags"]))
        print(f"NOT APPLIED by the host agent: log entry {m['seq']}, flow {m['flow']}: {what}")
    line = emulation_timing({"emulation": doc["emulation"]}) if doc["emulation"] else None
    if line:
        print(line)
    if doc["stalled"]:
        print(
            "the machine fell behind by up to "
            f"{duration_text(doc['emulation']['late_max_ns'])} (scenario time), more than "
            f"{duration_text(doc['stall_ns'])}, half the tightest deadline: a missed deadline "
            "may be the machine's; run it again on a fresh service"
        )
    print(f"\nwrote {args.out}/live.json")
    if not doc["ok"]:
        print("latnet: a packet missed what the controller promised (see above)", file=sys.stderr)
        return 1
    return 0


def _io_timeout(text: str) -> float:
    """An argparse type: ``--io-timeout``'s seconds, from 0.001 to 3600 (what latnet-ctld takes)."""
    try:
        s = float(text)
    except ValueError:
        s = float("nan")
    if not 0.001 <= s <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds from 0.001 to 3600, got {text!r}")
    return s


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from ..testbed import binary

    # usage errors said here, as `eval` says them (latnet-ctld would exit 2 for them too)
    why = None
    if not args.topology and args.k % 2:
        why = f"--k: a fat-tree needs an even k of at least 2, got {args.k}"
    elif args.system.startswith("chameleon") and args.queues not in (1, 2, 4, 8):
        why = f"--queues: no default delay budgets for {args.queues} queues (1, 2, 4 or 8)"
    if why is not None:
        print(f"latnet: {why}", file=sys.stderr)
        return 2
    argv = [binary("latnet-ctld"), "--db", args.db, "--listen", args.listen]
    argv += ["--system", args.system, "--queues", str(args.queues)]
    if args.topology:
        argv += ["--topology", args.topology]
    else:
        argv += ["--k", str(args.k)]
        if args.hosts_per_edge:
            argv += ["--hosts-per-edge", str(args.hosts_per_edge)]
    for flag, v in (("--max-tags", args.max_tags), ("--tag-base", args.tag_base)):
        if v is not None:
            argv += [flag, str(v)]
    argv += ["--io-timeout", str(args.io_timeout)]
    if args.tokens:
        argv += ["--tokens", args.tokens]
    if args.log_keep is not None:
        argv += ["--log-keep", str(args.log_keep)]
    if (args.tls_cert is None) != (args.tls_key is None):
        print("latnet: give both --tls-cert and --tls-key, or neither", file=sys.stderr)
        return 2
    if args.tls_cert is not None:
        argv += ["--tls-cert", args.tls_cert, "--tls-key", args.tls_key]
    if args.tls_client_ca is not None:
        if args.tls_cert is None:
            print("latnet: --tls-client-ca needs --tls-cert and --tls-key", file=sys.stderr)
            return 2
        argv += ["--tls-client-ca", args.tls_client_ca]
    if args.tls_client_crl is not None:
        if args.tls_client_ca is None:
            print("latnet: --tls-client-crl needs --tls-client-ca", file=sys.stderr)
            return 2
        argv += ["--tls-client-crl", args.tls_client_crl]
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 1  # not reached


def register_serve(sub) -> None:
    s = sub.add_parser(
        "serve",
        help="run the controller as a REST service with its state in SQLite (latnet-ctld)",
        description="Run the Chameleon controller as a REST service (latnet-ctld): POST /flows "
        "to admit a flow (201 with its path, queues, tags and shaper; 409 refused; 422 "
        "invalid; 400 a malformed body, naming the field), GET /flows, GET or DELETE "
        "/flows/ID, GET /hosts, /stats, /config, /health. Every admission and removal is "
        "committed to the SQLite file --db before it is answered; a restart replays the file's "
        "log and answers with the same flows (a store made with other settings is refused). "
        "SIGHUP makes it read its --tokens and --tls-* files again (all or nothing).",
    )
    s.add_argument("--k", type=whole(1), default=4, help="fat-tree arity (default 4)")
    s.add_argument("--hosts-per-edge", type=whole(1), metavar="M", help="servers per edge switch")
    s.add_argument("--topology", metavar="FILE", help="a topology file instead of a fat-tree")
    s.add_argument("--queues", type=whole(1), default=8, help="queues per switch port (default 8)")
    s.add_argument(
        "--max-tags",
        type=whole(1, 16),
        metavar="N",
        help="most tags a host pushes, so most switches an admitted path crosses (default 10, "
        "at most 16); kept in the store",
    )
    s.add_argument(
        "--tag-base",
        type=whole(1, 4095),
        metavar="B",
        help="a tag is B x local port + queue (default 10; the paper's example uses 100); kept "
        "in the store",
    )
    s.add_argument(
        "--system",
        default="chameleon",
        choices=["chameleon", "chameleon-noreroute", "silo", "silo-noburst"],
    )
    s.add_argument(
        "--db",
        default="out/chameleon-service/controller.db",
        help="the SQLite store (default out/chameleon-service/controller.db; created if missing)",
    )
    s.add_argument(
        "--listen", default="127.0.0.1:8700", metavar="ADDR:PORT", help="default 127.0.0.1:8700"
    )
    s.add_argument(
        "--io-timeout",
        type=_io_timeout,
        default=10.0,
        metavar="SECONDS",
        help="how long a client's read or write may wait and its request body may take to "
        "arrive (408 after); each client has a thread of its own (default 10)",
    )
    s.add_argument(
        "--tokens",
        metavar="FILE",
        help="bearer tokens, a 'ROLE TOKEN' line each (ROLE read, agent or write, a token of at "
        "least 16 characters): every request but GET /health must then carry 'Authorization: "
        "Bearer TOKEN' (401 without a listed one; 403 for a token asking more than its role "
        "allows: read only GETs, agent also registers agents and reports what they applied, "
        "write everything). "
        "Without it anyone reaching --listen may admit and remove flows",
    )
    s.add_argument(
        "--log-keep",
        type=whole(1),
        metavar="N",
        help="once N entries were logged after the store's snapshot, make the controller's "
        "state the snapshot and keep the newest N entries (a restart then replays fewer than N; "
        "GET /snapshot and the log after it rebuild the controller); without it only POST "
        "/compact compacts",
    )
    s.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="speak HTTPS on --listen with this certificate chain (PEM; it must name the "
        "address clients use; scripts/tls-certs.sh makes one and its CA); with --tls-key. "
        "Without it tokens and decisions cross the network in the clear",
    )
    s.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    s.add_argument(
        "--tls-client-ca",
        metavar="FILE",
        help="with --tls-cert: clients must present a certificate this CA (PEM) signed "
        "(mutual TLS; clients: --client-cert / --client-key)",
    )
    s.add_argument(
        "--tls-client-crl",
        metavar="FILE",
        help="with --tls-client-ca: refuse client certificates these revocation lists (PEM) "
        "name (scripts/tls-revoke.sh DIR CERT makes the list of the CA of scripts/tls-certs.sh "
        "DIR); read again on SIGHUP",
    )
    s.set_defaults(func=cmd_serve)
