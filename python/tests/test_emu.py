"""Emulation on real packets: namespaces, veth links, latnet-switch, Linux TCP, iperf3.

These tests create (and delete) their own network namespaces, so they need root; CI runs as
root. Each keeps its traffic short (a few seconds).
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import latnet

#: Runs on the machine's clock: `make py-test` runs these tests alone (scripts/py-test.sh).
pytestmark = pytest.mark.realtime

if os.geteuid() != 0:
    pytest.skip(
        "emulation tests create network namespaces and need root (CI runs them as root)",
        allow_module_level=True,
    )

from latnet.emu import collect, now_ns, run_emu, start_flows, wait_all  # noqa: E402
from latnet.testbed import Testbed, down_all, state_dir, switch_binary  # noqa: E402

#: Startup margin before the scenario's time zero.
MARGIN = 300_000_000


def scenario(tmp_path: Path, body: str, name: str = "emu") -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(body)
    return p


def two_hosts(rate: str, delay: str, queue: str, flows: str, duration: str = "3s") -> str:
    return f"""
[sim]
duration = "{duration}"
drain = "300ms"
[defaults]
queue = {queue}
[defaults.link]
rate = "{rate}"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "h2"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "h3"
kind = "host"
[[links]]
a = "h1"
b = "s1"
rate = "10Gbps"
[[links]]
a = "h2"
b = "s1"
rate = "10Gbps"
[[links]]
a = "s1"
b = "h3"
delay = "{delay}"
{flows}
"""


def cbr(name: str, src: str, rate: str, size: int, priority: int | None = None) -> str:
    """A `[[flows]]` entry: constant bit rate from `src` to h3."""
    prio = "" if priority is None else f"priority = {priority}\n"
    return f"""
[[flows]]
name = "{name}"
src = "{src}"
dst = "h3"
{prio}size = {size}
traffic = {{ kind = "cbr", rate = "{rate}" }}
"""


def netns_list() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines()}


def iperf(tb: Testbed, src: str, dst: str, seconds: int) -> tuple[subprocess.Popen, list[str]]:
    """Start an iperf3 server on ``dst`` and return it with the client command (cubic)."""
    srv = tb.popen(dst, ["iperf3", "-s", "-1", "-B", tb.address(dst)], stdout=subprocess.DEVNULL)
    tb.wait_listening(dst, 5201)
    client = ["iperf3", "-c", tb.address(dst), "-t", str(seconds), "-C", "cubic", "-J"]
    return srv, client


def run_flows(tb: Testbed, out: Path, bulk: tuple[str, str] | None = None):
    """Run the scenario's UDP flows, optionally beside an iperf3 cubic bulk flow; from the
    testbed's time zero if it has one (``time_zero_after_ns``), else shortly after now."""
    length = tb.plan["duration_ns"] + tb.plan["drain_ns"]
    client = srv = None
    if bulk:
        srv, cmd = iperf(tb, *bulk, seconds=max(1, tb.plan["duration_ns"] // 1_000_000_000))
        client = tb.popen(bulk[0], cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = now_ns() + MARGIN if tb.time_zero_ns is None else tb.time_zero_ns
    procs = start_flows(tb, t0, t0 + length)
    wait_all(procs, (t0 + length - now_ns()) / 1e9 + 30)
    report = None
    if client is not None and srv is not None:
        stdout, _ = client.communicate(timeout=60)
        srv.wait(timeout=10)
        report = json.loads(stdout)
    return collect(tb, out, length), report


def recv_report(tb: Testbed, host: str) -> dict:
    return json.loads((tb.run_dir / f"recv-{host}.json").read_text())


def latencies_us(tb: Testbed, flow: str) -> list[float]:
    rows = (tb.run_dir / f"packets-{flow}.csv").read_text().splitlines()[1:]
    return sorted((int(r.split(",")[2]) - int(r.split(",")[1])) / 1e3 for r in rows)


def test_tcp_cubic_through_the_switch(tmp_path):
    """iperf3 cubic reaches a sensible rate; a latnet UDP flow beside it arrives neither
    corrupted nor reordered; TCP saw no checksum errors (the switch completes the partial
    checksums of veth offloads, which this test leaves on)."""
    flows = cbr("probe", "h2", "20Mbps", 1000, priority=0)
    sc = scenario(tmp_path, two_hosts("500Mbps", "500us", PRIO2, flows))
    with Testbed(sc, run_dir=tmp_path / "run", offloads="csum") as tb:
        res, rep = run_flows(tb, tmp_path / "out", bulk=("h1", "h3"))
        snmp = tb.run("h3", ["cat", "/proc/net/snmp"]).stdout
        stats = tb.stats("s1")
    assert rep is not None and rep["end"]["sender_tcp_congestion"] == "cubic"
    tcp_bps = rep["end"]["sum_received"]["bits_per_second"]
    # 500 Mbit/s bottleneck shared with a 20 Mbit/s priority flow: cubic with a 200-packet
    # buffer (about 2.4 BDP at 1 ms RTT) fills most of it. A broken checksum path gives ~0.
    assert tcp_bps > 0.5 * 480e6, f"iperf3 cubic reached only {tcp_bps / 1e6:.1f} Mbit/s"
    tcp = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Tcp:")]
    tcp_errs = dict(zip(tcp[0], tcp[1], strict=True))
    assert tcp_errs["InCsumErrors"] == "0"
    assert stats["csum_completed"] > 1000, "the partial-checksum path was exercised"
    assert stats["rx_gso"] == 0 and stats["rx_truncated"] == 0
    assert stats["loop_switches"] == 1
    r = recv_report(tb, "h3")["flows"][0]
    sent = res.summary["flows"][0]["sent"]
    assert sent > 5000
    assert r["corrupted"] == 0 and r["reordered"] == 0 and r["duplicates"] == 0
    assert r["received"] == sent, "the priority flow loses nothing under TCP load"


PRIO2 = '{ kind = "priority", classes = 2, limit_packets = 200 }'
FIFO = '{ kind = "fifo", limit_packets = 200 }'
PROBE = cbr("probe", "h2", "1.6Mbps", 200, priority=0)

#: The stated isolation factor: under load, the high-priority probe's p90 stays within this
#: factor of its unloaded p90 (plus one 1500-byte frame at 100 Mbit/s, which strict priority
#: without preemption may have to wait for). Real-time measurement on 2 cores shared by the
#: switch, iperf3 and the probe's own sender and receiver puts scheduling noise on both; 4
#: leaves room for it while the FIFO control (about 20 ms here, 50x the idle p90) still fails
#: the same bound by an order of magnitude. The tail beyond the p90 is the machine's: five
#: runs on 2026-11-27 had switch stalls of 0.3-16 ms even idle, idle p99s of 315-1,445 us and
#: loaded ones of 567-6,042 us (p90s: idle 282-362 us, loaded 365-1,229 us; FIFO 20.4-20.6 ms).
ISOLATION_FACTOR = 4.0


def quantile(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def probe_latencies(tmp_path: Path, queue: str, loaded: bool, tag: str) -> list[float]:
    sc = scenario(tmp_path, two_hosts("100Mbps", "200us", queue, PROBE, "2s"), tag)
    with Testbed(sc, run_dir=tmp_path / f"run-{tag}") as tb:
        run_flows(tb, tmp_path / f"out-{tag}", bulk=("h1", "h3") if loaded else None)
        return latencies_us(tb, "probe")


def test_priority_isolation_under_tcp_load(tmp_path):
    """A priority-0 UDP probe keeps its latency under an iperf3 cubic bulk flow: its median
    within two frames' transmission of its idle median, its p90 within ``ISOLATION_FACTOR`` of
    the idle p90 (plus a frame); the same probe in a FIFO does neither (so the test can tell)."""
    idle = probe_latencies(tmp_path, PRIO2, loaded=False, tag="idle")
    prio = probe_latencies(tmp_path, PRIO2, loaded=True, tag="prio")
    fifo = probe_latencies(tmp_path, FIFO, loaded=True, tag="fifo")
    one_frame_us = 1514 * 8 / 100
    said = {
        name: [round(quantile(xs, q)) for q in (0.5, 0.9, 0.99)]
        for name, xs in (("idle", idle), ("prio", prio), ("fifo", fifo))
    }
    print("p50, p90, p99 (us):", said)
    median = quantile(idle, 0.5) + 2 * one_frame_us
    bound = ISOLATION_FACTOR * quantile(idle, 0.9) + one_frame_us
    assert quantile(prio, 0.5) <= median, (said, median)
    assert quantile(prio, 0.9) <= bound, (said, bound)
    assert quantile(fifo, 0.5) > median and quantile(fifo, 0.9) > bound, (said, median, bound)


def test_link_rate_emulation_holds_the_rate(tmp_path):
    """A UDP flow offered at 80 Mbit/s to a 50 Mbit/s link leaves at 50 Mbit/s (+-3 %); the
    switch's queue series (`--queues`) shows the queue full at its 200-packet limit (short at
    one sample at most, and only by a sender stall the run measured)."""
    flows = cbr("over", "h1", "80Mbps", 1000)
    sc = scenario(tmp_path, two_hosts("50Mbps", "0ns", FIFO, flows, "2s"))
    with Testbed(sc, run_dir=tmp_path / "run", queues="100ms") as tb:
        res, _ = run_flows(tb, tmp_path / "out")
        rows = (tb.run_dir / "packets-over.csv").read_text().splitlines()[1:]
    q = res.queues
    assert sorted(q["t_ns"].unique()) == [100_000_000 * k for k in range(1, 24)]
    assert len(q) == 23 * len(res.summary["ports"])
    # (this testbed has no time zero of its own: the samples count from the switch's start,
    # and the senders start some 0.2-0.8 s later, as the machine allows). The sender is on
    # from the first sample that saw a packet to the last: the queue must be full in between,
    # leaving 0.2 s at each end for it to fill and for the sender to start or stop in.
    port = q[(q["node"] == "s1") & (q["peer"] == "h3")]
    busy = port[port["max_packets"] > 0]["t_ns"]
    full = port[port["t_ns"].between(busy.min() + 0.2e9, busy.max() - 0.2e9)]
    assert len(full) >= 12, port  # 2 s of sending, 100 ms samples
    assert (full["max_packets"] == 200).all(), full
    # The queue stays full while the sender offers 80 Mbit/s. A sender the machine stalls lets
    # it drain, one 1000-byte frame per 160 us of the stall, and a sample can catch it short
    # (one of 15 at 117 packets in a CI run). Allowed at one sample, and only when the run's
    # own report shows a sender stall long enough to drain that much.
    sender = res.summary["emulation"]["senders"][0]
    short = full[full["packets"] < 190]
    assert len(short) <= 1, (full, sender)
    if len(short):
        assert sender["late_max_ns"] >= (199 - short["packets"].min()) * 160_000, (full, sender)
    assert (q[q["node"] == "h2"]["max_packets"] == 0).all()  # h2 sends nothing
    # the switch read the kernel's receive timestamps (and stamped frames with them)
    st = json.loads((tmp_path / "run" / "switch-s1.json").read_text())
    assert st["final"] and 0 < st["rx_read_late_max_ns"] < 2e9
    assert st["rx_in_loop"] == 0, "alone in its process: every arrival is the kernel's stamp"
    recv = sorted(int(r.split(",")[2]) for r in rows)
    # Steady state: the middle 80 % of receptions (the queue is full by then).
    a, b = recv[len(recv) // 10], recv[len(recv) * 9 // 10]
    n = len(recv) * 9 // 10 - len(recv) // 10
    rate = n * 1000 * 8 / ((b - a) / 1e9)
    assert abs(rate - 50e6) / 50e6 < 0.03, f"measured {rate / 1e6:.2f} Mbit/s"


def test_dualpi2_epochs_count_from_the_scenarios_time_zero(tmp_path):
    """An emulated DualPI2 reports the scenario's epochs, counted from the senders' time zero as
    in the simulator (not from the switch's start, which comes earlier): a steady 1,000 packet/s
    flow puts 1,000 packets into each of two 1 s epochs."""
    flows = cbr("steady", "h1", "8Mbps", 1000)
    queue = '{ kind = "dualpi2", epochs = ["1s"] }'
    sc = scenario(tmp_path, two_hosts("100Mbps", "0ns", queue, flows, "2s"))
    res = run_emu(sc, tmp_path / "out")
    port = next(p for p in res.summary["ports"] if p["node"] == "s1" and p["peer"] == "h3")
    epochs = port["aqm"]["epochs"]
    assert [(e["start_ns"], e["end_ns"]) for e in epochs] == [(0, 10**9), (10**9, None)]
    sent = [sum(c["tx_packets"] for c in e["classes"]) for e in epochs]
    assert all(abs(n - 1000) <= 20 for n in sent), sent
    assert sum(sent) == port["tx_packets"]


def test_teardown_leaves_nothing_after_a_crash(tmp_path):
    """A testbed whose owner died without cleaning up is removed by `latnet testbed down`,
    processes inside included; a second `down` is a no-op; nothing touched the root
    namespace."""
    sc = scenario(tmp_path, two_hosts("100Mbps", "0ns", FIFO, ""))
    links_before = root_links()
    code = f"""
import os, subprocess
from latnet.testbed import Testbed
tb = Testbed({str(sc)!r}, run_dir={str(tmp_path / "run")!r})
tb.up()
tb.popen("h1", ["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(tb.prefix, tb.switches["s1"].pid, flush=True)
os._exit(1)   # a crash: no teardown
"""
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert p.returncode == 1, p.stderr
    prefix, pid = p.stdout.split()
    ours = {ns for ns in netns_list() if ns.startswith(prefix)}
    assert len(ours) == 4
    assert (state_dir() / f"{prefix}.json").exists()
    os.kill(int(pid), 0)  # the switch outlived its owner
    latnet = [sys.executable, "-m", "latnet.cli"]
    out = subprocess.run([*latnet, "testbed", "down", "--prefix", prefix], capture_output=True)
    assert out.returncode == 0, out.stderr
    assert not {ns for ns in netns_list() if ns.startswith(prefix)}
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)
    assert not (state_dir() / f"{prefix}.json").exists()
    again = subprocess.run([*latnet, "testbed", "down", "--prefix", prefix], capture_output=True)
    assert again.returncode == 0
    assert root_links() == links_before


def test_interrupted_up_cleans_up(tmp_path):
    """Ctrl-C while the testbed comes up removes what was already created."""
    sc = scenario(tmp_path, two_hosts("100Mbps", "0ns", FIFO, ""))
    tb = Testbed(sc, run_dir=tmp_path / "run")
    real = tb.start_switch

    def interrupted(*a, **k):
        real(*a, **k)
        raise KeyboardInterrupt

    tb.start_switch = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        tb.up()
    assert not {ns for ns in netns_list() if ns.startswith(tb.prefix)}
    assert all(p.poll() is not None for p in tb.switches.values())
    assert down_all(tb.prefix) == []


def test_switch_stops_on_sigterm_with_final_stats(tmp_path):
    sc = scenario(tmp_path, two_hosts("100Mbps", "0ns", FIFO, ""))
    with Testbed(sc, run_dir=tmp_path / "run") as tb:
        tb.run("h1", ["ping", "-c", "3", "-i", "0.05", tb.address("h3")])
        tb.switches["s1"].send_signal(signal.SIGTERM)
        assert tb.switches["s1"].wait(timeout=10) == 0
        st = tb.stats("s1")
    assert st["final"] is True
    assert st["forwarded"] >= 6, "3 echo requests and 3 replies"


def chain(switch: str = "") -> str:
    """Nodes and links of h1 -> s1 -> s2 -> h2; ``switch`` is added to both switches."""
    sw = f"\n{switch}" if switch else ""
    return f"""[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"{sw}
[[nodes]]
name = "s2"
kind = "switch"{sw}
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "s2"
[[links]]
a = "s2"
b = "h2"
"""


LBF = (
    """
[sim]
duration = "2s"
drain = "300ms"
[defaults]
queue = { kind = "lbf", limit_packets = 1000 }
[defaults.link]
rate = "100Mbps"
delay = "100us"
[lbf]
budget = "equal"
"""
    + chain()
    + """[[flows]]
name = "slo"
src = "h1"
dst = "h2"
size = 300
traffic = { kind = "onoff", base_rate = "1Mbps", burst_rate = "40Mbps", period = "10ms", \
burst = "1ms" }
slo = { lower = "2ms" }
[[flows]]
name = "be"
src = "h1"
dst = "h2"
size = 300
traffic = { kind = "cbr", rate = "2Mbps" }
"""
)

#: The stated clock granularity of the lower-bound check: both ends read CLOCK_MONOTONIC (ns);
#: a frame is never released before its emulated instant, so no margin beyond 1 us is needed.
LBF_GRANULARITY_US = 1.0


#: How much later than its lower bound the typical SLO packet may arrive: the kernel's send and
#: receive paths and the switches' wake-ups. Far below what a switch that misread the latency
#: so far would add (the sender timestamp read on the wrong clock: over 1 ms here).
LBF_TYPICAL_EXCESS_US = 400.0


@pytest.mark.parametrize(
    ("carry", "encap"),
    [
        ("latency-so-far", "udp-shim"),
        ("timestamp", "udp-shim"),
        ("latency-so-far", "ipv6"),
        ("timestamp", "ipv6"),
    ],
)
def test_lbf_lower_bound_on_real_packets(tmp_path, carry, encap):
    """Two LBF switches hold SLO packets until their lower bound: none is delivered earlier
    than 2 ms (minus the stated granularity), the typical one not much later, while
    best-effort packets on the same path can arrive far earlier (so the switches, not the
    path, make the difference). With ``carry = "timestamp"`` the switches compute the latency
    so far from the sender's stamp on the clock they share with it; with ``encap = "ipv6"``
    the block rides in an IPv6 hop-by-hop option that the sender's kernel puts in and the
    receiver's kernel skips, and the switches rewrite it in flight. One of the four runs
    captures its links: the Wireshark dissector reads the blocks in them as latnet does."""
    slo = f'slo = {{ lower = "2ms", carry = "{carry}", encap = "{encap}" }}'
    sc = scenario(tmp_path, LBF.replace('slo = { lower = "2ms" }', slo))
    caps = tmp_path / "caps" if (carry, encap) == ("timestamp", "ipv6") else None
    with Testbed(sc, run_dir=tmp_path / "run", pcap_dir=caps) as tb:
        res, _ = run_flows(tb, tmp_path / "out")
        slo = latencies_us(tb, "slo")
        be = latencies_us(tb, "be")
        stats = [tb.stats(s) for s in ("s1", "s2")]
    flows = {f["name"]: f for f in res.summary["flows"]}
    assert len(slo) > 1000 and len(slo) == flows["slo"]["sent"]
    assert min(slo) >= 2000 - LBF_GRANULARITY_US, f"earliest SLO packet after {min(slo)} us"
    median = statistics.median(slo)
    assert median <= 2000 + LBF_TYPICAL_EXCESS_US, f"median SLO packet after {median} us"
    assert min(be) < 1000, f"the path itself takes {min(be)} us"
    assert all(s["node_drops"].get("malformed", 0) == 0 for s in stats)
    if caps is not None:
        from test_wireshark import compare

        frames = {p.name: compare(p) for p in sorted(caps.glob("*.pcap"))}
        # the kernel's hop-by-hop header as it left h1, and as s1 rewrote it for s2
        for name in ("h1-s1.pcap", "s1-s2.pcap"):
            blocks = frames[name].dropna(subset=["lbf_carrier"])
            assert len(blocks) == flows["slo"]["sent"], name
            assert (blocks["lbf_carrier"] == "ipv6").all() and (
                blocks["lbf_mode"] == "timestamp"
            ).all()
            assert (blocks["lbf_lower_ns"] == 2_000_000).all()


@pytest.mark.parametrize("encap", ["udp-shim", "ipv6"])
def test_the_damper_on_real_packets(tmp_path, encap):
    """gLBF on real packets: the sender's own queue and both switches hold each frame to their
    bound (residues in the UDP shim, or in the IPv6 hop-by-hop option, which the receiver's
    kernel hands over beside the payload), and the receiver hands a frame on only after the
    last residue, as the simulator's receiver does. The simulator's latency is then one
    constant; no emulated frame arrives before it, and the typical one within the usual
    real-time excess. Without the final hold frames would arrive up to 300 us early."""
    slo = f'slo = {{ carry = "damper", encap = "{encap}" }}'
    text = LBF.replace('slo = { lower = "2ms" }', slo, 1)
    text = text.replace('budget = "equal"\n', 'budget = "equal"\ndamper_bound = "300us"\n', 1)
    text = text.replace(
        'name = "h1"\nkind = "host"\n',
        'name = "h1"\nkind = "host"\nlbf = { damper_bound = "100us" }\n',
        1,
    )
    sim_run = latnet.run(text=text, packets=False)
    sim = sim_run.summary["flows"][0]
    assert sim["name"] == "slo" and sim["latency_ns"]["min"] == sim["latency_ns"]["max"]
    want_us = sim["latency_ns"]["min"] / 1e3
    sc = scenario(tmp_path, text)
    with Testbed(sc, run_dir=tmp_path / "run") as tb:
        emu, _ = run_flows(tb, tmp_path / "out")
        slo = latencies_us(tb, "slo")
    assert len(slo) > 1000
    # The switches forwarded what the simulator's did; every hop, the sender's own queue
    # included, kept (nearly) every frame within its bound. The simulator counts no violation;
    # on real packets arrival instants carry real-time noise (a frame read from a ring after
    # the switch has emulated past its kernel timestamp arrives, for the emulation, when it
    # was read), which can push a frame's queueing past the bound now and then (1 frame in
    # 4,200 seen). At the sender's own queue the machine does more: a sender woken late
    # (`emulation` counts its sends more than 100 us late) hands its queue the frames due
    # meanwhile at once, and a pile of five 24 us frames breaks a 100 us bound whatever the
    # damper does; in runs of this test about one violation per three to five late sends.
    # So the sender's queue is allowed 1 % of the frames plus one per late send: a damper
    # that did not hold its queue to the bound would break it for a large share of the
    # frames of every burst.
    cols = ["node", "lbf_packets", "best_effort", "malformed", "early_drops", "marked_late"]
    assert emu.lbf_switches[cols].equals(sim_run.lbf_switches[cols]), emu.lbf_switches
    assert (sim_run.lbf_switches["damper_violations"] == 0).all()
    frames = emu.lbf_switches["lbf_packets"].sum()
    assert emu.lbf_switches["damper_violations"].sum() <= frames / 100, emu.lbf_switches
    sender = next(x for x in emu.summary["emulation"]["senders"] if x["flow"] == "slo")
    violations = emu.lbf_flows["sender_damper_violations"].sum()
    assert violations <= len(slo) / 100 + sender["late_100us"], (violations, sender)
    assert min(slo) >= want_us - LBF_GRANULARITY_US, f"{min(slo)} us, the bound gives {want_us}"
    median = statistics.median(slo)
    assert median <= want_us + LBF_TYPICAL_EXCESS_US, f"median {median} us, bound {want_us}"
    # Per hop, from the sender's stamp to each start of transmission (h1's queue, emulated by
    # s1, then s1's and s2's): what the simulator measures plus the sender's stack and the
    # real-time noise; never earlier.
    sim_hops, emu_hops = sim_run.hop_latency("slo"), emu.hop_latency("slo")
    print(pd.concat({"sim": sim_hops, "emu": emu_hops}, axis=1).to_string())
    assert list(emu_hops["node"]) == list(sim_hops["node"]) == ["h1", "s1", "s2"]
    assert (emu_hops["min"] >= sim_hops["min"] - LBF_GRANULARITY_US * 1e3).all()
    assert (emu_hops["p50"] <= sim_hops["p50"] + LBF_TYPICAL_EXCESS_US * 1e3).all()


#: A dilated run in which the switches sent more than this share of their frames over 100 us
#: of the machine's clock late was stalled by the machine, not by the emulation: quiet runs of
#: the test below (then at dilation 10) send 0.4-1.2 % that late; a CI run (2026-11-24) that
#: failed sent 9.0 % (and its senders 21 %), every median of F1 a constant ~10 us per hop late.
#: Some machines stall every run: one (2026-11-28) made 9-27 % of the frames that late in each
#: of a dozen runs, TCP or dilated, and a busy loop there saw 10-16 gaps of over 100 us a
#: second; its CI run stalled all three dilated runs at dilation 10 (4-10 %).
STALLED_SHARE = 0.03
#: How many runs the dilated test makes while the machine measurably stalls them.
STALLED_ATTEMPTS = 3


def skip_stalled(stalls: list, runs: int = STALLED_ATTEMPTS) -> None:
    """The machine stalled too many of ``runs`` attempts (every one, unless the test says
    otherwise) to decide: it cannot keep the emulation's time, so it measures nothing here (as
    a machine without root could not); skipped, saying so with each stalled run's report. A run
    the machine kept time in still fails at once."""
    pytest.skip(f"the machine stalled {len(stalls)} of {runs} runs, too many to decide: {stalls}")


def stalled(emulation: dict) -> str | None:
    """Why the machine, by the run's own ``emulation`` report, did not keep the run's time (or
    None when it did)."""
    n = sum(s["forwarded"] for s in emulation["switches"])
    late = sum(s["tx_late_100us"] for s in emulation["switches"])
    if late <= STALLED_SHARE * n:
        return None
    return f"switches sent {late} of {n} frames over 100 us late (more than {STALLED_SHARE:.0%})"


def test_a_dilated_emulation_of_the_seeds_test_4_follows_the_simulator(tmp_path, capsys):
    """The seed's test 4 is more than these two cores carry in real time (about 120,000
    frames/s in the bursts). Run 20 times slower (``[sim] dilation = 20``: every duration 20x,
    every rate / 20) it fits, and the results come back in the scenario's own time: each hop's
    median latency of each flow within 30 us of the simulator's (undilated, medians run
    hundreds of us late), F1 never before its 700 us lower bound, nothing lost. The run reports
    how late the machine made it (``emulation``: per forwarder and per sender, in the
    scenario's time; per receiver how late it read what the kernel stamped on arrival, every
    datagram stamped) and prints that under the table.

    A run whose medians miss is failed at once when its own report shows the machine kept
    time; one the machine measurably stalled (``stalled``) is run again, up to
    ``STALLED_ATTEMPTS`` runs, and the test is skipped, saying so, if every one stalled."""
    from latnet.cli import main

    root = Path(__file__).resolve().parents[2]
    text = (root / "experiments" / "lbf" / "test4.toml").read_text()
    text = text.replace('duration = "10s"', 'duration = "300ms"').replace(
        "[sim]\n", "[sim]\ndilation = 20\n", 1
    )
    sc = scenario(tmp_path, text)
    stalls = []
    for attempt in range(STALLED_ATTEMPTS):
        out = tmp_path / f"out{attempt}"
        capsys.readouterr()
        assert main(["run", str(sc), "--mode", "both", "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        sim, emu = (json.loads((out / m / "results.json").read_text()) for m in ("sim", "emu"))
        assert emu["dilation"] == sim["dilation"] == 20 and emu["duration_ns"] == 300_000_000
        worst = []
        for fs, fe in zip(sim["flows"], emu["flows"], strict=True):
            assert fe["sent"] == fs["sent"] == fe["received"] > 500, fe
            for hs, he in zip(fs["hops"][1:], fe["hops"][1:], strict=True):
                worst.append(
                    (
                        abs(he["latency_ns"]["p50"] - hs["latency_ns"]["p50"]) / 1e3,
                        fe["name"],
                        he["node"],
                    )
                )
        print(sorted(worst)[-3:])
        if max(worst)[0] <= 30:
            break
        why = stalled(emu["emulation"])
        assert why is not None, ("the machine kept time", sorted(worst)[-3:], printed)
        stalls.append((why, sorted(worst)[-1]))
        print(f"attempt {attempt + 1} stalled: {why}; worst median {sorted(worst)[-1]}")
    else:
        skip_stalled(stalls)
    assert emu["flows"][0]["latency_ns"]["min"] >= 700_000 - LBF_GRANULARITY_US * 1e3
    e = emu["emulation"]
    assert "emulation" not in sim
    assert [s["node"] for s in e["switches"]] == ["FWD1", "FWD2", "FWD3", "FWD4"]
    assert sum(s["forwarded"] for s in e["switches"]) == emu["events"] > 0
    assert [(s["flow"], s["sent"]) for s in e["senders"]] == [
        (f["name"], f["sent"]) for f in emu["flows"]
    ]
    parts = [s["tx_late_max_ns"] for s in e["switches"]] + [s["late_max_ns"] for s in e["senders"]]
    assert e["late_max_ns"] == max(parts)
    # every datagram a receiver got carried the kernel's arrival stamp its latency runs to
    assert [(r["flow"], r["received"], r["stamped"]) for r in e["receivers"]] == [
        (f["name"], f["received"], f["received"]) for f in emu["flows"]
    ]
    line = next(x for x in printed.splitlines() if x.startswith("emulation timing"))
    print(line)
    assert f"of {emu['events']:,} frames more than 100 us late" in line
    assert "of the machine's clock" in line


def slo_flow(name: str, slo: str) -> str:
    """A `[[flows]]` entry h1 -> h2, 300-byte frames at 1 Mbit/s, with SLO ``slo``."""
    return f"""[[flows]]
name = "{name}"
src = "h1"
dst = "h2"
size = 300
traffic = {{ kind = "cbr", rate = "1Mbps" }}
slo = {{ {slo} }}
"""


@pytest.mark.parametrize(
    ("upper", "encap"), [("drop", "udp-shim"), ("mark", "udp-shim"), ("mark", "ipv6")]
)
def test_lbf_outcomes_of_an_emulated_run_are_the_simulators(tmp_path, upper, encap):
    """The LBF section of an emulated run (results.json ``lbf``, ``EmuResults.lbf_*``): a flow
    whose 150 us upper bound is below its path's 300 us of link delay is hopeless at s1 on
    real packets as in the simulator (every packet dropped early there, or marked there and
    received late with the flag, one notification record per packet with its sequence
    number); a flow with a loose bound arrives on time. The switches' forwarder counters, the
    drops by reason and the receivers' count, late flag read from the shim or from the IPv6
    hop-by-hop option, equal the simulator's. With per-packet records, packets.csv names
    every packet dropped early as the simulator's does: flow, sequence number, reason, node,
    created about when it was simulated."""
    text = LBF.split("[[flows]]")[0].replace('budget = "equal"\n', f'upper = "{upper}"\n', 1)
    text += slo_flow("tight", f'upper = "150us", encap = "{encap}"')
    text += slo_flow("loose", f'upper = "50ms", encap = "{encap}"')
    sim = latnet.run(text=text, packets=upper == "drop")
    sc = scenario(tmp_path, text)
    records = upper == "drop"
    with Testbed(
        sc, run_dir=tmp_path / "run", time_zero_after_ns=1_000_000_000, hop_records=records
    ) as tb:
        emu, _ = run_flows(tb, tmp_path / "out")
    on_disk = json.loads((tmp_path / "out" / "results.json").read_text())["lbf"]
    assert on_disk == emu.summary["lbf"] and emu.lbf_flows is not None
    sent = {f["name"]: f["sent"] for f in emu.summary["flows"]}
    assert sent == {f["name"]: f["sent"] for f in sim.summary["flows"]}
    cols = ["flow", "received", "early", "on_time", "late_marked", "late_unmarked"]
    cols += ["marked_but_on_time", "early_drops", "expired"]
    assert emu.lbf_flows[cols].equals(sim.lbf_flows[cols]), (emu.lbf_flows, sim.lbf_flows)
    assert emu.lbf_switches.equals(sim.lbf_switches), (emu.lbf_switches, sim.lbf_switches)
    flows = emu.lbf_flows.set_index("flow")
    assert flows.loc["loose", "on_time"] == sent["loose"] > 500
    if upper == "drop":
        assert flows.loc["tight", "received"] == 0
        assert emu.lbf_drops.to_dict("records") == [
            {"flow": "tight", "node": "s1", "reason": "early", "packets": sent["tight"]}
        ]
        key = ["flow", "seq", "drop_reason", "drop_node"]
        pe, ps = emu.packets, sim.packets
        assert list(pe.columns) == list(ps.columns)
        dropped = pe[~pe["received"]]
        assert len(dropped) == sent["tight"] and set(dropped["drop_reason"]) == {
            "hopeless-early-drop"
        }
        both = dropped.merge(ps[~ps["received"]], on=key, suffixes=("", "_sim"))
        assert len(both) == len(dropped), (dropped.head(), ps[~ps["received"]].head())
        assert (both["end_ns"] >= both["created_ns"]).all()
        lag = both["created_ns"].astype("int64") - both["created_ns_sim"].astype("int64")
        assert abs(lag.median()) < 1_000_000, lag.describe()
        assert pe.loc[pe["received"], "latency_ns"].notna().all()
    else:
        assert flows.loc["tight", "late_marked"] == sent["tight"] > 500
        notes = emu.lbf_notifications
        assert emu.summary["lbf"]["notifications_total"] == len(notes) == sent["tight"]
        assert sorted(notes["seq"]) == list(range(sent["tight"])) and set(notes["node"]) == {"s1"}
        assert notes["time_ns"].is_monotonic_increasing
        first = notes["time_ns"].iloc[0]
        assert 0 < first < 10_000_000, f"first mark {first} ns after the run's time zero"


def test_one_process_runs_every_switch(tmp_path):
    """``switch_processes="one"``: one latnet-switch process opens both switches' interfaces
    in their namespaces and forwards for both. The LBF chain, now with cut-through links (a
    switch hands a frame to the next at its first bit), still holds its lower bound; each
    switch writes its own statistics; s2 takes s1's frames at the instants s1 made them due
    (not when the kernel delivered them); and the process, started in s1's namespace, is found
    and stopped by ``down`` from the state file alone (as after a crash of its owner)."""
    text = LBF.replace('drain = "300ms"\n', 'drain = "300ms"\nswitching = "cut-through"\n', 1)
    sc = scenario(tmp_path, text)
    with Testbed(sc, run_dir=tmp_path / "run", switch_processes="one") as tb:
        assert len({p.pid for p in tb.switches.values()}) == 1
        res, _ = run_flows(tb, tmp_path / "out")
        slo = latencies_us(tb, "slo")
        stats = [tb.stats(s) for s in ("s1", "s2")]
    flows = {f["name"]: f for f in res.summary["flows"]}
    assert res.summary["switching"] == "cut-through"
    assert len(slo) > 1000 and len(slo) == flows["slo"]["sent"] == flows["slo"]["received"]
    assert min(slo) >= 2000 - LBF_GRANULARITY_US, f"earliest SLO packet after {min(slo)} us"
    median = statistics.median(slo)
    assert median <= 2000 + LBF_TYPICAL_EXCESS_US, f"median SLO packet after {median} us"
    for name, st in zip(("s1", "s2"), stats, strict=True):
        assert st["final"] is True and st["forwarded"] >= len(slo), name
        assert st["loop_switches"] == 2, name
    assert stats[0]["sleeps"] == stats[1]["sleeps"], "one loop sleeps for both"
    # s2 took every frame from s1 at the instant s1's emulation made it due (the slo flow
    # runs s1 -> s2; nothing of the scenario's runs back)
    assert stats[1]["rx_in_loop"] >= len(slo), stats[1]["rx_in_loop"]
    assert stats[0]["rx_in_loop"] < len(slo) / 100, stats[0]["rx_in_loop"]
    tb = Testbed(sc, run_dir=tmp_path / "again", switch_processes="one")
    tb.up()
    pid = tb.switches["s1"].pid
    tb._wait_ready("s2")
    assert down_all(tb.prefix) == [tb.prefix]
    tb.switches["s1"].wait(timeout=10)
    assert not {ns for ns in netns_list() if ns.startswith(tb.prefix)}
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_one_process_finishes_every_switch_after_an_error(tmp_path, monkeypatch):
    """When one switch of a shared process fails (here: its statistics file cannot be
    written), the process stops with an error naming the file, and the other switch still
    writes its final statistics; the testbed is removed."""
    sc = scenario(tmp_path, LBF)
    tb = Testbed(sc, run_dir=tmp_path / "run", switch_processes="one")
    real = tb.stats_path
    bad = tmp_path / "missing" / "switch-s2.json"
    monkeypatch.setattr(tb, "stats_path", lambda s: bad if s == "s2" else real(s))
    with pytest.raises(latnet.LatnetError, match="exited with status 1") as e:
        tb.up()
    assert f"statistics file {bad}" in str(e.value)
    assert json.loads(real("s1").read_text())["final"] is True
    assert not {ns for ns in netns_list() if ns.startswith(tb.prefix)}


def test_senders_wait_for_receivers_that_start_late(tmp_path, monkeypatch):
    """A machine that takes longer than the margin to start a receiver (here: the receiver is
    held with SIGSTOP for 0.6 s, past the senders' time zero) makes the senders late, which
    they report, but loses nothing: they start only once every receiver has bound its
    sockets. (Before, what they sent before anyone listened was lost without a word.)"""
    flows = cbr("probe", "h1", "10Mbps", 1000)
    sc = scenario(tmp_path, two_hosts("100Mbps", "100us", '{ kind = "fifo" }', flows, "1s"))
    real = Testbed.popen
    held: list[threading.Timer] = []

    def popen(self, node, argv, **kw):
        p = real(self, node, argv, **kw)
        if "recv" in argv:
            os.kill(p.pid, signal.SIGSTOP)
            held.append(threading.Timer(0.6, os.kill, (p.pid, signal.SIGCONT)))
            held[-1].start()
        return p

    monkeypatch.setattr(Testbed, "popen", popen)
    with Testbed(sc, run_dir=tmp_path / "run") as tb:
        res, _ = run_flows(tb, tmp_path / "out")
        got = latencies_us(tb, "probe")
    assert len(held) == 1 and not held[0].is_alive()
    (f,) = res.summary["flows"]
    assert f["sent"] == f["received"] == len(got) > 1000, f
    (sender,) = res.summary["emulation"]["senders"]
    # run_flows' time zero is MARGIN (0.3 s) after it started: the sender began about 0.3 s late
    assert sender["late_max_ns"] > 0.6e9 - MARGIN - 0.1e9, sender


def test_a_receiver_that_fails_is_named_before_any_sender_starts(tmp_path):
    """A receiver that cannot bind (its port is taken) stops the run with its error, before
    any sender is started."""
    flows = cbr("probe", "h1", "10Mbps", 1000) + "dst_port = 20001\n"
    sc = scenario(tmp_path, two_hosts("100Mbps", "100us", '{ kind = "fifo" }', flows, "1s"))
    with Testbed(sc, run_dir=tmp_path / "run") as tb:
        addr = {n["name"]: n["address"] for n in tb.plan["nodes"]}["h3"]
        squat = tb.popen("h3", [sys.executable, "-c", SQUAT, addr, "20001"], stdout=subprocess.PIPE)
        try:
            assert squat.stdout.readline() == b"bound\n"
            with pytest.raises(latnet.LatnetError, match="receiver on h3 failed.*bind") as e:
                start_flows(tb, now_ns() + MARGIN, now_ns() + MARGIN + 10**9)
            assert "sender" not in str(e.value)
            assert not (tb.run_dir / "send-probe.json").exists()
        finally:
            squat.kill()
            squat.wait()


#: Holds a UDP port (argv: address, port) until killed.
SQUAT = """
import socket, sys, time
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("bound", flush=True)
time.sleep(60)
"""


TAGS = (
    """
[sim]
duration = "1s"
[defaults.link]
rate = "100Mbps"
delay = "100us"
"""
    + chain('forwarding = { kind = "tag-stack", base = 10 }')
    + """[[flows]]
name = "routed"
src = "h1"
dst = "h2"
size = 1514
tags = [10, 10]
traffic = { kind = "cbr", rate = "10Mbps" }
"""
)


def test_tag_stack_source_routing_on_real_packets(tmp_path):
    """Chameleon's data plane on real frames: the source's tagger (at h1's emulated port)
    pushes the flow's two tags, each switch pops one and sends the frame where it says; the
    tag that crosses the s1 -> s2 veth arrives beside the frame (the kernel strips it), and
    s2 must put it back to route. Full-size frames: the tags are inside the 1514 bytes."""
    sc = scenario(tmp_path, TAGS)
    with Testbed(sc, run_dir=tmp_path / "run") as tb:
        res, _ = run_flows(tb, tmp_path / "out")
        stats = {s: tb.stats(s) for s in ("s1", "s2")}
    flow = res.summary["flows"][0]
    assert flow["sent"] > 800 and flow["received"] == flow["sent"], flow
    assert all(not st["node_drops"] for st in stats.values()), stats
    # 4 bytes fewer per frame at each hop: 1514 at h1's port, 1510 on s1 -> s2, 1506 into h2
    s2_in = next(i for i in stats["s2"]["ifaces"] if i["rx_frames"])
    assert s2_in["rx_bytes"] == 1510 * s2_in["rx_frames"], s2_in


DIAMOND = (
    """
[sim]
duration = "300ms"
drain = "100ms"
[defaults.link]
rate = "100Mbps"
delay = "50us"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "h2"
kind = "host"
"""
    + "".join(
        f'[[nodes]]\nname = "{s}"\nkind = "switch"\nforwarding = {{ kind = "tag-stack" }}\n'
        for s in ("s1", "s2", "s3", "s4")
    )
    + "".join(
        f'[[links]]\na = "{a}"\nb = "{b}"\n'
        for a, b in (
            ("h1", "s1"),
            ("s1", "s2"),
            ("s1", "s3"),
            ("s2", "s4"),
            ("s3", "s4"),
            ("s4", "h2"),
        )
    )
    + """[[flows]]
name = "detour"
src = "h1"
dst = "h2"
size = 1000
tags = [20, 10, 20]
traffic = { kind = "cbr", rate = "8Mbps" }
"""
)


def test_a_source_routed_flows_hops_are_the_ones_it_took_on_real_packets(tmp_path):
    """Two equal paths from s1 to s4; the FIB takes s2, the flow's tags take s3. The emulated
    per-hop summary and hops.csv list the hops the frames took (every frame measured at each),
    as the simulator's do, not the FIB's path."""
    from latnet.cli import main

    sc = scenario(tmp_path, DIAMOND)
    out = tmp_path / "out"
    assert main(["run", str(sc), "--mode", "both", "--packets", "--out", str(out)]) == 0
    sim, emu = (
        json.loads((out / m / "results.json").read_text())["flows"][0] for m in ("sim", "emu")
    )
    route = [("h1", "s1"), ("s1", "s3"), ("s3", "s4"), ("s4", "h2")]
    assert [(h["node"], h["toward"]) for h in sim["hops"]] == route, sim["hops"]
    assert emu["sent"] > 200 and emu["received"] == emu["sent"], emu
    hops = [(h["node"], h["toward"], (h["latency_ns"] or {}).get("count")) for h in emu["hops"]]
    assert hops == [(*r, emu["sent"]) for r in route], hops
    import pandas as pd

    key = ["flow", "seq", "hop", "node", "port"]
    hs, he = (
        pd.read_csv(out / m / "hops.csv").sort_values(key)[key].reset_index(drop=True)
        for m in ("sim", "emu")
    )
    assert len(he) == 4 * emu["sent"] and he.merge(hs).shape == he.shape


def paced_pair(tmp_path: Path, register: bool, ipv6: bool = False) -> tuple[dict, dict, dict, dict]:
    """Two real cubic senders through a 40 Mbit/s port of a switch counting large flows: A
    sends 4 s, B joins 1.2 s later for 1.6 s, over IPv4 or IPv6. Returns A's and B's sender
    reports, the receiver's report (bins by sender under ``by_sender``) and the switch's final
    statistics."""
    body = two_hosts("40Mbps", "1ms", FIFO, "").replace(
        'name = "s1"\nkind = "switch"\n', 'name = "s1"\nkind = "switch"\nlarge_flows = {}\n'
    )
    tag = f"paced-{register}" + ("-v6" if ipv6 else "")
    sc = scenario(tmp_path, body, name=tag)
    out = tmp_path / tag
    out.mkdir()
    reg = "yes" if register else "no"
    with Testbed(sc, run_dir=out / "run", ipv6=ipv6) as tb:
        addr = tb.address6 if ipv6 else tb.address
        dst = f"[{addr('h3')}]:5301" if ipv6 else f"{addr('h3')}:5301"
        who = {addr("h1"): "A", addr("h2"): "B"}
        rx = tb.popen(
            "h3",
            [tb.binary, "tcp-recv", "--bind", dst, "--conns", "2"]
            + ["--seconds", "10", "--out", str(out / "rx.json")],
        )
        tb.wait_listening("h3", 5301)
        send = [tb.binary, "tcp-send", "--dst", dst, "--register", reg, "--cc", "cubic"]
        a = tb.popen("h1", [*send, "--seconds", "4", "--out", str(out / "a.json")])
        time.sleep(1.2)
        b = tb.popen("h2", [*send, "--seconds", "1.6", "--out", str(out / "b.json")])
        for p in (a, b, rx):
            assert p.wait(timeout=30) == 0
        tb.stop_switches()
        stats = tb.stats("s1")
    a, b, rx = (json.loads((out / f"{n}.json").read_text()) for n in ("a", "b", "rx"))
    # a peer is ADDR:PORT or [ADDR]:PORT
    rx["by_sender"] = {who[c["peer"].rsplit(":", 1)[0].strip("[]")]: c["bins"] for c in rx["conns"]}
    return a, b, rx, stats


def paced_rates(rx: dict) -> tuple[list[float], list[float], list[float]]:
    """Mbit/s of A alone (before B) and of A and B while both send (edges trimmed)."""
    ca, cb = rx["by_sender"]["A"], rx["by_sender"]["B"]
    active = [i for i, v in enumerate(cb) if v > 0]
    both = range(active[0] + 2, active[-1] - 1)
    mbps = 8 * 1000 / rx["bin_ms"] / 1e6
    alone = [v * mbps for v in ca[1 : active[0] - 1]]
    return alone, [ca[i] * mbps for i in both], [cb[i] * mbps for i in both]


def assert_paced(a: dict, b: dict, rx: dict, st: dict, payload: int) -> dict:
    """A's cap follows N = 1, 2, 1 and B's N = 2, each gets its share of payload (``payload``
    bytes in every 1514-byte frame) while both send, and the bottleneck queue stays short.
    Returns the bottleneck queue's statistics."""
    assert [x["count"] for x in a["applied"]] == [1, 2, 1], a["applied"]
    assert [x["count"] for x in b["applied"]] == [2], b["applied"]
    assert {x["rate_bps"] for x in a["applied"] + b["applied"]} == {40_000_000}
    for s in (a, b):
        assert s["max_pacing_rate"] == s["applied"][-1]["pacing_bytes_per_s"]
        assert s["malformed_options"] == 0 and s["pacing_errors"] == 0, s
    lf = st["large_flows"]
    assert (lf["registered"], lf["reports"], lf["fin"], lf["malformed"]) == (2, 2, 2, 0), lf
    assert lf["announcements"] >= 2, lf  # A told N = 2, then N = 1

    alone, ra, rb = paced_rates(rx)
    share = 20 * payload / 1514  # Mbit/s of payload in 20 Mbit/s of full-sized frames
    med = statistics.median
    a2, b2 = med(ra), med(rb)
    assert med(alone) >= 0.9 * 2 * share, f"A alone {med(alone):.1f} Mbit/s"
    assert 0.9 * share <= a2 <= 1.02 * share, f"A beside B {a2:.1f} Mbit/s (share {share:.1f})"
    assert 0.9 * share <= b2 <= 1.02 * share, f"B beside A {b2:.1f} Mbit/s (share {share:.1f})"

    port = {p["peer"]: p for p in st["ports"]}["h3"]["queue"]
    # Paced at exactly C / N, the senders never build a queue (about 12 packets measured);
    # the unpaced pair fills the 200-packet buffer and loses packets.
    assert port["peak_packets"] <= 60, port
    print(
        f"paced:   A {a2:.1f} / B {b2:.1f} Mbit/s, retrans {a['total_retrans']}+"
        f"{b['total_retrans']}, drops {sum(port['drops'].values())}, peak {port['peak_packets']}"
    )
    return port


HTB_HOST = 'queue_a = { kind = "htb", rate = "1Gbps", burst = 3004 }\n'


def large_pair(pacing: str) -> str:
    """``paced_pair``'s two senders as a scenario: tcp-bulk large flows (A 0-4 s, B 1.2-2.8 s)
    through the switch's 40 Mbit/s port, pacing by ``large_flow_pacing = pacing``; the hosts'
    queues are HTB (as ``htb`` requires; at 1 Gbit/s, above the share either way)."""
    flows = "".join(
        f"""[[flows]]
name = "{n}"
src = "{src}"
dst = "h3"
size = 1514
start = "{start}"
stop = "{stop}"
traffic = {{ kind = "tcp-bulk", cc = "cubic", large_flow = true, large_flow_pacing = "{pacing}" }}
"""
        for n, src, start, stop in [("A", "h1", "0s", "4s"), ("B", "h2", "1.2s", "2.8s")]
    )
    body = two_hosts("40Mbps", "1ms", FIFO, flows, duration="4s")
    body = body.replace(
        'name = "s1"\nkind = "switch"\n', 'name = "s1"\nkind = "switch"\nlarge_flows = {}\n'
    )
    return body.replace('b = "s1"\nrate = "10Gbps"\n', 'b = "s1"\nrate = "10Gbps"\n' + HTB_HOST)


@pytest.mark.parametrize("pacing", ["htb", "per-connection"])
def test_a_scenarios_large_flows_pace_on_real_tcp_as_in_the_simulator(tmp_path, pacing):
    """A scenario's large flows on the kernel's TCP (``latnet run --mode both``): each sender
    learns N = 1, 2, 1 (A) and 2 (B) when the simulator's do, and sets what the simulator
    sets for the share: ``htb``, an HTB class on its host's interface at the share of frames
    the simulator re-shapes its host queue to (exactly); ``per-connection``, the socket's cap
    (payload, within 1 %: Linux's segments carry less of a frame). While both send B gets about
    its share and the bottleneck queue stays short."""
    from latnet.cli import main

    sc = scenario(tmp_path, large_pair(pacing))
    out = tmp_path / "out"
    assert main(["run", str(sc), "--mode", "both", "--quiet", "--out", str(out)]) == 0
    sim, emu = (json.loads((out / m / "results.json").read_text()) for m in ("sim", "emu"))

    def changes(res: dict) -> dict:
        return {f["name"]: f["tcp"]["large_flow"]["changes"] for f in res["flows"]}

    assert [f["tcp"]["large_flow"]["pacing"] for f in emu["flows"]] == [pacing, pacing]
    cs, ce = changes(sim), changes(emu)
    assert [c["count"] for c in cs["A"]] == [1, 2, 1] and [c["count"] for c in cs["B"]] == [2]
    for name in ("A", "B"):
        assert len(ce[name]) == len(cs[name]), (name, cs, ce)
        for s, e in zip(cs[name], ce[name], strict=True):
            assert (e["count"], e["bottleneck_bps"]) == (s["count"], s["bottleneck_bps"])
            if pacing == "htb":
                assert e["rate_bps"] == s["rate_bps"], (name, s, e)
            else:
                # (payload: the simulator's segments of a 1514-byte frame carry 1460 bytes,
                # Linux's 1448 beside its timestamp option)
                assert abs(e["rate_bps"] - s["rate_bps"]) <= 0.01 * s["rate_bps"], (name, s, e)
            # when: A told N = 1 in the SYN-ACK, 2 when B's SYN passed, 1 after B's FIN
            # (measured: 3, 4 and 33 ms after the simulator's; Linux sends B's FIN once the
            # data it holds at the stop is out, the simulator's application stops at once)
            # (the sender's instants are whole milliseconds of its clock: up to 1 ms early)
            assert -1_000_000 <= e["t_ns"] - s["t_ns"] < 150_000_000, (name, s, e)
    if pacing == "htb":
        # half the port's 40 Mbit/s (these links count no per-frame overhead)
        assert [c["rate_bps"] for c in cs["B"]] == [20_000_000], cs
    emu_b = next(f for f in emu["flows"] if f["name"] == "B")
    sim_b = next(f for f in sim["flows"] if f["name"] == "B")
    got, want = emu_b["tcp"]["delivered_bytes"], sim_b["tcp"]["delivered_bytes"]
    assert 0.85 * want <= got <= 1.1 * want, (got, want)
    port = next(p for p in emu["ports"] if p["node"] == "s1" and p["peer"] == "h3")
    assert port["queue"]["peak_packets"] <= 60, port


def test_switch_assisted_pacing_with_real_tcp(tmp_path):
    """The host side of switch-assisted pacing on the kernel's TCP: the SYN's REGISTER option
    is counted by the emulated switch, the SYN-ACK and later ACKs bring N and the port rate,
    and the sender's SO_MAX_PACING_RATE follows N = 1, 2, 1 as B comes and goes. While both
    run, each gets its share and the bottleneck queue stays short (an unpaced pair, which
    shares unevenly and fills the buffer, is measured beside it)."""
    a, b, rx, st = paced_pair(tmp_path, register=True)
    assert_paced(a, b, rx, st, payload=1448)  # 1500-byte MTU - IPv4 - TCP with timestamps

    ua, ub, urx, ust = paced_pair(tmp_path, register=False)
    assert ua["applied"] == [] and ub["applied"] == [] and ust["large_flows"]["registered"] == 0
    assert ua["max_pacing_rate"] == 2**64 - 1, "never capped without reports"
    _, ua2, ub2 = paced_rates(urx)
    uport = {p["peer"]: p for p in ust["ports"]}["h3"]["queue"]
    print(
        f"unpaced: A {statistics.median(ua2):.1f} / B {statistics.median(ub2):.1f} Mbit/s, "
        f"retrans {ua['total_retrans']}+{ub['total_retrans']}, drops "
        f"{sum(uport['drops'].values())}, peak {uport['peak_packets']}"
    )


def test_switch_assisted_pacing_with_real_tcp_over_ipv6(tmp_path):
    """The same over IPv6: REGISTER rides in a hop-by-hop extension header the sender's kernel
    puts in the SYN (IPV6_HOPOPTS), the switch inserts one with the REPORT into the SYN-ACK
    and later ACKs, and the cap counts IPv6's 40-byte header."""
    a, b, rx, st = paced_pair(tmp_path, register=True, ipv6=True)
    assert all(c["peer"].startswith("[2001:db8::") for c in rx["conns"]), rx["conns"]
    assert a["dst"].startswith("[2001:db8::"), a["dst"]
    assert_paced(a, b, rx, st, payload=1428)  # 1500-byte MTU - IPv6 - TCP with timestamps


def pcap_stamps(path: Path) -> list[int]:
    """Timestamps (ns) of a capture's frames as tcpdump reads them."""
    r = subprocess.run(
        ["tcpdump", "-nn", "-tt", "--time-stamp-precision=nano", "-r", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [int(line.split(" ", 1)[0].replace(".", "")) for line in r.stdout.splitlines()]


def test_emulated_links_are_captured_as_the_simulator_captures_them(tmp_path, capsys):
    """`latnet run --mode both --pcap --queues 50ms`: the emulated switches write one capture
    per link direction, named as the simulator's, holding every frame the port sent (its count
    in results.json), stamped from the scenario's time zero; a CBR flow's frames appear on every
    link as often and about when they do in the simulation. The queue series has the
    simulator's rows (instants and ports). With --packets the switches' hop records have the
    simulator's rows: every frame of both flows at each hop, about when it was simulated; and
    the receivers' logs become packets.csv, each packet sent about when it was simulated
    (--plot draws both runs' latency CDFs from them)."""
    import pandas as pd

    from latnet.cli import main

    flows = cbr("a", "h1", "8Mbps", 1000) + cbr("b", "h2", "4Mbps", 500)
    sc = scenario(tmp_path, two_hosts("100Mbps", "200us", FIFO, flows, "1s"))
    out = tmp_path / "out"
    argv = ["run", str(sc), "--mode", "both", "--pcap", "--queues", "50ms", "--packets", "--plot"]
    # (the scenario's [output] pcap asks the same of both runs: checked at the end)
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # per hop, every frame is measured where it starts transmission, the sender's NIC (h1 or
    # h2, emulated by s1) first, then s1's port toward h3
    emu = json.loads((out / "emu" / "results.json").read_text())
    for f in emu["flows"]:
        hops = [(h["node"], h["toward"], h["latency_ns"]["count"]) for h in f["hops"]]
        assert hops == [(f["src"], "s1", f["sent"]), ("s1", "h3", f["sent"])], hops
    assert "latency at the start of transmission from each hop" in printed
    assert "h1->s1" in printed and "s1->h3" in printed
    hs, he = (pd.read_csv(out / mode / "hops.csv") for mode in ("sim", "emu"))
    key = ["flow", "seq", "hop", "node", "port", "priority"]
    assert he["id"].isna().all() and list(he.columns) == list(hs.columns)
    hs, he = hs.sort_values(key), he.sort_values(key)
    assert len(he) == 2 * sum(f["sent"] for f in emu["flows"])
    assert he[key].reset_index(drop=True).equals(hs[key].reset_index(drop=True))
    assert (he["start_tx_ns"] >= he["eligible_ns"]).all()
    assert (he["eligible_ns"] >= he["enqueue_ns"]).all()
    lag = he["start_tx_ns"].to_numpy() - hs["start_tx_ns"].to_numpy()
    # stamped from the scenario's time zero, as the simulator's: typically tens of us later
    assert abs(np.median(lag)) < 1_000_000, np.percentile(lag, [0, 50, 100])
    ps, pe = (pd.read_csv(out / mode / "packets.csv") for mode in ("sim", "emu"))
    assert list(pe.columns) == list(ps.columns) and pe["id"].isna().all()
    assert len(pe) == sum(f["sent"] for f in emu["flows"]) == len(ps)
    both = pe.merge(ps, on=["flow", "seq"], suffixes=("", "_sim"))
    assert len(both) == len(pe)
    sent_lag = both["created_ns"] - both["created_ns_sim"]
    assert abs(sent_lag.median()) < 1_000_000, sent_lag.describe()
    assert (both["latency_ns"] == both["end_ns"] - both["created_ns"]).all()
    assert all((out / mode / "latency_cdf.png").stat().st_size > 0 for mode in ("sim", "emu"))
    key = ["t_ns", "node", "peer", "link"]
    qs, qe = (pd.read_csv(out / mode / "queues.csv") for mode in ("sim", "emu"))
    assert list(qe.columns) == list(qs.columns)
    assert qe[key].equals(qs[key]) and len(qe) == 26 * 6
    # while the flows send, the same ports see packets in every interval (each frame waits in
    # its queue for an instant at least), and the idle ones none
    sending = qs["t_ns"] <= 950_000_000
    assert ((qe["max_packets"] > 0) == (qs["max_packets"] > 0))[sending].all()
    assert set(qs[sending & (qs["max_packets"] == 0)]["peer"]) == {"h1", "h2", "s1"}
    names = sorted(p.name for p in (out / "emu" / "pcap").iterdir())
    assert names == sorted(p.name for p in (out / "sim" / "pcap").iterdir())
    assert names == sorted(f"{p['node']}-{p['peer']}.pcap" for p in emu["ports"])
    length = 1_300_000_000
    for port in emu["ports"]:
        name = f"{port['node']}-{port['peer']}.pcap"
        got = pcap_stamps(out / "emu" / "pcap" / name)
        want = pcap_stamps(out / "sim" / "pcap" / name)
        assert len(got) == port["tx_packets"] == len(want), name
        assert got == sorted(got) and all(0 <= t < length for t in got), name
        if want:
            # frame for frame within a millisecond of the simulated ones at the median (a
            # stall of the machine may hold one back: a CI run's first frame on h2-s1 left
            # 1.87 ms late), and the flow keeps its 1 ms (a) / 1 ms (b) spacing on average
            lag = np.median(np.array(got) - np.array(want))
            assert abs(lag) < 1_000_000, (name, lag, got[0], want[0])
            span = lambda ts: (ts[-1] - ts[0]) / (len(ts) - 1)  # noqa: E731
            assert abs(span(got) - span(want)) < 0.01 * span(want), name
    # whole frames, and the simulator's flows, frame for frame
    frames = {m: latnet.read_pcap(out / m / "pcap" / "s1-h3.pcap") for m in ("sim", "emu")}
    e = frames["emu"]
    assert (e["captured"] == e["wire_len"]).all() and (e["error"] == "").all()
    for col in ("src", "dst", "sport", "dport", "wire_len"):
        count = lambda df, c: df[c].value_counts().sort_index()  # noqa: E731
        assert count(e, col).equals(count(frames["sim"], col)), col
    # `[output] pcap = true` in the scenario captures an emulated run without --pcap, and
    # `packets = true` records its hops
    sc.write_text(sc.read_text() + "\n[output]\npcap = true\npackets = true\n")
    res = run_emu(sc, tmp_path / "by-scenario")
    assert sorted(p.name for p in res.pcaps) == names
    assert res.hops is not None
    assert len(res.hops) == 2 * sum(f["sent"] for f in res.summary["flows"])
    assert res.packets is not None and res.packets["received"].all()
    assert len(res.packets) == sum(f["received"] for f in res.summary["flows"])


def test_packets_in_flight_at_the_end_have_rows_as_in_the_simulator(tmp_path):
    """A run without drain behind a 50 ms link ends with the last ~50 ms of a CBR flow in
    flight. The simulator writes those packets as `end-of-run`; so does an emulated run,
    from what the sender sent and neither the receiver nor a switch recorded, created at the
    flow's emission instants: the same packets, give or take the one at the boundary, and
    every packet sent has a row."""
    import pandas as pd

    from latnet.cli import main

    body = two_hosts("100Mbps", "50ms", FIFO, cbr("a", "h1", "1Mbps", 1250), "1s")
    sc = scenario(tmp_path, body.replace('drain = "300ms"', 'drain = "0s"'))
    out = tmp_path / "out"
    assert main(["run", str(sc), "--mode", "both", "--packets", "--out", str(out)]) == 0
    emu = json.loads((out / "emu" / "results.json").read_text())["flows"][0]
    ps, pe = (pd.read_csv(out / mode / "packets.csv") for mode in ("sim", "emu"))
    assert len(pe) == emu["sent"] == len(ps) == 100
    assert sorted(pe["seq"]) == list(range(100))
    lost_sim = set(ps[ps["drop_reason"] == "end-of-run"]["seq"])
    lost_emu = pe[pe["drop_reason"] == "end-of-run"]
    print(sorted(lost_sim), lost_emu.to_string())
    assert lost_sim == set(range(95, 100))
    assert len(set(lost_emu["seq"]) ^ lost_sim) <= 1, (sorted(lost_emu["seq"]), lost_sim)
    assert len(lost_emu) == emu["in_flight_at_end"]
    assert (lost_emu["created_ns"] == lost_emu["seq"] * 10_000_000).all()
    assert (lost_emu["end_ns"] == 1_000_000_000).all() and lost_emu["drop_node"].isna().all()


def test_testbed_up_with_pcap_captures_traffic_sent_by_hand(tmp_path):
    """`latnet testbed up --pcap DIR`: the switch captures what is sent by hand (ping) on every
    link direction, stamped from the testbed's time zero; the files are complete after
    `latnet testbed down`."""
    sc = scenario(tmp_path, two_hosts("100Mbps", "1ms", FIFO, ""))
    cli = [sys.executable, "-m", "latnet.cli"]
    caps = tmp_path / "caps"
    up = subprocess.run(
        [*cli, "testbed", "up", str(sc), "--run-dir", str(tmp_path / "run"), "--pcap", str(caps)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert up.returncode == 0, up.stderr
    assert f"link captures in {caps}/" in up.stdout
    prefix = up.stdout.split()[1]
    try:
        ping = ["ip", "netns", "exec", f"{prefix}h1", "ping", "-c", "3", "-i", "0.2", "10.0.0.4"]
        subprocess.run(ping, capture_output=True, timeout=30, check=True)
    finally:
        down = subprocess.run([*cli, "testbed", "down", "--prefix", prefix], capture_output=True)
    assert down.returncode == 0
    names = sorted(p.name for p in caps.iterdir())
    assert names == [
        "h1-s1.pcap",
        "h2-s1.pcap",
        "h3-s1.pcap",
        "s1-h1.pcap",
        "s1-h2.pcap",
        "s1-h3.pcap",
    ]
    icmp = {n: latnet.read_pcap(caps / n).query("proto == 1") for n in names}
    for n in ("h1-s1.pcap", "s1-h3.pcap", "h3-s1.pcap", "s1-h1.pcap"):
        assert len(icmp[n]) == 3, n
        assert icmp[n]["t_ns"].between(1, 30e9).all(), n
    assert len(icmp["h2-s1.pcap"]) == len(icmp["s1-h2.pcap"]) == 0
    # each request leaves s1 toward h3 after it left h1 (plus the host link's serialization)
    assert (icmp["s1-h3.pcap"]["t_ns"].values > icmp["h1-s1.pcap"]["t_ns"].values).all()


def test_a_capture_directory_that_cannot_be_made_is_a_clear_error(tmp_path):
    """A switch asked to capture into a path that cannot be a directory stops at once, and the
    error names the capture and the path; nothing is left behind."""
    from latnet import LatnetError

    sc = scenario(tmp_path, two_hosts("100Mbps", "0ns", FIFO, ""))
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the captures should go\n")
    before = netns_list()
    with (
        pytest.raises(LatnetError, match=f"packet capture {blocker}"),
        Testbed(sc, run_dir=tmp_path / "run", pcap_dir=blocker),
    ):
        pass
    assert netns_list() == before


def tcp_bulk(name: str, src: str, keys: str, start: str = "0s") -> str:
    """A `[[flows]]` entry: a tcp-bulk flow from `src` to h3 with these traffic keys."""
    return f"""
[[flows]]
name = "{name}"
src = "{src}"
dst = "h3"
size = 1514
start = "{start}"
traffic = {{ kind = "tcp-bulk", {keys} }}
"""


def test_tcp_bulk_flows_run_on_linux_tcp_beside_the_simulator(tmp_path):
    # The simulator's TCP flows on the hosts' kernels (experiments/tcp_linux.toml, quoted in the
    # README): CUBIC with ECN from h1 through a step marker, BBR without from h2 sending 4 MB
    # from 0.5 s, into 50 Mbit/s and 5 ms
    path = Path(__file__).resolve().parents[2] / "experiments" / "tcp_linux.toml"
    sim = latnet.run(path, packets=False)
    st = sim.tcp.set_index("flow")
    # the link is shared and full: goodput in frames near 50 Mbit/s, each flow near its
    # simulated share (quiet runs: CUBIC 0.86-0.89 of the simulator's, BBR 0.99-1.03), and the
    # 4 MB in about the simulator's time. A run that misses is failed at once when its own
    # report shows the machine kept time; one the machine measurably stalled is run again, as
    # the dilated test does
    stalls = []
    for attempt in range(STALLED_ATTEMPTS):
        emu = run_emu(path, tmp_path / f"emu{attempt}")
        t = emu.tcp.set_index("flow")
        ratios = {f: t.loc[f, "goodput_bps"] / st.loc[f, "goodput_bps"] for f in ("a", "b")}
        done, sim_done = t.loc["b", "completion_ns"], st.loc["b", "completion_ns"]
        if all(0.7 < r < 1.3 for r in ratios.values()) and 0.7 < done / sim_done < 1.4:
            break
        why = stalled(emu.summary["emulation"])
        assert why is not None, ("the machine kept time", ratios, done, sim_done)
        stalls.append((why, ratios, done))
    else:
        skip_stalled(stalls)
    assert t.loc["a", "cc"] == "cubic" and t.loc["b", "cc"] == "bbr"
    # `latnet run --mode both` prints both TCP tables, a row per flow and mode
    from latnet.commands.emulate import tcp_side_by_side

    rows = [r.split() for r in tcp_side_by_side(sim.summary, emu.summary).splitlines()[3:]]
    assert [r[:4] for r in rows] == [
        ["a", "sim", "cubic", "yes"],
        ["emu", "cubic", "yes", f"{t.loc['a', 'goodput_bps'] / 1e6:.2f}"],
        ["b", "sim", "bbr", "no"],
        ["emu", "bbr", "no", f"{t.loc['b', 'goodput_bps'] / 1e6:.2f}"],
    ], rows
    # ECN: negotiated where asked (the sender's namespace asks), echoed, and the window cut:
    # the marker held the queue, so the CUBIC flow barely lost a segment
    assert bool(t.loc["a", "ecn"]) and not bool(t.loc["b", "ecn"])
    assert t.loc["a", "ce_marks"] > 50 and t.loc["b", "ce_marks"] == 0, t
    # what Linux keeps no count of is not known, not zero
    assert t[["fast_recoveries", "ecn_reductions", "ece_acks"]].isna().all().all()
    # when, at what threshold and why slow start first ended: CUBIC's on both (Linux names
    # the cause from h1's HyStart counters, h1 sending the one flow); the simulator's BBR keeps
    # no threshold (Linux's kernel may set one, which BBR's window does not follow)
    causes = {"hystart-train", "hystart-delay", "loss", "ecn"}
    for r in (st, t):
        assert r.loc["a", "ss_exit_cause"] in causes and r.loc["a", "ss_exit_ssthresh_bytes"] > 0
        assert 0 < r.loc["a", "ss_exit_ns"] < 1e9, r.loc["a"]
    assert np.isnan(st.loc["b", "ss_exit_ns"]) and st.loc["b", "ss_exit_cause"] is None
    # tail loss probes: none in the simulator (`rack_tlp` off), the kernel's count on Linux
    # (each flow sends alone from its host)
    assert (st["loss_probes"] == 0).all() and (t["loss_probes"] >= 0).all(), t["loss_probes"]
    # the 4 MB were delivered and read to the end
    assert t.loc["b", "delivered_bytes"] == 4_000_000 and t.loc["b", "completed"] == 1
    # a full segment's frame is the flow's `size` (1514 bytes): 1448 of payload beside the
    # timestamp option (`TCP_MAXSEG` was once set 12 bytes short: 1436, in 1502-byte frames)
    fresh = t.loc["b", "segments_sent"] - t.loc["b", "retransmits"]
    assert 1440 < 4_000_000 / fresh <= 1448, (fresh, t.loc["b"])
    # the switch knows the flows' data segments: its drops are theirs, each retransmitted
    fl = emu.flows.set_index("flow")
    port = emu.ports.set_index(["node", "peer"]).loc[("s1", "h3")]
    assert fl["dropped"].sum() == port["drops"] > 0, (fl, port)
    assert (t["retransmits"] >= fl["dropped"]).all(), (t, fl)
    assert (fl["sent"] == t["segments_sent"]).all()
    # the time series: every 100 ms from 0.1 s, b idle before its start, the bytes read
    ts = emu.timeseries
    b = ts[ts["flow"] == "b"]
    assert list(b["t_s"].round(3))[:6] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert (b[b["t_s"] <= 0.5][["delivered_bytes", "cwnd", "in_flight"]] == 0).all().all()
    for f in ("a", "b"):
        got = ts[ts["flow"] == f]["delivered_bytes"].sum()
        assert 0.8 * t.loc[f, "delivered_bytes"] <= got <= t.loc[f, "delivered_bytes"], f
    # the kernel's smoothed RTT: never below the path's 10 ms while connected (0 once closed)
    srtt = ts[ts["t_s"] > 0.6]["srtt_ns"]
    assert ts["rtt_samples"].isna().all()
    assert (srtt[srtt > 0] > 10e6).all() and (srtt > 0).mean() > 0.8, srtt


def test_an_emulated_run_refuses_tcp_flows_linux_cannot_play_before_any_namespace(tmp_path):
    # the simulator's TCP keys Linux takes no per-connection setting for, Prague, and hosts
    # whose flows disagree on what Linux sets per host: refused by name, not run otherwise
    cases = [
        (
            tcp_bulk("a", "h1", 'cc = "cubic", init_cwnd = 4, min_rto = "10ms"'),
            r'flow "a": `init_cwnd`, `min_rto` set the simulator\'s TCP',
        ),
        (tcp_bulk("a", "h1", 'cc = "prague"'), r'flow "a": cc = "prague" has no counterpart'),
        (
            tcp_bulk("a", "h1", 'cc = "cubic"') + tcp_bulk("b", "h1", 'cc = "cubic", ecn = true'),
            r'flows "a" and "b" leave host "h1" with different tcp_ecn \(2 and 1\)',
        ),
    ]
    before = netns_list()
    for flows, why in cases:
        path = scenario(tmp_path, two_hosts("1Gbps", "1ms", '{ kind = "fifo" }', flows))
        with pytest.raises(latnet.UsageError, match=why):
            run_emu(path, tmp_path / "out")
        assert netns_list() == before
    # and the sender refuses such a flow by name, should anything start one
    p = subprocess.run(
        [switch_binary(), "send", "--scenario", str(path), "--flow", "a", "--t0", "0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode != 0 and 'flows "a" and "b" leave host "h1"' in p.stderr, p.stderr


def test_tcp_rr_flows_open_a_connection_per_request_on_linux_tcp(tmp_path):
    # 1 kB requests every 20 ms, 30 kB responses, beside a CUBIC bulk flow over 20 Mbit/s and
    # 5 ms: the simulator's instants, every exchange completed, about the simulator's times
    rr = tcp_bulk("rr", "h2", 'cc = "cubic"').replace(
        'kind = "tcp-bulk", cc = "cubic"',
        'kind = "tcp-rr", cc = "cubic", request = "1KB", response = "30KB", interval = "20ms"',
    )
    flows = tcp_bulk("bulk", "h1", 'cc = "cubic"') + rr
    queue = '{ kind = "fifo", limit_packets = 30 }'
    body = two_hosts("20Mbps", "5ms", queue, flows, duration="2s")
    path = scenario(tmp_path, body + '[output]\ntimeseries = "100ms"\n')
    emu = run_emu(path, tmp_path / "emu")
    sim = latnet.run(path, packets=False)
    t = emu.tcp.set_index("flow")
    st = sim.tcp.set_index("flow")
    n = 100  # 2 s / 20 ms, from 0
    assert t.loc["rr", "connections"] == st.loc["rr", "connections"] == n
    assert t.loc["rr", "completed"] == n and t.loc["rr", "aborted"] == 0, t
    # the requests the server read and the responses the client read
    assert t.loc["rr", "delivered_bytes"] == n * (1000 + 30_000)
    # completion times: a handshake, a request and a 30 kB response behind the bulk flow's
    # queue (30 packets: 18 ms at 20 Mbit/s) over a 10 ms RTT
    # (the tail is each side's loss recovery: a lost last segment waits for the simulator's RTO,
    # Linux sends a tail-loss probe; so the medians only)
    ratio = t.loc["rr", "fct_p50_ns"] / st.loc["rr", "fct_p50_ns"]
    assert 0.6 < ratio < 1.6, (t.loc["rr"], st.loc["rr"])
    assert 10e6 < t.loc["rr", "fct_p50_ns"] < 100e6
    # the time series adds up the open connections of both ends, as the simulator's: in flight
    # at the end of an interval are mostly a response (30 kB, the server's) and a request (the
    # clients' 1 kB; measured medians 31,592 and 32,580 bytes emulated, 31,800 simulated); its
    # bytes are both ends' reads
    ts = emu.timeseries[emu.timeseries["flow"] == "rr"]
    assert len(ts) >= 20 and (ts["cwnd"] > 0).mean() > 0.5, ts
    sts = sim.timeseries[(sim.timeseries["flow"] == "rr") & (sim.timeseries["t_s"] <= 2)]
    ratio = ts["in_flight"].median() / sts["in_flight"].median()
    assert 0.5 < ratio < 2, (list(ts["in_flight"]), list(sts["in_flight"]))
    assert 0.8 * n * 31_000 <= ts["delivered_bytes"].sum() <= n * 31_000
    # the flow's packets are its clients' data segments (every request's, from its own source
    # port); the TCP summary counts the server's responses too
    fl = emu.flows.set_index("flow")
    assert n <= fl.loc["rr", "received"] <= fl.loc["rr", "sent"] < t.loc["rr", "segments_sent"]


def test_a_tcp_hosts_interface_sends_at_its_links_rate_as_a_nic_does(tmp_path):
    # A veth takes every frame at once, so Linux's TCP small queues would never hold a
    # connection's segments in its host: a host with TCP flows gets a token bucket at its link's
    # rate (two frames, or 100 us at the rate), the receiver's too (its ACKs); a host with a
    # packet flow to send gets none, so its packets meet the scenario's queue in the switch
    flows = tcp_bulk("bulk", "h1", 'cc = "cubic"') + cbr("udp", "h2", "1Mbps", 1000)
    path = scenario(tmp_path, two_hosts("20Mbps", "5ms", '{ kind = "fifo" }', flows))
    with Testbed(path, run_dir=tmp_path / "tb") as tb:
        assert tb.nic_shapers() == {"h1/lk0": (10**10, 125_000), "h3/lk2": (20 * 10**6, 3028)}
        for host, dev, shaped in [
            ("h1", "lk0", "10Gbit"),
            ("h2", "lk1", None),
            ("h3", "lk2", "20Mbit"),
        ]:
            qdisc = tb.run(host, ["tc", "qdisc", "show", "dev", dev]).stdout
            if shaped is None:
                assert "tbf" not in qdisc, qdisc
            else:
                assert re.search(rf"qdisc tbf \S+ root .*rate {shaped} burst", qdisc), qdisc
    with Testbed(path, run_dir=tmp_path / "tb2", host_nics="veth") as tb:
        assert tb.nic_shapers() == {}
        assert "tbf" not in tb.run("h1", ["tc", "qdisc", "show", "dev", "lk0"]).stdout
    with pytest.raises(latnet.LatnetError, match="host_nics: expected 'shaped'"):
        Testbed(path, host_nics="nic")


def test_hystart_leaves_slow_start_where_linux_does_beside_request_response_traffic(tmp_path):
    # The request/response scenario above with Linux's defaults in the simulator too: HyStart on
    # the bulk flow, RACK-TLP on both (VALIDATION.md). The 30 kB responses leave gaps of several
    # ms in the bulk flow's ACKs on the shared reverse link; HyStart's rounds start with the
    # flights on both sides (Linux since January 2025), so both leave slow start by the ACK
    # train at about 32 segments (simulated 46.7 kB, Linux mostly 43-52 kB). Counting rounds from a
    # 16-segment window, as the simulator did before, put the gaps inside its trains: 111 kB,
    # and request SYNs lost in the overshoot waited for the 1 s timeout.
    rr = tcp_bulk("rr", "h2", 'cc = "cubic", rack_tlp = true').replace(
        'kind = "tcp-bulk", cc = "cubic"',
        'kind = "tcp-rr", cc = "cubic", request = "1KB", response = "30KB", interval = "20ms"',
    )
    flows = tcp_bulk("bulk", "h1", 'cc = "cubic", hystart = true, rack_tlp = true') + rr
    body = two_hosts("20Mbps", "5ms", '{ kind = "fifo", limit_packets = 30 }', flows, "2s")
    path = scenario(tmp_path, body)
    st = latnet.run(path, packets=False).tcp.set_index("flow")
    assert st.loc["bulk", "ss_exit_cause"] == "hystart-train", st.loc["bulk"]
    assert st.loc["rr", "completed"] == 100 and st.loc["rr", "rtos"] == 0, st.loc["rr"]
    assert st.loc["rr", "fct_p99_ns"] < 200e6, st.loc["rr"]
    # Linux's exit varies from run to run: of 23 runs on one stalling machine (2026-11-30,
    # full frames), 10 left by the train within 4/3 of the simulator's, 13 later (71-96 kB,
    # some by the delay rule; with frames 12 bytes short, as the emulation sent them before,
    # 17 of 23); with its CPUs kept awake (`--keep-cpus-awake`; `make test` keeps them busy
    # while this runs) 10 of 10, at 49.2-52.1 kB. The simulator's exit must be Linux's
    # typical one: 3 of up to 5 runs leave by the train within a factor 4/3 of it; a run that
    # misses while the machine measurably stalled it does not count. Every exchange is done,
    # unless the machine stalled the run: a late exit overshoots, and a request's SYN lost
    # then waits 1 s (VALIDATION.md).
    hits, misses, stalls = 0, [], []
    for attempt in range(5):
        emu = run_emu(path, tmp_path / f"emu{attempt}")
        t = emu.tcp.set_index("flow")
        why = stalled(emu.summary["emulation"])
        done = t.loc["rr", "completed"]
        assert done == 100 or why is not None, ("the machine kept time", t.loc["rr"])
        b = t.loc["bulk"]
        ratio = st.loc["bulk", "ss_exit_ssthresh_bytes"] / b["ss_exit_ssthresh_bytes"]
        miss = (b["ss_exit_cause"], b["ss_exit_ssthresh_bytes"], done)
        if done == 100 and b["ss_exit_cause"] == "hystart-train" and 0.75 < ratio < 1.33:
            hits += 1
        elif why is None:
            misses.append(miss)
        else:
            stalls.append((why, miss))
        if hits == 3:
            break
        assert len(misses) < 3, ("Linux left slow start elsewhere", misses, stalls)
    else:
        skip_stalled(stalls, 5)


def test_mode_both_notes_the_linux_defaults_a_flow_leaves_off_in_the_simulator(tmp_path):
    # `--mode both` says which TCP flows the simulator ran without HyStart (CUBIC, when this
    # machine's CUBIC runs it) or RACK-TLP, which Linux's TCP runs unless told otherwise
    from latnet.commands.emulate import linux_defaults_note

    flows = (
        tcp_bulk("a", "h1", 'cc = "cubic"')
        + tcp_bulk("b", "h2", 'cc = "bbr", rack_tlp = true')
        + tcp_bulk("c", "h1", 'cc = "cubic", hystart = true, rack_tlp = false')
        + cbr("u", "h2", "1Mbps", 500)
    )
    path = scenario(tmp_path, two_hosts("20Mbps", "5ms", '{ kind = "fifo" }', flows))
    note = linux_defaults_note(path, hystart=True)
    assert note is not None and "runs HyStart (a) and RACK-TLP (a)" in note, note
    assert "`hystart = true` and `rack_tlp = true`" in note, note
    note = linux_defaults_note(path, hystart=False)
    assert note is not None and "runs RACK-TLP (a)," in note and "HyStart" not in note, note
    done = tcp_bulk("a", "h1", 'cc = "cubic", hystart = true, rack_tlp = true')
    path = scenario(tmp_path, two_hosts("20Mbps", "5ms", '{ kind = "fifo" }', done), "done")
    assert linux_defaults_note(path, hystart=True) is None
    # or for every flow at once
    body = two_hosts("20Mbps", "5ms", '{ kind = "fifo" }', flows).replace(
        "[defaults.link]", "[defaults.tcp]\nhystart = true\nrack_tlp = true\n[defaults.link]"
    )
    path = scenario(tmp_path, body, "defaults")
    assert latnet.check(path) is not None  # the simulator takes it as well
    assert linux_defaults_note(path, hystart=True) is None
