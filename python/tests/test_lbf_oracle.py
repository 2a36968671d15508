"""The simulator's LBF against an independent oracle: the seed's multi-hop test recomputed here in
a few dozen lines of integer-nanosecond arithmetic, from the reference notes' description of the
proof of concept (per-hop budget, eligible time, one non-preemptive server per queue serving
eligible packets in eligible order) and the scenario files, without the simulator's event loop,
queues or LBF code.

If the two agree on every cell of the six tests, the remaining distance to the paper's tables
(docs/lbf.md) is not a bug in the simulator's implementation of the seed's algorithm.
"""

from __future__ import annotations

import pytest
import tomllib

import latnet
from latnet.reproduce.lbf import experiments_dir

US = 1_000


def _ns(text: str) -> int:
    """A scenario duration ('100us', '10ms', '1s') in ns."""
    for unit, f in (("ns", 1), ("us", US), ("ms", 1_000_000), ("s", 1_000_000_000)):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return round(float(text[: -len(unit)]) * f)
    raise ValueError(f"not a duration: {text!r}")


def _bps(text: str) -> int:
    assert text.endswith("Mbps"), text
    return int(text[:-4]) * 1_000_000


def sends(traffic: dict, size: int, until: int) -> list[int]:
    """The seed's sender: per period, the base rate before the burst (each segment restarting its
    grid at floor(k * gap)), the burst rate for the last `burst` of the period."""
    period, burst = _ns(traffic["period"]), _ns(traffic["burst"])
    at = period - burst
    bits = size * 8
    segments = [(0, at, _bps(traffic["base_rate"])), (at, period, _bps(traffic["burst_rate"]))]
    out = []
    for p0 in range(0, until, period):
        for s0, s1, rate in segments:
            k = 0
            while s0 + k * bits * 10**9 // rate < s1:
                t = p0 + s0 + k * bits * 10**9 // rate
                if t < until:
                    out.append(t)
                k += 1
    return sorted(out)


def serve(packets: list[tuple[int, int, int, int]], ser: int) -> dict[int, int]:
    """One non-preemptive server of `ser` ns per packet that never starts a packet before its
    eligible time and, when free, starts the earliest eligible one (ties: earlier enqueued, then
    the given order key). packets: (eligible, enqueued, order, id). Returns id -> start."""
    start, free = {}, -(10**18)
    for eligible, _enq, _order, pid in sorted(packets):
        s = max(eligible, free)
        start[pid] = s
        free = s + ser
    return start


def oracle(test: str) -> list[tuple[int, float, int]]:
    """min / mean / max (ns) of F1 at Q1..Q4 and at the receiver, from the scenario file."""
    sc = tomllib.loads((experiments_dir() / f"{test}.toml").read_text())
    link = sc["defaults"]["link"]
    delay, rate = _ns(link["delay"]), _bps(link["rate"])
    assert sc["sim"]["latency"] == "exclude-serialization"
    assert sc["sim"]["switching"] == "cut-through"
    assert sc["sim"]["tie_break"] == "flow-desc" and sc["lbf"]["budget"] == "equal"
    until = _ns(sc["sim"]["duration"])  # 10 s, as the paper's runs
    flows = {f["name"]: f for f in sc["flows"]}
    path = ["S1", "FWD1", "FWD2", "FWD3", "FWD4", "R1"]
    f1 = flows["F1"]
    ser = f1["size"] * 8 * 10**9 // rate
    lower = _ns(f1.get("slo", {}).get("lower", "0us"))

    def at_nic(ts: list[int]) -> list[int]:
        """A host's own 100 Mbit/s NIC: FIFO, one serialization per frame; cut-through."""
        out, free = [], -(10**18)
        for t in ts:
            free = max(t, free) + ser
            out.append(free - ser + delay)
        return out

    sent = sends(f1["traffic"], f1["size"], until)
    arrive = at_nic(sent)
    # the competing flow entering at each forwarder: the one whose source links to it
    links = {(ln["a"], ln["b"]) for ln in sc["links"]}
    rows = []
    for hop in range(1, 5):
        node, rest = path[hop], 5 - hop  # remaining hops (this one included)
        rest_min = rest * delay  # remaining minimum latency: one link delay per hop left
        pk = []
        for i, a in enumerate(arrive):
            so_far = a - sent[i]
            qmin = max(0, lower - (so_far + rest_min)) // rest
            pk.append((a + qmin, a, 1, ("F1", i)))
        for name, f in flows.items():
            if name != "F1" and (f["src"], node) in links:
                ts = sends(f["traffic"], f["size"], until)
                # flow-desc: at one instant the competing flow's arrival is handled first
                pk += [(a, a, 0, (name, j)) for j, a in enumerate(at_nic(ts))]
        start = serve(pk, ser)
        lat = [start[("F1", i)] - sent[i] for i in range(len(sent))]
        rows.append(lat)
        arrive = [start[("F1", i)] + delay for i in range(len(sent))]
    rows.append([x + delay for x in rows[-1]])
    return [(min(r), sum(r) / len(r), max(r)) for r in rows]


def simulated(test: str) -> list[tuple[int, float, int]]:
    res = latnet.run(experiments_dir() / f"{test}.toml", packets=False)
    f = res.summary["flows"][0]
    assert f["name"] == "F1"
    lats = [h["latency_ns"] for h in f["hops"][1:5]] + [f["latency_ns"]]
    return [(x["min"], x["mean"], x["max"]) for x in lats]


@pytest.mark.parametrize("test", [f"test{i}" for i in range(1, 7)])
def test_simulator_agrees_with_the_oracle(test):
    ours, ref = simulated(test), oracle(test)
    for row, (o, r) in enumerate(zip(ours, ref, strict=True)):
        # min and max to the nanosecond; means to 1 ns (the simulator sums in integers)
        assert o[0] == r[0] and o[2] == r[2] and abs(o[1] - r[1]) <= 1.0, (test, row, o, r)
