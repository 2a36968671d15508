//! The Chameleon controller (paper §3, §4.1): admission, reservation and release of flows on
//! the queue-level graph, rerouting, and for each admitted flow its path, queues, tag stack
//! and shaping parameters. Silo is the same machinery with one queue per port and shortest-path
//! routing ([`CtlConfig::silo`]).
//!
//! The controller is sans-IO and reads no clock: a request goes in, a decision comes out.
//!
//! Units of a request: the token bucket `(rate, burst)` counts bytes as the source host's
//! shaper does, i.e. whole frames on the wire including the tag stack; the deadline is end to
//! end, and a flow is admitted only on a path with `Σ (D_q + per_hop) ≤ deadline`.

use crate::config::{CtlConfig, QueueSet};
use crate::route::{self, Graph, HopCheck, PathHop, Query, Scratch};
use crate::state::{PortState, QueueSnapshot, Shaping, LOCAL};
use crate::topo::{NodeId, PortId, Topology};
use latnet_nc::{nanobits, Bounds, NcError, QueueLimits, RateLatency, TokenBucket};
use latnet_units::{Bytes, Duration, Rate};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Flow identifier (assigned in admission order, never reused).
pub type FlowId = u64;

/// A request for a flow with a latency guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRequest {
    /// Source host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Token-bucket rate.
    pub rate: Rate,
    /// Token-bucket burst.
    pub burst: Bytes,
    /// End-to-end deadline.
    pub deadline: Duration,
}

/// One hop of an admitted flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// Egress port.
    pub port: PortId,
    /// Queue at that port (0 = highest priority).
    pub queue: u8,
    /// The queue's delay budget.
    pub budget: Duration,
    /// The port the flow arrives through (`None` at the source host).
    pub input: Option<PortId>,
    /// The flow's token bucket at this hop (burst increased per the burst model).
    pub bucket: TokenBucket,
}

/// An admitted flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embedding {
    /// Its id.
    pub id: FlowId,
    /// What was asked.
    pub request: FlowRequest,
    /// The hops, from the source host's port.
    pub hops: Vec<Hop>,
    /// The guaranteed end-to-end delay `Σ (D + per_hop)` (at most the deadline).
    pub guarantee: Duration,
}

/// Token-bucket parameters the source host enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shaper {
    /// Rate.
    pub rate: Rate,
    /// Bucket depth.
    pub burst: Bytes,
}

impl Embedding {
    /// Nodes visited, source host first.
    pub fn path(&self, topo: &Topology) -> Vec<NodeId> {
        let mut v = vec![self.request.src];
        v.extend(self.hops.iter().map(|h| topo.port(h.port).peer));
        v
    }

    /// The source host's shaper.
    pub fn shaper(&self) -> Shaper {
        Shaper { rate: self.request.rate, burst: self.request.burst }
    }
}

/// Why a request was not admitted. The first group are invalid requests (nothing was tried);
/// the rest are admission decisions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// Rate zero (or negative at an API edge).
    #[error("invalid request: the rate must be above zero")]
    InvalidRate,
    /// Burst zero.
    #[error("invalid request: the burst must be above zero")]
    InvalidBurst,
    /// Deadline zero.
    #[error("invalid request: the deadline must be above zero")]
    InvalidDeadline,
    /// A node that does not exist.
    #[error("invalid request: unknown host {0}")]
    UnknownHost(String),
    /// A node that is a switch.
    #[error("invalid request: {0} is a switch; flows start and end at hosts")]
    NotAHost(String),
    /// Source and destination are the same.
    #[error("invalid request: source and destination are the same host")]
    SameHost,
    /// No physical path.
    #[error("invalid request: no path from {0} to {1}")]
    Unreachable(String, String),
    /// Every path crosses more switches than a packet can carry tags for.
    #[error(
        "invalid request: every path from {src} to {dst} crosses more switches than max_tags \
         ({max}), one tag each: the fewest is {fewest}"
    )]
    BeyondMaxTags {
        /// Source host.
        src: String,
        /// Destination host.
        dst: String,
        /// The fewest switches a path between them crosses.
        fewest: u32,
        /// The configured `max_tags`.
        max: usize,
    },
    /// The deadline is below the smallest delay any path can guarantee.
    #[error(
        "invalid request: deadline {deadline} is below the minimum {minimum} any path offers \
         (sum of the smallest queue budgets and per-hop constants)"
    )]
    DeadlineBelowMinimum {
        /// Asked.
        deadline: Duration,
        /// The least any path can promise.
        minimum: Duration,
    },
    /// No path found on which every queue stays within budget and buffer.
    #[error("rejected: no path meets the deadline with every queue within its budget and buffer")]
    NoPath,
    /// QJump admits at most `n` flows.
    #[error("rejected: QJump already admitted its {0} flows")]
    QjumpFull(usize),
    /// QJump's per-flow rate limit.
    #[error("rejected: rate above QJump's limit {0}")]
    QjumpRate(Rate),
    /// QJump's per-flow burst limit.
    #[error("rejected: burst above QJump's packet size {0}")]
    QjumpBurst(Bytes),
    /// QJump's guaranteed latency is above the deadline.
    #[error("rejected: deadline below QJump's epoch {0}")]
    QjumpDeadline(Duration),
    /// Arithmetic out of range (absurd parameters).
    #[error("rejected: {0}")]
    Arithmetic(NcError),
}

impl Rejection {
    /// True for requests that are invalid rather than refused.
    pub fn is_invalid(&self) -> bool {
        matches!(
            self,
            Rejection::InvalidRate
                | Rejection::InvalidBurst
                | Rejection::InvalidDeadline
                | Rejection::UnknownHost(_)
                | Rejection::NotAHost(_)
                | Rejection::SameHost
                | Rejection::Unreachable(..)
                | Rejection::BeyondMaxTags { .. }
                | Rejection::DeadlineBelowMinimum { .. }
        )
    }

    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::InvalidRate => "invalid-rate",
            Rejection::InvalidBurst => "invalid-burst",
            Rejection::InvalidDeadline => "invalid-deadline",
            Rejection::UnknownHost(_) => "unknown-host",
            Rejection::NotAHost(_) => "not-a-host",
            Rejection::SameHost => "same-host",
            Rejection::Unreachable(..) => "unreachable",
            Rejection::BeyondMaxTags { .. } => "beyond-max-tags",
            Rejection::DeadlineBelowMinimum { .. } => "deadline-below-minimum",
            Rejection::NoPath => "no-path",
            Rejection::QjumpFull(_) => "qjump-full",
            Rejection::QjumpRate(_) => "qjump-rate",
            Rejection::QjumpBurst(_) => "qjump-burst",
            Rejection::QjumpDeadline(_) => "qjump-deadline",
            Rejection::Arithmetic(_) => "arithmetic",
        }
    }
}

impl From<NcError> for Rejection {
    fn from(e: NcError) -> Self {
        Rejection::Arithmetic(e)
    }
}

/// The outcome of an admitted request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The new flow.
    pub id: FlowId,
    /// Flows moved to another path to make room (each must be re-tagged at its source).
    pub rerouted: Vec<FlowId>,
}

/// Counters of a controller's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Admitted requests.
    pub admitted: u64,
    /// Refused requests (admission decisions, not invalid ones).
    pub rejected: u64,
    /// Invalid requests.
    pub invalid: u64,
    /// Successful reroutes of admitted flows.
    pub reroutes: u64,
    /// Requests admitted only thanks to rerouting.
    pub admitted_after_reroute: u64,
    /// Access checks run.
    pub checks: u64,
}

/// A controller's state without its history: the admitted flows (request and path: the port
/// and queue of each hop), the next flow id, the counters and the flows ever rerouted. A
/// controller restored from it ([`Controller::restore`]) decides every later request exactly as
/// the one it was taken from ([`Controller::checkpoint`]): reservations are integer sums, so
/// reserving the flows again, in any order, gives the same queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Admitted flows by id: the request and the path (port and queue per hop).
    pub flows: Vec<(FlowId, FlowRequest, Vec<PathHop>)>,
    /// The id the next admitted flow gets.
    pub next_id: FlowId,
    /// Counters.
    pub stats: Stats,
    /// Flows rerouted at least once (those still admitted and those removed since).
    pub rerouted: Vec<FlowId>,
}

/// A controller: topology, configuration, reservations, admitted flows.
#[derive(Debug, Clone)]
pub struct Controller {
    topo: Arc<Topology>,
    cfg: CtlConfig,
    ports: Vec<PortState>,
    flows: BTreeMap<FlowId, Embedding>,
    port_flows: Vec<BTreeSet<FlowId>>,
    next_id: FlowId,
    scratch: Scratch,
    stats: Stats,
    rerouted_ever: BTreeSet<FlowId>,
    moved_by_last: Vec<FlowId>,
}

/// Largest number of tags the wire format allows (`latnet_wire::MAX_TAGS`).
pub(crate) const WIRE_MAX_TAGS: usize = 16;

impl Controller {
    /// A controller with nothing reserved. Fails if the configuration is invalid, if its tag
    /// scheme cannot encode every switch port and queue of the topology, or if its per-hop
    /// constant and budgets are so large that their sum along a path could exceed `u64` ns.
    pub fn new(topo: Arc<Topology>, cfg: CtlConfig) -> Result<Controller, String> {
        cfg.validate()?;
        if cfg.max_tags == 0 || cfg.max_tags > WIRE_MAX_TAGS {
            return Err(format!("max_tags must be 1 to {WIRE_MAX_TAGS}, got {}", cfg.max_tags));
        }
        // Delays are summed in u64 ns along paths (at most one hop per node): refuse a per-hop
        // constant or budget so large that a sum could wrap, which would promise a guarantee
        // far below the real one (or panic in a debug build).
        let largest = cfg.switch.budgets.iter().chain(&cfg.host.budgets).copied().max();
        let hop = largest.unwrap_or(Duration::ZERO).as_nanos().checked_add(cfg.per_hop.as_nanos());
        let nodes = u64::try_from(topo.nodes().len()).unwrap_or(u64::MAX);
        if hop.and_then(|h| h.checked_mul(nodes)).is_none() {
            return Err(format!(
                "per_hop {} plus the largest queue budget {}, summed over a path of up to {nodes} \
                 hops, exceeds 2^64 ns: use smaller values",
                cfg.per_hop,
                largest.unwrap_or(Duration::ZERO)
            ));
        }
        let shaping = Shaping { enabled: cfg.shaping, l_max_nb: nanobits(cfg.l_max) };
        let mut ports = Vec::with_capacity(topo.ports().len());
        for p in topo.ports() {
            let set = if topo.is_host(p.node) { &cfg.host } else { &cfg.switch };
            if !topo.is_host(p.node) {
                let last = u8::try_from(set.len() - 1).unwrap_or(u8::MAX);
                if cfg.tags.tag(p.local, last).is_none() {
                    return Err(format!(
                        "tag scheme {} x port + queue cannot encode port {} of {:?} (VIDs stop \
                         at 4095): use a smaller tag base",
                        cfg.tags.base,
                        p.local,
                        topo.nodes()[p.node].name
                    ));
                }
            }
            let base = RateLatency::link(p.rate, cfg.l_max, 2);
            let limits = set
                .budgets
                .iter()
                .map(|&budget| QueueLimits { budget, buffer: set.buffer })
                .collect();
            ports.push(PortState::new(base, limits, shaping));
        }
        let nports = topo.ports().len();
        Ok(Controller {
            topo,
            cfg,
            ports,
            flows: BTreeMap::new(),
            port_flows: vec![BTreeSet::new(); nports],
            next_id: 0,
            scratch: Scratch::default(),
            stats: Stats::default(),
            rerouted_ever: BTreeSet::new(),
            moved_by_last: Vec::new(),
        })
    }

    /// The topology.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }
    /// The configuration.
    pub fn config(&self) -> &CtlConfig {
        &self.cfg
    }
    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// Number of admitted flows.
    pub fn len(&self) -> usize {
        self.flows.len()
    }
    /// True if no flow is admitted.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }
    /// Admitted flows in id order.
    pub fn flows(&self) -> impl Iterator<Item = &Embedding> {
        self.flows.values()
    }
    /// One admitted flow.
    pub fn flow(&self, id: FlowId) -> Option<&Embedding> {
        self.flows.get(&id)
    }
    /// Distinct flows that were rerouted at least once.
    pub fn rerouted_flows(&self) -> usize {
        self.rerouted_ever.len()
    }
    /// Ids of the flows that were rerouted at least once, ascending.
    pub fn rerouted_ids(&self) -> impl Iterator<Item = FlowId> + '_ {
        self.rerouted_ever.iter().copied()
    }
    /// Reservation state of a port.
    pub fn port_state(&self, p: PortId) -> &PortState {
        &self.ports[p]
    }
    /// The current delay and backlog bounds of queue `q` at port `p`.
    pub fn bounds(&self, p: PortId, q: usize) -> Option<Bounds> {
        self.ports.get(p)?.bounds(q).ok().flatten()
    }
    /// Reserved rate of every port, in port order (bit/s).
    pub fn reserved_rates(&self) -> Vec<u128> {
        self.ports.iter().map(PortState::reserved_rate).collect()
    }
    /// Every queue's aggregates (for exact state comparisons).
    pub fn snapshot(&self) -> Vec<Vec<QueueSnapshot>> {
        self.ports.iter().map(PortState::snapshot).collect()
    }

    fn queues_of(&self, p: PortId) -> &QueueSet {
        if self.topo.is_host(self.topo.port(p).node) {
            &self.cfg.host
        } else {
            &self.cfg.switch
        }
    }

    /// The tag stack of a flow (outermost first): one tag per switch on the path.
    pub fn tags(&self, e: &Embedding) -> Vec<u16> {
        e.hops
            .iter()
            .filter(|h| !self.topo.is_host(self.topo.port(h.port).node))
            .filter_map(|h| self.cfg.tags.tag(self.topo.port(h.port).local, h.queue))
            .collect()
    }

    /// The class below every admitted one that best-effort traffic uses at the switches: one
    /// more than the configured queues, if the ports' strict-priority schedulers have room for
    /// it (at most 8 classes) and the tag scheme can encode it. Unreserved: nothing is admitted
    /// into it, so it only gets what the admitted classes leave.
    pub fn best_effort_queue(&self) -> Option<u8> {
        let q = u8::try_from(self.cfg.switch.len()).ok()?;
        (q < 8 && u16::from(q) < self.cfg.tags.base).then_some(q)
    }

    /// The best-effort route from host `src` to host `dst`: the switches of a fewest-hops path
    /// and its tag stack (outermost first) in [`Controller::best_effort_queue`]; `None` if
    /// there is no such class or `dst` cannot be reached.
    pub fn best_effort_route(&self, src: NodeId, dst: NodeId) -> Option<(Vec<PortId>, Vec<u16>)> {
        let q = self.best_effort_queue()?;
        let path = self.topo.shortest_path(src, dst)?;
        let tags = path
            .iter()
            .filter(|&&p| !self.topo.is_host(self.topo.port(p).node))
            .map(|&p| self.cfg.tags.tag(self.topo.port(p).local, q))
            .collect::<Option<Vec<u16>>>()?;
        Some((path, tags))
    }

    /// The smallest end-to-end delay any path from `src` to `dst` can promise, or `None` if
    /// `dst` is unreachable.
    pub fn min_delay(&mut self, src: NodeId, dst: NodeId) -> Option<Duration> {
        self.fewest_switches(src, dst).map(|(d, _)| d)
    }

    /// The fewest switches a path from `src` to `dst` crosses, and with it the least delay any
    /// path can guarantee (each switch adds its smallest budget and the per-hop constant);
    /// `None` if no path joins them.
    fn fewest_switches(&mut self, src: NodeId, dst: NodeId) -> Option<(Duration, u32)> {
        let per_hop = self.cfg.per_hop.as_nanos();
        let sw = self.cfg.switch.min_budget().as_nanos() + per_hop;
        let host = self.cfg.host.min_budget().as_nanos() + per_hop;
        let hops = self.scratch.hops_to(&self.topo, dst).to_vec();
        let fewest = self
            .topo
            .node_ports(src)
            .iter()
            .filter_map(|&p| {
                let peer = self.topo.port(p).peer;
                if peer == dst {
                    Some(0)
                } else if self.topo.is_host(peer) || hops[peer] == u32::MAX {
                    None
                } else {
                    Some(hops[peer])
                }
            })
            .min()?;
        Some((Duration::from_nanos(host + u64::from(fewest) * sw), fewest))
    }

    /// Validate a request without admitting it.
    pub fn validate(&mut self, r: &FlowRequest) -> Result<(), Rejection> {
        let name = |n: NodeId| -> Result<String, Rejection> {
            self.topo
                .nodes()
                .get(n)
                .map(|x| x.name.clone())
                .ok_or_else(|| Rejection::UnknownHost(format!("#{n}")))
        };
        let (s, d) = (name(r.src)?, name(r.dst)?);
        for (n, nm) in [(r.src, &s), (r.dst, &d)] {
            if !self.topo.is_host(n) {
                return Err(Rejection::NotAHost(nm.clone()));
            }
        }
        if r.src == r.dst {
            return Err(Rejection::SameHost);
        }
        if r.rate.is_zero() {
            return Err(Rejection::InvalidRate);
        }
        if r.burst.is_zero() {
            return Err(Rejection::InvalidBurst);
        }
        if r.deadline.is_zero() {
            return Err(Rejection::InvalidDeadline);
        }
        let Some((minimum, fewest)) = self.fewest_switches(r.src, r.dst) else {
            return Err(Rejection::Unreachable(s, d));
        };
        let max = self.cfg.max_tags;
        if fewest as usize > max {
            return Err(Rejection::BeyondMaxTags { src: s, dst: d, fewest, max });
        }
        if r.deadline < minimum {
            return Err(Rejection::DeadlineBelowMinimum { deadline: r.deadline, minimum });
        }
        Ok(())
    }

    /// Flows the last [`Controller::request`] moved to another path, in the order it moved
    /// them: an admission's `rerouted`, and also the moves of a request refused in the end
    /// (rerouting is make-before-break per candidate, and a candidate moved stays moved).
    pub fn moved_by_last_request(&self) -> &[FlowId] {
        &self.moved_by_last
    }

    /// Admit a flow if a path exists (rerouting others if configured), reserving it.
    pub fn request(&mut self, r: FlowRequest) -> Result<Admission, Rejection> {
        self.moved_by_last.clear();
        if let Err(e) = self.validate(&r) {
            self.stats.invalid += 1;
            return Err(e);
        }
        let out = self.admit(r);
        match &out {
            Ok(a) => {
                self.stats.admitted += 1;
                if !a.rerouted.is_empty() {
                    self.stats.admitted_after_reroute += 1;
                }
            }
            Err(_) => self.stats.rejected += 1,
        }
        out
    }

    fn admit(&mut self, r: FlowRequest) -> Result<Admission, Rejection> {
        if let Some(hops) = self.route(&r, 1)? {
            let id = self.next_id;
            self.next_id += 1;
            self.reserve(id, r, &hops)?;
            return Ok(Admission { id, rerouted: Vec::new() });
        }
        let Some(rc) = self.cfg.reroute else { return Err(Rejection::NoPath) };
        // Fig. 6: candidates on the new flow's equal-length shortest paths, most shared first.
        let sp = self.topo.shortest_path_ports(r.src, r.dst);
        let sp_set: BTreeSet<PortId> = sp.iter().copied().collect();
        let mut score: BTreeMap<FlowId, usize> = BTreeMap::new();
        for &p in &sp {
            for &f in &self.port_flows[p] {
                *score.entry(f).or_default() += 1;
            }
        }
        let mut cands: Vec<(usize, FlowId)> = score.into_iter().map(|(f, s)| (s, f)).collect();
        cands.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        cands.truncate(rc.limit);
        let mut rerouted = Vec::new();
        for (_, f) in cands {
            let Some(old) = self.flows.get(&f).cloned() else { continue };
            self.scratch.clear_penalties(self.topo.ports().len());
            for h in &old.hops {
                if !self.topo.touches_host(h.port) {
                    self.scratch.penalise(h.port);
                }
            }
            for &p in &sp_set {
                self.scratch.penalise(p);
            }
            // make-before-break: the old reservation is still held while the new path is sought
            // (counted twice where old and new paths share a queue, as the paper's controller
            // does; this is also what forces the candidate off its old queues)
            let found = self.route(&old.request, rc.multiplier)?;
            self.scratch.clear_penalties(self.topo.ports().len());
            let Some(hops) = found else { continue };
            let same = hops.len() == old.hops.len()
                && hops.iter().zip(&old.hops).all(|(a, b)| a.port == b.port && a.queue == b.queue);
            if same {
                continue;
            }
            self.release(f)?;
            self.reserve(f, old.request, &hops)?;
            self.stats.reroutes += 1;
            self.rerouted_ever.insert(f);
            rerouted.push(f);
            self.moved_by_last.push(f);
            if let Some(hops) = self.route(&r, 1)? {
                let id = self.next_id;
                self.next_id += 1;
                self.reserve(id, r, &hops)?;
                return Ok(Admission { id, rerouted });
            }
        }
        Err(Rejection::NoPath)
    }

    /// Remove an admitted flow, releasing its reservations; returns its embedding.
    pub fn remove(&mut self, id: FlowId) -> Option<Embedding> {
        self.release(id).ok()
    }

    /// The state to rebuild this controller from without its history.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            flows: self
                .flows
                .values()
                .map(|e| {
                    let path =
                        e.hops.iter().map(|h| PathHop { port: h.port, queue: h.queue }).collect();
                    (e.id, e.request, path)
                })
                .collect(),
            next_id: self.next_id,
            stats: self.stats,
            rerouted: self.rerouted_ever.iter().copied().collect(),
        }
    }

    /// Bring a controller with nothing admitted to the state `cp` was taken in. Refused (and
    /// the controller left empty) if it has admitted flows, or if `cp` does not describe a state
    /// this controller could have reached: a request it would find invalid, an id twice or not
    /// below `next_id`, a path that is not one from the source to the destination over this
    /// topology (each node at most once, forwarding only at switches), a queue the port lacks,
    /// more switches than tags, a guarantee above the deadline, or reservations some queue
    /// cannot hold within its budget and buffer.
    pub fn restore(&mut self, cp: &Checkpoint) -> Result<(), String> {
        if !self.flows.is_empty() || self.next_id != 0 {
            return Err("the controller has admitted flows already".into());
        }
        let out = self.restore_flows(cp);
        if out.is_err() {
            for id in self.flows.keys().copied().collect::<Vec<_>>() {
                let _ = self.release(id);
            }
            self.stats = Stats::default();
            self.rerouted_ever.clear();
            self.next_id = 0;
        }
        out
    }

    fn restore_flows(&mut self, cp: &Checkpoint) -> Result<(), String> {
        for (id, r, path) in &cp.flows {
            let at = |m: String| format!("flow {id}: {m}");
            if *id >= cp.next_id || self.flows.contains_key(id) {
                return Err(at(format!("an id twice or not below next_id {}", cp.next_id)));
            }
            self.validate(r).map_err(|e| at(e.to_string()))?;
            let topo = self.topo.clone();
            let mut node = r.src;
            let mut switches = 0;
            let mut seen = BTreeSet::new();
            for h in path {
                let Some(port) = topo.ports().get(h.port) else {
                    return Err(at(format!("no port {}", h.port)));
                };
                if port.node != node {
                    return Err(at(format!("port {} does not leave the path's node", h.port)));
                }
                // a path the search can return visits each node once and forwards only through
                // switches (a host forwards nothing: a flow routed through one is lost there)
                if !seen.insert(node) {
                    let name = &topo.nodes()[node].name;
                    return Err(at(format!("the path visits {name} twice")));
                }
                if node != r.src && topo.is_host(node) {
                    let name = &topo.nodes()[node].name;
                    return Err(at(format!("the path goes through host {name}")));
                }
                if usize::from(h.queue) >= self.queues_of(h.port).budgets.len() {
                    return Err(at(format!("port {} has no queue {}", h.port, h.queue)));
                }
                switches += usize::from(!topo.is_host(node));
                node = port.peer;
            }
            if path.is_empty() || node != r.dst {
                return Err(at("the path does not lead from its source to its destination".into()));
            }
            if switches > self.cfg.max_tags {
                return Err(at(format!("{switches} switches, at most {} tags", self.cfg.max_tags)));
            }
            self.reserve(*id, *r, path).map_err(|e| at(e.to_string()))?;
            let e = &self.flows[id];
            if e.guarantee > r.deadline {
                return Err(at(format!("guarantee {} above the deadline", e.guarantee)));
            }
        }
        for (p, port) in self.ports.iter().enumerate() {
            if !port.holds().map_err(|e| format!("port {p}: {e}"))? {
                return Err(format!(
                    "port {p}: the reservations exceed a queue's budget or buffer"
                ));
            }
        }
        self.next_id = cp.next_id;
        self.stats = cp.stats;
        self.rerouted_ever = cp.rerouted.iter().copied().collect();
        Ok(())
    }

    /// The path search with the current penalties (multiplier `penalty`, 1 = none).
    fn route(&mut self, r: &FlowRequest, penalty: u64) -> Result<Option<Vec<PathHop>>, Rejection> {
        let Controller { topo, cfg, ports, scratch, stats, .. } = self;
        let g =
            Graph { topo, switch: &cfg.switch, host: &cfg.host, per_hop: cfg.per_hop.as_nanos() };
        let deadline = r.deadline.as_nanos();
        let q = Query { src: r.src, dst: r.dst, deadline, prune: true, max_switches: None };
        let tb = TokenBucket::new(r.rate, r.burst);
        let model = cfg.burst;
        let mut err = None;
        let mut admit = |h: HopCheck| -> bool {
            stats.checks += 1;
            let res = model
                .at_hop(tb, Duration::from_nanos(h.budgets_before), r.deadline)
                .and_then(|b| {
                    let (key, rate) = match h.input {
                        Some(i) => (i as u32, u128::from(topo.port(i).rate.bps())),
                        None => (LOCAL, 0),
                    };
                    ports[h.port].admits(usize::from(h.queue), key, rate, b)
                });
            match res {
                Ok(ok) => ok,
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        };
        let max_tags = cfg.max_tags;
        let switch_hops = |f: &route::Found| {
            f.hops.iter().filter(|h| !topo.is_host(topo.port(h.port).node)).count()
        };
        let mut found = route::by(cfg.routing, g, scratch, q, penalty, &mut admit);
        // the best path crosses more switches than a host pushes tags for: the same search
        // over the paths within max_tags switches (never on a fat tree: its paths cross at
        // most 5)
        if found.as_ref().is_some_and(|f| switch_hops(f) > max_tags) {
            let m = u16::try_from(max_tags).unwrap_or(u16::MAX);
            let within = Query { max_switches: Some(m), ..q };
            found = route::by(cfg.routing, g, scratch, within, penalty, &mut admit);
        }
        if let Some(e) = err {
            if found.is_none() {
                return Err(Rejection::Arithmetic(e));
            }
        }
        Ok(found.filter(|f| f.delay <= q.deadline && switch_hops(f) <= max_tags).map(|f| f.hops))
    }

    fn reserve(&mut self, id: FlowId, r: FlowRequest, path: &[PathHop]) -> Result<(), Rejection> {
        let tb = TokenBucket::new(r.rate, r.burst);
        let mut hops = Vec::with_capacity(path.len());
        let mut before = 0u64;
        let mut input: Option<PortId> = None;
        let mut guarantee = 0u64;
        for h in path {
            let budget = self.queues_of(h.port).budgets[usize::from(h.queue)];
            let bucket = self.cfg.burst.at_hop(tb, Duration::from_nanos(before), r.deadline)?;
            hops.push(Hop { port: h.port, queue: h.queue, budget, input, bucket });
            before += budget.as_nanos();
            guarantee += budget.as_nanos() + self.cfg.per_hop.as_nanos();
            input = Some(h.port);
        }
        for h in &hops {
            let (key, rate) = match h.input {
                Some(i) => (i as u32, u128::from(self.topo.port(i).rate.bps())),
                None => (LOCAL, 0),
            };
            self.ports[h.port].add(usize::from(h.queue), key, rate, h.bucket)?;
            self.port_flows[h.port].insert(id);
        }
        let e = Embedding { id, request: r, hops, guarantee: Duration::from_nanos(guarantee) };
        self.flows.insert(id, e);
        Ok(())
    }

    fn release(&mut self, id: FlowId) -> Result<Embedding, Rejection> {
        let e = self.flows.remove(&id).ok_or(Rejection::NoPath)?;
        for h in &e.hops {
            let key = h.input.map_or(LOCAL, |i| i as u32);
            self.ports[h.port].remove(usize::from(h.queue), key, h.bucket)?;
            self.port_flows[h.port].remove(&id);
        }
        Ok(e)
    }
}
