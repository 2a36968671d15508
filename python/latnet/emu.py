"""Run a scenario in emulation: the same scenario file as the simulator, on real packets.

``run_emu(path, out)`` brings up a :class:`~latnet.testbed.Testbed` (a namespace per node,
``latnet-switch`` per switch), starts a receiver on every destination host and one sender per
flow (``latnet-switch recv`` / ``send``: the simulator's traffic patterns in real time, one-way
latency from a timestamp in every packet; TCP flows on the hosts' Linux TCP, reported
in the simulator's ``tcp`` and time-series terms, see ``crates/latnet-switch/src/tcpflow.rs``),
waits for the scenario's duration plus its drain time,
stops the switches and writes ``results.json`` and ``flows.csv`` in the simulator's format
(``latnet-switch results``). The testbed is removed afterwards, also on errors and Ctrl-C.

Emulated latency is physical (application send to application receive); see
``crates/latnet-switch/src/results.rs`` for how the other fields are measured.
"""

from __future__ import annotations

import glob
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from . import LatnetError, UsageError
from .results import SavedResults
from .table import duration_text
from .testbed import Testbed

#: Time between starting the switches and the scenario's time zero (the switches start, then
#: the receivers and senders; about 0.1 s on two cores with a dozen nodes).
START_MARGIN_NS = 1_000_000_000
#: Least time left for starting receivers and senders once the switches are up.
SENDERS_MARGIN_NS = 200_000_000
#: More of both per switch port beyond the eighth (each opens a receive ring of 8 MB: a k = 4
#: fat-tree's 20 switches have 48 ports and took 2.1 s to start on two cores) and per flow
#: beyond the eighth (a sender process each, and maybe a receiver).
PER_PORT_MARGIN_NS = 80_000_000
PER_FLOW_MARGIN_NS = 25_000_000

T = TypeVar("T")


def start_margins(switch_ports: int, flows: int) -> tuple[int, int]:
    """(time from starting the switches to the scenario's time zero, least of it left for the
    receivers and senders once the switches are up) for a testbed of this size."""
    senders = SENDERS_MARGIN_NS + PER_FLOW_MARGIN_NS * max(0, flows - 8)
    extra = PER_PORT_MARGIN_NS * max(0, switch_ports - 8) + senders - SENDERS_MARGIN_NS
    return START_MARGIN_NS + extra, senders


class EmuResults(SavedResults):
    """Results of an emulated run, read back from its output directory (a
    :class:`~latnet.results.SavedResults`): ``summary`` is the dict of ``results.json``, with
    ``summary["emulation"]`` how late the machine made the run, per switch and sender
    (:func:`latnet.table.emulation_timing` says it in one line); ``flows``, ``ports`` and the
    other tables as for a simulated run; ``pcaps`` the link captures
    (``out/pcap/<node>-<peer>.pcap``, ``<node>-<peer>.1.pcap`` for the second of parallel
    links, as the simulator names them); ``queues``, ``hops`` and ``packets`` when the run was
    asked for them (the simulator's columns, ``id`` empty; ``packets`` has a row per packet
    sent: received, dropped by a switch or ``end-of-run`` (lost in a host or in flight at the
    end), instants from the scenario's time zero); ``hop_latency(flow)`` (from the sender's
    stamp to each emulated start of transmission); with LBF, ``lbf_flows``, ``lbf_switches``,
    ``lbf_drops`` and ``lbf_notifications`` as for a simulated run (the receivers' early /
    on-time / late count uses the measured, physical latency); with TCP flows (Linux's
    TCP), ``tcp`` and ``timeseries`` as for a simulated run, from ``TCP_INFO`` and the bytes
    the receivers read (what Linux keeps no count of is empty)."""

    def __repr__(self) -> str:
        s = self.summary
        return f"<latnet.EmuResults {s['scenario']!r} flows={len(s['flows'])}>"


#: Longest a receiver may take to bind its sockets before a run gives up on it.
RECEIVER_READY_S = 20.0


def start_flows(tb: Testbed, t0: int, until: int) -> list[tuple[str, subprocess.Popen]]:
    """Start a receiver on every destination host (until ``until``, CLOCK_MONOTONIC ns) and,
    once every receiver has bound its sockets, a sender per flow whose time zero is ``t0``.
    (A machine that took past ``t0`` to start the receivers makes the senders late, which they
    measure and report, rather than losing what they sent before anyone listened.)"""
    seed_args = ["--seed", str(tb.seed)] if tb.seed is not None else []
    procs: list[tuple[str, subprocess.Popen]] = []
    scenario = str(tb.scenario)
    for host in sorted({f["dst"] for f in tb.plan["flows"]}):
        argv = [*tb.rt(), tb.binary, "recv", "--scenario", scenario, "--host", host]
        argv += ["--until", str(until), "--t0", str(t0), "--dir", str(tb.run_dir)]
        argv += ["--ready", "stdout"]
        argv += ["--out", str(tb.run_dir / f"recv-{host}.json")]
        p = tb.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append((f"receiver on {host}", p))
    deadline = time.monotonic() + RECEIVER_READY_S
    for what, p in procs:
        _await_ready(what, p, deadline, procs)
    for f in tb.plan["flows"]:
        argv = [*tb.rt(), tb.binary, "send", "--scenario", scenario, "--flow", f["name"]]
        argv += ["--t0", str(t0), "--out", str(tb.run_dir / f"send-{f['name']}.json")]
        argv += seed_args
        sender = tb.popen(f["src"], argv, stderr=subprocess.PIPE)
        procs.append((f"sender of {f['name']}", sender))
    return procs


def _await_ready(
    what: str, p: subprocess.Popen, deadline: float, procs: list[tuple[str, subprocess.Popen]]
) -> None:
    """Wait for a receiver's ``ready`` line; on its exit or the deadline stop every process in
    ``procs`` and raise, naming the receiver."""
    assert p.stdout is not None
    ready, _, _ = select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))
    line = p.stdout.readline() if ready else b""
    if line == b"ready\n":
        return
    for _, q in procs:
        if q.poll() is None:
            q.kill()
    _, err = p.communicate(timeout=10)
    for _, q in procs:
        q.wait(timeout=10)
    if not ready:
        raise LatnetError(f"{what} had not bound its sockets after {RECEIVER_READY_S:g} s")
    msg = (err or b"").decode(errors="replace").strip()
    raise LatnetError(f"{what} failed (status {p.returncode}): {msg}")


def wait_all(procs: list[tuple[str, subprocess.Popen]], timeout: float) -> None:
    """Wait for processes started by :func:`start_flows`; raise if one failed."""
    deadline = time.monotonic() + timeout
    for what, p in procs:
        try:
            _, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            raise LatnetError(f"{what} did not finish") from None
        if p.returncode != 0:
            msg = (err or b"").decode(errors="replace").strip()
            raise LatnetError(f"{what} failed (status {p.returncode}): {msg}")


def collect(tb: Testbed, out: Path, end_ns: int) -> EmuResults:
    """Stop the switches and write results.json / flows.csv of the run into ``out``."""
    tb.stop_switches()
    seed_args = ["--seed", str(tb.seed)] if tb.seed is not None else []
    p = subprocess.run(
        [tb.binary, "results", "--scenario", str(tb.scenario), "--dir", str(tb.run_dir)]
        + ["--end-ns", str(end_ns), "--out", str(out), *seed_args]
        # per-packet records asked for: the receivers' logs and the switches' drop records into
        # packets.csv as well
        + (["--t0", str(tb.time_zero_ns)] if tb.hop_records and tb.time_zero_ns else []),
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise LatnetError(f"collecting results failed: {p.stderr.strip()}")
    return EmuResults(out)


def now_ns() -> int:
    """CLOCK_MONOTONIC (shared by every namespace of the machine)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def run_emu(
    scenario: str | os.PathLike[str],
    out: str | os.PathLike[str],
    seed: int | None = None,
    offloads: str = "off",
    pcap: bool | None = None,
    queues: str | None = None,
    switch_processes: str | None = None,
    packets: bool | None = None,
    host_nics: str = "shaped",
) -> EmuResults:
    """Run ``scenario`` in emulation; results go to ``out`` (run files to ``out/emu-run``).

    With ``pcap`` (``None``: the scenario's ``[output] pcap``), the switches capture every link
    direction into ``out/pcap/<node>-<peer>.pcap`` (parallel links: ``<node>-<peer>.1.pcap``, ...)
    as the simulator does: each frame stamped at the start of its emulated transmission,
    counted from the scenario's time zero (see ``latnet-switch run --pcap``). With ``queues`` (an
    interval such as ``"1ms"``; else the scenario's ``[output] queues``) they sample the queues
    they emulate as the simulator does, into ``out/queues.csv``. With ``packets`` (``None``: the
    scenario's ``[output] packets``) they record every transmission of a packet of a flow of
    latnet's senders into ``out/hops.csv``, the simulator's per-hop table (``id`` empty; ``flow``
    and ``seq`` name the packet), and every drop of one (``emu-run/drops-<node>.csv``); those
    and the receivers' logs (``emu-run/packets-<flow>.csv``) go into ``out/packets.csv``, the
    simulator's per-packet table, the rest of what the senders sent as ``end-of-run``.
    ``switch_processes``, ``host_nics``: see ``Testbed``."""
    out = Path(out)
    run_dir = out / "emu-run"
    run_dir.mkdir(parents=True, exist_ok=True)
    stale = [*run_dir.glob("*"), *(out / "pcap").glob("*.pcap")]
    stale += [out / "queues.csv", out / "hops.csv", out / "packets.csv"]
    for old in stale:
        if old.is_file():
            old.unlink()
    tb = Testbed(
        scenario,
        run_dir=run_dir,
        offloads=offloads,
        seed=seed,
        time_zero_after_ns=START_MARGIN_NS,
        queues=queues,
        switch_processes=switch_processes,
        host_nics=host_nics,
    )
    if tb.plan["tcp_refused"]:
        # (before any namespace: the senders would refuse them one by one)
        raise UsageError(f"{tb.scenario}: {tb.plan['tcp_refused']}")
    ports = sum(len(n["ifaces"]) for n in tb.plan["nodes"] if n["kind"] == "switch")
    after, senders = start_margins(ports, len(tb.plan["flows"]))
    tb.time_zero_after_ns = after
    tb.hop_records = packets if packets is not None else tb.plan["output_packets"]
    if pcap or (pcap is None and tb.plan["output_pcap"]):
        tb.pcap_dir = (out / "pcap").resolve()
    length = tb.plan["duration_ns"] + tb.plan["drain_ns"]
    with tb:
        # the switches know t0 (their AQM epochs count from it): it was set as they started
        t0 = tb.time_zero_ns
        assert t0 is not None
        if now_ns() > t0 - senders:
            raise LatnetError(
                f"the switches took more than {(after - senders) / 1e9:g} s "
                "to start; no time left to start the senders before the scenario's time zero"
            )
        procs = start_flows(tb, t0, t0 + length)
        wait_all(procs, (t0 + length - now_ns()) / 1e9 + 30)
        return collect(tb, out, length)


#: How many busy loops :func:`cpus_kept_awake` runs now (0: none); :func:`stall_report` records
#: it.
_awake_loops = 0
#: Whether :func:`least_stalled` has suggested ``--keep-cpus-awake`` (once per process).
_suggested = False

#: One busy loop: it ends when the process given (the one that started it) is gone, so that no
#: loop outlives it, whatever ends it.
_AWAKE_LOOP = 'while kill -0 "$1" 2>/dev/null; do :; done'


@contextmanager
def cpus_kept_awake() -> Iterator[list[int]]:
    """While the block runs, one busy loop per CPU at the lowest priority (``SCHED_IDLE``)
    keeps the machine's CPUs from going idle; yields the loops' process ids (none where
    ``SCHED_IDLE`` is refused: said on stderr).

    On a virtual machine, waking an idle vCPU is where most of the emulation's stalls come
    from: a ``SCHED_FIFO`` 1 ms sleep overshot by up to 1.8-11.6 ms on an idle 2-vCPU machine,
    0.5-0.9 ms beside two such loops (see BENCHMARKS.md, "The test suite on 2 cores"). A
    ``SCHED_IDLE`` task gives way to any other at once: the loops take only the time nothing
    else wants, and burn it (``make test`` runs them for its real-time tests)."""
    global _awake_loops
    loops: list[subprocess.Popen] = []
    try:
        try:
            for _ in range(len(os.sched_getaffinity(0))):
                argv = ["sh", "-c", _AWAKE_LOOP, "awake", str(os.getpid())]
                # (no stream of this process: one that reads them to their end would wait
                # for the loops)
                null = subprocess.DEVNULL
                loops.append(subprocess.Popen(argv, stdin=null, stdout=null, stderr=null))
                os.sched_setscheduler(loops[-1].pid, os.SCHED_IDLE, os.sched_param(0))
        except (OSError, AttributeError) as e:  # (AttributeError: no SCHED_IDLE here)
            print(
                f"latnet: --keep-cpus-awake: cannot run a loop at idle priority ({e}); "
                "the CPUs are not kept awake",
                file=sys.stderr,
            )
            _stop(loops)
        _awake_loops = len(loops)
        yield [p.pid for p in loops]
    finally:
        _awake_loops = 0
        _stop(loops)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()
    procs.clear()


def least_stalled(
    run: Callable[[Path], T],
    late_ns: Callable[[T], int],
    base: Path,
    name: str,
    stall_ns: int,
    attempts: int,
) -> tuple[T, list[int]]:
    """Run ``run(dir)`` into ``base/NAME`` again while the machine stalls it: ``late_ns`` of its
    result (how far the run's switches or senders fell behind the machine's clock) above
    ``stall_ns``, up to ``attempts`` runs in all. Returns the least stalled attempt's result, in
    ``base/NAME`` (the others' files in ``NAME.stalled-K``), and every attempt's lateness. A
    result that reads its files when asked (a :class:`~latnet.results.SavedResults`, such as
    :class:`EmuResults`) is opened again in ``base/NAME``.

    A stall of the machine (a virtual machine paused, a core taken away) holds every packet in
    flight: what a run measures then is the machine, not the network it emulates."""
    for old in base.glob(f"{glob.escape(name)}.stalled-*"):  # an earlier run's attempts
        shutil.rmtree(old, ignore_errors=True)
    results: list[T] = []
    late: list[int] = []
    for k in range(1, attempts + 1):
        d = base / f"{name}.stalled-{k}"
        shutil.rmtree(d, ignore_errors=True)
        results.append(run(d))
        late.append(late_ns(results[-1]))
        if late[-1] <= stall_ns:
            break
        if k < attempts:
            print(
                f"{name}: the machine stalled the run {duration_text(late[-1])} (more than "
                f"{duration_text(stall_ns)}): running it again",
                file=sys.stderr,
            )
            _suggest_keeping_awake()
    best = late.index(min(late))
    shutil.rmtree(base / name, ignore_errors=True)
    (base / f"{name}.stalled-{best + 1}").rename(base / name)
    kept = results[best]
    if isinstance(kept, SavedResults):
        kept = type(kept)(base / name)  # type: ignore[assignment]
    return kept, late


def _suggest_keeping_awake() -> None:
    global _suggested
    if _awake_loops == 0 and not _suggested:
        _suggested = True
        print(
            "(on a virtual machine, --keep-cpus-awake may spare runs like this: most stalls "
            "there come from waking an idle vCPU)",
            file=sys.stderr,
        )


def stall_report(late: dict[str, list[int]], stall_ns: int) -> dict:
    """A document's account of :func:`least_stalled` over its runs: per run each attempt's
    lateness (``attempts``), the threshold (``stall_ns``), the runs whose kept attempt is
    still stalled (``stalled``: their numbers carry the stall) and how many busy loops kept
    the CPUs awake meanwhile (``cpus_kept_awake``, :func:`cpus_kept_awake`; 0: none)."""
    return {
        "attempts": late,
        "stall_ns": stall_ns,
        "stalled": [name for name, ns in late.items() if min(ns) > stall_ns],
        "cpus_kept_awake": _awake_loops,
    }


def print_stalls(name: str, late: list[int], stall_ns: int) -> None:
    """Under a run's timing line: its attempts, when the machine stalled any (see
    :func:`least_stalled`)."""
    if len(late) == 1 and late[0] <= stall_ns:
        return
    kept = min(late)
    verdict = "still stalled: its numbers carry the stall" if kept > stall_ns else "kept the last"
    print(
        f"{name}: the machine stalled it by more than {duration_text(stall_ns)}: {len(late)} "
        f"attempt{'s' if len(late) > 1 else ''}, late at worst "
        + ", ".join(duration_text(ns) for ns in late)
        + f"; {verdict}"
    )
