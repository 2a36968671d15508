"""Run a scenario in emulation: the same scenario file as the simulator, on real packets.

``run_emu(path, out)`` brings up a :class:`~latnet.testbed.Testbed` (a namespace per node,
``latnet-switch`` per switch), starts a receiver on every destination host and one sender per
flow (``latnet-switch recv`` / ``send``: the simulator's traffic patterns in real time, one-way
latency from a timestamp in every packet), waits for the scenario's duration plus its drain time,
stops the switches and writes ``results.json`` and ``flows.csv`` in the simulator's format
(``latnet-switch results``). The testbed is removed afterwards, also on errors and Ctrl-C.

Emulated latency is physical (application send to application receive); see
``crates/latnet-switch/src/results.rs`` for how the other fields are measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from . import LatnetError
from .testbed import Testbed

#: Time between starting the processes and the scenario's time zero.
START_MARGIN_NS = 500_000_000


class EmuResults:
    """Results of an emulated run: ``summary`` is the dict of ``results.json``."""

    def __init__(self, out: Path):
        self.out = out
        self.summary: dict = json.loads((out / "results.json").read_text())
        self.packets = None

    def __repr__(self) -> str:
        s = self.summary
        return f"<latnet.EmuResults {s['scenario']!r} flows={len(s['flows'])}>"


def run_emu(
    scenario: str | os.PathLike[str],
    out: str | os.PathLike[str],
    seed: int | None = None,
    offloads: str = "off",
    keep_run_dir: bool = True,
) -> EmuResults:
    """Run ``scenario`` in emulation; results go to ``out`` (run files to ``out/emu-run``)."""
    scenario = Path(scenario).resolve()
    out = Path(out)
    run_dir = out / "emu-run"
    run_dir.mkdir(parents=True, exist_ok=True)
    for old in run_dir.glob("*"):
        if old.is_file():
            old.unlink()
    tb = Testbed(scenario, run_dir=run_dir, offloads=offloads, seed=seed)
    flows = tb.plan["flows"]
    duration_ns, drain_ns = tb.plan["duration_ns"], tb.plan["drain_ns"]
    seed_args = ["--seed", str(seed)] if seed is not None else []
    with tb:
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + START_MARGIN_NS
        until = t0 + duration_ns + drain_ns
        procs: list[tuple[str, subprocess.Popen]] = []
        for host in sorted({f["dst"] for f in flows}):
            argv = [*tb.rt(), tb.binary, "recv", "--scenario", str(scenario), "--host", host]
            argv += ["--until", str(until), "--dir", str(run_dir)]
            argv += ["--out", str(run_dir / f"recv-{host}.json")]
            procs.append((f"receiver on {host}", tb.popen(host, argv, stderr=subprocess.PIPE)))
        for f in flows:
            argv = [*tb.rt(), tb.binary, "send", "--scenario", str(scenario), "--flow", f["name"]]
            argv += ["--t0", str(t0), "--out", str(run_dir / f"send-{f['name']}.json")]
            argv += seed_args
            sender = tb.popen(f["src"], argv, stderr=subprocess.PIPE)
            procs.append((f"sender of {f['name']}", sender))
        budget = (until - time.clock_gettime_ns(time.CLOCK_MONOTONIC)) / 1e9 + 30
        for what, p in procs:
            try:
                _, err = p.communicate(timeout=max(1.0, budget))
            except subprocess.TimeoutExpired:
                p.kill()
                raise LatnetError(f"{what} did not finish") from None
            if p.returncode != 0:
                raise LatnetError(f"{what} failed: {err.decode(errors='replace').strip()}")
        tb.stop_switches()
        p = subprocess.run(
            [tb.binary, "results", "--scenario", str(scenario), "--dir", str(run_dir)]
            + ["--end-ns", str(duration_ns + drain_ns), "--out", str(out), *seed_args],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            raise LatnetError(f"collecting results failed: {p.stderr.strip()}")
    return EmuResults(out)
