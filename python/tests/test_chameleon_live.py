"""`latnet chameleon live`: a running controller service programs the hosts of an emulated
network through the host agent (BPF taggers and HTB shapers in the hosts' kernels) while
traffic runs. Needs root (CI runs it as root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from latnet.cli import main

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
def service(db):
    argv = [sys.executable, "-m", "latnet.cli", "chameleon", "serve", "--db", str(db)]
    argv += ["--listen", "127.0.0.1:0", "--topology", str(FIG6), "--queues", "2"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("listening on "), (line, p.stderr.read())
        yield line.split()[2]
    finally:
        p.terminate()
        p.wait(timeout=10)


def live(tmp_path, name, *extra):
    spec = tmp_path / "live.toml"
    spec.write_text(SPEC)
    out = tmp_path / name
    with service(tmp_path / f"{name}.db") as url:
        argv = ["chameleon", "live", "--controller", url, str(spec), "--out", str(out)]
        code = main([*argv, *extra])
    doc = json.loads((out / "live.json").read_text())
    return code, doc, {f["name"]: f for f in doc["flows"]}


def test_the_service_programs_the_hosts_while_traffic_runs(tmp_path, capsys):
    code, doc, flows = live(tmp_path, "htb")
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
    for c in doc["changes"][2:]:
        # in the scenario's time the change follows its request within a few ms (poll every
        # 10 ms of real time, ten times slower)
        assert 0 < c["lag_after_answer_us"] < 200_000, c
    # a: over m1, over m2 after the move, back over m1 (best effort) after its removal; every
    # packet on the path of the instant it was created, none lost while admitted
    a = flows["a"]
    assert [p["path"] for p in a["paths"]] == ["h2-s1-m1-s2", "h2-s1-m2-s2", "h2-s1-m1-s2"]
    assert all(p["packets"] > 500 for p in a["paths"]), a["paths"]
    assert a["best_effort_path"] == "h2-s1-m1-s2"
    # b: admitted before its first packet, on its one path, within 800 us
    b = flows["b"]
    whole = {"path": "h1-s1-m1", "from_seq": 0, "to_seq": b["sent"] - 1, "packets": b["sent"]}
    assert b["paths"] == [whole]
    for f in (a, b):
        assert f["misrouted"] == 0 and f["lost_while_admitted"] == 0, f
        assert f["over_deadline"] == 0, f
    assert b["received"] == b["sent"] and b["latency_ns"]["max"] < b["deadline_ns"], b
    # once removed, a is best effort, below b's 700 Mbit/s on s1 - m1: what it loses, it
    # loses there (a full best-effort queue), none of it while admitted
    assert a["dropped_at"] == {"s1": a["sent"] - a["received"]}, a
    # bg asked for nothing: its source's best-effort route, below the admitted classes
    bg = flows["bg"]
    assert not bg["admitted"] and bg["misrouted"] == 0
    assert [p["path"] for p in bg["paths"]] == [bg["best_effort_path"]]
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


def test_without_a_shaper_the_same_misbehaving_flow_takes_what_it_sends(tmp_path, capsys):
    """Negative control: the agent tags but does not shape; c then arrives at the rate it sends
    (200 Mbit/s), twice what the controller reserved for it."""
    _, doc, flows = live(tmp_path, "none", "--shaper", "none")
    capsys.readouterr()
    c = flows["c"]
    assert c["shaper"]["class"] is None and c["shaper"]["stats"] is None
    assert c["throughput_bps"] > 1.8 * 100e6, c["throughput_bps"]
    assert c["misrouted"] == 0 and flows["a"]["misrouted"] == 0
    assert doc["agent"]["shaper"] == "none"
