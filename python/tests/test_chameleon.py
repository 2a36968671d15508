"""Tests of the Chameleon bindings, CLI and reproduction (quick)."""

from __future__ import annotations

import json

import pytest

from latnet import chameleon
from latnet.cli import main


def test_controller_admits_inspects_and_removes():
    ctl = chameleon.Controller(k=4, queues=8)
    hosts = ctl.hosts()
    assert len(hosts) == 16
    r = ctl.request(hosts[0], hosts[-1], rate_bps=2e6, burst_bytes=300, deadline_ns=10e6)
    assert r["admitted"], r
    (f,) = ctl.flows()
    assert f["path"][0] == hosts[0] and f["path"][-1] == hosts[-1]
    assert len(f["tags"]) == len(f["path"]) - 2, "one tag per switch"
    assert len(f["queues"]) == len(f["path"]) - 1
    assert all(isinstance(q, int) for q in f["queues"])  # a list, not bytes
    assert f["guarantee_ns"] <= f["deadline_ns"]
    assert f["shaper"] == {"rate_bps": 2_000_000, "burst_bytes": 300}
    assert ctl.remove(r["id"]) and not ctl.remove(r["id"])
    assert len(ctl) == 0


@pytest.mark.parametrize(
    "args, code, words",
    [
        (("h0_0_0", "h3_1_1", -5.0, 300, 10e6), "invalid-rate", "rate"),
        (("h0_0_0", "h3_1_1", 0.0, 300, 10e6), "invalid-rate", "rate"),
        (("h0_0_0", "h3_1_1", float("nan"), 300, 10e6), "invalid-rate", "rate"),
        (("h0_0_0", "h3_1_1", 1e6, -1, 10e6), "invalid-burst", "burst"),
        (("h0_0_0", "nowhere", 1e6, 300, 10e6), "unknown-host", "nowhere"),
        (("h0_0_0", "e0_0", 1e6, 300, 10e6), "not-a-host", "switch"),
        (("h0_0_0", "h3_1_1", 1e6, 300, 0.2e6), "deadline-below-minimum", "minimum"),
        (("h0_0_0", "h3_1_1", 1e6, 300, -1), "invalid-deadline", "deadline"),
        (("h0_0_0", "h3_1_1", -(2**70), 300, 10e6), "invalid-rate", "rate"),
        (("h0_0_0", "h3_1_1", 2**64, 300, 10e6), "invalid-rate", "rate"),
        (("h0_0_0", "h3_1_1", "1Mbps", 300, 10e6), "invalid-rate", "rate"),
    ],
)
def test_invalid_requests_are_refused_with_a_reason(args, code, words):
    ctl = chameleon.Controller(k=4, queues=8)
    r = ctl.request(*args)
    assert r["admitted"] is False
    assert r["code"] == code
    assert words in r["reason"]
    assert len(ctl) == 0


def test_a_log_holding_the_largest_amounts_replays_as_the_service_decided():
    """Amounts are the service's u64s exactly, not floats (2^64 - 1 rounded to 2^64 and was
    refused here as an invalid rate, which the replay could not even compare: a traceback)."""
    big = 2**64 - 1
    r = chameleon.Controller(k=4, queues=4).request("h0_0_0", "h3_1_1", big, 3000, 5_000_000)
    assert r["code"] != "invalid-rate" and r["rerouted"] == [], r
    burst = chameleon.Controller(k=4, queues=4).request("h0_0_0", "h3_1_1", 2e6, big, 5e6)
    assert burst["code"] != "invalid-burst", burst

    class Log:  # a service's answers: its settings, no snapshot, a log of that one refusal
        def config(self):
            return {"queues": 4, "system": "chameleon", "k": 4, "topology": None}

        def snapshot(self):
            return {"seq": 0}

        def log(self, after, limit):
            e = {"seq": 1, "op": "request", "src": "h0_0_0", "dst": "h3_1_1"}
            e |= {"rate_bps": big, "burst_bytes": 3000, "deadline_ns": 5_000_000}
            e |= {"outcome": "refused", "code": r["code"], "moved": []}
            return {"entries": [e] if after == 0 else [], "last": 1}

    assert len(chameleon.replay(Log())) == 0

    # another outcome than the log's is an error naming the entry, never a traceback
    class Other(Log):
        def log(self, after, limit):
            page = super().log(after, limit)
            return page | {"entries": [e | {"code": "invalid-rate"} for e in page["entries"]]}

    with pytest.raises(chameleon.LatnetError, match="log entry 1 \\(request\\)"):
        chameleon.replay(Other())


def test_evaluate_and_summarize_are_deterministic():
    a = chameleon.evaluate("chameleon-noreroute", scenario=3, runs=3, k=4, workers=2)
    b = chameleon.evaluate("chameleon-noreroute", scenario=3, runs=3, k=4, workers=1)
    assert [r["accepted"] for r in a] == [r["accepted"] for r in b]
    s = chameleon.summarize(a)
    assert s["runs"] == 3
    assert s["accepted"]["p1"] <= s["accepted"]["mean"] <= s["accepted"]["p99"]
    assert 0 <= s["utilisation"]["p50"] <= s["utilisation"]["max"] <= 1
    assert s["runtime_ms"]["requests"] == sum(r["accepted"] + 1 for r in a)


def test_cli_eval_prints_the_summary(capsys):
    rc = main(
        ["chameleon", "eval", "--system", "silo", "--scenario", "2", "--runs", "2", "--quiet"]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "accepted flows" in out and "runtime per request" in out and "link utilisation" in out


def test_cli_errors_are_clear(tmp_path, capsys):
    bad = tmp_path / "t.toml"
    bad.write_text('[[nodes]]\nname = "a"\nkind = "host"\n[[links]]\na = "a"\nb = "zz"\n')
    rc = main(["chameleon", "eval", "--topology", str(bad), "--runs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "t.toml:6:5" in err and "unknown node" in err
    rc = main(["chameleon", "eval", "--k", "5", "--runs", "1", "--quiet"])
    assert rc == 2 and "even k" in capsys.readouterr().err
    # files that cannot be read, and options that need a service, are usage errors too
    missing = tmp_path / "nosuch.toml"
    rc = main(["chameleon", "eval", "--topology", str(missing), "--runs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and f"--topology {missing}: cannot read the file" in err, err
    for cmd in ("verify", "transitions"):
        rc = main(["chameleon", cmd, "--token-file", "t.txt", "--ca-file", "ca.pem"])
        err = capsys.readouterr().err
        assert rc == 2 and "--token-file, --ca-file: only with --controller URL" in err, err
        rc = main(["chameleon", cmd, "--controller", "http://127.0.0.1:9", "--token-file", "t.txt"])
        err = capsys.readouterr().err
        assert rc == 2 and "--token-file t.txt: cannot read the file" in err, err
    both = ["x.toml", "--controller", "http://h:1"]
    for argv, which in ((both, "not both"), ([], "one of them")):
        assert main(["testbed", "up", *argv]) == 2
        assert f"give a scenario file or --controller URL, {which}" in capsys.readouterr().err
    # negative counts are usage errors naming the option, not tracebacks from the bindings
    for argv in (["transitions", "--tries", "-1"], ["verify", "--duration-ms", "-1"]):
        with pytest.raises(SystemExit) as e:
            main(["chameleon", *argv])
        err = capsys.readouterr().err
        assert e.value.code == 2 and argv[1] in err and "whole number >= " in err, err


def test_cli_verify_finds_no_violation(capsys):
    rc = main(["chameleon", "verify", "--k", "4", "--queues", "4", "--duration-ms", "5"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "queue/bound" in out


def test_cli_transitions_simulates_moves_in_each_order(tmp_path, capsys):
    """The first request that moved admitted flows (k = 4, 2 queues, workload 2: the 66th),
    simulated in every order: each run sent packets and delivered them; some of the moved
    flows' packets took their old paths; applied in sequence nothing is violated (exit 0); an
    unknown order is a usage error naming it."""
    out_json = tmp_path / "t.json"
    argv = ["chameleon", "transitions", "--k", "4", "--queues", "2", "--scenario", "2"]
    argv += ["--tries", "100", "--max-transitions", "1", "--duration-ms", "4"]
    rc = main(argv + ["--json", str(out_json)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "new-first" in out and "old-path pkts" in out
    doc = json.loads(out_json.read_text())
    assert doc["requests"] == 100 and doc["with_moves"] >= 1
    (t,) = doc["transitions"]
    assert t["moved"] and len(t["old_guarantee_ns"]) == len(t["moved"])
    runs = t["runs"]
    assert sorted({r["order"] for r in runs}) == ["new-first", "sequential", "together"]
    assert {r["result"]["phase"] for r in runs} == {"sync", "random-2ms"}
    for r in runs:
        p = r["result"]
        assert p["sent"] > 0 and p["received"] == p["sent"] and p["misrouted"] == 0, r
    assert sum(r["old_path_packets"] for r in runs) > 0
    seq = [r for r in runs if r["order"] == "sequential"]
    assert all(r["new_start_ns"] == 3_000_000 + sum(t["old_guarantee_ns"]) for r in seq)
    rc = main(argv + ["--orders", "sideways"])
    assert rc == 2 and "unknown order" in capsys.readouterr().err
    # a change the controllers do not show is refused by name
    ctl = chameleon.Controller(k=4, queues=2)
    with pytest.raises(ValueError, match="moved flow 999 is not in `before`"):
        ctl.transitions(ctl.copy(), None, [999])


def test_reproduce_quick(tmp_path):
    rc = main(["reproduce", "chameleon", "--quick", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "reproduce-chameleon.json").read_text())
    assert doc["seed"] == "chameleon" and doc["quick"] is True
    tables = {t["id"]: t for t in doc["tables"]}
    assert set(tables) >= {
        "accepted-k4",
        "ratio-k4",
        "reconfigured-k4",
        "utilisation-k4",
        "runtime-k4",
        "accepted-scale",
        "ratio-scale",
        "runtime-scale",
        "crosscheck",
    }
    # the acceptance: Chameleon at least 2x Silo and QJump in every k=4 scenario
    acc = {r["label"]: r["ours"]["mean"] for r in tables["accepted-k4"]["rows"]}
    for sc in range(1, 9):
        for base in ("silo", "silo-noburst", "qjump"):
            assert acc[f"scenario {sc} chameleon"] >= 2 * acc[f"scenario {sc} {base}"], (sc, base)
    assert all(
        r["ours"]["mean"] <= 32 for r in tables["accepted-k4"]["rows"] if "qjump" in r["label"]
    )
    for r in tables["crosscheck"]["rows"]:
        assert r["ours"]["violations"] == 0, r
        assert r["ours"]["queue/bound"] <= 1.0
    for png in ("accepted_k4", "utilisation_ecdf", "runtime_vs_k", "accepted_vs_k"):
        assert (tmp_path / f"chameleon_{png}.png").stat().st_size > 1000


def test_misrouted_counts_hops_off_the_embedding_port_or_queue():
    """The emulated check's hop test, on the simulator's own hops.csv of the cross-check's
    scenario: none off the embeddings; a switch hop in another queue, a hop on another port
    and a hop beyond the path are each counted; a host hop's queue is not judged."""
    import latnet

    doc = chameleon.crosscheck(
        k=4, hosts_per_edge=1, queues=4, tries=6, duration_ms=5, phases=["sync"], scenarios=True
    )
    emb = {e["name"]: e for e in doc["embeddings"]}
    assert emb and all(len(e["hops"]) == len(e["path"]) for e in emb.values())
    hops = latnet.run(text=doc["scenarios"][0]["toml"], packets=True).hops
    assert chameleon.misrouted(hops, emb) == 0
    # the admitted flow that sent the most packets (two at least)
    name = max(emb, key=lambda n: int((hops["flow"] == n).sum()))
    e, mine = emb[name], hops[hops["flow"] == name]
    assert mine["seq"].nunique() >= 2

    def rows(hop: int) -> list:
        return list(mine.index[mine["hop"] == hop])

    assert not e["hops"][0]["switch"] and e["hops"][1]["switch"]
    wrong = hops.copy()
    wrong.loc[rows(1)[0], "priority"] = (e["hops"][1]["queue"] + 1) % 4
    assert chameleon.misrouted(wrong, emb) == 1
    wrong.loc[rows(1)[1], "port"] += 1
    assert chameleon.misrouted(wrong, emb) == 2
    wrong.loc[rows(2)[0], "hop"] = len(e["hops"])
    assert chameleon.misrouted(wrong, emb) == 3
    host = hops.copy()
    host.loc[rows(0), "priority"] = 5
    assert chameleon.misrouted(host, emb) == 0
