"""The Chameleon admission study from Python: run systems over the paper's workloads, summarise
runs, cross-check admitted sets in the simulator.

The work happens in Rust (``latnet._latnet.chameleon_eval`` / ``chameleon_crosscheck``), which
releases the GIL; runs are spread over a local thread pool (one worker per core by default).

    >>> from latnet import chameleon
    >>> runs = chameleon.evaluate("chameleon", scenario=8, runs=4, k=4, queues=8)
    >>> chameleon.summarize(runs)["accepted"]["mean"]
    >>> ctl = chameleon.Controller(k=4, queues=8)
    >>> ctl.request("h0_0_0", "h3_1_1", rate_bps=1e6, burst_bytes=300, deadline_ns=10e6)
"""

from __future__ import annotations

import json
import os
import ssl
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from . import UsageError
from ._latnet import ChameleonController as Controller
from ._latnet import LatnetError, chameleon_crosscheck, chameleon_eval, chameleon_transitions

__all__ = [
    "SYSTEMS",
    "Client",
    "Controller",
    "crosscheck",
    "emulate",
    "replay",
    "evaluate",
    "eval_task",
    "run_tasks",
    "summarize",
]

#: Systems of the study: Chameleon with and without rerouting, Silo with real and without
#: burst increase, QJump.
SYSTEMS = ["chameleon", "chameleon-noreroute", "silo", "silo-noburst", "qjump"]


def default_hosts_per_edge(k: int) -> int:
    """The paper's scalability topologies: 40 servers per (k/2) ports, k^3/4 x 40 in total."""
    return 40 * (k // 2)


def eval_task(task: dict) -> list[dict]:
    """One task of ``run_tasks`` (module level, so Dask workers can run it)."""
    return json.loads(chameleon_eval(**task))


def run_tasks(
    tasks: list[dict],
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    scheduler: str | None = None,
) -> list[list[dict]]:
    """Run ``chameleon_eval(**task)`` for every task on a thread pool (or on the Dask cluster
    of ``scheduler``, an address such as tcp://127.0.0.1:8786); results in task order.

    ``progress(done, total)`` is called after each task.
    """
    if scheduler:
        from .sweep import map_tasks

        res = map_tasks(eval_task, tasks, scheduler=scheduler, progress=progress)
        return [r or [] for r in res]
    workers = workers or os.cpu_count() or 1
    out: list[list[dict] | None] = [None] * len(tasks)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(chameleon_eval, **t): i for i, t in enumerate(tasks)}
        for done, fut in enumerate(as_completed(futs), 1):
            out[futs[fut]] = json.loads(fut.result())
            if progress:
                progress(done, len(tasks))
    return [r or [] for r in out]


def evaluate(
    system: str,
    scenario: int,
    runs: int,
    k: int | None = 4,
    queues: int = 8,
    hosts_per_edge: int | None = None,
    seed: int = 1,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    scheduler: str | None = None,
    **options,
) -> list[dict]:
    """Run ``runs`` runs of one system and scenario; one dict per run (see ``chameleon_eval``).

    ``scheduler`` (a Dask scheduler's address) runs them on that cluster instead of local
    threads. ``options`` are passed through: ``topology_file``, ``routing``, ``reroute_limit``,
    ``multiplier``, ``per_hop_ns``, ``shaping``, ``burst``, ``tag_base``, ``max_requests``.
    """
    base = dict(
        system=system,
        scenario=scenario,
        k=k,
        queues=queues,
        hosts_per_edge=hosts_per_edge,
        seed=seed,
        **options,
    )
    tasks = [dict(base, runs=[i]) for i in range(runs)]
    return [r for rs in run_tasks(tasks, workers, progress, scheduler) for r in rs]


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def summarize(runs: Iterable[dict]) -> dict:
    """Statistics over runs: accepted flows (mean, p1, p99, min, max), reconfigured flows and
    reroutes (mean), link utilisation over all switch-to-switch links of all runs (mean, p10,
    p50, p90, max), per-request runtime in ms over all requests (p50, mean, p99, max), and
    why runs ended."""
    runs = list(runs)
    acc = np.array([r["accepted"] for r in runs], dtype=float)
    util = np.concatenate([np.asarray(r["utilisation"], dtype=float) for r in runs] or [[]])
    rt = np.concatenate([np.asarray(r["runtime_ns"], dtype=float) for r in runs] or [[]]) / 1e6
    return {
        "runs": len(runs),
        "accepted": {
            "mean": float(acc.mean()) if acc.size else float("nan"),
            "p1": _pct(acc, 1),
            "p99": _pct(acc, 99),
            "min": float(acc.min()) if acc.size else float("nan"),
            "max": float(acc.max()) if acc.size else float("nan"),
        },
        "reconfigured": float(np.mean([r["reconfigured"] for r in runs])) if runs else 0.0,
        "reroutes": float(np.mean([r["reroutes"] for r in runs])) if runs else 0.0,
        "utilisation": {
            "mean": float(util.mean()) if util.size else float("nan"),
            "p10": _pct(util, 10),
            "p50": _pct(util, 50),
            "p90": _pct(util, 90),
            "max": float(util.max()) if util.size else float("nan"),
        },
        "runtime_ms": {
            "p50": _pct(rt, 50),
            "mean": float(rt.mean()) if rt.size else float("nan"),
            "p99": _pct(rt, 99),
            "max": float(rt.max()) if rt.size else float("nan"),
            "requests": int(rt.size),
        },
        "ended_by": dict(sorted(Counter(r["ended_by"] for r in runs).items())),
    }


def crosscheck(**kwargs) -> dict:
    """Admit a set and check it packet by packet in the simulator (see ``chameleon_crosscheck``)."""
    return json.loads(chameleon_crosscheck(**kwargs))


def transitions(**kwargs) -> dict:
    """Offer requests and simulate each change that moved flows in every re-tag order (see
    ``chameleon_transitions``)."""
    return json.loads(chameleon_transitions(**kwargs))


def replay(client: Client, on_move=None, on_entry=None, on_restore=None) -> Controller:
    """An in-process controller in the state of the service ``client`` talks to: built with
    the service's settings (``GET /config``), brought to its snapshot (``GET /snapshot``: the
    state after the log entries it folded, if the service compacted its log) and fed the log
    after it (``GET /log``, every request and removal in order). The controller is
    deterministic, so each operation must come out as the service logged it (ids, reroutes,
    refusals); a ``LatnetError`` names the first that does not. ``on_move(before, after,
    entry)``, if given, is called after each logged request that moved admitted flows, with a
    copy of the controller from just before it; ``on_entry(ctl, entry)`` after every entry,
    with the controller as it left it (entries folded into the snapshot are not seen);
    ``on_restore(ctl, seq)`` once before them, with the controller in the snapshot's state
    (``seq`` 0 and nothing admitted if the service never compacted its log)."""
    import tempfile

    cfg = client.config()
    kw: dict = {"queues": cfg["queues"], "system": cfg["system"]}
    # settings a service started without do not appear: the controller's defaults
    kw |= {k: cfg[k] for k in ("max_tags", "tag_base") if cfg.get(k) is not None}
    with tempfile.TemporaryDirectory() as tmp:
        if cfg.get("topology") is not None:
            path = os.path.join(tmp, "topology.toml")
            with open(path, "w") as f:
                f.write(cfg["topology"])
            kw["topology_file"] = path
        else:
            kw |= {"k": cfg["k"], "hosts_per_edge": cfg.get("hosts_per_edge")}
        ctl = Controller(**kw)
    snap = client.snapshot()
    after = int(snap["seq"])
    if after > 0:
        ctl.restore(json.dumps(snap))
    if on_restore is not None:
        on_restore(ctl, after)
    while True:
        page = client.log(after=after, limit=1000)
        for e in page["entries"]:
            moves = e.get("rerouted") or e.get("moved")
            before = ctl.copy() if on_move is not None and moves else None
            if e["op"] == "request":
                r = ctl.request(
                    e["src"], e["dst"], e["rate_bps"], e["burst_bytes"], e["deadline_ns"]
                )
                if e["outcome"] == "admitted":
                    want = {"admitted": True, "id": e["id"], "rerouted": sorted(e["rerouted"])}
                else:
                    want = {"admitted": False, "code": e["code"], "rerouted": sorted(e["moved"])}
                # (an invalid request's refusal moved nothing and says so by saying nothing)
                got = {k: sorted(r.get(k) or []) if k == "rerouted" else r.get(k) for k in want}
            else:
                want = {"found": e["found"]}
                got = {"found": ctl.remove(e["id"])}
            if got != want:
                raise LatnetError(
                    f"the service's log entry {e['seq']} ({e['op']}) gave {want} there and "
                    f"{got} when replayed here: not the same controller"
                )
            if before is not None:
                on_move(before, ctl, e)
            if on_entry is not None:
                on_entry(ctl, e)
            after = e["seq"]
        if not page["entries"] or after >= page["last"]:
            return ctl


def emulate(
    doc: dict,
    out: str | os.PathLike[str],
    dilation: int = 1,
    switch_processes: str | None = None,
) -> list[dict]:
    """Run the admitted set of ``doc`` (``crosscheck(..., scenarios=True)``) on real packets:
    each phase's scenario, as the simulator ran it, in the emulated testbed (a namespace per
    node, tag-stack forwarding and strict-priority queues in ``latnet-switch``, the source's
    tagger at its port, the token-bucket senders and receivers as real UDP sockets), slowed
    down ``dilation`` times (``[sim] dilation``: latencies are reported in the scenario's
    time). Writes ``out/<phase>/`` (``scenario.toml`` and the emulated results). Returns per
    phase what the simulator's check measures end to end: packets of admitted flows sent,
    received and lost, deadline and guarantee violations, the largest latency / deadline and
    latency / guarantee; ``misrouted``, transmissions the switches' hop records show off the
    flow's embedding (port, or queue at a switch: :func:`misrouted`); and ``timing``, how late
    the machine made the run.

    A phase the machine stalled (its switches or senders fell behind by more than a quarter of
    the tightest deadline, in the scenario's time: enough to break a deadline by itself) is run
    again, up to ``STALL_ATTEMPTS`` times in all, and the least stalled attempt kept (the
    others' files in ``out/<phase>.stalled-K``); ``attempts`` gives each attempt's lateness
    (ns, scenario time), ``stall_ns`` the threshold and ``stalled`` whether the kept one still
    exceeds it (its violations may then be the machine's)."""
    from pathlib import Path

    from ._latnet import apply_overrides
    from .emu import least_stalled, run_emu
    from .table import emulation_timing

    emb = {e["name"]: e for e in doc["embeddings"]}
    # (no admitted flow, no deadline a stall could break: one attempt whatever its lateness)
    stall_ns = min(e["deadline_ns"] for e in emb.values()) // 4 if emb else None
    rows = []
    for s in doc["scenarios"]:
        text = s["toml"]
        if dilation != 1:
            text = apply_overrides(text, [("sim.dilation", str(dilation))], name=s["phase"])

        def run(d: Path, text: str = text):
            d.mkdir(parents=True, exist_ok=True)
            (d / "scenario.toml").write_text(text)
            return run_emu(d / "scenario.toml", d, packets=True, switch_processes=switch_processes)

        res, late = least_stalled(
            run,
            lambda r: r.summary["emulation"]["late_max_ns"],
            Path(out),
            s["phase"],
            stall_ns if stall_ns is not None else 2**63,
            STALL_ATTEMPTS if stall_ns is not None else 1,
        )
        timing = emulation_timing(res.summary)
        rows.append(
            _end_to_end(res.packets, emb, s["phase"])
            | {"misrouted": misrouted(res.hops, emb)}
            | {
                "timing": timing,
                "attempts": late,
                "stall_ns": stall_ns,
                "stalled": stall_ns is not None and min(late) > stall_ns,
            }
        )
    return rows


#: Most runs of a phase `emulate` makes while the machine stalls them.
STALL_ATTEMPTS = 3


def misrouted(hops, emb: dict) -> int:
    """Transmissions of the admitted flows in ``emb`` (by name, each with ``hops``: ``port``,
    ``queue``, ``switch``) that left their embedding, from a per-hop table (``hops.csv``):
    a hop beyond the path, on another port than the path's, or at a switch in another queue
    (the packet's ``priority`` there, which its tag set) than the path's. A host queues every
    admitted flow in its first class, whatever the embedding's queue there."""
    import pandas as pd

    want = pd.DataFrame(
        [
            {"flow": name, "hop": i, "want_port": h["port"], "want_queue": h["queue"]}
            | {"at_switch": h["switch"]}
            for name, e in emb.items()
            for i, h in enumerate(e["hops"])
        ],
        columns=["flow", "hop", "want_port", "want_queue", "at_switch"],
    )
    h = hops[hops["flow"].isin(list(emb))][["flow", "hop", "port", "priority"]]
    both = h.merge(want.astype({"hop": h["hop"].dtype}), on=["flow", "hop"], how="left")
    beyond = both["want_port"].isna()
    port = both["port"] != both["want_port"]
    queue = both["at_switch"].eq(True) & (both["priority"] != both["want_queue"])
    return int((beyond | port | queue).sum())


def _end_to_end(packets, emb: dict, phase: str) -> dict:
    """The end-to-end part of a cross-check phase, from a per-packet table (``packets.csv``):
    packets of the admitted flows in ``emb`` (by name) against their deadlines and guarantees."""
    pk = packets[packets["flow"].isin(list(emb))]
    lat = pk["latency_ns"]
    got = pk[lat.notna()]
    deadline = got["flow"].map(lambda f: emb[f]["deadline_ns"]).astype(float)
    guarantee = got["flow"].map(lambda f: emb[f]["guarantee_ns"]).astype(float)
    over_d = got["latency_ns"].astype(float) / deadline
    over_g = got["latency_ns"].astype(float) / guarantee
    return {
        "phase": phase,
        "sent": int(len(pk)),
        "received": int(len(got)),
        "lost": int(len(pk) - len(got)),
        "deadline_violations": int((over_d > 1).sum()),
        "guarantee_violations": int((over_g > 1).sum()),
        "max_e2e_over_deadline": float(over_d.max()) if len(got) else 0.0,
        "max_e2e_over_guarantee": float(over_g.max()) if len(got) else 0.0,
    }


def read_token(path: str | os.PathLike[str]) -> str:
    """The bearer token in file ``path``: its first line that is neither empty nor a ``#``
    comment, either ``TOKEN`` or ``ROLE TOKEN`` as in the service's ``--tokens`` file (the rule
    ``latnet-switch agent --token-file`` follows too)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UsageError(f"--token-file {path}: cannot read the file: {e.strerror}") from None
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            token = line.split()[-1]
            if all(33 <= ord(c) < 127 for c in token):
                return token
            raise UsageError(f"--token-file {path}: expected a token of printable characters")
    raise UsageError(f"--token-file {path}: expected a token, the file has none")


def tls_context(
    url: str,
    ca_file: str | os.PathLike[str] | None,
    client_cert: tuple[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
    crl_file: str | os.PathLike[str] | None = None,
) -> ssl.SSLContext | None:
    """The TLS settings of a client of ``url``: ``None`` for ``http://`` (a ``ca_file``,
    ``client_cert`` or ``crl_file`` is then refused), else the system's CAs or only the
    certificates in ``ca_file``, and with ``client_cert`` (certificate and key files, PEM) that
    certificate presented to a service that asks for one (``--tls-client-ca``, mutual TLS).
    With ``crl_file`` (PEM revocation lists of the CA in ``ca_file``, ``scripts/tls-revoke.sh``)
    a service whose certificate a list revokes is refused, and so is every service once the
    list is past its next update (OpenSSL's checks, as the host agent's)."""
    if not url.startswith("https://"):
        for flag, given in (
            ("--ca-file", ca_file),
            ("--client-cert", None if client_cert is None else client_cert[0]),
            ("--crl-file", crl_file),
        ):
            if given is not None:
                raise UsageError(f"{flag} {given}: {url} is not https://")
        return None
    if crl_file is not None and ca_file is None:
        raise UsageError(f"--crl-file {crl_file}: needs --ca-file (whose certificates it revokes)")
    try:
        ctx = ssl.create_default_context(cafile=None if ca_file is None else os.fspath(ca_file))
    except (OSError, ssl.SSLError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise UsageError(f"--ca-file {ca_file}: expected PEM certificates: {why}") from None
    if client_cert is not None:
        cert, key = client_cert
        try:
            ctx.load_cert_chain(os.fspath(cert), os.fspath(key))
        except (OSError, ssl.SSLError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise UsageError(
                f"--client-cert {cert} / --client-key {key}: expected a PEM certificate and its "
                f"key: {why}"
            ) from None
    if crl_file is not None:
        try:
            with open(crl_file, encoding="ascii", errors="replace") as f:
                has_list = "-----BEGIN X509 CRL-----" in f.read()
            if not has_list:
                raise UsageError(
                    f"--crl-file {crl_file}: no revocation list in it (expected a PEM "
                    "'BEGIN X509 CRL' block)"
                )
            ctx.load_verify_locations(cafile=os.fspath(crl_file))
        except (OSError, ssl.SSLError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise UsageError(
                f"--crl-file {crl_file}: expected PEM revocation lists: {why}"
            ) from None
        ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    return ctx


class Client:
    """A client of ``latnet chameleon serve`` with the in-process ``Controller``'s interface:
    ``request`` returns the same dict (``admitted`` and ``id`` / ``rerouted``, or ``code`` /
    ``reason``), ``remove`` a bool, ``flows`` and ``hosts`` the same lists. ``token_file``: the
    bearer token a service started with ``--tokens`` needs (see ``read_token``). ``ca_file``:
    for an ``https://`` service (``--tls-cert``), the certificate (PEM) of who signed the
    service's (``scripts/tls-certs.sh`` makes both; without it the system's CAs are trusted).
    ``client_cert``: ``(certificate, key)`` files presented to a service that asks for a client
    certificate (``--tls-client-ca``). ``crl_file``: revocation lists of the CA in ``ca_file``;
    a service certificate they revoke is refused (see ``tls_context``).

        >>> svc = chameleon.Client("http://127.0.0.1:8700")
        >>> svc.request("h0_0_0", "h3_1_1", rate_bps=2e6, burst_bytes=300, deadline_ns=10e6)
    """

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 30.0,
        token_file: str | os.PathLike[str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        client_cert: tuple[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
        crl_file: str | os.PathLike[str] | None = None,
    ):
        self.base = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.token_file = token_file
        self.ca_file = ca_file
        self._token = read_token(token_file) if token_file is not None else None
        self.client_cert = client_cert
        self.crl_file = crl_file
        self._tls = tls_context(self.base, ca_file, client_cert, crl_file)

    def _call(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        timeout_s: float | None = None,
        text: bool = False,
    ) -> tuple[int, object]:
        """The status and the JSON body (``None`` when empty), or with ``text`` the body as
        text."""
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self._token is not None:
            req.add_header("Authorization", f"Bearer {self._token}")
        try:
            timeout = self.timeout_s if timeout_s is None else timeout_s
            with urllib.request.urlopen(req, timeout=timeout, context=self._tls) as r:
                got = r.read().decode()
                return r.status, got if text else json.loads(got) if got else None
        except urllib.error.HTTPError as e:
            got = e.read().decode()
            try:
                doc = json.loads(got)
            except ValueError:
                doc = {"error": got}
            if e.code in (401, 403):
                why = doc.get("error", got) if isinstance(doc, dict) else got
                hint = "" if self._token is not None else " (give its token: --token-file)"
                raise LatnetError(f"{self.base}{path}: {e.code} {why}{hint}") from None
            return e.code, doc
        except urllib.error.URLError as e:
            hint = ""
            if isinstance(e.reason, ssl.SSLCertVerificationError):
                # OpenSSL's X509_V_ERR_CERT_REVOKED and X509_V_ERR_CRL_HAS_EXPIRED
                hint = {
                    23: " (the revocation list --crl-file names the service's certificate)",
                    12: " (the revocation list --crl-file is past its next update: renew it)",
                }.get(
                    e.reason.verify_code,
                    " (give the certificate that signed the service's: --ca-file)",
                )
            raise LatnetError(f"{self.base}: cannot reach the service: {e.reason}{hint}") from None
        except ssl.SSLError as e:
            # TLS 1.3 tells of a refused client certificate only after the handshake
            hint = ""
            if "CERTIFICATE_REQUIRED" in str(e):
                hint = " (it asks for a client certificate: --client-cert / --client-key)"
            elif "CERTIFICATE_REVOKED" in str(e):
                hint = " (the service's revocation list names this client certificate)"
            raise LatnetError(f"{self.base}: the TLS connection failed: {e}{hint}") from None
        except ConnectionError as e:
            # a reset, or a close before the answer
            raise LatnetError(f"{self.base}: the service closed the connection: {e}") from None

    def request(
        self,
        src: str,
        dst: str,
        rate_bps: float,
        burst_bytes: float,
        deadline_ns: float,
        match: dict | None = None,
    ) -> dict:
        """Ask for a flow (numbers are sent as whole numbers, as the controller counts them).
        ``match`` (``{"proto": "udp", "dst_port": 5001}``, optionally ``src_port``) tells host
        agents which packets of ``src`` are the flow's; the service keeps it with the flow."""

        def whole(x: float) -> float | int:
            return int(x) if float(x).is_integer() else x

        body = {
            "src": src,
            "dst": dst,
            "rate_bps": whole(rate_bps),
            "burst_bytes": whole(burst_bytes),
            "deadline_ns": whole(deadline_ns),
        }
        if match is not None:
            body["match"] = match
        st, r = self._call("POST", "/flows", body)
        if st == 201:
            return {"admitted": True, "id": r["id"], "rerouted": r["rerouted"]}
        if st == 409:
            return {
                "admitted": False,
                "code": r["code"],
                "reason": r["reason"],
                "rerouted": r["rerouted"],
            }
        if st == 422:
            return {"admitted": False, "code": r["code"], "reason": r["reason"]}
        raise LatnetError(f"{self.base}/flows: {st} {r}")

    def remove(self, id: int) -> bool:
        st, r = self._call("DELETE", f"/flows/{id}")
        if st in (204, 404):
            return st == 204
        raise LatnetError(f"{self.base}/flows/{id}: {st} {r}")

    def _get(self, path: str):
        st, r = self._call("GET", path)
        if st != 200:
            raise LatnetError(f"{self.base}{path}: {st} {r}")
        return r

    def flows(self) -> list[dict]:
        return self._get("/flows")

    def hosts(self) -> list[str]:
        return self._get("/hosts")

    def stats(self) -> dict:
        return self._get("/stats")

    def metrics(self) -> dict[str, float]:
        """``GET /metrics`` (the Prometheus text format) as ``{sample: value}``, a sample
        named with its labels as printed: ``latnet_ctld_admitted_total``,
        ``latnet_ctld_responses_total{code="201"}``."""
        st, r = self._call("GET", "/metrics", text=True)
        if st != 200:
            raise LatnetError(f"{self.base}/metrics: {st} {r}")
        out = {}
        for line in str(r).splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def flow(self, id: int) -> dict | None:
        """One admitted flow as the service shows it (path, queues, tags, shaper, match), or
        ``None``."""
        st, r = self._call("GET", f"/flows/{int(id)}")
        if st == 404:
            return None
        if st != 200:
            raise LatnetError(f"{self.base}/flows/{id}: {st} {r}")
        return r

    def config(self) -> dict:
        """The service's settings (``GET /config``): ``system``, ``k``, ``hosts_per_edge``,
        ``queues``, ``topology`` (a file's text), and ``max_tags`` and ``tag_base`` when the
        service was started with them."""
        return self._get("/config")

    def routes(self, src: str) -> dict:
        """The best-effort routes of host ``src`` (``queue``, and per destination ``path`` and
        ``tags``)."""
        return self._get(f"/routes/{src}")

    def health(self) -> dict:
        """``ok``, ``flows``, ``store`` (the store's id), ``last`` (the newest log entry) and
        ``snapshot`` (the last entry folded into the snapshot, 0 if none)."""
        return self._get("/health")

    def last(self) -> int:
        """The newest log entry's number."""
        return int(self.health()["last"])

    def snapshot(self) -> dict:
        """The state after log entry ``seq`` (0 if the log was never compacted): flows with
        their requests, hops and matches, the next id, the counters (see ``replay``)."""
        return self._get("/snapshot")

    def compact(self, keep: int = 0) -> dict:
        """Fold every log entry but the newest ``keep`` into the service's snapshot (a write
        token if the service has tokens): ``removed``, ``snapshot``, ``last``."""
        st, r = self._call("POST", f"/compact?keep={int(keep)}")
        if st != 200:
            raise LatnetError(f"{self.base}/compact: {st} {r}")
        return r

    def log(self, after: int = 0, limit: int = 1000) -> dict:
        """The operations after entry ``after`` with their outcomes, and ``last``: poll with
        ``after`` = the last ``last`` to learn which flows were moved."""
        return self._get(f"/log?after={int(after)}&limit={int(limit)}")

    def agents(self) -> list[dict]:
        """The host agents registered now (``name``, ``hosts``, ``age_ms``)."""
        return self._get("/agents")

    def register_agent(self, name: str, hosts: list[str]) -> dict:
        """Register host agent ``name`` as serving ``hosts`` (it lapses after ``ttl_ms``
        unless registered again; an agent or write token if the service has tokens)."""
        st, r = self._call("POST", "/agents", {"name": name, "hosts": list(hosts)})
        if st != 200:
            raise LatnetError(f"{self.base}/agents: {st} {r}")
        return r

    def report_applied(self, flow: int, seq: int) -> None:
        """Say that the step of ``flow`` for log entry ``seq`` is done (re-tagged and its old
        path drained, or a new flow tagged)."""
        st, r = self._call("POST", "/applied", {"flow": int(flow), "seq": int(seq)})
        if st != 200:
            raise LatnetError(f"{self.base}/applied: {st} {r}")

    def applied(self, flow: int, seq: int, wait_ms: int = 0) -> dict:
        """Whether the step of ``flow`` for log entry ``seq`` is done: ``done`` and ``why``
        (``applied``, ``unserved``: no registered agent serves its source, ``removed``, or
        ``waiting``) and ``agent``; ``wait_ms`` (at most 60,000): the service holds the
        question until it is done or the time is up."""
        q = f"/applied?flow={int(flow)}&seq={int(seq)}&wait={int(wait_ms)}"
        # the service holds the answer up to wait_ms
        st, r = self._call("GET", q, timeout_s=self.timeout_s + max(0, wait_ms) / 1e3)
        if st != 200:
            raise LatnetError(f"{self.base}{q}: {st} {r}")
        return r

    def __len__(self) -> int:
        return self._get("/health")["flows"]
