"""`latnet reproduce ffp --quick`: structure of the output and decision equality (timings are
measured and printed, never asserted)."""

from __future__ import annotations

import json

from latnet import _latnet
from latnet.cli import main
from latnet.reproduce import ffp


def test_reproduce_ffp_quick_structure_and_equality(tmp_path, capsys):
    assert main(["reproduce", "ffp", "--quick", "--out", str(tmp_path)]) == 0

    def no_constants(c):
        raise AssertionError(f"{c} is not JSON")

    # strict JSON: an empty part's time is null, never NaN
    doc = json.loads((tmp_path / "reproduce-ffp.json").read_text(), parse_constant=no_constants)
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
    assert ll["wsm"]["paper"]["note"] == "no significant difference"
    mixed = doc["tables"][2]["rows"]
    assert [r["label"] for r in mixed] == ["0%", "20%", "50%", "80%", "100%"]
    assert mixed[0]["ours"]["pof_ll_ns"] is None and mixed[-1]["ours"]["pof_normal_ns"] is None
    assert mixed[1]["ours"]["pof_ll_ns"] > 0
    # every measured packet was decided as the plain pipeline decides it
    assert doc["tables"][-1]["rows"][0]["ours"]["mismatches"] == 0
    for name in ffp.SCENARIOS:
        assert (tmp_path / "ffp-rules" / f"{name}.jsonl").stat().st_size > 0
    out = capsys.readouterr().out
    assert "paper less %" in out and "decisions that differ from the plain pipeline: 0" in out
    assert "no packet I/O" in out and "nan" not in out


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


def test_ffp_compare_times_every_pipeline_on_the_same_packets():
    spec = (
        'scenario = "acl"\nrules = 40\nroutes = 64\nll_rules_permille = 500\nflows = 16\nseed = 4\n'
    )
    r = _latnet.ffp_compare(spec, 500, 3000, 256, 3)
    assert r["mismatches"] == 0
    assert r["ll_packets"] + r["normal_packets"] == 3000 and r["ll_packets"] > 0
    for key in ("pof", "pof_ffp", "pof_ffp_bitwise", "strong", "strong_ffp"):
        e = r[key]
        assert len(e["ll_ns"]) == len(e["normal_ns"]) == len(e["all_ns"]) == 3
        assert all(x > 0 for x in e["all_ns"])
        # only the composite pipelines have a fast path, and it is used
        assert (e["lut_hits"] > 0) == key.endswith(("ffp", "bitwise"))


def test_ffp_compare_refuses_a_bad_workload_spec():
    import pytest

    with pytest.raises(_latnet.LatnetError, match="workload spec"):
        _latnet.ffp_compare("scenario = 3", 500, 10, 128, 1)
