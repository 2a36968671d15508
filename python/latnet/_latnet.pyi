"""Type stubs of the private extension module latnet._latnet (Rust, PyO3)."""

import os
from collections.abc import Callable

__version__: str

class LatnetError(Exception):
    """Base class of latnet errors."""

class ScenarioError(LatnetError):
    """A scenario that cannot be used; the message names the file, line, key and expectation."""

class SimResults:
    def json(self) -> str: ...
    def flows_csv(self) -> str: ...
    def timeseries_csv(self) -> str | None: ...
    def flow_names(self) -> list[str]: ...
    def write_dir(self, dir: str | os.PathLike[str]) -> list[str]: ...
    def packet_columns(self) -> dict[str, bytes | list[str]] | None: ...
    def hop_columns(self) -> dict[str, bytes] | None: ...

def check(
    path: str | os.PathLike[str] | None = None,
    text: str | None = None,
    name: str = "<string>",
) -> str: ...
def run(
    path: str | os.PathLike[str] | None = None,
    text: str | None = None,
    name: str = "<string>",
    seed: int | None = None,
    packets: bool | None = None,
    progress: Callable[[int, int, int], bool | None] | None = None,
) -> SimResults: ...

# composite pipeline measurements (crates/latnet-py/src/ffp.rs)
def ffp_measure(
    spec_toml: str,
    algo: str,
    ffp: bool,
    ll_permille: int,
    packets: int,
    size: int,
    repeats: int,
    flows: int | None = None,
    fast_keys: bool = True,
) -> dict[str, list[float] | int]: ...
def ffp_churn(
    spec_toml: str,
    algo: str,
    ffp: bool,
    every: int,
    packets: int,
    size: int,
    repeats: int,
    flows: int | None = None,
) -> dict[str, list[float] | int]: ...
def ffp_rules_json(spec_toml: str) -> str: ...
