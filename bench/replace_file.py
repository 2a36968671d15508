"""How long replacing a small file takes (a temporary file written, then renamed over it), as
the switch's statistics and the host agent's status are replaced (`crates/latnet-switch/src/
replace.rs`): the latency a loop doing it itself would add. BENCHMARKS.md, "The statistics file
off the forwarding loop".

    chrt -f 10 python3 bench/replace_file.py DIR [COUNT]

writes DIR/s.json COUNT times (default 500), 10 ms apart, and prints the median, the 99th
percentile and the worst. Run it once on a quiet machine and once beside a disk load, e.g.
``chrt --idle 0 dd if=/dev/zero of=DIR/big bs=1M count=1500 conv=fsync``.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> int:
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    body = b"x" * 6000
    took = []
    for _ in range(n):
        t = time.perf_counter_ns()
        with open(f"{d}/s.json.tmp", "wb") as f:
            f.write(body)
        os.rename(f"{d}/s.json.tmp", f"{d}/s.json")
        took.append(time.perf_counter_ns() - t)
        time.sleep(0.01)
    took.sort()
    print(
        f"n={n} median={took[n // 2] / 1e3:.0f} us p99={took[int(n * 0.99)] / 1e3:.0f} us "
        f"worst={took[-1] / 1e3:.0f} us over 1 ms: {sum(t > 1e6 for t in took)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
