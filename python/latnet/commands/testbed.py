"""`latnet testbed up | down | status`: emulation testbeds you can use by hand.

latnet testbed up experiments/demo.toml     # namespaces, veth links, switches; prints names
ip netns exec <prefix>controller iperf3 -s  # run anything inside
latnet testbed down                         # removes every recorded testbed (idempotent)

latnet testbed up --controller http://127.0.0.1:8711   # the network of a running controller
                                            # service, its hosts programmed by a host agent
"""

from __future__ import annotations

import argparse
import json

from . import add_ca_file, client_cert, seed


def register(subparsers) -> None:
    tb = subparsers.add_parser(
        "testbed",
        help="bring an emulation testbed (namespaces, veth links, latnet-switch) up or down",
        description="Create a network namespace per node of a scenario, veth pairs for its "
        "links, host addresses and routes, and a latnet-switch per switch (root needed). What "
        "is created is recorded first, so `latnet testbed down` removes it even after a crash.",
    )
    sub = tb.add_subparsers(dest="testbed_command", required=True, metavar="ACTION")
    up = sub.add_parser("up", help="create the testbed of a scenario and start its switches")
    up.add_argument("scenario", nargs="?", help="scenario file (TOML)")
    up.add_argument(
        "--controller",
        metavar="URL",
        help="instead of a scenario: the network of a running `latnet chameleon serve` "
        "(tag-stack switches, its priority classes and a best-effort one below them), with a "
        "host agent for every host that tags and shapes each admitted flow's packets (request "
        'flows with a "match") and sends everything else along best-effort routes',
    )
    up.add_argument(
        "--shaper",
        choices=["htb", "none"],
        default="htb",
        help="with --controller: shape admitted flows with HTB (default) or not",
    )
    up.add_argument(
        "--order",
        choices=["sequential", "together"],
        default="sequential",
        help="with --controller: the agent applies a request's moves one at a time, each once "
        "the previous flow's old path drained, the new flow last (default), or all at once",
    )
    up.add_argument(
        "--token-file",
        metavar="FILE",
        help="with --controller: the token of a service started with --tokens (a read token "
        "will do)",
    )
    add_ca_file(up)
    up.add_argument("--run-dir", metavar="DIR", help="switch logs and statistics (default: temp)")
    up.add_argument(
        "--offloads",
        choices=["off", "csum"],
        default="off",
        help="host interface offloads: off (no tx checksum, TSO, GSO; default) or csum "
        "(partial checksums, completed by the switch)",
    )
    up.add_argument("--seed", type=seed, help="override the scenario's seed (link loss)")
    up.add_argument(
        "--ipv6",
        action="store_true",
        help="give hosts IPv6 addresses and routes too (2001:db8:: + the IPv4 address; "
        "otherwise only when a flow carries its SLO in an IPv6 hop-by-hop option)",
    )
    up.add_argument(
        "--pcap",
        metavar="DIR",
        help="the switches capture every link direction into DIR/<node>-<peer>.pcap, stamped "
        "from one time zero (just before they start); complete once the testbed is down",
    )
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="remove recorded testbeds (all, or one by --prefix)")
    down.add_argument("--prefix", help="only the testbed with this prefix")
    down.set_defaults(func=cmd_down)
    st = sub.add_parser("status", help="list recorded testbeds")
    st.add_argument("--json", action="store_true", help="machine-readable")
    st.set_defaults(func=cmd_status)


def cmd_up(args: argparse.Namespace) -> int:
    import sys
    import tempfile
    from pathlib import Path

    from ..testbed import Testbed, require_root

    if (args.scenario is None) == (args.controller is None):
        which = "not both" if args.controller else "one of them"
        msg = f"give a scenario file or --controller URL, {which}"
        print(f"latnet: testbed up: {msg}", file=sys.stderr)
        return 2
    cert = client_cert(args)
    scenario = args.scenario
    if args.controller is not None:
        from ..live import controller_network

        require_root("latnet testbed up")
        run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="latnet-tb-"))
        run_dir.mkdir(parents=True, exist_ok=True)
        args.run_dir = str(run_dir)
        scenario = controller_network(
            args.controller,
            run_dir / "network.toml",
            token_file=args.token_file,
            ca_file=args.ca_file,
            client_cert=cert,
            crl_file=args.crl_file,
        )
    tb = Testbed(
        scenario,
        run_dir=args.run_dir,
        offloads=args.offloads,
        seed=args.seed,
        ipv6=args.ipv6,
        pcap_dir=args.pcap,
        # one time zero for every switch's capture stamps (it precedes their start, so their
        # AQM epochs still count from their own start, as without it)
        time_zero_after_ns=0 if args.pcap else None,
    )
    tb.up()
    if args.controller is not None:
        try:
            tb.start_agent(
                args.controller,
                shaper=args.shaper == "htb",
                order=args.order,
                token_file=args.token_file,
                ca_file=args.ca_file,
                client_cert=cert,
                crl_file=args.crl_file,
            )
        except BaseException:
            tb.down()
            raise
    print(f"testbed {tb.prefix} is up ({tb.scenario.name}); run files in {tb.run_dir}/")
    if args.controller is not None:
        print(
            f"host agent (pid {tb.agent.pid}) programs the hosts from {args.controller}; "
            f"its status: {tb.agent_status}"
        )
    if tb.pcap_dir is not None:
        print(
            f"link captures in {tb.pcap_dir}/ (complete once the testbed is down), stamped from "
            f"CLOCK_MONOTONIC {tb.time_zero_ns} ns"
        )
    for n in tb.plan["nodes"]:
        ifs = ", ".join(i["name"] + "->" + i["peer"] for i in n["ifaces"])
        addr = n["address"] if n["kind"] == "host" else "switch"
        if n["kind"] == "host" and tb.plan["ipv6"]:
            ifs += f"  ({n['address6']})"
        print(f"  {tb.netns(n['name']):28s} {addr:12s} {ifs}")
    h = tb.hosts()
    if len(h) >= 2:
        print(f"\ntry:  ip netns exec {tb.netns(h[0])} ping -c 3 {tb.address(h[1])}")
    print(f"stop: latnet testbed down --prefix {tb.prefix}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from ..testbed import down_all

    done = down_all(args.prefix)
    print("removed: " + (", ".join(done) if done else "nothing (no recorded testbed)"))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ..testbed import recorded

    rows = [st for _, st in recorded()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no recorded testbed")
    for st in rows:
        print(f"{st['prefix']}  {st['scenario']}  namespaces: {', '.join(st['netns'])}")
    return 0
