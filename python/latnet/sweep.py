"""Parameter sweeps: one scenario over the cross product of parameter values and seeds.

Runs go to a local process pool by default, or to a Dask distributed cluster when a scheduler
address is given (``--scheduler tcp://host:8786``): the same tasks, the same results, since
every run is deterministic in its scenario and seed.

    >>> from latnet import sweep
    >>> runs = sweep.run_sweep(
    ...     "experiments/dumbbell.toml",
    ...     vary=[("links[0].rate", ["50Mbps", "100Mbps"])],
    ...     seeds=[1, 2],
    ... )
    >>> sweep.flows_frame(runs)  # one row per run and flow

A key is a path into the scenario's TOML (``sim.duration``, ``links[0].rate``,
``flows[video].traffic.rate``: an array element by index or by its ``name``); a value is TOML
(``50``, ``true``, ``{ kind = "fifo", limit_packets = 50 }``) or else a string (``50Mbps``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd

from . import ScenarioWarning, check, run
from ._latnet import LatnetError, ScenarioError, apply_overrides

__all__ = [
    "apply",
    "connect",
    "executor",
    "flows_frame",
    "local_cluster",
    "parse_assignment",
    "points",
    "run_sweep",
    "split_values",
    "summary_frame",
]

#: Seconds to wait for a Dask scheduler to answer and to have a worker.
CONNECT_TIMEOUT_S = 15


def split_values(text: str) -> list[str]:
    """Split ``50Mbps,100Mbps`` at commas that are not inside quotes, brackets or braces, so
    ``[1, 2],[3]`` and ``{ kind = "fifo", limit_packets = 5 },{ kind = "priority" }`` split
    into whole values."""
    out, cur, depth, quote = [], [], 0, None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    if quote or depth != 0:
        raise ValueError(f"unbalanced quotes or brackets in {text!r}")
    if any(v == "" for v in out):
        raise ValueError(f"empty value in {text!r}")
    return out


def parse_assignment(text: str, many: bool) -> tuple[str, list[str]]:
    """``KEY=VALUE`` (``many``: ``KEY=V1,V2,...``) into the key and its values; ValueError
    saying what was expected."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        want = "KEY=V1,V2,..." if many else "KEY=VALUE"
        raise ValueError(f"expected {want} (such as links[0].rate=50Mbps), got {text!r}")
    if not many:
        if value.strip() == "":
            raise ValueError(f"{key}: expected a value after '=', got {text!r}")
        return key, [value.strip()]
    values = split_values(value)
    if len(set(values)) != len(values):
        raise ValueError(f"{key}: a value is given twice in {value!r}")
    return key, values


def points(vary: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """The cross product of the varied values, the first key varying slowest."""
    keys = [k for k, _ in vary]
    if len(set(keys)) != len(keys):
        raise ValueError("a key is varied twice: " + ", ".join(keys))
    grid = itertools.product(*(v for _, v in vary))
    return [dict(zip(keys, combo, strict=True)) for combo in grid]


def apply(text: str, name: str, sets: list[tuple[str, str]]) -> str:
    """Scenario text with the ``(key, value)`` assignments made (see the module docstring)."""
    return apply_overrides(text, [(k, str(v)) for k, v in sets], name=name)


def checked(text: str, label: str, sets: list[tuple[str, str]]) -> str:
    """``apply``, then read the result as a scenario: ScenarioError naming ``label`` and the
    key when a key or value is wrong (without line numbers, which would point into the
    rewritten text rather than the user's file; with no ``sets`` the text is the file's, and the
    error keeps its line). Its warnings (:class:`~latnet.ScenarioWarning`) are issued again,
    placed the same way."""
    if not sets:
        check(text=text, name=label)
        return text
    text = apply(text, label, sets)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ScenarioWarning)
        try:
            check(text=text, name=label)
        except ScenarioError as e:
            raise ScenarioError(_by_key(str(e), text)) from None
    for w in seen:
        if issubclass(w.category, ScenarioWarning):
            warnings.warn(_by_key(str(w.message), text), ScenarioWarning, stacklevel=2)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return text


def _by_key(message: str, text: str) -> str:
    """A message about rewritten scenario ``text`` (``where:line:col: what``) without the line,
    which would point into the rewritten text, naming the key of that line instead."""
    m = re.match(r"^(.*?):(\d+):\d+: (.*)$", message, re.S)
    if not m:
        return message
    where, line, msg = m.group(1), int(m.group(2)), m.group(3)
    key = _key_at(text, line)
    if key and not msg.startswith("`"):
        msg = f"`{key}`: {msg}"
    return f"{where}: {msg}"


def _key_at(text: str, line: int) -> str | None:
    """The key path (``links[0].rate``) of a line of scenario text as ``apply`` writes it:
    table headers on lines of their own, one ``key = value`` per line."""
    path: list[str] = []
    counts: dict[str, int] = {}
    for i, raw in enumerate(text.splitlines()[:line], 1):
        ln = raw.strip()
        if ln.startswith("[["):
            name = ln.strip("[]").strip()
            counts[name] = counts.get(name, -1) + 1
            path = [f"{name}[{counts[name]}]"]
            # nested tables under this element drop their earlier siblings' counts
            counts = {k: v for k, v in counts.items() if not k.startswith(name + ".")}
        elif ln.startswith("["):
            parts = ln.strip("[]").strip().split(".")
            # a sub-table of the last element of an array of tables
            head = parts[0]
            path = [f"{head}[{counts[head]}]" if head in counts else head, *parts[1:]]
        elif i == line and "=" in ln:
            return ".".join([*path, ln.split("=", 1)[0].strip()])
    return None


def read_scenario(path: Path) -> str:
    """The text of a scenario file; ScenarioError (a usage error) when it cannot be read."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ScenarioError(f"{path}: cannot read the file: {why}") from None


def with_sets(path: str | os.PathLike[str], sets: list[tuple[str, str]]) -> str:
    """The scenario file's text with ``sets`` made and checked; its name stays the file's stem
    when the file names none."""
    path = Path(path)
    text = read_scenario(path)
    label = f"{path} ({', '.join(f'{k}={v}' for k, v in sets)})"
    top = re.split(r"(?m)^\s*\[", text, maxsplit=1)[0]  # the keys before the first table
    if not re.search(r"(?m)^\s*name\s*=", top):
        sets = [("name", json.dumps(path.stem)), *sets]
    return checked(text, label, sets)


# ---------------- where the runs go ----------------


class _Inline(Executor):
    """Runs each task at once in this process (one worker, no pool)."""

    def submit(self, fn, /, *args, **kwargs):
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            fut.set_exception(e)
        return fut


def connect(address: str):
    """A Dask ``Client`` for the scheduler at ``address`` that has at least one worker running
    this version of latnet; LatnetError saying what is missing otherwise."""
    try:
        from distributed import Client
    except ImportError as e:
        raise LatnetError(
            f"--scheduler {address}: Dask distributed is not installed ({e}); "
            "install it with `pip install distributed` or run without --scheduler"
        ) from None
    try:
        client = Client(address, timeout=f"{CONNECT_TIMEOUT_S}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise LatnetError(
            f"--scheduler {address}: no Dask scheduler answered within {CONNECT_TIMEOUT_S} s "
            f"({type(e).__name__}: {e}); expected the address of a running `dask scheduler`, "
            "such as tcp://127.0.0.1:8786"
        ) from None
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except (TimeoutError, OSError) as e:
        client.close()
        raise LatnetError(
            f"--scheduler {address}: the scheduler has no workers after {CONNECT_TIMEOUT_S} s "
            f"({e}); start some with `dask worker {address}`"
        ) from None
    from . import __version__

    try:
        versions = client.run(_worker_version)
    except Exception as e:  # noqa: BLE001 - any failure here means the workers cannot run latnet
        client.close()
        raise LatnetError(
            f"--scheduler {address}: the workers cannot run latnet ({type(e).__name__}: {e}); "
            "start them from an environment where latnet is installed"
        ) from None
    wrong = {w: v for w, v in versions.items() if v != __version__}
    if wrong:
        client.close()
        detail = ", ".join(f"{w} has {v}" for w, v in sorted(wrong.items()))
        raise LatnetError(
            f"--scheduler {address}: workers must run latnet {__version__} like this process: "
            + detail
        )
    return client


def _worker_version() -> str:
    from latnet import __version__

    return __version__


@contextlib.contextmanager
def executor(scheduler: str | None = None, workers: int | None = None) -> Iterator[Executor]:
    """Where a sweep's runs go: the Dask cluster at ``scheduler``; else a local pool of
    ``workers`` processes (default: one per core; 1: in this process)."""
    if scheduler:
        client = connect(scheduler)
        try:
            yield client.get_executor(pure=False)
        finally:
            client.close()
        return
    n = workers or os.cpu_count() or 1
    if n <= 1:
        yield _Inline()
        return
    with ProcessPoolExecutor(max_workers=n) as ex:
        yield ex


def map_tasks(
    fn: Callable,
    tasks: list,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list:
    """``[fn(t) for t in tasks]`` on the executor chosen by ``scheduler`` / ``workers``, in
    task order; ``progress(done, total)`` after each task. ``fn`` must be importable (a
    module-level function) for processes and Dask workers to run it."""
    out: list = [None] * len(tasks)
    with executor(scheduler, workers) as ex:
        futs = {ex.submit(fn, t): i for i, t in enumerate(tasks)}
        for done, fut in enumerate(as_completed(futs), 1):
            out[futs[fut]] = fut.result()
            if progress:
                progress(done, len(tasks))
    return out


@contextlib.contextmanager
def local_cluster(workers: int = 2, timeout_s: float = 60.0) -> Iterator[str]:
    """Start ``dask scheduler`` and ``dask worker`` (``workers`` processes, one thread each)
    on loopback from this Python, yield the scheduler's address, stop them on exit."""
    tmp = Path(tempfile.mkdtemp(prefix="latnet-dask-"))
    sched_file = tmp / "scheduler.json"
    py = sys.executable
    log = open(tmp / "dask.log", "wb")  # noqa: SIM115 - closed below
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            subprocess.Popen(
                [py, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0"]
                + ["--no-dashboard", "--scheduler-file", str(sched_file)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp,
            )
        )
        deadline = time.monotonic() + timeout_s
        while not sched_file.exists() or not sched_file.read_text().strip():
            if procs[0].poll() is not None or time.monotonic() > deadline:
                raise LatnetError(
                    "the Dask scheduler did not start: "
                    + (tmp / "dask.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(
            subprocess.Popen(
                [py, "-m", "dask", "worker", address, "--nworkers", str(workers)]
                + ["--nthreads", "1", "--no-dashboard", "--local-directory", str(tmp)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp,
            )
        )
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------- the sweep ----------------


def run_point(task: dict) -> dict:
    """One run of a sweep (a Dask / pool task): the scenario text with the point's values set,
    run with ``seed``; the flows' summary without per-packet records."""
    with warnings.catch_warnings():
        # said by `checked` before the sweep started, once per point rather than per run
        warnings.simplefilter("ignore", ScenarioWarning)
        res = run(text=task["text"], name=task["name"], seed=task["seed"], packets=False)
    s = res.summary
    return {
        "point": task["point"],
        "seed": task["seed"],
        "events": s["events"],
        "latency_convention": s["latency_convention"],
        "flows": res.flows.to_dict(orient="records"),
    }


def run_sweep(
    scenario: str | os.PathLike[str],
    vary: list[tuple[str, list[str]]],
    seeds: list[int],
    sets: list[tuple[str, str]] | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict]:
    """Run ``scenario`` (with ``sets`` made) at every point of ``vary`` and every seed; one dict
    per run (``point``, ``seed``, ``events``, ``flows``), points in order, seeds within.

    Every point is applied and checked before anything runs, so a bad key or value fails at
    once (ScenarioError naming the file, the point and the key)."""
    path = Path(scenario)
    name = str(path)
    base = with_sets(path, sets) if sets else read_scenario(path)
    if not seeds:
        raise ValueError("a sweep needs at least one seed")
    tasks = []
    for pt in points(vary):
        label = f"{name} ({', '.join(f'{k}={v}' for k, v in pt.items())})" if pt else name
        text = checked(base, label, list(pt.items()))
        tasks += [{"text": text, "name": label, "point": pt, "seed": s} for s in seeds]
    return map_tasks(run_point, tasks, scheduler=scheduler, workers=workers, progress=progress)


def flows_frame(runs: list[dict]) -> pd.DataFrame:
    """One row per run and flow: the varied keys, ``seed``, then the flow table's columns."""
    rows = []
    for r in runs:
        for f in r["flows"]:
            rows.append({**r["point"], "seed": r["seed"], **f})
    return pd.DataFrame(rows)


#: The columns the summary table averages over seeds.
SUMMARY_COLUMNS = [
    "throughput_bps",
    "loss_rate",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_max_ns",
]


#: Two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179]
_T95 += [2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064]
_T95 += [2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t95(dof: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``dof`` degrees of freedom (NaN below
    1): the table for 1..30, beyond it the Cornish-Fisher expansion around the normal
    quantile (within 1e-4 there)."""
    if dof < 1:
        return float("nan")
    if dof <= len(_T95):
        return _T95[dof - 1]
    z, v = 1.959964, float(dof)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def summary_frame(runs: list[dict]) -> pd.DataFrame:
    """Per point and flow, over seeds, of ``SUMMARY_COLUMNS``: the mean (``<col>_mean``), the
    sample standard deviation (``<col>_sd``) and the half-width of the mean's 95 % confidence
    interval by Student's t (``<col>_ci95`` = t(n - 1) sd / sqrt(n)); sd and ci95 are NaN with
    one seed. And ``runs``, the seeds per row."""
    df = flows_frame(runs)
    keys = list(runs[0]["point"]) if runs else []
    g = df.groupby(keys + ["flow"], sort=False, dropna=False)
    out = g[SUMMARY_COLUMNS].agg(["mean", "std"])
    out.columns = [f"{c}_{'sd' if s == 'std' else s}" for c, s in out.columns]
    out["runs"] = g.size()
    factor = out["runs"].map(lambda n: t95(n - 1) / np.sqrt(n) if n > 1 else float("nan"))
    for c in SUMMARY_COLUMNS:
        out[f"{c}_ci95"] = out[f"{c}_sd"] * factor
    return out.reset_index()


def _pm(mean: float, sd: float, scale: float, nd: int) -> str:
    if not np.isfinite(mean):
        return "-"
    s = f"{mean / scale:.{nd}f}"
    if np.isfinite(sd):
        s += f" ± {sd / scale:.{nd}f}"
    return s


def summary_table(runs: list[dict], spread: str = "sd") -> str:
    """The summary frame as a text table: means ± ``spread`` over seeds (``sd``, the sample
    standard deviation, or ``ci95``, the half-width of the 95 % confidence interval)."""
    from .table import render

    titles = {"sd": "mean ± sd over seeds", "ci95": "mean ± 95 % confidence interval over seeds"}
    if spread not in titles:
        raise ValueError(f"spread: expected sd or ci95, got {spread!r}")
    sf = summary_frame(runs)
    keys = list(runs[0]["point"]) if runs else []
    rows = []
    for _, r in sf.iterrows():
        rows.append(
            [str(r[k]) for k in keys]
            + [
                r["flow"],
                str(r["runs"]),
                _pm(r["throughput_bps_mean"], r[f"throughput_bps_{spread}"], 1e6, 2),
                _pm(100 * r["loss_rate_mean"], 100 * r[f"loss_rate_{spread}"], 1, 2),
                _pm(r["latency_p50_ns_mean"], r[f"latency_p50_ns_{spread}"], 1e3, 1),
                _pm(r["latency_p99_ns_mean"], r[f"latency_p99_ns_{spread}"], 1e3, 1),
                _pm(r["latency_max_ns_mean"], r[f"latency_max_ns_{spread}"], 1e3, 1),
            ]
        )
    headers = keys + ["flow", "seeds", "Mbit/s", "loss %", "p50 us", "p99 us", "max us"]
    return render(headers, rows, title=titles[spread])
