"""The check `latnet chameleon live` makes of every packet (`latnet.live.analyse`), on made-up
hop records: no namespaces, no service. A packet must have followed, switch by switch and
class by class, what the host agent had applied when it was created."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from latnet import LatnetError
from latnet.live import analyse

T0 = 5_000_000_000  # the traffic's time zero, real ns
PATH = ["h1", "s1", "s2", "h2"]


# the switches' ports (global numbers) by local number: s1's 1 and 2 are parallel links to s2
PORTS = {"s1": [10, 11, 12, 13], "s2": [20, 21, 22], "s3": [30, 31]}


def run(
    hop_rows: list[tuple], created: list[int], tags=(11, 11), be_tags=(12, 12), decided_tags=None
) -> dict:
    """Flow a admitted at 1 us on PATH with ``tags`` (base 10: port 1, class 1 at s1 and s2),
    as the controller decided (``decided_tags``: it decided other tags); before, its source's
    best-effort route, the same ports with ``be_tags`` (class 2). ``hop_rows``: (seq, hop,
    node, port, priority); ``created``: each packet's creation (scenario ns)."""
    plan = {"dilation": 1, "tag_base": 10, "duration_ns": 10_000, "tag_allowance_bytes": 8}
    plan["ports"] = PORTS
    answers = [
        {"flow": "a", "seq": 1, "issued_real_ns": T0 + 500, "answered_real_ns": T0 + 900}
        | {"deadline_ns": 1_000_000, "answer": {"admitted": True, "id": 7}}
    ]
    change = {"flow": 7, "what": "add", "why": "new", "path": PATH, "tags": list(tags)}
    status = {
        "changes": [change | {"t_ns": T0 + 1_000, "seq": 1, "guarantee_ns": 500_000}],
        "hosts": {},
        "synced_seq": 0,
    }
    cols = ["seq", "hop", "node", "port", "priority"]
    hops = pd.DataFrame(hop_rows, columns=cols).assign(flow="a")
    packets = pd.DataFrame(
        {"seq": range(len(created)), "created_ns": created}
        | {"latency_ns": [50_000.0] * len(created), "drop_node": [None] * len(created)}
    ).assign(flow="a")
    res = SimpleNamespace(
        summary={"flows": [{"name": "a", "src": "h1", "dst": "h2"}], "emulation": None},
        hops=hops,
        packets=packets,
    )
    routes = {"h1": {"h2": {"path": PATH, "tags": list(be_tags)}}}
    decided = [{"seq": 1, "flow": 7, "path": tuple(PATH), "tags": tuple(decided_tags or tags)}]
    return analyse(plan, answers, status, res, routes, T0, "http://x", "spec.toml", decided)


def took(seq: int, nodes=("h1", "s1", "s2"), classes=(0, 1, 1), ports=(0, 11, 21)) -> list:
    """The hop records of packet ``seq``."""
    at = zip(nodes, ports, classes, strict=True)
    return [(seq, i, n, p, q) for i, (n, p, q) in enumerate(at)]


def test_each_packet_in_the_classes_its_tags_picked_is_routed_right():
    rows = took(0, classes=(0, 2, 2)) + took(1) + took(2)
    doc = run(rows, [0, 2_000, 3_000])
    (f,) = doc["flows"]
    assert f["misrouted"] == 0 and doc["ok"], f
    assert f["best_effort_path"] == "h1-s1-s2" and f["best_effort_queues"] == "2-2"
    # best effort in class 2 before the admission, class 1 after
    segments = [(p["path"], p["queues"], p["packets"]) for p in f["paths"]]
    assert segments == [("h1-s1-s2", "2-2", 1), ("h1-s1-s2", "1-1", 2)]


def test_a_packet_on_the_right_switches_in_another_class_is_misrouted():
    # packet 0 in class 1 before the flow was admitted (best effort is class 2); packet 1 in
    # class 2 at s2 (its tag said 1); packet 2 at s3 instead of s2; packet 3 over the other of
    # the parallel links from s1 to s2, in the right classes
    rows = took(0, classes=(0, 1, 1)) + took(1, classes=(0, 1, 2))
    rows += took(2, ("h1", "s1", "s3"), ports=(0, 13, 31)) + took(3, ports=(0, 12, 22))
    doc = run(rows, [0, 2_000, 3_000, 4_000])
    (f,) = doc["flows"]
    assert (f["misrouted"], f["misrouted_queue_only"]) == (4, 2), f
    assert not doc["ok"]
    # the host's own class is not the switches' business
    doc = run(took(0, classes=(5, 2, 2)) + took(1, classes=(3, 1, 1)), [0, 2_000])
    assert doc["flows"][0]["misrouted"] == 0 and doc["ok"]


def test_a_tag_stack_that_does_not_fit_the_path_is_a_named_error():
    with pytest.raises(LatnetError, match=r"change of flow a \(entry 1\): 1 tags for the 2"):
        run(took(0), [2_000], tags=(11,))
    with pytest.raises(LatnetError, match="tag 41 names port 4 of s2, which has none"):
        run(took(0), [2_000], tags=(11, 41))


def test_tags_the_agent_applied_other_than_the_controllers_are_not_applied():
    """The agent tagged the flow's path in other classes than the controller decided: its
    packets follow what the agent applied (no misrouted packet), but the decision is reported
    as not applied, and the run fails."""
    doc = run(took(0, classes=(0, 1, 1)), [2_000], decided_tags=(10, 11))
    assert doc["flows"][0]["misrouted"] == 0
    assert doc["not_applied"] == [{"seq": 1, "flow": "a", "path": PATH, "tags": [10, 11]}]
    assert not doc["ok"]
    assert run(took(0, classes=(0, 1, 1)), [2_000])["not_applied"] == []
