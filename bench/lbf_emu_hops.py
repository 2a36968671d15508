"""The LBF seed's test 2 on real packets, hop by hop against the simulator (root).

    .venv/bin/python bench/lbf_emu_hops.py [--seconds 2] [--repeat 1] [--switch-processes ...]

Runs `latnet run experiments/lbf/test2.toml --mode both --pcap` with the traffic shortened to
`--seconds`, once per way of running the four switches (`per-node`: a latnet-switch process
each; `one`: one process for all; alternating, `--repeat` times), lines up F1's frames on every
link of its path in the simulated and emulated captures (the n-th F1 frame of a link in one
with the n-th in the other: F1 loses nothing and overtakes nothing), and prints per link how
much later the emulated frame started its transmission (p50 / mean / p99, us) and the mean
latency so far in its LBF block, then F1's latency at the receiver (physical, us).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PATH = ["S1-FWD1", "FWD1-FWD2", "FWD2-FWD3", "FWD3-FWD4", "FWD4-R1"]


def run(scenario: Path, out: Path, processes: str) -> None:
    latnet = Path(sys.executable).parent / "latnet"
    argv = [str(latnet), "run", str(scenario), "--mode", "both", "--pcap", "--no-packets"]
    argv += ["--quiet", "--out", str(out), "--switch-processes", processes]
    subprocess.run(argv, check=True, capture_output=True, timeout=600)


def f1(pcap: Path, src: str):
    import latnet

    df = latnet.read_pcap(pcap)
    return df[df["src"] == src].reset_index(drop=True)


def report(out: Path, src: str) -> tuple[list[list[str]], dict]:
    rows = []
    for link in PATH:
        sim, emu = (
            f1(out / "sim" / "pcap" / f"{link}.pcap", src),
            f1(out / "emu" / "pcap" / f"{link}.pcap", src),
        )
        n = min(len(sim), len(emu))
        lag = (emu["t_ns"][:n].to_numpy() - sim["t_ns"][:n].to_numpy()) / 1e3
        so_far = [sim["lbf_value_ns"][:n].astype(float).mean() / 1e3]
        so_far.append(emu["lbf_value_ns"][:n].astype(float).mean() / 1e3)
        rows.append(
            [
                link,
                f"{n}/{len(sim)}",
                f"{np.percentile(lag, 50):.0f} / {lag.mean():.0f} / {np.percentile(lag, 99):.0f}",
                f"{so_far[0]:.1f} / {so_far[1]:.1f}",
            ]
        )
    emu = json.loads((out / "emu" / "results.json").read_text())
    lat = next(f for f in emu["flows"] if f["name"] == "F1")["latency_ns"]
    return rows, {k: lat[k] / 1e3 for k in ("min", "mean", "p99", "max")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--switch-processes", default="per-node,one")
    args = ap.parse_args()
    text = (ROOT / "experiments" / "lbf" / "test2.toml").read_text()
    assert text.count('duration = "10s"') == 1
    text = text.replace('duration = "10s"', f'duration = "{args.seconds:g}s"')
    from latnet.testbed import Testbed

    with tempfile.TemporaryDirectory(prefix="lbf-emu-hops-") as tmp:
        scenario = Path(tmp) / "test2.toml"
        scenario.write_text(text)
        src = Testbed(scenario, run_dir=Path(tmp) / "plan").address("S1")
        for k in range(args.repeat):
            for processes in args.switch_processes.split(","):
                out = Path(tmp) / f"{processes}-{k}"
                run(scenario, out, processes)
                rows, lat = report(out, src)
                print(f"\n### switch processes: {processes} (run {k + 1})\n")
                print(
                    "| link | F1 frames | emulated minus simulated start, p50 / mean / p99 (us)"
                    " | latency so far, mean: simulated / emulated (us) |"
                )
                print("|---|---:|---|---|")
                for r in rows:
                    print("| " + " | ".join(r) + " |")
                print(
                    "\nF1 at the receiver (physical, us): "
                    + ", ".join(f"{k} {v:.1f}" for k, v in lat.items())
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
