"""Tests of the Python package: run(), DataFrames, plots, errors, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import latnet
from latnet.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
DEMO = EXPERIMENTS / "demo.toml"
#: The demo's flows' priorities, as its scenario gives them (backup the default, best effort).
DEMO_PRIORITY = {"control": 0, "video": 1, "backup": 7}

SMALL = """
[sim]
duration = "200ms"
seed = {seed}
[defaults.link]
rate = "100Mbps"
delay = "100us"
[[nodes]]
name = "a"
kind = "host"
[[nodes]]
name = "s"
kind = "switch"
[[nodes]]
name = "b"
kind = "host"
[[links]]
a = "a"
b = "s"
[[links]]
a = "s"
b = "b"
[[flows]]
name = "p"
src = "a"
dst = "b"
size = 1000
traffic = {{ kind = "poisson", rate = "50Mbps" }}
"""


@pytest.fixture(scope="module")
def demo():
    return latnet.run(DEMO)


def test_run_returns_dataframes(demo):
    assert list(demo.flows["flow"]) == ["control", "video", "backup"]
    assert {"latency_p99_ns", "throughput_bps", "loss_rate"} <= set(demo.flows.columns)
    pk = demo.packets
    assert len(pk) == demo.flows["sent"].sum()
    assert pk["received"].sum() == demo.flows["received"].sum()
    # the per-packet maximum is the summary's maximum
    ctl = demo.flows.set_index("flow").loc["control"]
    assert pk.loc[pk["flow"] == "control", "latency_ns"].max() == ctl["latency_max_ns"]
    # strict priority: control's tail stays far below the backup's
    backup = demo.flows.set_index("flow").loc["backup"]
    assert ctl["latency_p99_ns"] * 3 < backup["latency_p99_ns"]
    hops = demo.hops
    assert (hops["start_tx_ns"] >= hops["enqueue_ns"]).all()
    # no hop of the demo holds a packet: each is eligible when it joins the queue
    assert (hops["eligible_ns"] == hops["enqueue_ns"]).all()
    # every hop of a packet carries its flow's priority (class min(p, 3) of the 4)
    prio = hops.groupby("flow")["priority"].agg(["min", "max"])
    assert prio.to_dict("index") == {f: {"min": p, "max": p} for f, p in DEMO_PRIORITY.items()}
    # each hop row carries its packet's flow and sequence number, as packets.csv has them
    joined = hops.merge(pk, on="id", suffixes=("", "_pk"))
    assert len(joined) == len(hops) and (joined["seq"] == joined["seq_pk"]).all()
    assert (joined["flow"] == joined["flow_pk"]).all() and hops["seq"].max() > 0
    assert list(demo.hop_latency("control")["node"]) == ["sensor", "sw1", "sw2"]
    assert demo.latency_convention == "physical"


def test_lbf_outcomes_are_dataframes_that_agree_with_the_flow_table(demo):
    """The LBF tables as DataFrames: with ``upper = "drop"`` every packet F1 lost is one the
    switches dropped for its upper bound (``lbf_drops``, summed into ``lbf_flows``); with
    ``upper = "mark"`` every late packet was marked by one switch, and each notification
    projects past the upper bound. A run without LBF has none of them."""
    drop = latnet.run(EXPERIMENTS / "lbf" / "upper-drop.toml", packets=False)
    f1 = drop.flows.set_index("flow").loc["F1"]
    lf = drop.lbf_flows.set_index("flow").loc["F1"]
    assert f1.dropped > 0 and lf.early_drops + lf.expired == f1.dropped
    assert drop.lbf_drops.packets.sum() == f1.dropped
    assert set(drop.lbf_drops.reason) <= {"early", "expired"}
    assert lf.received == f1.received == lf.early + lf.on_time + lf.late_marked + lf.late_unmarked
    mark = latnet.run(EXPERIMENTS / "lbf" / "upper-mark.toml", packets=False)
    lf = mark.lbf_flows.set_index("flow").loc["F1"]
    assert lf.late_marked > 0 and lf.late_unmarked == 0
    assert mark.lbf_switches.marked_late.sum() == lf.late_marked
    assert mark.summary["lbf"]["notifications_total"] == lf.late_marked
    n = mark.lbf_notifications
    assert len(n) == min(lf.late_marked, 10_000) and n.time_ns.is_monotonic_increasing
    assert (n.projected_ns > n.upper_ns).all() and (n.upper_ns == lf.upper_ns).all()
    assert demo.lbf_flows is None and demo.lbf_switches is None
    assert demo.lbf_drops is None and demo.lbf_notifications is None


def test_latency_cdf_writes_a_png(demo, tmp_path):
    out = latnet.plot.latency_cdf(demo, tmp_path / "cdf.png")
    assert Path(out).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_latency_cdf_needs_packets(tmp_path):
    res = latnet.run(text=SMALL.format(seed=1), packets=False)
    assert res.packets is None
    with pytest.raises(ValueError, match="packets=True"):
        latnet.plot.latency_cdf(res, tmp_path / "x.png")


def test_seed_controls_randomness():
    a = latnet.run(text=SMALL.format(seed=1)).json()
    b = latnet.run(text=SMALL.format(seed=1)).json()
    c = latnet.run(text=SMALL.format(seed=1), seed=2).json()
    assert a == b
    assert a != c


def test_scenario_error_names_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.format(seed=1).replace('dst = "b"', 'dst = "nowhere"'))
    with pytest.raises(latnet.ScenarioError) as e:
        latnet.run(bad)
    msg = str(e.value)
    assert str(bad) in msg and ":26:7:" in msg and "flows[0].dst" in msg and "nowhere" in msg
    assert isinstance(e.value, latnet.LatnetError)


def test_progress_is_reported_and_can_stop_the_run():
    seen = []

    def cb(now, end, events):
        seen.append(now)
        return len(seen) < 5

    res = latnet.run(text=SMALL.format(seed=1), progress=cb)
    assert len(seen) >= 5
    assert res.summary["end_ns"] < 200_000_000


@pytest.mark.parametrize("scenario", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_experiment_scenario_runs(scenario):
    assert latnet.check(scenario).startswith(scenario.stem)
    res = latnet.run(scenario, packets=False)
    assert (res.flows["received"] > 0).all()
    for f in res.summary["flows"]:
        assert f["sent"] == f["received"] + f["dropped"] + f["in_flight_at_end"]


def test_cli_run_prints_the_table_and_writes_files(tmp_path, capsys):
    assert main(["run", str(DEMO), "--out", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "control" in out and "p99" in out and "latency physical" in out
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["flows.csv", "hops.csv", "packets.csv", "results.json"]
    # `latnet show DIR` prints the same tables again, from the files
    assert main(["show", str(tmp_path)]) == 0
    assert capsys.readouterr().out == out
    assert main(["show", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err == f"latnet: {tmp_path / 'nowhere'}: no results.json (no such directory)\n"


def test_cli_pcap_writes_captures_tcpdump_reads(tmp_path, capsys):
    """`latnet run --pcap`: one capture per link direction, in the format tcpdump reads, with
    every frame the port sent, nanosecond timestamps and the frames' real headers."""
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL.format(seed=3))
    out = tmp_path / "out"
    assert main(["run", str(scen), "--out", str(out), "--no-packets", "--pcap"]) == 0
    assert "pcap/ (4 link captures)" in capsys.readouterr().out
    res = json.loads((out / "results.json").read_text())
    caps = sorted(p.name for p in (out / "pcap").iterdir())
    assert caps == sorted(f"{p['node']}-{p['peer']}.pcap" for p in res["ports"])
    for port in res["ports"]:
        path = out / "pcap" / f"{port['node']}-{port['peer']}.pcap"
        r = subprocess.run(
            ["tcpdump", "-nn", "-r", str(path), "--time-stamp-precision=nano"],
            capture_output=True,
            text=True,
            check=True,
        )
        lines = r.stdout.splitlines()
        assert len(lines) == port["tx_packets"], path.name
        if lines:
            # "00:00:00.000123456 IP 10.0.0.1.10000 > 10.0.0.3.20000: UDP, length 958"
            stamp, rest = lines[0].split(" ", 1)
            assert len(stamp.split(".")[1]) == 9, stamp
            assert rest.startswith("IP ") and rest.endswith("UDP, length 958"), rest


def test_a_flow_no_link_path_joins_is_a_warning_not_a_silent_loss(tmp_path, capsys):
    """A scenario where b is cut off: valid (its packets count as no-route drops), but check
    and run say so, naming the file, line and key; the command line prints it once."""
    cut = '[[links]]\na = "s"\nb = "a"'
    text = SMALL.format(seed=5).replace('[[links]]\na = "s"\nb = "b"', cut)
    with pytest.warns(latnet.ScenarioWarning, match=r"cut.toml:\d+:7: `flows\[0\].dst`: no path"):
        latnet.check(text=text, name="cut.toml")
    with pytest.warns(latnet.ScenarioWarning, match='no path from "a" to "b"'):
        res = latnet.run(text=text, name="cut.toml", packets=False)
    assert len(res.warnings) == 1 and res.flows["received"].sum() == 0
    assert res.summary["flows"][0]["drops"] == {"no-route": res.summary["flows"][0]["sent"]}
    assert latnet.run(text=SMALL.format(seed=5), packets=False).warnings == []
    scen = tmp_path / "cut.toml"
    scen.write_text(text)
    for argv in (["check", str(scen)], ["run", str(scen), "--out", str(tmp_path / "o")]):
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert err.count("latnet: warning: ") == 1 and f"{scen}:" in err, err
    assert main(["run", str(scen), "--out", str(tmp_path / "o"), "--set", "sim.seed=6"]) == 0
    err = capsys.readouterr().err
    assert err.count("latnet: warning: ") == 1 and f"{scen} (sim.seed=6):" in err, err


def test_output_keywords_are_read_as_the_files_own_under_dilation(tmp_path, capsys):
    """``queues=`` / ``--queues`` and ``pcap=`` / ``--pcap`` act as ``[output]`` keys would in a
    dilated scenario: the interval in the scenario's time, a capture refused (its stamps would
    be in dilated time), naming the key."""
    text = SMALL.format(seed=5).replace("[sim]\n", "[sim]\ndilation = 4\n")
    q = latnet.run(text=text, packets=False, queues="10ms").queues
    same = latnet.run(text=text + '\n[output]\nqueues = "10ms"\n', packets=False).queues
    assert same.equals(q)
    assert sorted(q["t_ns"].unique())[:3] == [10_000_000, 20_000_000, 30_000_000]
    with pytest.raises(latnet.ScenarioError, match="pcap: a packet capture cannot be dilated"):
        latnet.run(text=text, pcap=True)
    scen = tmp_path / "dilated.toml"
    scen.write_text(text)
    assert main(["run", str(scen), "--out", str(tmp_path / "o"), "--pcap"]) == 2
    assert "a packet capture cannot be dilated (sim.dilation = 4)" in capsys.readouterr().err


def test_read_pcap_gives_each_frames_flow_and_lbf_block(tmp_path):
    """latnet.read_pcap: one row per captured frame with its flow fields and LBF block; in the
    seed's test 2 every F1 packet leaves FWD4 with exactly its 700 us lower bound met and F2's
    frames carry no block; a damaged file is a ValueError naming it."""
    root = Path(__file__).parents[2]
    text = (root / "experiments" / "lbf" / "test2.toml").read_text()
    text = text.replace('duration = "10s"', 'duration = "200ms"')
    assert 'duration = "200ms"' in text
    res = latnet.run(text=text, packets=False, pcap=True)
    res.write(tmp_path)
    last = latnet.read_pcap(tmp_path / "pcap" / "FWD4-R1.pcap")
    f1 = res.flows.set_index("flow").loc["F1"]
    assert len(last) == f1["received"] > 500
    assert (last["lbf_value_ns"] == 700_000).all() and (last["lbf_lower_ns"] == 700_000).all()
    assert (last["lbf_carrier"] == "udp-shim").all() and (
        last["lbf_mode"] == "latency-so-far"
    ).all()
    assert last["lbf_upper_ns"].isna().all() and (last["error"] == "").all()
    assert last["t_ns"].is_monotonic_increasing and (last["wire_len"] == 300).all()
    first = latnet.read_pcap(tmp_path / "pcap" / "FWD1-FWD2.pcap")
    f2 = first[first["sport"] != last["sport"].iloc[0]]
    assert len(f2) > 0 and f2["lbf_carrier"].isna().all() and f2["lbf_value_ns"].isna().all()
    damaged = tmp_path / "damaged.pcap"
    damaged.write_bytes((tmp_path / "pcap" / "FWD4-R1.pcap").read_bytes()[:-1])
    with pytest.raises(ValueError, match="damaged.pcap: record at byte"):
        latnet.read_pcap(damaged)


def test_queue_series_is_a_dataframe_and_a_csv(tmp_path, capsys):
    """[output] queues: one row per egress port and interval, in Results.queues and queues.csv;
    the Poisson flow at 50 Mbit/s queues at the host and the switch now and then."""
    text = SMALL.format(seed=5) + '\n[output]\nqueues = "10ms"\n'
    res = latnet.run(text=text, packets=False)
    q = res.queues
    assert list(q.columns) == [
        "t_ns",
        "node",
        "peer",
        "link",
        "packets",
        "bytes",
        "max_packets",
        "max_bytes",
    ]
    # every 10 ms through the sending (200 ms) and the drain, four egress ports each time
    times = sorted(q["t_ns"].unique())
    assert times == [10_000_000 * k for k in range(1, len(times) + 1)] and len(times) >= 20
    assert len(q) == 4 * len(times)
    assert (q["max_packets"] >= q["packets"]).all() and (q["bytes"] == 1000 * q["packets"]).all()
    assert q[(q["node"] == "a") & (q["peer"] == "s")]["max_packets"].max() > 0
    assert q[q["node"] == "b"]["max_packets"].max() == 0  # b sends nothing
    written = [Path(p).name for p in res.write(tmp_path)]
    assert "queues.csv" in written
    assert (tmp_path / "queues.csv").read_text().count("\n") == 1 + len(q)
    assert latnet.run(text=SMALL.format(seed=5), packets=False).queues is None
    # the same series from the keyword and from the command line
    same = latnet.run(text=SMALL.format(seed=5), packets=False, queues="10ms").queues
    assert same.equals(q)
    # an interval longer than the run: a series with no row, not None
    none = latnet.run(text=SMALL.format(seed=5), packets=False, queues="100s").queues
    assert none is not None and none.empty and list(none.columns) == list(q.columns)
    for bad in ("often", "0ms"):
        with pytest.raises(ValueError, match="queues: expected an interval"):
            latnet.run(text=SMALL.format(seed=5), queues=bad)
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL.format(seed=5))
    out = tmp_path / "cli"
    assert main(["run", str(scen), "--out", str(out), "--no-packets", "--queues", "10ms"]) == 0
    assert (out / "queues.csv").read_text() == (tmp_path / "queues.csv").read_text()
    capsys.readouterr()
    for bad, why in (("often", "expected an interval such as 1ms"), ("0ms", "above zero")):
        with pytest.raises(SystemExit) as e:
            main(["run", str(scen), "--out", str(out), "--queues", bad])
        assert e.value.code == 2 and why in capsys.readouterr().err, bad


def test_cli_refuses_a_plot_without_packets_and_both_packet_flags(tmp_path, capsys):
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL.format(seed=1))
    out = tmp_path / "o"
    assert main(["run", str(scen), "--out", str(out), "--plot", "--no-packets"]) == 2
    assert "--plot draws per-packet records, which --no-packets" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["run", str(scen), "--out", str(out), "--packets", "--no-packets"])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err
    assert not out.exists()


def test_cli_run_leaves_no_plot_of_an_earlier_run(tmp_path, capsys):
    """A run into a directory where an earlier run drew latency_cdf.png removes it unless it
    draws its own (it would show another run's latencies beside this run's files)."""
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL.format(seed=1))
    out = tmp_path / "o"
    assert main(["run", str(scen), "--out", str(out), "--plot", "--quiet"]) == 0
    assert (out / "latency_cdf.png").stat().st_size > 0
    assert main(["run", str(scen), "--out", str(out), "--quiet"]) == 0
    assert not (out / "latency_cdf.png").exists()
    # nor the earlier run's per-packet records (this run recorded none)
    assert (out / "flows.csv").is_file() and not (out / "packets.csv").exists()
    capsys.readouterr()


def test_run_takes_progress_true_for_a_bar_and_refuses_other_values(tmp_path, capsys):
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL.format(seed=1))
    quiet = latnet.run(scen, packets=False)
    assert capsys.readouterr().err == ""
    barred = latnet.run(scen, packets=False, progress=True)
    assert "100%" in capsys.readouterr().err
    assert barred.flows.equals(quiet.flows)
    assert latnet.run(scen, packets=False, progress=False).flows.equals(quiet.flows)
    with pytest.raises(TypeError, match="progress: expected True, False, None or a callable"):
        latnet.run(scen, progress=1)


def test_cli_bad_scenario_exits_2_with_the_location(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.format(seed=1).replace('rate = "50Mbps"', 'rate = "fast"'))
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "invalid rate" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pace", "htb:eth0"], "needs --register yes"),
        (
            ["--register", "yes", "--pace", "fq:eth0"],
            "expected socket, htb:DEV (an interface name) or none",
        ),
        (["--register", "maybe"], "expected yes or no"),
        (["--dst", "::1:9"], "expected ADDR:PORT (IPv4, or [IPv6]:PORT)"),
    ],
)
def test_tcp_send_refuses_bad_options_by_name(extra, message):
    """latnet-switch tcp-send: a bad option is a usage error (exit 2) naming it; nothing is
    sent and no interface is touched."""
    import subprocess

    from latnet.testbed import switch_binary

    argv = [switch_binary(), "tcp-send", "--dst", "127.0.0.1:9", "--seconds", "1", *extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert message in p.stderr and extra[-2] in p.stderr, p.stderr


def test_switch_run_refuses_a_bad_time_zero():
    """latnet-switch run --t0 takes CLOCK_MONOTONIC nanoseconds; anything else is a usage error
    naming the option, before any interface is opened."""
    import subprocess

    from latnet.testbed import switch_binary

    demo = Path(__file__).parents[2] / "experiments" / "demo.toml"
    argv = [switch_binary(), "run", "--scenario", str(demo), "--node", "sw1", "--t0", "soon"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert "--t0: expected an integer" in p.stderr, p.stderr


def test_recv_refuses_a_bad_ready_channel(tmp_path):
    """latnet-switch recv --ready names where it says it is listening (only stdout); anything
    else is a usage error naming the option, before a socket is bound or a file written."""
    import subprocess

    from latnet.testbed import switch_binary

    demo = Path(__file__).parents[2] / "experiments" / "demo.toml"
    out = tmp_path / "recv"
    argv = [switch_binary(), "recv", "--scenario", str(demo), "--host", "h1", "--until", "1"]
    argv += ["--dir", str(out), "--ready", "stderr"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert '--ready: expected stdout, got "stderr"' in p.stderr, p.stderr
    assert not out.exists()


def test_testbed_switch_processes_and_busy_polling_follow_the_cpus(tmp_path, monkeypatch):
    """Switches that outnumber the CPUs run in one process (test 2 of the LBF seed has four
    switches), else a process each; switch processes busy-poll 20 us while each can have a
    CPU, 2 us when they outnumber them; explicit choices win. The switch refuses a bad
    --spin-us or --queues value as a usage error before it touches any interface."""
    from latnet.testbed import Testbed

    root = Path(__file__).parents[2]
    lbf, demo = root / "experiments" / "lbf" / "test2.toml", root / "experiments" / "demo.toml"
    for cpus, processes in ((2, "one"), (4, "per-node"), (8, "per-node")):
        monkeypatch.setattr(os, "cpu_count", lambda cpus=cpus: cpus)
        tb = Testbed(lbf, run_dir=tmp_path)
        assert (tb.switch_processes, tb.spin_us) == (processes, 20), cpus
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    tb = Testbed(demo, run_dir=tmp_path)  # two switches, two CPUs
    assert (tb.switch_processes, tb.spin_us) == ("per-node", 20)
    tb = Testbed(lbf, run_dir=tmp_path, switch_processes="per-node")
    assert tb.spin_us == 2  # four busy-polling processes on two CPUs
    assert Testbed(lbf, run_dir=tmp_path, spin_us=7).spin_us == 7
    with pytest.raises(latnet.LatnetError, match="switch_processes: expected"):
        Testbed(lbf, run_dir=tmp_path, switch_processes="two")
    switch = Testbed(demo, run_dir=tmp_path).binary
    bad = subprocess.run(
        [switch, "run", "--scenario", str(demo), "--node", "sw1", "--spin-us", "-1"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--spin-us: expected whole microseconds" in bad.stderr
    for arg, why in (("0ms", "above zero"), ("soon", "--queues:")):
        bad = subprocess.run(
            [switch, "run", "--scenario", str(demo), "--node", "sw1", "--queues", arg],
            capture_output=True,
            text=True,
        )
        assert bad.returncode == 2 and why in bad.stderr, (arg, bad.stderr)
    # several switches in one process: a namespace (and a statistics file) per node
    for extra, why in (
        ([], "several switches in one process need --netns"),
        (["--netns", "a"], "--netns: expected 2 comma-separated values, one per --node, got 1"),
        (["--netns", "a,b", "--stats", "x"], "--stats: expected 2 comma-separated values"),
    ):
        argv = [switch, "run", "--scenario", str(demo), "--node", "sw1,sw2", *extra]
        bad = subprocess.run(argv, capture_output=True, text=True)
        assert bad.returncode == 2 and why in bad.stderr, (extra, bad.stderr)
    argv = [switch, "run", "--scenario", str(demo), "--node", "sw1,sw2", "--netns", "a,b"]
    bad = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 1 and "sw1: network namespace /run/netns/a: open" in bad.stderr


def test_testbed_ipv6_addresses_only_when_asked(tmp_path):
    """A testbed gives hosts IPv6 when asked; asking one without it for an IPv6 address says
    how to get it (no namespace is created: the plan alone)."""
    from latnet import LatnetError
    from latnet.testbed import Testbed

    demo = Path(__file__).parents[2] / "experiments" / "demo.toml"
    with pytest.raises(LatnetError, match=r"no IPv6 \(pass ipv6=True\)"):
        Testbed(demo, run_dir=tmp_path).address6("sensor")
    tb = Testbed(demo, run_dir=tmp_path, ipv6=True)
    assert tb.address6("sensor") == "2001:db8::a00:1" and tb.address("sensor") == "10.0.0.1"


def test_cli_help_documents_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for word in ("run", "check", "reproduce", "docs/scenario.md"):
        assert word in out


TCP_SCENARIO = """
[sim]
duration = "1s"
drain = "100ms"
[output]
timeseries = "50ms"
[defaults.link]
rate = "1Gbps"
delay = "100us"
[[nodes]]
name = "a"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "s2"
kind = "switch"
[[nodes]]
name = "b"
kind = "host"
[[links]]
a = "a"
b = "s1"
[[links]]
a = "s1"
b = "s2"
rate = "50Mbps"
delay = "5ms"
queue = { kind = "step-ce", threshold_packets = 10, limit_packets = 100 }
[[links]]
a = "s2"
b = "b"
[[flows]]
name = "dctcp"
src = "a"
dst = "b"
size = 1502
traffic = { kind = "tcp-bulk", cc = "dctcp" }
[[flows]]
name = "rr"
src = "a"
dst = "b"
size = 1502
traffic = { kind = "tcp-rr", request = 100, response = 10000, interval = "100ms" }
"""


def test_tcp_flows_have_a_summary_and_a_time_series(tmp_path):
    res = latnet.run(text=TCP_SCENARIO, packets=False)
    tcp = res.tcp.set_index("flow")
    assert tcp.loc["dctcp", "cc"] == "dctcp" and bool(tcp.loc["dctcp", "ecn"])
    assert tcp.loc["dctcp", "ce_marks"] > 0
    # the step queue holds the bottleneck busy: goodput close to 50 Mbit/s of frames
    assert tcp.loc["dctcp", "goodput_bps"] > 0.8 * 50e6 * 1448 / 1502
    assert tcp.loc["rr", "completed"] == tcp.loc["rr", "connections"] == 10
    assert tcp.loc["rr", "fct_min_ns"] > 2 * 10.4e6  # two RTTs at least
    ts = res.timeseries
    assert set(ts["flow"]) == {"dctcp", "rr"}
    assert {"goodput_bps", "cwnd", "rtt_mean_ns", "ce_marks", "retransmits"} <= set(ts.columns)
    # every interval ends on the 50 ms grid; the series adds up to the delivered bytes
    assert (ts["t_s"] * 1000).round(6).mod(50).eq(0).all()
    dctcp = ts[ts["flow"] == "dctcp"]
    assert dctcp["delivered_bytes"].sum() == tcp.loc["dctcp", "delivered_bytes"]
    written = [Path(p).name for p in res.write(tmp_path)]
    assert "timeseries.csv" in written
    assert latnet.run(DEMO, packets=False).timeseries is None
    # "0s" turns the series off (the summary stays)
    off = latnet.run(text=TCP_SCENARIO.replace('"50ms"', '"0s"'), packets=False)
    assert off.timeseries is None and off.tcp.set_index("flow").equals(tcp)
    assert "timeseries.csv" not in [Path(p).name for p in off.write(tmp_path / "off")]
    # per-packet records name the server side of a TCP flow (its ACKs, its responses)
    full = latnet.run(text=TCP_SCENARIO, packets=True)
    assert {"dctcp", "dctcp:server", "rr", "rr:server"} <= set(full.hops["flow"])
    assert {"dctcp", "dctcp:server"} <= set(full.packets["flow"])


def test_cli_prints_the_tcp_table(tmp_path, capsys):
    scen = tmp_path / "tcp.toml"
    scen.write_text(TCP_SCENARIO)
    assert main(["run", str(scen), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "TCP (goodput" in out and "dctcp" in out
    assert (tmp_path / "out" / "timeseries.csv").exists()


def test_a_stalled_run_is_run_again_and_the_least_stalled_kept(tmp_path, capsys):
    from latnet.emu import least_stalled, print_stalls

    ms = 1_000_000
    lates = iter([9 * ms, 7 * ms, 8 * ms, ms])

    def run(d):
        d.mkdir()
        late = next(lates)
        (d / "late").write_text(str(late))
        return late

    # three attempts, all stalled: the least stalled (the second) kept in NAME
    kept, late = least_stalled(run, lambda r: r, tmp_path, "t", 5 * ms, 3)
    assert (kept, late) == (7 * ms, [9 * ms, 7 * ms, 8 * ms])
    assert (tmp_path / "t" / "late").read_text() == str(7 * ms)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t", "t.stalled-1", "t.stalled-3"]
    assert capsys.readouterr().err.count("the machine stalled the run") == 2
    print_stalls("t", late, 5 * ms)
    said = "more than 5.00 ms: 3 attempts, late at worst 9.00 ms, 7.00 ms, 8.00 ms; still stalled"
    assert said in capsys.readouterr().out
    # a quiet run is kept at once, over what an earlier reproduction left
    kept, late = least_stalled(run, lambda r: r, tmp_path, "t", 5 * ms, 3)
    assert (kept, late) == (ms, [ms]) and (tmp_path / "t" / "late").read_text() == str(ms)
    assert [p.name for p in tmp_path.iterdir()] == ["t"]
    print_stalls("t", late, 5 * ms)
    assert capsys.readouterr() == ("", "")


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_cpus_are_kept_awake_by_idle_priority_loops_while_the_block_runs(
    capsys, monkeypatch, tmp_path
):
    import latnet.emu
    from latnet.cli import emulates, main, parser
    from latnet.emu import cpus_kept_awake, stall_report

    with cpus_kept_awake() as pids:
        assert len(pids) == len(os.sched_getaffinity(0))
        assert all(os.sched_getscheduler(p) == os.SCHED_IDLE for p in pids)
        assert all(_running(p) for p in pids)
        assert stall_report({"t": [1]}, 5)["cpus_kept_awake"] == len(pids)
    assert not any(_running(p) for p in pids)
    assert stall_report({"t": [1]}, 5)["cpus_kept_awake"] == 0
    for argv in (
        ["run", "x.toml", "--mode", "emu"],
        ["reproduce", "lbf", "--emulated"],
        ["chameleon", "verify", "--emulated"],
        ["chameleon", "live", "spec.toml", "--controller", "http://127.0.0.1:1"],
    ):
        args = parser().parse_args([*argv, "--keep-cpus-awake"])
        assert args.keep_cpus_awake and emulates(args), argv
    assert capsys.readouterr().err == ""
    # only simulated: the flag starts no loops and says so
    for argv in (
        ["run", "x.toml"],
        ["run", "x.toml", "--mode", "sim"],
        ["reproduce", "lbf"],
        ["chameleon", "verify"],
    ):
        assert not emulates(parser().parse_args([*argv, "--keep-cpus-awake"])), argv

    def no_loops(*_a, **_k):
        raise AssertionError("loops started for a command that only simulates")

    monkeypatch.setattr(latnet.emu, "cpus_kept_awake", no_loops)
    missing = str(tmp_path / "missing.toml")
    for argv in (["run", missing], ["run", missing, "--mode", "sim"]):
        assert main([*argv, "--keep-cpus-awake"]) == 2, argv  # (the scenario is missing)
        err = capsys.readouterr().err
        assert "--keep-cpus-awake: nothing here is emulated" in err and "missing.toml" in err


def test_the_loops_that_keep_cpus_awake_end_with_the_process_that_started_them():
    """Killed without its ``with`` block's end (``os._exit``), a process leaves no loop."""
    import sys
    import time

    code = (
        "import os\nfrom latnet.emu import cpus_kept_awake\n"
        "with cpus_kept_awake() as pids:\n    print(*pids, flush=True)\n    os._exit(0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    pids = [int(p) for p in r.stdout.split()]
    assert r.returncode == 0 and pids, r.stderr
    until = time.monotonic() + 20
    while any(_running(p) for p in pids) and time.monotonic() < until:
        time.sleep(0.05)
    assert not any(_running(p) for p in pids)


def test_the_least_stalled_saved_results_are_read_from_where_they_were_kept(tmp_path):
    """Results that read their files when asked (``latnet.load``, an emulated run's) are opened
    again in ``base/NAME``: the attempt's own directory was renamed (its packets table read
    None before)."""
    from latnet.emu import least_stalled

    ms = 1_000_000
    attempts = iter([(9 * ms, 1), (7 * ms, 2), (8 * ms, 3)])

    def run(d):
        late, seed = next(attempts)
        latnet.run(text=SMALL.format(seed=seed)).write(d)
        (d / "late").write_text(str(late))
        return latnet.load(d)

    kept, late = least_stalled(
        run, lambda r: int((r.out / "late").read_text()), tmp_path, "t", ms, 3
    )
    assert late == [9 * ms, 7 * ms, 8 * ms] and kept.out == tmp_path / "t"
    assert kept.summary["seed"] == 2 and kept.packets is not None
    expected = latnet.run(text=SMALL.format(seed=2)).packets
    pd.testing.assert_frame_equal(kept.packets, expected)


def test_the_emulation_timing_line_says_what_the_clock_conversion_got_wrong():
    """Kernel stamps the clock conversion put after their read (switches' and receivers')
    are said, with the worst, only when there are any."""
    from latnet.table import emulation_timing

    sw = {"node": "s", "forwarded": 10, "tx_late_100us": 0, "tx_late_max_ns": 5_000}
    sw |= {"ring_drops": 0, "tx_refused": 0, "rx_stamp_ahead": 0, "rx_stamp_ahead_max_ns": 0}
    rcv = {"flow": "f", "received": 10, "stamped": 10, "read_late_100us": 0}
    rcv |= {"read_late_max_ns": 900, "stamp_ahead": 0, "stamp_ahead_max_ns": 0}
    e = {"late_max_ns": 5_000, "switches": [sw], "senders": [], "receivers": [rcv]}
    assert "converted to after" not in emulation_timing({"emulation": e})
    sw |= {"rx_stamp_ahead": 2, "rx_stamp_ahead_max_ns": 3_000}
    rcv |= {"stamp_ahead": 1, "stamp_ahead_max_ns": 7_000}
    line = emulation_timing({"emulation": e, "dilation": 10})
    want = "3 kernel stamps converted to after their read, up to 7.0 us (70.0 us of the machine's"
    assert want in line
    # a results document from before the counters: nothing said, nothing failed
    for d in (sw, rcv):
        for k in [k for k in d if "ahead" in k]:
            del d[k]
    assert "converted to after" not in emulation_timing({"emulation": e})
    assert emulation_timing({}) is None
