"""`latnet reproduce SEED`: each seed paper's experiments, with the paper's numbers beside ours.

Each seed registers a module here exposing ``run(quick: bool, out: Path) -> dict`` that returns
the document written to ``OUT/reproduce-SEED.json`` (format in DESIGN: seed, quick, tables with
rows of ``ours`` / ``paper`` values) and prints its tables.
"""

from __future__ import annotations

import importlib

SEEDS = {
    "lbf": "Latency-Based Forwarding (seed 000)",
    "l4s": "VDQ-CSAQM vs DualPI2 (seed 001)",
    "ffp": "Composite pipeline with a Fast-Forwarding Path (seed 002)",
    "pacing": "Switch-assisted TCP pacing (seed 003)",
    "chameleon": "Chameleon admission control (seed 004)",
}


# Seeds whose experiments also run on an emulated testbed (module ``latnet.reproduce.SEED_emu``,
# same ``run`` interface, document written to ``OUT/reproduce-SEED-emulated.json``).
EMULATED = ("lbf", "pacing")

# Seeds whose runs are a sweep of independent runs; their ``run`` also takes
# ``scheduler: str | None`` (a Dask scheduler's address, ``--scheduler``).
SWEEPS = ("l4s", "chameleon")


def load(seed: str, emulated: bool = False):
    """The module that reproduces ``seed`` (on an emulated testbed with ``emulated``), or None
    if it has not landed yet."""
    name = f"latnet.reproduce.{seed}{'_emu' if emulated else ''}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name == name:
            return None
        raise
