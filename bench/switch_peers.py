"""latnet-switch vs the Linux bridge vs Open vSwitch's userspace datapath, in one run.

    sudo .venv/bin/python bench/switch_peers.py [--seconds 5] [--rounds 2] [--out out/bench]

Topology: h1 -- sw -- h2, one namespace each, veth links (a latnet testbed). Host interfaces
have tx checksum offload, TSO and GSO off, so every path forwards full-size frames. Each round
measures, for each data path in turn on the same namespaces:

* TCP: iperf3 cubic h1 -> h2 (Gbit/s, and frames/s counted on the switch's ingress port);
* 64-byte frames: iperf3 UDP with 18-byte payloads at full speed (frames/s delivered);
* latency: ping (200 x 10 ms) and irtt (3 s, 10 ms interval) round-trip medians at idle.

The data paths: latnet-switch (FIB forwarding, FIFO, rate and delay emulation on but set to
100 Gbit/s and 0 s so they cost only their bookkeeping), a Linux bridge in the switch namespace,
and Open vSwitch 3.x with ``datapath_type=netdev`` (ovsdb-server and ovs-vswitchd started here
with private run and database directories, ovs-vswitchd inside the switch namespace). Results
(medians over rounds) are printed and written to OUT/switch_peers.json.
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

SCENARIO = """
[sim]
duration = "1s"
[defaults]
queue = { kind = "fifo", limit_packets = 4096, limit_bytes = "8MB" }
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


def udp64(tb: Testbed, seconds: int) -> dict:
    srv = tb.popen("h2", ["iperf3", "-s", "-1", "-B", tb.address("h2")], stdout=subprocess.DEVNULL)
    tb.wait_listening("h2", 5201)
    cmd = ["iperf3", "-c", tb.address("h2"), "-u", "-b", "0", "-l", "18"]
    cmd += ["-t", str(seconds), "-J"]
    out = tb.run("h1", cmd, timeout=seconds + 30)
    srv.wait(timeout=10)
    s = json.loads(out.stdout)["end"]["sum"]
    sent = s["packets"]
    lost = s.get("lost_packets", 0)
    return {
        "udp64_sent_pps": sent / s["seconds"],
        "udp64_delivered_pps": (sent - lost) / s["seconds"],
        "udp64_loss_pct": 100.0 * lost / max(1, sent),
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


def measure(tb: Testbed, seconds: int) -> dict:
    r = {}
    r.update(tcp(tb, seconds))
    r.update(udp64(tb, seconds))
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


class Ovs:
    def __init__(self, tb: Testbed):
        self.tb = tb
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("switch_peers: needs root (network namespaces)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sc = out / "switch_peers.toml"
    sc.write_text(SCENARIO)
    results: dict[str, list[dict]] = {"latnet-switch": [], "linux-bridge": [], "ovs-netdev": []}
    load = []
    # realtime=False: latnet-switch competes for the CPU like ovs-vswitchd does.
    with Testbed(sc, run_dir=out / "switch_peers-run", offloads="off", realtime=False) as tb:
        for rnd in range(args.rounds):
            load.append(os.getloadavg()[0])
            # latnet-switch
            if rnd > 0:
                tb.start_switch("sw")
                tb._wait_ready("sw")
            point_hosts_at(tb, to_switch=True)
            results["latnet-switch"].append(measure(tb, args.seconds))
            tb.stop_switches()
            # Linux bridge
            point_hosts_at(tb, to_switch=False)
            tb.run("sw", ["ip", "link", "add", "br0", "type", "bridge"])
            for i in ("lk0", "lk1"):
                tb.run("sw", ["ip", "link", "set", i, "master", "br0"])
            tb.run("sw", ["ip", "link", "set", "br0", "up"])
            results["linux-bridge"].append(measure(tb, args.seconds))
            tb.run("sw", ["ip", "link", "del", "br0"])
            # Open vSwitch userspace datapath
            ovs = Ovs(tb)
            try:
                ovs.start()
                results["ovs-netdev"].append(measure(tb, args.seconds))
            finally:
                ovs.stop()
                # ovs-vswitchd leaves its netdev bridge's tap device behind.
                tb.run("sw", ["ip", "link", "del", "br0"], check=False)
            for name, rs in results.items():
                print(f"round {rnd + 1}: {name}: {rs[-1]}", flush=True)
    keys = list(results["latnet-switch"][0])
    summary = {
        name: {k: statistics.median(r[k] for r in rs if r.get(k) is not None) for k in keys}
        for name, rs in results.items()
    }
    doc = {
        "seconds": args.seconds,
        "rounds": args.rounds,
        "load_1min": load,
        "cpus": os.cpu_count(),
        "median": summary,
        "runs": results,
    }
    (out / "switch_peers.json").write_text(json.dumps(doc, indent=2) + "\n")
    cols = ["tcp_gbps", "tcp_frames_per_s", "udp64_delivered_pps", "ping_avg_ms", "irtt_median_ms"]
    print("\n" + "path".ljust(14) + "".join(c.rjust(22) for c in cols))
    for name, s in summary.items():
        print(name.ljust(14) + "".join(f"{s[c]:22.3f}" for c in cols))
    ls, ovs = summary["latnet-switch"], summary["ovs-netdev"]
    print(
        f"\nlatnet-switch / OVS userspace: TCP {ls['tcp_gbps'] / ovs['tcp_gbps']:.2f}x, "
        f"64-byte frames {ls['udp64_delivered_pps'] / ovs['udp64_delivered_pps']:.2f}x"
    )
    print(f"wrote {out / 'switch_peers.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
