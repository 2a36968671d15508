"""Plain-text tables for the terminal."""

from __future__ import annotations


def fmt_us(ns) -> str:
    """Nanoseconds as microseconds with one decimal; '-' for missing (None, NaN of any float
    type, pandas' NA)."""
    try:
        missing = ns is None or bool(ns != ns)
    except TypeError:  # pandas.NA: its comparisons are NA, which has no truth value
        missing = True
    if missing:
        return "-"
    return f"{ns / 1e3:.1f}"


def render(headers: list[str], rows: list[list], title: str | None = None) -> str:
    """Render rows under headers, numbers right-aligned, text left-aligned."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def is_num(s: str) -> bool:
        return s.replace(".", "", 1).replace("-", "", 1).replace("+", "", 1).isdigit() or s == "-"

    def line(r: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if is_num(c) else c.ljust(w) for c, w in zip(r, widths, strict=True)
        )

    out = []
    if title:
        out.append(title)
    out.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def flow_table(results) -> str:
    """The summary table of a run: one row per flow."""
    s = results.summary
    rows = []
    for f in s["flows"]:
        lat = f["latency_ns"] or {}
        settled = max(1, f["sent"] - f["in_flight_at_end"])
        rows.append(
            [
                f["name"],
                f"{f['src']}->{f['dst']}",
                f["priority"],
                f["sent"],
                f["received"],
                f"{100.0 * f['dropped'] / settled:.2f}",
                f"{f['throughput_bps'] / 1e6:.2f}",
                fmt_us(lat.get("min")),
                fmt_us(lat.get("mean")),
                fmt_us(lat.get("p99")),
                fmt_us(lat.get("max")),
                fmt_us(f["jitter_ns"]),
            ]
        )
    switching = s.get("switching", "store-and-forward")
    conv = s["latency_convention"] + ("" if switching == "store-and-forward" else f", {switching}")
    title = (
        f"{s['scenario']}: seed {s['seed']}, {s['duration_ns'] / 1e9:g} s of traffic, "
        f"{s['events']:,} events, latency {conv} (us)"
    )
    headers = ["flow", "path", "prio", "sent", "recv", "loss%", "Mbit/s"]
    headers += ["min", "mean", "p99", "max", "jitter"]
    out = render(headers, rows, title)
    if s.get("lbf"):
        out += "\n\n" + lbf_table(s["lbf"])
    return out


#: Columns of :func:`lbf_outcomes`.
LBF_OUTCOMES = ["recv", "early", "on-time", "late(marked)", "late(unmarked)", "dropped early"]
LBF_OUTCOMES += ["expired"]


def lbf_outcomes(f: dict) -> list:
    """How the packets of one flow with an SLO fared (a ``summary["lbf"]["flows"]`` entry)."""
    return [
        f["received"],
        f["early"],
        f["on_time"],
        f["late_marked"],
        f["late_unmarked"],
        sum(f["early_drops"].values()),
        sum(f["expired"].values()),
    ]


def lbf_table(lbf: dict) -> str:
    """Latency-Based Forwarding: outcomes of the flows with an SLO and the switches' counters."""
    rows = []
    for f in lbf["flows"]:
        upper = "-" if f["upper_ns"] is None else fmt_us(f["upper_ns"])
        rows.append(
            [f["flow"], f"{f['carry']}/{f['encap']}", fmt_us(f["lower_ns"]), upper]
            + lbf_outcomes(f)
        )
    headers = ["flow", "carry", "lb", "ub", *LBF_OUTCOMES]
    title = f"LBF flows (us; latency {lbf['latency_convention']}, {lbf['switching']})"
    out = render(headers, rows, title) if rows else title + ": none"
    srows = [
        [
            x["node"],
            x["lbf_packets"],
            x["best_effort"],
            x["malformed"],
            x["early_drops"],
            x["marked_late"],
            x["damper_violations"],
        ]
        for x in lbf["switches"]
    ]
    if srows:
        sh = ["switch", "lbf pkts", "best effort", "malformed", "early drops", "marked late"]
        sh += ["damper viol."]
        out += "\n\n" + render(sh, srows, "LBF switches")
    if lbf["notifications_total"]:
        out += f"\n\n{lbf['notifications_total']:,} late notifications (results.json: lbf)"
    return out


def tcp_row(f: dict) -> list:
    """A TCP flow's cells of :func:`tcp_table` after its name (``f``: a flow of
    ``results.json`` with a ``tcp`` object)."""
    t = f["tcp"]
    rtt = t["rtt_ns"] or {}
    fct = t["fct_ns"] or {}
    done = t["completion_ns"]
    return [
        t["cc"],
        "yes" if t["ecn"] else "no",
        f"{t['goodput_bps'] / 1e6:.2f}",
        t["retransmits"],
        "-" if t["rtos"] is None else t["rtos"],
        t["ce_marks"],
        fmt_us(rtt.get("mean")),
        fmt_us(rtt.get("p99")),
        f"{t['completed']}/{t['connections']}",
        fmt_us(fct.get("p50") if fct else done),
        fmt_us(fct.get("p99") if fct else done),
        slow_start_cell(t.get("slow_start")),
    ]


#: Short names of the causes in :func:`slow_start_cell`.
SLOW_START_CAUSES = {"hystart-train": "train", "hystart-delay": "delay", "timeout": "rto"}


def slow_start_cell(s: dict | None) -> str:
    """Why and at what threshold a TCP flow's slow start first ended (``delay 394kB``:
    HyStart's delay detector; ``train``, ``hystart``, ``loss``, ``ecn``, ``rto``, ``?`` when
    Linux did not tell), or ``-`` if it did not end (or BBR, or a tcp-rr flow)."""
    if not s:
        return "-"
    cause = s["cause"]
    return f"{SLOW_START_CAUSES.get(cause, cause or '?')} {s['ssthresh_bytes'] / 1e3:.0f}kB"


#: Headers of :func:`tcp_row`'s cells.
TCP_HEADERS = ["cc", "ecn", "goodput", "retx", "rto", "CE", "rtt", "rtt99", "done", "fct50"]
TCP_HEADERS += ["fct99", "ss exit"]
#: Title of the TCP tables.
TCP_TITLE = (
    "TCP (goodput Mbit/s; RTT and completion times in us; ss exit: why and at what threshold"
    " slow start first ended)"
)


def tcp_table(results) -> str | None:
    """The TCP summary of a run (one row per TCP flow), or ``None`` without TCP flows."""
    rows = [[f["name"], *tcp_row(f)] for f in results.summary["flows"] if f.get("tcp")]
    if not rows:
        return None
    return render(["flow", *TCP_HEADERS], rows, TCP_TITLE)


def duration_text(ns: float) -> str:
    """A duration in ns as ms (from 1 ms on) or us, for printed lines."""
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} us"


def emulation_timing(summary: dict) -> str | None:
    """One line on how closely an emulated run kept to the scenario's clock (``results.json``
    ``emulation``): frames the switches sent more than 100 us of the machine's clock late, the
    worst lateness of a switch's frame and of a sender's packet (in the scenario's time, and
    the machine's when dilated), frames one switch of a process took from another at their due
    instants (and how much earlier than the kernel delivered them, at most), packets the
    receivers read more than 100 us after the kernel stamped them (latencies run to the stamp),
    kernel stamps the clock conversion put after their read (only when there are any), ring
    drops and refused sends; ``None`` for a simulated run."""
    e = summary.get("emulation")
    if e is None:
        return None
    k = summary.get("dilation", 1)

    def late(ns: int) -> str:
        machine = f" ({duration_text(ns * k)} of the machine's clock)" if k > 1 else ""
        return duration_text(ns) + machine

    sw, snd = e["switches"], e["senders"]
    parts = [
        f"switches sent {sum(s['tx_late_100us'] for s in sw):,} of "
        f"{sum(s['forwarded'] for s in sw):,} frames more than 100 us late, the worst "
        + late(max((s["tx_late_max_ns"] for s in sw), default=0))
    ]
    if snd:
        parts.append(
            f"senders {sum(s['late_100us'] for s in snd):,} of {sum(s['sent'] for s in snd):,} "
            "packets, the worst " + late(max(s["late_max_ns"] for s in snd))
        )
    in_loop = sum(s.get("rx_in_loop", 0) for s in sw)
    if in_loop:
        parts.append(
            f"{in_loop:,} frames between switches of one process arrived when due, up to "
            + late(max(s.get("rx_in_loop_absorbed_max_ns", 0) for s in sw))
            + " before the kernel delivered them"
        )
    rcv = e.get("receivers", [])
    if rcv:
        parts.append(
            f"receivers read {sum(r['read_late_100us'] for r in rcv):,} of "
            f"{sum(r['stamped'] for r in rcv):,} packets more than 100 us after the kernel "
            "stamped their arrival (kept out of the latencies)"
        )
        unstamped = sum(r["received"] - r["stamped"] for r in rcv)
        if unstamped:
            parts.append(f"{unstamped:,} packets received without a stamp (timed when read)")
    ahead = sum(s.get("rx_stamp_ahead", 0) for s in sw) + sum(r.get("stamp_ahead", 0) for r in rcv)
    if ahead:
        worst = max(
            [s.get("rx_stamp_ahead_max_ns", 0) for s in sw]
            + [r.get("stamp_ahead_max_ns", 0) for r in rcv]
        )
        parts.append(
            f"{ahead:,} kernel stamps converted to after their read, up to {late(worst)}: "
            "the clocks' offset was off by that much (those arrivals count from the read)"
        )
    ring = sum(s["ring_drops"] for s in sw)
    refused = sum(s["tx_refused"] for s in sw)
    if ring or refused:
        parts.append(f"{ring:,} frames dropped by full receive rings, {refused:,} sends refused")
    return "emulation timing: " + "; ".join(parts)
