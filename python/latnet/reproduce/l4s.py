"""`latnet reproduce l4s`: VDQ-CSAQM vs DualPI2 (seed 001, Nadas et al., ANRW 2020).

The seed's set-up in latnet's simulator: a 1 Gbit/s bottleneck with a 5 ms base RTT; the
L4S-Classic flow mix changes phase by phase through 1-0, 1-1, 10-1, 10-10, 50-10, 50-50, 10-50,
1-10, 0-1 (TCP bulk flows, each started at its phase's start plus a seeded jitter of up to
50 ms and stopped when its class shrinks). Every sender host marks packet values at its egress
(``pv-marker``, one common log-linear TVF, random-rate marker) so VDQ-CSAQM can use them;
DualPI2 (Linux profile) ignores them, so both AQMs see identical traffic and seeds. Beyond the
seed, the first set also runs DualPI2 with RFC 9332's Appendix A profile (``dualpi2-rfc9332``).

Experiment sets (L4S vs Classic):

* ``dctcp-cubic``: DCTCP (ECT(1)) vs CUBIC, 5 ms;
* ``prague-cubic``: Prague-like vs CUBIC, 5 ms;
* ``bbr-cubic``: BBR-like with the BBRv2-style ECN response (ECT(1)) vs CUBIC, 5 ms;
* ``rtt-5-40``: DCTCP vs CUBIC, every other flow of each class with a 40 ms base RTT;
* ``hetero-cc``: L4S alternately DCTCP and BBR-ECN, Classic alternately CUBIC and BBR.

Per set, AQM and phase (mean over seeds, with a 95 % t-interval): the L4S share of the goodput,
Jain's index over all flows present and between the two classes' per-flow means, sojourn
p50 / p99 / p99.9 of each physical queue, utilisation (bytes sent / capacity), CE-mark and drop
rates; CTV (VDQ-CSAQM) and probability (DualPI2) traces of the first seed of ``dctcp-cubic``.
Throughput, Jain and the AQM report cover each phase after its first ``warm`` seconds.
Runs go to a pool of two worker processes, or to a Dask cluster with ``--scheduler``.
``--quick``: 1 s phases, at most 5 flows per class, one seed.
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from pathlib import Path

import latnet

from ..sweep import map_tasks
from ..table import render

MIXES = [(1, 0), (1, 1), (10, 1), (10, 10), (50, 10), (50, 50), (10, 50), (1, 10), (0, 1)]
AQMS = ("vdq-csaqm", "dualpi2", "dualpi2-rfc9332")
# DualPI2 with RFC 9332's Appendix A profile (time-shifted FIFO, ramp native AQM, deterministic
# L4S marking) beside the Linux one: beyond the seed, on its first set only (a full set costs
# about a quarter of the reproduction's time).
RFC_SETS = ("dctcp-cubic",)
C_BPS = 1e9
CC = {
    "dctcp": 'cc = "dctcp", ect = "ect1"',
    "prague": 'cc = "prague"',
    "bbr-ecn": 'cc = "bbr", ecn = true, ect = "ect1", bbr_ecn = true',
    "cubic": 'cc = "cubic"',
    "bbr": 'cc = "bbr"',
}
# set -> (L4S CCs, Classic CCs, alternate 5 / 40 ms RTT)
SETS = {
    "dctcp-cubic": (["dctcp"], ["cubic"], False),
    "prague-cubic": (["prague"], ["cubic"], False),
    "bbr-cubic": (["bbr-ecn"], ["cubic"], False),
    "rtt-5-40": (["dctcp"], ["cubic"], True),
    "hetero-cc": (["dctcp", "bbr-ecn"], ["cubic", "bbr"], False),
}
QUEUE = {
    "vdq-csaqm": '{{ kind = "vdq-csaqm", rate = "1Gbps", epochs = [{e}], trace = {t} }}',
    "dualpi2": '{{ kind = "dualpi2", profile = "linux", epochs = [{e}], trace = {t} }}',
    "dualpi2-rfc9332": '{{ kind = "dualpi2", profile = "rfc9332", epochs = [{e}], trace = {t} }}',
}
FULL = {"phase_s": 10.0, "warm_s": 3.0, "max_flows": 50, "seeds": 3}
QUICK = {"phase_s": 1.0, "warm_s": 0.4, "max_flows": 5, "seeds": 1}
# The seed's and the L4S architecture's figures we can set beside ours.
PAPER_UTIL_VDQ_PCT = 98.4
TARGETS = {"l4s_p99_us": 1000.0, "util_pct": 98.0, "jain": 0.95}
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306}


def aqms_for(set_name: str) -> list[str]:
    """The AQMs run on one set: both of the seed's, and the RFC 9332 profile on ``RFC_SETS``."""
    return [a for a in AQMS if a != "dualpi2-rfc9332" or set_name in RFC_SETS]


def mixes(max_flows: int) -> list[tuple[int, int]]:
    """The flow-mix sequence with at most ``max_flows`` flows per class (10 scaled alike)."""
    if max_flows >= 50:
        return list(MIXES)

    def s(n: int) -> int:
        return {0: 0, 1: 1, 10: max(2, max_flows // 2), 50: max_flows}[n]

    return [(s(a), s(b)) for a, b in MIXES]


def scenario(
    set_name: str,
    aqm: str,
    seed: int,
    phase_s: float,
    warm_s: float,
    max_flows: int,
    trace: bool = False,
) -> str:
    """The scenario text of one run."""
    if set_name not in SETS:
        raise ValueError(f"set {set_name!r}: expected one of {', '.join(SETS)}")
    if aqm not in AQMS:
        raise ValueError(f"aqm {aqm!r}: expected one of {', '.join(AQMS)}")
    l_ccs, c_ccs, hetero_rtt = SETS[set_name]
    mx = mixes(max_flows)
    n = len(mx)
    epochs = []
    for k in range(n):
        if k > 0:
            epochs.append(k * phase_s)
        epochs.append(k * phase_s + warm_s)
    epochs.append(n * phase_s)  # the drain after the last phase is an epoch of its own
    e = ", ".join(f'"{round(t * 1000)}ms"' for t in epochs)
    q = QUEUE[aqm].format(e=e, t="true" if trace else "false")
    rng = random.Random(seed * 7919 + 1)
    s = f"""# generated by latnet.reproduce.l4s: set {set_name}, {aqm}, seed {seed}
name = "l4s-{set_name}-{aqm}"

[sim]
duration = "{round(n * phase_s * 1000)}ms"
drain = "100ms"
seed = {seed}

[defaults.link]
rate = "10Gbps"
delay = "100us"

[output]
timeseries = "100ms"

[[nodes]]
name = "sw"
kind = "switch"

[[nodes]]
name = "rx"
kind = "host"

[[links]]
a = "sw"
b = "rx"
rate = "1Gbps"
delay = "2350us"
queue_a = {q}
"""
    hosts = ["L5", "C5"] + (["L40", "C40"] if hetero_rtt else [])
    for h in hosts:
        delay = "17650us" if h.endswith("40") else "100us"
        s += f"""
[[nodes]]
name = "{h}"
kind = "host"

[[links]]
a = "{h}"
b = "sw"
delay = "{delay}"
queue_a = {{ kind = "pv-marker" }}
"""
    port = 20000
    for cls, idx, ccs in (("L", 0, l_ccs), ("C", 1, c_ccs)):
        most = max(m[idx] for m in mx)
        for j in range(most):
            active = [k for k, m in enumerate(mx) if m[idx] > j]
            if not active:
                continue
            first, last = active[0], active[-1]
            assert active == list(range(first, last + 1)), "contiguous phases"
            start = first * phase_s + rng.uniform(0.0, 0.05)
            stop = (last + 1) * phase_s
            host = f"{cls}{40 if hetero_rtt and j % 2 == 1 else 5}"
            cc = CC[ccs[j % len(ccs)]]
            s += f"""
[[flows]]
name = "{cls}{j}"
src = "{host}"
dst = "rx"
size = 1502
dst_port = {port}
start = "{round(start * 1e6)}us"
stop = "{round(stop * 1e6)}us"
traffic = {{ kind = "tcp-bulk", {cc} }}
"""
            port += 1
    return s


def jain(xs: list[float]) -> float:
    """Jain's fairness index (nan for no values)."""
    q = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * q) if xs and q > 0 else float("nan")


def _nan(x) -> float:
    return float("nan") if x is None else float(x)


def measure(args: tuple) -> dict:
    """Run one (set, aqm, seed) and reduce it to per-phase numbers (in a worker process)."""
    set_name, aqm, seed, cfg, trace = args
    text = scenario(
        set_name, aqm, seed, cfg["phase_s"], cfg["warm_s"], cfg["max_flows"], trace=trace
    )
    res = latnet.run(text=text, packets=False)
    summ = res.summary
    port = next(p for p in summ["ports"] if p["node"] == "sw" and p["peer"] == "rx")
    aqm_rep = port["aqm"]
    ts = res.timeseries
    mx = mixes(cfg["max_flows"])
    phases = []
    for k, (nl, nc) in enumerate(mx):
        a, b = k * cfg["phase_s"] + cfg["warm_s"], (k + 1) * cfg["phase_s"]
        sel = ts[(ts["t_s"] > a + 1e-9) & (ts["t_s"] <= b + 1e-9)]
        per = sel.groupby("flow")["goodput_bps"].mean()
        lf = [per.get(f"L{j}", 0.0) / 1e6 for j in range(nl)]
        cf = [per.get(f"C{j}", 0.0) / 1e6 for j in range(nc)]
        tot = sum(lf) + sum(cf)
        ep = aqm_rep["epochs"][2 * k + 1]
        length = (ep["end_ns"] - ep["start_ns"]) / 1e9
        cls = {c["class"]: c for c in ep["classes"]}
        row = {
            "mix": f"{nl}-{nc}",
            "l4s_share": sum(lf) / tot if tot > 0 else float("nan"),
            "jain": jain(lf + cf),
            "class_jain": jain([statistics.fmean(lf), statistics.fmean(cf)])
            if lf and cf
            else float("nan"),
            "goodput_mbps": tot,
            "util_pct": 100.0 * sum(c["tx_bytes"] for c in cls.values()) * 8 / (C_BPS * length),
        }
        for name, key in (("l4s", "l4s"), ("classic", "classic")):
            c = cls[key]
            soj = c.get("sojourn") or {}
            row[f"{name}_p50_us"] = _nan(soj.get("p50_ns")) / 1e3
            row[f"{name}_p99_us"] = _nan(soj.get("p99_ns")) / 1e3
            row[f"{name}_p999_us"] = _nan(soj.get("p999_ns")) / 1e3
            sent = c["tx_packets"]
            drops = c["aqm_drops"] + c["full_drops"]
            row[f"{name}_ce_pct"] = 100.0 * c["ce_marks"] / sent if sent else float("nan")
            row[f"{name}_drop_pct"] = (
                100.0 * drops / (sent + drops) if sent + drops else float("nan")
            )
        phases.append(row)
    out = {"set": set_name, "aqm": aqm, "seed": seed, "phases": phases, "events": summ["events"]}
    if trace:
        out["trace_names"] = aqm_rep["trace_names"]
        out["trace"] = aqm_rep["trace"]
    return out


def ci95(xs: list[float]) -> tuple[float, float | None]:
    """Mean and half-width of the 95 % t-interval (None for one value)."""
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return float("nan"), None
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, None
    t = T95.get(len(xs) - 1, 1.96)
    return m, t * statistics.stdev(xs) / math.sqrt(len(xs))


METRICS = [
    ("l4s_share", 3),
    ("jain", 4),
    ("class_jain", 4),
    ("util_pct", 2),
    ("l4s_p50_us", 1),
    ("l4s_p99_us", 1),
    ("l4s_p999_us", 1),
    ("classic_p50_us", 1),
    ("classic_p99_us", 1),
    ("classic_p999_us", 1),
    ("l4s_ce_pct", 3),
    ("classic_ce_pct", 3),
    ("l4s_drop_pct", 3),
    ("classic_drop_pct", 3),
]


def _round(x: float, nd: int):
    return None if x is None or math.isnan(x) else round(x, nd)


def aggregate(runs: list[dict], set_name: str, aqm: str) -> dict:
    """The table of one set and AQM: per phase, the mean and 95 % CI over seeds."""
    mine = [r for r in runs if r["set"] == set_name and r["aqm"] == aqm]
    rows = []
    for k, ph in enumerate(mine[0]["phases"]):
        ours = {"seeds": len(mine)}
        for m, nd in METRICS:
            mean, ci = ci95([r["phases"][k][m] for r in mine])
            ours[m] = _round(mean, nd)
            ours[f"{m}_ci95"] = _round(ci, nd) if ci is not None else None
        row = {"label": f"P{k + 1} {ph['mix']}", "ours": ours}
        if aqm == "vdq-csaqm":
            row["paper"] = {"util_pct": PAPER_UTIL_VDQ_PCT}
        rows.append(row)
    return {
        "id": f"{set_name}/{aqm}",
        "title": f"{set_name}, {aqm}: per phase (L4S-Classic flows), mean over seeds",
        "unit": "share / index / % / us",
        "rows": rows,
    }


def _fmt(o: dict, m: str, nd: int) -> str:
    v, ci = o[m], o.get(f"{m}_ci95")
    if v is None:
        return "-"
    s = f"{v:.{nd}f}"
    return s + (f"±{ci:.{nd}f}" if ci is not None else "")


def _print_table(t: dict) -> None:
    cols = [
        ("l4s_share", "L4S share", 3),
        ("jain", "Jain", 3),
        ("class_jain", "Jain L/C", 3),
        ("util_pct", "util %", 1),
        ("l4s_p50_us", "L p50 us", 0),
        ("l4s_p99_us", "L p99 us", 0),
        ("l4s_p999_us", "L p99.9", 0),
        ("classic_p50_us", "C p50 us", 0),
        ("classic_p99_us", "C p99 us", 0),
        ("l4s_ce_pct", "L CE %", 2),
        ("classic_drop_pct", "C drop %", 3),
    ]
    body = [[r["label"]] + [_fmt(r["ours"], m, nd) for m, _, nd in cols] for r in t["rows"]]
    print()
    print(render(["phase"] + [h for _, h, _ in cols], body, title=t["title"]))


def targets_table(tables: list[dict]) -> dict:
    """The issue's targets per set and AQM: L4S p99 < 1 ms (every phase with L4S flows),
    utilisation >= 98 % (every phase), Jain >= 0.95 between L4S and Classic in the 1-1 and
    10-10 mixes: Jain's index of the two classes' per-flow mean goodputs (``class_jain``;
    with one flow per class it is the index over all flows, ``jain``, also shown)."""
    rows = []
    for t in tables:
        ph = t["rows"]
        l4s_p99 = [r["ours"]["l4s_p99_us"] for r in ph if r["ours"]["l4s_p99_us"] is not None]
        util = [r["ours"]["util_pct"] for r in ph if r["ours"]["util_pct"] is not None]
        j11 = ph[1]["ours"]["class_jain"]
        j1010 = ph[3]["ours"]["class_jain"]
        worst_p99 = max(l4s_p99) if l4s_p99 else None
        min_util = min(util) if util else None
        rows.append(
            {
                "label": t["id"],
                "ours": {
                    "worst_l4s_p99_us": worst_p99,
                    "min_util_pct": min_util,
                    "mean_util_pct": round(statistics.fmean(util), 2) if util else None,
                    "class_jain_1_1": j11,
                    "class_jain_10_10": j1010,
                    "jain_1_1": ph[1]["ours"]["jain"],
                    "jain_10_10": ph[3]["ours"]["jain"],
                    "meets_p99": worst_p99 is not None and worst_p99 < TARGETS["l4s_p99_us"],
                    "meets_util": min_util is not None and min_util >= TARGETS["util_pct"],
                    "meets_jain": j11 is not None
                    and j1010 is not None
                    and min(j11, j1010) >= TARGETS["jain"],
                },
            }
        )
    return {
        "id": "targets",
        "title": "targets: L4S p99 sojourn < 1 ms, utilisation >= 98 %, Jain >= 0.95 between L4S "
        "and Classic (per-flow means) in 1-1 and 10-10",
        "unit": "us / % / index",
        "rows": rows,
    }


def _plot(tables: list[dict], traced: list[dict], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is a dependency of latnet
        return []
    paths = []
    sets = sorted({t["id"].split("/")[0] for t in tables}, key=list(SETS).index)
    metrics = [
        ("l4s_share", "L4S share of goodput", False),
        ("jain", "Jain (all flows)", False),
        ("l4s_p99_us", "L4S queue p99 sojourn (us)", True),
        ("classic_p99_us", "Classic queue p99 sojourn (us)", True),
        ("util_pct", "utilisation (%)", False),
    ]
    fig, axes = plt.subplots(
        len(metrics), len(sets), figsize=(3.2 * len(sets), 2.2 * len(metrics)), squeeze=False
    )
    by = {t["id"]: t for t in tables}
    for j, s in enumerate(sets):
        for i, (m, title, log) in enumerate(metrics):
            ax = axes[i][j]
            for aqm, style in zip(AQMS, ("o-", "s--", "^:"), strict=True):
                t = by.get(f"{s}/{aqm}")
                if t is None:
                    continue
                y = [_nan(r["ours"][m]) for r in t["rows"]]
                e = [_nan(r["ours"].get(f"{m}_ci95")) for r in t["rows"]]
                e = [0.0 if math.isnan(v) else v for v in e]
                ax.errorbar(range(len(y)), y, yerr=e, fmt=style, ms=3, lw=1, label=aqm)
            if log:
                ax.set_yscale("log")
            labels = [r["label"].split(" ")[1] for r in by[f"{s}/{AQMS[0]}"]["rows"]]
            ax.set_xticks(range(len(labels)), labels, fontsize=6, rotation=60)
            ax.tick_params(axis="y", labelsize=7)
            if i == 0:
                ax.set_title(s, fontsize=9)
            if j == 0:
                ax.set_ylabel(title, fontsize=7)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    p = out / "reproduce-l4s.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    paths.append(p)
    if traced:
        fig, axes = plt.subplots(len(traced), 1, figsize=(10, 2.6 * len(traced)), squeeze=False)
        for ax, r in zip(axes[:, 0], traced, strict=True):
            names = r["trace_names"]
            t = [x[0] / 1e9 for x in r["trace"]]
            ax2 = None
            for i, n in enumerate(names):
                if not n:
                    continue
                y = [x[1][i] for x in r["trace"]]
                if n.endswith("_bytes"):  # a backlog: on its own axis
                    ax2 = ax2 or ax.twinx()
                    ax2.plot(t, y, lw=0.5, color="grey", alpha=0.6, label=n)
                    ax2.set_ylabel(n, fontsize=7)
                else:
                    ax.plot(t, y, lw=0.7, label=n)
            ax.set_title(f"{r['set']}, {r['aqm']}, seed {r['seed']}", fontsize=9)
            ax.legend(fontsize=7, loc="upper left")
            if ax2 is not None:
                ax2.legend(fontsize=7, loc="upper right")
        axes[-1][0].set_xlabel("time (s)")
        fig.tight_layout()
        p = out / "reproduce-l4s-traces.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        paths.append(p)
    return paths


def run(
    quick: bool,
    out: Path,
    sets=None,
    cfg: dict | None = None,
    workers: int = 2,
    scheduler: str | None = None,
) -> dict:
    """Run every set with its AQMs (``aqms_for``) and all seeds; print tables; return the
    document written as reproduce-l4s.json. Runs go to ``workers`` local processes, or to the
    Dask cluster of ``scheduler`` (an address such as tcp://127.0.0.1:8786)."""
    cfg = dict(cfg or (QUICK if quick else FULL))
    sets = list(sets or SETS)
    jobs = [
        (s, aqm, seed, cfg, s == sets[0] and seed == 1)
        for s in sets
        for aqm in aqms_for(s)
        for seed in range(1, cfg["seeds"] + 1)
    ]
    (out / "l4s").mkdir(parents=True, exist_ok=True)
    for s in sets:
        for aqm in aqms_for(s):
            text = scenario(s, aqm, 1, cfg["phase_s"], cfg["warm_s"], cfg["max_flows"])
            (out / "l4s" / f"{s}-{aqm}.toml").write_text(text)
    where = f"Dask scheduler {scheduler}" if scheduler else f"{workers} workers"
    print(
        f"{len(jobs)} runs of {len(MIXES) * cfg['phase_s']:g} s simulated ({where})",
        file=sys.stderr,
    )
    runs = map_tasks(measure, jobs, scheduler=scheduler, workers=workers)
    tables = [aggregate(runs, s, aqm) for s in sets for aqm in aqms_for(s)]
    for t in tables:
        _print_table(t)
    targets = targets_table(tables)
    print()
    print(
        render(
            ["set/aqm", "worst L p99 us", "min util %", "Jain L/C 1-1", "Jain L/C 10-10"]
            + ["(all flows 10-10)", "p99", "util", "Jain"],
            [
                [
                    r["label"],
                    f"{r['ours']['worst_l4s_p99_us']}",
                    f"{r['ours']['min_util_pct']}",
                    f"{r['ours']['class_jain_1_1']}",
                    f"{r['ours']['class_jain_10_10']}",
                    f"{r['ours']['jain_10_10']}",
                    "met" if r["ours"]["meets_p99"] else "missed",
                    "met" if r["ours"]["meets_util"] else "missed",
                    "met" if r["ours"]["meets_jain"] else "missed",
                ]
                for r in targets["rows"]
            ],
            title=targets["title"],
        )
    )
    traced = [r for r in runs if "trace" in r]
    for p in _plot(tables, traced, out):
        print(f"wrote {p}")
    return {
        "seed": "l4s",
        "quick": quick,
        "config": {**cfg, "mixes": [f"{a}-{b}" for a, b in mixes(cfg["max_flows"])]},
        "tables": tables + [targets],
    }
