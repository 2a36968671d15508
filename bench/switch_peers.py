"""latnet-switch vs Linux bridge, Open vSwitch userspace and a C AF_PACKET forwarder, one run.

    sudo .venv/bin/python bench/switch_peers.py [--seconds 5] [--rounds 2] [--out out/bench]

Topology: h1 -- sw -- h2, one namespace each, veth links (a latnet testbed). Host interfaces
have tx checksum offload, TSO and GSO off, so every path forwards full-size frames. Each round
measures, for each data path in turn on the same namespaces (round r starts with path r, so
the order rotates):

* TCP: iperf3 cubic h1 -> h2 (Gbit/s, and frames/s counted on the switch's ingress port);
* 64-byte frames (60 bytes + FCS): ``bench/udp_blast.c`` (batches of 64 datagrams per
  ``sendmmsg``, bounded by a count and a time; ``--udp-sender latnet`` uses
  ``latnet-switch send`` instead, one ``sendto`` per frame and no faster than iperf3's sender)
  flat out for ``--seconds``, with ``latnet-switch recv`` as the sink on h2 (it checks every
  payload): frames/s offered (h1's interface transmit counter) and delivered (h2's interface
  receive counter, i.e. what the data path handed to h2);
* latency: ping (200 x 10 ms) and irtt (3 s, 10 ms interval) round-trip medians at idle.

The data paths: latnet-switch (FIB forwarding, FIFO, rate and delay emulation on but set to
100 Gbit/s and 0 s so they cost only their bookkeeping; ``latnet-switch-pcap``: the same,
capturing every frame of both directions with ``--pcap``), a Linux bridge in the switch namespace,
Open vSwitch 3.x with ``datapath_type=netdev`` (ovsdb-server and ovs-vswitchd started here
with private run and database directories, ovs-vswitchd inside the switch namespace), and
``bench/afpacket_fwd.c`` (compiled here with ``gcc -O2`` into OUT), a minimal C forwarder that
sends every frame of one port out of the other: in batches of 64 (recvmmsg / sendmmsg) and one
frame per system call. Results (medians over rounds, the 1-minute load average before each path)
are printed and written to OUT/switch_peers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from latnet.testbed import Testbed  # noqa: E402

# The 64-byte flow asks for 2.5 M frames/s (1.2 Gbit/s), more than any sender here manages, so
# the sender runs flat out; its packet count and stop time bound it.
UDP64_RATE_PPS = 2_500_000
UDP64_FRAME = 60

SCENARIO = """
[sim]
duration = "{duration}s"
[defaults]
queue = {{ kind = "fifo", limit_packets = 4096, limit_bytes = "8MB" }}
[defaults.link]
rate = "100Gbps"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "sw"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "sw"
[[links]]
a = "sw"
b = "h2"
[[flows]]
name = "u64"
src = "h1"
dst = "h2"
size = {frame}
stop = "{seconds}s"
count = {count}
traffic = {{ kind = "cbr", rate = "{rate_bps}bps" }}
"""


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(argv, check=True, **kw)


def rx_packets(tb: Testbed) -> int:
    p = tb.run("sw", ["cat", "/sys/class/net/lk0/statistics/rx_packets"])
    return int(p.stdout)


def tcp(tb: Testbed, seconds: int) -> dict:
    srv = tb.popen("h2", ["iperf3", "-s", "-1", "-B", tb.address("h2")], stdout=subprocess.DEVNULL)
    tb.wait_listening("h2", 5201)
    p0, t0 = rx_packets(tb), time.monotonic()
    cmd = ["iperf3", "-c", tb.address("h2"), "-t", str(seconds), "-C", "cubic", "-J"]
    out = tb.run("h1", cmd, timeout=seconds + 30)
    p1, t1 = rx_packets(tb), time.monotonic()
    srv.wait(timeout=10)
    e = json.loads(out.stdout)["end"]
    return {
        "tcp_gbps": e["sum_received"]["bits_per_second"] / 1e9,
        "tcp_retransmits": e["sum_sent"].get("retransmits"),
        "tcp_frames_per_s": (p1 - p0) / (t1 - t0),
    }


def iface_counter(tb: Testbed, node: str, counter: str) -> int:
    name = tb.node(node)["ifaces"][0]["name"]
    p = tb.run(node, ["cat", f"/sys/class/net/{name}/statistics/{counter}"])
    return int(p.stdout)


def sleep_until_ns(t_ns: int) -> None:
    time.sleep(max(0.0, (t_ns - time.monotonic_ns()) / 1e9))


def udp64(tb: Testbed, seconds: int, blast: Path | None) -> dict:
    """64-byte frames flat out from h1 to h2 (flow u64 of the scenario) with `blast`
    (bench/udp_blast.c, batches of 64 per sendmmsg) or, when None, latnet's own sender
    (one sendto per frame); latnet's receiver as the sink.
    Rates come from the interface counters over `seconds` of steady sending; the sender is then
    stopped with SIGTERM (its schedule alone would not end it in time when it falls behind)."""
    binary, sc = tb.binary, str(tb.scenario)
    t0 = time.monotonic_ns() + 300_000_000
    warm = 200_000_000  # let the sender and the data path get going
    if blast is None:
        sender = [binary, "send", "--scenario", sc, "--flow", "u64", "--t0", str(t0)]
    else:
        # The scenario's flow u64 (index 0, ports 10000 -> 20000), sent in batches.
        sender = [str(blast), tb.address("h1"), "10000", tb.address("h2"), "20000"]
        sender += ["--payload", str(UDP64_FRAME - 42), "--count", str(UDP64_RATE_PPS * seconds)]
        sender += ["--seconds", str(seconds + 2)]
    with tempfile.TemporaryDirectory() as d:
        rep = Path(d) / "recv.json"
        until = t0 + warm + (seconds + 2) * 1_000_000_000
        rcv = tb.popen(
            "h2",
            [binary, "recv", "--scenario", sc, "--host", "h2", "--until", str(until)]
            + ["--dir", d, "--out", str(rep)],
            stdout=subprocess.DEVNULL,
        )
        if blast is not None:
            sleep_until_ns(t0)
        snd = tb.popen("h1", sender, stdout=subprocess.PIPE, text=True)
        try:
            sleep_until_ns(t0 + warm)
            tx0, rx0 = iface_counter(tb, "h1", "tx_packets"), iface_counter(tb, "h2", "rx_packets")
            a = time.monotonic()
            sleep_until_ns(t0 + warm + seconds * 1_000_000_000)
            tx1, rx1 = iface_counter(tb, "h1", "tx_packets"), iface_counter(tb, "h2", "rx_packets")
            dt = time.monotonic() - a
        finally:
            snd.terminate()
            out, _ = snd.communicate(timeout=30)
        rcv.wait(timeout=seconds + 30)
        got = json.loads(rep.read_text())["flows"][0]
    sent = json.loads(out)
    offered, delivered = tx1 - tx0, rx1 - rx0
    return {
        "udp64_sent": sent["sent"],
        "udp64_send_errors": sent["send_errors"],
        "udp64_offered_pps": offered / dt,
        "udp64_delivered_pps": delivered / dt,
        "udp64_delivered_pct": 100.0 * delivered / max(1, offered),
        "udp64_app_received": got["received"],
        "udp64_corrupted": got["corrupted"],
        "udp64_reordered": got["reordered"],
    }


def latency(tb: Testbed) -> dict:
    out = tb.run("h1", ["ping", "-c", "200", "-i", "0.01", "-q", tb.address("h2")], timeout=60)
    line = [x for x in out.stdout.splitlines() if "min/avg" in x][0]
    mn, avg, mx, _ = (float(v) for v in line.split("=")[1].split()[0].split("/"))
    srv = tb.popen("h2", ["irtt", "server", "-b", tb.address("h2")], stdout=subprocess.DEVNULL)
    time.sleep(0.3)  # bench script (not a test): irtt server has no readiness signal
    with tempfile.TemporaryDirectory() as d:
        o = Path(d) / "irtt.json"
        cmd = ["irtt", "client", "-q", "-i", "10ms", "-d", "3s", "-o", str(o), tb.address("h2")]
        tb.run("h1", cmd)
        rtt = json.loads(o.read_text())["stats"]["rtt"]
    srv.terminate()
    srv.wait(timeout=10)
    return {
        "ping_avg_ms": avg,
        "ping_min_ms": mn,
        "irtt_median_ms": rtt["median"] / 1e6,
        "irtt_mean_ms": rtt["mean"] / 1e6,
    }


TESTS = ("tcp", "udp64", "latency")


def measure(tb: Testbed, seconds: int, blast: Path | None, tests: list[str]) -> dict:
    r = {}
    if "tcp" in tests:
        r.update(tcp(tb, seconds))
    if "udp64" in tests:
        r.update(udp64(tb, seconds, blast))
    if "latency" in tests:
        r.update(latency(tb))
    return r


def point_hosts_at(tb: Testbed, to_switch: bool) -> None:
    """Neighbour entries of the hosts: the switch's port MACs (latnet-switch routes) or each
    other's MACs (a learning bridge forwards them)."""
    h1 = tb.node("h1")["ifaces"][0]
    h2 = tb.node("h2")["ifaces"][0]
    gw = tb.plan["gateway"]
    for host, me, other in (("h1", h1, h2), ("h2", h2, h1)):
        mac = me["peer_mac"] if to_switch else other["mac"]
        cmd = ["ip", "neigh", "replace", gw, "lladdr", mac, "dev", me["name"], "nud", "permanent"]
        tb.run(host, cmd)


def rps(tb: Testbed, node: str, iface: str, cpus: list[int]) -> None:
    """Receive packet steering: frames arriving on `iface` of `node` are processed by the
    network stack on `cpus` (not on the CPU whose transmit handed them over, the veth default)."""
    mask = f"{sum(1 << c for c in cpus):x}"
    path = f"/sys/class/net/{iface}/queues/rx-0/rps_cpus"
    tb.run(node, ["sh", "-c", f"echo {mask} > {path}"])


def place(tb: Testbed, pin: int | None) -> None:
    """CPU placement for `--pin CPU`: the forwarder under test owns CPU `pin` together with the
    receive processing of the switch namespace's ports (RPS), while the hosts' network stacks
    (and, left to the scheduler, iperf3 and the other applications) use the other CPUs. Without
    `--pin` every RPS mask is cleared: the veth default, where a frame is received on the CPU
    that transmitted it."""
    others = [c for c in range(os.cpu_count() or 1) if c != pin]
    for host in ("h1", "h2"):
        rps(tb, host, tb.node(host)["ifaces"][0]["name"], others if pin is not None else [])
    for iface in ("lk0", "lk1"):
        rps(tb, "sw", iface, [pin] if pin is not None else [])


def pin_process(pid: int, pin: int | None) -> None:
    """Every thread of process `pid` onto CPU `pin` (no-op without `--pin`)."""
    if pin is not None:
        sh(["taskset", "-a", "-p", "-c", str(pin), str(pid)])


class Ovs:
    def __init__(self, tb: Testbed):
        self.tb = tb
        self.pid = 0
        self.base = Path(tempfile.mkdtemp(prefix="latnet-ovs-"))
        for d in ("run", "log", "db", "etc"):
            (self.base / d).mkdir()
        self.env = dict(
            os.environ,
            OVS_RUNDIR=str(self.base / "run"),
            OVS_LOGDIR=str(self.base / "log"),
            OVS_DBDIR=str(self.base / "db"),
            OVS_SYSCONFDIR=str(self.base / "etc"),
        )
        self.db = f"unix:{self.base / 'run' / 'db.sock'}"

    def vsctl(self, *args: str) -> None:
        sh(["ovs-vsctl", f"--db={self.db}", "--timeout=20", *args], env=self.env)

    def start(self) -> None:
        conf = self.base / "db" / "conf.db"
        sh(["ovsdb-tool", "create", str(conf), "/usr/share/openvswitch/vswitch.ovsschema"])
        sh(
            ["ovsdb-server", str(conf), f"--remote=punix:{self.base / 'run' / 'db.sock'}"]
            + [f"--pidfile={self.base / 'run' / 'ovsdb-server.pid'}", "--detach"]
            + [f"--log-file={self.base / 'log' / 'ovsdb-server.log'}"],
            env=self.env,
        )
        self.vsctl("--no-wait", "init")
        sh(
            self.tb.cmd("sw", ["ovs-vswitchd", self.db, "--detach"])
            + [f"--pidfile={self.base / 'run' / 'ovs-vswitchd.pid'}"]
            + [f"--log-file={self.base / 'log' / 'ovs-vswitchd.log'}"],
            env=self.env,
        )
        self.pid = int((self.base / "run" / "ovs-vswitchd.pid").read_text())
        self.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
        self.vsctl("add-port", "br0", "lk0")
        self.vsctl("add-port", "br0", "lk1")
        self.tb.run("sw", ["ip", "link", "set", "br0", "up"], check=False)

    def stop(self) -> None:
        for name in ("ovs-vswitchd", "ovsdb-server"):
            pid = self.base / "run" / f"{name}.pid"
            if pid.exists():
                subprocess.run(["kill", pid.read_text().strip()], check=False)
        time.sleep(0.5)
        shutil.rmtree(self.base, ignore_errors=True)


class CForwarder:
    """bench/afpacket_fwd.c between the switch namespace's two ports (hosts address each
    other's MACs, as through the bridge)."""

    def __init__(self, tb: Testbed, exe: Path, batch: int, seconds: int):
        self.tb, self.exe, self.batch, self.seconds = tb, exe, batch, seconds
        self.p: subprocess.Popen | None = None
        self.counters: dict = {}

    def start(self) -> None:
        # Bounded on its own too: longer than one measurement, never forever.
        argv = [str(self.exe), "lk0", "lk1", "--batch", str(self.batch)]
        argv += ["--seconds", str(4 * self.seconds + 60)]
        self.p = self.tb.popen("sw", argv, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if line.strip() != "ready":
            self.p.wait(timeout=5)
            raise RuntimeError(f"afpacket_fwd did not start (status {self.p.returncode})")

    def stop(self) -> None:
        if self.p is None:
            return
        if self.p.poll() is None:
            self.p.terminate()
        try:
            out, _ = self.p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, _ = self.p.communicate()
        self.p = None
        lines = [x for x in (out or "").splitlines() if x.startswith("{")]
        self.counters = json.loads(lines[-1]) if lines else {}


def compile_c(out: Path, name: str) -> Path:
    """bench/NAME.c compiled with gcc -O2 into the output directory."""
    exe = out / name
    src = ROOT / "bench" / f"{name}.c"
    sh(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(src)])
    return exe


C_PATHS = {"c-afpacket-b64": 64, "c-afpacket-1": 1}
PATH_NAMES = ("latnet-switch", "linux-bridge", "ovs-netdev", *C_PATHS, "latnet-switch-pcap")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="out/bench")
    ap.add_argument(
        "--udp-sender",
        choices=["blast", "latnet"],
        default="blast",
        help="64-byte test sender: bench/udp_blast.c (sendmmsg batches of 64) or "
        "`latnet-switch send` (one sendto per frame, as fast as iperf3's)",
    )
    ap.add_argument(
        "--paths",
        default=",".join(PATH_NAMES),
        help="comma-separated subset of the data paths (default: all of "
        + ", ".join(PATH_NAMES)
        + "); the ratios need latnet-switch and the peer",
    )
    ap.add_argument(
        "--tests",
        default=",".join(TESTS),
        help="comma-separated subset of " + ", ".join(TESTS) + " (default: all)",
    )
    ap.add_argument(
        "--pin",
        type=int,
        metavar="CPU",
        help="give the forwarder under test CPU CPU (all its threads, and the receive "
        "processing of the switch's ports via RPS) and steer the hosts' receive processing to "
        "the other CPUs; the same placement for every path",
    )
    args = ap.parse_args()
    chosen = args.paths.split(",")
    tests = args.tests.split(",")
    for name, allowed, what in ((chosen, PATH_NAMES, "--paths"), (tests, TESTS, "--tests")):
        bad = [x for x in name if x not in allowed]
        if bad:
            print(
                f"switch_peers: {what}: unknown {bad}, expected some of {allowed}", file=sys.stderr
            )
            return 2
    if os.geteuid() != 0:
        print("switch_peers: needs root (network namespaces)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    exe = compile_c(out, "afpacket_fwd")
    blast = compile_c(out, "udp_blast") if args.udp_sender == "blast" else None
    sc = out / "switch_peers.toml"
    sc.write_text(
        SCENARIO.format(
            duration=args.seconds + 2,
            seconds=args.seconds,
            frame=UDP64_FRAME,
            count=UDP64_RATE_PPS * args.seconds,
            rate_bps=UDP64_RATE_PPS * UDP64_FRAME * 8,
        )
    )
    names = [n for n in PATH_NAMES if n in chosen]
    results: dict[str, list[dict]] = {n: [] for n in names}
    c_counters: dict[str, list[dict]] = {n: [] for n in C_PATHS}

    def run(name: str, tb: Testbed) -> None:
        load = os.getloadavg()[0]
        r = measure(tb, args.seconds, blast, tests)
        r["load_1min"] = load
        results[name].append(r)

    def latnet_switch(tb: Testbed, pcap: bool = False) -> None:
        captures = out / "switch_peers-pcap"
        p = tb.start_switch("sw", ["--pcap", str(captures)] if pcap else [])
        tb._wait_ready("sw")
        try:
            pin_process(p.pid, args.pin)
            point_hosts_at(tb, to_switch=True)
            run("latnet-switch-pcap" if pcap else "latnet-switch", tb)
        finally:
            tb.stop_switches()
            shutil.rmtree(captures, ignore_errors=True)  # a few GB per round

    def linux_bridge(tb: Testbed) -> None:
        point_hosts_at(tb, to_switch=False)
        tb.run("sw", ["ip", "link", "add", "br0", "type", "bridge"])
        try:
            for i in ("lk0", "lk1"):
                tb.run("sw", ["ip", "link", "set", i, "master", "br0"])
            tb.run("sw", ["ip", "link", "set", "br0", "up"])
            run("linux-bridge", tb)
        finally:
            tb.run("sw", ["ip", "link", "del", "br0"], check=False)

    def ovs_netdev(tb: Testbed) -> None:
        point_hosts_at(tb, to_switch=False)
        ovs = Ovs(tb)
        try:
            ovs.start()
            pin_process(ovs.pid, args.pin)
            run("ovs-netdev", tb)
        finally:
            ovs.stop()
            # ovs-vswitchd leaves its netdev bridge's tap device behind.
            tb.run("sw", ["ip", "link", "del", "br0"], check=False)

    def c_forwarder(name: str):
        def go(tb: Testbed) -> None:
            point_hosts_at(tb, to_switch=False)
            fwd = CForwarder(tb, exe, C_PATHS[name], args.seconds)
            try:
                fwd.start()
                pin_process(fwd.p.pid, args.pin)
                run(name, tb)
            finally:
                fwd.stop()
                c_counters[name].append(fwd.counters)

        return go

    every = dict(
        zip(
            PATH_NAMES,
            [
                latnet_switch,
                linux_bridge,
                ovs_netdev,
                *(c_forwarder(n) for n in C_PATHS),
                lambda tb: latnet_switch(tb, pcap=True),
            ],
            strict=True,
        )
    )
    paths = [every[n] for n in names]
    # realtime=False: latnet-switch competes for the CPU like ovs-vswitchd does.
    with Testbed(sc, run_dir=out / "switch_peers-run", offloads="off", realtime=False) as tb:
        tb.stop_switches()  # each path starts from a switch namespace that forwards nothing
        place(tb, args.pin)
        for rnd in range(args.rounds):
            # Each round starts with the next path, so that a load trend on the shared
            # machine does not always favour the same path.
            k = rnd % len(paths)
            for path in paths[k:] + paths[:k]:
                path(tb)
            for name, rs in results.items():
                print(f"round {rnd + 1}: {name}: {rs[-1]}", flush=True)
    keys = list(next(iter(results.values()))[0])
    summary = {
        name: {k: statistics.median(r[k] for r in rs if r.get(k) is not None) for k in keys}
        for name, rs in results.items()
    }
    ratio_keys = [k for k in ("tcp_gbps", "tcp_frames_per_s", "udp64_delivered_pps") if k in keys]
    ratios = {
        f"latnet/{peer}": {k: summary["latnet-switch"][k] / summary[peer][k] for k in ratio_keys}
        for peer in ("ovs-netdev", "c-afpacket-b64")
        if "latnet-switch" in summary and peer in summary
    }
    if "latnet-switch" in summary and "latnet-switch-pcap" in summary:
        ratios["latnet-pcap/latnet"] = {
            k: summary["latnet-switch-pcap"][k] / summary["latnet-switch"][k] for k in ratio_keys
        }
    loads = [r["load_1min"] for rs in results.values() for r in rs]
    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": args.seconds,
        "udp_sender": args.udp_sender,
        "rounds": args.rounds,
        "pin": args.pin,
        "cpus": os.cpu_count(),
        "load_1min_range": [min(loads), max(loads)],
        "median": summary,
        "ratios": ratios,
        "c_forwarder_counters": c_counters,
        "runs": results,
    }
    (out / "switch_peers.json").write_text(json.dumps(doc, indent=2) + "\n")
    cols = [
        c
        for c in (
            "tcp_gbps",
            "tcp_frames_per_s",
            "udp64_offered_pps",
            "udp64_delivered_pps",
            "ping_avg_ms",
            "ping_min_ms",
            "irtt_median_ms",
            "load_1min",
        )
        if c in keys
    ]
    print("\n" + "path".ljust(16) + "".join(c.rjust(20) for c in cols))
    for name, s in summary.items():
        print(name.ljust(16) + "".join(f"{s[c]:20.3f}" for c in cols))
    print(f"\n1-minute load average during the run: {min(loads):.1f}-{max(loads):.1f}")
    for peer, r in ratios.items():
        print(f"{peer}: " + ", ".join(f"{k} {v:.2f}x" for k, v in r.items()))
    print(f"wrote {out / 'switch_peers.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
