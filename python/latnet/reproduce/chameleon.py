"""`latnet reproduce chameleon`: the admission study of the Chameleon paper (seed 004, §5.1 and
§5.2) with Silo and QJump, and a packet-level cross-check of admitted sets.

* k = 4 study: a k = 4 fat-tree with 16 servers and 1 Gbit/s links, 8 queues of 97,024 B per
  switch port, the eight scenarios of Table 2, five systems (Chameleon with and without
  rerouting, Silo with real and without burst increase, QJump with n = 32), 100 runs each;
  a run adds seeded requests until the first rejection.
* Scalability: scenario 8 on fat-trees k = 4..12 with 40 x k/2 servers per edge switch (640 to
  17,280 servers), 2 and 4 queues (356 KB and 190 KB), 10 runs.
* Cross-check: admitted sets simulated packet by packet (tag-stack source routing, strict
  priority, greedy token-bucket sources in several phases, best-effort background).

``--quick``: 5 runs of the k = 4 study, k = 4 and 6 with 2 runs for scalability, one short
cross-check. Runs execute on a thread pool (one worker per core; the Rust core releases the
GIL), so per-request runtimes are measured with the other cores busy.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..chameleon import crosscheck, default_hosts_per_edge, run_tasks, summarize
from ..table import render

K4_SYSTEMS = ["chameleon", "chameleon-noreroute", "silo", "silo-noburst", "qjump"]
SCALE_SYSTEMS = ["chameleon", "chameleon-noreroute", "silo", "silo-noburst", "qjump"]
#: Systems whose admission does not depend on the number of Chameleon queues.
QUEUE_FREE = {"silo", "silo-noburst", "qjump"}

LEAF_SPINE = (
    """# two leaves, two spines, three servers per leaf, 100 Mbit/s: a small custom topology
[defaults.link]
rate = "100Mbps"
"""
    + "".join(f'[[nodes]]\nname = "{n}"\nkind = "switch"\n' for n in ["l0", "l1", "s0", "s1"])
    + "".join(
        f'[[nodes]]\nname = "h{leaf}{h}"\nkind = "host"\n'
        f'[[links]]\na = "h{leaf}{h}"\nb = "l{leaf}"\n'
        for leaf in range(2)
        for h in range(3)
    )
    + "".join(f'[[links]]\na = "l{leaf}"\nb = "s{s}"\n' for leaf in range(2) for s in range(2))
)


def _bar(total: int, desc: str):
    if not sys.stderr.isatty():
        start = time.monotonic()

        def quiet(done: int, tot: int) -> None:
            if done == tot or done % max(1, tot // 10) == 0:
                print(f"  {desc}: {done}/{tot} ({time.monotonic() - start:.0f} s)", file=sys.stderr)

        return quiet, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="run", file=sys.stderr)

    def cb(done: int, _tot: int) -> None:
        bar.n = done
        bar.refresh()

    return cb, bar.close


def _cost(t: dict) -> float:
    """Rough relative cost of a task, to start the longest first."""
    k = t.get("k") or 4
    w = {"chameleon": 8.0, "chameleon-noreroute": 1.5, "silo": 1.0, "silo-noburst": 1.0}
    return (k**3) * (t.get("hosts_per_edge") or 1) * w.get(t["system"], 0.1)


def _run(tasks: list[dict], desc: str, scheduler: str | None = None) -> list[list[dict]]:
    order = sorted(range(len(tasks)), key=lambda i: -_cost(tasks[i]))
    cb, close = _bar(len(tasks), desc)
    try:
        res = run_tasks([tasks[i] for i in order], progress=cb, scheduler=scheduler)
    finally:
        close()
    out: list[list[dict]] = [[] for _ in tasks]
    for j, i in enumerate(order):
        out[i] = res[j]
    return out


def _r(x: float, nd: int = 1) -> float:
    return float(round(x, nd)) if np.isfinite(x) else float("nan")


def _table(tid: str, title: str, unit: str, rows: list[dict]) -> dict:
    return {"id": tid, "title": title, "unit": unit, "rows": rows}


def _print(t: dict) -> None:
    cols: list[str] = []
    for r in t["rows"]:
        for c in r["ours"]:
            if c not in cols:
                cols.append(c)
    pcols: list[str] = []
    for r in t["rows"]:
        for c in r.get("paper", {}):
            if c not in pcols:
                pcols.append(c)
    headers = ["", *cols, *[f"paper {c}" for c in pcols]]
    rows = []
    for r in t["rows"]:
        line = [r["label"]]
        line += [r["ours"].get(c, "") for c in cols]
        line += [r.get("paper", {}).get(c, "") for c in pcols]
        rows.append(line)
    print()
    print(render(headers, rows, f"{t['title']} [{t['unit']}]"))


# ---------------------------------------------------------------- k = 4 study


def k4_study(runs: int, scheduler: str | None = None) -> dict:
    tasks = [
        dict(system=s, scenario=sc, runs=[i], k=4, queues=8, hosts_per_edge=2)
        for sc in range(1, 9)
        for s in K4_SYSTEMS
        for i in range(runs)
    ]
    res = _run(tasks, "k=4 study", scheduler)
    by: dict[tuple[int, str], list[dict]] = {}
    for t, r in zip(tasks, res, strict=True):
        by.setdefault((t["scenario"], t["system"]), []).extend(r)
    return by


def k4_tables(by: dict, runs: int) -> tuple[list[dict], dict]:
    acc_rows, reconf_rows = [], []
    means: dict[tuple[int, str], float] = {}
    for sc in range(1, 9):
        for s in K4_SYSTEMS:
            m = summarize(by[(sc, s)])
            means[(sc, s)] = m["accepted"]["mean"]
            a = m["accepted"]
            acc_rows.append(
                {
                    "label": f"scenario {sc} {s}",
                    "ours": {"mean": _r(a["mean"]), "p1": _r(a["p1"]), "p99": _r(a["p99"])},
                }
            )
        rc = [r["reconfigured"] for r in by[(sc, "chameleon")]]
        reconf_rows.append(
            {
                "label": f"scenario {sc}",
                "ours": {"mean": _r(float(np.mean(rc))), "max": int(np.max(rc))},
            }
        )
    ratio_rows = []
    for num in ["chameleon-noreroute", "chameleon"]:
        for den in ["silo", "silo-noburst", "qjump"]:
            ratios = [means[(sc, num)] / max(means[(sc, den)], 1e-9) for sc in range(1, 9)]
            row = {
                "label": f"{num} / {den}",
                "ours": {"min": _r(min(ratios), 2), "max": _r(max(ratios), 2)},
            }
            if num == "chameleon-noreroute" and den in ("silo", "qjump"):
                row["paper"] = {"min": 2, "max": 10}
            ratio_rows.append(row)
    util_rows, rt_rows = [], []
    for s in K4_SYSTEMS:
        allruns = [r for sc in range(1, 9) for r in by[(sc, s)]]
        m = summarize(allruns)
        u, t = m["utilisation"], m["runtime_ms"]
        util_rows.append(
            {
                "label": s,
                "ours": {k: _r(u[k], 3) for k in ("mean", "p10", "p50", "p90", "max")},
            }
        )
        rt_rows.append(
            {"label": s, "ours": {k: _r(t[k], 4) for k in ("p50", "mean", "p99", "max")}}
        )
    head = f"k=4 fat-tree (16 servers), 8 queues, {runs} runs"
    tables = [
        _table(
            "accepted-k4", f"Accepted flows until the first rejection, {head}", "flows", acc_rows
        ),
        _table(
            "ratio-k4",
            "Accepted flows, ratio of means over the 8 scenarios (paper: 2x to 10x without "
            "reconfiguration)",
            "x",
            ratio_rows,
        ),
        _table(
            "reconfigured-k4",
            f"Reconfigured flows per run, Chameleon, {head} (paper: fewer than 100 on average)",
            "flows",
            reconf_rows,
        ),
        _table(
            "utilisation-k4",
            f"Reserved utilisation of switch-to-switch links at the end of a run, {head}, "
            "all scenarios",
            "fraction",
            util_rows,
        ),
        _table("runtime-k4", f"Runtime per flow request, {head}, all scenarios", "ms", rt_rows),
    ]
    return tables, means


# ---------------------------------------------------------------- scalability


def scale_study(ks: list[int], runs: int, scheduler: str | None = None) -> dict:
    tasks = []
    for k in ks:
        m = default_hosts_per_edge(k)
        for q in (2, 4):
            for s in SCALE_SYSTEMS:
                if s in QUEUE_FREE and q != 2:
                    continue
                for i in range(runs):
                    tasks.append(
                        dict(system=s, scenario=8, runs=[i], k=k, queues=q, hosts_per_edge=m)
                    )
    res = _run(tasks, "scalability", scheduler)
    by: dict[tuple[int, int, str], list[dict]] = {}
    for t, r in zip(tasks, res, strict=True):
        by.setdefault((t["k"], t["queues"], t["system"]), []).extend(r)
    for k in ks:
        for s in QUEUE_FREE:
            by[(k, 4, s)] = by[(k, 2, s)]
    return by


def scale_tables(by: dict, ks: list[int], runs: int) -> list[dict]:
    acc_rows, ratio_rows, rt_rows = [], [], []
    for k in ks:
        servers = k**3 // 4 * 40
        for q in (2, 4):
            ms = {s: summarize(by[(k, q, s)]) for s in SCALE_SYSTEMS}
            for s in SCALE_SYSTEMS:
                a, t = ms[s]["accepted"], ms[s]["runtime_ms"]
                row = {
                    "label": f"k={k} ({servers} servers) q={q} {s}",
                    "ours": {"mean": _r(a["mean"]), "p1": _r(a["p1"]), "p99": _r(a["p99"])},
                }
                rt = {
                    "label": f"k={k} q={q} {s}",
                    "ours": {c: _r(t[c], 3) for c in ("p50", "mean", "p99", "max")},
                }
                if k == 12 and q == 4:
                    if s == "chameleon":
                        row["paper"] = {"mean": 16000}
                        rt["paper"] = {"max": 180000}
                    if s == "chameleon-noreroute":
                        rt["paper"] = {"mean": 9000, "p99": 20000}
                    if s == "silo":
                        rt["paper"] = {"mean": 10000, "p99": 30000}
                acc_rows.append(row)
                rt_rows.append(rt)
            for num in ("chameleon", "chameleon-noreroute"):
                den = ms["silo"]["accepted"]["mean"]
                row = {
                    "label": f"k={k} q={q} {num} / silo",
                    "ours": {"ratio": _r(ms[num]["accepted"]["mean"] / max(den, 1e-9), 2)},
                }
                if k == 12 and q == 4 and num == "chameleon":
                    row["paper"] = {"ratio": 15}
                ratio_rows.append(row)
    head = f"scenario 8, fat-trees with 40 x k/2 servers per edge switch, {runs} runs"
    return [
        _table(
            "accepted-scale",
            f"Accepted flows until the first rejection, {head} (paper: about 16,000 at k=12 "
            "with 4 queues)",
            "flows",
            acc_rows,
        ),
        _table(
            "ratio-scale",
            f"Accepted flows relative to Silo, {head} (paper: up to 15x)",
            "x",
            ratio_rows,
        ),
        _table(
            "runtime-scale",
            f"Runtime per flow request, {head} (paper, Java at k=12: Chameleon up to 9 s mean "
            "and 20 s tail without rerouting, 3 min with; Silo 10 s mean, 30 s tail)",
            "ms",
            rt_rows,
        ),
    ]


# ---------------------------------------------------------------- cross-check


def crosscheck_table(quick: bool, out: Path) -> dict:
    setups: list[tuple[str, dict]] = [
        ("k=4 q=4 scenario 8", dict(k=4, queues=4, scenario=8, duration_ms=10 if quick else 20)),
    ]
    if not quick:
        topo = out / "chameleon_leafspine.toml"
        topo.write_text(LEAF_SPINE)
        setups += [
            ("k=4 q=8 scenario 8", dict(k=4, queues=8, scenario=8)),
            ("k=4 q=4 scenario 1", dict(k=4, queues=4, scenario=1)),
            ("k=4 q=2 scenario 5", dict(k=4, queues=2, scenario=5, seed=3)),
            ("k=4 silo scenario 8", dict(k=4, queues=1, scenario=8, system="silo")),
            (
                "leaf-spine 100M q=8 scenario 2",
                dict(topology_file=str(topo), queues=8, scenario=2, tries=600, duration_ms=30),
            ),
            (
                "leaf-spine 100M q=4 per-hop 5us",
                dict(
                    topology_file=str(topo),
                    queues=4,
                    scenario=2,
                    tries=600,
                    duration_ms=30,
                    per_hop_ns=5000,
                ),
            ),
        ]
    rows = []
    for i, (name, kw) in enumerate(setups, 1):
        print(f"  cross-check {i}/{len(setups)}: {name}", file=sys.stderr)
        doc = crosscheck(**kw)
        c = doc["check"]
        for p in c["phases"]:
            v = (
                p["deadline_violations"]
                + p["budget_violations"]
                + p["bound_violations"]
                + p["dropped"]
                + p["misrouted"]
            )
            rows.append(
                {
                    "label": f"{name} ({doc['admitted']} flows) {p['phase']}",
                    "ours": {
                        "packets": p["received"],
                        "violations": v,
                        "e2e/deadline": _r(p["max_e2e_over_deadline"], 3),
                        "queue/budget": _r(p["max_queue_over_budget"], 3),
                        "queue/bound": _r(p["max_queue_over_bound"], 3),
                    },
                    "paper": {"violations": 0},
                }
            )
    return _table(
        "crosscheck",
        "Packet-level cross-check of admitted sets in latnet-sim: largest observed / bound "
        "(paper: testbed, no deadline violated)",
        "ratio",
        rows,
    )


# ---------------------------------------------------------------- plots


def plots(k4: dict, scale: dict, ks: list[int], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    colors = dict(
        zip(K4_SYSTEMS, ["tab:blue", "tab:cyan", "tab:red", "tab:orange", "tab:gray"], strict=True)
    )
    # accepted flows per scenario and system
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=120)
    width = 0.8 / len(K4_SYSTEMS)
    for j, s in enumerate(K4_SYSTEMS):
        xs, ys, lo, hi = [], [], [], []
        for sc in range(1, 9):
            a = summarize(k4[(sc, s)])["accepted"]
            xs.append(sc + (j - len(K4_SYSTEMS) / 2 + 0.5) * width)
            ys.append(max(a["mean"], 0.5))
            lo.append(max(a["mean"] - a["p1"], 0))
            hi.append(max(a["p99"] - a["mean"], 0))
        ax.bar(xs, ys, width, label=s, color=colors[s], yerr=[lo, hi], capsize=2)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5)
    ax.set_xlabel("scenario")
    ax.set_ylabel("accepted flows (mean, whiskers p1-p99)")
    ax.set_title("k=4 fat-tree: flows accepted until the first rejection")
    ax.set_xticks(range(1, 9))
    ax.legend(fontsize="small", ncol=3)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    p = out / "chameleon_accepted_k4.png"
    fig.savefig(p)
    plt.close(fig)
    written.append(str(p))

    # utilisation ECDF
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for s in K4_SYSTEMS:
        u = np.concatenate(
            [np.asarray(r["utilisation"]) for sc in range(1, 9) for r in k4[(sc, s)]]
        )
        x = np.sort(u)
        ax.step(
            x, np.arange(1, x.size + 1) / max(x.size, 1), where="post", label=s, color=colors[s]
        )
    ax.set_xlabel("reserved link utilisation (switch-to-switch links)")
    ax.set_ylabel("ECDF")
    ax.set_title("k=4 fat-tree, all scenarios and runs")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    p = out / "chameleon_utilisation_ecdf.png"
    fig.savefig(p)
    plt.close(fig)
    written.append(str(p))

    # runtime and accepted flows vs k
    for what, fname, ylabel in (
        (
            "runtime",
            "chameleon_runtime_vs_k.png",
            "runtime per request (ms): p50 solid, p99 dashed",
        ),
        ("accepted", "chameleon_accepted_vs_k.png", "accepted flows (mean)"),
    ):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120, sharey=True)
        for ax, q in zip(axes, (2, 4), strict=True):
            for s in SCALE_SYSTEMS:
                ms = [summarize(scale[(k, q, s)]) for k in ks]
                if what == "runtime":
                    ax.plot(
                        ks, [m["runtime_ms"]["p50"] for m in ms], "-o", color=colors[s], label=s
                    )
                    ax.plot(ks, [m["runtime_ms"]["p99"] for m in ms], "--", color=colors[s])
                else:
                    y = [max(m["accepted"]["mean"], 0.5) for m in ms]
                    ax.plot(ks, y, "-o", color=colors[s], label=s)
            ax.set_yscale("log")
            ax.set_xlabel("fat-tree k (40 x k/2 servers per edge)")
            ax.set_title(f"{q} queues, scenario 8")
            ax.set_xticks(ks)
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel(ylabel)
        axes[1].legend(fontsize="small")
        fig.tight_layout()
        p = out / fname
        fig.savefig(p)
        plt.close(fig)
        written.append(str(p))
    return written


# ---------------------------------------------------------------- entry point


def run(quick: bool, out: Path, scheduler: str | None = None) -> dict:
    runs_k4 = 5 if quick else 100
    runs_scale = 2 if quick else 10
    ks = [4, 6] if quick else [4, 6, 8, 10, 12]
    t0 = time.monotonic()
    print(
        f"Chameleon admission study ({'quick' if quick else 'full'}): k=4 study with "
        f"{runs_k4} runs, scalability k={ks} with {runs_scale} runs, "
        + (f"Dask scheduler {scheduler}" if scheduler else f"{os.cpu_count()} workers"),
        file=sys.stderr,
    )
    k4 = k4_study(runs_k4, scheduler)
    tables, _ = k4_tables(k4, runs_k4)
    scale = scale_study(ks, runs_scale, scheduler)
    tables += scale_tables(scale, ks, runs_scale)
    tables.append(crosscheck_table(quick, out))
    for t in tables:
        _print(t)
    written = plots(k4, scale, ks, out)
    summary = {
        "k4": {f"{sc}/{s}": summarize(v) for (sc, s), v in sorted(k4.items())},
        "scale": {f"{k}/{q}/{s}": summarize(v) for (k, q, s), v in sorted(scale.items())},
    }
    (out / "chameleon_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"\nplots: {', '.join(Path(w).name for w in written)}; {time.monotonic() - t0:.0f} s")
    return {"seed": "chameleon", "quick": quick, "tables": tables}
