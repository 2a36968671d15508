"""latnet: a toolkit for networks that keep latency promises.

Simulate (deterministic discrete-event), emulate (real packets between network namespaces)
and prove (network calculus) that each flow gets the latency it was promised.

    >>> import latnet
    >>> res = latnet.run("experiments/demo.toml")
    >>> res.flows[["flow", "latency_p99_ns"]]
    >>> latnet.plot.latency_cdf(res, "cdf.png")
"""

from __future__ import annotations

import os
from pathlib import Path

from . import plot
from ._latnet import LatnetError, ScenarioError, __version__
from ._latnet import check as _check
from ._latnet import run as _run
from .results import Results

__all__ = ["LatnetError", "Results", "ScenarioError", "__version__", "check", "plot", "run"]


def run(
    scenario: str | os.PathLike[str] | None = None,
    *,
    text: str | None = None,
    seed: int | None = None,
    packets: bool | None = True,
    pcap: bool | None = None,
    queues: str | None = None,
    progress=None,
) -> Results:
    """Run a scenario file (or TOML ``text``) in the simulator and return its results.

    ``seed`` overrides the scenario's seed. ``packets`` keeps one record per packet and per
    hop (``Results.packets`` / ``Results.hops``) and ``pcap`` a packet capture of every link
    (written by ``Results.write`` as ``pcap/<node>-<peer>.pcap``); ``None`` follows the
    scenario's ``[output]``. ``queues`` (an interval such as ``"1ms"``) samples every port's
    queue into ``Results.queues``.
    ``progress(now_ns, end_ns, events)`` is called about every 1 % of virtual time; returning
    ``False`` stops the run early.
    """
    if (scenario is None) == (text is None):
        raise LatnetError("give a scenario path or text=, not both")
    path = None if scenario is None else Path(scenario)
    raw = _run(
        path=path,
        text=text,
        seed=seed,
        packets=packets,
        pcap=pcap,
        queues=queues,
        progress=progress,
    )
    return Results(raw)


def check(scenario: str | os.PathLike[str] | None = None, *, text: str | None = None) -> str:
    """Validate a scenario without running it; returns a one-line description."""
    path = None if scenario is None else Path(scenario)
    return _check(path=path, text=text)
