"""`latnet reproduce lbf --emulated --quick`: the LBF seed's six multi-hop tests, the
upper-bound experiment and the damper on real packets (root: it creates network namespaces; CI
runs as root), 80 times dilated. (The paper's other Fig. 7 / 8 columns run only without
`--quick`: they are tests 3 and 4 with flows removed.)

Every F1 packet arrives; the LBF runs never release F1 before the simulator's earliest at any
hop; every minimum is within 10 us of the paper's (where best-effort F1 races F2, that is F1
winning some of those races, which the simulator's flow-desc rule never lets it: 24 us above);
every mean within 10 us of the simulator's. The maxima carry the machine's stalls (a few ms of wall
clock, up to 60 us here) and are printed, not asserted. The reproduction runs a run the machine
stalled (more than `lbf_emu.STALL_NS`) again and keeps the least stalled attempt; a run still
stalled then is printed, not judged, and more than `MOST_STALLED` of them fail the test. On real
packets the upper bound sheds F1's packets at the forwarders the simulator names, in about its
numbers, and the damper and LBF order the receiver's spread as in the simulator."""

from __future__ import annotations

import json
import os

import pytest

#: Runs on the machine's clock: `make py-test` runs these tests alone (scripts/py-test.sh).
pytestmark = pytest.mark.realtime

if os.geteuid() != 0:
    pytest.skip(
        "emulated reproduction creates network namespaces and needs root (CI runs as root)",
        allow_module_level=True,
    )

from latnet._latnet import duration_ns  # noqa: E402
from latnet.cli import main  # noqa: E402
from latnet.reproduce import lbf, lbf_emu  # noqa: E402

#: The issue's tolerance for the seed's real-time run (test 4: every cell within 10 us).
TOLERANCE_US = 10.0
#: Both ends read CLOCK_MONOTONIC in ns: no frame leaves before its instant beyond this.
GRANULARITY_US = 1.0


#: Most runs whose kept attempt may still carry a stall of the machine (the reproduction runs
#: a stalled run up to `lbf_emu.ATTEMPTS` times): their means are printed, not judged. More than
#: this and the emulation measured the machine, not the network: the test fails.
MOST_STALLED = 2


def _reproduce(out) -> dict:
    assert main(["reproduce", "lbf", "--emulated", "--quick", "--out", str(out)]) == 0
    return json.loads((out / "reproduce-lbf-emulated.json").read_text())


def test_reproduce_lbf_emulated_quick(tmp_path, capsys):
    doc = _reproduce(tmp_path)
    # every attempt's lateness, the kept one's in the run's own account
    stalled = doc["stalled"]
    assert doc["stall_ns"] == lbf_emu.STALL_NS
    for name, late in doc["attempts"].items():
        assert 1 <= len(late) <= lbf_emu.ATTEMPTS, (name, late)
        assert all(ns > lbf_emu.STALL_NS for ns in late[:-1]), (name, late)
        kept = {"emulation": doc["emulation"][name], "dilation": lbf_emu.DILATION}
        assert min(late) == lbf_emu.machine_late_ns(kept), name
        assert (name in stalled) == (min(late) > lbf_emu.STALL_NS), name
    assert len(stalled) <= MOST_STALLED, doc["attempts"]
    assert doc["seed"] == "lbf" and doc["mode"] == "emulated" and doc["quick"] is True
    by = {t["id"]: t for t in doc["tables"]}
    runs = [tid for tid, _ in lbf.TESTS]
    assert list(by) == [f"{r}-emulated" for r in runs] + ["upper-emulated", "compare-emulated"]
    papers = {**lbf.PAPER, **lbf.PAPER_COLUMNS}
    for tid in runs:
        t = by[f"{tid}-emulated"]
        assert f"dilation {lbf_emu.DILATION}" in t["convention"], t["convention"]
        rows = t["rows"]
        assert [r["label"] for r in rows] == lbf.ROWS
        for r, paper in zip(rows, papers[tid], strict=True):
            assert r["paper"] == dict(zip(lbf.COLS, paper, strict=True))
            o = r["ours"]
            assert abs(o["min"] - r["paper"]["min"]) <= TOLERANCE_US, (tid, r)
            if tid not in stalled:
                assert abs(o["mean"] - r["sim"]["mean"]) <= TOLERANCE_US, (tid, r)
            assert o["min"] <= o["mean"] <= o["max"], (tid, r)
            if tid not in lbf_emu.BE_VS_F2:
                # LBF: the lower bound's share holds on real packets
                assert o["min"] >= r["sim"]["min"] - GRANULARITY_US, (tid, r)
        if tid in lbf_emu.BE_VS_F2:
            # F1 won some ties: below the simulator's flow-desc minimum (paper + 24 us)
            assert rows[0]["ours"]["min"] < rows[0]["sim"]["min"] - 12, (tid, rows[0])
    for name in runs + ["upper-drop", "upper-mark", "damper"]:
        run = json.loads((tmp_path / "lbf-emulated" / name / "results.json").read_text())
        f1 = run["flows"][0]
        assert f1["name"] == "F1" and f1["sent"] > 0, f1
        assert run["dilation"] == lbf_emu.DILATION
        assert run["duration_ns"] == duration_ns(lbf_emu.QUICK_DURATION)
        if name != "upper-drop":
            assert f1["sent"] == f1["received"], (name, f1)
        # the run's account of its timing, also in the document
        assert doc["emulation"][name] == run["emulation"], name
        assert [s["node"] for s in run["emulation"]["switches"]] == ["FWD1", "FWD2", "FWD3", "FWD4"]

    # the upper bound on real packets: F1 shed where the simulator sheds it, in about its numbers
    upper = {r["label"]: r for r in by["upper-emulated"]["rows"]}
    rx = upper.pop("receiver")
    assert rx["ours"]["sent"] == rx["sim"]["sent"] == rx["ours"]["received_with_mark"]
    judged = not {"upper-drop", "upper-mark"} & set(stalled)
    for col in ("expired_in_queue", "marked_late", "dropped_early") if judged else ():
        sim = sum(r["sim"][col] for r in upper.values())
        emu = sum(r["ours"][col] for r in upper.values())
        assert abs(emu - sim) <= max(5, sim / 5), (col, upper)
        for r in upper.values():
            assert (r["ours"][col] > 0) <= (r["sim"][col] > 0) or r["ours"][col] <= 2, (col, r)
    shed = rx["ours"]["sent"] - rx["ours"]["received_with_drop"]
    assert shed == sum(
        r["ours"]["expired_in_queue"] + r["ours"]["dropped_early"] for r in upper.values()
    )
    assert rx["ours"]["notifications"] == sum(r["ours"]["marked_late"] for r in upper.values())

    # FIFO / LBF / damper at the receiver: the damper's spread is the smallest, FIFO's the largest
    cmp = {r["label"]: r["ours"] for r in by["compare-emulated"]["rows"]}
    spread = [cmp[label]["max-min"] for label, _ in lbf_emu.COMPARE]
    fifo, lbf700, _, damper = spread
    if not {"test3", "test4", "damper"} & set(stalled):
        assert damper < lbf700 < fifo, spread
    assert cmp["gLBF damper B=250us"]["min"] >= 1500 - GRANULARITY_US, cmp
    out = capsys.readouterr().out
    assert "test4-emulated" in out and "largest |emulated - simulated|" in out
    assert "upper-emulated" in out and "compare-emulated" in out
    timing = [x for x in out.splitlines() if "emulation timing:" in x]
    assert [x.split(":")[0] for x in timing] == list(doc["emulation"]), timing
    for name, late in doc["attempts"].items():
        said = f"{name}: the machine stalled it by more than 5.00 ms: {len(late)} attempt"
        assert (said in out) == (max(late) > lbf_emu.STALL_NS), (name, late)
