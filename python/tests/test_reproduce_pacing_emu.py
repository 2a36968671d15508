"""`latnet reproduce pacing --emulated --quick`: the seed's schedule on real Linux CUBIC through
an emulated switch counting large flows (root: it creates network namespaces; CI runs as root).
The paced modes (kernel HTB re-shaped by `tc` from every REPORT, and the socket's pacing cap)
must meet the seed's targets on the last period and lose less at the bottleneck than regular TCP,
which fills the buffer and is less fair (HTB loses nothing). The reproduction runs a mode the
machine stalled (its switch more than `pacing_emu.STALL_NS` behind) again and keeps the least
stalled attempt; a paced mode still stalled then has its targets printed, not judged. With both
paced modes stalled the test checks all else and is skipped, saying so: the machine gave it
nothing to judge the targets by."""

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

from latnet.cli import main  # noqa: E402
from latnet.reproduce import pacing, pacing_emu  # noqa: E402


def test_reproduce_pacing_emulated_quick(tmp_path, capsys):
    assert main(["reproduce", "pacing", "--emulated", "--quick", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "reproduce-pacing-emulated.json").read_text())
    assert doc["seed"] == "pacing" and doc["mode"] == "emulated" and doc["quick"] is True
    by = {t["id"]: t for t in doc["tables"]}
    assert list(by) == ["regular", "htb", "per-connection", "targets"]
    for mode in ("regular", "htb", "per-connection"):
        rows = by[mode]["rows"]
        assert [len([k for k in r["ours"] if k.startswith("cv")]) for r in rows] == [1, 2, 3, 4]
    assert by["htb"]["rows"][3]["paper"]["sum"] == pacing.PAPER["htb"][3][0]
    stalled = doc["stalled"]
    for mode, late in doc["attempts"].items():
        assert 1 <= len(late) <= pacing_emu.ATTEMPTS, (mode, late)
        assert all(ns > pacing_emu.STALL_NS for ns in late[:-1]), (mode, late)
        assert min(late) == doc["emulation"][mode]["late_max_ns"], mode
        assert (mode in stalled) == (min(late) > pacing_emu.STALL_NS), mode

    assert by["regular"]["counter"]["registered"] == 0
    assert all(s["counts"] == [] for s in by["regular"]["senders"])
    assert sum(by["regular"]["bottleneck"]["drops"].values()) > 0, "CUBIC fills the FIFO"
    last = {r["label"]: r["ours"] for r in by["targets"]["rows"]}
    for mode, pace in (("htb", "htb:"), ("per-connection", "socket")):
        t = by[mode]
        assert t["counter"]["registered"] == 4, t["counter"]
        for i, s in enumerate(t["senders"]):
            assert s["pace"].startswith(pace) and s["pacing_errors"] == 0, s
            # told its N in the SYN-ACK (i flows already running), then every change
            assert s["counts"][0] == i + 1 and max(s["counts"]) == 4, s
        # the paced senders lose less at the bottleneck than regular TCP (HTB nothing at all:
        # its bucket holds two frames; the socket cap can lose a few when the machine is
        # busy, since the kernel's pacing catches up on late timers at up to twice the rate)
        drops = sum(t["bottleneck"]["drops"].values())
        assert drops < sum(by["regular"]["bottleneck"]["drops"].values()), t["bottleneck"]
        if mode == "htb":
            assert drops == 0, t["bottleneck"]
        # the seed's targets for the last period
        if mode not in stalled:
            assert last[mode]["utilisation_pct"] >= pacing.TARGET_UTIL_PCT, last
            assert last[mode]["jain"] >= pacing.TARGET_JAIN, last
        if not {mode, "regular"} & set(stalled):
            assert last[mode]["jain"] > last["regular"]["jain"], last
    assert (tmp_path / "reproduce-pacing-emulated.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "emulated, Linux TCP" in out
    # how late the machine made the switch, per mode: the run's results.json and the document
    for mode in ("regular", "htb", "per-connection"):
        e = doc["emulation"][mode]
        run = tmp_path / "pacing-emulated" / mode / "results" / "results.json"
        assert json.loads(run.read_text())["emulation"] == e, mode
        assert [s["node"] for s in e["switches"]] == ["left"], e
        assert e["switches"][0]["forwarded"] > 10_000 and e["senders"] == e["receivers"] == []
        assert f"{mode}: emulation timing: switches sent " in out, mode
    if {"htb", "per-connection"} <= set(stalled):
        pytest.skip(f"the machine stalled both paced modes in every attempt: {doc['attempts']}")


def test_intervals_follow_the_receivers_bins():
    from latnet.reproduce.pacing_emu import LEAD_S, intervals

    lead = round(LEAD_S / 0.1)
    # dtn1 from the start, dtn2 one period (1 s) later; 10 bins of 100 ms per period
    rx = {
        "conns": [
            {"peer": "10.0.0.1:40000", "bins": [0] * lead + [1000] * 40},
            {"peer": "10.0.0.2:40001", "bins": [0] * (lead + 10) + [500] * 30},
        ]
    }
    flows = {"10.0.0.1": "dtn1", "10.0.0.2": "dtn2"}
    ts = intervals(rx, flows, period_s=1.0, interval_s=0.5)
    one = ts[ts["flow"] == "dtn1"]
    two = ts[ts["flow"] == "dtn2"]
    assert list(one["t_s"]) == [0.5 * k for k in range(1, 9)]
    assert set(one["goodput_bps"]) == {8 * 5000 / 0.5}
    assert list(two["t_s"]) == [0.5 * k for k in range(3, 9)]
    assert set(two["goodput_bps"]) == {8 * 2500 / 0.5}
