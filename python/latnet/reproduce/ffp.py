"""`latnet reproduce ffp`: the composite pipeline with the Fast-Forwarding Path (seed 002).

Measures ns per packet of the plain match-action pipeline and of the composite pipeline
(FFP in front of it) on the seed's three scenarios (IPv6 ACL, SEADP, WSM; Section 5.1), for
two pipelines: a POF-style baseline (linear scan for mask match, 1-bit trie for LPM, keys
assembled bit by bit, like the public DPDK POF switch) and a strong one (tuple space search,
hash per prefix length, word-wise keys). The pipelines are timed in rotation on the same
packets (every repeat times each of them once, so load from other processes falls on all alike)
and every figure is the fastest repeat on one core of this machine (noise only adds time; the
medians of the first table are kept in the JSON as ``*_median``); the seed measured a whole
switch with a hardware traffic generator, so only ratios are comparable. Every measured
packet's decision is also checked against a plain pipeline (``mismatches``, which must be 0).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from .. import _latnet

SCENARIOS = ("acl", "seadp", "wsm")
TITLES = {"acl": "IPv6 ACL (servers)", "seadp": "SEADP (videoconference)", "wsm": "WSM (vehicles)"}
# Fallback specs if the repository's experiments/ffp/ is not beside the package.
DEFAULT_SPECS = {
    "acl": {"rules": 1000, "routes": 2000},
    "seadp": {"rules": 500, "routes": 2000},
    "wsm": {"rules": 32, "routes": 256},
}
# The seed's results (Section 5.1): low-latency forwarding delay 62-68 % lower with the FFP for
# server and videoconference traffic, no gain for WSM; wire speed (10 Gbit/s) from 256-byte
# packets with the FFP vs 640 bytes for the MAT pipeline; in mixed traffic 17-20 % lower for the
# low-latency part and no increase for the rest.
PAPER_LL = {
    "acl": {"reduction_pct_low": 62, "reduction_pct_high": 68},
    "seadp": {"reduction_pct_low": 62, "reduction_pct_high": 68},
    # the seed gives no figure for WSM: "does not show a significant difference"
    "wsm": {"reduction_pct_low": 0, "reduction_pct_high": 0, "note": "no significant difference"},
}
PAPER_LINE = {
    "acl": {"mat_bytes": 640, "ffp_bytes": 256},
    "seadp": {"mat_bytes": 640, "ffp_bytes": 256},
}
PAPER_MIXED_LL = {"acl": (17, 20), "seadp": (17, 20)}
SHARES = (0, 20, 50, 80, 100)
LINE_RATE_BPS = 10e9


def _spec_text(name: str) -> str:
    here = Path(__file__).resolve().parents[3] / "experiments" / "ffp" / f"{name}.toml"
    if here.is_file():
        return here.read_text()
    d = DEFAULT_SPECS[name]
    return (
        f'scenario = "{name}"\nrules = {d["rules"]}\nroutes = {d["routes"]}\n'
        "ll_rules_permille = 300\nflows = 256\nseed = 2\n"
    )


def _median(xs) -> float:
    xs = [x for x in xs if x == x]  # drop NaN (an empty part)
    return statistics.median(xs) if xs else float("nan")


def _best(xs) -> float:
    xs = [x for x in xs if x == x]
    return min(xs) if xs else float("nan")


def _pct(base: float, new: float) -> float:
    return round(100.0 * (base - new) / base, 1) if base > 0 else float("nan")


def _no_nan(x):
    """``x`` with every NaN (the timing of an empty part) as None: JSON has no NaN."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_nan(v) for v in x]
    return x


def _print_table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n{title}")
    # an empty part (no low-latency packets at 0 %, no normal ones at 100 %) has no time
    cells = [["-" if str(c) == "nan" else str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def run(quick: bool, out: Path) -> dict:
    cfg = {
        "packets": 20_000 if quick else 100_000,
        "repeats": 5 if quick else 15,
        "flows": 128 if quick else 256,
        "sizes": (256, 1024) if quick else (128, 256, 512, 640, 1024, 1518),
        "churn_every": (100, 1000) if quick else (100, 1000, 10_000),
    }
    print(
        "measured on this machine, one core: ns per packet of classification alone (key "
        "assembly, lookups, instructions; no packet I/O). The seed timed a whole DPDK switch "
        "with a hardware traffic generator: compare ratios, not ns."
    )
    specs = {n: _spec_text(n) for n in SCENARIOS}
    (out / "ffp-rules").mkdir(parents=True, exist_ok=True)
    for n, s in specs.items():
        (out / "ffp-rules" / f"{n}.jsonl").write_text(_latnet.ffp_rules_json(s))
    pipelines = (("pof", False), ("pof", True), ("strong", False), ("strong", True))
    label = {
        ("pof", False): "POF",
        ("pof", True): "POF+FFP",
        ("strong", False): "strong",
        ("strong", True): "strong+FFP",
    }
    mismatches = 0
    tables = []

    key = {p: label[p].lower().replace("+", "_") for p in pipelines}

    def compare(name, share, size):
        nonlocal mismatches
        r = _latnet.ffp_compare(
            specs[name], share * 10, cfg["packets"], size, cfg["repeats"], flows=cfg["flows"]
        )
        mismatches += r["mismatches"]
        return r

    # 1. low-latency traffic only, per scenario and frame size; all pipelines side by side
    ll, ll_median = {}, {}
    bitwise = {}
    ref_size = 1024
    for name in SCENARIOS:
        for size in cfg["sizes"]:
            r = compare(name, 100, size)
            for p in pipelines:
                ll[(name, size, p)] = _best(r[key[p]]["ll_ns"])
                ll_median[(name, size, p)] = _median(r[key[p]]["ll_ns"])
            if size == ref_size:
                bitwise[name] = _best(r["pof_ffp_bitwise"]["ll_ns"])
    rows, jrows = [], []
    for name in SCENARIOS:
        pof, ffp = ll[(name, ref_size, pipelines[0])], ll[(name, ref_size, pipelines[1])]
        st, sf = ll[(name, ref_size, pipelines[2])], ll[(name, ref_size, pipelines[3])]
        paper = PAPER_LL[name]
        rows.append(
            [
                TITLES[name],
                f"{pof:.0f}",
                f"{ffp:.0f}",
                f"{_pct(pof, ffp)}",
                f"{pof / ffp:.2f}x",
                "~0"
                if "note" in paper
                else f"{paper['reduction_pct_low']}-{paper['reduction_pct_high']}",
                f"{bitwise[name]:.0f}",
                f"{pof / bitwise[name]:.2f}x",
                f"{st:.0f}",
                f"{sf:.0f}",
                f"{st / sf:.2f}x",
            ]
        )
        jrows.append(
            {
                "label": name,
                "ours": {
                    "pof_ns": round(pof, 1),
                    "pof_ffp_ns": round(ffp, 1),
                    "reduction_pct": _pct(pof, ffp),
                    "speedup": round(pof / ffp, 2),
                    "pof_ffp_bitwise_keys_ns": round(bitwise[name], 1),
                    "speedup_bitwise_keys": round(pof / bitwise[name], 2),
                    "strong_ns": round(st, 1),
                    "strong_ffp_ns": round(sf, 1),
                    "strong_speedup": round(st / sf, 2),
                    "pof_ns_median": round(ll_median[(name, ref_size, pipelines[0])], 1),
                    "pof_ffp_ns_median": round(ll_median[(name, ref_size, pipelines[1])], 1),
                },
                "paper": paper,
            }
        )
    _print_table(
        f"low-latency traffic, {ref_size}-byte frames: ns per packet (fastest of "
        f"{cfg['repeats']} rotations of {cfg['packets']:,} packets)",
        [
            "scenario",
            "POF",
            "POF+FFP",
            "less %",
            "speedup",
            "paper less %",
            "POF+FFP bitwise keys",
            "speedup",
            "strong",
            "strong+FFP",
            "speedup",
        ],
        rows,
    )
    tables.append(
        {
            "id": "ll-delay",
            "title": "low-latency traffic, ns per packet",
            "unit": "ns",
            "rows": jrows,
        }
    )

    # 2. line rate: the smallest frame forwarded at 10 Gbit/s on one core
    rows, jrows = [], []
    for name in SCENARIOS:
        ours = {}
        for p in pipelines:
            ok = [s for s in cfg["sizes"] if ll[(name, s, p)] <= (s + 20) * 8 / LINE_RATE_BPS * 1e9]
            ours[label[p]] = min(ok) if ok else None
        row = {"label": name, "ours": {k.lower().replace("+", "_"): v for k, v in ours.items()}}
        if name in PAPER_LINE:
            row["paper"] = PAPER_LINE[name]
        jrows.append(row)
        pl = PAPER_LINE.get(name, {})
        rows.append(
            [TITLES[name]]
            + [str(ours[label[p]]) for p in pipelines]
            + [f"{pl.get('mat_bytes', '-')} / {pl.get('ffp_bytes', '-')}"]
        )
    _print_table(
        "smallest frame size (of " + ", ".join(map(str, cfg["sizes"])) + ") whose "
        "classification on one core keeps up with 10 Gbit/s line rate (no packet I/O; "
        "None: none of them)",
        ["scenario", *(label[p] for p in pipelines), "paper MAT / FFP"],
        rows,
    )
    tables.append(
        {"id": "line-rate", "title": "smallest frame at 10 Gbit/s", "unit": "bytes", "rows": jrows}
    )

    # 3. mixed traffic: low-latency and normal parts separately
    for name in SCENARIOS:
        rows, jrows = [], []
        for share in SHARES:
            r = compare(name, share, ref_size)
            m = {p: (_best(r[key[p]]["ll_ns"]), _best(r[key[p]]["normal_ns"])) for p in pipelines}
            (pl, pn), (fl, fn) = m[pipelines[0]], m[pipelines[1]]
            (sl, sn), (sfl, sfn) = m[pipelines[2]], m[pipelines[3]]
            ours = {
                "pof_ll_ns": round(pl, 1),
                "pof_ffp_ll_ns": round(fl, 1),
                "ll_reduction_pct": _pct(pl, fl),
                "pof_normal_ns": round(pn, 1),
                "pof_ffp_normal_ns": round(fn, 1),
                "normal_reduction_pct": _pct(pn, fn),
                "strong_ll_ns": round(sl, 1),
                "strong_ffp_ll_ns": round(sfl, 1),
                "strong_normal_ns": round(sn, 1),
                "strong_ffp_normal_ns": round(sfn, 1),
                "strong_normal_reduction_pct": _pct(sn, sfn),
            }
            row = {"label": f"{share}%", "ours": ours}
            if name in PAPER_MIXED_LL and 0 < share < 100:
                lo, hi = PAPER_MIXED_LL[name]
                row["paper"] = {"ll_reduction_pct_low": lo, "ll_reduction_pct_high": hi}
            jrows.append(row)
            paper = "17-20" if name in PAPER_MIXED_LL and 0 < share < 100 else "-"
            rows.append(
                [
                    f"{share}%",
                    f"{pl:.0f}",
                    f"{fl:.0f}",
                    ours["ll_reduction_pct"],
                    paper,
                    f"{pn:.0f}",
                    f"{fn:.0f}",
                    ours["normal_reduction_pct"],
                    f"{sl:.0f}",
                    f"{sfl:.0f}",
                    f"{sn:.0f}",
                    f"{sfn:.0f}",
                ]
            )
        _print_table(
            f"mixed traffic, {TITLES[name]}: ns per packet by part and low-latency share",
            [
                "LL share",
                "LL POF",
                "LL +FFP",
                "less %",
                "paper %",
                "normal POF",
                "normal +FFP",
                "less %",
                "LL strong",
                "LL +FFP",
                "normal strong",
                "normal +FFP",
            ],
            rows,
        )
        tables.append(
            {
                "id": f"mixed-{name}",
                "title": f"mixed traffic, {TITLES[name]}",
                "unit": "ns",
                "rows": jrows,
            }
        )

    # 4. verification under rule churn (Figure 6): a normal rule above a low-latency one
    rows, jrows = [], []
    for name in ("acl", "seadp"):
        for every in cfg["churn_every"]:
            ours = {}
            for p in pipelines:
                r = _latnet.ffp_churn(
                    specs[name],
                    p[0],
                    p[1],
                    every,
                    cfg["packets"],
                    ref_size,
                    cfg["repeats"],
                    flows=cfg["flows"],
                )
                mismatches += r["mismatches"]
                ours[f"{key[p]}_ns"] = round(_best(r["ns"]), 1)
                if p[1]:
                    ours[f"{key[p]}_verifications"] = r["verifications"]
            jrows.append({"label": f"{name} every {every}", "ours": ours})
            rows.append(
                [TITLES[name], every]
                + [f"{ours[key[p] + '_ns']:.0f}" for p in pipelines]
                + [ours["pof_ffp_verifications"]]
            )
    _print_table(
        "low-latency traffic under rule churn (a rule change every N packets): ns per packet "
        "(fastest repeat)",
        ["scenario", "every N", *(label[p] for p in pipelines), "verifications"],
        rows,
    )
    tables.append(
        {"id": "churn", "title": "verification under rule churn", "unit": "ns", "rows": jrows}
    )

    tables.append(
        {
            "id": "equality",
            "title": "decisions differing from the plain pipeline",
            "unit": "packets",
            "rows": [{"label": "all runs", "ours": {"mismatches": mismatches}}],
        }
    )
    print(f"\ndecisions that differ from the plain pipeline: {mismatches}")
    print(f"rule sets as JSON control messages: {out / 'ffp-rules'}/")
    return {
        "seed": "ffp",
        "quick": quick,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
        "tables": _no_nan(tables),
    }
