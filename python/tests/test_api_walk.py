"""Faults a walk through the Python library found (latnet.run / check, Results, tables, plots,
read_pcap, the extension's stubs), each held here so that it stays fixed."""

from __future__ import annotations

import ast
import inspect
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import latnet
import latnet._latnet as ext
from latnet.results import FLOW_COLUMNS
from latnet.table import flow_table, fmt_us

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "experiments" / "demo.toml"

SMALL = """
[sim]
duration = "200ms"
[defaults.link]
rate = "100Mbps"
delay = "100us"
[[nodes]]
name = "a"
kind = "host"
[[nodes]]
name = "s"
kind = "switch"
[[nodes]]
name = "b"
kind = "host"
[[links]]
a = "a"
b = "s"
[[links]]
a = "s"
b = "b"
"""

FLOW = """
[[flows]]
name = "p"
src = "a"
dst = "b"
size = 1000
traffic = { kind = "poisson", rate = "50Mbps" }
"""

#: a flow to a host no link reaches: every packet dropped as no-route, none received
DEAD = """
[[nodes]]
name = "c"
kind = "host"
[[flows]]
name = "dead"
src = "a"
dst = "c"
size = 500
traffic = { kind = "cbr", rate = "1Mbps" }
"""


def run_quietly(text: str, **kw) -> latnet.Results:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", latnet.ScenarioWarning)
        return latnet.run(text=text, **kw)


@pytest.mark.parametrize("call", [latnet.run, latnet.check])
def test_run_and_check_refuse_both_or_neither_source_alike(call):
    with pytest.raises(latnet.UsageError, match="give a scenario path or text=, not both"):
        call(DEMO, text=SMALL + FLOW)
    with pytest.raises(latnet.UsageError, match=r"give a scenario path or text=$"):
        call()
    with pytest.raises(TypeError, match="^scenario: expected a path"):
        call(5)
    with pytest.raises(TypeError, match="^text: expected the scenario's TOML as str, got bytes"):
        call(text=(SMALL + FLOW).encode())
    with pytest.raises(TypeError, match="^name: expected str"):
        call(text=SMALL + FLOW, name=None)


def test_run_and_check_set_keys_as_the_command_line_does(tmp_path):
    # the command line had --set; the library made its users rewrite the TOML themselves
    text = SMALL + FLOW
    by_hand = run_quietly(text.replace('rate = "50Mbps"', 'rate = "20Mbps"'), packets=False)
    keys = {"flows[p].traffic.rate": "20Mbps"}
    for sets in (keys, list(keys.items())):
        got = latnet.run(text=text, set=sets, packets=False)
        pd.testing.assert_frame_equal(got.flows, by_hand.flows)
    # a file too, with numbers and booleans as Python has them
    f = tmp_path / "small.toml"
    f.write_text(text)
    got = latnet.run(f, set={"flows[p].size": 500, "sim.duration": "100ms"}, packets=False)
    edited = text.replace("size = 1000", "size = 500").replace('"200ms"', '"100ms"')
    pd.testing.assert_frame_equal(got.flows, run_quietly(edited, packets=False).flows)
    tcp = ROOT / "experiments" / "l4s" / "one-one.toml"
    sets = {"sim.duration": "50ms", "flows[L0].traffic.cc": "prague"}
    got = latnet.run(tcp, set=sets | {"flows[L0].traffic.pacing": False}, packets=False)
    assert list(got.tcp["cc"]) == ["prague", "cubic"]
    assert latnet.check(f).endswith("200ms of sending, seed 1")
    assert latnet.check(f, set={"sim.duration": "3s"}).endswith("3s of sending, seed 1")
    # setting nothing is the scenario as it is (errors keep the file's lines)
    assert latnet.check(f, set={}) == latnet.check(f, set=[]) == latnet.check(f)
    f.write_text(text.replace('rate = "50Mbps"', 'rate = "fast"'))
    with pytest.raises(latnet.ScenarioError, match=r"small.toml:\d+:\d+: "):
        latnet.run(f, set={})
    # a wrong key or value names it; a wrong argument says what it takes
    with pytest.raises(latnet.ScenarioError, match=r"flows\[p\].traffic.rate=fast"):
        latnet.run(text=text, set={"flows[p].traffic.rate": "fast"})
    with pytest.raises(latnet.ScenarioError, match=r"small.toml \(links\[7\].rate=1Mbps\)"):
        latnet.check(f, set={"links[7].rate": "1Mbps"})
    for bad in (5, "links[0].rate=1Mbps", [("links[0].rate",)], {1: "x"}, ["ab"]):
        with pytest.raises(TypeError, match="^set: expected a mapping of key to value"):
            latnet.run(text=text, set=bad)


@pytest.mark.parametrize(
    ("seed", "error"),
    [(-1, latnet.UsageError), (2**64, latnet.UsageError), (True, TypeError), ("1", TypeError)],
)
def test_a_seed_out_of_range_or_of_another_type_is_refused_by_name(seed, error):
    # it was an OverflowError ("can't convert negative int to unsigned") naming nothing, and
    # True ran as seed 1
    with pytest.raises(error, match=r"^seed: expected a whole number >= 0 \(below 2\^64\)"):
        latnet.run(text=SMALL + FLOW, seed=seed)


def test_a_numpy_integer_seed_is_the_same_seed():
    a = latnet.run(text=SMALL + FLOW, seed=np.int64(7), packets=False)
    b = latnet.run(text=SMALL + FLOW, seed=7, packets=False)
    assert a.summary["seed"] == 7 and a.json() == b.json()


def test_a_progress_callback_that_raises_is_not_called_again_and_its_error_is_raised():
    # the closing report called it a second time, and the second exception replaced the first
    calls = []

    def cb(now_ns, end_ns, events):
        calls.append(now_ns)
        raise RuntimeError(f"report {len(calls)}")

    with pytest.raises(RuntimeError, match=r"^report 1$"):
        latnet.run(text=SMALL + FLOW, progress=cb)
    assert len(calls) == 1


def test_a_run_lets_other_python_threads_run_between_its_reports():
    """The simulator gives up the GIL while it runs: a thread woken at the first report runs
    before the last. With a switch interval this long, a thread can only run where the GIL is
    given up, so a run that held it throughout would see the thread's flag only after it ended
    (the first report is at 1 % of the run's virtual time, the closing one at its end)."""
    text = DEMO.read_text().replace('duration = "2s"', 'duration = "6s"')
    assert 'duration = "6s"' in text
    go, done = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other():
        go.wait()
        done.set()

    def cb(now_ns, end_ns, events):
        go.set()
        seen.append(done.is_set())

    thread = threading.Thread(target=other)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        thread.start()
        latnet.run(text=text, packets=False, progress=cb)
    finally:
        sys.setswitchinterval(old)
        go.set()
        thread.join()
    assert len(seen) > 50 and not seen[0]
    assert any(seen[:-1])


def test_frames_of_a_run_without_flows_have_their_columns():
    # flows was a DataFrame without columns: res.flows["latency_p99_ns"] was a KeyError
    empty = run_quietly(SMALL)
    full = run_quietly(SMALL + FLOW)
    assert empty.flows.empty and list(empty.flows.columns) == FLOW_COLUMNS
    assert list(full.flows.columns) == FLOW_COLUMNS
    assert "0 events" in flow_table(empty)


def test_hop_latency_of_a_flow_that_received_nothing_has_its_columns():
    res = run_quietly(SMALL + FLOW + DEAD)
    dead = res.hop_latency("dead")
    assert dead.empty and list(dead.columns) == list(res.hop_latency("p").columns)
    row = res.flows.set_index("flow").loc["dead"]
    assert row["received"] == 0 and row["loss_rate"] == 1.0 and np.isnan(row["latency_p99_ns"])
    with pytest.raises(KeyError, match=r"no flow named 'x' \(flows: p, dead\)"):
        res.hop_latency("x")


def test_lbf_tables_have_their_columns_when_empty():
    lbf_only = SMALL.replace(
        "[defaults.link]",
        '[lbf]\n\n[defaults]\nqueue = { kind = "lbf", limit_packets = 100 }\n\n[defaults.link]',
    )
    no_slo = run_quietly(lbf_only + FLOW, packets=False)
    assert no_slo.lbf_flows is not None and no_slo.lbf_flows.empty
    slo = run_quietly(
        SMALL + FLOW.replace("size = 1000", 'size = 1000\nslo = { lower = "10us" }'),
        packets=False,
    )
    assert list(no_slo.lbf_flows.columns) == list(slo.lbf_flows.columns)
    assert slo.lbf_switches is not None and slo.lbf_switches.empty
    assert list(slo.lbf_switches.columns) == list(no_slo.lbf_switches.columns)


def test_write_removes_files_an_earlier_run_left(tmp_path):
    # a run without packets written over one with them kept the old packets.csv, hops.csv,
    # queues.csv and captures beside the new results.json
    run_quietly(SMALL + FLOW, pcap=True, queues="10ms").write(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    assert (tmp_path / "packets.csv").exists() and list((tmp_path / "pcap").glob("*.pcap"))
    written = run_quietly(SMALL + FLOW, packets=False).write(tmp_path)
    assert sorted(Path(w).name for w in written) == ["flows.csv", "results.json"]
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["flows.csv", "notes.txt", "results.json"]


def test_write_names_its_argument():
    res = run_quietly(SMALL + FLOW, packets=False)
    with pytest.raises(TypeError, match="^directory: expected a path"):
        res.write(3)


def test_write_raises_the_os_error_of_what_it_cannot_write(tmp_path):
    """A directory that cannot be made (a file is in the way) or a file that cannot be written
    (a directory has its name) is the OSError of its kind, naming the path."""
    res = run_quietly(SMALL + FLOW, packets=False)
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match=f"cannot create directory {tmp_path / 'file' / 'out'}"):
        res.write(tmp_path / "file" / "out")
    (tmp_path / "out" / "results.json").mkdir(parents=True)
    with pytest.raises(IsADirectoryError, match=f"cannot write {tmp_path / 'out'}/results.json"):
        res.write(tmp_path / "out")


#: a TCP flow and an LBF flow with an upper bound it cannot always keep (a time series, LBF
#: tables with early drops)
TCP_LBF = """
[defaults]
queue = { kind = "lbf", limit_packets = 100 }
[lbf]
budget = "equal"
[[flows]]
name = "bulk"
src = "a"
dst = "b"
size = 1500
traffic = { kind = "tcp-bulk", cc = "cubic" }
[[flows]]
name = "slo"
src = "a"
dst = "b"
size = 300
traffic = { kind = "cbr", rate = "5Mbps" }
slo = { lower = "250us", upper = "330us" }
"""


def assert_same_tables(back: latnet.SavedResults, res: latnet.Results) -> None:
    """``back`` (read back from ``res``'s files) has ``res``'s summary and every one of its
    tables, dtypes included."""
    assert isinstance(back, latnet.SavedResults) and back.summary == res.summary
    assert back.json() == res.json()
    names = ["flows", "ports", "tcp", "timeseries", "queues", "packets", "hops"]
    names += ["lbf_flows", "lbf_switches", "lbf_drops", "lbf_notifications"]
    for name in names:
        mine, theirs = getattr(back, name), getattr(res, name)
        if theirs is None:
            assert mine is None, name
        else:
            pd.testing.assert_frame_equal(mine, theirs, obj=name)
    for f in res.summary["flows"]:
        pd.testing.assert_frame_equal(back.hop_latency(f["name"]), res.hop_latency(f["name"]))


def _run_in_worker(text: str) -> latnet.Results:
    return run_quietly(text, pcap=True)


@pytest.mark.parametrize("extra", [FLOW + DEAD, TCP_LBF], ids=["udp", "tcp-lbf"])
def test_a_run_pickles_as_its_files_and_comes_back_with_the_same_tables(tmp_path, extra):
    """A ``Results`` pickles (for a process pool or a Dask worker to return): it comes back as
    a ``SavedResults`` of the run's files, every table equal, the captures and warnings kept;
    its temporary directory goes with it; it pickles again."""
    import copy
    import gc
    import pickle

    res = run_quietly(SMALL + extra, pcap=True, queues="10ms")
    back = pickle.loads(pickle.dumps(res))
    assert_same_tables(back, res)
    assert back.warnings == res.warnings and len(res.warnings) == (extra != TCP_LBF)
    res.write(tmp_path)
    written = sorted((tmp_path / "pcap").iterdir())
    assert [p.name for p in back.pcaps] == [p.name for p in written] and len(written) == 4
    assert [p.read_bytes() for p in back.pcaps] == [p.read_bytes() for p in written]
    again = pickle.loads(pickle.dumps(back))
    assert_same_tables(again, res)
    assert again.warnings == res.warnings and again.out != back.out
    where = back.out
    del back
    gc.collect()
    assert not where.exists() and again.out.is_dir()
    # copies stay Results: a shallow one shares the summary, a deep one has its own
    shallow, deep = copy.copy(res), copy.deepcopy(res)
    for c in (shallow, deep):
        assert type(c) is latnet.Results and c.warnings == res.warnings
        pd.testing.assert_frame_equal(c.hops, res.hops)
    assert shallow.summary is res.summary
    assert deep.summary is not res.summary and deep.summary == res.summary


def test_a_run_comes_back_from_a_worker_process():
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1) as pool:
        back = pool.submit(_run_in_worker, SMALL + FLOW).result(timeout=120)
    res = _run_in_worker(SMALL + FLOW)
    assert_same_tables(back, res)
    assert len(back.pcaps) == 4


def test_a_forged_pickle_names_no_file_outside_its_directory():
    from latnet.results import _restore

    for name in ["../x.csv", "pcap/../../x.pcap", "pcap/.pcap", "notes.txt"]:
        with pytest.raises(ValueError, match="is not a file of a run's output directory"):
            _restore(latnet.SavedResults, {name: b""}, [])
    with pytest.raises(TypeError, match="expected a SavedResults class"):
        _restore(dict, {}, [])


@pytest.mark.parametrize("extra", [FLOW + DEAD, TCP_LBF], ids=["udp", "tcp-lbf"])
def test_a_written_run_loads_back_with_the_same_tables(tmp_path, extra):
    """``latnet.load`` reads what ``Results.write`` wrote: every table equal to the run's,
    dtypes included (packets received, dropped with a node, in flight at the end; hops; a
    queue series; a TCP time series; the LBF tables), and the captures listed."""
    res = run_quietly(SMALL + extra, pcap=True, queues="10ms")
    res.write(tmp_path)
    back = latnet.load(tmp_path)
    assert_same_tables(back, res)
    assert [p.name for p in back.pcaps] == sorted(p.name for p in (tmp_path / "pcap").iterdir())
    pk = back.packets
    assert pk["received"].any() and pk["id"].dtype == np.uint64
    if extra == TCP_LBF:
        assert back.tcp is not None and len(back.timeseries) > 0 and len(back.lbf_drops) > 0
    else:
        assert (pk["drop_reason"] == "no-route").any() and (pk["drop_node"] == "a").any()
    # a run without the optional files: None, as in the run
    res = run_quietly(SMALL + FLOW, packets=False)
    res.write(tmp_path)
    back = latnet.load(tmp_path)
    assert back.packets is back.hops is back.queues is back.timeseries is res.packets is None
    assert back.pcaps == []


def test_load_names_what_it_cannot_read(tmp_path):
    """A missing directory or results.json is FileNotFoundError naming the file; a damaged
    file a UsageError naming it (and the key or column)."""
    with pytest.raises(FileNotFoundError, match="no such directory") as e:
        latnet.load(tmp_path / "nowhere")
    assert e.value.filename == str(tmp_path / "nowhere" / "results.json")
    with pytest.raises(FileNotFoundError, match="not a run's output directory"):
        latnet.load(tmp_path)
    with pytest.raises(TypeError, match="^directory: expected a path"):
        latnet.load(3)
    results = tmp_path / "results.json"
    results.write_text("{")
    with pytest.raises(latnet.UsageError, match=f"{results}: not a run's results"):
        latnet.load(tmp_path)
    results.write_text("[]")
    with pytest.raises(latnet.UsageError, match="expected a JSON object, got list"):
        latnet.load(tmp_path)
    results.write_text('{"scenario": "x", "flows": [], "nodes": []}')
    with pytest.raises(latnet.UsageError, match="results.json: ports: missing"):
        latnet.load(tmp_path)
    run_quietly(SMALL + FLOW).write(tmp_path)
    text = (tmp_path / "packets.csv").read_text()
    (tmp_path / "packets.csv").write_text(text.replace("seq", "sequence", 1))
    with pytest.raises(latnet.UsageError, match="packets.csv: expected the columns id, flow, seq"):
        _ = latnet.load(tmp_path).packets
    lines = text.splitlines()
    lines[1] = lines[1].replace(",", ",x", 3)  # a number that is not one
    (tmp_path / "packets.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(latnet.UsageError, match="packets.csv: not the file a run writes"):
        _ = latnet.load(tmp_path).packets


def test_latency_cdf_refuses_flows_the_run_does_not_have(tmp_path):
    # an unknown name (or a name given as a str, read letter by letter) drew an empty plot
    res = run_quietly(SMALL + FLOW + DEAD)
    with pytest.raises(ValueError, match=r"flows: expected names of the run's flows \(p, dead\)"):
        latnet.plot.latency_cdf(res, tmp_path / "x.png", flows=["p", "nosuch"])
    assert not (tmp_path / "x.png").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "No artists with labels" warning
        latnet.plot.latency_cdf(res, tmp_path / "dead.png", flows="dead")
        latnet.plot.latency_cdf(res, tmp_path / "p.png", flows="p")
    assert (tmp_path / "dead.png").stat().st_size > 0


def test_read_pcap_has_the_same_dtypes_for_any_capture(tmp_path):
    # an empty capture had object columns, one with a frame that does not parse float ones
    run_quietly(SMALL + FLOW, packets=False, pcap=True).write(tmp_path)
    good = latnet.read_pcap(tmp_path / "pcap" / "a-s.pcap")
    empty = latnet.read_pcap(tmp_path / "pcap" / "s-a.pcap")  # nothing flows toward a
    raw = bytearray((tmp_path / "pcap" / "a-s.pcap").read_bytes())
    raw[24 + 16 + 12 : 24 + 16 + 14] = b"\x99\x99"  # the first frame's EtherType
    (tmp_path / "bad.pcap").write_bytes(raw)
    bad = latnet.read_pcap(tmp_path / "bad.pcap")
    assert len(good) > 100 and empty.empty and len(bad) == len(good)
    assert bad["error"].iloc[0] != "" and pd.isna(bad["sport"].iloc[0])
    assert (bad["sport"].iloc[1:] == good["sport"].iloc[1:]).all()
    dtypes = good.dtypes.astype(str).to_dict()
    assert empty.dtypes.astype(str).to_dict() == dtypes
    assert bad.dtypes.astype(str).to_dict() == dtypes


def test_fmt_us_reads_every_missing_value_as_a_dash():
    assert [fmt_us(v) for v in (None, float("nan"), np.float32("nan"), pd.NA)] == ["-"] * 4
    assert fmt_us(np.int64(1500)) == "1.5"


def _stub_signatures() -> dict[str, list[tuple[str, object]]]:
    tree = ast.parse((Path(latnet.__file__).parent / "_latnet.pyi").read_text())

    def params(fn: ast.FunctionDef) -> list[tuple[str, object]]:
        a = fn.args
        pos = a.posonlyargs + a.args
        defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
        out = [
            (p.arg, None if d is None else ast.literal_eval(d))
            for p, d in zip(pos, defaults, strict=True)
        ]
        out += [
            (p.arg, None if d is None else ast.literal_eval(d))
            for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
        ]
        return out

    sigs = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            sigs[node.name] = params(node)
        elif isinstance(node, ast.ClassDef):
            for m in node.body:
                if isinstance(m, ast.FunctionDef):
                    sigs[f"{node.name}.{m.name}"] = params(m)
    return sigs


def _runtime_signatures() -> dict[str, list[tuple[str, object]]]:
    def params(obj) -> list[tuple[str, object]]:
        ps = inspect.signature(obj).parameters.values()
        return [(p.name, None if p.default is p.empty else p.default) for p in ps]

    sigs = {}
    for name, obj in vars(ext).items():
        if name.startswith("_"):
            continue
        if isinstance(obj, type):
            if issubclass(obj, BaseException):
                continue
            if obj.__text_signature__:
                sigs[f"{name}.__init__"] = [("self", None), *params(obj)]
            for m, v in vars(obj).items():
                if (m.startswith("__") and m != "__len__") or not callable(v):
                    continue
                sigs[f"{name}.{m}"] = [("self", None)] + [p for p in params(v) if p[0] != "self"]
        elif callable(obj):
            sigs[name] = params(obj)
    return sigs


def test_the_stubs_match_the_extension():
    # ChameleonController.restore and .checkpoint were missing from _latnet.pyi
    stubs, real = _stub_signatures(), _runtime_signatures()
    assert {k: stubs.get(k) for k in real} == real
    assert set(stubs) <= set(real)
