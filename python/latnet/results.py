"""Results of a run as pandas DataFrames (built from what the Rust core returns)."""

from __future__ import annotations

import errno
import json
import os
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ._latnet import SimResults

_NONE64 = np.iinfo(np.uint64).max
_NONE32 = np.iinfo(np.uint32).max
_LAT = ("min", "mean", "p50", "p90", "p99", "p999", "max")
#: Columns of ``Results.flows`` (also those of a run without flows).
FLOW_COLUMNS = ["flow", "src", "dst", "priority", "size", "sent", "received", "dropped"]
FLOW_COLUMNS += ["in_flight_at_end", "loss_rate", "throughput_bps"]
FLOW_COLUMNS += [f"latency_{k}_ns" for k in _LAT] + ["jitter_ns"]
_HOP_COLUMNS = ["hop", "node", "toward", *_LAT]
_LBF_FLOW_COLUMNS = ["flow", "lower_ns", "upper_ns", "carry", "encap", "received", "early"]
_LBF_FLOW_COLUMNS += ["on_time", "late_marked", "late_unmarked", "marked_but_on_time"]
_LBF_FLOW_COLUMNS += ["sender_damper_violations", "early_drops", "expired"]
_LBF_SWITCH_COLUMNS = ["node", "lbf_packets", "best_effort", "malformed", "early_drops"]
_LBF_SWITCH_COLUMNS += ["marked_late", "damper_violations"]
#: Files ``Results.write`` writes only for some runs (besides ``pcap/*.pcap``).
_OPTIONAL_FILES = ("packets.csv", "hops.csv", "timeseries.csv", "queues.csv")
#: A run's files that a pickled result carries (and ``pcap/*.pcap``).
_RUN_FILES = ("results.json", "flows.csv", *_OPTIONAL_FILES)


class SummaryFrames:
    """Tables of a run's ``summary`` as DataFrames (simulated or emulated runs): per flow,
    per port, per TCP flow, per-hop latency and the LBF outcomes."""

    summary: dict

    @cached_property
    def flows(self) -> pd.DataFrame:
        """One row per flow: packets sent, received, dropped, in flight at the end, loss,
        throughput, latency statistics and jitter."""
        rows = []
        for f in self.summary["flows"]:
            lat = f["latency_ns"] or {}
            row = {
                "flow": f["name"],
                "src": f["src"],
                "dst": f["dst"],
                "priority": f["priority"],
                "size": f["size"],
                "sent": f["sent"],
                "received": f["received"],
                "dropped": f["dropped"],
                "in_flight_at_end": f["in_flight_at_end"],
                "loss_rate": f["dropped"] / max(1, f["sent"] - f["in_flight_at_end"]),
                "throughput_bps": f["throughput_bps"],
            }
            for k in _LAT:
                row[f"latency_{k}_ns"] = lat.get(k, np.nan)
            row["jitter_ns"] = f["jitter_ns"] if f["jitter_ns"] is not None else np.nan
            rows.append(row)
        return pd.DataFrame(rows, columns=FLOW_COLUMNS)

    @cached_property
    def ports(self) -> pd.DataFrame:
        """One row per egress port: rate, packets and bytes sent, utilisation, peak queue and
        drops."""
        rows = []
        for p in self.summary["ports"]:
            q = p["queue"]
            rows.append(
                {
                    "node": p["node"],
                    "peer": p["peer"],
                    "rate_bps": p["rate_bps"],
                    "tx_packets": p["tx_packets"],
                    "tx_bytes": p["tx_bytes"],
                    "utilisation": p["utilisation"],
                    "peak_packets": q["peak_packets"],
                    "peak_bytes": q["peak_bytes"],
                    "drops": sum(q["drops"].values()),
                }
            )
        return pd.DataFrame(rows)

    @cached_property
    def tcp(self) -> pd.DataFrame | None:
        """One row per TCP flow: goodput, retransmissions, ECN, RTT and completion times, and
        when, at what threshold and why slow start first ended (``ss_exit_*``)."""
        rows = []
        for f in self.summary["flows"]:
            t = f.get("tcp")
            if t is None:
                continue
            rtt = t["rtt_ns"] or {}
            fct = t["fct_ns"] or {}
            row = {"flow": f["name"], "cc": t["cc"], "ecn": t["ecn"]}
            row.update(
                {
                    k: t[k]
                    for k in (
                        "delivered_bytes",
                        "goodput_bps",
                        "segments_sent",
                        "retransmits",
                        "rtos",
                        "fast_recoveries",
                        "ecn_reductions",
                        "ece_acks",
                        "ce_marks",
                        "connections",
                        "completed",
                        "aborted",
                    )
                }
            )
            row["completion_ns"] = t["completion_ns"] if t["completion_ns"] is not None else np.nan
            for k in ("min", "mean", "p50", "p99", "max"):
                row[f"rtt_{k}_ns"] = rtt.get(k, np.nan)
            for k in ("min", "mean", "p50", "p99", "max"):
                row[f"fct_{k}_ns"] = fct.get(k, np.nan)
            # (results written before these were kept have neither)
            row["loss_probes"] = t.get("loss_probes")
            ss = t.get("slow_start") or {}
            row["ss_exit_ns"] = ss.get("t_ns", np.nan)
            row["ss_exit_ssthresh_bytes"] = ss.get("ssthresh_bytes", np.nan)
            row["ss_exit_cause"] = ss.get("cause")
            rows.append(row)
        return pd.DataFrame(rows) if rows else None

    @property
    def latency_convention(self) -> str:
        return self.summary["latency_convention"]

    def hop_latency(self, flow: str) -> pd.DataFrame:
        """Latency at the start of transmission from each hop of ``flow`` (ns)."""
        for f in self.summary["flows"]:
            if f["name"] == flow:
                rows = []
                for h in f["hops"]:
                    lat = h["latency_ns"] or {}
                    row = {"hop": h["hop"], "node": h["node"], "toward": h["toward"]}
                    row.update({k: lat.get(k, np.nan) for k in _LAT})
                    rows.append(row)
                return pd.DataFrame(rows, columns=_HOP_COLUMNS)
        names = ", ".join(f["name"] for f in self.summary["flows"]) or "none"
        raise KeyError(f"no flow named {flow!r} (flows: {names})")

    @cached_property
    def lbf_flows(self) -> pd.DataFrame | None:
        """One row per flow with an SLO: its bounds (``upper_ns`` NaN without one), carry and
        carrier, and how its packets fared: ``early``, ``on_time``, ``late_marked``,
        ``late_unmarked``, ``marked_but_on_time``, and ``early_drops`` / ``expired`` summed over
        the switches (per switch in :attr:`lbf_drops`). ``None`` for a run without LBF."""
        lbf = self.summary.get("lbf")
        if lbf is None:
            return None
        rows = []
        for f in lbf["flows"]:
            row = {k: v for k, v in f.items() if k not in ("early_drops", "expired")}
            row["upper_ns"] = np.nan if f["upper_ns"] is None else f["upper_ns"]
            row["early_drops"] = sum(f["early_drops"].values())
            row["expired"] = sum(f["expired"].values())
            rows.append(row)
        return pd.DataFrame(rows, columns=None if rows else _LBF_FLOW_COLUMNS)

    @cached_property
    def lbf_drops(self) -> pd.DataFrame | None:
        """SLO packets the switches dropped, one row per flow, switch and reason: ``early`` (at
        arrival, when the upper bound could no longer be met) or ``expired`` (in the queue, at
        dequeue); columns ``flow``, ``node``, ``reason``, ``packets``. ``None`` without LBF."""
        lbf = self.summary.get("lbf")
        if lbf is None:
            return None
        rows = [
            {"flow": f["flow"], "node": node, "reason": reason, "packets": n}
            for f in lbf["flows"]
            for reason, key in (("early", "early_drops"), ("expired", "expired"))
            for node, n in sorted(f[key].items())
        ]
        return pd.DataFrame(rows, columns=["flow", "node", "reason", "packets"])

    @cached_property
    def lbf_switches(self) -> pd.DataFrame | None:
        """One row per LBF switch: SLO and best-effort packets forwarded, malformed blocks
        dropped, early drops, packets marked late and damper violations. ``None`` without LBF."""
        lbf = self.summary.get("lbf")
        if lbf is None:
            return None
        return pd.DataFrame(
            lbf["switches"], columns=None if lbf["switches"] else _LBF_SWITCH_COLUMNS
        )

    @cached_property
    def lbf_notifications(self) -> pd.DataFrame | None:
        """Late notifications (``upper = "mark"``), in time order: when, at which switch, for
        which flow and sequence number, the projected latency and the upper bound. Only the
        first 10,000 are kept; ``summary["lbf"]["notifications_total"]`` counts them all.
        ``None`` without LBF."""
        lbf = self.summary.get("lbf")
        if lbf is None:
            return None
        cols = ["time_ns", "node", "flow", "seq", "projected_ns", "upper_ns"]
        return pd.DataFrame(lbf["notifications"], columns=cols)


class Results(SummaryFrames):
    """What one run produced.

    Attributes: ``summary`` (the dict of ``results.json``), and DataFrames ``flows`` (one row per
    flow), ``ports`` (one row per egress port), ``packets`` and ``hops`` (one row per packet / per
    transmission, when recorded; otherwise ``None``; ``hops`` has ``enqueue_ns``, ``eligible_ns``,
    when an LBF or damper hold ended, and ``start_tx_ns``), ``tcp`` (one row per TCP flow) and
    ``timeseries`` (one row per TCP flow and interval; both ``None`` without TCP flows), and
    ``queues`` (one row per egress port and interval, with ``[output] queues``); with LBF,
    ``lbf_flows``, ``lbf_switches``, ``lbf_drops`` and ``lbf_notifications`` (else ``None``).

    It pickles as the files :meth:`write` writes, and comes back as a :class:`SavedResults` of
    them (in a temporary directory removed with it): the same tables, captures and warnings.
    """

    def __init__(self, raw: SimResults):
        self._raw = raw
        self.summary: dict = json.loads(raw.json())
        #: The scenario's warnings (each naming the file, line and key), as ``latnet.run``
        #: issued them (``latnet.ScenarioWarning``).
        self.warnings: list[str] = raw.warnings()

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<latnet.Results {s['scenario']!r} seed={s['seed']} flows={len(s['flows'])} "
            f"events={s['events']} latency={s['latency_convention']}>"
        )

    @cached_property
    def timeseries(self) -> pd.DataFrame | None:
        """Per TCP flow and interval: goodput, cwnd, RTT samples, retransmissions, CE marks."""
        import io

        text = self._raw.timeseries_csv()
        if text is None:
            return None
        return pd.read_csv(io.StringIO(text))

    @cached_property
    def queues(self) -> pd.DataFrame | None:
        """Per egress port and interval (``[output] queues``): packets and bytes waiting at the
        interval's end and the most waiting at any instant of it; ``None`` without the series."""
        import io

        text = self._raw.queues_csv()
        if text is None:
            return None
        return pd.read_csv(io.StringIO(text))

    @cached_property
    def packets(self) -> pd.DataFrame | None:
        cols = self._raw.packet_columns()
        if cols is None:
            return None
        names = np.array(self._raw.flow_names() + [""], dtype=object)
        nodes = np.array([n["name"] for n in self.summary["nodes"]] + [""], dtype=object)
        flow = np.frombuffer(cols["flow"], dtype="<u4").astype(np.int64)
        flow[flow >= len(names) - 1] = len(names) - 1
        lat = np.frombuffer(cols["latency_ns"], dtype="<u8")
        drop_node = np.frombuffer(cols["drop_node"], dtype="<u4").astype(np.int64)
        drop_node[drop_node == _NONE32] = len(nodes) - 1
        return pd.DataFrame(
            {
                "id": np.frombuffer(cols["id"], dtype="<u8"),
                "flow": names[flow],
                "seq": np.frombuffer(cols["seq"], dtype="<u8"),
                "created_ns": np.frombuffer(cols["created_ns"], dtype="<u8"),
                "end_ns": np.frombuffer(cols["end_ns"], dtype="<u8"),
                "received": lat != _NONE64,
                "latency_ns": np.where(lat == _NONE64, np.nan, lat.astype(np.float64)),
                "drop_reason": cols["drop_reason"],
                "drop_node": nodes[drop_node],
            }
        )

    @cached_property
    def hops(self) -> pd.DataFrame | None:
        cols = self._raw.hop_columns()
        if cols is None:
            return None
        names = np.array(self._raw.flow_names() + [""], dtype=object)
        flow = np.frombuffer(cols["flow"], dtype="<u4").astype(np.int64)
        flow[flow >= len(names) - 1] = len(names) - 1
        nodes = np.array([n["name"] for n in self.summary["nodes"]], dtype=object)
        return pd.DataFrame(
            {
                "id": np.frombuffer(cols["id"], dtype="<u8"),
                "flow": names[flow],
                "seq": np.frombuffer(cols["seq"], dtype="<u8"),
                "hop": np.frombuffer(cols["hop"], dtype="u1"),
                "node": nodes[np.frombuffer(cols["node"], dtype="<u4")],
                "port": np.frombuffer(cols["port"], dtype="<u4"),
                "priority": np.frombuffer(cols["priority"], dtype="u1"),
                "enqueue_ns": np.frombuffer(cols["enqueue_ns"], dtype="<u8"),
                "eligible_ns": np.frombuffer(cols["eligible_ns"], dtype="<u8"),
                "start_tx_ns": np.frombuffer(cols["start_tx_ns"], dtype="<u8"),
            }
        )

    def json(self) -> str:
        """The JSON summary, exactly as ``results.json`` holds it."""
        return self._raw.json()

    def __copy__(self) -> Results:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __deepcopy__(self, memo: dict) -> Results:
        # a Results still (not the SavedResults pickling makes): the run's Rust tables are
        # never changed, so the copy shares them; the rest is copied
        import copy

        new = object.__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            new.__dict__[k] = v if k == "_raw" else copy.deepcopy(v, memo)
        return new

    def __reduce__(self):
        # pickled as the files the run writes (the tables live in Rust): it comes back as a
        # SavedResults of them, with the same tables, columns and dtypes, and the warnings
        import tempfile

        with tempfile.TemporaryDirectory(prefix="latnet-pickle-") as tmp:
            self._raw.write_dir(Path(tmp))
            files = _run_files(Path(tmp))
        return (_restore, (SavedResults, files, list(self.warnings)))

    def write(self, directory: str | os.PathLike[str]) -> list[str]:
        """Write results.json, flows.csv (and packets.csv, hops.csv if recorded, timeseries.csv
        with TCP flows, queues.csv with a queue series, pcap/<node>-<peer>.pcap with packet
        captures) into ``directory`` (created if need be); returns the paths written. Those of
        these files an earlier run left in ``directory`` and this run does not write are
        removed, so that the directory holds one run. What cannot be written raises the
        ``OSError`` of its kind (``PermissionError``, ``NotADirectoryError``, ...) naming it;
        :func:`latnet.load` reads the directory back."""
        try:
            out = Path(os.fsdecode(directory))
        except TypeError:
            raise TypeError(
                f"directory: expected a path (str or os.PathLike), got {type(directory).__name__}"
            ) from None
        written = self._raw.write_dir(out)
        keep = {Path(w) for w in written}
        stale = [out / name for name in _OPTIONAL_FILES]
        if (out / "pcap").is_dir():
            stale += sorted((out / "pcap").glob("*.pcap"))
        for p in stale:
            if p not in keep and p.is_file():
                p.unlink()
        return written


#: Columns of ``packets.csv`` and their dtypes (``id`` and ``latency_ns`` may be empty).
_PACKET_DTYPES = {"id": "UInt64", "flow": object, "seq": "uint64", "created_ns": "uint64"}
_PACKET_DTYPES |= {"end_ns": "uint64", "latency_ns": "float64", "drop_reason": object}
_PACKET_DTYPES |= {"drop_node": object}
#: Columns of ``hops.csv`` and their dtypes (``id`` empty in an emulated run's).
_HOP_DTYPES = {"id": "UInt64", "flow": object, "seq": "uint64", "hop": "uint8", "node": object}
_HOP_DTYPES |= {"port": "uint32", "priority": "uint8", "enqueue_ns": "uint64"}
_HOP_DTYPES |= {"eligible_ns": "uint64", "start_tx_ns": "uint64"}


class SavedResults(SummaryFrames):
    """A run's output directory read back (:func:`latnet.load`): what ``latnet run --out``,
    :meth:`Results.write` or an emulated run wrote. The attributes of
    :class:`Results`, with the same columns and dtypes: ``summary`` (``results.json``),
    ``flows``, ``ports``, ``tcp``, the LBF tables, and from their files, each ``None`` when the
    run did not write it, ``packets``, ``hops``, ``timeseries`` and ``queues``; ``pcaps`` lists
    the link captures (``pcap/*.pcap``, for :func:`latnet.read_pcap`). The ``id`` of an
    emulated run's packets and hops is empty: ``<NA>`` in a nullable ``UInt64`` column (a
    simulated run's is ``uint64``, as in :class:`Results`).

    A directory without ``results.json`` raises FileNotFoundError; a file that is not what a
    run writes, :class:`latnet.UsageError` naming it (and the column or key)."""

    def __init__(self, directory: str | os.PathLike[str]):
        try:
            self.out = Path(os.fsdecode(directory))
        except TypeError:
            raise TypeError(
                f"directory: expected a path (str or os.PathLike), got {type(directory).__name__}"
            ) from None
        path = self.out / "results.json"
        if not path.is_file():
            what = "no such directory" if not self.out.is_dir() else "not a run's output directory"
            raise FileNotFoundError(errno.ENOENT, f"no results.json ({what})", str(path))
        try:
            summary = json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise _usage(f"{path}: not a run's results (JSON): {e}") from None
        if not isinstance(summary, dict):
            raise _usage(f"{path}: expected a JSON object, got {type(summary).__name__}")
        for key in ("scenario", "flows", "ports", "nodes"):
            if key not in summary:
                raise _usage(f"{path}: {key}: missing (not a run's results.json)")
        self.summary: dict = summary
        self.pcaps: list[Path] = sorted((self.out / "pcap").glob("*.pcap"))
        #: The scenario's warnings, when this came from a pickled :class:`Results` (a run's
        #: files do not keep them).
        self.warnings: list[str] = []

    def __reduce__(self):
        # the run's files travel with it: unpickled into a temporary directory of its own,
        # removed when the unpickled object is
        return (_restore, (type(self), _run_files(self.out), list(self.warnings)))

    def json(self) -> str:
        """The JSON summary, as ``results.json`` holds it (without the file's last newline,
        as :meth:`Results.json` gives it)."""
        text = (self.out / "results.json").read_text()
        return text[:-1] if text.endswith("\n") else text

    def __repr__(self) -> str:
        s = self.summary
        kind = "emulated" if "emulation" in s else "simulated"
        return f"<latnet.SavedResults {str(self.out)!r} {s['scenario']!r} {kind}>"

    def _csv(self, name: str, dtypes: dict | None = None) -> pd.DataFrame | None:
        path = self.out / name
        if not path.is_file():
            return None
        kw: dict = {}
        if dtypes is not None:
            kw = {"dtype": dtypes, "keep_default_na": False, "na_values": {"id": [""]}}
            if "latency_ns" in dtypes:
                kw["na_values"]["latency_ns"] = [""]
        try:
            df = pd.read_csv(path, **kw)
        except (ValueError, pd.errors.ParserError) as e:
            raise _usage(f"{path}: not the file a run writes: {e}") from None
        if dtypes is not None and list(df.columns) != list(dtypes):
            raise _usage(f"{path}: expected the columns {', '.join(dtypes)}")
        if dtypes is not None and not df["id"].hasnans:
            df["id"] = df["id"].astype("uint64")
        return df

    @cached_property
    def packets(self) -> pd.DataFrame | None:
        """One row per packet (``packets.csv``), as :attr:`Results.packets`."""
        df = self._csv("packets.csv", _PACKET_DTYPES)
        if df is not None:
            df.insert(5, "received", df["latency_ns"].notna())
        return df

    @cached_property
    def hops(self) -> pd.DataFrame | None:
        """One row per transmission (``hops.csv``), as :attr:`Results.hops`."""
        return self._csv("hops.csv", _HOP_DTYPES)

    @cached_property
    def timeseries(self) -> pd.DataFrame | None:
        """Per TCP flow and interval (``timeseries.csv``), as :attr:`Results.timeseries`."""
        return self._csv("timeseries.csv")

    @cached_property
    def queues(self) -> pd.DataFrame | None:
        """Per egress port and interval (``queues.csv``), as :attr:`Results.queues`."""
        return self._csv("queues.csv")


def _run_files(out: Path) -> dict[str, bytes]:
    """The contents of the run's files in directory ``out``, by their path in it."""
    names = [n for n in _RUN_FILES if (out / n).is_file()]
    names += [f"pcap/{p.name}" for p in sorted((out / "pcap").glob("*.pcap"))]
    return {n: (out / n).read_bytes() for n in names}


def _restore(cls: type, files: dict[str, bytes], warnings: list[str]) -> SavedResults:
    """A pickled result back: ``files`` (:func:`_run_files`) written into a new temporary
    directory, read by ``cls`` (a :class:`SavedResults`), the directory removed when the
    result is."""
    import shutil
    import tempfile
    import weakref

    if not (isinstance(cls, type) and issubclass(cls, SavedResults)):
        raise TypeError(f"expected a SavedResults class, got {cls!r}")
    for name in files:
        pcap = name.startswith("pcap/") and name.endswith(".pcap") and name.count("/") == 1
        if name not in _RUN_FILES and not (pcap and not name.startswith("pcap/.")):
            raise ValueError(f"{name!r} is not a file of a run's output directory")
    tmp = Path(tempfile.mkdtemp(prefix="latnet-results-"))
    try:
        for name, data in files.items():
            (tmp / name).parent.mkdir(exist_ok=True)
            (tmp / name).write_bytes(data)
        res = cls(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    res.warnings = list(warnings)
    weakref.finalize(res, shutil.rmtree, str(tmp), ignore_errors=True)
    return res


def _usage(message: str) -> Exception:
    from . import UsageError

    return UsageError(message)
