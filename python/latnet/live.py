"""A live run: a running controller service programs an emulated network while traffic runs.

``live(url, spec, out)`` reads the service's settings and log (``chameleon.replay``: the same
controller, checked entry by entry), builds its network as an emulated testbed (a namespace per
node; ``latnet-switch`` forwarding by tag stacks into the controller's strict-priority classes,
best effort below them), starts one host agent for all hosts (``latnet-switch agent``: a BPF
tagger on each host's egress and an HTB shaper per admitted flow, programmed from the service's
log; or ``agents`` of them sharing the hosts, which keep the sequential order through the
service), makes the spec's requests of the service at their instants (those at 0 before the traffic,
once the agents have applied them) and runs the spec's traffic (latnet's UDP senders, timed
and traced per packet and hop). Nothing tells the senders or switches what the controller
decided: the tags come from the hosts' kernels, as the agent programmed them.

Then every packet is checked against what the controller had decided when it was created: its
path (the switches and ports ``hops.csv`` saw it at, and the class it was queued in at each,
which its tag picked) must be the flow's embedding of that instant, or its source's best-effort
route (in the best-effort class) while the flow was not admitted; a packet created before a
change may have followed the state after it only if its sender was late by at least the gap (the
sender's worst lateness, which it measures); an admitted flow's packets must arrive, within the
flow's deadline. ``out/live.json`` holds the requests and answers, the agent's changes with
their lag behind the answers, and per flow the packets, paths, latencies and shaper counters;
``stalled`` says the machine fell behind by more than ``stall_ns`` (half the tightest deadline,
scenario time): a stall that long can break a deadline by itself. The run cannot be repeated
here (its requests changed the service's state); run it again on a fresh service.

The service is reached over the root namespace's loopback (out of band of the emulated
network). Needs root, like every emulated run.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

from . import LatnetError, UsageError
from .chameleon import Client, replay
from .emu import collect, now_ns, start_flows, start_margins, wait_all
from .testbed import Testbed

#: Time the agent gets to start (load its taggers, read the service) and the requests at 0 to be
#: applied, before the traffic's time zero.
AGENT_MARGIN_NS = 2_000_000_000


def controller_network(
    url: str,
    path: str | os.PathLike[str],
    duration_ns: int = 3_600_000_000_000,
    token_file: str | os.PathLike[str] | None = None,
    ca_file: str | os.PathLike[str] | None = None,
    client_cert: tuple[str, str] | None = None,
    crl_file: str | os.PathLike[str] | None = None,
) -> Path:
    """Write the network of the service at ``url`` (its settings and log replayed here) as a
    scenario file with no flows at ``path``: what ``latnet testbed up --controller`` runs."""
    client = Client(
        url, token_file=token_file, ca_file=ca_file, client_cert=client_cert, crl_file=crl_file
    )
    ctl = replay(client)
    path = Path(path)
    path.write_text(ctl.network_toml(duration_ns=duration_ns))
    return path


def merge_status(docs: list[dict]) -> dict:
    """One status document for agents that each served some of the hosts: their hosts and
    changes together (in time order), counters summed, the state read at the latest
    ``synced_seq`` and applied up to the smallest ``last_seq``; ``peers``: each agent's."""
    if len(docs) == 1:
        return docs[0]
    out = dict(docs[0])
    out["hosts"] = {h: v for d in docs for h, v in d["hosts"].items()}
    out["changes"] = sorted((c for d in docs for c in d["changes"]), key=lambda c: c["t_ns"])
    for k in ("changes_dropped", "polls", "controller_errors", "resyncs", "catch_ups"):
        out[k] = sum(d.get(k) or 0 for d in docs)
    out["synced_seq"] = max(d.get("synced_seq", 0) for d in docs)
    out["last_seq"] = min(d.get("last_seq", 0) for d in docs)
    out["last_error"] = next((d["last_error"] for d in docs if d.get("last_error")), None)
    out["peers"] = [d.get("peers") for d in docs]
    return out


def _wait_status(tb: Testbed, agents: list, until_ns: int, cond) -> dict:
    """The agents' merged status document once ``cond(status)`` holds (re-read every 5 ms).
    ``agents``: (process, status file) of each."""
    while True:
        docs = []
        for agent, path in agents:
            if agent.poll() is not None:
                err = path.with_suffix(".log").read_text()[-2000:].strip()
                raise LatnetError(f"the host agent stopped (status {agent.returncode}): {err}")
            try:
                docs.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                break
        if len(docs) == len(agents):
            st = merge_status(docs)
            if cond(st):
                return st
        if now_ns() > until_ns:
            raise LatnetError("the host agent did not apply the controller's state in time")
        time.sleep(0.005)


def live(
    url: str,
    spec: str | os.PathLike[str],
    out: str | os.PathLike[str],
    poll_ms: int = 10,
    shaper: bool = True,
    switch_processes: str | None = None,
    order: str = "sequential",
    token_file: str | os.PathLike[str] | None = None,
    wait_ms: int = 500,
    agents: int = 1,
    peer_wait_ms: int = 5000,
    ca_file: str | os.PathLike[str] | None = None,
    client_cert: tuple[str, str] | None = None,
    crl_file: str | os.PathLike[str] | None = None,
) -> dict:
    """Run ``spec`` on the network of the service at ``url``; results in ``out`` (see the module
    docstring). Returns the document written to ``out/live.json``. ``token_file``: the token a
    service started with ``--tokens`` needs, for this client and the agent (a write token: the
    spec's requests admit and remove flows). ``agents``: how many host agents share the hosts
    (round robin, in the order of the plan); more than one keep the sequential order between
    them through the service, each waiting up to ``peer_wait_ms`` for another's step (0: the
    order holds only among each agent's own hosts). ``ca_file``: for an ``https://`` service,
    who signed its certificate, ``client_cert``: the ``(certificate, key)`` files a service
    asking for one gets, and ``crl_file``: that CA's revocation lists, checked against the
    service's certificate (for this client and the agents)."""
    if agents < 1:
        raise UsageError(f"agents: expected at least 1, got {agents}")
    spec = Path(spec)
    try:
        text = spec.read_text()
    except OSError as e:
        raise UsageError(f"{spec}: cannot read the file: {e.strerror}") from None
    client = Client(
        url, token_file=token_file, ca_file=ca_file, client_cert=client_cert, crl_file=crl_file
    )
    ctl = replay(client)
    plan = json.loads(ctl.live_plan(spec.name, text))
    k = plan["dilation"]
    # checked before anything is written (the testbed's hosts are the service's)
    if agents > len(client.hosts()):
        raise UsageError(f"agents: {agents} agents for {len(client.hosts())} hosts")
    out = Path(out)
    run_dir = out / "emu-run"
    run_dir.mkdir(parents=True, exist_ok=True)
    for old in [*run_dir.glob("*"), out / "hops.csv", out / "packets.csv", out / "live.json"]:
        if old.is_file():
            old.unlink()
    scenario = out / "scenario.toml"
    scenario.write_text(plan["scenario"])
    tb = Testbed(scenario, run_dir=run_dir, hop_records=True, switch_processes=switch_processes)
    ports = sum(len(n["ifaces"]) for n in tb.plan["nodes"] if n["kind"] == "switch")
    after, senders = start_margins(ports, len(tb.plan["flows"]))
    tb.time_zero_after_ns = after + AGENT_MARGIN_NS
    length = tb.plan["duration_ns"] + tb.plan["drain_ns"]
    hosts = tb.hosts()
    groups = [hosts[i::agents] for i in range(agents)]
    paths = [run_dir / ("agent.json" if agents == 1 else f"agent-{i}.json") for i in range(agents)]
    routes = {h: {r["dst"]: r for r in client.routes(h)["routes"]} for h in hosts}
    answers: list[dict] = []

    def ask(r: dict) -> None:
        issued = now_ns()
        a = client.request(
            r["src"], r["dst"], r["rate_bps"], r["burst_bytes"], r["deadline_ns"], match=r["match"]
        )
        answered = now_ns()
        row = {"flow": r["flow"], "at_ns": r["at_ns"], "issued_real_ns": issued}
        row |= {"answered_real_ns": answered, "seq": client.last()}
        row |= {"deadline_ns": r["deadline_ns"], "rate_bps": r["rate_bps"]}
        row |= {"burst_bytes": r["burst_bytes"], "answer": a}
        if a["admitted"]:
            f = client.flow(a["id"]) or {}
            row |= {k2: f.get(k2) for k2 in ("path", "tags", "guarantee_ns", "shaper")}
        answers.append(row)

    def remove(r: dict) -> None:
        row = next((a for a in answers if a["flow"] == r["flow"]), None)
        if row is None or not row["answer"]["admitted"]:
            return  # never admitted: nothing to remove
        issued = now_ns()
        found = client.remove(row["answer"]["id"])
        row["removal"] = {"at_ns": r["remove_at_ns"], "issued_real_ns": issued}
        row["removal"] |= {"answered_real_ns": now_ns(), "found": found}
        row["removal"] |= {"seq": client.last()}

    with tb:
        t0 = tb.time_zero_ns
        assert t0 is not None
        started: list = []
        try:
            for group, path in zip(groups, paths, strict=True):
                p = tb.start_agent(
                    url,
                    path,
                    poll_ms=poll_ms,
                    shaper=shaper,
                    dilation=k,
                    order=order,
                    token_file=token_file,
                    ca_file=ca_file,
                    client_cert=client_cert,
                    crl_file=crl_file,
                    wait_ms=wait_ms,
                    hosts=group,
                    peer_wait_ms=peer_wait_ms,
                )
                started.append((p, path))
            for r in plan["requests"]:
                if r["at_ns"] == 0:
                    ask(r)
            last = client.last()
            _wait_status(tb, started, t0 - senders, lambda s: s["last_seq"] >= last)
            if now_ns() > t0 - senders:
                raise LatnetError(
                    "the switches, the agent and the first requests took more than "
                    f"{(tb.time_zero_after_ns - senders) / 1e9:g} s; no time left to start "
                    "the senders before the traffic's time zero"
                )
            procs = start_flows(tb, t0, t0 + length)
            events = [(r["at_ns"], 0, r) for r in plan["requests"] if r["at_ns"] > 0]
            events += [(r["remove_at_ns"], 1, r) for r in plan["requests"] if r["remove_at_ns"]]
            events.sort(key=lambda e: (e[0], e[1]))
            failed: list[BaseException] = []

            def timed() -> None:
                try:
                    for at, what, r in events:
                        wake = t0 + at * k
                        while now_ns() < wake:
                            time.sleep(max(0.0, min(0.001, (wake - now_ns()) / 1e9)))
                        if what == 0:
                            ask(r)
                        else:
                            remove(r)
                except BaseException as e:  # reported after the run
                    failed.append(e)

            th = threading.Thread(target=timed, daemon=True)
            th.start()
            wait_all(procs, (t0 + length - now_ns()) / 1e9 + 30)
            th.join(timeout=30)
            if failed:
                raise LatnetError(f"a timed request failed: {failed[0]}")
        finally:
            for agent, _ in started:
                agent.terminate()
            for agent, _ in started:
                try:
                    agent.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    agent.kill()
        res = collect(tb, out, length)
    status = merge_status([json.loads(path.read_text()) for path in paths])
    folded = client.health()["snapshot"]
    if folded > status["synced_seq"]:
        raise LatnetError(
            f"the service folded its log up to entry {folded} into its snapshot, past entry "
            f"{status['synced_seq']} where the agent read its state: the run's decisions are "
            "gone and it cannot be judged (run live against a service without --log-keep, or "
            "with a larger one)"
        )
    doc = analyse(plan, answers, status, res, routes, t0, url, spec.name, decisions(client))
    (out / "live.json").write_text(json.dumps(doc, indent=2, default=_plain) + "\n")
    return doc


def _plain(x):
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    raise TypeError(type(x))


def decisions(client: Client) -> list[dict]:
    """What the controller decided, entry by entry of the service's log (replayed into an
    in-process controller, each outcome checked): ``{"seq", "flow", "path", "tags"}`` for every
    flow whose path or tag stack (the queues it picks) an entry set (``path`` and ``tags``
    None: removed)."""
    out: list[dict] = []
    states: dict[int, tuple] = {}

    def now(ctl) -> dict[int, tuple]:
        return {f["id"]: (tuple(f["path"]), tuple(f["tags"])) for f in ctl.flows()}

    def on_restore(ctl, seq) -> None:
        states.update(now(ctl))

    def on_entry(ctl, e) -> None:
        after = now(ctl)
        for fid, (path, tags) in after.items():
            if states.get(fid) != (path, tags):
                out.append({"seq": e["seq"], "flow": fid, "path": path, "tags": tags})
        for fid in set(states) - set(after):
            out.append({"seq": e["seq"], "flow": fid, "path": None, "tags": None})
        states.clear()
        states.update(after)

    replay(client, on_entry=on_entry, on_restore=on_restore)
    return out


def _applied_state(c: dict) -> tuple | None:
    """The path and tag stack an agent's change applied (``None``: a removal)."""
    return None if c["what"] == "remove" else (tuple(c["path"]), tuple(c["tags"]))


def unapplied(decided: list[dict], changes: list[dict], synced_seq: int) -> list[dict]:
    """The controller's decisions the agent did not apply as decided: each decision of an entry
    after the agent read the controller's state needs a change of that entry, that flow, that
    path and that tag stack (removed: a removal); the state at that read, a change marked
    ``present``."""
    applied = {(c["seq"], c["flow"], _applied_state(c)) for c in changes}
    present = {(c["flow"], _applied_state(c)) for c in changes if c["why"] == "present"}
    at_sync: dict[int, tuple | None] = {}
    missing = []
    for d in decided:
        state = None if d["path"] is None else (tuple(d["path"]), tuple(d["tags"]))
        if d["seq"] <= synced_seq:
            at_sync[d["flow"]] = state
        elif (d["seq"], d["flow"], state) not in applied:
            missing.append(d)
    for fid, st in at_sync.items():
        if st is not None and (fid, st) not in present:
            missing.append({"seq": synced_seq, "flow": fid, "path": st[0], "tags": st[1]})
    return missing


def _route(path, tags, plan: dict, what: str) -> tuple:
    """A route as the switches' hop records show it: per hop ``(node, port, queue)``, the nodes
    of ``path`` but its last; at the source host port and queue ``None`` (a host queues every
    admitted flow in its first class), at each switch the port and class its tag picks (``tag
    // base``, the port's local number, and ``tag % base``)."""
    base, ports = plan["tag_base"], plan["ports"]
    nodes = list(path[:-1])
    if len(tags) != len(nodes) - 1:
        raise LatnetError(f"{what}: {len(tags)} tags for the {len(nodes) - 1} switches of {path}")
    hops = [(nodes[0], None, None)]
    for node, t in zip(nodes[1:], tags, strict=True):
        local = ports.get(node, [])
        if t // base >= len(local):
            raise LatnetError(f"{what}: tag {t} names port {t // base} of {node}, which has none")
        hops.append((node, local[t // base], t % base))
    return tuple(hops)


def _took(hops) -> dict:
    """Per sequence number the route a flow's packet took: ``(node, port, queue)`` per hop,
    from its hop records (``priority``: the class it was queued in; port and queue ``None`` at
    the source host)."""
    out: dict = {}
    cols = [hops[c] for c in ("seq", "hop", "node", "port", "priority")]
    for seq, hop, node, port, prio in zip(*cols, strict=True):
        at = (node, None, None) if hop == 0 else (node, int(port), int(prio))
        out.setdefault(seq, []).append(at)
    return {seq: tuple(r) for seq, r in out.items()}


def _nodes(route: tuple) -> str:
    return "-".join(n for n, _, _ in route)


def _queues(route: tuple) -> str:
    return "-".join(str(q) for _, _, q in route[1:])


def _starts(whole: tuple | None, part: tuple) -> bool:
    """``part`` is the beginning of ``whole``."""
    return whole is not None and whole[: len(part)] == part


def _short(paths: list[dict], most: int = 4) -> str:
    """Path segments for a table cell: the first ``most`` and how many more."""
    cell = "; ".join(f"{p['path']} q{p['queues']} x{p['packets']}" for p in paths[:most])
    return cell + (f"; ... {len(paths) - most} more" if len(paths) > most else "")


def analyse(
    plan: dict,
    answers: list[dict],
    status: dict,
    res,
    routes: dict,
    t0: int,
    url: str,
    spec: str,
    decided: list[dict],
) -> dict:
    """Hold every packet of the run to what the controller had decided when it was created:
    every decision of the controller (``decided``, from its log) must be one the agent applied,
    and every packet must have followed what the agent had applied when it was sent."""
    k = plan["dilation"]
    if status.get("changes_dropped"):
        raise LatnetError(
            f"the host agent kept only its last {len(status['changes'])} changes "
            f"({status['changes_dropped']} dropped): this run cannot be checked against them"
        )
    scen = lambda real: (real - t0) / k  # noqa: E731 (scenario ns from the traffic's start)
    name_of = {a["answer"]["id"]: a["flow"] for a in answers if a["answer"]["admitted"]}
    deadline = {a["flow"]: a["deadline_ns"] for a in answers if a["answer"]["admitted"]}
    # each flow's states: (instant from which every packet sent gets it, path or None for the
    # best-effort route, what, guarantee, instant before which no packet got it)
    states: dict[str, list[tuple[float, tuple | None, str, int | None, float]]] = {}
    changes = []
    # per log entry: when its request was issued and when the service's answer was read (an
    # agent may apply the change before the client has read the answer)
    answered = {a["seq"]: (a["issued_real_ns"], a["answered_real_ns"]) for a in answers}
    for a in answers:
        if "removal" in a:
            r = a["removal"]
            answered[r["seq"]] = (r["issued_real_ns"], r["answered_real_ns"])
    for c in status["changes"]:
        name = name_of.get(c["flow"])
        if name is None:
            continue
        path = None
        if c["what"] != "remove":
            path = _route(c["path"], c["tags"], plan, f"change of flow {name} (entry {c['seq']})")
        g = c.get("guarantee_ns")
        start = scen(c.get("t_start_ns", c["t_ns"]))
        states.setdefault(name, []).append((scen(c["t_ns"]), path, c["what"], g, start))
        cause = answered.get(c["seq"])
        lag = (c["t_ns"] - cause[1]) / 1e3 if cause else None
        since = (c["t_ns"] - cause[0]) / 1e3 if cause else None
        changes.append(
            {"flow": name, "id": c["flow"], "what": c["what"], "why": c["why"]}
            | {"t_ns": scen(c["t_ns"]), "lag_after_answer_us": lag, "after_request_us": since}
            | {"t_start_ns": start, "guarantee_ns": g, "path": c["path"]}
            | {"tags": c["tags"], "seq": c["seq"]}
        )
    for a in answers:
        a["issued_ns"] = scen(a["issued_real_ns"])
        a["answered_ns"] = scen(a["answered_real_ns"])
        if "removal" in a:
            a["removal"]["answered_ns"] = scen(a["removal"]["answered_real_ns"])
        a["rerouted"] = [name_of.get(i, i) for i in a["answer"].get("rerouted", [])]
    # each sender's worst lateness (scenario time, as the emulation report gives it)
    senders = {s["flow"]: s for s in (res.summary.get("emulation") or {}).get("senders") or []}
    flows = []
    ok = True
    hops = res.hops
    pk = res.packets
    for f in res.summary["flows"]:
        name = f["name"]
        be = routes.get(f["src"], {}).get(f["dst"])
        what = f"best-effort route {f['src']} to {f['dst']}"
        be = _route(be["path"], be["tags"], plan, what) if be else None
        st = sorted(states.get(name, []))
        late = (senders.get(name) or {}).get("late_max_ns", 0)
        h = hops[hops["flow"] == name].sort_values(["seq", "hop"])
        took = _took(h)
        p = pk[pk["flow"] == name].set_index("seq")
        misrouted = wrong_queue = early = lost_admitted = over = 0
        dropped_at: dict[str, int] = {}
        worst_g = 0.0
        segments: list[dict] = []
        for seq, row in p.iterrows():
            c = row["created_ns"]
            i = max((j for j, s in enumerate(st) if s[0] <= c), default=-1)
            now_path = st[i][1] if i >= 0 else None
            admitted = i >= 0 and st[i][2] != "remove"
            want = now_path if admitted else be
            path = took.get(seq)
            received = row["latency_ns"] == row["latency_ns"]  # not NaN
            if path is not None and not received:
                # dropped on the way: the switches it reached must be the start of its path
                dropped_at[str(row["drop_node"])] = dropped_at.get(str(row["drop_node"]), 0) + 1
                later = [s for s in st[i + 1 :] if s[4] <= c + late]
                if not _starts(want, path) and not any(
                    _starts(s[1] if s[2] != "remove" else be, path) for s in later
                ):
                    misrouted += 1
                path = None
            if path is not None and path != want:
                # sent late, after a change that followed its creation?
                later = [s for s in st[i + 1 :] if s[4] <= c + late]
                if any((s[1] if s[2] != "remove" else be) == path for s in later):
                    early += 1
                else:
                    misrouted += 1
                    # the right switches and ports, another class at one of them
                    wrong_queue += want is not None and [h[:2] for h in want] == [
                        h[:2] for h in path
                    ]
            if path is not None:
                key = {"path": _nodes(path), "queues": _queues(path)}
                if segments and all(segments[-1][x] == key[x] for x in key):
                    segments[-1]["to_seq"] = int(seq)
                    segments[-1]["packets"] += 1
                else:
                    segments.append(key | {"from_seq": int(seq), "to_seq": int(seq)})
                    segments[-1]["packets"] = 1
            if admitted:
                lat = row["latency_ns"]
                if lat != lat:  # NaN: not received
                    lost_admitted += 1
                else:
                    if lat > deadline[name]:
                        over += 1
                    g = st[i][3]
                    if g:
                        worst_g = max(worst_g, lat / g)
        lat = p["latency_ns"].dropna()
        shaper = None
        for hs in status["hosts"].values():
            for fid, fl in hs["flows"].items():
                if name_of.get(int(fid)) == name:
                    shaper = {"tagged": fl["tagged"]} | fl["shaper"]
        row = {
            "name": name,
            "src": f["src"],
            "dst": f["dst"],
            "requested": name in {a["flow"] for a in answers},
            "admitted": name in deadline,
            "sent": int(len(p)),
            "received": int(lat.size),
            "lost_while_admitted": lost_admitted,
            "dropped_at": dropped_at,
            "paths": segments,
            "best_effort_path": _nodes(be) if be else None,
            "best_effort_queues": _queues(be) if be else None,
            "misrouted": misrouted,
            "misrouted_queue_only": wrong_queue,
            "sent_late_across_a_change": early,
            "latency_ns": {
                "p50": float(np.percentile(lat, 50)) if lat.size else None,
                "p99": float(np.percentile(lat, 99)) if lat.size else None,
                "max": float(lat.max()) if lat.size else None,
            },
            "deadline_ns": deadline.get(name),
            "over_deadline": over,
            "guarantees_ns": sorted({s[3] for s in st if s[3]}),
            "max_latency_over_guarantee": worst_g if name in deadline else None,
            "throughput_bps": f.get("throughput_bps"),
            "shaper": shaper,
        }
        ok = ok and misrouted == 0 and lost_admitted == 0 and over == 0
        flows.append(row)
    missing = unapplied(decided, status["changes"], status.get("synced_seq", 0))
    for m in missing:
        m["flow"] = name_of.get(m["flow"], m["flow"])
        m["path"] = list(m["path"]) if m["path"] else None
        m["tags"] = list(m["tags"]) if m["tags"] else None
    ok = ok and not missing
    # a machine that fell behind by half the tightest deadline (a virtual machine's pause, a
    # core taken away) may have broken a deadline by itself: said, so a miss is not blamed on
    # the controller
    emu = res.summary.get("emulation") or {}
    stall_ns = min(deadline.values()) // 2 if deadline else None
    stalled = stall_ns is not None and emu.get("late_max_ns", 0) > stall_ns
    return {
        "controller": url,
        "spec": spec,
        "dilation": k,
        "duration_ns": plan["duration_ns"],
        "tag_allowance_bytes": plan["tag_allowance_bytes"],
        "requests": answers,
        "changes": changes,
        "not_applied": missing,
        "flows": flows,
        "agent": {
            kk: status.get(kk)
            for kk in ("polls", "controller_errors", "last_error", "shaper", "order", "resyncs")
        }
        | {
            "agents": len(status["peers"]) if isinstance(status.get("peers"), list) else 1,
            "peers": status.get("peers"),
        },
        "emulation": res.summary.get("emulation"),
        "stall_ns": stall_ns,
        "stalled": stalled,
        "ok": ok,
    }
