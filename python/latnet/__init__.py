"""latnet: a toolkit for networks that keep latency promises.

Simulate (deterministic discrete-event), emulate (real packets between network namespaces)
and prove (network calculus) that each flow gets the latency it was promised.

    >>> import latnet
    >>> res = latnet.run("experiments/demo.toml")
    >>> res.flows[["flow", "latency_p99_ns"]]
    >>> latnet.plot.latency_cdf(res, "cdf.png")
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from . import plot
from ._latnet import LatnetError, ScenarioError, __version__
from ._latnet import check as _check
from ._latnet import run as _run
from .results import Results, SavedResults


class UsageError(LatnetError, ValueError):
    """An option, or a file an option names, that cannot be used as given (the `latnet`
    command's exit status 2, as for a ScenarioError)."""


class ScenarioWarning(UserWarning):
    """A scenario that is valid but most likely not what was meant (a flow no link path joins:
    every packet dropped as ``no-route``); the message names the file, line and key. The
    ``latnet`` command prints it as ``latnet: warning: ...``."""


def _source(what: str, scenario, text, name) -> Path | None:
    """The scenario's path (``None`` for ``text``), or a UsageError / TypeError naming the
    argument that cannot be used."""
    if scenario is not None and text is not None:
        raise UsageError(f"{what}: give a scenario path or text=, not both")
    if scenario is None and text is None:
        raise UsageError(f"{what}: give a scenario path or text=")
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text: expected the scenario's TOML as str, got {type(text).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"name: expected str, got {type(name).__name__}")
    if scenario is None:
        return None
    try:
        return Path(os.fsdecode(scenario))
    except TypeError:
        raise TypeError(
            f"scenario: expected a path (str or os.PathLike), got {type(scenario).__name__}"
        ) from None


def _with_sets(path: Path | None, text: str | None, name: str, sets) -> tuple[str, str] | None:
    """The scenario's text with the keys of ``sets`` set and checked (as ``latnet run --set``),
    and the name its errors and warnings go by (the file or ``name``, and the keys set); ``None``
    when ``sets`` sets nothing (the scenario as it is)."""
    from .sweep import checked, with_sets

    pairs = list(sets.items()) if isinstance(sets, Mapping) else None
    if pairs is None and not isinstance(sets, (str, bytes)):
        try:
            # a pair is a tuple or list: a string of two characters is not a key and a value
            pairs = [tuple(p) if isinstance(p, (tuple, list)) else () for p in sets]
        except TypeError:
            pairs = None
    if pairs is None or any(len(p) != 2 or not isinstance(p[0], str) for p in pairs):
        raise TypeError(
            "set: expected a mapping of key to value or (key, value) pairs, such as "
            '{"links[0].rate": "50Mbps"}, got ' + type(sets).__name__
        )

    def toml_value(v) -> str:
        # Python's True is TOML's true; numbers and strings as the command line takes them
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    pairs = [(k, toml_value(v)) for k, v in pairs]
    if not pairs:
        return None
    label = f"{path if path is not None else name} ({', '.join(f'{k}={v}' for k, v in pairs)})"
    return (with_sets(path, pairs) if path is not None else checked(text, label, pairs)), label


def _warn(messages: list[str]) -> None:
    import warnings

    for m in messages:
        warnings.warn(m, ScenarioWarning, stacklevel=3)


__all__ = [
    "LatnetError",
    "Results",
    "SavedResults",
    "ScenarioError",
    "ScenarioWarning",
    "UsageError",
    "__version__",
    "check",
    "load",
    "plot",
    "read_pcap",
    "run",
]


def run(
    scenario: str | os.PathLike[str] | None = None,
    *,
    text: str | None = None,
    name: str = "<string>",
    set: Mapping[str, object] | Iterable[tuple[str, object]] | None = None,  # as --set
    seed: int | None = None,
    packets: bool | None = True,
    pcap: bool | None = None,
    queues: str | None = None,
    progress=None,
) -> Results:
    """Run a scenario file (or TOML ``text``) in the simulator and return its results.

    ``name`` labels ``text`` in error messages. ``set`` runs the scenario with keys set, as
    ``latnet run --set``: a mapping of key to value or ``(key, value)`` pairs, such as
    ``{"links[0].rate": "50Mbps", "flows[video].size": 500, "sim.duration": "2s"}`` (values as
    on the command line: TOML, or else a string; ``True`` / ``False`` are TOML's); a key or
    value that is wrong is a :class:`ScenarioError` naming it. ``seed`` overrides the
    scenario's seed. ``packets`` keeps one record per packet and per hop (``Results.packets`` /
    ``Results.hops``) and ``pcap`` a packet capture of every link (written by
    ``Results.write`` as ``pcap/<node>-<peer>.pcap``); ``None`` follows the scenario's
    ``[output]``. ``queues`` (an interval such as ``"1ms"``) samples every port's
    queue into ``Results.queues``.
    ``progress(now_ns, end_ns, events)`` is called about every 1 % of virtual time; returning
    ``False`` stops the run early, and an exception it raises stops the run and is raised.
    ``progress=True`` draws a bar on stderr instead (tqdm). The run gives up the GIL between
    these reports: other Python threads run meanwhile.
    What the scenario holds that is valid but most likely not meant (a flow no link path
    joins) is a :class:`ScenarioWarning` (and in ``Results.warnings``).
    """
    path = _source("run", scenario, text, name)
    edited = None if set is None else _with_sets(path, text, name, set)
    if edited is not None:
        # said once here, by key, rather than again by the run on the rewritten text
        (text, name), path = edited, None
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64
    ):
        whole = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)
        raise (UsageError if whole else TypeError)(
            f"seed: expected a whole number >= 0 (below 2^64), got {seed!r}"
        )
    close = None
    if progress is True or progress is False:
        from .progress import time_bar

        progress, close = time_bar(progress, path.stem if path else name)
    elif progress is not None and not callable(progress):
        raise TypeError(
            f"progress: expected True, False, None or a callable (now_ns, end_ns, events), "
            f"got {type(progress).__name__}"
        )
    try:
        raw = _run(
            path=path,
            text=text,
            name=name,
            seed=None if seed is None else int(seed),
            packets=packets,
            pcap=pcap,
            queues=queues,
            progress=progress,
        )
    finally:
        if close is not None:
            close()
    if edited is None:
        _warn(raw.warnings())
    return Results(raw)


def check(
    scenario: str | os.PathLike[str] | None = None,
    *,
    text: str | None = None,
    name: str = "<string>",
    set: Mapping[str, object] | Iterable[tuple[str, object]] | None = None,  # as --set
) -> str:
    """Validate a scenario without running it; returns a one-line description. ``name`` labels
    ``text`` in error messages; ``set`` sets keys first, as in :func:`run`. What is valid but
    most likely not meant is a :class:`ScenarioWarning` (as in :func:`run`)."""
    path = _source("check", scenario, text, name)
    edited = None if set is None else _with_sets(path, text, name, set)
    if edited is not None:
        text, name = edited  # checked, its warnings said
        about, _ = _check(path=None, text=text, name=name)
        return about
    about, warnings = _check(path=path, text=text, name=name)
    _warn(warnings)
    return about


def load(directory: str | os.PathLike[str]) -> SavedResults:
    """Read a run's output directory back (``latnet run --out``, :meth:`Results.write`, an
    emulated run): a :class:`SavedResults` with the tables :class:`Results` has, the
    same columns and dtypes, read from ``results.json`` and the CSV files beside it.

        >>> res = latnet.load("out/demo")
        >>> res.flows[["flow", "latency_p99_ns"]]
    """
    return SavedResults(directory)


def read_pcap(path: str | os.PathLike[str]):
    """The frames of a link capture (simulated or emulated, ``pcap/<node>-<peer>.pcap``) as a
    DataFrame: ``t_ns`` (start of transmission, from the scenario's time zero), ``wire_len``,
    ``captured``, the flow fields (``src``, ``dst``, ``proto``, ``sport``, ``dport``, ``dscp``,
    ``ecn``; nullable ``Int32``, ``<NA>`` for a frame whose headers do not parse) and the LBF
    block if the frame carries one (``lbf_carrier`` ``udp-shim`` or ``ipv6``, ``lbf_mode``,
    ``lbf_late`` (nullable ``Int8``), ``lbf_lower_ns``, ``lbf_upper_ns``,
    ``lbf_value_ns``: the latency so far, timestamp or damper hold, as the block's mode says;
    the three ``_ns`` columns are nullable ``UInt64``, ``<NA>`` without a block), the
    large-flow option of switch-assisted pacing if the frame carries one (``lf_type``
    ``register``, ``report`` or ``deregister``, ``lf_filled`` 1 once a switch wrote
    ``lf_count`` large flows on a port of ``lf_rate_kbps``);
    ``error`` holds the parser's message for a frame whose headers do not parse, and for one
    whose block or option does not (or whose header holds the option twice) each message,
    joined by ``"; "``, with the fields that could be read.
    A damaged file raises ValueError naming it."""
    import io

    import pandas as pd

    from ._latnet import pcap_frames_csv

    text = pcap_frames_csv(Path(path))
    # every column typed, so that an empty capture, or one with a frame that does not parse,
    # has the dtypes of any other
    dtypes = dict.fromkeys(("t_ns", "wire_len", "captured"), "int64")
    dtypes |= dict.fromkeys(("proto", "sport", "dport", "dscp", "ecn"), "Int32")
    dtypes |= {"src": "string", "dst": "string", "lbf_carrier": "string", "lbf_mode": "string"}
    dtypes |= {"lbf_late": "Int8", "error": "object"}
    dtypes |= {"lf_type": "string", "lf_filled": "Int8", "lf_count": "Int32"}
    dtypes |= {"lf_rate_kbps": "Int64"}
    # the block's fields are unsigned 64-bit: nullable UInt64 keeps every value exact
    dtypes |= dict.fromkeys(("lbf_lower_ns", "lbf_upper_ns", "lbf_value_ns"), "UInt64")
    df = pd.read_csv(io.StringIO(text), dtype=dtypes, keep_default_na=False, na_values=[""])
    df["error"] = df["error"].fillna("")
    return df
