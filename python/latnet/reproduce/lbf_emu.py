"""`latnet reproduce lbf --emulated`: the LBF seed's six multi-hop tests on real packets.

The paper's tables come from its proof of concept forwarding real packets in real time; this
runs the same six scenarios (experiments/lbf/test1..6.toml) on an emulated testbed (root):
every forwarder a ``latnet-switch`` between network namespaces, every flow a UDP sender and
receiver process. Two cores cannot carry the seed's bursts in real time (five flows bursting
at 55..70 Mbit/s of 300-byte frames into 100 Mbit/s ports: about 120,000 frames/s), so each
runs time-dilated (``[sim] dilation``): every duration k times longer, every rate k times
slower, and the results come back in the scenario's own time. The machine's real-time noise
(late wake-ups, a busy core) shrinks k-fold with it: at k = 10 the means run up to 13 us late
and a stall of a few ms shows as a maximum 70 us off; at k = 40 (used here) the means are
within about 3 us of the simulator's.

Each table gives F1's min / mean / max at Q1..Q4 (from the sender's stamp to the start of
transmission from FWD1..FWD4, as the switches record it) and at the receiver, emulated beside
the simulator's and the paper's, and the emulated p99. The receiver's row is the measured
arrival less the last link's serialization of the frame (the seed's convention counts none;
the real frame arrives whole). Real packets have no exact-timestamp ties, so tests 1 and 3
run under whatever order the frames meet in: F1 wins some of its races with F2 and loses
others, so the minima are the paper's (which the simulator gives when F1 wins the ties) while
the means and maxima follow the experiments' rule (the simulator's column). Each test sends 1 s
of traffic (100 periods of the pattern, 40 s here), 300 ms with ``--quick``; the emulated runs'
files go to ``OUT/lbf-emulated/TEST/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import latnet

from ..emu import run_emu
from ..table import render
from ..testbed import require_root
from .lbf import COLS, PAPER, ROWS, TESTS, _sub, _us, experiments_dir, f1_rows

#: Dilation of the runs: a 300-byte frame at 100 Mbit/s takes 24 us in the scenario and 960 us
#: on the wire here, and a stall of the machine of 1 ms costs the scenario 25 us.
DILATION = 40
DURATION = "1s"
QUICK_DURATION = "300ms"


def scenario_text(tid: str, quick: bool, dilation: int | None = None) -> str:
    """Test ``tid``'s scenario, dilated (by ``DILATION`` unless given; shortened with
    ``quick``)."""
    dilation = DILATION if dilation is None else dilation
    text = (experiments_dir() / f"{tid}.toml").read_text()
    text = _sub(text, 'duration = "10s"', f'duration = "{QUICK_DURATION if quick else DURATION}"')
    return _sub(text, "[sim]\n", f"[sim]\ndilation = {dilation}\n")


def emulated_rows(summary: dict) -> list[dict[str, float]]:
    """F1's min / mean / max / p99 (us) at Q1..Q4 and at the receiver of an emulated run; the
    receiver's less one serialization of the frame on the last link (the seed's convention)."""
    f = summary["flows"][0]
    assert f["name"] == "F1", f["name"]
    out = []
    for h in f["hops"][1:5]:
        lat = h["latency_ns"]
        out.append({c: _us(lat[c]) for c in (*COLS, "p99")})
    hop = f["hops"][4]
    port = (hop["node"], hop["toward"])
    last = next(p for p in summary["ports"] if (p["node"], p["peer"]) == port)
    serialization = f["size"] * 8e9 / last["rate_bps"]
    lat = f["latency_ns"]
    out.append({c: _us(lat[c] - serialization) for c in (*COLS, "p99")})
    return out


def _table(tid: str, title: str, emu: dict, sim: latnet.Results) -> dict:
    rows = []
    for label, e, s, p in zip(ROWS, emulated_rows(emu), f1_rows(sim), PAPER[tid], strict=True):
        rows.append(
            {
                "label": label,
                "ours": e,
                "sim": s,
                "paper": dict(zip(COLS, p, strict=True)),
            }
        )
    return {
        "id": f"{tid}-emulated",
        "title": title,
        "unit": "us",
        "convention": f"real packets, dilation {emu['dilation']}, seed's convention "
        f"(sim: {sim.summary['latency_convention']}, {sim.summary['switching']}, "
        f"ties {sim.summary['tie_break']})",
        "rows": rows,
    }


def _print(t: dict) -> None:
    headers = ["", "min", "sim", "paper", "mean", "sim", "paper", "max", "sim", "paper", "p99"]
    body = []
    for r in t["rows"]:
        line = [r["label"]]
        for c in COLS:
            line += [f"{r['ours'][c]:.1f}", f"{r['sim'][c]:.1f}", f"{r['paper'][c]:g}"]
        body.append(line + [f"{r['ours']['p99']:.1f}"])
    print()
    print(render(headers, body, title=f"{t['id']}: {t['title']} (us; {t['convention']})"))
    print(
        "largest |emulated - simulated|: "
        + ", ".join(f"{c} {_worst(t, c, 'sim'):.1f}" for c in COLS)
        + "; largest |emulated - paper|: "
        + ", ".join(f"{c} {_worst(t, c, 'paper'):.1f}" for c in COLS)
        + " us"
    )
    if t["id"] in ("test1-emulated", "test3-emulated"):
        print(
            "note: no exact ties on real packets: F1 wins some of its races with F2, so the "
            "minima are the paper's (the simulator's under flow-asc)"
        )


def _worst(t: dict, col: str, other: str) -> float:
    return max(abs(r["ours"][col] - r[other][col]) for r in t["rows"])


def run(quick: bool, out: Path) -> dict:
    """Run the six tests on real packets, print the tables and return the
    reproduce-lbf-emulated.json document."""
    require_root("latnet reproduce lbf --emulated")
    tables = []
    for tid, title in TESTS:
        print(f"running {tid} ({title}) on real packets", file=sys.stderr)
        text = scenario_text(tid, quick)
        path = out / "lbf-emulated" / f"{tid}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        emu = run_emu(path, out / "lbf-emulated" / tid)
        sim = latnet.run(text=text, packets=False)
        t = _table(tid, title, emu.summary, sim)
        tables.append(t)
        _print(t)
    return {"seed": "lbf", "mode": "emulated", "quick": quick, "tables": tables}
