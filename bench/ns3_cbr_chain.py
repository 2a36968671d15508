"""latnet vs ns-3 3.44 (PyPI ``ns3``) on the same UDP CBR scenario, in one invocation.

    .venv/bin/python bench/ns3_cbr_chain.py [--sim-seconds 10] [--flows 10] [--switches 4]
                                            [--repeat 3]

Scenario (identical in both simulators): ``flows`` source hosts, each on its own link to switch
1; switches 1..``switches`` in a chain; ``flows`` sink hosts on their own links from the last
switch. Every link is 1 Gbps with 10 us propagation delay and a 100-packet DropTail (FIFO)
queue on each side. Each source sends one UDP CBR flow to its sink for ``sim-seconds`` of
simulated time; together the flows load the chain to 900 Mbit/s (90 %), so nothing is dropped.
Flow i starts at i us (no exact ties between flows) and sends every ``interval`` (an exact
number of nanoseconds, 100 us for 10 flows), no packet at or after the end of the sending
time; both simulators then run 100 ms more so packets in flight arrive.

Frames carry the same number of bytes on the wire in both: 1125 B (9 us at 1 Gbps). latnet
counts a 14 B Ethernet + 20 B IPv4 + 8 B UDP header (UDP payload 1083 B); ns-3's
point-to-point links carry a 2 B PPP header + 20 B IPv4 + 8 B UDP (UDP payload 1095 B).

ns-3 is installed on first use into its own venv, bench/.venv-ns3 (about 2 minutes, 520 MB),
and runs as a subprocess (bench/ns3_driver.py) with that venv's python; each repeat is a fresh
process, so ``from ns import ns`` (10-17 s) is paid every time but timed apart from the run.
Measured: wall (and CPU) time of the run only (latnet: the ``latnet.run`` call, scenario
parsing included; ns-3: ``Simulator::Run``), events executed, events per second and packets
delivered per flow (which must agree exactly). Prints a markdown table with medians over the
repeats and the ratio of ns-3's run time to latnet's; exits 1 if delivered counts disagree.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
import latnet  # noqa: E402  (timed, for the record)

LATNET_IMPORT_S = time.perf_counter() - T0

HERE = Path(__file__).resolve().parent
NS3_VENV = HERE / ".venv-ns3"
DRIVER = HERE / "ns3_driver.py"
NS3_SPEC = "ns3==3.44.*"
GOAL = 20.0

ETH, PPP, IPV4, UDP = 14, 2, 20, 8
LINK_RATE_BPS = 1_000_000_000
DELAY_NS = 10_000
QUEUE_PACKETS = 100
DRAIN_NS = 100_000_000
STAGGER_NS = 1_000
FRAME = 1125  # bytes on the wire per packet, in both simulators
LOAD_BPS = 900_000_000  # all flows together, in frame bits per second


def scenario(args: argparse.Namespace) -> dict:
    """The scenario's numbers, checked so that both simulators send at identical instants."""
    if args.flows < 1 or args.switches < 1 or args.sim_seconds <= 0:
        raise SystemExit("expected --flows >= 1, --switches >= 1 and --sim-seconds > 0")
    if LOAD_BPS % args.flows:
        raise SystemExit(f"--flows must divide {LOAD_BPS} bit/s evenly (got {args.flows})")
    rate_bps = LOAD_BPS // args.flows
    interval_ns, rem = divmod(FRAME * 8 * 1_000_000_000, rate_bps)
    if rem:
        raise SystemExit(
            f"{FRAME} B at {rate_bps} bit/s is not a whole number of ns: ns-3 would round the "
            "interval and the counts would drift apart; choose another --flows"
        )
    sim_ns = round(args.sim_seconds * 1e9)
    starts = [f * STAGGER_NS for f in range(args.flows)]
    if starts[-1] >= sim_ns:
        raise SystemExit("--sim-seconds too short for the staggered starts")
    expected = [-(-(sim_ns - s) // interval_ns) for s in starts]  # ceil: packets before the end
    return {
        "switches": args.switches,
        "flows": args.flows,
        "sim_ns": sim_ns,
        "drain_ns": DRAIN_NS,
        "rate_bps": rate_bps,
        "interval_ns": interval_ns,
        "start_ns": starts,
        "expected": expected,
    }


def latnet_toml(sc: dict) -> str:
    """The scenario as a latnet TOML file (same shape as crates/latnet-sim/benches/engine.rs)."""
    n_sw = sc["switches"]
    lines = [
        'name = "cbr_chain"',
        "[sim]",
        f'duration = "{sc["sim_ns"]}ns"',
        f'drain = "{sc["drain_ns"]}ns"',
        "[defaults.link]",
        f"rate = {LINK_RATE_BPS}",
        f'delay = "{DELAY_NS}ns"',
        "[defaults]",
        f'queue = {{ kind = "fifo", limit_packets = {QUEUE_PACKETS} }}',
    ]
    for i in range(n_sw):
        lines += ["[[nodes]]", f'name = "s{i}"', 'kind = "switch"']
    for i in range(1, n_sw):
        lines += ["[[links]]", f'a = "s{i - 1}"', f'b = "s{i}"']
    for f in range(sc["flows"]):
        lines += ["[[nodes]]", f'name = "src{f}"', 'kind = "host"']
        lines += ["[[nodes]]", f'name = "dst{f}"', 'kind = "host"']
        lines += ["[[links]]", f'a = "src{f}"', 'b = "s0"']
        lines += ["[[links]]", f'a = "s{n_sw - 1}"', f'b = "dst{f}"']
        lines += [
            "[[flows]]",
            f'src = "src{f}"',
            f'dst = "dst{f}"',
            f"size = {FRAME}",
            f'start = "{sc["start_ns"][f]}ns"',
            f'traffic = {{ kind = "cbr", rate = {sc["rate_bps"]} }}',
        ]
    return "\n".join(lines) + "\n"


def ns3_config(sc: dict) -> dict:
    return {
        "switches": sc["switches"],
        "flows": sc["flows"],
        "sim_ns": sc["sim_ns"],
        "drain_ns": sc["drain_ns"],
        "rate": f"{LINK_RATE_BPS}bps",
        "delay": f"{DELAY_NS}ns",
        "queue_packets": QUEUE_PACKETS,
        "payload": FRAME - PPP - IPV4 - UDP,
        "interval_ns": sc["interval_ns"],
        "start_ns": sc["start_ns"],
    }


def ns3_python(args: argparse.Namespace) -> Path:
    """The ns-3 venv's python, installing ns-3 there first if it is missing."""
    py = Path(args.ns3_python) if args.ns3_python else NS3_VENV / "bin" / "python"
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('ns') is None)"
    if py.exists() and subprocess.run([str(py), "-c", probe], timeout=120).returncode == 0:
        return py
    if args.ns3_python:
        raise SystemExit(f"{py} cannot import ns (PyPI ns3)")
    print(f"installing {NS3_SPEC} into {NS3_VENV} (about 2 minutes, 520 MB)", file=sys.stderr)
    if not py.exists():
        base = shutil.which("python3") or sys.executable
        subprocess.run([base, "-m", "venv", str(NS3_VENV)], check=True, timeout=600)
    pip = [str(py), "-m", "pip", "install", "--disable-pip-version-check", NS3_SPEC]
    subprocess.run(pip, check=True, timeout=3600)
    return py


def run_ns3(py: Path, cfg: dict, timeout: float) -> dict:
    cmd = [str(py), str(DRIVER), json.dumps(cfg)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if p.returncode != 0 or not p.stdout.strip():
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"ns-3 driver failed (exit {p.returncode})")
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_latnet(text: str) -> dict:
    t = time.perf_counter()
    c = time.process_time()
    res = latnet.run(text=text, packets=False)
    run_s = time.perf_counter() - t
    run_cpu_s = time.process_time() - c
    s = res.summary
    return {
        "run_s": run_s,
        "run_cpu_s": run_cpu_s,
        "events": int(s["events"]),
        "sent": [f["sent"] for f in s["flows"]],
        "delivered": [f["received"] for f in s["flows"]],
        "dropped": sum(f["dropped"] for f in s["flows"]),
        "in_flight_at_end": sum(f["in_flight_at_end"] for f in s["flows"]),
    }


def ns3_version(py: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('ns3'))"
    p = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=120)
    return p.stdout.strip() or "?"


def fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim-seconds", type=float, default=10.0, help="sending time (default 10)")
    ap.add_argument("--flows", type=int, default=10, help="UDP CBR flows (default 10)")
    ap.add_argument("--switches", type=int, default=4, help="switches in the chain (default 4)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each simulator (default 3)")
    ap.add_argument("--timeout", type=float, default=3600, help="limit per ns-3 run, seconds")
    ap.add_argument("--ns3-python", help="python of an existing venv with ns3 installed")
    args = ap.parse_args()
    if not 1 <= args.repeat <= 50:
        raise SystemExit("expected --repeat from 1 to 50")

    sc = scenario(args)
    text = latnet_toml(sc)
    cfg = ns3_config(sc)
    py = ns3_python(args)
    ns3_ver = ns3_version(py)

    runs: dict[str, list[dict]] = {"latnet": [], "ns-3": []}
    for r in range(args.repeat):  # alternate, so that noise on the shared cores hits both
        print(f"run {r + 1}/{args.repeat}: ns-3 ...", file=sys.stderr, flush=True)
        runs["ns-3"].append(run_ns3(py, cfg, args.timeout))
        print(f"run {r + 1}/{args.repeat}: latnet ...", file=sys.stderr, flush=True)
        runs["latnet"].append(run_latnet(text))
        for side in ("ns-3", "latnet"):
            x = runs[side][-1]
            print(f"  {side}: run {x['run_s']:.3f} s, {x['events']} events", file=sys.stderr)

    med = {
        side: {k: statistics.median(x[k] for x in rs) for k in ("run_s", "run_cpu_s")}
        for side, rs in runs.items()
    }
    ln, n3 = runs["latnet"][0], runs["ns-3"][0]
    for side, rs in runs.items():
        if any(x["events"] != rs[0]["events"] or x["delivered"] != rs[0]["delivered"] for x in rs):
            print(f"warning: {side} runs differ in events or delivered packets", file=sys.stderr)
    disagree = [
        (f, a, b)
        for f, (a, b) in enumerate(zip(ln["delivered"], n3["delivered"], strict=True))
        if a != b
    ]
    ln_deliv, n3_deliv = sum(ln["delivered"]), sum(n3["delivered"])
    ratio = med["ns-3"]["run_s"] / med["latnet"]["run_s"]
    ratio_cpu = med["ns-3"]["run_cpu_s"] / med["latnet"]["run_cpu_s"]

    def eps(side: str, key: str = "run_s") -> str:
        return fmt_int(runs[side][0]["events"] / med[side][key])

    paired = [
        (n["run_s"] / max(1e-9, x["run_s"]), n["run_cpu_s"] / max(1e-9, x["run_cpu_s"]))
        for n, x in zip(runs["ns-3"], runs["latnet"], strict=True)
    ]

    def per_run(side: str) -> str:
        return ", ".join(fmt_s(x["run_s"]) for x in runs[side])

    rows = [
        (f"run wall time, median of {args.repeat} (s)", fmt_s(med["latnet"]["run_s"]),
         fmt_s(med["ns-3"]["run_s"])),
        ("run wall time, each run (s)", per_run("latnet"), per_run("ns-3")),
        ("run CPU time, median (s)", fmt_s(med["latnet"]["run_cpu_s"]),
         fmt_s(med["ns-3"]["run_cpu_s"])),
        ("import time, median (s)", f"{LATNET_IMPORT_S:.3f} (once)",
         fmt_s(statistics.median(x["import_s"] for x in runs["ns-3"]))),
        ("setup time, median (s)", "in the run",
         fmt_s(statistics.median(x["setup_s"] for x in runs["ns-3"]))),
        ("events executed", fmt_int(ln["events"]), fmt_int(n3["events"])),
        ("events per second (run wall)", eps("latnet"), eps("ns-3")),
        ("events per second (run CPU)", eps("latnet", "run_cpu_s"), eps("ns-3", "run_cpu_s")),
        ("packets sent", fmt_int(sum(ln["sent"])), "-"),
        ("packets delivered", fmt_int(ln_deliv), fmt_int(n3_deliv)),
        ("events per delivered packet", f"{ln['events'] / max(1, ln_deliv):.2f}",
         f"{n3['events'] / max(1, n3_deliv):.2f}"),
    ]  # fmt: skip
    today = datetime.date.today().isoformat()
    per_flow = "equal in every flow" if not disagree else f"DIFFER in {len(disagree)} flows"
    print()
    print(
        f"UDP CBR chain: {sc['flows']} flows, {sc['switches']} switches, 1 Gbps links, "
        f"{DELAY_NS // 1000} us delay, {FRAME} B frames every {sc['interval_ns']} ns per flow "
        f"({sc['rate_bps'] / 1e6:g} Mbit/s each), {args.sim_seconds:g} s sending + "
        f"{DRAIN_NS // 1_000_000} ms drain; {today}, {platform.machine()}, "
        f"{os.cpu_count()} cores, latnet {latnet.__version__}, ns3 {ns3_ver} (PyPI)"
    )
    print()
    print(f"| | latnet | ns-3 {ns3_ver} |")
    print("|---|---:|---:|")
    for name, a, b in rows:
        print(f"| {name} | {a} | {b} |")
    print()
    verdict = "met" if ratio >= GOAL else "NOT met"
    print(
        f"ns-3 / latnet run wall time: **{ratio:.1f}x** (goal >= {GOAL:g}x: {verdict}); "
        f"CPU time ratio {ratio_cpu:.1f}x (ratios of the medians)."
    )
    print(
        "Paired runs (ns-3 run r / latnet run r): wall "
        + ", ".join(f"{w:.1f}x" for w, _ in paired)
        + "; CPU "
        + ", ".join(f"{c:.1f}x" for _, c in paired)
        + "."
    )
    print(
        f"Delivered packets: latnet {fmt_int(ln_deliv)}, ns-3 {fmt_int(n3_deliv)}, {per_flow} "
        f"(expected {fmt_int(sum(sc['expected']))}); latnet dropped {ln['dropped']}, "
        f"in flight at end {ln['in_flight_at_end']}."
    )
    for f, a, b in disagree:
        print(f"  flow {f}: latnet {a}, ns-3 {b} (expected {sc['expected'][f]})")
    print(
        "Events differ by design: ns-3 counts every scheduled callback of its protocol stack "
        "(application send, socket, IP, queue, device, channel), latnet only the emissions, "
        "transmission ends and arrivals of its packet-level model."
    )
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
