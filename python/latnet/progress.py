"""Progress bars on stderr (tqdm) for runs and sweeps."""

from __future__ import annotations

import sys


def time_bar(enabled: bool, label: str):
    """A tqdm bar over a run's virtual time on stderr, as ``(callback(now_ns, end_ns, events),
    close)`` (the callback ``latnet.run(progress=)`` takes); ``(None, no-op)`` when not
    ``enabled``."""
    if not enabled:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(
        total=100,
        desc=label,
        unit="%",
        file=sys.stderr,
        leave=False,
        bar_format="{desc} {bar} {n:.0f}% [{elapsed}<{remaining}]",
    )

    def cb(now_ns: int, end_ns: int, events: int) -> bool:
        bar.n = min(100.0, 100.0 * now_ns / max(1, end_ns))
        bar.set_postfix_str(f"{events:,} events", refresh=False)
        bar.refresh()
        return True

    return cb, bar.close
