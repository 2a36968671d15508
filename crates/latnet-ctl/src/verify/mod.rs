//! Independent packet-level check of an admitted flow set: build the network in `latnet-sim`
//! exactly as the controller configured it and see whether packets agree with the bounds.
//!
//! * Switches forward by tag stacks ([`latnet_sim::switch::Forwarder::TagStack`]) into
//!   strict-priority queues with the configured buffer per queue; hosts have one FIFO.
//! * Every admitted flow is a greedy token-bucket source with the admitted `(rate, burst)`
//!   (its whole burst at its start, then its rate), sending frames of `min(burst, 1500 B)`
//!   that include its tag stack, so the source conforms to what was reserved.
//! * Phases: all flows start together ([`Phase::Sync`]); seeded random starts
//!   ([`Phase::Random`]); or starts chosen so that the first bursts of all flows through the
//!   most loaded queue reach it at the same instant ([`Phase::Aligned`]).
//! * Optional best-effort background of full-size frames in an extra lowest-priority class (at
//!   switches and at hosts, below the admitted flows), so that non-preemptive blocking happens
//!   (needs fewer than 8 queues).
//!
//! Measured per packet: the end-to-end latency (creation to last bit received) against the
//! flow's deadline and guarantee; at each hop the queue's sojourn (enqueue to last bit out)
//! against the queue's budget and its current network-calculus bound. Links get a propagation
//! delay equal to the controller's per-hop constant, so `Σ (sojourn + propagation) ≤ Σ (D +
//! per_hop)` is what the guarantee promises.
//!
//! [`transition_check`] does the same while a request's reroutes are applied: the moved
//! flows' sources are re-tagged mid-run, in the order a host agent chooses ([`Order`]).

use crate::controller::{Controller, Embedding};
use crate::topo::{NodeKind, PortId};
use latnet_dataplane::{QueueLimits, QueueSpec};
use latnet_sim::scenario::{
    FlowSpec, LatencyConvention, LinkSpec, NodeKind as SimKind, NodeSpec, OutputSpec,
    RoutingMetric, Scenario, SimConfig, Switching,
};
use latnet_sim::switch::ForwardingSpec;
use latnet_sim::traffic::{Release, TrafficSpec};
use latnet_sim::{Simulator, TieBreak};
use latnet_units::{Bytes, Duration, Rate, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

mod transition;
pub use transition::{transition_check, Order, Transition, TransitionResult, TransitionRun};

/// When the sources start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// All at time 0.
    Sync,
    /// Uniformly random in `[0, spread)`, seeded.
    Random {
        /// Spread of the start times.
        spread: Duration,
    },
    /// The first bursts of every flow through the `rank`-th most loaded switch queue (by
    /// bound / budget) arrive there at the same instant; other flows start at 0.
    Aligned {
        /// 0 = the most loaded queue.
        rank: usize,
    },
}

impl Phase {
    /// Stable name.
    pub fn name(&self) -> String {
        match self {
            Phase::Sync => "sync".into(),
            Phase::Random { spread } => format!("random-{spread}"),
            Phase::Aligned { rank } => format!("aligned-{rank}"),
        }
    }
}

/// Options of the cross-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOptions {
    /// Sources send during this time.
    pub duration: Duration,
    /// Phases to run (one simulation each).
    pub phases: Vec<Phase>,
    /// Seed of the simulations (random phases, background).
    pub seed: u64,
    /// Largest frame a flow sends.
    pub max_frame: u32,
    /// Best-effort background traffic in an extra lowest class (if the ports have < 8 queues).
    pub background: bool,
    /// Sources send this many times the admitted burst and rate (1 = conforming). Anything
    /// above 1 simulates a tenant whose shaper failed: a negative control showing that the
    /// check does detect violations.
    pub misbehave: u64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            duration: Duration::from_millis(20),
            phases: vec![
                Phase::Sync,
                Phase::Aligned { rank: 0 },
                Phase::Aligned { rank: 1 },
                Phase::Random { spread: Duration::from_millis(2) },
            ],
            seed: 1,
            max_frame: 1500,
            background: true,
            misbehave: 1,
        }
    }
}

/// The worst observation of one phase.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PhaseResult {
    /// Phase name.
    pub phase: String,
    /// Packets of admitted flows sent.
    pub sent: u64,
    /// Of those, received.
    pub received: u64,
    /// Dropped on the way (queue full, no route, ...), not counting those in flight at the end.
    pub dropped: u64,
    /// Received later than the flow's deadline.
    pub deadline_violations: u64,
    /// A hop whose queue sojourn exceeded the queue's budget.
    pub budget_violations: u64,
    /// A hop whose queue sojourn exceeded the queue's current network-calculus bound.
    pub bound_violations: u64,
    /// A hop on another port than the flow's embedding says, or at a switch in another queue
    /// of it (the packet's priority there, which its tag set).
    pub misrouted: u64,
    /// Largest end-to-end latency / deadline.
    pub max_e2e_over_deadline: f64,
    /// Largest end-to-end latency / guarantee `Σ (D + per_hop)`.
    pub max_e2e_over_guarantee: f64,
    /// Largest queue sojourn / queue budget.
    pub max_queue_over_budget: f64,
    /// Largest queue sojourn / the queue's delay bound.
    pub max_queue_over_bound: f64,
    /// Events simulated.
    pub events: u64,
}

/// The result over all phases.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CheckResult {
    /// Admitted flows simulated.
    pub flows: usize,
    /// Admitted flows that could not be simulated (burst smaller than headers + tags).
    pub skipped: usize,
    /// Best-effort background flows.
    pub background_flows: usize,
    /// Per phase.
    pub phases: Vec<PhaseResult>,
}

impl CheckResult {
    /// Total violations of any kind (deadline, budget, bound, drops, misrouting).
    pub fn violations(&self) -> u64 {
        self.phases
            .iter()
            .map(|p| {
                p.deadline_violations
                    + p.budget_violations
                    + p.bound_violations
                    + p.dropped
                    + p.misrouted
            })
            .sum()
    }
    /// The largest ratio of a field over all phases.
    pub fn max(&self, f: impl Fn(&PhaseResult) -> f64) -> f64 {
        self.phases.iter().map(f).fold(0.0, f64::max)
    }
}

const HEADERS: u32 = 42;

struct SimFlow<'a> {
    e: &'a Embedding,
    tags: Vec<u16>,
    size: u32,
}

/// What every phase shares: the flows that can be simulated, the background, and the switch
/// queues ordered by load (for aligned phases).
struct Plan<'a> {
    flows: Vec<SimFlow<'a>>,
    skipped: usize,
    bg: Vec<(usize, usize, Vec<u16>, Rate)>,
    loaded: Vec<(f64, PortId, usize)>,
}

fn plan<'a>(ctl: &'a Controller, opts: &CheckOptions) -> Plan<'a> {
    let topo = ctl.topology();
    let cfg = ctl.config();
    let nq = cfg.switch.len();
    let background = opts.background && nq < 8;
    let mut flows = Vec::new();
    let mut skipped = 0;
    for e in ctl.flows() {
        let tags = ctl.tags(e);
        let min = HEADERS + 4 * tags.len() as u32;
        let burst = u32::try_from(e.request.burst.get()).unwrap_or(u32::MAX);
        let size = burst.min(opts.max_frame);
        if size < min {
            skipped += 1;
            continue;
        }
        flows.push(SimFlow { e, tags, size });
    }
    // best-effort background: each host sends to the next host (in node order) on its
    // fewest-hops path, in the extra lowest class, at 20 % of its link rate
    let mut bg = Vec::new();
    if background {
        let hosts = topo.hosts();
        for (i, &h) in hosts.iter().enumerate() {
            let d = hosts[(i + hosts.len() / 2 + 1) % hosts.len()];
            if d == h {
                continue;
            }
            let Some((path, tags)) = ctl.best_effort_route(h, d) else { continue };
            let rate = Rate::from_bps(topo.port(path[0]).rate.bps() / 5);
            bg.push((h, d, tags, rate));
        }
    }

    // the most loaded switch queues, for aligned phases
    let mut loaded: Vec<(f64, PortId, usize)> = Vec::new();
    for p in 0..topo.ports().len() {
        if topo.is_host(topo.port(p).node) {
            continue;
        }
        let st = ctl.port_state(p);
        for q in 0..st.len() {
            if st.queue(q).flows == 0 {
                continue;
            }
            if let Some(b) = ctl.bounds(p, q) {
                let budget = st.limits(q).budget.as_nanos() as f64;
                loaded.push((b.delay.as_f64() / budget, p, q));
            }
        }
    }
    loaded.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    Plan { flows, skipped, bg, loaded }
}

impl Plan<'_> {
    /// The scenario of phase `k` of `opts`.
    fn scenario(
        &self,
        ctl: &Controller,
        opts: &CheckOptions,
        k: usize,
    ) -> Result<Scenario, String> {
        let phase = opts.phases[k];
        let seed = opts.seed.wrapping_add(k as u64);
        let starts = starts(ctl, &self.flows, phase, &self.loaded, seed);
        scenario(ctl, &self.flows, &starts, &self.bg, false, opts)
    }
}

/// Run the cross-check of `ctl`'s admitted flows.
pub fn cross_check(ctl: &Controller, opts: &CheckOptions) -> Result<CheckResult, String> {
    let plan = plan(ctl, opts);
    let mut phases = Vec::new();
    for (k, phase) in opts.phases.iter().enumerate() {
        let sc = plan.scenario(ctl, opts, k)?;
        let res = Simulator::new(sc).run();
        phases.push(measure(ctl, &plan.flows, &[], true, &res, phase.name()));
    }
    Ok(CheckResult {
        flows: plan.flows.len(),
        skipped: plan.skipped,
        background_flows: plan.bg.len(),
        phases,
    })
}

/// The scenario of every phase of [`cross_check`], as the simulator runs it: to run the same
/// admitted set elsewhere (in emulation, on real packets: write it with [`scenario_toml`]).
/// Admitted flow `id` is named `f<id>`, background flow `j` `be<j>`.
pub fn phase_scenarios(
    ctl: &Controller,
    opts: &CheckOptions,
) -> Result<Vec<(String, Scenario)>, String> {
    let plan = plan(ctl, opts);
    (0..opts.phases.len())
        .map(|k| Ok((opts.phases[k].name(), plan.scenario(ctl, opts, k)?)))
        .collect()
}

fn tx_ns(size: u64, rate: Rate) -> u64 {
    rate.tx_time(Bytes::new(size)).map_or(0, |d| d.as_nanos())
}

fn starts(
    ctl: &Controller,
    flows: &[SimFlow<'_>],
    phase: Phase,
    loaded: &[(f64, PortId, usize)],
    seed: u64,
) -> Vec<Time> {
    let topo = ctl.topology();
    let prop = ctl.config().per_hop.as_nanos();
    match phase {
        Phase::Sync => vec![Time::ZERO; flows.len()],
        Phase::Random { spread } => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            flows
                .iter()
                .map(|_| Time::from_nanos(rng.gen_range(0..spread.as_nanos().max(1))))
                .collect()
        }
        Phase::Aligned { rank } => {
            let Some(&(_, port, queue)) = loaded.get(rank) else {
                return vec![Time::ZERO; flows.len()];
            };
            // time for the first frame of each flow to reach `port` on an empty network
            let offsets: Vec<Option<u64>> = flows
                .iter()
                .map(|f| {
                    let h =
                        f.e.hops
                            .iter()
                            .position(|h| h.port == port && usize::from(h.queue) == queue)?;
                    Some(
                        f.e.hops[..h]
                            .iter()
                            .enumerate()
                            .map(|(i, hop)| {
                                let len = u64::from(f.size) - 4 * i as u64;
                                tx_ns(len, topo.port(hop.port).rate) + prop
                            })
                            .sum(),
                    )
                })
                .collect();
            let t0 = offsets.iter().flatten().copied().max().unwrap_or(0);
            offsets.iter().map(|o| Time::from_nanos(o.map_or(0, |o| t0 - o))).collect()
        }
    }
}

/// The network as the controller configured it, as a scenario with no flows: hosts and
/// switches of its topology, switches forwarding by tag stacks into strict-priority queues of
/// the configured classes and, when the ports have room for it
/// ([`Controller::best_effort_queue`]), a best-effort class below them; hosts with one queue
/// for admitted flows and one below it for everything else; links at their rates with the
/// controller's per-hop constant as propagation delay. Traffic is added to it (what an emulated
/// testbed whose hosts' agents are programmed by the controller runs); `duration` is the
/// scenario's sending time.
pub fn network_scenario(ctl: &Controller, duration: Duration) -> Result<Scenario, String> {
    let opts = CheckOptions { duration, ..CheckOptions::default() };
    let mut sc = scenario(ctl, &[], &[], &[], ctl.best_effort_queue().is_some(), &opts)?;
    sc.name = "chameleon-network".into();
    Ok(sc)
}

fn scenario(
    ctl: &Controller,
    flows: &[SimFlow<'_>],
    starts: &[Time],
    bg: &[(usize, usize, Vec<u16>, Rate)],
    best_effort: bool,
    opts: &CheckOptions,
) -> Result<Scenario, String> {
    let topo = ctl.topology();
    let cfg = ctl.config();
    let nq = cfg.switch.len();
    let best_effort = best_effort || !bg.is_empty();
    let classes = (nq + usize::from(best_effort)) as u8;
    let nodes = topo
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| NodeSpec {
            name: n.name.clone(),
            kind: match n.kind {
                NodeKind::Host => SimKind::Host,
                NodeKind::Switch => SimKind::Switch,
            },
            address: latnet_sim::scenario::default_address(i),
            pipeline: None,
            forwarding: match n.kind {
                NodeKind::Host => ForwardingSpec::Fib,
                NodeKind::Switch => ForwardingSpec::TagStack { base: cfg.tags.base },
            },
            large_flows: None,
        })
        .collect();
    let queue_of = |node: usize| {
        if topo.is_host(node) && !best_effort {
            QueueSpec::Fifo {
                limits: QueueLimits { limit_packets: 1_000_000, limit_bytes: cfg.host.buffer },
            }
        } else if topo.is_host(node) {
            // admitted flows in class 0, background below them (as on the switches): the host
            // model is one guaranteed queue that a lower-priority packet can block once
            QueueSpec::Priority {
                classes: 2,
                limits: QueueLimits { limit_packets: 1_000_000, limit_bytes: cfg.host.buffer },
            }
        } else {
            QueueSpec::Priority {
                classes,
                limits: QueueLimits { limit_packets: 1_000_000, limit_bytes: cfg.switch.buffer },
            }
        }
    };
    let links = topo
        .links()
        .iter()
        .map(|l| LinkSpec {
            a: l.a,
            b: l.b,
            rate: l.rate,
            delay: cfg.per_hop,
            loss: 0.0,
            overhead: 0,
            queue_ab: queue_of(l.a),
            queue_ba: queue_of(l.b),
        })
        .collect();
    let stop = Time::from_duration(opts.duration);
    let mut sflows: Vec<FlowSpec> = flows
        .iter()
        .zip(starts)
        .enumerate()
        .map(|(i, (f, &start))| FlowSpec {
            name: format!("f{}", f.e.id),
            src: f.e.request.src,
            dst: f.e.request.dst,
            priority: 0,
            size: f.size,
            start: start.min(stop - Duration::from_nanos(1)),
            stop,
            count: None,
            src_port: 10_000u16.wrapping_add(i as u16),
            dst_port: 20_000u16.wrapping_add(i as u16),
            traffic: TrafficSpec::TokenBucket {
                rate: Rate::from_bps(f.e.request.rate.bps().saturating_mul(opts.misbehave.max(1))),
                burst: Bytes::new(f.e.request.burst.get().saturating_mul(opts.misbehave.max(1))),
                peak: None,
                release: Release::Frame,
            },
            jitter: Duration::ZERO,
            slo: None,
            tags: f.tags.clone(),
            retag: Vec::new(),
        })
        .collect();
    for (j, (s, d, tags, rate)) in bg.iter().enumerate() {
        sflows.push(FlowSpec {
            name: format!("be{j}"),
            src: *s,
            dst: *d,
            priority: classes - 1,
            size: 1500,
            start: Time::ZERO,
            stop,
            count: None,
            src_port: 40_000u16.wrapping_add(j as u16),
            dst_port: 50_000u16.wrapping_add(j as u16),
            traffic: TrafficSpec::Cbr { rate: *rate },
            jitter: Duration::ZERO,
            slo: None,
            tags: tags.clone(),
            retag: Vec::new(),
        });
    }
    let max_deadline = flows.iter().map(|f| f.e.request.deadline).max().unwrap_or(Duration::ZERO);
    let sc = Scenario {
        name: "chameleon-cross-check".into(),
        description: String::new(),
        sim: SimConfig {
            duration: opts.duration,
            drain: max_deadline + Duration::from_millis(10),
            seed: opts.seed,
            tie_break: TieBreak::Fifo,
            latency: LatencyConvention::Physical,
            routing: RoutingMetric::Hops,
            switching: Switching::StoreAndForward,
            dilation: 1,
        },
        nodes,
        links,
        routes: Vec::new(),
        pipelines: Vec::new(),
        lbf: None,
        warnings: Vec::new(),
        flows: sflows,
        output: OutputSpec { packets: true, ..OutputSpec::default() },
    };
    // the scenario must pass the simulator's own validation rules
    for f in &sc.flows {
        f.traffic.validate(f.size).map_err(|e| format!("flow {}: {e}", f.name))?;
    }
    Ok(sc)
}

/// Flow `i`'s packets created before `until` took the path of `e` (a flow moved during the
/// run: its source was re-tagged at `until`).
struct OldPath<'a> {
    until: Time,
    e: &'a Embedding,
}

/// The worst observations of one run. Each packet is held to the embedding it was sent on:
/// `old[i]`'s before its re-tag, flow `i`'s own after. With `bounds`, each queue sojourn is
/// also held to the queue's current network-calculus bound in `ctl`.
fn measure(
    ctl: &Controller,
    flows: &[SimFlow<'_>],
    old: &[Option<OldPath<'_>>],
    bounds: bool,
    res: &latnet_sim::Results,
    phase: String,
) -> PhaseResult {
    let topo = ctl.topology();
    let mut out = PhaseResult { phase, events: res.events, ..PhaseResult::default() };
    let Some(log) = &res.log else { return out };
    let n = flows.len();
    // per flow, the first sequence number sent on its current embedding (sources send in
    // creation order)
    let mut first_new = vec![0u64; n];
    for (i, o) in old.iter().enumerate().take(n) {
        if o.is_some() {
            first_new[i] = u64::MAX;
        }
    }
    for r in &log.packets {
        let i = r.flow as usize;
        if let Some(Some(o)) = old.get(i) {
            if r.created_ns >= o.until.as_nanos() {
                first_new[i] = first_new[i].min(r.seq);
            }
        }
    }
    let embedding = |i: usize, seq: u64| match old.get(i) {
        Some(Some(o)) if seq < first_new[i] => o.e,
        _ => flows[i].e,
    };
    for r in &log.packets {
        let i = r.flow as usize;
        if i >= n {
            continue;
        }
        let e = embedding(i, r.seq);
        out.sent += 1;
        match (r.latency_ns, r.drop) {
            (Some(lat), _) => {
                out.received += 1;
                let dl = e.request.deadline.as_nanos() as f64;
                let g = e.guarantee.as_nanos().max(1) as f64;
                out.max_e2e_over_deadline = out.max_e2e_over_deadline.max(lat as f64 / dl);
                out.max_e2e_over_guarantee = out.max_e2e_over_guarantee.max(lat as f64 / g);
                if lat > e.request.deadline.as_nanos() {
                    out.deadline_violations += 1;
                }
            }
            (None, Some(latnet_dataplane::DropReason::EndOfRun)) => {}
            (None, _) => out.dropped += 1,
        }
    }
    for h in &log.hops {
        let i = h.flow as usize;
        if i >= n {
            continue;
        }
        let f = &flows[i];
        let e = embedding(i, h.seq);
        let hop = usize::from(h.hop);
        let Some(want) = e.hops.get(hop) else {
            out.misrouted += 1;
            continue;
        };
        // (a host queues every admitted flow in its first class: the tags start at the switch)
        let at_switch = !topo.is_host(topo.port(want.port).node);
        if want.port != h.port as usize || (at_switch && h.priority != want.queue) {
            out.misrouted += 1;
            continue;
        }
        let len = u64::from(f.size) - 4 * hop as u64;
        let sojourn = h.start_tx_ns - h.enqueue_ns + tx_ns(len, topo.port(want.port).rate);
        let budget = want.budget.as_nanos();
        out.max_queue_over_budget = out.max_queue_over_budget.max(sojourn as f64 / budget as f64);
        if sojourn > budget {
            out.budget_violations += 1;
        }
        if !bounds {
            continue;
        }
        if let Some(b) = ctl.bounds(want.port, usize::from(want.queue)) {
            let bound = b.delay.as_f64();
            out.max_queue_over_bound = out.max_queue_over_bound.max(sojourn as f64 / bound);
            // exact: bound (rational) < sojourn (integer ns)
            if b.delay.try_lt_int(u128::from(sojourn)).unwrap_or(true) {
                out.bound_violations += 1;
            }
        }
    }
    out
}

/// `sc` (a scenario of [`phase_scenarios`]) as scenario-file text that reads back to the same
/// scenario: what `latnet run` and the emulated testbed take. Only the parts the cross-check
/// builds are written (FIFO and strict-priority queues, token-bucket and constant-rate
/// sources, tag stacks); anything else is an error naming it.
pub fn scenario_toml(sc: &Scenario) -> Result<String, String> {
    use std::fmt::Write as _;
    let q = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let node = |i: usize| -> Result<String, String> {
        sc.nodes.get(i).map(|n| q(&n.name)).ok_or_else(|| format!("no node {i}"))
    };
    let queue = |spec: &QueueSpec| -> Result<String, String> {
        match spec {
            QueueSpec::Fifo { limits } => Ok(format!(
                "{{ kind = \"fifo\", limit_packets = {}, limit_bytes = \"{}B\" }}",
                limits.limit_packets,
                limits.limit_bytes.get()
            )),
            QueueSpec::Priority { classes, limits } => Ok(format!(
                "{{ kind = \"priority\", classes = {classes}, limit_packets = {}, limit_bytes = \"{}B\" }}",
                limits.limit_packets,
                limits.limit_bytes.get()
            )),
            other => Err(format!("cannot write queue {other:?}")),
        }
    };
    let mut t = String::new();
    let s = &sc.sim;
    let routing = match s.routing {
        RoutingMetric::Hops => "hops",
        RoutingMetric::Delay => "delay",
    };
    // (writing to a String cannot fail)
    let _ = write!(
        t,
        "name = {}\ndescription = {}\n\n[sim]\nduration = \"{}ns\"\ndrain = \"{}ns\"\nseed = {}\n\
         tie_break = \"{}\"\nlatency = \"{}\"\nrouting = \"{routing}\"\nswitching = \"{}\"\n",
        q(&sc.name),
        q(&sc.description),
        s.duration.as_nanos(),
        s.drain.as_nanos(),
        s.seed,
        s.tie_break.as_str(),
        s.latency.as_str(),
        s.switching.as_str(),
    );
    if s.dilation != 1 {
        let _ = writeln!(t, "dilation = {}", s.dilation);
    }
    let o = &sc.output;
    if o.pcap || o.queues.is_some() || o.timeseries.is_some() {
        return Err("cannot write outputs other than packets".into());
    }
    let _ = writeln!(t, "\n[output]\npackets = {}", o.packets);
    if sc.lbf.is_some() || !sc.pipelines.is_empty() || !sc.routes.is_empty() {
        return Err("cannot write LBF, pipelines or explicit routes".into());
    }
    for n in &sc.nodes {
        let kind = match n.kind {
            SimKind::Host => "host",
            SimKind::Switch => "switch",
        };
        let _ = write!(
            t,
            "\n[[nodes]]\nname = {}\nkind = \"{kind}\"\naddress = \"{}\"\n",
            q(&n.name),
            n.address
        );
        if n.pipeline.is_some() || n.large_flows.is_some() {
            return Err(format!("node {}: cannot write pipelines or large-flow counters", n.name));
        }
        if let ForwardingSpec::TagStack { base } = n.forwarding {
            let _ = writeln!(t, "forwarding = {{ kind = \"tag-stack\", base = {base} }}");
        }
    }
    for l in &sc.links {
        let _ = write!(
            t,
            "\n[[links]]\na = {}\nb = {}\nrate = \"{}bps\"\ndelay = \"{}ns\"\nloss = {:?}\n\
             overhead = {}\nqueue_a = {}\nqueue_b = {}\n",
            node(l.a)?,
            node(l.b)?,
            l.rate.bps(),
            l.delay.as_nanos(),
            l.loss,
            l.overhead,
            queue(&l.queue_ab)?,
            queue(&l.queue_ba)?,
        );
    }
    for f in &sc.flows {
        let traffic = match &f.traffic {
            TrafficSpec::Cbr { rate } => {
                format!("{{ kind = \"cbr\", rate = \"{}bps\" }}", rate.bps())
            }
            TrafficSpec::TokenBucket { rate, burst, peak, release } => {
                let peak = peak.map_or(String::new(), |p| format!(", peak = \"{}bps\"", p.bps()));
                let release = match release {
                    Release::Frame => "frame",
                    Release::Burst => "burst",
                };
                format!(
                    "{{ kind = \"token-bucket\", rate = \"{}bps\", burst = \"{}B\"{peak}, \
                     release = \"{release}\" }}",
                    rate.bps(),
                    burst.get()
                )
            }
            other => return Err(format!("flow {}: cannot write traffic {other:?}", f.name)),
        };
        if f.slo.is_some() {
            return Err(format!("flow {}: cannot write an LBF objective", f.name));
        }
        let _ = write!(
            t,
            "\n[[flows]]\nname = {}\nsrc = {}\ndst = {}\npriority = {}\nsize = {}\n\
             start = \"{}ns\"\nstop = \"{}ns\"\nsrc_port = {}\ndst_port = {}\njitter = \"{}ns\"\n\
             traffic = {traffic}\n",
            q(&f.name),
            node(f.src)?,
            node(f.dst)?,
            f.priority,
            f.size,
            f.start.as_nanos(),
            f.stop.as_nanos(),
            f.src_port,
            f.dst_port,
            f.jitter.as_nanos(),
        );
        if let Some(n) = f.count {
            let _ = writeln!(t, "count = {n}");
        }
        let stack = |tags: &[u16]| tags.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
        if !f.tags.is_empty() || !f.retag.is_empty() {
            let _ = writeln!(t, "tags = [{}]", stack(&f.tags));
        }
        if !f.retag.is_empty() {
            let entries: Vec<String> = f
                .retag
                .iter()
                .map(|r| {
                    format!("{{ at = \"{}ns\", tags = [{}] }}", r.at.as_nanos(), stack(&r.tags))
                })
                .collect();
            let _ = writeln!(t, "retag = [{}]", entries.join(", "));
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CtlConfig, FlowRequest, Topology};
    use std::sync::Arc;

    /// A packet sent into another queue of the right port is caught: its hop counts as
    /// misrouted, where the same flow with the controller's own tags has none.
    #[test]
    fn a_packet_in_another_queue_of_the_right_port_is_misrouted() {
        let topo = Arc::new(Topology::fat_tree(4, 1, Rate::from_gbps(1)).unwrap());
        let mut ctl = Controller::new(topo.clone(), CtlConfig::chameleon(4).unwrap()).unwrap();
        let node = |n: &str| topo.node_id(n).unwrap();
        let request = FlowRequest {
            src: node("h0_0_0"),
            dst: node("h3_1_0"),
            rate: Rate::from_mbps(10),
            burst: Bytes::new(3000),
            deadline: Duration::from_millis(10),
        };
        ctl.request(request).unwrap();
        let opts = CheckOptions {
            duration: Duration::from_millis(5),
            phases: vec![Phase::Random { spread: Duration::from_millis(1) }],
            background: false,
            ..CheckOptions::default()
        };
        let run = |plan: &Plan<'_>| {
            let res = Simulator::new(plan.scenario(&ctl, &opts, 0).unwrap()).run();
            measure(&ctl, &plan.flows, &[], false, &res, "t".into())
        };
        let mut plan = plan(&ctl, &opts);
        let right = run(&plan);
        assert!(right.received > 0 && right.misrouted == 0, "{right:?}");
        // the second switch's tag names the next queue of the same port
        let base = ctl.config().tags.base;
        let t = &mut plan.flows[0].tags[1];
        *t = *t / base * base + (*t % base + 1) % ctl.config().switch.len() as u16;
        let wrong = run(&plan);
        assert_eq!(wrong.received, right.received, "{wrong:?}");
        // one hop of each packet that got that far (those in flight at the end too)
        assert!(wrong.misrouted >= wrong.received, "{wrong:?}");
    }
}
