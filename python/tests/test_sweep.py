"""Parameter sweeps and `--set`: keys set in a scenario's TOML, a grid of points x seeds on
local processes and on a Dask cluster started here (the same results either way), and clear
errors for bad keys, values and schedulers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import latnet
from latnet import sweep
from latnet.cli import main

ROOT = Path(__file__).parents[2]
DUMBBELL = ROOT / "experiments" / "dumbbell.toml"
# 300 ms of the dumbbell (the bursty flow starting at 100 ms): four flows offering about
# 120 Mbit/s to a 100 Mbit/s, 100-packet bottleneck
SHORT = [("sim.duration", "300ms"), ("sim.drain", "100ms"), ("flows[bursty3].start", "100ms")]


def test_values_split_at_top_level_commas_only():
    assert sweep.split_values("50Mbps, 100Mbps") == ["50Mbps", "100Mbps"]
    assert sweep.split_values('[1, 2],[3],"a,b"') == ["[1, 2]", "[3]", '"a,b"']
    two = '{ kind = "fifo", limit_packets = 5 },{ kind = "priority" }'
    assert sweep.split_values(two) == [
        '{ kind = "fifo", limit_packets = 5 }',
        '{ kind = "priority" }',
    ]
    for bad in ("[1, 2", "a,,b", '"open', "a,"):
        with pytest.raises(ValueError):
            sweep.split_values(bad)
    assert sweep.parse_assignment("links[0].rate=1Mbps,2Mbps", True) == (
        "links[0].rate",
        ["1Mbps", "2Mbps"],
    )
    assert sweep.parse_assignment("a.b = x=y", False) == ("a.b", ["x=y"])
    for text, many, why in (
        ("links[0].rate", True, "expected KEY=V1,V2"),
        ("=5", False, "expected KEY=VALUE"),
        ("a=", False, "expected a value"),
        ("a=1,1", True, "given twice"),
    ):
        with pytest.raises(ValueError, match=why):
            sweep.parse_assignment(text, many)


def test_points_are_the_cross_product_first_key_slowest():
    pts = sweep.points([("a", ["1", "2"]), ("b", ["x", "y", "z"])])
    assert [tuple(p.values()) for p in pts] == [
        ("1", "x"),
        ("1", "y"),
        ("1", "z"),
        ("2", "x"),
        ("2", "y"),
        ("2", "z"),
    ]
    assert sweep.points([]) == [{}]
    with pytest.raises(ValueError, match="varied twice"):
        sweep.points([("a", ["1"]), ("a", ["2"])])


def test_run_set_changes_the_run_and_names_bad_keys(tmp_path, capsys):
    """`latnet run --set` runs the scenario with the keys set: a 10 Mbit/s bottleneck carries
    a tenth of what the 100 Mbit/s one does, and the output lands under the scenario's
    name as without --set. A key that does not exist, or a value of the wrong kind, is a
    scenario error (exit 2) naming the file and the key; nothing is written."""
    sets = [a for k, v in SHORT for a in ("--set", f"{k}={v}")]
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    assert main(["run", str(DUMBBELL), "--quiet", "--out", str(out_a), *sets]) == 0
    slow = ["--set", "links[0].rate=10Mbps"]
    assert main(["run", str(DUMBBELL), "--quiet", "--out", str(out_b), *sets, *slow]) == 0
    a = json.loads((out_a / "results.json").read_text())
    b = json.loads((out_b / "results.json").read_text())
    assert a["scenario"] == b["scenario"] == "dumbbell"
    # bits delivered in 300 ms of sending and 100 ms of drain, at most rate x 400 ms
    ba = sum(8 * f["received"] * f["size"] for f in a["flows"])
    bb = sum(8 * f["received"] * f["size"] for f in b["flows"])
    assert 100e6 * 0.25 < ba <= 100e6 * 0.4, ba
    assert 10e6 * 0.25 < bb <= 10e6 * 0.4, bb
    capsys.readouterr()
    for key, value, why in (
        ("links[20].rate", "1Mbps", "index 20 is out of range: the scenario has 9 `links`"),
        ("flows[cbr9].size", "100", "no element of `flows` is named `cbr9`"),
        ("links[0].rate", "fast", "links[0].rate"),
        ("sim.durration", "1s", "durration"),
    ):
        out = tmp_path / "bad"
        rc = main(["run", str(DUMBBELL), "--out", str(out), "--set", f"{key}={value}"])
        err = capsys.readouterr().err
        assert rc == 2, (key, err)
        assert str(DUMBBELL) in err and why in err, (key, err)
        assert not out.exists()


def test_sweep_runs_every_point_and_seed_and_matches_single_runs(tmp_path, capsys):
    """A 2 x 2 grid over two seeds on two local processes: one row per run and flow in
    sweep.csv, each run equal to `latnet.run` of the same point and seed, the mean and sd over
    seeds in sweep-summary.csv, and the physics of the grid (a 20-packet queue drops more
    than a 200-packet one at the same rate; the faster bottleneck with the long queue loses
    nothing)."""
    out = tmp_path / "sw"
    argv = ["sweep", str(DUMBBELL), "--quiet", "--out", str(out), "--workers", "2"]
    argv += [a for k, v in SHORT for a in ("--set", f"{k}={v}")]
    argv += ["--vary", "links[0].rate=80Mbps,200Mbps"]
    argv += ["--vary", "links[0].queue.limit_packets=20,200", "--seeds", "2", "--plot"]
    assert main(argv) == 0
    assert (out / "sweep-latency_p99.png").stat().st_size > 10_000
    table = capsys.readouterr().out
    assert "mean ± sd over seeds" in table and "poisson2" in table
    df = pd.read_csv(out / "sweep.csv")
    assert len(df) == 2 * 2 * 2 * 4
    assert list(df.columns[:4]) == ["links[0].rate", "links[0].queue.limit_packets", "seed", "flow"]
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["seeds"] == [1, 2] and len(doc["runs"]) == 8
    # one run against the same point run on its own
    text = sweep.apply(DUMBBELL.read_text(), "t", SHORT + [("links[0].rate", "80Mbps")])
    text = sweep.apply(text, "t", [("links[0].queue.limit_packets", "20")])
    alone = latnet.run(text=text, seed=2, packets=False).flows
    row = df[(df["links[0].rate"] == "80Mbps") & (df["links[0].queue.limit_packets"] == 20)]
    row = row[row["seed"] == 2].set_index("flow")
    for _, f in alone.iterrows():
        assert row.loc[f["flow"], "received"] == f["received"]
        assert row.loc[f["flow"], "latency_p99_ns"] == f["latency_p99_ns"]
    # the seeds differ (Poisson arrivals), so the sd of the Poisson flow is above zero
    summ = pd.read_csv(out / "sweep-summary.csv")
    assert len(summ) == 4 * 4 and (summ["runs"] == 2).all()
    p = summ[summ["flow"] == "poisson2"]
    assert (p["latency_p99_ns_sd"] > 0).any()
    # two seeds: the mean's 95 % interval is t(1) = 12.706 standard errors wide each side
    want = 12.706 * p["latency_p99_ns_sd"] / np.sqrt(2)
    assert np.allclose(p["latency_p99_ns_ci95"], want, rtol=1e-12)
    assert "mean ± 95 % confidence interval" in sweep.summary_table(doc["runs"], spread="ci95")
    lost = df.groupby(["links[0].rate", "links[0].queue.limit_packets"])["dropped"].sum()
    assert lost[("80Mbps", 20)] > lost[("80Mbps", 200)] > 0
    # at 200 Mbit/s only the bursts (290 Mbit/s for 5 ms, 37 frames too many) overflow a queue
    assert lost[("80Mbps", 20)] > lost[("200Mbps", 20)] > lost[("200Mbps", 200)] == 0


def test_t95_quantiles():
    """Student's t, two-sided 95 %: the table's ends, the expansion beyond it continuing the
    table (t(31) just below t(30) = 2.042) and falling toward the normal 1.960."""
    assert sweep.t95(1) == 12.706 and sweep.t95(30) == 2.042
    assert np.isnan(sweep.t95(0))
    assert 2.035 < sweep.t95(31) < 2.042
    assert abs(sweep.t95(60) - 2.000) < 1e-3 and abs(sweep.t95(120) - 1.980) < 1e-3
    vals = [sweep.t95(v) for v in range(1, 200)]
    assert all(a > b for a, b in zip(vals[:-1], vals[1:], strict=True))
    assert abs(sweep.t95(100_000) - 1.960) < 1e-3


def test_sweep_checks_every_point_before_running(tmp_path, capsys):
    """A bad value at one point fails the sweep at once (exit 2), naming the point and the
    key, and writes nothing."""
    out = tmp_path / "bad"
    argv = ["sweep", str(DUMBBELL), "--out", str(out), "--vary", "links[0].rate=50Mbps,fast"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "(links[0].rate=fast): `links[0].rate`: invalid rate" in err, err
    assert ":1:" not in err  # no line numbers into the rewritten text
    assert not out.exists()
    assert main(["sweep", str(DUMBBELL), "--vary", "a=1", "--vary", "a=2"]) == 2
    assert "varied twice" in capsys.readouterr().err
    assert main(["sweep", str(DUMBBELL), "--vary", "a=1,2", "--set", "a=3"]) == 2
    assert "a: given to both --set and --vary" in capsys.readouterr().err
    assert main(["sweep", str(DUMBBELL), "--plot"]) == 2
    assert "--plot needs a --vary key" in capsys.readouterr().err
    # a file that cannot be read, or a bad scenario swept unchanged (its line kept)
    missing = tmp_path / "nosuch.toml"
    assert main(["sweep", str(missing), "--vary", "sim.seed=1,2"]) == 2
    assert f"{missing}: cannot read the file: No such file or directory" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text(DUMBBELL.read_text().replace("[sim]", "[sim]\nsed = 1", 1))
    assert main(["sweep", str(bad), "--quiet"]) == 2
    assert f"{bad}:" in (err := capsys.readouterr().err) and "unknown field `sed`" in err, err
    line = next(i for i, x in enumerate(bad.read_text().splitlines(), 1) if x == "sed = 1")
    assert f"{bad}:{line}:" in err, err


def test_a_point_that_cuts_a_flow_off_warns_once_naming_the_point_and_key(tmp_path, capsys):
    """Moving r0's link to r1 leaves cbr0 no path: the sweep says so once for that point (not
    per seed or run, not in Python's warning format, without a line of the rewritten text), and
    runs it (cbr0 lost whole there)."""
    sets = [a for k, v in SHORT for a in ("--set", f"{k}={v}")]
    out = tmp_path / "cut"
    argv = ["sweep", str(DUMBBELL), "--quiet", "--out", str(out), "--seeds", "2", *sets]
    assert main([*argv, "--vary", "links[5].b=r0,r1", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    warned = [x for x in err.splitlines() if "warning" in x.lower()]
    assert warned == [
        f"latnet: warning: {DUMBBELL} (links[5].b=r1): `flows[0].dst`: no path from "
        '"l0" to "r0" over the links (through switches): every packet is dropped as no-route'
    ], err
    rows = pd.read_csv(out / "sweep.csv")
    cut = rows[(rows["links[5].b"] == "r1") & (rows["flow"] == "cbr0")]
    assert len(cut) == 2 and (cut["loss_rate"] == 1).all(), cut
    kept = rows[(rows["links[5].b"] == "r0") & (rows["flow"] == "cbr0")]
    assert (kept["loss_rate"] < 1).all(), kept
    # the library warns as Python does, once per point, before anything runs
    with pytest.warns(latnet.ScenarioWarning, match=r"\(links\[5\]\.b=r1\): `flows\[0\]\.dst`"):
        sweep.run_sweep(DUMBBELL, vary=[("links[5].b", ["r1"])], seeds=[1], sets=SHORT, workers=1)


def test_scheduler_errors_say_what_is_missing(monkeypatch, capsys):
    """No scheduler at the address: an error saying so, after the timeout (shortened here);
    --scheduler with a seed that is not a sweep: a usage error naming the seeds that are."""
    pytest.importorskip("distributed")
    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT_S", 2)
    with pytest.raises(latnet.LatnetError, match="no Dask scheduler answered within 2 s"):
        sweep.connect("tcp://127.0.0.1:9")
    assert main(["reproduce", "lbf", "--quick", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "l4s, chameleon" in capsys.readouterr().err


def test_dask_cluster_gives_the_local_results(tmp_path, capsys):
    """A Dask scheduler and two worker processes started here: the sweep, a Chameleon
    evaluation and a tiny L4S reproduction run on them and give exactly what local processes
    give."""
    pytest.importorskip("distributed")
    from latnet import chameleon
    from latnet.reproduce import l4s

    grid = ["--vary", "links[0].rate=50Mbps,100Mbps", "--seeds", "2"]
    grid += [a for k, v in SHORT for a in ("--set", f"{k}={v}")]
    assert main(["sweep", str(DUMBBELL), "--quiet", "--out", str(tmp_path / "local"), *grid]) == 0
    local_l4s = l4s.run(quick=True, out=tmp_path / "l4s-local", sets=["dctcp-cubic"], cfg=TINY)
    local_ch = chameleon.evaluate("chameleon", scenario=8, runs=3, k=4, queues=8)
    with sweep.local_cluster(workers=2) as address:
        assert address.startswith("tcp://127.0.0.1:")
        argv = ["sweep", str(DUMBBELL), "--quiet", "--out", str(tmp_path / "dask"), *grid]
        assert main([*argv, "--scheduler", address]) == 0
        dask_l4s = l4s.run(
            quick=True, out=tmp_path / "l4s-dask", sets=["dctcp-cubic"], cfg=TINY, scheduler=address
        )
        dask_ch = chameleon.evaluate(
            "chameleon", scenario=8, runs=3, k=4, queues=8, scheduler=address
        )
    a = (tmp_path / "local" / "sweep.csv").read_text()
    b = (tmp_path / "dask" / "sweep.csv").read_text()
    assert a == b and len(a.splitlines()) == 1 + 2 * 2 * 4
    assert dask_l4s["tables"] == local_l4s["tables"]
    strip = [{k: v for k, v in r.items() if k != "runtime_ns"} for r in local_ch]
    assert [{k: v for k, v in r.items() if k != "runtime_ns"} for r in dask_ch] == strip
    assert all(r["accepted"] > 0 for r in dask_ch)


TINY = {"phase_s": 0.3, "warm_s": 0.1, "max_flows": 2, "seeds": 1}
