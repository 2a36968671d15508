"""Extra `latnet` subcommands.

Each module here defines ``register(subparsers)``, which adds its subcommand(s) with
``set_defaults(func=...)``; ``func(args) -> int`` returns the exit status. The CLI loads every
module in this package, in name order.
"""

from __future__ import annotations

import importlib
import pkgutil


def register_all(subparsers) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        mod.register(subparsers)
