"""Emulation testbeds: a scenario's nodes as network namespaces joined by veth pairs, with
``latnet-switch`` processes forwarding real packets between them.

    >>> from latnet.testbed import Testbed
    >>> with Testbed("experiments/demo.toml") as tb:          # up on enter, down on exit
    ...     tb.run("controller", ["ping", "-c", "3", tb.address("sensor")])

What ``up`` creates is recorded *before* it is created, in a state file under the state
directory (``$LATNET_STATE_DIR``, default ``/run/latnet``), so ``down`` -- or
``latnet testbed down`` from another shell, after Ctrl-C or a crash -- removes exactly that,
idempotently: it kills every process inside the testbed's namespaces (switches, iperf3, irtt,
...) and deletes the namespaces, which deletes their veth interfaces. Nothing is created outside
those namespaces. Names start with a per-testbed prefix (``ln`` + 6 hex digits + ``-``), so
parallel testbeds do not collide.

The layout (namespace per node, ``lk<i>`` interfaces, MACs, host routes) comes from
``latnet-switch plan``; see ``crates/latnet-switch/src/plan.rs``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import LatnetError

PREFIX_RE = re.compile(r"^ln[0-9a-f]{6}-$")
#: Bytes of MTU a switch's interfaces have beyond 1,500: a tag stack of the most tags a
#: controller may put on a path (16, 4 bytes each) on a host's full-size frame.
TAG_ROOM = 4 * 16


def state_dir() -> Path:
    """Where testbeds record what they created."""
    return Path(os.environ.get("LATNET_STATE_DIR", "/run/latnet")) / "testbeds"


def binary(name: str) -> str:
    """Path of one of latnet's Rust binaries (``latnet-switch``, ``latnet-ctld``):
    ``$LATNET_SWITCH`` / ``$LATNET_CTLD``, else next to this Python's ``latnet`` command
    (``make build`` installs them there), else on ``PATH``."""
    var = name.upper().replace("-", "_")
    env = os.environ.get(var)
    if env:
        return env
    here = Path(sys.prefix) / "bin" / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found:
        return found
    raise LatnetError(
        f"{name} not found: run `make build` (installs it into .venv/bin) or set "
        f"{var} to the binary built by `cargo build --release -p {name}`"
    )


def switch_binary() -> str:
    """Path of the ``latnet-switch`` binary (see ``binary``)."""
    return binary("latnet-switch")


def require_root(what: str = "emulation") -> None:
    if os.geteuid() != 0:
        raise LatnetError(f"{what} creates network namespaces and needs root")


def _sh(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise LatnetError(f"`{' '.join(argv)}` failed: {p.stderr.strip() or p.stdout.strip()}")
    return p


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Testbed:
    """One scenario as namespaces, veth links and switch processes."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        scenario: str | os.PathLike[str],
        run_dir: str | os.PathLike[str] | None = None,
        prefix: str | None = None,
        offloads: str = "off",
        seed: int | None = None,
        realtime: bool = True,
        ipv6: bool = False,
        time_zero_after_ns: int | None = None,
        pcap_dir: str | os.PathLike[str] | None = None,
        queues: str | None = None,
        hop_records: bool = False,
        spin_us: int | None = None,
        switch_processes: str | None = None,
        host_nics: str = "shaped",
    ):
        if host_nics not in ("shaped", "veth"):
            raise LatnetError(
                "host_nics: expected 'shaped' (a TCP host's NIC at its link's rate) or 'veth'"
            )
        if offloads not in ("off", "csum"):
            raise LatnetError("offloads: expected 'off' (no tx checksum, TSO, GSO) or 'csum'")
        self.scenario = Path(scenario).resolve()
        self.prefix = prefix or f"ln{secrets.token_hex(3)}-"
        if not PREFIX_RE.match(self.prefix):
            raise LatnetError(f"prefix {self.prefix!r}: expected ln + 6 hex digits + '-'")
        self.run_dir = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="latnet-tb-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.offloads = offloads
        self.seed = seed
        self.realtime = realtime and shutil.which("chrt") is not None
        self.binary = switch_binary()
        self.plan = self._plan()
        # hosts get IPv6 when a flow's SLO rides in a hop-by-hop option, or when asked (real
        # TCP over IPv6, e.g. `tcp-send --dst [ADDR]:PORT`)
        self.plan["ipv6"] = self.plan["ipv6"] or ipv6
        # With ``time_zero_after_ns``, the experiment's time zero (CLOCK_MONOTONIC) is that long
        # after the switches are started; they get it (``--t0``) so that the dual-queue AQMs
        # count their reporting epochs from it, as in the simulator. Set on ``up()``.
        self.time_zero_after_ns = time_zero_after_ns
        self.time_zero_ns: int | None = None
        # With ``pcap_dir``, every switch writes a capture of each port it emulates (its own
        # egress ports and its hosts'): ``<node>-<peer>.pcap`` (``.1.pcap`` for the second of
        # parallel links), as the simulator names them.
        self.pcap_dir = Path(pcap_dir).resolve() if pcap_dir is not None else None
        # With ``queues`` (an interval, e.g. "1ms"; else the scenario's ``[output] queues``),
        # every switch samples the queues of the ports it emulates into its final statistics.
        self.queues = queues
        # With ``hop_records``, every switch writes a row per transmission and per drop of a
        # packet of a scenario flow into ``run_dir/hops-<node>.csv`` and ``drops-<node>.csv``
        # (``latnet-switch run --hops``), which ``latnet-switch results`` merges into the
        # simulator's ``hops.csv`` and ``packets.csv``.
        self.hop_records = hop_records
        # "per-node": a latnet-switch process per switch; "one": one process runs every switch
        # in one loop (``latnet-switch run --node A,B --netns ...``). By default one process
        # when the switches outnumber the CPUs: their busy-waits would delay each other's
        # wake-ups (docs/lbf.md, BENCHMARKS.md: the LBF chain's four switches on two CPUs, F1's
        # mean 0.80 against 0.99-1.04 ms, p99 1.07-1.22 against 1.44-1.52 ms), else a process
        # each, so that they forward in parallel (alike for the two-switch demo).
        n_switches, cpus = len(self.switch_nodes()), os.cpu_count() or 1
        if switch_processes is None:
            switch_processes = "one" if n_switches > cpus else "per-node"
        if switch_processes not in ("per-node", "one"):
            raise LatnetError(
                f"switch_processes: expected 'per-node' or 'one', got {switch_processes!r}"
            )
        self.switch_processes = switch_processes
        # How long a switch busy-polls before sleeping (``latnet-switch run --spin-us``). By
        # default 20 us while every switch process can have a CPU of its own; when they
        # outnumber the CPUs their busy-waits delay each other's wake-ups, and 2 us does better
        # (docs/lbf.md: four switch processes on two CPUs, 1.29 against 1.42 ms mean latency;
        # the two-switch demo is 45 us better with 20 us).
        if spin_us is None:
            processes = 1 if switch_processes == "one" else n_switches
            spin_us = 20 if processes <= cpus else 2
        self.spin_us = spin_us
        # "shaped": every host with a TCP flow (and no packet flow of its own to send) gets a
        # token bucket at its link's rate as its interface's root qdisc, as a NIC sends: Linux's
        # TCP small queues then hold a connection's segments back in the host, as they would
        # behind a real NIC (a veth frees a segment as soon as it is sent, so without it a
        # connection's whole window waits in the switch's queue of the host's link, as its
        # switch emulates it). "veth": no qdisc. See nic_shapers().
        self.host_nics = host_nics
        self.logs: dict[str, Path] = {}
        self.state_path = state_dir() / f"{self.prefix}.json"
        self.state: dict = {
            "prefix": self.prefix,
            "scenario": str(self.scenario),
            "run_dir": str(self.run_dir),
            "owner": os.getpid(),
            "netns": [],
            "switches": {},
        }
        self.switches: dict[str, subprocess.Popen] = {}

    # ------------------------------------------------------------------ plan and names

    def _plan(self) -> dict:
        p = subprocess.run(
            [self.binary, "plan", "--scenario", str(self.scenario)], capture_output=True, text=True
        )
        if p.returncode != 0:
            from . import ScenarioError

            msg = p.stderr.strip().splitlines()[0] if p.stderr.strip() else "plan failed"
            raise ScenarioError(msg.removeprefix("latnet-switch: "))
        return json.loads(p.stdout)

    def node(self, name: str) -> dict:
        for n in self.plan["nodes"]:
            if n["name"] == name:
                return n
        raise LatnetError(f"no node {name!r} in {self.scenario.name}")

    def netns(self, node: str) -> str:
        """Namespace name of a node."""
        self.node(node)
        return self.prefix + _sanitize(node)

    def address(self, node: str) -> str:
        return self.node(node)["address"]

    def address6(self, node: str) -> str:
        """The node's IPv6 address (configured on hosts when the testbed has IPv6)."""
        if not self.plan["ipv6"]:
            raise LatnetError(f"{self.scenario.name}: the testbed has no IPv6 (pass ipv6=True)")
        return self.node(node)["address6"]

    def hosts(self) -> list[str]:
        return [n["name"] for n in self.plan["nodes"] if n["kind"] == "host"]

    def switch_nodes(self) -> list[str]:
        return [n["name"] for n in self.plan["nodes"] if n["kind"] == "switch"]

    def stats_path(self, switch: str) -> Path:
        return self.run_dir / f"switch-{switch}.json"

    def stats(self, switch: str) -> dict:
        """The switch's latest statistics file."""
        return json.loads(self.stats_path(switch).read_text())

    # ------------------------------------------------------------------ state

    def _save(self) -> None:
        d = state_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2))
        tmp.replace(self.state_path)

    @classmethod
    def from_state(cls, path: Path) -> _Recorded:
        return _Recorded(json.loads(path.read_text()), path)

    # ------------------------------------------------------------------ up / down

    def up(self) -> Testbed:
        require_root()
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self) -> None:
        self._save()
        for n in self.plan["nodes"]:
            ns = self.netns(n["name"])
            self.state["netns"].append(ns)
            self._save()
            _sh(["ip", "netns", "add", ns])
            _sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            _sh(["ip", "netns", "exec", ns, "sysctl", "-qw", *self._ipv6_sysctls(n)])
        for link in self.plan["links"]:
            a, b = link["a"], link["b"]
            ia = next(i for i in self.node(a)["ifaces"] if i["link"] == link["index"])
            ib = next(i for i in self.node(b)["ifaces"] if i["link"] == link["index"])
            name = link["iface"]
            _sh(
                ["ip", "link", "add", name, "netns", self.netns(a), "address", ia["mac"]]
                + ["type", "veth", "peer", "name", name, "netns", self.netns(b)]
                + ["address", ib["mac"]]
            )
        shapers = self.nic_shapers()
        for n in self.plan["nodes"]:
            ns = self.netns(n["name"])
            for i in n["ifaces"]:
                if n["kind"] == "host":
                    feats = ["tso", "off", "gso", "off"]
                    if self.offloads == "off":
                        feats = ["tx", "off"] + feats
                    _sh(["ip", "netns", "exec", ns, "ethtool", "-K", i["name"], *feats])
                    shaper = shapers.get(f"{n['name']}/{i['name']}")
                    if shaper is not None:
                        # (TSQ bounds what waits in it; the limit, 4 MB, only against a
                        # tool run by hand flooding it)
                        rate, bucket = shaper
                        _sh(
                            ["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev"]
                            + [i["name"], "root", "tbf", "rate", f"{rate}bit"]
                            + ["burst", str(bucket), "limit", str(4 << 20)]
                        )
                    _sh(["ip", "-n", ns, "addr", "add", f"{n['address']}/32", "dev", i["name"]])
                    if self.plan["ipv6"]:
                        _sh(
                            ["ip", "-n", ns, "-6", "addr", "add", f"{n['address6']}/128"]
                            + ["dev", i["name"], "nodad"]
                        )
                else:
                    # room for a tag stack: a host's frame of its full MTU with up to MAX_TAGS
                    # tags (its own MTU stays 1500, so its packets do not grow); a veth drops
                    # what exceeds its peer's MTU by more than one tag
                    mtu = str(1500 + TAG_ROOM)
                    _sh(["ip", "-n", ns, "link", "set", i["name"], "mtu", mtu])
                _sh(["ip", "-n", ns, "link", "set", i["name"], "up"])
            for r in n["routes"]:
                gw = self.plan["gateway"]
                _sh(
                    ["ip", "-n", ns, "neigh", "replace", gw, "lladdr", r["next_hop_mac"]]
                    + ["dev", r["iface"], "nud", "permanent"]
                )
                _sh(
                    ["ip", "-n", ns, "route", "replace", f"{r['dst']}/32", "via", gw]
                    + ["dev", r["iface"], "onlink"]
                )
                if self.plan["ipv6"]:
                    gw6 = self.plan["gateway6"]
                    _sh(
                        ["ip", "-n", ns, "-6", "neigh", "replace", gw6, "lladdr"]
                        + [r["next_hop_mac"], "dev", r["iface"], "nud", "permanent"]
                    )
                    _sh(
                        ["ip", "-n", ns, "-6", "route", "replace", f"{r['dst6']}/128", "via"]
                        + [gw6, "dev", r["iface"], "onlink"]
                    )
        if self.time_zero_after_ns is not None:
            now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            self.time_zero_ns = now + self.time_zero_after_ns
        if self.switch_processes == "one" and len(self.switch_nodes()) > 1:
            self.start_switches_together()
        else:
            for s in self.switch_nodes():
                self.start_switch(s)
        for s in self.switch_nodes():
            self._wait_ready(s)

    def nic_shapers(self) -> dict[str, tuple[int, int]]:
        """The host interfaces that get a NIC's token bucket (``host_nics = "shaped"``): for
        each host with a TCP flow, as source or destination, that sends no packet flow (whose
        packets must meet the scenario's queue of the host's link, which its switch emulates),
        ``{interface: (rate in bit/s, bucket in bytes)}``. The bucket holds two full frames, or
        100 us at the link's rate if more: a NIC sends back to back, and a bucket of a few
        frames spares the kernel a timer per frame at gigabit rates. Not a host whose large flow
        paces with HTB (``large_flow_pacing = "htb"``): its sender shapes the interface."""
        if self.host_nics != "shaped":
            return {}
        flows = self.plan["flows"]
        tcp = {f[end] for f in flows if f["tcp"] for end in ("src", "dst")}
        tcp -= {f["src"] for f in flows if not f["tcp"]}
        # (its sender puts an HTB class at the host queue's rate there instead)
        tcp -= {f["src"] for f in flows if f["htb"]}
        links = {link["index"]: link for link in self.plan["links"]}
        out = {}
        for n in self.plan["nodes"]:
            if n["kind"] == "host" and n["name"] in tcp:
                for i in n["ifaces"]:
                    rate = links[i["link"]]["rate_bps"]
                    out[f"{n['name']}/{i['name']}"] = (rate, max(2 * 1514, rate // 80_000))
        return out

    def _ipv6_sysctls(self, node: dict) -> list[str]:
        """IPv6 off in every namespace, unless a flow carries its SLO in an IPv6 hop-by-hop
        option or the testbed was asked for it: then hosts get it, quietly (no link-local
        addresses, router solicitations or duplicate address detection that would send frames
        of their own into the switches)."""
        if not (self.plan["ipv6"] and node["kind"] == "host"):
            return ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
        out = []
        for scope in ("all", "default"):
            out += [
                f"net.ipv6.conf.{scope}.disable_ipv6=0",
                f"net.ipv6.conf.{scope}.addr_gen_mode=1",
                f"net.ipv6.conf.{scope}.accept_ra=0",
                f"net.ipv6.conf.{scope}.router_solicitations=0",
                f"net.ipv6.conf.{scope}.dad_transmits=0",
            ]
        return out

    def rt(self) -> list[str]:
        """Command prefix that runs latnet's own processes (switches, traffic tools) with
        real-time priority (SCHED_FIFO 20), so that other load on the machine delays their
        timers less; empty with ``realtime=False``."""
        return ["chrt", "-f", "20"] if self.realtime else []

    def start_switch(self, name: str, extra: list[str] | None = None) -> subprocess.Popen:
        argv = [*self.rt(), self.binary, "run", "--scenario", str(self.scenario), "--node", name]
        argv += ["--stats", str(self.stats_path(name)), *self._switch_options(), *(extra or [])]
        return self._start_switches([name], name, argv, f"switch-{name}.log")

    def start_switches_together(self, extra: list[str] | None = None) -> subprocess.Popen:
        """Start one process running every switch (in the first switch's namespace, where
        ``down`` finds it; it opens each switch's interfaces in that switch's namespace)."""
        names = self.switch_nodes()
        stats = [str(self.stats_path(n)) for n in names]
        if any("," in x for x in [*names, *stats]):
            raise LatnetError(
                "switch_processes='one': node names and the run directory must not contain ','"
            )
        argv = [*self.rt(), self.binary, "run", "--scenario", str(self.scenario)]
        argv += ["--node", ",".join(names), "--netns", ",".join(self.netns(n) for n in names)]
        argv += ["--stats", ",".join(stats), *self._switch_options(), *(extra or [])]
        return self._start_switches(names, names[0], argv, "switches.log")

    def _switch_options(self) -> list[str]:
        argv = []
        if self.seed is not None:
            argv += ["--seed", str(self.seed)]
        if self.time_zero_ns is not None:
            argv += ["--t0", str(self.time_zero_ns)]
        if self.pcap_dir is not None:
            argv += ["--pcap", str(self.pcap_dir)]
        if self.queues is not None:
            argv += ["--queues", self.queues]
        if self.hop_records:
            argv += ["--hops", str(self.run_dir.resolve())]
        argv += ["--spin-us", str(self.spin_us)]
        return argv

    def _start_switches(
        self, names: list[str], netns_of: str, argv: list[str], log_name: str
    ) -> subprocess.Popen:
        for n in names:
            self.stats_path(n).unlink(missing_ok=True)
            self.logs[n] = self.run_dir / log_name
        log = open(self.run_dir / log_name, "w")  # noqa: SIM115 (child keeps it)
        p = self.popen(netns_of, argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        for n in names:
            self.switches[n] = p
            self.state["switches"][n] = p.pid
        self._save()
        return p

    def start_agent(
        self,
        controller: str,
        status: str | os.PathLike[str] | None = None,
        poll_ms: int = 10,
        shaper: bool = True,
        dilation: int = 1,
        routes: bool = True,
        order: str = "sequential",
        timeout: float = 10.0,
        token_file: str | os.PathLike[str] | None = None,
        wait_ms: int = 500,
        hosts: list[str] | None = None,
        peer_wait_ms: int = 5000,
        ca_file: str | os.PathLike[str] | None = None,
        client_cert: tuple[str, str] | None = None,
        crl_file: str | os.PathLike[str] | None = None,
    ) -> subprocess.Popen:
        """Start a Chameleon host agent for every host (``latnet-switch agent``: a BPF tagger on
        each host's egress and an HTB shaper per admitted flow, programmed from the controller
        service at ``controller``) and wait until it has read the service's state. It runs in
        the root namespace (the service is reached there, out of band of the emulated network);
        its pid is recorded, so ``down`` stops it too. Its status file: ``status`` (default
        ``run_dir/agent.json``). ``order``: ``sequential`` (a request's moves one at a time,
        each after the previous flow's old path drained, the new flow last) or ``together``.
        ``token_file``: the token of a service started with ``--tokens`` (a read token will
        do). ``wait_ms``: how long each poll may wait at the service for the next decision (a
        long poll; 0: a plain poll every ``poll_ms``). ``hosts``: the hosts it serves (default
        all; agents serving the others are started by further calls, each with a status file
        of its own, and keep the sequential order between them through the service, waiting up
        to ``peer_wait_ms`` for another agent's step: an agent token will do then).
        ``ca_file``: for an ``https://`` service, who signed its certificate; ``client_cert``:
        the ``(certificate, key)`` files to present to a service that asks for one;
        ``crl_file``: that CA's revocation lists (a service certificate they revoke is
        refused)."""
        status = Path(status) if status is not None else self.run_dir / "agent.json"
        status.unlink(missing_ok=True)
        hosts = self.hosts() if hosts is None else list(hosts)
        argv = [self.binary, "agent", "--controller", controller, "--scenario", str(self.scenario)]
        argv += ["--host", ",".join(hosts), "--netns", ",".join(self.netns(h) for h in hosts)]
        argv += ["--status", str(status), "--poll-ms", str(poll_ms)]
        argv += ["--shaper", "htb" if shaper else "none", "--dilation", str(dilation)]
        argv += ["--routes", "yes" if routes else "no", "--order", order]
        argv += ["--wait-ms", str(wait_ms), "--peer-wait-ms", str(peer_wait_ms)]
        if token_file is not None:
            argv += ["--token-file", str(token_file)]
        if ca_file is not None:
            argv += ["--ca-file", str(ca_file)]
        if client_cert is not None:
            argv += ["--client-cert", str(client_cert[0]), "--client-key", str(client_cert[1])]
        if crl_file is not None:
            argv += ["--crl-file", str(crl_file)]
        log_path = status.with_suffix(".log")
        log = open(log_path, "w")  # noqa: SIM115 (child keeps it)
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.state.setdefault("agents", []).append(p.pid)
        self._save()
        self.agent_status = status
        deadline = time.monotonic() + timeout
        while not status.exists():
            if p.poll() is not None:
                msg = log_path.read_text()[-2000:].strip()
                raise LatnetError(f"the host agent exited with status {p.returncode}: {msg}")
            if time.monotonic() > deadline:
                p.terminate()
                raise LatnetError(f"the host agent did not start within {timeout:g} s")
            time.sleep(0.02)
        self.agent = p
        return p

    def _wait_ready(self, name: str, timeout: float = 10.0) -> None:
        p = self.switches[name]
        deadline = time.monotonic() + timeout
        while not self.stats_path(name).exists():
            if p.poll() is not None:
                log = self.logs[name].read_text()[-2000:]
                raise LatnetError(f"switch {name} exited with status {p.returncode}:\n{log}")
            if time.monotonic() > deadline:
                raise LatnetError(f"switch {name} did not start within {timeout:g} s")
            time.sleep(0.02)

    def stop_switches(self, timeout: float = 5.0) -> None:
        """Stop the switch processes (they write their final statistics)."""
        for p in set(self.switches.values()):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in self.switches.items():
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.returncode not in (0, -signal.SIGTERM):
                log = self.logs[name].read_text()[-2000:]
                raise LatnetError(f"switch {name} exited with status {p.returncode}:\n{log}")

    def down(self) -> None:
        """Remove everything this testbed created (idempotent)."""
        _Recorded(self.state, self.state_path).down()
        for p in self.switches.values():
            with contextlib.suppress(Exception):
                p.wait(timeout=1)

    def __enter__(self) -> Testbed:
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    # ------------------------------------------------------------------ running things

    def cmd(self, node: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns(node), *argv]

    def popen(self, node: str, argv: list[str], **kw) -> subprocess.Popen:
        """Start a process inside a node's namespace (in its own session)."""
        return subprocess.Popen(self.cmd(node, argv), start_new_session=True, **kw)

    def run(self, node: str, argv: list[str], timeout: float = 60, check: bool = True, **kw):
        """Run a command inside a node's namespace and wait for it."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        p = subprocess.run(self.cmd(node, argv), timeout=timeout, **kw)
        if check and p.returncode != 0:
            raise LatnetError(
                f"{node}: `{' '.join(argv)}` exited {p.returncode}: {(p.stderr or '')[-1000:]}"
            )
        return p

    def wait_listening(self, node: str, port: int, timeout: float = 10.0) -> None:
        """Wait until something listens on TCP ``port`` in ``node`` (e.g. ``iperf3 -s``)."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.run(node, ["ss", "-Hltn", f"sport = :{port}"], check=False).stdout
            if out.strip():
                return
            if time.monotonic() > deadline:
                raise LatnetError(f"{node}: nothing listens on port {port} after {timeout:g} s")
            time.sleep(0.02)


class _Recorded:
    """A testbed known only from its state file (for ``down`` after a crash)."""

    def __init__(self, state: dict, path: Path):
        self.state = state
        self.path = path

    def down(self) -> None:
        # host agents (root namespace: `ip netns pids` does not list them) first: their
        # taggers detach and their shapers go when they exit
        for pid in self.state.get("agents", []):
            if _is_agent(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        namespaces = [ns for ns in self.state.get("netns", []) if ns.startswith("ln")]
        existing = set(_sh(["ip", "netns", "list"], check=False).stdout.split())
        for _ in range(2):
            pids: set[int] = set()
            for ns in namespaces:
                if ns in existing:
                    out = _sh(["ip", "netns", "pids", ns], check=False).stdout.split()
                    pids.update(int(x) for x in out if x.isdigit())
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 3
            while pids and time.monotonic() < deadline:
                pids = {p for p in pids if _pid_alive(p)}
                time.sleep(0.02)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for ns in namespaces:
            if ns in existing:
                _sh(["ip", "netns", "del", ns], check=False)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _is_agent(pid: int) -> bool:
    """``pid`` is (still) a latnet host agent, not a process that reused its number."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(cmd) > 1 and cmd[0].endswith(b"latnet-switch") and cmd[1] == b"agent"


def recorded() -> list[tuple[Path, dict]]:
    """Every testbed recorded in the state directory."""
    d = state_dir()
    if not d.exists():
        return []
    out = []
    for p in sorted(d.glob("ln*.json")):
        try:
            out.append((p, json.loads(p.read_text())))
        except (OSError, json.JSONDecodeError):
            continue
    return out


def down_all(prefix: str | None = None) -> list[str]:
    """Tear down every recorded testbed (or the one with ``prefix``); returns the prefixes."""
    done = []
    for path, st in recorded():
        if prefix is None or st.get("prefix") == prefix:
            _Recorded(st, path).down()
            done.append(st.get("prefix", path.stem))
    return done
