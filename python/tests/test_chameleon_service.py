"""`latnet chameleon serve`: the controller as a REST service (latnet-ctld) on loopback, its
SQLite store read with Python's sqlite3, a restart answering with the same flows, and a store
refused when the service is started with other settings."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

LATNET = [sys.executable, "-m", "latnet.cli"]
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def service(db, *extra):
    """Start the service on a free loopback port; yield its base URL; stop it."""
    argv = [*LATNET, "chameleon", "serve", "--db", str(db), "--listen", "127.0.0.1:0", *extra]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        if not line.startswith("listening on "):
            p.wait(timeout=10)
            raise AssertionError(f"no service: {line!r} {p.stderr.read()!r}")
        yield line.split()[2]
    finally:
        p.terminate()
        p.wait(timeout=10)


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())


def flow(src, dst, rate=20_000_000, deadline_ms=5):
    return {
        "src": src,
        "dst": dst,
        "rate_bps": rate,
        "burst_bytes": 3000,
        "deadline_ns": deadline_ms * 1_000_000,
    }


def test_service_admits_persists_and_restarts_to_the_same_flows(tmp_path):
    db = tmp_path / "ctl" / "controller.db"
    with service(db, "--k", "4") as base:
        st, hosts = call(base, "GET", "/hosts")
        assert st == 200 and len(hosts) == 16
        ids = []
        for i in range(6):
            st, f = call(base, "POST", "/flows", flow(hosts[i], hosts[15 - i]))
            assert st == 201, f
            assert f["path"][0] == hosts[i] and f["path"][-1] == hosts[15 - i]
            assert f["guarantee_ns"] <= 5_000_000 and f["tags"] and f["shaper"]["rate_bps"]
            ids.append(f["id"])
        assert call(base, "DELETE", f"/flows/{ids[2]}") == (204, None)
        st, err = call(base, "POST", "/flows", {**flow(hosts[0], hosts[1]), "rate_bps": "fast"})
        assert st == 400 and err["field"] == "rate_bps", err
        st, err = call(base, "POST", "/flows", flow(hosts[0], "h7_7_7"))
        assert st == 422 and err["field"] == "dst" and err["code"] == "unknown-host", err
        st, err = call(base, "POST", "/flows", flow(hosts[0], hosts[1], rate=3_000_000_000))
        assert st == 409 and err["code"] == "no-path", err
        st, before = call(base, "GET", "/flows")
        assert [f["id"] for f in before] == [i for i in ids if i != ids[2]]
    # the store, read as any SQLite client would
    con = sqlite3.connect(db)
    rows = [json.loads(r[0]) for r in con.execute("SELECT json FROM flows ORDER BY id")]
    ops = [r[0] for r in con.execute("SELECT op FROM log ORDER BY seq")]
    con.close()
    assert rows == before
    # six admissions, one removal, one refusal; the invalid requests were not logged
    assert ops == ["request"] * 6 + ["remove", "request"]
    with service(db, "--k", "4") as base:
        assert call(base, "GET", "/flows") == (200, before)
        st, stats = call(base, "GET", "/stats")
        assert (stats["admitted"], stats["rejected"], stats["flows"]) == (6, 1, 5)
        st, f = call(base, "POST", "/flows", flow(hosts[3], hosts[4]))
        assert st == 201 and f["id"] == ids[-1] + 1


def test_service_refuses_a_store_made_with_other_settings(tmp_path):
    db = tmp_path / "controller.db"
    with service(db, "--k", "4", "--queues", "4") as base:
        st, health = call(base, "GET", "/health")
        assert (st, health["ok"], health["flows"]) == (200, True, 0), health
    p = subprocess.run(
        [*LATNET, "chameleon", "serve", "--db", str(db), "--listen", "127.0.0.1:0", "--k", "6"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 1, p
    assert str(db) in p.stderr and "k = 4" in p.stderr, p.stderr


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--k", "0"], "--k: expected a whole number >= 1"),
        (["--k", "4", "--topology", "x.toml"], "--topology x.toml"),
        (["--listen", "nowhere", "--k", "4"], "--listen nowhere"),
        (["--k", "4", "--tokens", "missing.txt"], "--tokens missing.txt"),
        (["--k", "4", "--io-timeout", "0"], "--io-timeout: expected seconds"),
        (["--k", "3"], "even k"),
        (["--k", "4", "--queues", "9"], "9 queues"),
        (["--k", "4", "--tls-cert", "no.crt", "--tls-key", "no.key"], "--tls-cert no.crt"),
        (["--k", "4", "--max-tags", "17"], "--max-tags: expected a whole number from 1 to 16"),
        (["--k", "4", "--tag-base", "5000"], "--tag-base: expected a whole number from 1 to"),
        (["--k", "4", "--tag-base", "2000"], "cannot encode port 3"),
    ],
)
def test_service_usage_errors_name_the_option(tmp_path, argv, why):
    p = subprocess.run(
        [*LATNET, "chameleon", "serve", "--db", str(tmp_path / "c.db"), *argv],
        capture_output=True,
        text=True,
        timeout=30,
    )
    # exit status 2, as `latnet --help` says of usage errors, in latnet's words
    assert p.returncode == 2 and why in p.stderr, p.stderr
    if "--io-timeout" in argv or "--queues" in argv or "3" in argv:
        # checked by latnet before latnet-ctld runs
        assert "usage: latnet-ctld" not in p.stderr, p.stderr
    assert not (tmp_path / "c.db").exists()


def test_a_services_tag_base_and_max_tags_reach_whoever_replays_it(tmp_path):
    """`serve --tag-base 100 --max-tags 3`: the service's tags use base 100, and
    `chameleon.replay` (verify, transitions and live build their controller with it) builds
    the same controller from `GET /config`: the same tags, and the same refusal of a path
    beyond three tags."""
    from latnet.chameleon import Client, replay

    with service(tmp_path / "t.db", "--k", "4", "--tag-base", "100", "--max-tags", "3") as base:
        c = Client(base)
        a = c.request("h0_0_0", "h0_1_0", 1e6, 1500, 5e6)
        assert a["admitted"], a
        served = c.flow(a["id"])
        assert (c.config()["max_tags"], c.config()["tag_base"]) == (3, 100)
        ctl = replay(c)
    (f,) = ctl.flows()
    assert f["tags"] == served["tags"] and max(f["tags"]) >= 100, (f, served)
    far = ctl.request("h0_0_0", "h1_0_0", 1e6, 1500, 5e6)
    assert far["code"] == "beyond-max-tags", far


def stream(hosts, n):
    """`n` seeded requests between random hosts (5 to 120 Mbit/s, 2 or 5 ms), and removals."""
    import random

    rng = random.Random(3)
    ops = []
    for _ in range(n):
        a, b = rng.sample(hosts, 2)
        rate = rng.choice([5, 20, 50, 120]) * 1_000_000
        ops.append(("request", (a, b, rate, rng.choice([1500, 9000]), rng.choice([2, 5]) * 10**6)))
        if rng.random() < 0.15:
            ops.append(("remove", rng.randrange(0, 60)))
    return ops


def test_service_decides_exactly_as_the_library(tmp_path):
    """The same 150 requests (and removals) to the in-process controller and to the service
    through `chameleon.Client`: every answer equal (ids, reroutes, refusal codes and reasons),
    and the same flows."""
    from latnet import chameleon

    ctl = chameleon.Controller(k=4, queues=8)
    hosts = ctl.hosts()
    ops = stream(hosts, 150)
    ops.append(("request", ("h0_0_0", "h9_9_9", 10**6, 1500, 10**7)))  # invalid: same answer
    with service(tmp_path / "c.db", "--k", "4") as base:
        svc = chameleon.Client(base)
        assert svc.hosts() == hosts
        logged = 0  # valid requests and removals of existing flows reach the log
        for op, arg in ops:
            if op == "request":
                answer = svc.request(*arg)
                assert answer == ctl.request(*arg), arg
                logged += answer.get("code") != "unknown-host"
            else:
                found = svc.remove(arg)
                assert found == ctl.remove(arg), arg
                logged += found
        for a, b in zip(svc.flows(), ctl.flows(), strict=True):
            assert a == b, {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
        assert len(svc) == len(ctl) > 0
        # the stream exercised admissions, refusals and reroutes (124, 26 and 24 here)
        st = svc.stats()
        assert st["admitted"] > 100 and st["rejected"] > 10 and st["reroutes"] > 10, st
        # GET /metrics says the same, and counts the answers the client saw
        m = svc.metrics()
        for field in ("admitted", "rejected", "reroutes", "flows", "last"):
            name = "latnet_ctld_log_last_seq" if field == "last" else f"latnet_ctld_{field}"
            name += "_total" if field in ("admitted", "rejected", "reroutes") else ""
            assert m[name] == st[field], (name, m[name], st[field])
        assert m['latnet_ctld_responses_total{code="201"}'] == st["admitted"]
        assert m['latnet_ctld_responses_total{code="409"}'] == st["rejected"]
        # the log holds every request that reached the controller and every removal, and the
        # flows it says were moved are the ones the answers said
        log = svc.log(limit=1000)
        assert len(log["entries"]) == log["last"] == logged
        moved = {f for e in log["entries"] for f in e.get("rerouted", []) + e.get("moved", [])}
        admitted = {e["id"] for e in log["entries"] if e.get("outcome") == "admitted"}
        assert moved and moved <= admitted


def test_verify_checks_what_a_running_service_admitted(tmp_path, capsys):
    """`latnet chameleon verify --controller URL` rebuilds the service's controller from its
    settings and log (every outcome must replay as logged, reroutes and refusals included)
    and cross-checks those flows packet by packet: the same document as a cross-check of an
    in-process controller given the same requests; `transitions --controller URL` simulates
    the service's first move while it happens, as the in-process controller's. A log that
    does not replay is refused by entry, and a service that is not there is named."""
    from latnet import LatnetError, chameleon
    from latnet.cli import main

    local = chameleon.Controller(k=4, queues=4)
    first_move = None
    with service(tmp_path / "c.db", "--k", "4", "--queues", "4") as base:
        svc = chameleon.Client(base)
        for op, arg in stream(svc.hosts(), 100):
            before = local.copy()
            if op == "request":
                r = local.request(*arg)
                assert svc.request(*arg) == r, arg
                if r["rerouted"] and first_move is None:
                    new = r["id"] if r["admitted"] else None
                    doc = local.transitions(before, new, r["rerouted"], phases=["sync"])
                    first_move = json.loads(doc)
            else:
                assert svc.remove(arg) == local.remove(arg), arg
        log = svc.log()["entries"]
        assert any(e["outcome"] == "refused" for e in log)
        assert any(e.get("rerouted") or e.get("moved") for e in log), "no reroute to replay"
        argv = ["chameleon", "verify", "--controller", base, "--phases", "sync", "aligned-0"]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f"the service at {base}: {len(local)} flows admitted" in out, out
        want = json.loads(local.cross_check(phases=["sync", "aligned-0"]))
        got = json.loads(chameleon.replay(svc).cross_check(phases=["sync", "aligned-0"]))
        assert got == want and want["check"]["phases"][0]["sent"] > 0

        class Changed(chameleon.Client):
            def log(self, after=0, limit=1000):
                page = super().log(after, limit)
                for e in page["entries"]:
                    if e["op"] == "remove":
                        e["found"] = not e["found"]
                return page

        with pytest.raises(LatnetError, match=r"log entry \d+ \(remove\)"):
            chameleon.replay(Changed(base))
        # the service's first move, simulated while it happens: as the in-process one
        out_json = tmp_path / "t.json"
        argv = ["chameleon", "transitions", "--controller", base, "--max-transitions", "1"]
        assert main(argv + ["--phases", "sync", "--json", str(out_json)]) == 0
        assert "log entry" in capsys.readouterr().out
        doc = json.loads(out_json.read_text())
        assert doc["with_moves"] == sum(1 for e in log if e.get("rerouted") or e.get("moved"))
        (t,) = doc["transitions"]
        del t["request"]
        assert t == first_move and t["runs"][0]["result"]["sent"] > 0
    assert main(["chameleon", "verify", "--controller", base]) == 1
    assert "cannot reach the service" in capsys.readouterr().err
    assert main(["chameleon", "transitions", "--controller", base]) == 1
    assert "cannot reach the service" in capsys.readouterr().err


def test_tokens_keep_others_out_and_a_read_token_only_reads(tmp_path, capsys):
    """`serve --tokens FILE`: the client, `verify --controller` and the agent's own rule read a
    token file; without a listed token only GET /health answers, a read token reads, and only a
    write token admits. A malformed file is refused naming its line."""
    from latnet import LatnetError, chameleon
    from latnet.cli import main

    w, r = "w" * 8 + "0123456789abcdef", "r" * 8 + "0123456789abcdef"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# role token\nwrite {w}\nread {r}\n")
    (tmp_path / "w").write_text(f"{w}\n")
    (tmp_path / "r").write_text(f"# the agents' token\nread {r}\n")
    with service(tmp_path / "c.db", "--k", "4", "--tokens", str(tokens)) as base:
        assert call(base, "GET", "/health")[0] == 200
        st, body = call(base, "GET", "/flows")
        assert st == 401 and body["field"] == "Authorization", body
        anyone = chameleon.Client(base)
        with pytest.raises(LatnetError, match=r"/hosts: 401 .*give its token: --token-file"):
            anyone.hosts()
        writer = chameleon.Client(base, token_file=tmp_path / "w")
        reader = chameleon.Client(base, token_file=tmp_path / "r")
        hosts = reader.hosts()
        with pytest.raises(LatnetError, match=r"/flows: 403 the token may only read"):
            reader.request(hosts[0], hosts[-1], 20e6, 3000, 5e6)
        assert writer.request(hosts[0], hosts[-1], 20e6, 3000, 5e6)["admitted"]
        assert [f["src"] for f in reader.flows()] == [hosts[0]]
        assert reader.stats()["denied"] == 3
        argv = ["chameleon", "verify", "--controller", base, "--phases", "sync"]
        assert main([*argv, "--token-file", str(tmp_path / "r")]) == 0
        assert "1 flows admitted" in capsys.readouterr().out
        assert main(argv) != 0
        assert "/config: 401" in capsys.readouterr().err
    tokens.write_text(f"write {w}\nadmin {r}\n")
    p = subprocess.run(
        [*LATNET, "chameleon", "serve", "--db", str(tmp_path / "d.db"), "--k", "4"]
        + ["--tokens", str(tokens)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 2 and f"{tokens}:2: expected the role read, agent or write" in p.stderr
    (tmp_path / "empty").write_text("# none\n")
    with pytest.raises(LatnetError, match="expected a token, the file has none"):
        chameleon.Client(base, token_file=tmp_path / "empty")


def test_a_compacted_service_is_replayed_from_its_snapshot(tmp_path, capsys):
    """`serve --log-keep 10`: the log never holds more than 20 entries, every answer is the
    in-process controller's, and `chameleon.replay` (the snapshot restored, then the log after
    it) rebuilds a controller that goes on deciding as the service does; `verify --controller`
    works on it; a read from before the snapshot is 410."""
    from latnet import LatnetError, chameleon
    from latnet.cli import main

    local = chameleon.Controller(k=4, queues=8)
    ops = stream(local.hosts(), 150)
    db = tmp_path / "c.db"
    with service(db, "--k", "4", "--log-keep", "10") as base:
        svc = chameleon.Client(base)
        most = 0
        for op, arg in ops[:120]:
            if op == "request":
                assert svc.request(*arg) == local.request(*arg), arg
            else:
                assert svc.remove(arg) == local.remove(arg), arg
            with sqlite3.connect(db) as c:
                most = max(most, c.execute("SELECT COUNT(*) FROM log").fetchone()[0])
        assert most <= 20, most
        h = svc.health()
        assert h["snapshot"] > 90 and h["last"] - h["snapshot"] < 20, h
        with pytest.raises(LatnetError, match="410"):
            svc.log(after=0)
        seen = []
        rebuilt = chameleon.replay(svc, on_restore=lambda ctl, seq: seen.append((seq, len(ctl))))
        assert seen[0][0] == h["snapshot"] and seen[0][1] > 0, seen
        assert rebuilt.flows() == local.flows()
        assert json.loads(rebuilt.checkpoint()) == json.loads(local.checkpoint())
        # the rebuilt controller decides the rest of the stream as the service and the library
        for op, arg in ops[120:]:
            if op == "request":
                want = local.request(*arg)
                assert svc.request(*arg) == want == rebuilt.request(*arg), arg
            else:
                want = local.remove(arg)
                assert svc.remove(arg) == want == rebuilt.remove(arg), arg
        assert svc.compact(keep=0)["snapshot"] == svc.last()
        assert chameleon.replay(svc).flows() == local.flows()
        argv = ["chameleon", "verify", "--controller", base, "--phases", "sync"]
        assert main(argv) == 0
        assert f"{len(local)} flows admitted" in capsys.readouterr().out
    # a restart from the snapshot answers with the same flows
    with service(db, "--k", "4") as base:
        assert chameleon.Client(base).flows() == local.flows()
    bad = chameleon.Controller(k=4, queues=8)
    with pytest.raises(LatnetError, match="the checkpoint: "):
        snap = json.loads(local.checkpoint())
        snap["flows"][0]["hops"][0][1] = 9
        bad.restore(json.dumps(snap))
    assert len(bad) == 0


def test_the_client_registers_agents_and_waits_for_their_steps(tmp_path):
    """`Client.register_agent / report_applied / applied / agents`: a question held at the
    service until another client reports the step; an agent token registers and reports but
    cannot admit."""
    import threading
    import time

    from latnet import LatnetError, chameleon

    w, a = "w" * 8 + "0123456789abcdef", "a" * 8 + "0123456789abcdef"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"write {w}\nagent {a}\n")
    (tmp_path / "w").write_text(w)
    (tmp_path / "a").write_text(a)
    with service(tmp_path / "c.db", "--k", "4", "--tokens", str(tokens)) as base:
        writer = chameleon.Client(base, token_file=tmp_path / "w")
        agent = chameleon.Client(base, token_file=tmp_path / "a")
        hosts = agent.hosts()
        fid = writer.request(hosts[0], hosts[-1], 20e6, 3000, 5e6)["id"]
        seq = writer.last()
        assert agent.applied(fid, seq)["why"] == "unserved"
        reg = agent.register_agent("A", [hosts[0]])
        assert reg["hosts"] == [hosts[0]] and reg["ttl_ms"] > 0
        assert [x["name"] for x in writer.agents()] == ["A"]
        with pytest.raises(LatnetError, match="an agent token may read"):
            agent.request(hosts[1], hosts[-1], 20e6, 3000, 5e6)
        answers = []
        t0 = time.monotonic()
        th = threading.Thread(target=lambda: answers.append(writer.applied(fid, seq, 5000)))
        th.start()
        time.sleep(0.3)
        agent.report_applied(fid, seq)
        th.join(timeout=10)
        assert answers and answers[0]["done"] and answers[0]["why"] == "applied", answers
        assert time.monotonic() - t0 >= 0.3, "answered before the report"
        with pytest.raises(LatnetError, match="hosts\\[0\\]"):
            agent.register_agent("B", ["nosuch"])
        with pytest.raises(LatnetError, match="served by agent .A. already"):
            agent.register_agent("B", [hosts[1], hosts[0]])


def test_the_service_speaks_https_to_clients_that_trust_its_ca(tmp_path, tls_certs, capsys):
    """`serve --tls-cert --tls-key`: the client reaches it with the CA that signed its
    certificate; without that CA, or with plain HTTP, it is told why; the two flags go together."""
    from latnet import LatnetError
    from latnet.chameleon import Client
    from latnet.cli import main

    ca, cert, key = tls_certs
    tls = ["--tls-cert", str(cert), "--tls-key", str(key)]
    with service(tmp_path / "tls.db", "--k", "4", *tls) as base:
        assert base.startswith("https://127.0.0.1:"), base
        c = Client(base, ca_file=ca)
        hosts = c.hosts()
        assert len(hosts) == 16
        a = c.request(hosts[0], hosts[15], rate_bps=2e6, burst_bytes=1500, deadline_ns=5e6)
        assert a["admitted"], a
        assert [f["id"] for f in c.flows()] == [a["id"]]
        with pytest.raises(LatnetError, match="--ca-file"):
            Client(base).hosts()  # the system's CAs did not sign it
        st, doc = Client(base.replace("https://", "http://"))._call("GET", "/health")
        assert st == 400 and "https://" in doc["error"], doc
        with pytest.raises(LatnetError, match="is not https://"):
            Client(base.replace("https://", "http://"), ca_file=ca)
        with pytest.raises(LatnetError, match=f"--ca-file {key}: expected PEM certificates"):
            Client(base, ca_file=key)
    assert (
        main(["chameleon", "serve", "--db", str(tmp_path / "x.db"), "--tls-cert", str(cert)]) == 2
    )
    assert "give both --tls-cert and --tls-key" in capsys.readouterr().err
    argv = ["chameleon", "serve", "--db", str(tmp_path / "z.db"), "--tls-client-ca", str(ca)]
    assert main(argv) == 2
    assert "--tls-client-ca needs --tls-cert and --tls-key" in capsys.readouterr().err
    # a key that is not the certificate's: the service does not start, naming both
    other = tmp_path / "other"
    subprocess.run(
        [str(ROOT / "scripts" / "tls-certs.sh"), str(other)], check=True, capture_output=True
    )
    argv = [*LATNET, "chameleon", "serve", "--db", str(tmp_path / "y.db"), "--k", "4"]
    argv += [
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(other / "service.key"),
    ]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r  # files an option names that cannot be used: a usage error
    assert (
        f"--tls-key {other / 'service.key'}: does not serve the certificate of {cert}" in r.stderr
    )
    assert not (tmp_path / "y.db").exists(), "the store was made before the certificate was read"


def test_a_service_asking_for_client_certificates_lets_in_only_those_its_ca_signed(
    tmp_path, tls_certs
):
    """`serve --tls-client-ca`: a client presenting the certificate the CA signed is served;
    one presenting none is refused in the handshake, saying so."""
    from latnet import LatnetError
    from latnet.chameleon import Client

    ca, cert, key = tls_certs
    tls = ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-ca", str(ca)]
    mine = (ca.parent / "client.crt", ca.parent / "client.key")
    with service(tmp_path / "mtls.db", "--k", "4", *tls) as base:
        assert len(Client(base, ca_file=ca, client_cert=mine).hosts()) == 16
        with pytest.raises(LatnetError, match="asks for a client certificate: --client-cert"):
            Client(base, ca_file=ca).hosts()
    with pytest.raises(LatnetError, match="--client-cert .*expected a PEM certificate"):
        Client("https://127.0.0.1:1", ca_file=ca, client_cert=(mine[1], mine[1]))


def test_a_client_certificate_the_ca_revoked_is_refused_saying_so(tmp_path, tls_certs, capsys):
    """`serve --tls-client-crl` with the list `scripts/tls-revoke.sh` wrote: the client whose
    certificate it names is refused in the handshake, and the client is told why."""
    from latnet import LatnetError
    from latnet.chameleon import Client
    from latnet.cli import main

    ca, cert, key = tls_certs
    mine = (ca.parent / "client.crt", ca.parent / "client.key")
    revoke = [str(ROOT / "scripts" / "tls-revoke.sh"), str(ca.parent)]
    tls = ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-ca", str(ca)]
    crl = ["--tls-client-crl", str(ca.parent / "ca.crl")]
    subprocess.run(revoke, check=True, capture_output=True)  # the list, empty
    with service(tmp_path / "crl.db", "--k", "4", *tls, *crl) as base:
        assert len(Client(base, ca_file=ca, client_cert=mine).hosts()) == 16
    subprocess.run([*revoke, str(mine[0])], check=True, capture_output=True)
    refused = pytest.raises(LatnetError, match="revocation list names this client certificate")
    with service(tmp_path / "crl.db", "--k", "4", *tls, *crl) as base, refused:
        Client(base, ca_file=ca, client_cert=mine).hosts()
    argv = ["chameleon", "serve", "--db", str(tmp_path / "z.db"), "--k", "4", *crl]
    assert main([*argv, "--tls-cert", str(cert), "--tls-key", str(key)]) == 2
    assert "--tls-client-crl needs --tls-client-ca" in capsys.readouterr().err


def test_a_client_with_the_cas_revocation_lists_refuses_a_revoked_or_stale_service(
    tmp_path, tls_certs, capsys
):
    """`Client(crl_file=...)` / `--crl-file`: the service's certificate is checked against the
    CA's lists; one they revoke, or any once they are past their next update, is refused, and
    the error says which."""
    from latnet import LatnetError, UsageError
    from latnet.chameleon import Client
    from latnet.cli import main

    ca, cert, key = tls_certs
    d = ca.parent
    revoke = [str(ROOT / "scripts" / "tls-revoke.sh"), str(d)]
    subprocess.run(revoke, check=True, capture_output=True)  # the list, empty
    stale = d / "stale.crl"
    subprocess.run(
        ["openssl", "ca", "-config", d / "ca-revoke.cnf", "-keyfile", d / "ca.key"]
        + ["-cert", ca, "-gencrl", "-crl_lastupdate", "20200101000000Z"]
        + ["-crl_nextupdate", "20200102000000Z", "-out", stale],
        check=True,
        capture_output=True,
    )
    tls = ["--tls-cert", str(cert), "--tls-key", str(key)]
    with service(tmp_path / "crl.db", "--k", "4", *tls) as base:
        assert len(Client(base, ca_file=ca, crl_file=d / "ca.crl").hosts()) == 16
        with pytest.raises(LatnetError, match="--crl-file is past its next update"):
            Client(base, ca_file=ca, crl_file=stale).hosts()
        subprocess.run([*revoke, str(cert)], check=True, capture_output=True)
        with pytest.raises(LatnetError, match="--crl-file names the service's certificate"):
            Client(base, ca_file=ca, crl_file=d / "ca.crl").hosts()
        # without the lists it still gets in: revocation is checked only when asked
        assert len(Client(base, ca_file=ca).hosts()) == 16
        # the command line: the same refusal, exit status 1
        argv = ["chameleon", "verify", "--controller", base, "--ca-file", str(ca)]
        assert main([*argv, "--crl-file", str(d / "ca.crl")]) == 1
        assert "names the service's certificate" in capsys.readouterr().err
    with pytest.raises(UsageError, match="--crl-file .*needs --ca-file"):
        Client("https://127.0.0.1:1", crl_file=d / "ca.crl")
    with pytest.raises(UsageError, match="--crl-file .*is not https://"):
        Client("http://127.0.0.1:1", crl_file=d / "ca.crl")
    with pytest.raises(UsageError, match="--crl-file .*no revocation list in it"):
        Client("https://127.0.0.1:1", ca_file=ca, crl_file=ca)
    with pytest.raises(UsageError, match="--crl-file .*expected PEM revocation lists"):
        Client("https://127.0.0.1:1", ca_file=ca, crl_file=d / "missing.crl")
