"""latnet vs ns-3 3.44 (PyPI ``ns3``) on TCP dumbbells: behaviour side by side, and speed.

    .venv/bin/python bench/ns3_tcp_dumbbell.py [--only validate|speed] [--quick]
                                               [--repeat 3] [--out out/bench-tcp]
    .venv/bin/python bench/ns3_tcp_dumbbell.py --trace "1G-5ms fifo bbr x1"

**Validation** runs the same dumbbells in both simulators: 1 and 4 bulk flows (starting 0.1 s +
10 ms apart) from left hosts to right hosts through two routers; 100 Mbit/s with a 20 ms RTT
(access 1 Gbit/s 0.5 ms, bottleneck 9 ms) and 1 Gbit/s with a 5 ms RTT (access 10 Gbit/s 0.25
ms, bottleneck 2 ms); a DropTail bottleneck of one BDP (166 / 416 packets) with NewReno (ns-3
``TcpLinuxReno``: NewReno recovery with Linux's per-segment window increase, which latnet's byte
counting matches; ns-3's ``TcpNewReno`` grows once per ACK), CUBIC and BBR, and a step-marking
bottleneck (mark ECT at enqueue when K = 20 % of a BDP is queued; ns-3: RED with QW = 1, MinTh =
K - 1, MaxTh = K, Gentle off, ECN) with DCTCP and CUBIC with classic ECN. Both sides use the
same TCP parameters: MSS 1448 (1502-byte frames: latnet's Ethernet + IPv4 + TCP, ns-3's PPP +
IPv4 + TCP with timestamps), initial window 10, SACK, delayed ACKs every 2 segments or 200 ms,
minimum RTO 1 s, PRR recovery, no HyStart, no lost-retransmission detection (ns-3 has none), 4
MB buffers. ns-3's queue is a queue disc over a 1-packet device queue so that its sojourn time
can be traced. Compared per configuration: mean per-flow goodput (bytes delivered to the
application over the flow's time), Jain's fairness index, retransmissions, bottleneck drops and
CE marks, and the 50th / 99th percentile of the bottleneck queue's sojourn time (latnet: start
of transmission minus enqueue of each packet at that port; ns-3: the queue disc's
``SojournTime`` trace). Differences above 10 % are flagged. A last pair of columns repeats each
latnet run with Linux's lost-retransmission detection on (latnet's default; ns-3 has none).

**Speed** times the reference ns-3 dumbbell (4 CUBIC flows, 1 Gbit/s 1 ms access,
100 Mbit/s 10 ms bottleneck, 100-packet DropTail device queue, 10 simulated s; latnet runs
``experiments/tcp_dumbbell.toml``) and 4 flows at 1 Gbit/s with a 5 ms RTT for 3 simulated s
(CUBIC on a 416-packet DropTail, DCTCP on the step-marking queue). Measured: CPU time (and wall
time) of the run alone (latnet: the ``latnet.run`` call, scenario parsing included; ns-3:
``Simulator::Run``), events, medians over ``--repeat`` runs, and ns-3 CPU / latnet CPU. The
machine is shared: CPU time is the comparable figure; wall time is printed beside it.

ns-3 is installed on first use into bench/.venv-ns3 (about 2 minutes, 520 MB) and runs as one
subprocess per phase (bench/ns3_tcp_driver.py), so its 10-30 s import is paid once per phase
and timed apart. Writes ``bench-tcp.json`` into ``--out`` and prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import latnet

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NS3_VENV = HERE / ".venv-ns3"
DRIVER = HERE / "ns3_tcp_driver.py"
NS3_SPEC = "ns3==3.44.*"
MSS = 1448
FRAME = 1502
GOAL = 20.0

# latnet congestion control -> (ns-3 socket type, ECN)
CC = {
    "newreno": ("TcpLinuxReno", False),
    "cubic": ("TcpCubic", False),
    "bbr": ("TcpBbr", False),
    "dctcp": ("TcpDctcp", True),
    "cubic-ecn": ("TcpCubic", True),
}

TOPOLOGIES = {
    # name: access rate, access delay, bottleneck rate, delay, BDP packets, sim s, quick sim s
    "100M-20ms": ("1Gbps", "500us", "100Mbps", "9ms", 166, 10.0, 4.0),
    "1G-5ms": ("10Gbps", "250us", "1Gbps", "2ms", 416, 3.0, 1.5),
}


def ensure_ns3() -> Path:
    py = NS3_VENV / "bin" / "python"
    if not py.exists():
        print(f"installing {NS3_SPEC} into {NS3_VENV} (about 2 minutes) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(NS3_VENV)], check=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", NS3_SPEC],
            check=True,
        )
    return py


NS3_RAW: dict[str, dict] = {}  # every ns-3 result of this invocation, by config name
NS3_REUSE: dict[str, dict] = {}  # results of an earlier invocation (--reuse-ns3)


def run_ns3(configs: list[dict]) -> dict[str, dict]:
    if NS3_REUSE and all(c["name"] in NS3_REUSE for c in configs):
        print("  (ns-3 results reused from an earlier run)", file=sys.stderr)
        out = {c["name"]: NS3_REUSE[c["name"]] for c in configs}
        NS3_RAW.update(out)
        return out
    py = ensure_ns3()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.run(
        [str(py), str(DRIVER), json.dumps(configs)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    out = {}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT ") :])
            out[r["name"]] = r
    if p.returncode != 0 or len(out) != len(configs):
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit(f"ns-3 driver failed (exit {p.returncode})")
    NS3_RAW.update(out)
    return out


def starts(n: int) -> list[float]:
    return [0.1 + 0.01 * i for i in range(n)]


def latnet_toml(cfg: dict, parity: bool, packets: bool, lost_retransmit: bool = False) -> str:
    """The latnet scenario of one dumbbell configuration."""
    q = cfg["queue"]
    if q["kind"] == "fifo":
        queue = f'{{ kind = "fifo", limit_packets = {q["limit"]} }}'
    else:
        queue = (
            f'{{ kind = "step-ce", threshold_packets = {q["k"]}, limit_packets = {q["limit"]} }}'
        )
    sim_ns = round(cfg["sim_s"] * 1e9)
    s = [
        f"[sim]\nduration = {sim_ns}\ndrain = 0\n",
        f'[output]\npackets = {"true" if packets else "false"}\ntimeseries = "100ms"\n',
        f'[defaults.link]\nrate = "{cfg["access_rate"]}"\ndelay = "{cfg["access_delay"]}"\n',
        '[[nodes]]\nname = "left"\nkind = "switch"\n[[nodes]]\nname = "right"\nkind = "switch"\n',
        f'[[links]]\na = "left"\nb = "right"\nrate = "{cfg["rate"]}"\ndelay = "{cfg["delay"]}"\n'
        f"queue = {queue}\n",
    ]
    if parity:
        # ns-3's side runs without HyStart (set off in the driver) and has no RACK-TLP: pinned
        # here too, whatever latnet's defaults (HyStart applies to the CUBIC flows only)
        s.append("[defaults.tcp]\nhystart = false\nrack_tlp = false\n")
    cc = cfg["latnet_cc"]
    extra = ""
    if parity:
        lr = "true" if lost_retransmit else "false"
        extra = f', min_rto = "1s", delack_timeout = "200ms", lost_retransmit = {lr}'
    if cc == "cubic-ecn":
        cc, extra = "cubic", extra + ", ecn = true"
    for i in range(cfg["n"]):
        start_ns = round(cfg["starts_s"][i] * 1e9)
        s.append(
            f'[[nodes]]\nname = "l{i}"\nkind = "host"\n[[nodes]]\nname = "r{i}"\nkind = "host"\n'
            f'[[links]]\na = "l{i}"\nb = "left"\n[[links]]\na = "right"\nb = "r{i}"\n'
            f'[[flows]]\nname = "f{i}"\nsrc = "l{i}"\ndst = "r{i}"\nsize = {FRAME}\n'
            f"start = {start_ns}\n"
            f'traffic = {{ kind = "tcp-bulk", cc = "{cc}"{extra} }}\n'
        )
    return "\n".join(s)


def validation_configs(quick: bool) -> list[dict]:
    out = []
    for topo, (arate, adelay, rate, delay, bdp, sim_s, quick_s) in TOPOLOGIES.items():
        for n in (1, 4):
            for qkind, ccs in (
                ("fifo", ["newreno", "cubic", "bbr"]),
                ("step", ["dctcp", "cubic-ecn"]),
            ):
                for cc in ccs:
                    if quick and (n == 4 or cc in ("newreno", "cubic-ecn")):
                        continue
                    queue = {"kind": "fifo", "limit": bdp}
                    if qkind == "step":
                        queue = {"kind": "red-step", "limit": bdp, "k": round(0.2 * bdp)}
                    ns3_cc, ecn = CC[cc]
                    out.append(
                        {
                            "name": f"{topo} {qkind} {cc} x{n}",
                            "topology": topo,
                            "latnet_cc": cc,
                            "n": n,
                            "cc": ns3_cc,
                            "ecn": ecn,
                            "access_rate": arate,
                            "access_delay": adelay,
                            "rate": rate,
                            "delay": delay,
                            "queue": queue,
                            "sim_s": quick_s if quick else sim_s,
                            "starts_s": starts(n),
                            "measure": True,
                        }
                    )
    return out


def jain(xs: list[float]) -> float:
    s = sum(xs)
    return s * s / (len(xs) * sum(x * x for x in xs)) if s > 0 else 0.0


def goodputs(rx_bytes: list[int], cfg: dict) -> list[float]:
    return [
        b * 8 / (cfg["sim_s"] - st) / 1e6 for b, st in zip(rx_bytes, cfg["starts_s"], strict=True)
    ]


def run_latnet_validation(cfg: dict) -> dict:
    res = latnet.run(text=latnet_toml(cfg, parity=True, packets=True), packets=True)
    s = res.summary
    flows = s["flows"]
    bott = s["ports"][0]  # links[0] is left -> right: port 0
    hops = res.hops
    at = hops[(hops["node"] == "left") & (hops["port"] == 0)]
    soj = (at["start_tx_ns"] - at["enqueue_ns"]).astype("int64").sort_values().tolist()

    def pct(q: float):
        return soj[min(len(soj) - 1, max(0, round(q * (len(soj) - 1))))] if soj else None

    return {
        "rx_bytes": [f["tcp"]["delivered_bytes"] for f in flows],
        "retransmits": [f["tcp"]["retransmits"] for f in flows],
        "bottleneck_drops": sum(bott["queue"]["drops"].values()),
        "ce_marks": bott["queue"]["ce_marks"],
        "sojourn_ns": {"count": len(soj), "p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99)},
        "events": s["events"],
    }


def pct_diff(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return (a - b) / b * 100


def fmt(v, digits=1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def validate(quick: bool) -> list[dict]:
    configs = validation_configs(quick)
    print(f"validation: {len(configs)} configurations; ns-3 first ...", file=sys.stderr)
    t = time.perf_counter()
    ns3 = run_ns3(configs)
    print(f"  ns-3 done in {time.perf_counter() - t:.0f} s; latnet ...", file=sys.stderr)
    rows = []
    for cfg in configs:
        la = run_latnet_validation(cfg)
        nr = ns3[cfg["name"]]
        gl, gn = goodputs(la["rx_bytes"], cfg), goodputs(nr["rx_bytes"], cfg)
        # sensitivity: the same run with Linux's lost-retransmission detection (latnet's default)
        lr = latnet.run(
            text=latnet_toml(cfg, parity=True, packets=False, lost_retransmit=True), packets=False
        ).summary["flows"]
        glr = goodputs([f["tcp"]["delivered_bytes"] for f in lr], cfg)
        row = {
            "config": cfg["name"],
            "goodput_mbps": {"latnet": statistics.mean(gl), "ns3": statistics.mean(gn)},
            "per_flow_mbps": {"latnet": gl, "ns3": gn},
            "jain": {"latnet": jain(gl), "ns3": jain(gn)},
            "retransmits": {"latnet": sum(la["retransmits"]), "ns3": sum(nr["retransmits"])},
            "drops": {"latnet": la["bottleneck_drops"], "ns3": nr["bottleneck_drops"]},
            "ce_marks": {"latnet": la["ce_marks"], "ns3": nr["ce_marks"]},
            "sojourn_p50_ms": {
                "latnet": (la["sojourn_ns"]["p50"] or 0) / 1e6,
                "ns3": (nr["sojourn_ns"]["p50"] or 0) / 1e6,
            },
            "sojourn_p99_ms": {
                "latnet": (la["sojourn_ns"]["p99"] or 0) / 1e6,
                "ns3": (nr["sojourn_ns"]["p99"] or 0) / 1e6,
            },
            "events": {"latnet": la["events"], "ns3": nr["events"]},
            "latnet_lost_retransmit": {
                "goodput_mbps": statistics.mean(glr),
                "retransmits": sum(f["tcp"]["retransmits"] for f in lr),
            },
        }
        rows.append(row)
    return rows


def validation_table(rows: list[dict]) -> str:
    head = (
        "| configuration | goodput/flow Mbit/s latnet | ns-3 | diff | Jain latnet | ns-3 "
        "| retransmits latnet | ns-3 | drops latnet | ns-3 | CE marks latnet | ns-3 "
        "| sojourn p50 ms latnet | ns-3 | p99 latnet | ns-3 "
        "| latnet + lost-retx detection: goodput | retransmits |\n|" + "---|" * 18
    )
    lines = [head]
    for r in rows:
        d = pct_diff(r["goodput_mbps"]["latnet"], r["goodput_mbps"]["ns3"])
        flag = " **" if d is not None and abs(d) > 10 else ""
        lines.append(
            f"| {r['config']} | {fmt(r['goodput_mbps']['latnet'], 2)} | "
            f"{fmt(r['goodput_mbps']['ns3'], 2)} | {fmt(d)} %{flag} | "
            f"{r['jain']['latnet']:.3f} | {r['jain']['ns3']:.3f} | "
            f"{r['retransmits']['latnet']} | {r['retransmits']['ns3']} | "
            f"{r['drops']['latnet']} | {r['drops']['ns3']} | "
            f"{r['ce_marks']['latnet']} | {r['ce_marks']['ns3']} | "
            f"{fmt(r['sojourn_p50_ms']['latnet'], 2)} | {fmt(r['sojourn_p50_ms']['ns3'], 2)} | "
            f"{fmt(r['sojourn_p99_ms']['latnet'], 2)} | {fmt(r['sojourn_p99_ms']['ns3'], 2)} | "
            f"{fmt(r['latnet_lost_retransmit']['goodput_mbps'], 2)} | "
            f"{r['latnet_lost_retransmit']['retransmits']} |"
        )
    return "\n".join(lines)


def trace(name: str, quick: bool) -> None:
    """Flow 0 of one validation configuration, every 100 ms, in both simulators."""
    cfgs = {c["name"]: c for c in validation_configs(quick)}
    if name not in cfgs:
        raise SystemExit(f"no configuration {name!r}; one of: {', '.join(cfgs)}")
    cfg = dict(cfgs[name], trace=True, name=name + " (trace)")
    nr = run_ns3([cfg])[cfg["name"]]["trace"]
    res = latnet.run(text=latnet_toml(cfg, parity=True, packets=False), packets=False)
    ts = res.timeseries
    ts = ts[ts["flow"] == "f0"].set_index("t_s")
    print(f"\n## Trace of flow 0: {name}\n")
    print("| t s | latnet Mbit/s | cwnd B | retx | ns-3 Mbit/s | cwnd B | retx |")
    print("|---|---|---|---|---|---|---|")
    for row in nr:
        t = row["t_s"]
        la = ts.loc[round(t, 3)] if round(t, 3) in ts.index else None
        lg = "-" if la is None else f"{la['goodput_bps'] / 1e6:.1f}"
        lc = "-" if la is None else f"{int(la['cwnd'])}"
        lr = "-" if la is None else f"{int(la['retransmits'])}"
        print(
            f"| {t:.1f} | {lg} | {lc} | {lr} | {row['goodput_mbps']:.1f} | {row['cwnd']} "
            f"| {row['retransmits']} |"
        )


def speed_cases(quick: bool) -> list[dict]:
    ref = {
        "name": "ref 4 cubic 100M/10ms 10s",
        "latnet_file": str(ROOT / "experiments" / "tcp_dumbbell.toml"),
        "n": 4,
        "cc": "TcpCubic",
        "ecn": False,
        "access_rate": "1Gbps",
        "access_delay": "1ms",
        "rate": "100Mbps",
        "delay": "10ms",
        "queue": {"kind": "fifo", "limit": 100},
        "sim_s": 10.0,
        "starts_s": starts(4),
        "measure": False,
    }
    g_cubic = dict(
        ref,
        name="4 cubic 1G/5ms-RTT 3s",
        latnet_file=None,
        latnet_cc="cubic",
        access_rate="10Gbps",
        access_delay="250us",
        rate="1Gbps",
        delay="2ms",
        queue={"kind": "fifo", "limit": 416},
        sim_s=3.0,
    )
    g_dctcp = dict(
        g_cubic,
        name="4 dctcp step 1G/5ms-RTT 3s",
        latnet_cc="dctcp",
        cc="TcpDctcp",
        ecn=True,
        queue={"kind": "red-step", "limit": 416, "k": 83},
    )
    return [ref] if quick else [ref, g_cubic, g_dctcp]


def time_latnet(case: dict, repeat: int) -> dict:
    if case.get("latnet_file"):
        text = Path(case["latnet_file"]).read_text()
    else:
        text = latnet_toml(case, parity=False, packets=False)
    cpu, wall, events = [], [], 0
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        res = latnet.run(text=text, packets=False)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
        events = res.summary["events"]
        goodput = sum(f["tcp"]["goodput_bps"] for f in res.summary["flows"]) / 1e6
    return {
        "cpu_s": statistics.median(cpu),
        "wall_s": statistics.median(wall),
        "events": events,
        "goodput_mbps": goodput,
    }


def speed(quick: bool, repeat: int) -> list[dict]:
    cases = speed_cases(quick)
    batch = [dict(c, name=f"{c['name']} #{k}") for k in range(repeat) for c in cases]
    print(f"speed: {len(batch)} ns-3 runs ...", file=sys.stderr)
    ns3 = run_ns3(batch)
    rows = []
    for c in cases:
        runs = [ns3[f"{c['name']} #{k}"] for k in range(repeat)]
        n_cpu = statistics.median(r["run_cpu_s"] for r in runs)
        n_wall = statistics.median(r["run_wall_s"] for r in runs)
        gp = sum(
            b * 8 / (c["sim_s"] - st)
            for b, st in zip(runs[0]["rx_bytes"], c["starts_s"], strict=True)
        )
        la = time_latnet(c, repeat)
        rows.append(
            {
                "case": c["name"],
                "sim_s": c["sim_s"],
                "latnet": la,
                "ns3": {
                    "cpu_s": n_cpu,
                    "wall_s": n_wall,
                    "events": runs[0]["events"],
                    "goodput_mbps": gp / 1e6,
                    "import_s": runs[0]["import_s"],
                },
                "speedup_cpu": n_cpu / la["cpu_s"],
                "speedup_wall": n_wall / la["wall_s"],
                "latnet_realtime_factor": c["sim_s"] / la["cpu_s"],
            }
        )
    return rows


def speed_table(rows: list[dict]) -> str:
    lines = [
        "| case | latnet CPU s | latnet wall s | latnet events | ns-3 CPU s | ns-3 wall s "
        "| ns-3 events | ns-3 CPU / latnet CPU | simulated s per latnet CPU s |",
        "|" + "---|" * 9,
    ]
    for r in rows:
        la, n = r["latnet"], r["ns3"]
        lines.append(
            f"| {r['case']} | {la['cpu_s']:.3f} | {la['wall_s']:.3f} | {la['events']:,} | "
            f"{n['cpu_s']:.2f} | {n['wall_s']:.2f} | {n['events']:,} | "
            f"{r['speedup_cpu']:.1f}x | {r['latnet_realtime_factor']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["validate", "speed"])
    ap.add_argument("--quick", action="store_true", help="fewer and shorter configurations")
    ap.add_argument("--repeat", type=int, default=3, help="runs per speed case (median)")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-tcp")
    ap.add_argument(
        "--trace",
        metavar="CONFIG",
        help="print flow 0 of one validation configuration every 100 ms in both simulators",
    )
    ap.add_argument(
        "--reuse-ns3",
        type=Path,
        metavar="JSON",
        help="take ns-3's results from an earlier bench-tcp.json (re-analysis only)",
    )
    args = ap.parse_args()
    if args.reuse_ns3:
        NS3_REUSE.update(json.loads(args.reuse_ns3.read_text()).get("ns3_raw", {}))
    if args.trace:
        trace(args.trace, args.quick)
        return
    report: dict = {"quick": args.quick, "repeat": args.repeat, "ns3": NS3_SPEC}
    if args.only in (None, "validate"):
        rows = validate(args.quick)
        report["validation"] = rows
        print("\n## Validation: latnet vs ns-3\n")
        print(validation_table(rows))
    if args.only in (None, "speed"):
        rows = speed(args.quick, args.repeat)
        report["speed"] = rows
        print("\n## Speed: latnet vs ns-3\n")
        print(speed_table(rows))
        ok = all(r["speedup_cpu"] >= GOAL for r in rows)
        print(f"\ngoal ({GOAL:.0f}x less CPU than ns-3 in every case): {'met' if ok else 'missed'}")
    report["ns3_raw"] = NS3_RAW
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench-tcp.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out / 'bench-tcp.json'}")


if __name__ == "__main__":
    main()
