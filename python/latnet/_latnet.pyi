"""Type stubs of the private extension module latnet._latnet (Rust, PyO3)."""

import os
from collections.abc import Callable

__version__: str

class LatnetError(Exception):
    """Base class of latnet errors."""

class ScenarioError(LatnetError):
    """A scenario that cannot be used; the message names the file, line, key and expectation."""

class SimResults:
    def warnings(self) -> list[str]: ...
    def json(self) -> str: ...
    def flows_csv(self) -> str: ...
    def timeseries_csv(self) -> str | None: ...
    def queues_csv(self) -> str | None: ...
    def flow_names(self) -> list[str]: ...
    def write_dir(self, dir: str | os.PathLike[str]) -> list[str]: ...
    def packet_columns(self) -> dict[str, bytes | list[str]] | None: ...
    def hop_columns(self) -> dict[str, bytes] | None: ...

def duration_ns(text: str) -> int: ...
def pcap_frames_csv(path: str | os.PathLike[str]) -> str: ...
def apply_overrides(text: str, sets: list[tuple[str, str]], name: str = "<string>") -> str: ...
def check(
    path: str | os.PathLike[str] | None = None,
    text: str | None = None,
    name: str = "<string>",
) -> tuple[str, list[str]]: ...
def run(
    path: str | os.PathLike[str] | None = None,
    text: str | None = None,
    name: str = "<string>",
    seed: int | None = None,
    packets: bool | None = None,
    pcap: bool | None = None,
    queues: str | None = None,
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
def ffp_compare(
    spec_toml: str,
    ll_permille: int,
    packets: int,
    size: int,
    repeats: int,
    flows: int | None = None,
) -> dict[str, dict[str, list[float] | int] | int]: ...
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

# ---- Chameleon controller (crates/latnet-py/src/chameleon.rs) ----

def chameleon_eval(
    system: str,
    scenario: int,
    runs: list[int],
    k: int | None = None,
    queues: int = 8,
    hosts_per_edge: int | None = None,
    seed: int = 1,
    topology_file: str | os.PathLike[str] | None = None,
    routing: str = "least-delay",
    reroute_limit: int = 20,
    multiplier: int = 30000,
    per_hop_ns: int = 0,
    shaping: bool = True,
    burst: str = "real",
    tag_base: int = 10,
    max_requests: int = 10000000,
) -> str: ...
def chameleon_crosscheck(
    k: int | None = None,
    queues: int = 4,
    hosts_per_edge: int | None = None,
    scenario: int = 8,
    seed: int = 1,
    system: str = "chameleon",
    topology_file: str | os.PathLike[str] | None = None,
    per_hop_ns: int = 0,
    duration_ms: int = 20,
    background: bool = True,
    tries: int | None = None,
    misbehave: int = 1,
    phases: list[str] | None = None,
    scenarios: bool = False,
) -> str: ...
def chameleon_transitions(
    k: int | None = None,
    queues: int = 4,
    hosts_per_edge: int | None = None,
    scenario: int = 8,
    seed: int = 1,
    system: str = "chameleon",
    topology_file: str | os.PathLike[str] | None = None,
    per_hop_ns: int = 0,
    duration_ms: int = 10,
    background: bool = True,
    tries: int = 1000,
    max_transitions: int = 3,
    orders: list[str] | None = None,
    phases: list[str] | None = None,
    at_ms: int = 3,
    lag_ms: int = 5,
) -> str: ...

class ChameleonController:
    def __init__(
        self,
        k: int | None = None,
        hosts_per_edge: int | None = None,
        queues: int = 8,
        topology_file: str | os.PathLike[str] | None = None,
        system: str = "chameleon",
        routing: str = "least-delay",
        reroute_limit: int = 20,
        multiplier: int = 30000,
        per_hop_ns: int = 0,
        shaping: bool = True,
        burst: str = "real",
        tag_base: int = 10,
        max_tags: int = 10,
    ) -> None: ...
    def hosts(self) -> list[str]: ...
    def request(
        self, src: str, dst: str, rate_bps: float, burst_bytes: float, deadline_ns: float
    ) -> dict[str, object]: ...
    def remove(self, id: int) -> bool: ...
    def flows(self) -> list[dict[str, object]]: ...
    def cross_check(
        self,
        duration_ms: int = 20,
        background: bool = True,
        seed: int = 1,
        phases: list[str] | None = None,
        scenarios: bool = False,
    ) -> str: ...
    def network_toml(self, duration_ns: int = 1_000_000_000) -> str: ...
    def live_plan(self, name: str, spec: str) -> str: ...
    def restore(self, checkpoint: str) -> None: ...
    def checkpoint(self) -> str: ...
    def copy(self) -> ChameleonController: ...
    def transitions(
        self,
        before: ChameleonController,
        new_flow: int | None,
        moved: list[int],
        duration_ms: int = 10,
        background: bool = True,
        seed: int = 1,
        phases: list[str] | None = None,
        orders: list[str] | None = None,
        at_ms: int = 3,
        lag_ms: int = 5,
    ) -> str: ...
    def __len__(self) -> int: ...
