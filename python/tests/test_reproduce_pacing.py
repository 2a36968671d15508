"""`latnet reproduce pacing --quick`: structure of the document, the seed's numbers beside
ours, and switch feedback making the four flows fairer than regular TCP."""

from __future__ import annotations

import json

from latnet.cli import main
from latnet.reproduce import pacing


def test_reproduce_pacing_quick(tmp_path, capsys):
    assert main(["reproduce", "pacing", "--quick", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "reproduce-pacing.json").read_text())
    assert doc["seed"] == "pacing" and doc["quick"] is True
    ids = [t["id"] for t in doc["tables"]]
    assert ids == ["regular", "htb", "fq", "per-connection", "targets"]
    by = {t["id"]: t for t in doc["tables"]}
    for mode in ("regular", "htb", "fq"):
        rows = by[mode]["rows"]
        assert len(rows) == 4
        assert [len([k for k in r["ours"] if k.startswith("cv")]) for r in rows] == [1, 2, 3, 4]
        assert rows[3]["paper"]["sum"] == pacing.PAPER[mode][3][0]
    # the switch counted four large flows with feedback, none without
    assert by["htb"]["counter"]["registered"] == 4
    assert by["regular"]["counter"]["registered"] == 0
    last = {r["label"]: r["ours"] for r in by["targets"]["rows"]}
    # pacing at C / N is fairer than letting CUBIC find the rate, and keeps the link full
    for mode in ("htb", "fq", "per-connection"):
        assert last[mode]["jain"] > last["regular"]["jain"], last
        assert last[mode]["utilisation_pct"] > 90, last
    assert (tmp_path / "reproduce-pacing.png").stat().st_size > 0
    assert (tmp_path / "pacing" / "htb.toml").is_file()
    assert "paper" in capsys.readouterr().out


def test_pacing_helpers():
    assert pacing.jain([1.0, 1.0, 1.0]) == 1.0
    assert abs(pacing.jain([1.0, 0.0]) - 0.5) < 1e-12
    assert pacing.cv_pct([2.0, 2.0]) == 0.0
    import pytest

    with pytest.raises(ValueError, match="mode"):
        pacing.scenario("tbf", 1.0, "1s")


def test_a_flow_without_goodput_prints_dashes_not_a_crash(capsys):
    """A flow that moves nothing in a period (stalled, starved) has no CV, and a period where
    no flow moves has no Jain's index: the tables print "-" and the document holds null (the
    printer raised TypeError on them, and the targets' Jain went into the JSON as NaN)."""
    import pandas as pd

    rows = [
        {"t_s": k * 3.0 + j + 1.0, "flow": f"dtn{i + 1}", "goodput_bps": 0.0 if i == 0 else 1e6}
        for k in range(4)
        for j in range(3)
        for i in range(k + 1)
    ]
    ps = pacing.periods(pd.DataFrame(rows), 3.0)
    t = pacing.mode_table("htb", ps, 3.0, {})
    assert t["rows"][0]["ours"]["cv1"] is None and t["rows"][0]["ours"]["jain"] is None
    assert t["rows"][1]["ours"]["cv2"] == 0.0
    targets = pacing.targets_table({"htb": ps, "fq": [{**p, "jain": float("nan")} for p in ps]})
    fq = next(r for r in targets["rows"] if r["label"] == "fq")["ours"]
    assert fq["jain"] is None and fq["meets_jain"] is False
    json.dumps([t, targets], allow_nan=False)
    out = capsys.readouterr().out
    assert "P1 (0-3 s)" in out and " - " in out
