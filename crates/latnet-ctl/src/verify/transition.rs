//! Packet-level check of a reroute while it happens.
//!
//! The controller checks steady states: the admitted set before a request and after it. When
//! an admission moves flows, the sources are re-tagged while the moved flows' packets are still
//! on their old paths, and the new flow starts at some instant of that. Which intermediate
//! states the network goes through depends on the order a host agent applies the change
//! ([`Order`]). The controller moves one flow at a time while holding the old reservation
//! ("make-before-break": the new path is sought with the old one still reserved), so the state
//! where one moved flow has packets on both paths is one it checked; applying the moves one by
//! one, each once the previous old path has drained, and starting the new flow last
//! ([`Order::Sequential`]) passes only through checked states. The other orders pass through
//! states nobody checked.
//!
//! [`transition_check`] simulates the change in each order: every admitted flow is a token
//! bucket that sends its whole burst every `burst / rate` (the burstiest conforming source),
//! the sources start as in the phase, at `at` the change begins, and each packet is held to the
//! embedding it was sent on (the old one before its source's re-tag) for its deadline, its
//! queues' budgets and its route.

use super::{plan, Controller, Embedding, OldPath, PhaseResult, HEADERS};
use super::{CheckOptions, Release, Simulator, TrafficSpec};
use crate::controller::FlowId;
use latnet_sim::scenario::Retag;
use latnet_units::{Duration, Time};
use serde::Serialize;

/// In what order a host agent applies an admission that moved flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The moves one at a time in the controller's order, each once the previous moved flow's
    /// old path has drained (its old guarantee later), then the new flow once the last has
    /// drained: only states the controller checked.
    Sequential,
    /// Every move and the new flow at the same instant.
    Together,
    /// The new flow first; every move `lag` later (an agent that learns of the moves late, e.g.
    /// by polling): in between, the state the controller could not admit.
    NewFirst,
}

impl Order {
    /// Every order.
    pub const ALL: [Order; 3] = [Order::Sequential, Order::Together, Order::NewFirst];

    /// Stable name.
    pub fn name(&self) -> &'static str {
        match self {
            Order::Sequential => "sequential",
            Order::Together => "together",
            Order::NewFirst => "new-first",
        }
    }
}

impl std::str::FromStr for Order {
    type Err = String;

    fn from_str(s: &str) -> Result<Order, String> {
        Order::ALL.into_iter().find(|o| o.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Order::ALL.iter().map(Order::name).collect();
            format!("unknown order {s:?} (orders: {})", names.join(", "))
        })
    }
}

/// One request that moved flows: the controller just before it and just after it.
#[derive(Debug, Clone, Copy)]
pub struct Transition<'a> {
    /// Before the request.
    pub before: &'a Controller,
    /// After it.
    pub after: &'a Controller,
    /// The flow it admitted (`None`: refused, but the moves it made stay).
    pub new_flow: Option<FlowId>,
    /// The flows it moved, in the order it moved them.
    pub moved: &'a [FlowId],
}

/// One simulated change.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TransitionRun {
    /// The order applied.
    pub order: String,
    /// When each moved flow's source is re-tagged (ns; in `moved` order; `None` for a flow
    /// that could not be simulated).
    pub retag_ns: Vec<Option<u64>>,
    /// When the new flow starts (ns).
    pub new_start_ns: Option<u64>,
    /// Packets of moved flows sent on their old paths.
    pub old_path_packets: u64,
    /// Of those, the last one's arrival after its source's re-tag (ns): how long the old path
    /// took to drain.
    pub old_path_drain_ns: u64,
    /// The worst observations (`bound_violations` and `max_queue_over_bound` are not measured
    /// here: no one network-calculus state holds during a change).
    pub result: PhaseResult,
}

/// Every order of one change.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TransitionResult {
    /// The flow admitted.
    pub new_flow: Option<FlowId>,
    /// The flows moved.
    pub moved: Vec<FlowId>,
    /// Each moved flow's old guarantee (ns): how long its old path may take to drain.
    pub old_guarantee_ns: Vec<u64>,
    /// Admitted flows simulated.
    pub flows: usize,
    /// Admitted flows that could not be simulated (burst smaller than headers + tags).
    pub skipped: usize,
    /// Per phase and order.
    pub runs: Vec<TransitionRun>,
}

impl TransitionResult {
    /// Violations of any kind (deadline, budget, drops, misrouting) in the runs of `order`.
    pub fn violations(&self, order: Order) -> u64 {
        self.runs
            .iter()
            .filter(|r| r.order == order.name())
            .map(|r| {
                let p = &r.result;
                p.deadline_violations + p.budget_violations + p.dropped + p.misrouted
            })
            .sum()
    }
}

/// Simulate `t` in each of `orders` (`lag`: how late [`Order::NewFirst`] applies the moves),
/// in each phase of `opts`, the change beginning at `at`; every run lasts until
/// `opts.duration` after the new flow's start or the last re-tag, whichever is later.
pub fn transition_check(
    t: &Transition<'_>,
    opts: &CheckOptions,
    at: Duration,
    lag: Duration,
    orders: &[Order],
) -> Result<TransitionResult, String> {
    let mut p = plan(t.after, opts);
    // each moved flow's old embedding and old tags, where it is simulated
    let mut old: Vec<Option<(&Embedding, Vec<u16>)>> = Vec::new();
    let mut old_guarantee_ns = Vec::new();
    for &m in t.moved {
        let e = t.before.flow(m).ok_or_else(|| format!("moved flow {m} is not in `before`"))?;
        if t.after.flow(m).is_none() {
            return Err(format!("moved flow {m} is not in `after`"));
        }
        old_guarantee_ns.push(e.guarantee.as_nanos());
        old.push(Some((e, t.before.tags(e))));
    }
    if let Some(n) = t.new_flow {
        if t.after.flow(n).is_none() || t.before.flow(n).is_some() {
            return Err(format!("flow {n} is not new in `after`"));
        }
    }
    // a moved flow whose frame cannot carry its old tags is not simulated (nor its new path)
    let mut skipped = p.skipped;
    for (k, &m) in t.moved.iter().enumerate() {
        let Some(i) = p.flows.iter().position(|f| f.e.id == m) else {
            old[k] = None;
            continue;
        };
        let tags = old[k].as_ref().map_or(0, |o| o.1.len()) as u32;
        if p.flows[i].size < HEADERS + 4 * tags {
            p.flows.remove(i);
            skipped += 1;
            old[k] = None;
        }
    }
    let at = Time::from_duration(at);
    let drain: Vec<Duration> = old_guarantee_ns.iter().map(|&g| Duration::from_nanos(g)).collect();
    let mut runs = Vec::new();
    for k in 0..opts.phases.len() {
        for &order in orders {
            // instants of the re-tags (moved order) and of the new flow's start
            let (retag, new_start) = match order {
                Order::Sequential => {
                    let mut when = Vec::new();
                    let mut now = at;
                    for d in &drain {
                        when.push(now);
                        now += *d;
                    }
                    (when, now)
                }
                Order::Together => (vec![at; drain.len()], at),
                Order::NewFirst => (vec![at + lag; drain.len()], at),
            };
            let end = retag.iter().copied().chain([new_start]).max().unwrap_or(at);
            let stop = end + opts.duration;
            runs.push(run(t, &p, &old, opts, k, order, &retag, new_start, stop)?);
        }
    }
    Ok(TransitionResult {
        new_flow: t.new_flow,
        moved: t.moved.to_vec(),
        old_guarantee_ns,
        flows: p.flows.len(),
        skipped,
        runs,
    })
}

#[allow(clippy::too_many_arguments)]
fn run(
    t: &Transition<'_>,
    p: &super::Plan<'_>,
    old: &[Option<(&Embedding, Vec<u16>)>],
    opts: &CheckOptions,
    k: usize,
    order: Order,
    retag: &[Time],
    new_start: Time,
    stop: Time,
) -> Result<TransitionRun, String> {
    let mut o = opts.clone();
    o.duration = stop - Time::ZERO;
    let mut sc = p.scenario(t.after, &o, k)?;
    let n = p.flows.len();
    let mut paths: Vec<Option<OldPath<'_>>> = (0..n).map(|_| None).collect();
    let mut retag_ns = vec![None; t.moved.len()];
    for (i, f) in p.flows.iter().enumerate() {
        let spec = &mut sc.flows[i];
        if let TrafficSpec::TokenBucket { release, .. } = &mut spec.traffic {
            *release = Release::Burst;
        }
        if Some(f.e.id) == t.new_flow {
            spec.start = new_start.min(stop - Duration::from_nanos(1));
        }
        let Some(m) = t.moved.iter().position(|&m| m == f.e.id) else { continue };
        let Some((e, tags)) = &old[m] else { continue };
        spec.retag =
            vec![Retag { at: retag[m], tags: std::mem::replace(&mut spec.tags, tags.clone()) }];
        paths[i] = Some(OldPath { until: retag[m], e });
        retag_ns[m] = Some(retag[m].as_nanos());
    }
    for f in &sc.flows {
        f.traffic.validate(f.size).map_err(|e| format!("flow {}: {e}", f.name))?;
    }
    let res = Simulator::new(sc).run();
    let (mut old_path_packets, mut old_path_drain_ns) = (0, 0);
    if let Some(log) = &res.log {
        for r in &log.packets {
            let Some(Some(o)) = paths.get(r.flow as usize) else { continue };
            if r.created_ns < o.until.as_nanos() {
                old_path_packets += 1;
                old_path_drain_ns =
                    old_path_drain_ns.max(r.end_ns.saturating_sub(o.until.as_nanos()));
            }
        }
    }
    let name = opts.phases[k].name();
    Ok(TransitionRun {
        order: order.name().to_owned(),
        retag_ns,
        new_start_ns: t.new_flow.map(|_| new_start.as_nanos()),
        old_path_packets,
        old_path_drain_ns,
        result: super::measure(t.after, &p.flows, &paths, false, &res, name),
    })
}
