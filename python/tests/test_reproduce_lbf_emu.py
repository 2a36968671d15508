"""`latnet reproduce lbf --emulated --quick`: the LBF seed's six multi-hop tests on real packets
(root: it creates network namespaces; CI runs as root), 40 times dilated.

Every F1 packet arrives; the LBF tests never release F1 before its lower bound's share at any
hop; every minimum is within 10 us of the paper's (in tests 1 and 3 that is F1 winning some
of its races with F2, which the simulator's flow-desc rule never lets it: 24 us above); every
mean within 10 us of the simulator's. The maxima carry the machine's stalls (a few ms of wall
clock is up to 100 us here) and are printed, not asserted."""

from __future__ import annotations

import json
import os

import pytest

if os.geteuid() != 0:
    pytest.skip(
        "emulated reproduction creates network namespaces and needs root (CI runs as root)",
        allow_module_level=True,
    )

from latnet.cli import main  # noqa: E402
from latnet.reproduce import lbf  # noqa: E402

#: The issue's tolerance for the seed's real-time run (test 4: every cell within 10 us).
TOLERANCE_US = 10.0
#: Both ends read CLOCK_MONOTONIC in ns: no frame leaves before its instant beyond this.
GRANULARITY_US = 1.0


def test_reproduce_lbf_emulated_quick(tmp_path, capsys):
    assert main(["reproduce", "lbf", "--emulated", "--quick", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "reproduce-lbf-emulated.json").read_text())
    assert doc["seed"] == "lbf" and doc["mode"] == "emulated" and doc["quick"] is True
    assert [t["id"] for t in doc["tables"]] == [f"{tid}-emulated" for tid, _ in lbf.TESTS]
    for t in doc["tables"]:
        tid = t["id"].removesuffix("-emulated")
        assert "dilation 40" in t["convention"], t["convention"]
        rows = t["rows"]
        assert [r["label"] for r in rows] == lbf.ROWS
        for r, paper in zip(rows, lbf.PAPER[tid], strict=True):
            assert r["paper"] == dict(zip(lbf.COLS, paper, strict=True))
            o = r["ours"]
            assert abs(o["min"] - r["paper"]["min"]) <= TOLERANCE_US, (tid, r)
            assert abs(o["mean"] - r["sim"]["mean"]) <= TOLERANCE_US, (tid, r)
            assert o["min"] <= o["mean"] <= o["max"], (tid, r)
            if tid not in ("test1", "test3"):
                # LBF: the lower bound's share holds on real packets
                assert o["min"] >= r["sim"]["min"] - GRANULARITY_US, (tid, r)
        if tid in ("test1", "test3"):
            # F1 won some ties: below the simulator's flow-desc minimum (paper + 24 us)
            assert rows[0]["ours"]["min"] < rows[0]["sim"]["min"] - 12, (tid, rows[0])
        run = json.loads((tmp_path / "lbf-emulated" / tid / "results.json").read_text())
        f1 = run["flows"][0]
        assert f1["name"] == "F1" and f1["sent"] == f1["received"] > 0, f1
        assert run["dilation"] == 40 and run["duration_ns"] == 300_000_000
    out = capsys.readouterr().out
    assert "test4-emulated" in out and "largest |emulated - simulated|" in out
