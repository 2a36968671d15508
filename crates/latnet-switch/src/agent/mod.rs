//! The Chameleon host agent: what the controller decided, programmed into hosts' kernels.
//!
//! One agent serves one or more hosts of an emulated testbed (each in its network namespace).
//! It polls the controller service (`latnet chameleon serve`, `latnet-ctld`) and keeps, for
//! every admitted flow whose source is one of its hosts:
//!
//! * a **tagger** entry ([`crate::tagger`]): the flow's packets (its `match`, to each address
//!   of its destination) get the flow's tag stack, the DSCP of the host's admitted class
//!   ([`ADMITTED_DSCP`]: priority 0, as the controller's host model has it) and, when shaping,
//!   the flow's HTB class;
//! * with `--shaper htb`, a **shaper**: an HTB class on the host's interface with the flow's
//!   token-bucket rate and burst as rate / ceiling and burst / cburst, counting the frame as
//!   sent (the outer tag, which travels as metadata, through HTB's `overhead`). Packets of no
//!   admitted flow go unshaped (HTB's direct queue).
//!
//! and, unless told not to, a **best-effort route** per other host (`GET /routes/SRC`: fewest
//! hops, the class below the admitted ones), so that every other packet (a ping, a TCP
//! handshake, iperf3's control connection) crosses the tag-routed network too.
//!
//! It learns of changes from `GET /log?after=SEQ` (by default a long poll, `&wait=500`: the
//! service answers as soon as an entry is committed; `--wait-ms 0` polls every `--poll-ms`
//! instead, as it does with a service that does not hold polls): an admission re-tags the flows it moved,
//! then starts tagging the new flow (by default one at a time, each once the flow moved before
//! it has had its old guarantee to drain its old path: [`Order::Sequential`], the states the
//! controller checked); a refusal that moved flows re-tags them; a removal stops
//! tagging (the flow's packets then follow the destination's best-effort route) and removes
//! its shaper once the packets queued in it were sent ([`RETIRE_MAX_NS`] at most). Each change
//! is read from `GET /flows/ID` and applied with one map update per destination address, so a packet sees the old stack or the new one; the status file's
//! `changes` record, with the log entry that caused it, the instants (`CLOCK_MONOTONIC`)
//! just before the first update (`t_start_ns`) and just after the last (`t_ns`): every packet
//! sent after `t_ns` gets the change. Shaper classes are made before a tagger names them and
//! removed after it no longer does. The agent's view starts from
//! `GET /flows` (what was admitted before it started), so it can start at any time.
//!
//! The controller is reached over the root namespace (a management network, out of band of
//! the emulated one); only the taggers' links and the shapers live in the hosts' namespaces.
//! Every log page names the service's store: when the service answers from another store (or
//! its log goes back), the agent undoes what it programmed and reads the state again.
//! Losing the controller keeps what was programmed; the agent counts failed polls and retries.
//! A service started with `--tokens` needs one: `--token-file` (a read token is enough for one
//! agent serving every host). A service speaking HTTPS (`latnet-ctld --tls-cert`) is
//! `--controller https://HOST:PORT` with `--ca-file` naming who signed its certificate, which
//! must name `HOST`; without TLS the token crosses the management network in the clear.
//! `--client-cert` / `--client-key` answer a service asking for a client certificate, and
//! `--crl-file` checks the service's certificate against the CA's revocation lists. The token
//! and TLS files are read again when they change (a renewed list, certificate or token), from
//! the next request on (`agent/files.rs`).
//!
//! Agents serving different hosts keep the sequential order between them through the service
//! (`latnet_ctld::agents`): each registers its hosts (`POST /agents`, renewed every second),
//! reports every step of its own once done (`POST /applied`), and before a step of its own whose
//! previous step is another agent's, waits (`GET /applied?...&wait=`, at most `--peer-wait-ms`)
//! until the service says that step is done, or that no agent serves its host. That needs an
//! `agent` (or `write`) token; with a read token, `--peer-wait-ms 0` or `--order together` the
//! order holds among the agent's own hosts only (`peers.off` in the status says why).
//! Stopping (SIGINT / SIGTERM, or `--duration`) detaches the taggers and removes the shapers.

use crate::replace::{replace_file, Replacer};
use crate::tagger::{Action, Counters, Match, Tagger};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration as StdDuration;

/// Every host's addresses, by name.
pub type AddressBook = BTreeMap<String, Vec<IpAddr>>;

/// DSCP of admitted flows at their source: priority 0 (`CS7`, latnet's priority mapping), the
/// host queue's guaranteed class.
pub const ADMITTED_DSCP: u8 = 56;
/// The HTB handle of the agent's root qdisc on a host interface (`1:`).
pub const HTB_MAJOR: u32 = 1;
/// Longest a removed flow's shaper class is kept for the packets queued in it (ns).
pub const RETIRE_MAX_NS: u64 = 2_000_000_000;
/// Most changes the status keeps (the oldest tenth goes when it is full; counted).
pub const MAX_CHANGES: usize = 100_000;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The controller could not be reached or answered something unusable.
    #[error("controller {url}: {msg}")]
    Controller {
        /// Its address.
        url: String,
        /// What happened.
        msg: String,
    },
    /// A kernel object could not be made or changed.
    #[error("{0}")]
    Kernel(String),
    /// The agent was given something it cannot use.
    #[error("{0}")]
    Config(String),
}

mod apply;
mod client;
mod files;
mod flows;
mod peers;
mod shaper;
#[cfg(test)]
mod tests;

pub use client::{parse_response, Controller};
pub use flows::{flow_entry, FlowEntry, FlowError};
use peers::Peers;
use shaper::Tc;
pub use shaper::{class_stats_of, parse_class_stats};

// ---------------------------------------------------------------------------- the agent

/// One host the agent serves.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// Its name (the controller's and the scenario's).
    pub name: String,
    /// Its namespace file (`/run/netns/NAME`); `None`: the agent's own.
    pub netns: Option<PathBuf>,
    /// Its interfaces.
    pub ifaces: Vec<String>,
}

/// In what order the agent applies a request's moves and its new flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// One moved flow at a time, each once the flow moved before it has drained its old path
    /// (its old guarantee), the new flow last: only states the controller checked.
    Sequential,
    /// Every move, then the new flow, as fast as the agent goes.
    Together,
}

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The controller service.
    pub controller: Controller,
    /// The hosts served.
    pub hosts: Vec<HostSpec>,
    /// Every host's addresses (destinations).
    pub addresses: AddressBook,
    /// Time between polls.
    pub poll: StdDuration,
    /// How long each poll may wait at the service for the next entry (`GET /log?wait=`, a
    /// long poll: the agent hears of a decision when it is committed); `None`: plain polls
    /// every `poll`. A service that does not know `wait` is polled plainly.
    pub wait: Option<StdDuration>,
    /// Shape admitted flows with HTB classes.
    pub shape: bool,
    /// The order of a request's moves and new flow.
    pub order: Order,
    /// Install best-effort routes.
    pub routes: bool,
    /// Shaper rates are divided by this (the testbed runs this many times slower).
    pub dilation: u64,
    /// Status file, rewritten after every change and once a second.
    pub status: Option<PathBuf>,
    /// Stop after this long (`None`: until SIGINT / SIGTERM).
    pub duration: Option<StdDuration>,
    /// In the sequential order, how long to wait for another agent's step before this one
    /// (registering with the service and reporting its own steps); `None`: keep the order
    /// only among this agent's hosts.
    pub peer_wait: Option<StdDuration>,
}

/// A flow as programmed at one host.
#[derive(Debug)]
struct Programmed {
    entry: FlowEntry,
    minor: Option<u32>,
    /// Counters of matches already removed (a flow whose match set changed).
    carried: Counters,
}

struct HostState {
    spec: HostSpec,
    tagger: Tagger,
    tcs: Vec<Tc>,
    flows: BTreeMap<u64, Programmed>,
    routes: BTreeMap<String, (Vec<Match>, Vec<u16>)>,
    /// Flows of this host that cannot be programmed, and why.
    refused: BTreeMap<u64, String>,
    /// Shaper classes of removed flows, kept until the packets queued in them are sent (or
    /// until the instant given): deleting a class drops its queue.
    retiring: Vec<(u32, u64)>,
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("host", &self.spec.name)
            .field("flows", &self.flows.len())
            .finish()
    }
}

/// The agent: its hosts' taggers and shapers, and what it has applied.
#[derive(Debug)]
pub struct Agent {
    cfg: AgentConfig,
    hosts: Vec<HostState>,
    last_seq: i64,
    /// The log's end when the agent read the controller's state (`GET /flows`).
    synced_seq: i64,
    /// The service's store (`GET /log`'s `store`) when it did.
    store: Option<String>,
    /// How often it read the state again because the service's log was another.
    resyncs: u64,
    catch_ups: u64,
    polls: u64,
    errors: u64,
    last_error: Option<String>,
    changes: Vec<Value>,
    /// Changes dropped from `changes` to bound it.
    changes_dropped: u64,
    started_ns: u64,
    /// The name it registers under (first host, number of hosts, process id).
    name: String,
    peers: Peers,
    /// Writes the status file (`cfg.status`): a thread, so that a decision is never applied
    /// late because the disk was slow to take the last status ([`crate::replace`]); `None`
    /// once it failed (said on stderr; the status is then written in the loop, each failure
    /// said as before).
    status_writer: Option<Replacer>,
}

fn kernel(what: &str) -> impl Fn(io::Error) -> AgentError + '_ {
    move |e| AgentError::Kernel(format!("{what}: {e}"))
}

impl Agent {
    /// Load a tagger per host, attach it to the host's interfaces and set up the shapers.
    pub fn start(cfg: AgentConfig) -> Result<Agent, AgentError> {
        if cfg.dilation == 0 {
            return Err(AgentError::Config("--dilation: expected a whole number >= 1".into()));
        }
        let known: Vec<String> = serde_json::from_value(cfg.controller.get_ok("/hosts")?)
            .map_err(|e| cfg.controller.fail(format!("GET /hosts: {e}")))?;
        let mut hosts = Vec::new();
        for spec in &cfg.hosts {
            if !known.contains(&spec.name) {
                return Err(AgentError::Config(format!(
                    "host {:?} is not a host of the controller at {} (it has {})",
                    spec.name,
                    cfg.controller.url(),
                    known.len()
                )));
            }
            let name: String = format!("lnag_{}", spec.name).chars().take(15).collect();
            let mut tagger =
                Tagger::load(&name).map_err(kernel(&format!("{}: tagger", spec.name)))?;
            let mut tcs = Vec::new();
            for i in &spec.ifaces {
                tagger
                    .attach_egress(spec.netns.as_deref(), i)
                    .map_err(kernel(&format!("{}: {i}", spec.name)))?;
                let tc = Tc::new(spec.netns.clone(), i);
                if cfg.shape {
                    tc.setup()?;
                }
                tcs.push(tc);
            }
            hosts.push(HostState {
                spec: spec.clone(),
                tagger,
                tcs,
                flows: BTreeMap::new(),
                routes: BTreeMap::new(),
                refused: BTreeMap::new(),
                retiring: Vec::new(),
            });
        }
        let status_writer = cfg
            .status
            .clone()
            .map(|p| Replacer::start(p, "status file"))
            .transpose()
            .map_err(|e| AgentError::Config(format!("the status file's writer: {e}")))?;
        Ok(Agent {
            status_writer,
            hosts,
            last_seq: 0,
            synced_seq: 0,
            store: None,
            resyncs: 0,
            catch_ups: 0,
            polls: 0,
            errors: 0,
            last_error: None,
            changes: Vec::new(),
            changes_dropped: 0,
            started_ns: crate::sys::mono_ns(),
            name: format!(
                "{}+{}@{}",
                cfg.hosts.first().map_or("", |h| h.name.as_str()),
                cfg.hosts.len().saturating_sub(1),
                std::process::id()
            ),
            peers: Peers {
                off: match (cfg.order, cfg.peer_wait) {
                    (Order::Together, _) => Some("--order together".into()),
                    (_, None) => Some("--peer-wait-ms 0".into()),
                    _ => None,
                },
                ..Peers::default()
            },
            cfg,
        })
    }

    /// Read what the controller holds now: routes, every admitted flow, the log's end.
    pub fn sync(&mut self) -> Result<(), AgentError> {
        let ctl = self.cfg.controller.clone();
        // the log's end first: anything logged after it is polled again (applying is idempotent)
        let health = ctl.get_ok("/health")?;
        self.last_seq = health["last"].as_i64().unwrap_or(0);
        self.store = health["store"].as_str().map(str::to_owned);
        self.synced_seq = self.last_seq;
        if self.cfg.routes {
            for h in 0..self.hosts.len() {
                let name = self.hosts[h].spec.name.clone();
                let r = ctl.get_ok(&format!("/routes/{name}"))?;
                self.set_routes(h, &r)?;
            }
        }
        let flows = ctl.get_ok("/flows")?;
        for f in flows.as_array().into_iter().flatten() {
            self.apply_flow(f, self.last_seq, "present")?;
        }
        self.peers.prev = None;
        self.register();
        // a registration of an agent that stopped without saying so lapses within seconds
        let until = crate::sys::mono_ns() + 4_000_000_000;
        while let Some(why) = self.peers.conflict.take() {
            if crate::sys::mono_ns() >= until {
                return Err(AgentError::Config(format!("{}: {why}", ctl.url())));
            }
            crate::sys::sleep_until(crate::sys::mono_ns() + 500_000_000);
            self.peers.next_register_ns = 0;
            self.register();
        }
        self.write_status();
        Ok(())
    }

    /// Poll the log once and apply what changed. Returns how many entries were read.
    pub fn poll(&mut self) -> Result<usize, AgentError> {
        self.polls += 1;
        let ctl = self.cfg.controller.clone();
        let mut path = format!("/log?after={}&limit=1000", self.last_seq);
        let mut wait = self.cfg.wait.unwrap_or_default();
        if let Some(end) = self.cfg.duration.map(|d| self.started_ns + d.as_nanos() as u64) {
            let left = end.saturating_sub(crate::sys::mono_ns());
            wait = wait.min(StdDuration::from_nanos(left));
        }
        if wait.as_millis() > 0 {
            path += &format!("&wait={}", wait.as_millis());
        }
        let page = match ctl.get_waiting(&path, wait)? {
            (200, page) => page,
            // a service that does not know `wait`: poll it plainly from now on
            (400, e) if e["field"] == "wait" && self.cfg.wait.is_some() => {
                eprintln!(
                    "latnet-switch agent: {} does not hold polls ({}): polling every {:?}",
                    ctl.url(),
                    e["error"],
                    self.cfg.poll
                );
                self.cfg.wait = None;
                return Ok(0);
            }
            // entries this agent had not read were folded into the service's snapshot
            (410, gone) if gone["store"].as_str() == self.store.as_deref() => {
                self.catch_up()?;
                return Ok(0);
            }
            (410, _) => {
                self.resync()?;
                return Ok(0);
            }
            (st, v) => return Err(ctl.fail(format!("GET {path}: {st} {v}"))),
        };
        // another store (a service started on another file), or its log went back: what was
        // programmed is not what it decided; undo it and read its state again
        let store = page["store"].as_str().map(str::to_owned);
        if store != self.store || page["last"].as_i64().is_some_and(|l| l < self.last_seq) {
            eprintln!(
                "latnet-switch agent: {} now has another log (store {:?}, was {:?}): reading its state again",
                ctl.url(),
                store,
                self.store
            );
            self.resync()?;
            return Ok(0);
        }
        let entries = page["entries"].as_array().cloned().unwrap_or_default();
        for e in &entries {
            let seq = e["seq"].as_i64().unwrap_or(self.last_seq);
            let ids = |k: &str| -> Vec<u64> {
                e[k].as_array().into_iter().flatten().filter_map(Value::as_u64).collect()
            };
            match (e["op"].as_str(), e["outcome"].as_str()) {
                (Some("request"), Some("admitted")) => {
                    // the moved flows first, then the new one (the controller checked the
                    // moves with the new flow absent)
                    self.steps(&ids("rerouted"), e["id"].as_u64(), seq)?;
                }
                (Some("request"), Some("refused")) => {
                    self.steps(&ids("moved"), None, seq)?;
                }
                (Some("remove"), _) => {
                    if let Some(id) = e["id"].as_u64() {
                        self.remove_flow(id, seq, "removed")?;
                    }
                }
                _ => {}
            }
            self.last_seq = seq.max(self.last_seq);
        }
        // a short page read everything logged when it was answered
        if entries.len() < 1000 {
            if let Some(last) = page["last"].as_i64() {
                self.last_seq = self.last_seq.max(last);
            }
        }
        if !entries.is_empty() {
            self.write_status();
        }
        Ok(entries.len())
    }

    /// Keep a change in the status (at most [`MAX_CHANGES`]).
    fn record(&mut self, change: Value) {
        if self.changes.len() >= MAX_CHANGES {
            let n = MAX_CHANGES / 10;
            self.changes.drain(..n);
            self.changes_dropped += n as u64;
        }
        self.changes.push(change);
    }

    /// The service folded log entries this agent had not read into its snapshot: program its
    /// flows as they are now and unprogram those it no longer has. Unlike [`Agent::resync`]
    /// nothing unchanged is touched; a flow moved meanwhile is re-tagged at once, not in the
    /// order the controller checked (which the folded entries held).
    fn catch_up(&mut self) -> Result<(), AgentError> {
        self.peers.prev = None;
        self.catch_ups += 1;
        let ctl = self.cfg.controller.clone();
        let health = ctl.get_ok("/health")?;
        if health["store"].as_str() != self.store.as_deref() {
            return self.resync();
        }
        let last = health["last"].as_i64().unwrap_or(self.last_seq);
        eprintln!(
            "latnet-switch agent: {} folded entries after {} into its snapshot: reading its flows",
            ctl.url(),
            self.last_seq
        );
        let flows = ctl.get_ok("/flows")?;
        let mut present = std::collections::BTreeSet::new();
        for f in flows.as_array().into_iter().flatten() {
            present.extend(f["id"].as_u64());
            self.apply_flow(f, last, "caught up")?;
        }
        let gone: Vec<u64> = self
            .hosts
            .iter()
            .flat_map(|st| st.flows.keys().chain(st.refused.keys()).copied())
            .filter(|id| !present.contains(id))
            .collect();
        for id in gone {
            self.remove_flow(id, last, "removed")?;
        }
        self.last_seq = self.last_seq.max(last);
        self.write_status();
        Ok(())
    }

    /// Undo every flow and route programmed, then read the service's state again.
    fn resync(&mut self) -> Result<(), AgentError> {
        self.resyncs += 1;
        let ids: Vec<u64> = self.hosts.iter().flat_map(|st| st.flows.keys().copied()).collect();
        for id in ids {
            self.remove_flow(id, self.last_seq, "resync")?;
        }
        for st in &mut self.hosts {
            for (matches, _) in st.routes.values() {
                for m in matches {
                    st.tagger.remove(m).map_err(kernel("tagger"))?;
                }
            }
            st.routes.clear();
            st.refused.clear();
        }
        self.sync()
    }

    /// Poll every `poll` until stopped; then detach and clean up.
    pub fn run(mut self) -> Result<(), AgentError> {
        let end = self.cfg.duration.map(|d| self.started_ns + d.as_nanos() as u64);
        let poll_ns = self.cfg.poll.as_nanos() as u64;
        let mut next_status = crate::sys::mono_ns() + 1_000_000_000;
        loop {
            if crate::sys::stop_requested() || end.is_some_and(|e| crate::sys::mono_ns() >= e) {
                break;
            }
            self.register();
            self.reap();
            match self.poll() {
                Ok(n) if n >= 1000 => continue, // more to read
                // the service held the poll until there was something or the wait ran out
                Ok(_) if self.cfg.wait.is_some() => {
                    let now = crate::sys::mono_ns();
                    if now >= next_status {
                        self.write_status();
                        next_status = now + 1_000_000_000;
                    }
                    continue;
                }
                Ok(_) => {}
                // a stop interrupted the poll: not the service's error
                Err(AgentError::Controller { .. }) if crate::sys::stop_requested() => break,
                Err(e @ AgentError::Controller { .. }) => {
                    self.errors += 1;
                    let msg = e.to_string();
                    if self.last_error.as_deref() != Some(&msg) {
                        eprintln!(
                            "latnet-switch agent: {msg} (keeping what is programmed, retrying)"
                        );
                    }
                    self.last_error = Some(msg);
                }
                Err(e) => {
                    self.final_status();
                    self.shutdown();
                    return Err(e);
                }
            }
            let now = crate::sys::mono_ns();
            if now >= next_status {
                self.write_status();
                next_status = now + 1_000_000_000;
            }
            let wake = now + poll_ns;
            crate::sys::sleep_until(end.map_or(wake, |e| e.min(wake)));
        }
        self.final_status();
        self.shutdown();
        Ok(())
    }

    fn shutdown(&mut self) {
        // other agents need not wait for this one's steps any more
        if self.peers.registered {
            let path = format!("/agents/{}", self.name);
            let _ = self.cfg.controller.call("DELETE", &path, None, StdDuration::ZERO);
            self.peers.registered = false;
        }
        for st in &self.hosts {
            if self.cfg.shape {
                for tc in &st.tcs {
                    tc.teardown();
                }
            }
        }
        // the taggers detach when their links are dropped, with the agent
    }

    /// The status document (also written to the status file).
    pub fn status(&self) -> Value {
        let hosts: serde_json::Map<String, Value> = self
            .hosts
            .iter()
            .map(|st| {
                let stats = if self.cfg.shape {
                    st.tcs.first().map(Tc::class_stats).unwrap_or_default()
                } else {
                    BTreeMap::new()
                };
                let flows: serde_json::Map<String, Value> = st
                    .flows
                    .iter()
                    .map(|(id, p)| {
                        let mut c = p.carried;
                        for m in &p.entry.matches {
                            if let Ok(Some(x)) = st.tagger.counters(m) {
                                c = c + x;
                            }
                        }
                        let e = &p.entry;
                        let v = json!({
                            "dst": e.dst, "tags": e.tags, "path": e.path,
                            "matches": e.matches.iter().map(|m| json!({"dst": m.dst.to_string(),
                                "proto": m.proto, "src_port": m.src_port, "dst_port": m.dst_port})).collect::<Vec<_>>(),
                            "shaper": {"rate_bps": e.shaper.0, "burst_bytes": e.shaper.1,
                                       "class": p.minor.map(|m| format!("{HTB_MAJOR}:{m:x}")),
                                       "stats": p.minor.and_then(|m| stats.get(&m).cloned())},
                            "tagged": c,
                        });
                        (id.to_string(), v)
                    })
                    .collect();
                let v = json!({
                    "ifaces": st.spec.ifaces, "attached": st.tagger.attached(),
                    "shaper_via": if self.cfg.shape { st.tcs.first().map(Tc::way) } else { None },
                    "routes": st.routes.iter().map(|(d, (_, t))| (d.clone(), json!(t))).collect::<serde_json::Map<_, _>>(),
                    "flows": flows,
                    "refused": st.refused.iter().map(|(id, why)| (id.to_string(), json!(why))).collect::<serde_json::Map<_, _>>(),
                    "retiring_classes": st.retiring.iter().map(|(m, _)| format!("{HTB_MAJOR}:{m:x}")).collect::<Vec<_>>(),
                });
                (st.spec.name.clone(), v)
            })
            .collect();
        json!({
            "controller": self.cfg.controller.url(),
            "started_ns": self.started_ns,
            "polls": self.polls,
            "wait_ms": self.cfg.wait.map(|w| w.as_millis() as u64),
            "controller_errors": self.errors,
            "last_error": self.last_error,
            "last_seq": self.last_seq,
            "synced_seq": self.synced_seq,
            "store": self.store,
            "resyncs": self.resyncs,
            "catch_ups": self.catch_ups,
            "shaper": if self.cfg.shape { "htb" } else { "none" },
            "order": match self.cfg.order { Order::Sequential => "sequential", Order::Together => "together" },
            "peers": {"name": self.name, "registered": self.peers.registered, "off": self.peers.off,
                      "asked": self.peers.asked, "waited_ns": self.peers.waited_ns,
                      "timeouts": self.peers.timeouts, "reports": self.peers.reports,
                      "report_errors": self.peers.report_errors},
            "dilation": self.cfg.dilation,
            "hosts": hosts,
            "changes": self.changes,
            "changes_dropped": self.changes_dropped,
        })
    }

    fn write_status(&mut self) {
        let Some(path) = &self.cfg.status else { return };
        let text = serde_json::to_string_pretty(&self.status()).unwrap_or_default() + "\n";
        let sent = match &mut self.status_writer {
            Some(w) => w.send(text),
            None => replace_file(path, &text, "status file"),
        };
        if let Err(e) = sent {
            self.status_writer = None;
            eprintln!("latnet-switch agent: {e}");
        }
    }

    /// The last status, written before the agent returns (after everything handed over).
    fn final_status(&mut self) {
        if let Some(Err(e)) = self.status_writer.take().map(Replacer::finish) {
            eprintln!("latnet-switch agent: {e}");
        }
        self.write_status();
    }
}

/// Record that flow `id` cannot be programmed at host `st` (said once on stderr).
fn refuse(st: &mut HostState, host: &str, id: u64, why: &str) {
    if st.refused.insert(id, why.to_owned()).is_none() {
        eprintln!("latnet-switch agent: {host}: flow {id}: {why}");
    }
}

/// Hosts and addresses of a testbed plan: `hosts` (with their namespace files, `None` for the
/// agent's own) served, every host's IPv4 and IPv6 address as destinations.
pub fn from_plan(
    plan: &crate::plan::Plan,
    hosts: &[(String, Option<PathBuf>)],
) -> Result<(Vec<HostSpec>, AddressBook), AgentError> {
    let mut addresses = BTreeMap::new();
    for n in plan.nodes.iter().filter(|n| n.kind == "host") {
        let mut a = Vec::new();
        for s in [&n.address, &n.address6] {
            if let Ok(ip) = s.parse::<IpAddr>() {
                a.push(ip);
            }
        }
        addresses.insert(n.name.clone(), a);
    }
    let specs = hosts
        .iter()
        .map(|(name, netns)| {
            let n = plan.nodes.iter().find(|n| &n.name == name && n.kind == "host").ok_or_else(
                || AgentError::Config(format!("--host {name:?}: not a host of {}", plan.scenario)),
            )?;
            Ok(HostSpec {
                name: name.clone(),
                netns: netns.clone(),
                ifaces: n.ifaces.iter().map(|i| i.name.clone()).collect(),
            })
        })
        .collect::<Result<Vec<_>, AgentError>>()?;
    Ok((specs, addresses))
}

/// `Path` helper for the CLI: a namespace given by name lives in `/run/netns`.
pub fn netns_path(v: &str) -> PathBuf {
    if v.contains('/') {
        PathBuf::from(v)
    } else {
        Path::new("/run/netns").join(v)
    }
}
