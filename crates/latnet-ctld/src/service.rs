//! The service: the controller and its store answering the REST API (routing, parsing and
//! validating requests, errors that name the field).

use super::*;

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

pub(crate) fn err(status: u16, field: Option<&str>, msg: impl Into<String>) -> Reply {
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
