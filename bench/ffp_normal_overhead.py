"""Normal-traffic cost of the Fast-Forwarding Path, measured in pairs.

For each seed scenario and low-latency share, the five pipelines of ``latnet reproduce ffp``
are timed in rotation on the same packets (``_latnet.ffp_compare``); this prints the normal
packets' ns per packet of the strong pipeline without and with the FFP (fastest repeat of each,
and the median of the per-rotation ratios), and of the POF-style pipeline without and with it.
Usage: ``.venv/bin/python bench/ffp_normal_overhead.py [--repeats N]``.
"""

from __future__ import annotations

import argparse
import statistics

from latnet import _latnet
from latnet.reproduce import ffp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=21, help="rotations per configuration")
    ap.add_argument("--packets", type=int, default=100_000)
    args = ap.parse_args()
    print("scenario  LL share  strong  +FFP  slower %  paired median  POF  +FFP  mismatches")
    for name in ffp.SCENARIOS:
        spec = ffp._spec_text(name)
        for share in (0, 20, 50, 80):
            r = _latnet.ffp_compare(spec, share * 10, args.packets, 1024, args.repeats, flows=256)
            s, sf = r["strong"]["normal_ns"], r["strong_ffp"]["normal_ns"]
            p, pf = r["pof"]["normal_ns"], r["pof_ffp"]["normal_ns"]
            paired = statistics.median(b / a for a, b in zip(s, sf, strict=True))
            print(
                f"{name:8}  {share:7}%  {min(s):6.1f}  {min(sf):5.1f}  "
                f"{100 * (min(sf) / min(s) - 1):8.1f}  {paired:13.3f}  "
                f"{min(p):5.0f}  {min(pf):4.0f}  {r['mismatches']:10}",
                flush=True,
            )


if __name__ == "__main__":
    main()
