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
use latnet_ctl::{
    Checkpoint, Controller, Embedding, FlowRequest, Rejection, TagScheme, Topology,
    DEFAULT_MAX_TAGS,
};
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
mod service;
mod store;
pub mod tls;
pub use auth::{Role, Tokens, MIN_TOKEN};
pub use http::{
    listen, read_request, serve, Endpoint, ReadRequest, ServeOptions, Swap, MAX_CONNECTIONS,
    MAX_HEAD, MAX_WAIT_MS,
};
pub(crate) use service::err;
pub use service::{Reply, Service};
pub use store::Store;

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
    /// Most tags a host pushes, so most switches a path may cross (`None`: the controller's
    /// 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tags: Option<usize>,
    /// The tag base: a tag is `base × local port + queue` (`None`: 10; the paper's example
    /// uses 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag_base: Option<u16>,
}

impl ServiceConfig {
    /// Chameleon on a `k`-ary fat-tree (`k/2` hosts per edge switch) with `queues` queues per
    /// port, every other setting the default.
    pub fn fat_tree(k: usize, queues: usize) -> ServiceConfig {
        ServiceConfig {
            system: "chameleon".into(),
            k: Some(k),
            hosts_per_edge: None,
            queues,
            topology: None,
            max_tags: None,
            tag_base: None,
        }
    }

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
        let mut opts = EvalOptions { queues: self.queues, ..EvalOptions::default() };
        if let Some(base) = self.tag_base {
            opts.tags.base = base;
        }
        let mut cfg = opts
            .config(kind)?
            .ok_or_else(|| "qjump is not a per-queue controller; it cannot be served".to_owned())?;
        if let Some(m) = self.max_tags {
            cfg.max_tags = m;
        }
        Controller::new(Arc::new(topo), cfg)
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<usize>| v.map_or("none".to_owned(), |v| v.to_string());
        vec![
            ("system", self.system.clone()),
            ("k", opt(self.k)),
            ("hosts_per_edge", opt(self.hosts_per_edge)),
            ("queues", self.queues.to_string()),
            // the values in effect: a default given explicitly is the same setting
            ("max_tags", self.max_tags.unwrap_or(DEFAULT_MAX_TAGS).to_string()),
            ("tag_base", self.tag_base.unwrap_or(TagScheme::default().base).to_string()),
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
