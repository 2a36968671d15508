"""Extra `latnet` subcommands.

Each module here defines ``register(subparsers)``, which adds its subcommand(s) with
``set_defaults(func=...)``; ``func(args) -> int`` returns the exit status. The CLI loads every
module in this package, in name order.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings
from contextlib import contextmanager

from .. import ScenarioWarning


def whole(least: int, most: int = 2**64 - 1):
    """An argparse type: a whole number from ``least`` to ``most`` (default: what a Rust u64
    holds), else a usage error naming what was given (instead of a traceback where the number
    reaches Rust unsigned)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = least - 1
        if not least <= n <= most:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {least} to {most}, got {text!r}"
                if most < 2**64 - 1
                else f"expected a whole number >= {least} (below 2^64), got {text!r}"
            )
        return n

    parse.__name__ = f"whole number >= {least}"
    return parse


#: ``--seed``: what a seed may be (a u64).
seed = whole(0)


def add_keep_cpus_awake(p: argparse.ArgumentParser) -> None:
    """``--keep-cpus-awake`` (``latnet.emu.cpus_kept_awake`` while the command runs)."""
    p.add_argument(
        "--keep-cpus-awake",
        action="store_true",
        help="emulation: while it runs, one busy loop per CPU at the lowest priority "
        "(SCHED_IDLE: it gives way to any other task at once) keeps the CPUs from going idle; "
        "on a virtual machine, waking an idle vCPU is where most of the emulation's stalls come "
        "from (make test does this for its real-time tests)",
    )


def add_ca_file(p: argparse.ArgumentParser) -> None:
    """``--ca-file``: for a service speaking HTTPS, who signed its certificate; ``--client-cert``
    and ``--client-key``: what to present to one that asks (mutual TLS); ``--crl-file``: the
    CA's revocation lists."""
    p.add_argument(
        "--ca-file",
        metavar="FILE",
        help="for an https:// service (latnet chameleon serve --tls-cert): the certificate "
        "(PEM) that signed the service's (scripts/tls-certs.sh makes both; default: the "
        "system's CAs, and the host agent needs it)",
    )
    p.add_argument(
        "--client-cert",
        metavar="FILE",
        help="for a service started with --tls-client-ca: the client certificate (PEM) to "
        "present, with --client-key",
    )
    p.add_argument("--client-key", metavar="FILE", help="the private key of --client-cert (PEM)")
    p.add_argument(
        "--crl-file",
        metavar="FILE",
        help="with --ca-file: that CA's certificate revocation lists (PEM, scripts/tls-revoke.sh); "
        "a service certificate they revoke is refused, and so is any once they are past their "
        "next update",
    )


def client_cert(args: argparse.Namespace) -> tuple[str, str] | None:
    """``(--client-cert, --client-key)``, or ``None``; one without the other is refused."""
    from .. import UsageError

    if (args.client_cert is None) != (args.client_key is None):
        raise UsageError("give both --client-cert and --client-key, or neither")
    if not getattr(args, "controller", True):
        given = [
            flag
            for flag, value in (
                ("--token-file", getattr(args, "token_file", None)),
                ("--ca-file", args.ca_file),
                ("--client-cert", args.client_cert),
                ("--crl-file", args.crl_file),
            )
            if value is not None
        ]
        if given:
            raise UsageError(f"{', '.join(given)}: only with --controller URL (a service to ask)")
    return None if args.client_cert is None else (args.client_cert, args.client_key)


def register_all(subparsers) -> None:
    # one module per command group; a module named ``_...`` is a part of one
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        mod.register(subparsers)


def run_progress(enabled: bool, total: int, desc: str):
    """A tqdm bar counting runs, as ``(callback(done, total), close)``; no-ops when not
    ``enabled``."""
    if not enabled:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="run", file=sys.stderr, leave=False)

    def cb(done: int, _total: int) -> None:
        bar.n = done
        bar.refresh()

    return cb, bar.close


@contextmanager
def scenario_warnings(show: bool = True):
    """Print the ScenarioWarnings issued inside as ``latnet: warning: ...`` on stderr as they
    come (``show`` False: drop them, said already); other warnings as before."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", ScenarioWarning)
        before = warnings.showwarning

        def shown(message, category, filename, lineno, file=None, line=None):
            if not issubclass(category, ScenarioWarning):
                before(message, category, filename, lineno, file, line)
            elif show:
                print(f"latnet: warning: {message}", file=sys.stderr)

        warnings.showwarning = shown
        yield
