//! The Chameleon controller as a service: a REST API over [`latnet_ctl::Controller`] with its
//! state in SQLite.
//!
//! * [`ServiceConfig`] says how the controller is built (system, fat-tree or topology file,
//!   queues); the store keeps it and refuses to reopen with another.
//! * [`Store`] is the SQLite file: `config` (one row), `log` (every request and removal that
//!   reached the controller, with its outcome, in order), `snapshot` (at most one row: the
//!   controller's state after the entries folded into it, [`latnet_ctl::Checkpoint`]) and
//!   `flows` (the admitted flows as they are now: path, queues, budgets, tags, shaper). The
//!   controller is deterministic, so opening a store restores the snapshot into a fresh
//!   controller, replays the log after it and checks each outcome against the logged one; the
//!   `flows` table is then rewritten from the controller, so what a client reads from the file
//!   equals what the service answers. Compaction (`POST /compact`, or `--log-keep`) bounds the
//!   log, and with it the time a restart takes.
//! * [`Service::handle`] answers one HTTP request (method, path, body) with a status and a JSON
//!   body; [`serve`] runs it on an [`Endpoint`], an HTTP/1.1 server of our own
//!   ([`http`](crate::serve)): the controller (one state machine) answers
//!   one request at a time on its own thread, while each client's connection is read and
//!   written by a thread of its own, so a slow or silent client delays nobody else
//!   ([`ServeOptions`]).
//!
//! With a token file ([`Tokens`], `latnet-ctld --tokens FILE`) every request but `GET /health`
//! needs `Authorization: Bearer TOKEN` (401 without one the file lists, 403 for a read token
//! asking to change something). With a certificate and its key ([`tls`], `latnet-ctld
//! --tls-cert FILE --tls-key FILE`) the service speaks HTTPS, so tokens and decisions do not
//! cross the network in the clear; [`Endpoint::open`] opens either kind.
//!
//! API (JSON bodies; errors are `{"error": ..., "field": ...}` or `{"code": ..., "reason": ...}`):
//!
//! | method and path | answer |
//! |---|---|
//! | `GET /health` | 200 `{"ok": true, "flows": N, "store": ID, "last": SEQ, "snapshot": SEQ, "folded": SEQ}` (`store`: a random id made with the store; `last`: the newest log entry; `snapshot`: the entry the snapshot's state follows, 0 if none; `folded`: the newest entry deleted) |
//! | `GET /hosts` | 200 the host names |
//! | `GET /config` | 200 the service's configuration |
//! | `GET /stats` | 200 the controller's counters (and `invalid`: requests answered 422 since the service started, which are not logged; `denied`: requests refused for their token, 401 or 403; `last`: the newest log entry; `agents`: host agents registered now) |
//! | `GET /metrics` | 200 the counters of `/stats` and of the network side (connections, answers by status, failed TLS handshakes, reloads) in the Prometheus text format ([`metrics`]; [`Service::handle`] alone, without a server, answers the JSON of `/stats`) |
//! | `POST /flows` `{"src", "dst", "rate_bps", "burst_bytes", "deadline_ns", "match"}` | 201 the flow (and `rerouted`: ids of flows moved to make room, to be re-tagged at their sources); 400 a malformed body, naming the field; 422 an invalid request (unknown host, deadline below what any path offers, a `match` another flow of that source to that destination has; `code`, `reason`, `field`); 409 refused (`code`, `reason`, and `rerouted`: flows moved while looking for room, which stay moved). `match` (optional): `{"proto": "udp" \| "tcp", "dst_port", "src_port" (optional)}`, the flow's packets at its source, for host agents; kept with the flow and shown with it |
//! | `GET /routes/SRC` | 200 `{"src", "queue", "routes": [{"dst", "path", "tags"}]}`: the best-effort route from host `SRC` to each host it reaches (fewest hops, in the class `queue` below the admitted ones; none if the switches have no room for it), for the packets of `SRC` no admitted flow matches; 404 not a host |
//! | `GET /flows` | 200 every admitted flow |
//! | `GET /log?after=SEQ&limit=N&wait=MS` | 200 `{"entries": [...], "last": SEQ, "store": ID}`: the operations after `SEQ` with their outcomes (a host agent polls it to learn of reroutes; another `store` means another log, numbered from 1 again); with `wait` (ms, at most 60,000) an answer that would be empty waits for the next entry, up to that long (a long poll, held by the connection's thread, not the controller's); 410 if `SEQ` is below `folded`, the newest entry deleted by a compaction (read `GET /snapshot`, then the log after its `seq`); 400 a bad parameter, naming it |
//! | `GET /snapshot` | 200 the state after log entry `seq` (0 and nothing admitted if the log was never compacted): `flows` (request, `hops` as `[port, queue]`, `match`), `next_id`, `stats`, `rerouted`; restoring it and replaying the log after `seq` gives the service's controller |
//! | `POST /compact?keep=K` | 200 `{"removed", "snapshot", "folded", "last"}`: the controller's state now becomes the snapshot and every entry but the newest `K` (default 0) is deleted, in one transaction (the kept ones are for readers; a restart does not replay them); 500 if the checkpoint does not restore to the same state, and nothing changes |
//! | `GET /flows/ID` | 200 the flow; 404 |
//! | `DELETE /flows/ID` | 204; 404 |
//! | `POST /agents` `{"name", "hosts"}` | 200 `{"name", "hosts", "ttl_ms"}`: host agent `name` serves `hosts` until it lapses ([`agents`]); 400 naming the field; 409 a host another agent serves |
//! | `GET /agents` | 200 the agents registered now |
//! | `DELETE /agents/NAME` | 204; 404 |
//! | `POST /applied` `{"flow", "seq"}` | 200: the step of `flow` for log entry `seq` is done; 400 naming the field; 404 no such flow |
//! | `GET /applied?flow=ID&seq=SEQ&wait=MS` | 200 `{"done", "why", "agent"}`; with `wait` held until done (a long poll); 400 naming the parameter |

use latnet_ctl::eval::{EvalOptions, SystemKind};
use latnet_ctl::{Checkpoint, Controller, Embedding, FlowRequest, Rejection, Topology};
use latnet_units::{Bytes, Duration, Rate};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::Arc;

pub mod agents;
mod auth;
mod http;
pub mod metrics;
pub mod tls;
pub use auth::{Role, Tokens, MIN_TOKEN};
pub use http::{
    listen, read_request, serve, Endpoint, ReadRequest, ServeOptions, Swap, MAX_CONNECTIONS,
    MAX_HEAD, MAX_WAIT_MS,
};

/// Largest request body accepted (bytes).
pub const MAX_BODY: usize = 64 * 1024;

/// Most log entries one `GET /log` returns.
pub const MAX_LOG_PAGE: i64 = 1000;

/// What went wrong opening or writing the service's state.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The configuration cannot build a controller.
    #[error("{0}")]
    Config(String),
    /// SQLite failed.
    #[error("{path}: {source}")]
    Sqlite {
        /// The store's file.
        path: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The store was made with another configuration.
    #[error("{path}: the store was made with {field} = {stored}, the service was started with {given}; start it with the store's settings or another --db")]
    Mismatch {
        /// The store's file.
        path: String,
        /// The setting that differs.
        field: String,
        /// The store's value.
        stored: String,
        /// The value given.
        given: String,
    },
    /// Replaying the log did not give the logged outcome.
    #[error("{path}: log entry {seq} ({op}) gave {got} on replay, the log says {logged}; the file was changed outside the service or by another version")]
    Diverged {
        /// The store's file.
        path: String,
        /// The entry.
        seq: i64,
        /// Its operation.
        op: String,
        /// What the replay gave.
        got: String,
        /// What the log says.
        logged: String,
    },
    /// The snapshot cannot be read or describes no state the controller could reach.
    #[error("{path}: the snapshot of log entries 1 to {seq}: {message}; the file was changed outside the service or by another version")]
    BadSnapshot {
        /// The store's file.
        path: String,
        /// The last entry the snapshot holds.
        seq: i64,
        /// Why.
        message: String,
    },
    /// A log entry that cannot be read.
    #[error("{path}: log entry {seq}: {message}")]
    BadEntry {
        /// The store's file.
        path: String,
        /// The entry.
        seq: i64,
        /// Why.
        message: String,
    },
}

/// How the service's controller is built; kept in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// `chameleon`, `chameleon-noreroute`, `silo` or `silo-noburst`.
    pub system: String,
    /// Fat-tree arity (when no topology file).
    pub k: Option<usize>,
    /// Hosts per edge switch of the fat-tree (default k/2).
    pub hosts_per_edge: Option<usize>,
    /// Queues per switch port.
    pub queues: usize,
    /// A topology file's text (instead of a fat-tree), kept so a restart uses the same one.
    pub topology: Option<String>,
}

impl ServiceConfig {
    /// A controller with nothing admitted.
    pub fn controller(&self) -> Result<Controller, String> {
        let kind: SystemKind = self.system.parse()?;
        let topo = match (&self.topology, self.k) {
            (Some(text), _) => Topology::from_toml("topology", text).map_err(|e| e.to_string())?,
            (None, Some(k)) => {
                Topology::fat_tree(k, self.hosts_per_edge.unwrap_or(k / 2), Rate::from_gbps(1))?
            }
            (None, None) => return Err("give k (a fat-tree) or a topology file".into()),
        };
        let opts = EvalOptions { queues: self.queues, ..EvalOptions::default() };
        let cfg = opts
            .config(kind)?
            .ok_or_else(|| "qjump is not a per-queue controller; it cannot be served".to_owned())?;
        Controller::new(Arc::new(topo), cfg)
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<usize>| v.map_or("none".to_owned(), |v| v.to_string());
        vec![
            ("system", self.system.clone()),
            ("k", opt(self.k)),
            ("hosts_per_edge", opt(self.hosts_per_edge)),
            ("queues", self.queues.to_string()),
            (
                "topology",
                self.topology.as_ref().map_or("none".into(), |t| {
                    format!("a file of {} bytes, FNV-1a {:016x}", t.len(), fnv1a(t))
                }),
            ),
        ]
    }
}

/// FNV-1a of a text: a fingerprint that tells two topology files apart in a message.
fn fnv1a(text: &str) -> u64 {
    text.bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Which packets of the source host belong to a flow: what a host agent's tagger matches
/// (with the destination host's address). Kept by the service beside the flow; the controller
/// itself does not look at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowMatch {
    /// `udp` or `tcp`.
    pub proto: Proto,
    /// Destination port.
    pub dst_port: u16,
    /// Source port; absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_port: Option<u16>,
}

/// A transport protocol a flow can be matched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// UDP (17).
    Udp,
    /// TCP (6).
    Tcp,
}

impl Proto {
    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Proto::Udp => 17,
            Proto::Tcp => 6,
        }
    }
}

/// A flow request as the API takes it (and the log keeps it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Source host name.
    pub src: String,
    /// Destination host name.
    pub dst: String,
    /// Token-bucket rate, bit/s.
    pub rate_bps: u64,
    /// Token-bucket burst, bytes.
    pub burst_bytes: u64,
    /// End-to-end deadline, ns.
    pub deadline_ns: u64,
    /// The flow's packets at its source (for host agents); absent in requests that give none.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub flow_match: Option<FlowMatch>,
}

/// One operation of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Op {
    Request(Request),
    Remove { id: u64 },
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Request(_) => "request",
            Op::Remove { .. } => "remove",
        }
    }
}

/// What an operation did (logged beside it, compared on replay).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
enum Outcome {
    Admitted {
        id: u64,
        rerouted: Vec<u64>,
    },
    /// `moved`: flows the controller moved while it looked for room, and left moved.
    Refused {
        code: String,
        #[serde(default)]
        moved: Vec<u64>,
    },
    Removed {
        found: bool,
    },
}

/// Apply one operation to the controller: its outcome and, for a refusal, why.
fn apply(ctl: &mut Controller, op: &Op) -> Result<(Outcome, String), Rejection> {
    match op {
        Op::Request(r) => {
            let t = ctl.topology().clone();
            let host = |name: &str| {
                t.node_id(name).ok_or_else(|| Rejection::UnknownHost(format!("{name:?}")))
            };
            let fr = FlowRequest {
                src: host(&r.src)?,
                dst: host(&r.dst)?,
                rate: Rate::from_bps(r.rate_bps),
                burst: Bytes::new(r.burst_bytes),
                deadline: Duration::from_nanos(r.deadline_ns),
            };
            // an invalid request is answered without touching the controller's state
            ctl.validate(&fr)?;
            Ok(match ctl.request(fr) {
                Ok(a) => (Outcome::Admitted { id: a.id, rerouted: a.rerouted }, String::new()),
                Err(e) if e.is_invalid() => return Err(e),
                Err(e) => {
                    let moved = ctl.moved_by_last_request().to_vec();
                    (Outcome::Refused { code: e.code().to_owned(), moved }, e.to_string())
                }
            })
        }
        Op::Remove { id } => {
            Ok((Outcome::Removed { found: ctl.remove(*id).is_some() }, String::new()))
        }
    }
}

/// A flow as the API and the `flows` table show it (with the `match` its request gave).
pub fn flow_json(ctl: &Controller, e: &Embedding, m: Option<&FlowMatch>) -> Value {
    let t = ctl.topology();
    let name = |n: usize| t.nodes()[n].name.clone();
    let mut j = json!({
        "id": e.id,
        "src": name(e.request.src),
        "dst": name(e.request.dst),
        "rate_bps": e.request.rate.bps(),
        "burst_bytes": e.request.burst.get(),
        "deadline_ns": e.request.deadline.as_nanos(),
        "guarantee_ns": e.guarantee.as_nanos(),
        "path": e.path(t).into_iter().map(name).collect::<Vec<_>>(),
        "queues": e.hops.iter().map(|h| h.queue).collect::<Vec<_>>(),
        "budgets_ns": e.hops.iter().map(|h| h.budget.as_nanos()).collect::<Vec<_>>(),
        "tags": ctl.tags(e),
        "shaper": {"rate_bps": e.shaper().rate.bps(), "burst_bytes": e.shaper().burst.get()},
    });
    if let Some(m) = m {
        j["match"] = json!(m);
    }
    j
}

/// The matches of the admitted flows, by id (kept beside the controller, which has none).
pub type Matches = std::collections::BTreeMap<u64, FlowMatch>;

/// What a logged operation does to the matches.
fn track(matches: &mut Matches, op: &Op, outcome: &Outcome) {
    match (op, outcome) {
        (Op::Request(r), Outcome::Admitted { id, .. }) => {
            if let Some(m) = r.flow_match {
                matches.insert(*id, m);
            }
        }
        (Op::Remove { id }, _) => {
            matches.remove(id);
        }
        _ => {}
    }
}

/// The SQLite file holding a service's configuration, log and flows.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: String,
    /// A random id made with the store: tells a host agent that a service it polls now keeps
    /// another store (whose log numbers start over).
    id: String,
    /// The newest log entry's number (entries folded into the snapshot included; 0: none).
    last: i64,
    /// The last entry the snapshot holds (0: no snapshot); opening replays the entries after it.
    snap: i64,
    /// Entries up to this one were deleted (at most `snap`: the newest entries folded into the
    /// snapshot may be kept for readers of the log).
    folded: i64,
}

impl Store {
    fn sql(&self, e: rusqlite::Error) -> ServiceError {
        ServiceError::Sqlite { path: self.path.clone(), source: e }
    }

    /// Open (or create) the store at `path` for `cfg`, and the controller its log leads to.
    /// Settings that cannot build a controller are refused ([`ServiceError::Config`]) before
    /// the file is opened, so such a start neither makes a store nor writes into one.
    pub fn open(
        path: &Path,
        cfg: &ServiceConfig,
    ) -> Result<(Store, Controller, Matches), ServiceError> {
        let fresh = cfg.controller().map_err(ServiceError::Config)?;
        let p = path.display().to_string();
        let conn = Connection::open(path)
            .map_err(|e| ServiceError::Sqlite { path: p.clone(), source: e })?;
        let mut store = Store { conn, path: p, id: String::new(), last: 0, snap: 0, folded: 0 };
        store
            .conn
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = NORMAL;
                 CREATE TABLE IF NOT EXISTS config (
                     id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS log (
                     seq INTEGER PRIMARY KEY, op TEXT NOT NULL, body TEXT NOT NULL,
                     outcome TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS flows (
                     id INTEGER PRIMARY KEY, src TEXT NOT NULL, dst TEXT NOT NULL,
                     rate_bps INTEGER NOT NULL, burst_bytes INTEGER NOT NULL,
                     deadline_ns INTEGER NOT NULL, guarantee_ns INTEGER NOT NULL,
                     json TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS snapshot (
                     id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL,
                     json TEXT NOT NULL);
                 INSERT OR IGNORE INTO meta (key, value)
                     VALUES ('store', lower(hex(randomblob(8))));",
            )
            .map_err(|e| store.sql(e))?;
        store.id = store
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'store'", [], |r| r.get(0))
            .map_err(|e| store.sql(e))?;
        let stored: Option<String> = store
            .conn
            .query_row("SELECT json FROM config WHERE id = 1", [], |r| r.get(0))
            .optional()
            .map_err(|e| store.sql(e))?;
        match stored {
            None => {
                let text =
                    serde_json::to_string(cfg).map_err(|e| ServiceError::Config(e.to_string()))?;
                store
                    .conn
                    .execute("INSERT INTO config (id, json) VALUES (1, ?1)", [text])
                    .map_err(|e| store.sql(e))?;
            }
            Some(text) => {
                let old: ServiceConfig =
                    serde_json::from_str(&text).map_err(|e| ServiceError::BadEntry {
                        path: store.path.clone(),
                        seq: 0,
                        message: format!("config: {e}"),
                    })?;
                for ((field, stored), (_, given)) in old.fields().into_iter().zip(cfg.fields()) {
                    if stored != given {
                        return Err(ServiceError::Mismatch {
                            path: store.path.clone(),
                            field: field.to_owned(),
                            stored,
                            given,
                        });
                    }
                }
            }
        }
        store.snap = store
            .conn
            .query_row("SELECT seq FROM snapshot WHERE id = 1", [], |r| r.get(0))
            .optional()
            .map_err(|e| store.sql(e))?
            .unwrap_or(0);
        let (oldest, newest): (Option<i64>, Option<i64>) = store
            .conn
            .query_row("SELECT MIN(seq), MAX(seq) FROM log", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| store.sql(e))?;
        store.last = newest.unwrap_or(0).max(store.snap);
        store.folded = oldest.map_or(store.snap, |o| o - 1);
        let (ctl, matches) = store.rebuild_from(fresh)?;
        store.rewrite_flows(&ctl, &matches)?;
        Ok((store, ctl, matches))
    }

    /// The newest log entry's number (0: none yet).
    pub fn last(&self) -> i64 {
        self.last
    }

    /// The last entry the snapshot holds (0: none).
    pub fn snapshot_seq(&self) -> i64 {
        self.snap
    }

    /// Entries up to this one were deleted from the log (0: none).
    pub fn folded(&self) -> i64 {
        self.folded
    }

    /// The snapshot as stored (`None`: the store has none).
    fn snapshot_json(&self) -> Result<Option<Value>, ServiceError> {
        let text: Option<String> = self
            .conn
            .query_row("SELECT json FROM snapshot WHERE id = 1", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.sql(e))?;
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| ServiceError::BadSnapshot {
                path: self.path.clone(),
                seq: self.snap,
                message: format!("not JSON: {e}"),
            })
        })
        .transpose()
    }

    /// A controller for `cfg` in the store's state: the snapshot restored, then the log after it
    /// replayed and checked.
    fn rebuild(&self, cfg: &ServiceConfig) -> Result<(Controller, Matches), ServiceError> {
        self.rebuild_from(cfg.controller().map_err(ServiceError::Config)?)
    }

    /// [`Store::rebuild`] into `ctl`, a controller with nothing admitted.
    fn rebuild_from(&self, mut ctl: Controller) -> Result<(Controller, Matches), ServiceError> {
        let mut matches = Matches::new();
        if let Some(v) = self.snapshot_json()? {
            let bad = |message: String| ServiceError::BadSnapshot {
                path: self.path.clone(),
                seq: self.snap,
                message,
            };
            let topo = ctl.topology().clone();
            let cp = Checkpoint::from_json(&topo, &v).map_err(&bad)?;
            ctl.restore(&cp).map_err(&bad)?;
            for (i, f) in v["flows"].as_array().into_iter().flatten().enumerate() {
                if let (Some(id), Some(m)) = (f["id"].as_u64(), f.get("match")) {
                    let m: FlowMatch = serde_json::from_value(m.clone())
                        .map_err(|e| bad(format!("flows[{i}].match: {e}")))?;
                    matches.insert(id, m);
                }
            }
        }
        self.replay(&mut ctl, &mut matches)?;
        Ok((ctl, matches))
    }

    /// Replay the log's entries after the snapshot into `ctl`, checking every outcome and
    /// keeping the admitted flows' matches.
    fn replay(&self, ctl: &mut Controller, matches: &mut Matches) -> Result<(), ServiceError> {
        let mut stmt = self
            .conn
            .prepare("SELECT seq, body, outcome FROM log WHERE seq > ?1 ORDER BY seq")
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([self.snap], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })
            .map_err(|e| self.sql(e))?;
        for row in rows {
            let (seq, body, outcome) = row.map_err(|e| self.sql(e))?;
            let bad =
                |message: String| ServiceError::BadEntry { path: self.path.clone(), seq, message };
            let op: Op = serde_json::from_str(&body).map_err(|e| bad(format!("body: {e}")))?;
            let logged: Outcome =
                serde_json::from_str(&outcome).map_err(|e| bad(format!("outcome: {e}")))?;
            let (got, _) =
                apply(ctl, &op).map_err(|e| bad(format!("an invalid request in the log: {e}")))?;
            if got != logged {
                return Err(ServiceError::Diverged {
                    path: self.path.clone(),
                    seq,
                    op: op.name().to_owned(),
                    got: serde_json::to_string(&got).unwrap_or_default(),
                    logged: outcome,
                });
            }
            track(matches, &op, &got);
        }
        Ok(())
    }

    /// Make the controller's state now (`ctl`, `matches`: the state after the newest entry)
    /// the snapshot and delete every entry but the newest `keep` (kept for readers of the log;
    /// a restart replays none of them), in one transaction. The checkpoint is first restored
    /// into a fresh controller for `cfg` and must give the same queues and flows. Returns the
    /// entries deleted.
    fn compact(
        &mut self,
        cfg: &ServiceConfig,
        ctl: &Controller,
        matches: &Matches,
        keep: i64,
    ) -> Result<usize, ServiceError> {
        let (upto, drop_upto) = (self.last, self.last - keep.max(0));
        if upto == self.snap && drop_upto <= self.folded {
            return Ok(0);
        }
        let cp = ctl.checkpoint();
        let mut again = cfg.controller().map_err(ServiceError::Config)?;
        let same = again.restore(&cp).is_ok()
            && again.snapshot() == ctl.snapshot()
            && again.flows().eq(ctl.flows());
        if !same {
            return Err(ServiceError::BadSnapshot {
                path: self.path.clone(),
                seq: upto,
                message: "restoring the checkpoint does not give the controller's state; \
                          nothing was compacted"
                    .into(),
            });
        }
        let mut v = cp.to_json(ctl.topology());
        for f in v["flows"].as_array_mut().into_iter().flatten() {
            if let Some(m) = f["id"].as_u64().and_then(|id| matches.get(&id)) {
                f["match"] = serde_json::to_value(m).unwrap_or(Value::Null);
            }
        }
        v["seq"] = json!(upto);
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        tx.execute(
            "INSERT OR REPLACE INTO snapshot (id, seq, json) VALUES (1, ?1, ?2)",
            params![upto, v.to_string()],
        )
        .map_err(|e| self.sql(e))?;
        let removed =
            tx.execute("DELETE FROM log WHERE seq <= ?1", [drop_upto]).map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))?;
        self.snap = upto;
        self.folded = self.folded.max(drop_upto);
        Ok(removed)
    }

    fn rewrite_flows(&self, ctl: &Controller, matches: &Matches) -> Result<(), ServiceError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        tx.execute("DELETE FROM flows", []).map_err(|e| self.sql(e))?;
        for e in ctl.flows() {
            self.put_flow(&tx, ctl, e, matches)?;
        }
        tx.commit().map_err(|e| self.sql(e))
    }

    fn put_flow(
        &self,
        tx: &Connection,
        ctl: &Controller,
        e: &Embedding,
        matches: &Matches,
    ) -> Result<(), ServiceError> {
        let j = flow_json(ctl, e, matches.get(&e.id));
        let id = i64::try_from(e.id).unwrap_or(i64::MAX);
        tx.execute(
            "INSERT OR REPLACE INTO flows
                 (id, src, dst, rate_bps, burst_bytes, deadline_ns, guarantee_ns, json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                j["src"].as_str(),
                j["dst"].as_str(),
                j["rate_bps"].as_i64(),
                j["burst_bytes"].as_i64(),
                j["deadline_ns"].as_i64(),
                j["guarantee_ns"].as_i64(),
                j.to_string()
            ],
        )
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Log entries after `after` (at most `limit`), and the newest entry's number (0: none).
    fn entries(&self, after: i64, limit: i64) -> Result<(Vec<Value>, i64), ServiceError> {
        let mut stmt = self
            .conn
            .prepare("SELECT seq, body, outcome FROM log WHERE seq > ?1 ORDER BY seq LIMIT ?2")
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![after, limit], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, body, outcome) = row.map_err(|e| self.sql(e))?;
            let parse =
                |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::String(t.into()));
            let mut entry = json!({"seq": seq});
            // `op` and the request's fields from the body, `outcome` and its fields beside them
            for part in [parse(&body), parse(&outcome)] {
                if let Value::Object(m) = part {
                    for (k, v) in m {
                        entry[k] = v;
                    }
                }
            }
            out.push(entry);
        }
        Ok((out, self.last))
    }

    /// Log `op` with its outcome and bring `flows` up to date, in one transaction (`matches`
    /// already holds what the operation did to them).
    fn record(
        &mut self,
        ctl: &Controller,
        matches: &Matches,
        op: &Op,
        outcome: &Outcome,
    ) -> Result<(), ServiceError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        let body = serde_json::to_string(op).unwrap_or_default();
        let out = serde_json::to_string(outcome).unwrap_or_default();
        // numbered explicitly: after a compaction the log may be empty, and numbers must not
        // start over
        tx.execute(
            "INSERT INTO log (seq, op, body, outcome) VALUES (?1, ?2, ?3, ?4)",
            params![self.last + 1, op.name(), body, out],
        )
        .map_err(|e| self.sql(e))?;
        match (op, outcome) {
            (_, Outcome::Admitted { rerouted: moved, .. } | Outcome::Refused { moved, .. }) => {
                let new = match outcome {
                    Outcome::Admitted { id, .. } => Some(id),
                    _ => None,
                };
                for fid in new.into_iter().chain(moved) {
                    if let Some(e) = ctl.flow(*fid) {
                        self.put_flow(&tx, ctl, e, matches)?;
                    }
                }
            }
            (Op::Remove { id }, Outcome::Removed { found: true }) => {
                tx.execute(
                    "DELETE FROM flows WHERE id = ?1",
                    [i64::try_from(*id).unwrap_or(i64::MAX)],
                )
                .map_err(|e| self.sql(e))?;
            }
            _ => {}
        }
        tx.commit().map_err(|e| self.sql(e))?;
        self.last += 1;
        Ok(())
    }
}

/// The controller and its store, answering API requests.
#[derive(Debug)]
pub struct Service {
    ctl: Controller,
    store: Store,
    cfg: ServiceConfig,
    /// The admitted flows' matches (the controller keeps none).
    matches: Matches,
    /// Requests answered 422 since the service started (they are not logged).
    invalid: u64,
    /// Requests refused for their token (401, 403) since the service started.
    denied: u64,
    /// Compact once this many entries were logged after the snapshot, keeping as many.
    log_keep: Option<i64>,
    /// Compactions that failed since the service started.
    compaction_errors: u64,
    /// The host agents registered and the steps they reported (not stored).
    agents: agents::Agents,
}

/// The names of the hosts of `ctl`'s topology.
fn host_names(ctl: &Controller) -> Vec<&str> {
    let t = ctl.topology();
    t.hosts().into_iter().map(|h| t.nodes()[h].name.as_str()).collect()
}

/// A status and a JSON body (`Value::Null`: no body).
pub type Reply = (u16, Value);

/// The methods resource `parts` (its path split at `/`) allows (`None`: no such resource).
fn allowed(parts: &[&str]) -> Option<&'static [&'static str]> {
    Some(match parts {
        ["health" | "hosts" | "config" | "stats" | "metrics" | "log" | "snapshot"] => {
            &["GET", "HEAD"]
        }
        ["routes", _] => &["GET", "HEAD"],
        ["flows"] => &["GET", "HEAD", "POST"],
        ["flows", _] => &["GET", "HEAD", "DELETE"],
        ["agents" | "applied"] => &["GET", "HEAD", "POST"],
        ["agents", _] => &["DELETE"],
        ["compact"] => &["POST"],
        _ => return None,
    })
}

fn err(status: u16, field: Option<&str>, msg: impl Into<String>) -> Reply {
    let mut m = Map::new();
    m.insert("error".into(), Value::String(msg.into()));
    if let Some(f) = field {
        m.insert("field".into(), Value::String(f.into()));
    }
    (status, Value::Object(m))
}

/// Read a flow request from a JSON body; a 400 reply naming the field otherwise.
fn parse_request(body: &[u8]) -> Result<Request, Reply> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| err(400, None, format!("the body is not JSON: {e}")))?;
    let Value::Object(m) = v else {
        return Err(err(
            400,
            None,
            "expected a JSON object with src, dst, rate_bps, burst_bytes, deadline_ns",
        ));
    };
    const FIELDS: [&str; 6] = ["src", "dst", "rate_bps", "burst_bytes", "deadline_ns", "match"];
    if let Some(k) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(err(
            400,
            Some(k),
            format!("unknown field {k:?}; expected {}", FIELDS.join(", ")),
        ));
    }
    let text = |f: &str| -> Result<String, Reply> {
        match m.get(f) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(other) => {
                Err(err(400, Some(f), format!("{f}: expected a host name (a string), got {other}")))
            }
            None => Err(err(400, Some(f), format!("{f}: missing (a host name)"))),
        }
    };
    // at most what the store's INTEGER columns hold (i64), refused before the controller sees it
    let positive = |f: &str, what: &str| -> Result<u64, Reply> {
        match m.get(f) {
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 && i64::try_from(n).is_ok() => Ok(n),
                _ => Err(err(
                    400,
                    Some(f),
                    format!("{f}: expected {what} as a whole number >= 1 (below 2^63), got {v}"),
                )),
            },
            None => Err(err(400, Some(f), format!("{f}: missing ({what})"))),
        }
    };
    Ok(Request {
        src: text("src")?,
        dst: text("dst")?,
        rate_bps: positive("rate_bps", "bits per second")?,
        burst_bytes: positive("burst_bytes", "bytes")?,
        deadline_ns: positive("deadline_ns", "nanoseconds")?,
        flow_match: m.get("match").map(parse_match).transpose()?,
    })
}

/// `match`: `{"proto": "udp" | "tcp", "dst_port": 1-65535, "src_port": 1-65535 (optional)}`.
fn parse_match(v: &Value) -> Result<FlowMatch, Reply> {
    let Value::Object(m) = v else {
        return Err(err(
            400,
            Some("match"),
            format!(
                "match: expected an object with proto, dst_port and optionally src_port, got {v}"
            ),
        ));
    };
    if let Some(k) = m.keys().find(|k| !["proto", "dst_port", "src_port"].contains(&k.as_str())) {
        let f = format!("match.{k}");
        return Err(err(
            400,
            Some(&f),
            format!("{f}: unknown; expected proto, dst_port, src_port"),
        ));
    }
    let proto = match m.get("proto") {
        Some(Value::String(p)) if p == "udp" => Proto::Udp,
        Some(Value::String(p)) if p == "tcp" => Proto::Tcp,
        Some(other) => {
            return Err(err(
                400,
                Some("match.proto"),
                format!("match.proto: expected \"udp\" or \"tcp\", got {other}"),
            ))
        }
        None => {
            return Err(err(400, Some("match.proto"), "match.proto: missing (\"udp\" or \"tcp\")"))
        }
    };
    let port = |f: &str| -> Result<Option<u16>, Reply> {
        match m.get(f) {
            None => Ok(None),
            Some(v) => match v.as_u64().and_then(|n| u16::try_from(n).ok()).filter(|&n| n >= 1) {
                Some(n) => Ok(Some(n)),
                None => {
                    let name = format!("match.{f}");
                    Err(err(400, Some(&name), format!("{name}: expected a port, 1-65535, got {v}")))
                }
            },
        }
    };
    let Some(dst_port) = port("dst_port")? else {
        return Err(err(400, Some("match.dst_port"), "match.dst_port: missing (a port, 1-65535)"));
    };
    Ok(FlowMatch { proto, dst_port, src_port: port("src_port")? })
}

/// The request field an invalid request's rejection is about.
fn field_of(e: &Rejection, r: &Request) -> &'static str {
    match e {
        Rejection::UnknownHost(h) | Rejection::NotAHost(h) => {
            if *h == format!("{:?}", r.src) || *h == r.src {
                "src"
            } else {
                "dst"
            }
        }
        Rejection::SameHost | Rejection::Unreachable(..) | Rejection::BeyondMaxTags { .. } => "dst",
        Rejection::InvalidRate => "rate_bps",
        Rejection::InvalidBurst => "burst_bytes",
        _ => "deadline_ns",
    }
}

impl Service {
    /// Open the store at `db` for `cfg` (creating it), replaying its log.
    pub fn open(db: &Path, cfg: ServiceConfig) -> Result<Service, ServiceError> {
        let (store, ctl, matches) = Store::open(db, &cfg)?;
        Ok(Service {
            ctl,
            store,
            cfg,
            matches,
            invalid: 0,
            denied: 0,
            log_keep: None,
            compaction_errors: 0,
            agents: agents::Agents::default(),
        })
    }

    /// The controller (read only).
    pub fn controller(&self) -> &Controller {
        &self.ctl
    }

    /// The host agents' registrations and reports (tests shorten their lifetime).
    pub fn agents_mut(&mut self) -> &mut agents::Agents {
        &mut self.agents
    }

    /// Changes whenever a long poll could have a new answer: an entry logged, an agent
    /// registered or a step reported.
    pub fn generation(&self) -> (i64, u64) {
        (self.store.last(), self.agents.generation())
    }

    /// The newest log entry's number (0: none yet).
    pub fn last_seq(&self) -> i64 {
        self.store.last()
    }

    /// Count a request refused for its token (it never reaches [`Service::handle`]).
    pub fn note_denied(&mut self) {
        self.denied += 1;
    }

    /// Answer one request. A failure to write the store is a 500, and the controller goes back
    /// to what the store holds (replayed as in [`Service::open`]).
    pub fn handle(&mut self, method: &str, path: &str, body: &[u8]) -> Reply {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        // HEAD is GET without the body (RFC 9110 9.3.2), which the server leaves out
        let method = if method == "HEAD" { "GET" } else { method };
        match (method, parts.as_slice()) {
            ("GET", ["health"]) => (
                200,
                json!({"ok": true, "flows": self.ctl.len(), "store": self.store.id,
                       "last": self.store.last(), "snapshot": self.store.snapshot_seq(),
                       "folded": self.store.folded()}),
            ),
            ("GET", ["snapshot"]) => self.get_snapshot(),
            ("POST", ["compact"]) => self.post_compact(query),
            ("GET", ["hosts"]) => (200, json!(host_names(&self.ctl))),
            ("GET", ["config"]) => (200, serde_json::to_value(&self.cfg).unwrap_or(Value::Null)),
            // the controller's part of GET /metrics, which the server writes as text with
            // its own counters ([`metrics`])
            ("GET", ["stats" | "metrics"]) => {
                let s = self.ctl.stats();
                (
                    200,
                    json!({"flows": self.ctl.len(), "admitted": s.admitted, "rejected": s.rejected,
                           "invalid": self.invalid, "denied": self.denied, "reroutes": s.reroutes,
                           "compaction_errors": self.compaction_errors,
                           "admitted_after_reroute": s.admitted_after_reroute,
                           "last": self.store.last(), "agents": self.agents.count()}),
                )
            }
            ("GET", ["log"]) => self.get_log(query),
            ("GET", ["agents"]) => self.agents.list(),
            ("DELETE", ["agents", name]) => self.agents.deregister(name),
            ("POST", ["agents"]) => self.agents.register(body, &host_names(&self.ctl)),
            ("POST", ["applied"]) => {
                let ctl = &self.ctl;
                self.agents.report(body, |id| ctl.flow(id).is_some(), self.store.last())
            }
            ("GET", ["applied"]) => {
                let ctl = &self.ctl;
                let src = |id: u64| {
                    ctl.flow(id).map(|e| ctl.topology().nodes()[e.request.src].name.clone())
                };
                self.agents.query(query, src)
            }
            ("GET", ["routes", src]) => self.routes(src),
            ("GET", ["flows"]) => {
                let all =
                    self.ctl.flows().map(|e| flow_json(&self.ctl, e, self.matches.get(&e.id)));
                (200, Value::Array(all.collect()))
            }
            ("POST", ["flows"]) => self.post_flow(body),
            ("GET" | "DELETE", ["flows", id]) => {
                let Ok(id) = id.parse::<u64>() else {
                    return err(404, Some("id"), format!("no flow {id:?}: ids are whole numbers"));
                };
                if method == "GET" {
                    return match self.ctl.flow(id) {
                        Some(e) => (200, flow_json(&self.ctl, e, self.matches.get(&id))),
                        None => err(404, Some("id"), format!("no flow {id}")),
                    };
                }
                if self.ctl.flow(id).is_none() {
                    return err(404, Some("id"), format!("no flow {id}"));
                }
                match self.commit(Op::Remove { id }) {
                    Ok(_) => {
                        self.agents.forget(id);
                        (204, Value::Null)
                    }
                    Err(reply) => reply,
                }
            }
            (_, parts) if allowed(parts).is_some() => {
                let allow = allowed(parts).unwrap_or_default();
                let mut reply = err(405, None, format!("{method} is not allowed on {path}"));
                // the answer's Allow header (RFC 9110 15.5.6) is made from this
                reply.1["allow"] = json!(allow.join(", "));
                reply
            }
            _ => {
                err(404, None, format!("no such resource {path}; see GET /health, /hosts, /flows"))
            }
        }
    }

    /// `GET /log?after=SEQ&limit=N`: the operations after `SEQ` (default 0), oldest first, at
    /// most `N` (default and at most 1,000), and `last`, the newest entry's number. A host agent
    /// polls with `after` = the `last` it saw to learn which flows were moved (and re-tag them).
    fn get_log(&self, query: &str) -> Reply {
        let mut after = 0i64;
        let mut limit = MAX_LOG_PAGE;
        // how long to wait for an entry: the server's connection threads do the waiting
        // (`serve`); checked here
        let mut wait = 0i64;
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let slot = match k {
                "after" => &mut after,
                "limit" => &mut limit,
                "wait" => &mut wait,
                other => {
                    return err(
                        400,
                        Some(other),
                        format!("unknown parameter {other:?}; expected after, limit, wait"),
                    )
                }
            };
            match v.parse::<i64>() {
                Ok(n) if n >= 0 => *slot = n,
                _ => {
                    return err(
                        400,
                        Some(k),
                        format!("{k}: expected a whole number >= 0, got {v:?}"),
                    )
                }
            }
        }
        if wait > http::MAX_WAIT_MS as i64 {
            return err(
                400,
                Some("wait"),
                format!("wait: at most {} ms, got {wait}", http::MAX_WAIT_MS),
            );
        }
        let (snap, folded) = (self.store.snapshot_seq(), self.store.folded());
        if after < folded {
            return (
                410,
                json!({"error": format!("entries 1 to {folded} were deleted, folded into the \
                                         snapshot (GET /snapshot: the state after entry \
                                         {snap}); the log goes on after {folded}"),
                       "field": "after", "snapshot": snap, "folded": folded,
                       "last": self.store.last(), "store": self.store.id}),
            );
        }
        match self.store.entries(after, limit.min(MAX_LOG_PAGE)) {
            Ok((entries, last)) => {
                (200, json!({"entries": entries, "last": last, "store": self.store.id}))
            }
            Err(e) => err(500, None, format!("the store could not be read: {e}")),
        }
    }

    /// `GET /routes/SRC`: the best-effort route from host `SRC` to every other host it can
    /// reach (fewest hops, in the class below the admitted ones): what a host agent gives the
    /// packets no admitted flow matches, so that ordinary traffic crosses the tag-routed network.
    fn routes(&self, src: &str) -> Reply {
        let t = self.ctl.topology();
        let Some(s) = t.node_id(src).filter(|&n| t.is_host(n)) else {
            return err(404, Some("src"), format!("no host {src:?}; see GET /hosts"));
        };
        let name = |n: usize| t.nodes()[n].name.clone();
        let routes: Vec<Value> = t
            .hosts()
            .into_iter()
            .filter(|&d| d != s)
            .filter_map(|d| {
                let (path, tags) = self.ctl.best_effort_route(s, d)?;
                let nodes: Vec<String> = std::iter::once(name(s))
                    .chain(path.iter().map(|&p| name(t.port(p).peer)))
                    .collect();
                Some(json!({"dst": name(d), "path": nodes, "tags": tags}))
            })
            .collect();
        (200, json!({"src": src, "queue": self.ctl.best_effort_queue(), "routes": routes}))
    }

    fn post_flow(&mut self, body: &[u8]) -> Reply {
        let r = match parse_request(body) {
            Ok(r) => r,
            Err(reply) => return reply,
        };
        // two flows of one source with the same match could not be told apart by its tagger
        if let Some(m) = r.flow_match {
            let clash = self.matches.iter().find(|(id, other)| {
                **other == m
                    && self.ctl.flow(**id).is_some_and(|e| {
                        let t = self.ctl.topology();
                        t.nodes()[e.request.src].name == r.src
                            && t.nodes()[e.request.dst].name == r.dst
                    })
            });
            if let Some((id, _)) = clash {
                self.invalid += 1;
                return (
                    422,
                    json!({"code": "match-in-use", "field": "match",
                           "reason": format!("flow {id} from {} to {} has the same match", r.src, r.dst)}),
                );
            }
        }
        match self.commit(Op::Request(r.clone())) {
            Err(reply) => reply,
            Ok((Outcome::Admitted { id, rerouted }, _)) => {
                let m = self.matches.get(&id);
                let mut j = self.ctl.flow(id).map_or(Value::Null, |e| flow_json(&self.ctl, e, m));
                j["rerouted"] = json!(rerouted);
                (201, j)
            }
            Ok((Outcome::Refused { code, moved }, reason)) => {
                (409, json!({"code": code, "reason": reason, "rerouted": moved}))
            }
            Ok((Outcome::Removed { .. }, _)) => err(500, None, "a request removed a flow"),
        }
    }

    /// Apply `op` and record it. An invalid request (422) changes nothing and is not logged; when
    /// the store cannot be written (500) the controller is rebuilt from what the store holds.
    fn commit(&mut self, op: Op) -> Result<(Outcome, String), Reply> {
        let (outcome, reason) = match apply(&mut self.ctl, &op) {
            Ok(x) => x,
            Err(e) => {
                let field = match &op {
                    Op::Request(r) => field_of(&e, r),
                    Op::Remove { .. } => "id",
                };
                self.invalid += 1;
                return Err((
                    422,
                    json!({"code": e.code(), "reason": e.to_string(), "field": field}),
                ));
            }
        };
        track(&mut self.matches, &op, &outcome);
        if let Err(e) = self.store.record(&self.ctl, &self.matches, &op, &outcome) {
            // back to what the store holds (rare: a full disk, a file removed underneath)
            let rebuilt = self.store.rebuild(&self.cfg);
            let also = match rebuilt {
                Ok((c, m)) => {
                    self.ctl = c;
                    self.matches = m;
                    String::new()
                }
                Err(r) => format!("; rebuilding from the store failed too ({r})"),
            };
            return Err(err(500, None, format!("the store could not be written: {e}{also}")));
        }
        if let Some(keep) = self.log_keep {
            // the answer stands whatever happens here: the operation is committed
            if self.store.last() - self.store.snapshot_seq() >= keep {
                if let Err(e) = self.store.compact(&self.cfg, &self.ctl, &self.matches, keep) {
                    self.compaction_errors += 1;
                    eprintln!("latnet-ctld: compacting the log failed (the log is kept): {e}");
                }
            }
        }
        Ok((outcome, reason))
    }

    /// Make the state the snapshot once `keep` entries were logged after it, keeping the newest
    /// `keep` entries for readers (`None`: never on its own; `POST /compact` still does).
    pub fn set_log_keep(&mut self, keep: Option<u64>) {
        self.log_keep = keep.filter(|&k| k > 0).map(|k| i64::try_from(k).unwrap_or(i64::MAX / 2));
    }

    /// `POST /compact?keep=K`: the state now becomes the snapshot; every entry but the newest
    /// `K` (default 0) is deleted.
    fn post_compact(&mut self, query: &str) -> Reply {
        let mut keep = 0i64;
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            // a bare `keep` is `keep=` (as `GET /log` reads it): a value that is no number
            match kv.split_once('=').or((kv == "keep").then_some((kv, ""))) {
                Some(("keep", v)) => match v.parse::<i64>() {
                    Ok(n) if n >= 0 => keep = n,
                    _ => {
                        return err(
                            400,
                            Some("keep"),
                            format!("keep: expected a whole number >= 0, got {v:?}"),
                        )
                    }
                },
                _ => {
                    let k = kv.split_once('=').map_or(kv, |(k, _)| k);
                    return err(400, Some(k), format!("unknown parameter {k:?}; expected keep"));
                }
            }
        }
        match self.store.compact(&self.cfg, &self.ctl, &self.matches, keep) {
            Ok(removed) => (
                200,
                json!({"removed": removed, "snapshot": self.store.snapshot_seq(),
                       "folded": self.store.folded(), "last": self.store.last()}),
            ),
            Err(e) => {
                self.compaction_errors += 1;
                err(500, None, format!("the log could not be compacted (it is kept): {e}"))
            }
        }
    }

    /// `GET /snapshot`: the state after entry `seq` (the flows' requests, hops and matches, the
    /// next id, the counters), from which `GET /log?after=seq` goes on.
    fn get_snapshot(&self) -> Reply {
        let stored = match self.store.snapshot_json() {
            Ok(s) => s,
            Err(e) => return err(500, None, format!("the store could not be read: {e}")),
        };
        let mut v = stored.unwrap_or_else(|| {
            let empty = Checkpoint {
                flows: Vec::new(),
                next_id: 0,
                stats: latnet_ctl::Stats::default(),
                rerouted: Vec::new(),
            };
            let mut v = empty.to_json(self.ctl.topology());
            v["seq"] = json!(0);
            v
        });
        v["store"] = json!(self.store.id);
        (200, v)
    }
}
