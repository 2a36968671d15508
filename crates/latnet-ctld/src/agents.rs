//! Host agents keeping the sequential order between them.
//!
//! An admission that moves flows is safe in the order the controller checked it: each moved
//! flow re-tagged only once the flow moved before it has had its old guarantee to drain its old
//! path, the new flow last. One agent serving every host keeps that order by itself. Agents on
//! separate hosts keep it through the service:
//!
//! * every agent registers the hosts it serves, and registers again at least every
//!   [`AGENT_TTL`] (`POST /agents {"name", "hosts"}`); an agent not heard from for that long no
//!   longer counts; a host another agent serves is refused (409: they would undo each other);
//!   a name is 1 to 200 of [`NAME_CHARS`] (400 otherwise), so that a path carries it as it is;
//!   an agent that stops says so (`DELETE /agents/NAME`; 404 once its registration lapsed);
//! * after it re-tagged a flow for log entry `seq` and that flow's old path drained (or, for a
//!   new flow, once it tags it) the flow's agent says so: `POST /applied {"flow", "seq"}`;
//! * before an agent applies a step, it asks whether the step before it is done:
//!   `GET /applied?flow=ID&seq=SEQ` answers `done` with why: `applied` (its agent said so),
//!   `unserved` (no registered agent serves the flow's source: nobody will), `removed` (the flow
//!   is no longer admitted). With `&wait=MS` (at most 60 s) the connection waits for that.
//!
//! None of this is kept in the store: after a restart agents register again within a
//! [`AGENT_TTL`], and an agent whose report was lost delays the next step at most until the
//! waiting agent gives up.

use crate::{err, Reply};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// How long a registration lasts without being renewed.
pub const AGENT_TTL: Duration = Duration::from_secs(3);
/// Most agents registered at once (a registration beyond is refused, 429).
pub const MAX_AGENTS: usize = 4096;

/// The characters an agent's name may have: those a path carries as they are (RFC 3986
/// unreserved, and `+ @ :`), so that `DELETE /agents/NAME` needs no %-encoding.
pub const NAME_CHARS: &str = "A-Z a-z 0-9 - . _ ~ + @ :";

fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+@:".contains(&b)
}

#[derive(Debug, Clone)]
struct Registration {
    hosts: Vec<String>,
    seen: Instant,
}

/// The registered agents and the steps they reported.
#[derive(Debug)]
pub struct Agents {
    regs: BTreeMap<String, Registration>,
    /// Per flow, the newest log entry whose step its agent reported done.
    applied: HashMap<u64, i64>,
    ttl: Duration,
    /// Added to the machine's clock (tests move it on instead of sleeping, see [`Self::pass`]).
    skew: Duration,
    /// Bumped by every report and change of who serves what, so that a waiting
    /// `GET /applied` asks again (a lapse is seen when the waiting agent asks anew).
    generation: u64,
}

impl Default for Agents {
    fn default() -> Self {
        Agents {
            regs: BTreeMap::new(),
            applied: HashMap::new(),
            ttl: AGENT_TTL,
            skew: Duration::ZERO,
            generation: 0,
        }
    }
}

/// The object of a JSON body, or a 400 naming what is wrong.
fn object(body: &[u8], expected: &str) -> Result<serde_json::Map<String, Value>, Reply> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(err(400, None, format!("expected a JSON object with {expected}"))),
        Err(e) => Err(err(400, None, format!("the body is not JSON: {e}"))),
    }
}

fn only(m: &serde_json::Map<String, Value>, fields: &[&str]) -> Result<(), Reply> {
    match m.keys().find(|k| !fields.contains(&k.as_str())) {
        Some(k) => {
            Err(err(400, Some(k), format!("unknown field {k:?}; expected {}", fields.join(", "))))
        }
        None => Ok(()),
    }
}

impl Agents {
    /// Registrations last `ttl` (tests shorten it).
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.ttl = ttl;
    }

    /// Now, on the clock registrations are timed by.
    fn now(&self) -> Instant {
        Instant::now() + self.skew
    }

    /// Move this registry's clock on by `d`, as if that long had passed (tests: a registration
    /// lapses without a sleep, which a machine that preempts the test could stretch past the
    /// time-to-live the test means to stay within).
    #[cfg(test)]
    fn pass(&mut self, d: Duration) {
        self.skew += d;
    }

    /// Changes with every report and every change of who serves what.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn live(&self, now: Instant) -> impl Iterator<Item = (&String, &Registration)> {
        self.regs.iter().filter(move |(_, r)| now.duration_since(r.seen) < self.ttl)
    }

    /// `POST /agents`: register (or renew) agent `name` serving `hosts` (each one of `known`).
    pub fn register(&mut self, body: &[u8], known: &[&str]) -> Reply {
        let m = match object(body, "name and hosts") {
            Ok(m) => m,
            Err(r) => return r,
        };
        if let Err(r) = only(&m, &["name", "hosts"]) {
            return r;
        }
        let name = match m.get("name") {
            Some(Value::String(s))
                if !s.is_empty() && s.len() <= 200 && s.bytes().all(name_byte) =>
            {
                s.clone()
            }
            _ => {
                return err(
                    400,
                    Some("name"),
                    format!("name: expected 1 to 200 of the characters {NAME_CHARS}"),
                )
            }
        };
        let Some(Value::Array(list)) = m.get("hosts") else {
            return err(400, Some("hosts"), "hosts: expected a list of host names");
        };
        let mut hosts = Vec::with_capacity(list.len());
        for (i, h) in list.iter().enumerate() {
            match h.as_str() {
                Some(h) if known.contains(&h) => hosts.push(h.to_owned()),
                _ => {
                    return err(
                        400,
                        Some(&format!("hosts[{i}]")),
                        format!("hosts[{i}]: {h} is not a host of this network (GET /hosts)"),
                    )
                }
            }
        }
        let now = self.now();
        let ttl = self.ttl;
        self.regs.retain(|_, r| now.duration_since(r.seen) < ttl);
        // two agents programming one host would undo each other
        for (i, h) in hosts.iter().enumerate() {
            if let Some((other, _)) =
                self.regs.iter().find(|(n, r)| **n != name && r.hosts.contains(h))
            {
                return err(
                    409,
                    Some(&format!("hosts[{i}]")),
                    format!("hosts[{i}]: {h} is served by agent {other:?} already"),
                );
            }
        }
        if !self.regs.contains_key(&name) && self.regs.len() >= MAX_AGENTS {
            return err(429, Some("name"), format!("{MAX_AGENTS} agents are registered already"));
        }
        let reg = Registration { hosts: hosts.clone(), seen: now };
        // a renewal changes no answer: only a new agent or new hosts wake the waiting questions
        if self.regs.insert(name.clone(), reg).is_none_or(|old| old.hosts != hosts) {
            self.generation += 1;
        }
        (200, json!({"name": name, "hosts": hosts, "ttl_ms": self.ttl.as_millis() as u64}))
    }

    /// How many agents are registered now (not lapsed).
    pub fn count(&self) -> usize {
        self.live(self.now()).count()
    }

    /// `DELETE /agents/NAME`: agent `name` stops (its hosts are unserved at once); 404 if it
    /// is not registered now (never, or its registration lapsed).
    pub fn deregister(&mut self, name: &str) -> Reply {
        let now = self.now();
        match self.regs.remove(name).filter(|r| now.duration_since(r.seen) < self.ttl) {
            Some(_) => {
                self.generation += 1;
                (204, Value::Null)
            }
            None => err(404, Some("name"), format!("no agent {name:?} is registered")),
        }
    }

    /// `GET /agents`: the agents registered now.
    pub fn list(&self) -> Reply {
        let now = self.now();
        let all: Vec<Value> = self
            .live(now)
            .map(|(n, r)| {
                json!({"name": n, "hosts": r.hosts,
                       "age_ms": now.duration_since(r.seen).as_millis() as u64})
            })
            .collect();
        (200, Value::Array(all))
    }

    /// `POST /applied`: the step of `flow` for log entry `seq` is done. `admitted`: whether
    /// the flow is admitted now (a report for another flow is refused, 404).
    pub fn report(&mut self, body: &[u8], admitted: impl Fn(u64) -> bool, last: i64) -> Reply {
        let m = match object(body, "flow and seq") {
            Ok(m) => m,
            Err(r) => return r,
        };
        if let Err(r) = only(&m, &["flow", "seq"]) {
            return r;
        }
        let Some(flow) = m.get("flow").and_then(Value::as_u64) else {
            return err(400, Some("flow"), "flow: expected a flow id");
        };
        let seq = match m.get("seq").and_then(Value::as_i64) {
            Some(s) if (1..=last).contains(&s) => s,
            _ => {
                return err(400, Some("seq"), format!("seq: expected a log entry from 1 to {last}"))
            }
        };
        if !admitted(flow) {
            return err(404, Some("flow"), format!("no flow {flow}"));
        }
        let e = self.applied.entry(flow).or_insert(seq);
        *e = (*e).max(seq);
        self.generation += 1;
        (200, json!({"flow": flow, "seq": *e}))
    }

    /// A flow is no longer admitted: forget its reports.
    pub fn forget(&mut self, flow: u64) {
        self.applied.remove(&flow);
    }

    /// `GET /applied?flow=ID&seq=SEQ[&wait=MS]`: whether the step of `flow` for entry `seq` is
    /// done. `src`: the source host of the flow, if it is admitted.
    pub fn query(&self, query: &str, src: impl Fn(u64) -> Option<String>) -> Reply {
        let (mut flow, mut seq) = (None, None);
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match k {
                "flow" => match v.parse::<u64>() {
                    Ok(n) => flow = Some(n),
                    Err(_) => {
                        return err(400, Some("flow"), format!("flow: expected an id, got {v:?}"))
                    }
                },
                "seq" => match v.parse::<i64>() {
                    Ok(n) if n >= 0 => seq = Some(n),
                    _ => {
                        return err(
                            400,
                            Some("seq"),
                            format!("seq: expected a whole number, got {v:?}"),
                        )
                    }
                },
                "wait" => match v.parse::<u64>() {
                    Ok(n) if n <= crate::http::MAX_WAIT_MS => {}
                    _ => {
                        return err(
                            400,
                            Some("wait"),
                            format!(
                                "wait: expected 0 to {} ms, got {v:?}",
                                crate::http::MAX_WAIT_MS
                            ),
                        )
                    }
                },
                other => {
                    return err(
                        400,
                        Some(other),
                        format!("unknown parameter {other:?}; expected flow, seq, wait"),
                    )
                }
            }
        }
        let Some(flow) = flow else { return err(400, Some("flow"), "flow: missing") };
        let Some(seq) = seq else { return err(400, Some("seq"), "seq: missing") };
        let answer = |done: bool, why: &str, agent: Option<&String>| {
            (200, json!({"flow": flow, "seq": seq, "done": done, "why": why, "agent": agent}))
        };
        let Some(host) = src(flow) else { return answer(true, "removed", None) };
        let now = self.now();
        let agent = self.live(now).find(|(_, r)| r.hosts.contains(&host)).map(|(n, _)| n);
        if self.applied.get(&flow).is_some_and(|&s| s >= seq) {
            return answer(true, "applied", agent);
        }
        match agent {
            None => answer(true, "unserved", None),
            Some(a) => answer(false, "waiting", Some(a)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTS: [&str; 3] = ["h1", "h2", "h3"];

    fn src(flow: u64) -> Option<String> {
        match flow {
            1 => Some("h1".into()),
            2 => Some("h2".into()),
            _ => None,
        }
    }

    #[test]
    fn a_step_is_done_when_reported_unserved_or_removed_and_waits_otherwise() {
        let mut a = Agents::default();
        let q = |a: &Agents, s: &str| a.query(s, src).1;
        // nobody serves h1: nothing to wait for
        assert_eq!(q(&a, "flow=1&seq=5")["why"], "unserved");
        let r = a.register(br#"{"name": "A", "hosts": ["h1"]}"#, &HOSTS);
        assert_eq!(r.0, 200, "{r:?}");
        let g = a.generation();
        let w = q(&a, "flow=1&seq=5");
        assert_eq!(
            (w["done"].clone(), w["why"].clone(), w["agent"].clone()),
            (json!(false), json!("waiting"), json!("A"))
        );
        assert_eq!(a.report(br#"{"flow": 1, "seq": 4}"#, |f| src(f).is_some(), 9).0, 200);
        assert_eq!(q(&a, "flow=1&seq=5")["done"], false, "an older step is not this one");
        assert_eq!(a.report(br#"{"flow": 1, "seq": 5}"#, |f| src(f).is_some(), 9).0, 200);
        assert!(a.generation() > g);
        assert_eq!(q(&a, "flow=1&seq=5")["why"], "applied");
        assert_eq!(q(&a, "flow=1&seq=6")["done"], false);
        // a report never goes back
        assert_eq!(a.report(br#"{"flow": 1, "seq": 2}"#, |f| src(f).is_some(), 9).1["seq"], 5);
        // h2 is not A's; flow 3 is gone
        assert_eq!(q(&a, "flow=2&seq=5")["why"], "unserved");
        assert_eq!(q(&a, "flow=3&seq=5")["why"], "removed");
        a.forget(1);
        assert_eq!(q(&a, "flow=1&seq=5")["done"], false);
    }

    #[test]
    fn a_registration_lapses_unless_renewed() {
        let mut a = Agents::default();
        let lapse = AGENT_TTL + Duration::from_millis(1);
        assert_eq!(a.register(br#"{"name": "A", "hosts": ["h1"]}"#, &HOSTS).0, 200);
        assert_eq!(a.query("flow=1&seq=1", src).1["why"], "waiting");
        assert_eq!(a.list().1.as_array().map(Vec::len), Some(1));
        // a renewal wakes no waiting question; other hosts do
        let g = a.generation();
        assert_eq!(a.register(br#"{"name": "A", "hosts": ["h1"]}"#, &HOSTS).0, 200);
        assert_eq!(a.generation(), g);
        assert_eq!(a.register(br#"{"name": "A", "hosts": ["h1", "h2"]}"#, &HOSTS).0, 200);
        assert!(a.generation() > g);
        assert_eq!(a.register(br#"{"name": "A", "hosts": ["h1"]}"#, &HOSTS).0, 200);
        a.pass(lapse);
        assert_eq!(a.query("flow=1&seq=1", src).1["why"], "unserved");
        assert_eq!(a.list().1.as_array().map(Vec::len), Some(0));
        assert_eq!(a.register(br#"{"name": "A", "hosts": ["h1"]}"#, &HOSTS).0, 200);
        assert_eq!(a.query("flow=1&seq=1", src).1["why"], "waiting");
        // another agent may not take h1 while A holds it, and may once A lapsed
        let r = a.register(br#"{"name": "B", "hosts": ["h2", "h1"]}"#, &HOSTS);
        assert_eq!((r.0, r.1["field"].clone()), (409, json!("hosts[1]")), "{r:?}");
        assert_eq!(a.register(br#"{"name": "A", "hosts": ["h1", "h3"]}"#, &HOSTS).0, 200);
        a.pass(lapse);
        assert_eq!(a.register(br#"{"name": "B", "hosts": ["h2", "h1"]}"#, &HOSTS).0, 200);
        // B stops: its hosts are free at once
        assert_eq!(a.deregister("B").0, 204);
        assert_eq!(a.deregister("B").0, 404);
        assert_eq!(a.query("flow=1&seq=1", src).1["why"], "unserved");
        assert_eq!(a.register(br#"{"name": "A", "hosts": ["h1"]}"#, &HOSTS).0, 200);
    }

    #[test]
    fn bad_bodies_and_queries_name_the_field() {
        let mut a = Agents::default();
        let field = |r: Reply| (r.0, r.1["field"].as_str().unwrap_or("").to_owned());
        assert_eq!(field(a.register(b"[]", &HOSTS)), (400, String::new()));
        assert_eq!(field(a.register(br#"{"hosts": []}"#, &HOSTS)), (400, "name".into()));
        let r = a.register(br#"{"name": "A", "hosts": ["h1", "h9"]}"#, &HOSTS);
        assert_eq!(field(r), (400, "hosts[1]".into()));
        let r = a.register(br#"{"name": "A", "hosts": [], "x": 1}"#, &HOSTS);
        assert_eq!(field(r), (400, "x".into()));
        let ok = |_: u64| true;
        assert_eq!(field(a.report(br#"{"flow": 1}"#, ok, 3)), (400, "seq".into()));
        assert_eq!(field(a.report(br#"{"flow": 1, "seq": 4}"#, ok, 3)), (400, "seq".into()));
        assert_eq!(field(a.report(br#"{"flow": -1, "seq": 1}"#, ok, 3)), (400, "flow".into()));
        assert_eq!(
            field(a.report(br#"{"flow": 1, "seq": 1}"#, |_| false, 3)),
            (404, "flow".into())
        );
        assert_eq!(field(a.query("seq=1", src)), (400, "flow".into()));
        assert_eq!(field(a.query("flow=1", src)), (400, "seq".into()));
        assert_eq!(field(a.query("flow=1&seq=1&wait=70000", src)), (400, "wait".into()));
        assert_eq!(field(a.query("flow=1&seq=1&who=me", src)), (400, "who".into()));
    }

    #[test]
    fn a_lapsed_agent_is_not_there_to_deregister() {
        let mut a = Agents::default();
        assert_eq!(a.register(br#"{"name": "A", "hosts": ["h1"]}"#, &HOSTS).0, 200);
        a.pass(AGENT_TTL + Duration::from_millis(1));
        assert_eq!(a.list().1.as_array().map(Vec::len), Some(0));
        let r = a.deregister("A");
        assert_eq!((r.0, r.1["field"].clone()), (404, json!("name")), "{r:?}");
    }

    #[test]
    fn an_agent_s_name_is_one_a_path_carries_as_it_is() {
        let mut a = Agents::default();
        // the Rust agent's own: first host, the others' count, its process
        let ok = a.register(br#"{"name": "h0_0_0+3@4242", "hosts": ["h1"]}"#, &HOSTS);
        assert_eq!(ok.0, 200, "{ok:?}");
        assert_eq!(a.deregister("h0_0_0+3@4242").0, 204);
        for name in ["a b", "a/b", "a%20b", "a?b", "a#b", "é"] {
            let body = json!({"name": name, "hosts": ["h2"]}).to_string();
            let r = a.register(body.as_bytes(), &HOSTS);
            assert_eq!((r.0, r.1["field"].clone()), (400, json!("name")), "{name:?}: {r:?}");
        }
    }
}
