"""`latnet reproduce ffp --quick`: structure of the output and decision equality (timings are
measured and printed, never asserted)."""

from __future__ import annotations

import json

from latnet import _latnet
from latnet.cli import main
from latnet.reproduce import ffp


def test_reproduce_ffp_quick_structure_and_equality(tmp_path, capsys):
    assert main(["reproduce", "ffp", "--quick", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "reproduce-ffp.json").read_text())
    assert doc["seed"] == "ffp" and doc["quick"] is True
    ids = [t["id"] for t in doc["tables"]]
    assert ids == [
        "ll-delay",
        "line-rate",
        "mixed-acl",
        "mixed-seadp",
        "mixed-wsm",
        "churn",
        "equality",
    ]
    ll = {r["label"]: r for r in doc["tables"][0]["rows"]}
    assert set(ll) == {"acl", "seadp", "wsm"}
    for r in ll.values():
        assert r["ours"]["pof_ns"] > 0 and r["ours"]["pof_ffp_ns"] > 0
        assert {"reduction_pct_low", "reduction_pct_high"} <= set(r["paper"])
    mixed = doc["tables"][2]["rows"]
    assert [r["label"] for r in mixed] == ["0%", "20%", "50%", "80%", "100%"]
    # every measured packet was decided as the plain pipeline decides it
    assert doc["tables"][-1]["rows"][0]["ours"]["mismatches"] == 0
    for name in ffp.SCENARIOS:
        assert (tmp_path / "ffp-rules" / f"{name}.jsonl").stat().st_size > 0
    out = capsys.readouterr().out
    assert "paper less %" in out and "decisions that differ from the plain pipeline: 0" in out


def test_ffp_measure_checks_decisions_and_refuses_bad_input():
    spec = (
        'scenario = "wsm"\nrules = 8\nroutes = 16\nll_rules_permille = 500\nflows = 8\nseed = 3\n'
    )
    r = _latnet.ffp_measure(spec, "strong", True, 500, 2000, 128, 1)
    assert r["mismatches"] == 0
    assert r["ll_packets"] + r["normal_packets"] == 2000
    assert r["lut_hits"] > 0
    import pytest

    with pytest.raises(_latnet.LatnetError, match="algo"):
        _latnet.ffp_measure(spec, "fast", True, 500, 10, 128, 1)
    with pytest.raises(_latnet.LatnetError, match="workload spec"):
        _latnet.ffp_measure("scenario = 3", "pof", True, 500, 10, 128, 1)
