"""`latnet chameleon live`: a running controller service programs the hosts of an emulated
network through the host agent (BPF taggers and HTB shapers in the hosts' kernels) while
traffic runs. Needs root (CI runs it as root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest

from latnet.cli import main

#: Runs on the machine's clock: `make py-test` runs these tests alone (scripts/py-test.sh).
pytestmark = pytest.mark.realtime

if os.geteuid() != 0:
    pytest.skip("emulation needs root (CI runs it as root)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
FIG6 = ROOT / "experiments" / "chameleon" / "fig6.toml"

# Fig. 6 of the paper, live, ten times slower than real time: a is admitted over m1; b (which
# can only use s1 - m1) is requested 100 ms in and the controller moves a to m2; a is removed
# at 200 ms and goes back to h2's best-effort route (over m1 again). c reserves 100 Mbit/s but
# sends twice that: only its shaper at h6 holds it to what it reserved. bg asks for nothing.
SPEC = """
[sim]
duration = "250ms"
drain = "20ms"
dilation = 10

[[flows]]
name = "a"
src = "h2"
dst = "h3"
size = 1400
src_port = 10001
dst_port = 20001
traffic = { kind = "token-bucket", rate = "400Mbps", burst = "1400B" }

[[flows]]
name = "b"
src = "h1"
dst = "h6"
size = 1400
src_port = 10002
dst_port = 20002
start = "105ms"
traffic = { kind = "token-bucket", rate = "700Mbps", burst = "1400B" }

[[flows]]
name = "c"
src = "h6"
dst = "h3"
size = 1400
src_port = 10003
dst_port = 20003
traffic = { kind = "token-bucket", rate = "200Mbps", burst = "1400B" }

[[flows]]
name = "bg"
src = "h3"
dst = "h1"
size = 1000
src_port = 10004
dst_port = 20004
traffic = { kind = "cbr", rate = "50Mbps" }

[[requests]]
flow = "a"
deadline = "50ms"
remove_at = "200ms"

[[requests]]
flow = "c"
deadline = "20ms"
rate = "100Mbps"
burst = "2832B"

[[requests]]
flow = "b"
at = "100ms"
deadline = "800us"
"""


@contextmanager
def service(db, listen="127.0.0.1:0", tokens=None, tls=None):
    argv = [sys.executable, "-m", "latnet.cli", "chameleon", "serve", "--db", str(db)]
    argv += ["--listen", listen, "--topology", str(FIG6), "--queues", "2"]
    if tokens is not None:
        argv += ["--tokens", str(tokens)]
    if tls is not None:
        ca, cert, key = tls
        # mutual TLS: clients present the certificate the same CA signed
        argv += ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-ca", str(ca)]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("listening on "), (line, p.stderr.read())
        yield line.split()[2]
    finally:
        p.terminate()
        p.wait(timeout=10)


def tokens(tmp_path):
    """A service's token file, and a client's file with its write token and with its read one."""
    w, r = "write-0123456789abcdef", "read-0123456789abcdef"
    (tmp_path / "tokens").write_text(f"write {w}\nread {r}\n")
    (tmp_path / "w").write_text(w)
    (tmp_path / "r").write_text(r)
    return tmp_path / "tokens", tmp_path / "w", tmp_path / "r"


#: Most runs `live` makes while the machine stalls them (``stalled`` in live.json: behind by more
#: than half the tightest deadline, 400 us of the scenario, 4 ms of the machine's clock).
ATTEMPTS = 3


def live(tmp_path, name, *extra, tokens=None):
    """One live run on a fresh service, run again (each on a fresh service: a run's requests
    change the service's state) while the machine stalled it, up to ``ATTEMPTS`` runs; the
    least stalled is judged, whole (still stalled, it is judged all the same, its deadlines
    allowing for its measured lateness, :func:`assert_in_time`; the lateness is printed)."""
    spec = tmp_path / "live.toml"
    spec.write_text(SPEC)
    runs = []
    for k in range(ATTEMPTS):
        out = tmp_path / (name if k == 0 else f"{name}.{k}")
        with service(tmp_path / f"{out.name}.db", tokens=tokens) as url:
            argv = ["chameleon", "live", "--controller", url, str(spec), "--out", str(out)]
            code = main([*argv, *extra])
        doc = json.loads((out / "live.json").read_text())
        runs.append((doc["emulation"]["late_max_ns"], k, code, doc))
        if not doc["stalled"]:
            break
    if len(runs) > 1:  # in pytest's warnings summary (the tests read what the command prints)
        late = ", ".join(f"{r[0] / 1e3:.0f} us" for r in runs)
        what = f"{name}: the machine stalled the live run: {len(runs)} runs, {late} behind"
        warnings.warn(what, stacklevel=2)
    _, _, code, doc = min(runs)
    return code, doc, {f["name"]: f for f in doc["flows"]}


def assert_in_time(doc: dict, f: dict) -> None:
    """Every packet of admitted flow ``f`` arrived within its deadline. In a run the machine
    stalled (``doc["stalled"]``, after ``ATTEMPTS`` runs), within its deadline plus what the
    run's measured lateness can add on the flow's longest path: the worst lateness
    (``late_max_ns``) at its sender and at each node that sent it on."""
    if not doc["stalled"]:
        assert f["over_deadline"] == 0, f
        assert f["latency_ns"]["max"] <= f["deadline_ns"], f
        return
    elements = 1 + max(len(p["path"].split("-")) for p in f["paths"])
    allowed = f["deadline_ns"] + elements * doc["emulation"]["late_max_ns"]
    assert f["latency_ns"]["max"] <= allowed, (f, allowed)


def test_the_service_programs_the_hosts_while_traffic_runs(tmp_path, capsys):
    svc_tokens, write, _ = tokens(tmp_path)  # a service that needs a token, the agent's too
    code, doc, flows = live(tmp_path, "htb", "--token-file", str(write), tokens=svc_tokens)
    text = capsys.readouterr().out
    print(text)
    req = {r["flow"]: r for r in doc["requests"]}
    assert [r["answer"]["admitted"] for r in doc["requests"]] == [True, True, True]
    assert req["b"]["rerouted"] == ["a"], req["b"]
    assert req["a"]["removal"]["found"] is True
    # the agent applied each of the controller's decisions (replayed from the service's log):
    # a added, moved, removed; c and b added
    assert doc["not_applied"] == []
    seen = [(c["flow"], c["what"]) for c in doc["changes"]]
    assert seen == [("a", "add"), ("c", "add"), ("a", "move"), ("b", "add"), ("a", "remove")]
    # in the order the controller checked: b only once a's old path (guarantee 0.8 ms) drained
    add_a, _, move_a, add_b, _ = doc["changes"]
    assert add_b["t_start_ns"] - move_a["t_ns"] >= add_a["guarantee_ns"], (move_a, add_b)
    assert doc["agent"]["order"] == "sequential"
    for c in doc["changes"][2:]:
        # each change follows its request (in real time: the agent polls every 10 ms; it may
        # apply a change before this process has read the service's answer, so not after that)
        assert 0 < c["after_request_us"] < 200_000, c
    # a: over m1, over m2 after the move, back over m1 (best effort) after its removal; every
    # packet on the path of the instant it was created, none lost while admitted
    a = flows["a"]
    assert [p["path"] for p in a["paths"]] == ["h2-s1-m1-s2", "h2-s1-m2-s2", "h2-s1-m1-s2"]
    assert all(p["packets"] > 500 for p in a["paths"]), a["paths"]
    assert a["best_effort_path"] == "h2-s1-m1-s2"
    # b: admitted before its first packet, on its one path, within 800 us
    b = flows["b"]
    whole = {"path": "h1-s1-m1", "from_seq": 0, "to_seq": b["sent"] - 1, "packets": b["sent"]}
    # in the classes its tags picked at s1 and m1 (base 10: a tag's last digit)
    whole["queues"] = "-".join(str(t % 10) for t in req["b"]["tags"])
    assert b["paths"] == [whole]
    for f in (a, b):
        assert f["misrouted"] == 0 and f["lost_while_admitted"] == 0, f
        assert_in_time(doc, f)
    assert b["received"] == b["sent"], b
    # once removed, a is best effort, below b's 700 Mbit/s on s1 - m1: what it loses, it
    # loses there (a full best-effort queue), none of it while admitted
    assert a["dropped_at"] == {"s1": a["sent"] - a["received"]}, a
    # bg asked for nothing: its source's best-effort route, below the admitted classes
    bg = flows["bg"]
    assert not bg["admitted"] and bg["misrouted"] == 0
    assert [p["path"] for p in bg["paths"]] == [bg["best_effort_path"]]
    assert [p["queues"] for p in bg["paths"]] == [bg["best_effort_queues"]]
    # a's last segment is best effort: below the admitted classes at every switch
    assert a["paths"][-1]["queues"] == a["best_effort_queues"], a["paths"]
    assert a["paths"][0]["queues"] != a["best_effort_queues"], a["paths"]
    # c: sent twice what it reserved; its shaper passed what it reserved (counting the tags),
    # so it arrives at about 100 Mbit/s, and its own packets wait at h6 (its problem alone)
    c = flows["c"]
    assert c["misrouted"] == 0 and c["shaper"]["class"] is not None
    assert c["shaper"]["tagged"]["packets"] == c["sent"]
    assert c["shaper"]["stats"]["overlimits"] > 0
    tagged = (1400 + 16) / 1400  # four tags: three in the frame, one beside it (HTB overhead)
    assert 0.92 * 100e6 < c["throughput_bps"] * tagged < 1.03 * 100e6, c["throughput_bps"]
    assert c["over_deadline"] > 0
    assert code == 1  # c broke its promise; the command says so
    assert "every packet against the controller's decision" in text


def test_agents_on_separate_hosts_keep_the_order_through_the_service(tmp_path, capsys):
    """Two agents share the hosts (h1, h3 and h2, h6): a's move is h2's agent's, b's
    admission h1's. b is tagged only once a's old path drained, because h1's agent waited at
    the service for h2's agent to report the move. Without that wait (--peer-wait-ms 0) each
    agent applies its step as soon as it reads the entry, and b comes before a's drain."""
    svc_tokens, write, _ = tokens(tmp_path)
    extra = ["--token-file", str(write), "--agents", "2"]
    code, doc, flows = live(tmp_path, "two", *extra, tokens=svc_tokens)
    capsys.readouterr()
    assert doc["agent"]["agents"] == 2 and doc["not_applied"] == [], doc["not_applied"]
    seen = [(c["flow"], c["what"]) for c in doc["changes"]]
    assert seen == [("a", "add"), ("c", "add"), ("a", "move"), ("b", "add"), ("a", "remove")]
    add_a, _, move_a, add_b, _ = doc["changes"]
    assert add_b["t_start_ns"] - move_a["t_ns"] >= add_a["guarantee_ns"], (move_a, add_b)
    first, second = doc["agent"]["peers"]  # h1's agent, h2's agent
    # h1's agent asked about a's move before it tagged b (the service held the question until
    # h2's agent reported it, after a's drain), and went on once it was applied
    assert first["asked"].get("applied", 0) >= 1 and first["waited_ns"] > 0, first
    assert first["timeouts"] == 0 and first["off"] is None, first
    assert second["reports"] >= 1 and second["report_errors"] == 0, second
    for f in (flows["a"], flows["b"]):
        assert f["misrouted"] == 0 and f["lost_while_admitted"] == 0, f
        assert_in_time(doc, f)
    assert code == 1  # c still breaks its promise
    # negative control: no waiting for the other agent (h1's agent asked nothing)
    _, doc, _ = live(tmp_path, "nowait", *extra, "--peer-wait-ms", "0", tokens=svc_tokens)
    capsys.readouterr()
    first = doc["agent"]["peers"][0]
    assert first["off"] == "--peer-wait-ms 0", first
    assert first["asked"] == {} and first["waited_ns"] == 0, first
    # so b is tagged before a's old path drained; in a run the machine stalled (after
    # ATTEMPTS runs) b's tagging may come later by the run's measured lateness (seen in CI:
    # a gap of 887 us, 87 us over the guarantee, in the least stalled of three runs, 427 us late)
    changes = {(c["flow"], c["what"]): c for c in doc["changes"]}
    gap = changes[("b", "add")]["t_start_ns"] - changes[("a", "move")]["t_ns"]
    allowed = changes[("a", "add")]["guarantee_ns"]
    if doc["stalled"]:
        allowed += doc["emulation"]["late_max_ns"]
    assert gap < allowed, (gap, allowed)


def test_without_a_shaper_the_same_misbehaving_flow_takes_what_it_sends(tmp_path, capsys):
    """Negative control: the agent tags but does not shape; c then arrives at the rate it sends
    (200 Mbit/s), twice what the controller reserved for it."""
    _, doc, flows = live(tmp_path, "none", "--shaper", "none", "--order", "together")
    capsys.readouterr()
    c = flows["c"]
    assert c["shaper"]["class"] is None and c["shaper"]["stats"] is None
    assert c["throughput_bps"] > 1.8 * 100e6, c["throughput_bps"]
    assert c["misrouted"] == 0 and flows["a"]["misrouted"] == 0
    assert doc["agent"]["shaper"] == "none" and doc["agent"]["order"] == "together"
    seen = [(c["flow"], c["what"]) for c in doc["changes"]]
    assert seen == [("a", "add"), ("c", "add"), ("a", "move"), ("b", "add"), ("a", "remove")]


def test_testbed_up_with_a_controller_carries_real_applications(tmp_path, capsys, tls_certs):
    """`latnet testbed up --controller URL`: the service's network with a host agent; ping
    crosses it on best-effort routes, an admitted irtt flow and an admitted iperf3 (kernel TCP,
    cubic) flow in the admitted class, iperf3 held to its reservation by its HTB shaper, its
    ACKs (unreserved) best effort; `latnet testbed down` stops the agent. The service speaks
    HTTPS here, asking for client certificates: the network is read, the agent polls and the
    requests are made over mutual TLS, the client and the agent checking the service's
    certificate against the CA's revocation list."""
    import time

    from latnet.chameleon import Client
    from latnet.testbed import _is_agent, down_all, recorded

    run = tmp_path / "tb"
    svc_tokens, write, read = tokens(tmp_path)  # the agent reads with a read token
    ca = tls_certs[0]
    mine = (ca.parent / "client.crt", ca.parent / "client.key")
    revoke = [str(ROOT / "scripts" / "tls-revoke.sh"), str(ca.parent)]
    subprocess.run(revoke, check=True, capture_output=True)  # the CA's list, revoking nothing
    with service(tmp_path / "tb.db", tokens=svc_tokens, tls=tls_certs) as url:
        assert url.startswith("https://"), url
        argv = ["testbed", "up", "--controller", url, "--run-dir", str(run)]
        argv += ["--ca-file", str(ca), "--client-cert", str(mine[0]), "--client-key", str(mine[1])]
        argv += ["--crl-file", str(ca.parent / "ca.crl")]
        assert main([*argv, "--token-file", str(read)]) == 0
        out = capsys.readouterr().out
        prefix = out.split()[1]
        try:
            (state,) = [st for _, st in recorded() if st["prefix"] == prefix]
            (agent_pid,) = state["agents"]
            ns = lambda h: prefix + h  # noqa: E731
            plan = json.loads(
                subprocess.run(
                    [str(ROOT / ".venv" / "bin" / "latnet-switch"), "plan", "--scenario"]
                    + [str(run / "network.toml")],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            addr = {n["name"]: n["address"] for n in plan["nodes"]}

            def sh(host, *argv, **kw):
                return subprocess.run(["ip", "netns", "exec", ns(host), *argv], **kw)

            ping = sh(
                "h1", "ping", "-c", "3", "-i", "0.2", "-W", "1", addr["h3"], capture_output=True
            )
            assert ping.returncode == 0, ping.stdout
            # full-size packets (1,500 bytes, not fragmented) over three switches: three tags,
            # two of them in the frame, fit the switches' interfaces
            big = ["-c", "2", "-i", "0.2", "-W", "1", "-s", "1472", "-M", "do", addr["h3"]]
            ping = sh("h2", "ping", *big, capture_output=True, text=True)
            assert ping.returncode == 0, ping.stdout
            c = Client(url, token_file=write, ca_file=ca, client_cert=mine)
            irtt = c.request("h2", "h3", 10e6, 3000, 2e6, match={"proto": "udp", "dst_port": 2112})
            tcp = {"proto": "tcp", "dst_port": 5201}
            bulk = c.request("h1", "h6", 100e6, 15000, 5e6, match=tcp)
            assert irtt["admitted"] and bulk["admitted"], (irtt, bulk)
            last = c.last()
            status = run / "agent.json"
            deadline = time.monotonic() + 10
            while json.loads(status.read_text())["last_seq"] < last:
                assert time.monotonic() < deadline, "the agent did not apply the requests"
                time.sleep(0.02)
            server = subprocess.Popen(
                ["ip", "netns", "exec", ns("h3"), "timeout", "10", "irtt", "server"]
                + ["-b", f"{addr['h3']}:2112"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            iperf = subprocess.Popen(
                ["ip", "netns", "exec", ns("h6"), "iperf3", "-s", "-1", "-B", addr["h6"]],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(0.5)
            probes = tmp_path / "irtt.json"
            r = sh(
                "h2",
                "irtt",
                "client",
                "-i",
                "10ms",
                "-d",
                "1s",
                "-l",
                "200",
                "-Q",
                "-o",
                str(probes),
                f"{addr['h3']}:2112",
                capture_output=True,
                text=True,
                timeout=20,
            )
            assert r.returncode == 0, r.stderr
            st = json.loads(probes.read_text())["stats"]
            # irtt skips a probe whose send time passed while it was not scheduled (98 of 100
            # sent on a busy machine); what matters is that every probe sent came back
            assert st["packets_sent"] >= 90 and st["packets_received"] == st["packets_sent"], st
            assert st["rtt"]["max"] < 20e6, st["rtt"]
            r = sh(
                "h1",
                "iperf3",
                "-c",
                addr["h6"],
                "-t",
                "2",
                "-C",
                "cubic",
                "-J",
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert r.returncode == 0, r.stderr
            got = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
            # 100 Mbit/s of frames reserved: 1448 of every 1514 bytes (tagged: 1518) are payload
            assert 0.85 * 100e6 * 1448 / 1518 < got < 1.01 * 100e6 * 1448 / 1514, got
            server.wait(timeout=15)
            iperf.wait(timeout=15)
            time.sleep(1.2)  # the switches' statistics, once a second
            m1 = json.loads((run / "switch-m1.json").read_text())
            ports = {p["peer"]: p for p in m1["ports"] if p["role"] == "egress"}
            cls = lambda peer, q: ports[peer]["classes"][q]["enqueued"]  # noqa: E731
            # irtt's probes, admitted: every one it sent (it may skip a few, see above)
            assert cls("s2", 0) >= st["packets_sent"], (cls("s2", 0), st["packets_sent"])
            assert cls("h6", 0) > 10_000  # iperf3's data, admitted
            assert cls("s1", 2) > 1_000  # its ACKs, best effort (class 2 below the two)
            agent = json.loads(status.read_text())
            shaped = agent["hosts"]["h1"]["flows"][str(bulk["id"])]["shaper"]["stats"]
            assert shaped["overlimits"] > 0 and shaped["sent_packets"] > 10_000, shaped
        finally:
            down_all(prefix)
        assert not _is_agent(agent_pid), "testbed down leaves no host agent"


def test_the_agent_follows_a_service_started_again_on_another_store(tmp_path, capsys):
    """The service is replaced, on the same address, by one with a fresh store (its log
    numbered from 1 again, its ids from 0): the agent sees another store in the log's answer,
    undoes what it had programmed (the old flow's entries and class) and programs the new
    service's flows."""
    import socket
    import time

    from latnet.chameleon import Client
    from latnet.testbed import down_all

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        listen = f"127.0.0.1:{s.getsockname()[1]}"
    run = tmp_path / "tb"
    status = run / "agent.json"

    def agent_until(cond, what):
        deadline = time.monotonic() + 10
        while True:
            st = json.loads(status.read_text())
            if cond(st):
                return st
            assert time.monotonic() < deadline, f"the agent did not {what}: {st}"
            time.sleep(0.02)

    with service(tmp_path / "a.db", listen) as url:
        assert main(["testbed", "up", "--controller", url, "--run-dir", str(run)]) == 0
        prefix = capsys.readouterr().out.split()[1]
        try:
            r = Client(url).request(
                "h2", "h3", 10e6, 3000, 5e6, match={"proto": "udp", "dst_port": 5001}
            )
            assert r["admitted"]
            first = agent_until(lambda st: st["hosts"]["h2"]["flows"], "program the first flow")
            store = first["store"]
        except BaseException:
            down_all(prefix)
            raise
    try:
        with service(tmp_path / "b.db", listen) as url:
            r = Client(url).request(
                "h1", "h6", 10e6, 3000, 5e6, match={"proto": "udp", "dst_port": 6001}
            )
            assert r["admitted"] and r["id"] == 0
            st = agent_until(lambda st: st["resyncs"] == 1 and st["hosts"]["h1"]["flows"], "resync")
            assert st["store"] != store
            assert st["hosts"]["h2"]["flows"] == {}, "the old store's flow is gone"
            assert st["hosts"]["h1"]["flows"]["0"]["path"] == ["h1", "s1", "m1", "h6"]
            undone = [c for c in st["changes"] if c["why"] == "resync"]
            assert [(c["host"], c["flow"]) for c in undone] == [("h2", 0)]
            assert st["controller_errors"] >= 0
    finally:
        down_all(prefix)


def test_an_agent_stops_at_once_while_its_long_poll_waits(tmp_path):
    """SIGTERM while the agent's poll waits at the service (30 s here, nothing to hear): the
    agent stops at once, removing what it programmed, instead of waiting for the poll."""
    import time

    from latnet.live import controller_network
    from latnet.testbed import Testbed

    with service(tmp_path / "s.db") as url:
        net = controller_network(url, tmp_path / "net.toml")
        with Testbed(net, run_dir=tmp_path / "tb") as tb:
            agent = tb.start_agent(url, wait_ms=30_000)
            time.sleep(1.0)  # its first long poll is in flight (it began after the state's read)
            t = time.monotonic()
            agent.terminate()
            agent.wait(timeout=40)
            took = time.monotonic() - t
            st = json.loads(tb.agent_status.read_text())
    assert agent.returncode == 0, tb.agent_status.with_suffix(".log").read_text()
    assert took < 2.0, took
    assert st["controller_errors"] == 0 and st["last_error"] is None, st


def test_bad_input_is_refused_naming_it_before_anything_is_built(tmp_path, capsys):
    """A wrong spec key, a missing spec, an unreachable service, both a scenario and
    --controller, and the agent's own bad options: each a clear error naming what is wrong,
    and no testbed left behind."""
    from latnet.testbed import recorded

    before = {st["prefix"] for _, st in recorded()}
    spec = tmp_path / "live.toml"
    spec.write_text(SPEC.replace('deadline = "800us"', 'deadline = "800us"\nqueue = 1'))
    (tmp_path / "ok.toml").write_text(SPEC)
    out = tmp_path / "out"
    with service(tmp_path / "bad.db") as url:
        argv = ["chameleon", "live", "--controller", url, "--out", str(out)]
        assert main([*argv, str(spec)]) == 2
        err = capsys.readouterr().err
        assert "live.toml" in err and "requests[2].queue" in err, err
        assert main([*argv, str(tmp_path / "missing.toml")]) == 2
        assert "missing.toml: cannot read the file" in capsys.readouterr().err
        assert main(["testbed", "up", str(FIG6), "--controller", url]) == 2
        assert "a scenario file or --controller URL, not both" in capsys.readouterr().err
        # more agents than the network has hosts
        assert main([*argv, "--agents", "9", str(spec.with_name("ok.toml"))]) == 2
        assert "agents: 9 agents for 4 hosts" in capsys.readouterr().err
        # a client certificate without its key; a CA file for a plain http:// service
        assert main([*argv, "--client-cert", str(spec), str(spec.with_name("ok.toml"))]) == 2
        assert "give both --client-cert and --client-key" in capsys.readouterr().err
        assert main([*argv, "--ca-file", str(spec), str(spec.with_name("ok.toml"))]) == 2
        assert f"--ca-file {spec}: {url} is not https://" in capsys.readouterr().err
    assert main(["chameleon", "live", "--controller", "http://127.0.0.1:1", str(spec)]) == 1
    assert "http://127.0.0.1:1: cannot reach the service" in capsys.readouterr().err
    assert not out.exists()
    assert {st["prefix"] for _, st in recorded()} == before
    # the agent itself (latnet-switch agent)
    agent = [str(ROOT / ".venv" / "bin" / "latnet-switch"), "agent", "--scenario"]
    agent += [str(ROOT / "experiments" / "demo.toml")]

    def run(*extra):
        return subprocess.run([*agent, *extra], capture_output=True, text=True, timeout=30)

    r = run("--controller", "http://127.0.0.1:1", "--host", "nosuch")
    assert r.returncode == 2 and '--host "nosuch": not a host' in r.stderr, r.stderr
    r = run("--controller", "http://127.0.0.1:1", "--host", "camera", "--order", "sideways")
    assert r.returncode == 2 and "--order: expected sequential or together" in r.stderr, r.stderr
    r = run("--controller", "http://127.0.0.1:1", "--host", "camera", "--wait-ms", "70000")
    assert r.returncode == 2 and "--wait-ms: expected whole milliseconds" in r.stderr, r.stderr
    r = run("--controller", "http://127.0.0.1:1", "--host", "camera", "--peer-wait-ms", "x")
    assert r.returncode == 2 and "--peer-wait-ms: expected whole milliseconds" in r.stderr
    missing = tmp_path / "no-token"
    r = run("--controller", "http://127.0.0.1:1", "--host", "camera", "--token-file", str(missing))
    assert r.returncode == 2 and f"--token-file {missing}" in r.stderr, r.stderr
    r = run("--controller", "127.0.0.1:1", "--host", "camera")
    assert r.returncode == 2 and "expected http://HOST:PORT" in r.stderr, r.stderr
    # TLS options: https:// without a CA, a client certificate without its key or a CA, a CA
    # file that is not there
    https = ["--controller", "https://127.0.0.1:1", "--host", "camera"]
    r = run(*https)
    assert r.returncode == 2 and "--ca-file FILE" in r.stderr, r.stderr
    r = run(*https, "--client-cert", str(spec))
    assert r.returncode == 2 and "give both --client-cert and --client-key" in r.stderr
    r = run(*https, "--client-cert", str(spec), "--client-key", str(spec))
    assert r.returncode == 2 and "--client-cert needs --ca-file" in r.stderr, r.stderr
    r = run(*https, "--ca-file", str(missing))
    assert r.returncode == 2 and f"--ca-file {missing}" in r.stderr, r.stderr
    r = run("--controller", "http://127.0.0.1:1", "--host", "camera")
    assert r.returncode == 1 and "controller http://127.0.0.1:1: cannot connect" in r.stderr
    # asking for help is not an error, wherever it is asked
    r = run("--help")
    assert r.returncode == 0 and "latnet-switch agent --controller" in r.stdout, r.stderr
    ctld = ROOT / ".venv" / "bin" / "latnet-ctld"
    r = subprocess.run([str(ctld), "--k", "4", "-h"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("usage: latnet-ctld"), r.stderr
