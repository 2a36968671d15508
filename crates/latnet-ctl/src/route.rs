//! Path search on the queue-level graph (paper §3.3): every directed physical port with `n`
//! queues is `n` parallel edges, each with its allocated delay `D_q` (+ the per-hop constant).
//!
//! The search is Dijkstra with an access check per edge. The check depends on the path so far
//! (the flow's burst at a hop grows with the budgets of the earlier hops, and input-link
//! shaping needs the input link), so one label per node is kept, which makes the search a
//! heuristic: it may miss a feasible path (§3.3, \[61\]). The check is *lazy*: an edge is pushed
//! with its tentative key and checked only when popped, so edges beyond the destination's
//! distance are never checked; the result equals eager checking.
//!
//! [`larac`] is the Lagrangian relaxation of Jüttner et al. (INFOCOM 2001) over that search
//! for delay-constrained least cost.

use crate::config::{QueueSet, Routing};
use crate::topo::{NodeId, PortId, Topology};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One hop of a found path: egress port and queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathHop {
    /// Egress port.
    pub port: PortId,
    /// Queue at that port.
    pub queue: u8,
}

/// A found path with its totals.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Hops from the source host's port to the port into the destination.
    pub hops: Vec<PathHop>,
    /// Sum of the cost metric (penalties included).
    pub cost: f64,
    /// Sum of `D + per_hop` (ns).
    pub delay: u64,
}

/// Edge weight: `alpha × cost + beta × delay`, where `cost` is the routing metric of the
/// queue (times the penalty multiplier if penalised) and `delay` is `D + per_hop` in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Weight of the cost metric.
    pub alpha: f64,
    /// Weight of the delay (per ns).
    pub beta: f64,
}

/// The routing cost of one queue edge (before penalties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// The edge's delay `D + per_hop` (ns): least-delay routing.
    Delay,
    /// One per hop: shortest paths.
    Hops,
    /// `1 + D` with `D` in ms: the shipped LARAC cost.
    OnePlusMs,
}

impl Metric {
    fn cost(self, budget_ns: u64, delay_ns: u64) -> f64 {
        match self {
            Metric::Delay => delay_ns as f64,
            Metric::Hops => 1.0,
            Metric::OnePlusMs => 1.0 + budget_ns as f64 / 1e6,
        }
    }
}

/// What the search needs to know about one request.
#[derive(Debug, Clone, Copy)]
pub struct Query {
    /// Source host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Deadline (ns); labels beyond it are pruned when `prune` is set.
    pub deadline: u64,
    /// Prune labels that cannot meet the deadline.
    pub prune: bool,
    /// Cross at most this many switches (a host pushes one tag per switch). `None`: any
    /// number, with one label per node. `Some(m)`: one label per node and switches crossed so
    /// far (at most `m + 1` per node, none on a path that visits a node twice), so the search
    /// is the same Dijkstra over the paths within `m` switches.
    pub max_switches: Option<u16>,
}

/// The state of a hop being checked: the flow reaches `port` (queue `queue`) having spent
/// `budgets_before` ns of allocated budgets, arriving over `input` (`None` at the first hop).
#[derive(Debug, Clone, Copy)]
pub struct HopCheck {
    /// Egress port.
    pub port: PortId,
    /// Queue.
    pub queue: u8,
    /// Sum of the budgets of the earlier hops (ns).
    pub budgets_before: u64,
    /// The port the flow arrived through.
    pub input: Option<PortId>,
    /// Index of the hop on the path (0 at the source host).
    pub index: u16,
}

#[derive(Debug, Clone, Copy)]
struct Label {
    node: NodeId,
    hop: PathHop,
    pred: u32,
    index: u16,
    delay: u64,
    budgets: u64,
    cost: f64,
}

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq)]
struct HeapKey {
    key: f64,
    seq: u64,
    label: u32,
}
impl Eq for HeapKey {}
impl Ord for HeapKey {
    fn cmp(&self, o: &Self) -> Ordering {
        // min-heap on (key, seq)
        o.key.total_cmp(&self.key).then_with(|| o.seq.cmp(&self.seq))
    }
}
impl PartialOrd for HeapKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Reusable buffers of the search (one per controller; no allocation per request after the
/// first).
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    settled: Vec<u32>,
    gen: u32,
    labels: Vec<Label>,
    heap: BinaryHeap<HeapKey>,
    penal: Vec<u32>,
    penal_gen: u32,
    /// Hops to the current destination (cached per destination).
    hops: Vec<u32>,
    hops_for: Option<NodeId>,
}

impl Scratch {
    /// Distances to `dst` (cached).
    pub fn hops_to(&mut self, topo: &Topology, dst: NodeId) -> &[u32] {
        if self.hops_for != Some(dst) {
            self.hops = topo.hops_to(dst);
            self.hops_for = Some(dst);
        }
        &self.hops
    }

    /// Start a new penalty set (all queues of the marked ports cost `multiplier` times more).
    pub fn clear_penalties(&mut self, nports: usize) {
        if self.penal.len() != nports {
            self.penal = vec![0; nports];
            self.penal_gen = 0;
        }
        self.penal_gen = self.penal_gen.wrapping_add(1);
        if self.penal_gen == 0 {
            self.penal.iter_mut().for_each(|x| *x = 0);
            self.penal_gen = 1;
        }
    }

    /// Penalise `port`.
    pub fn penalise(&mut self, port: PortId) {
        if let Some(x) = self.penal.get_mut(port) {
            *x = self.penal_gen;
        }
    }

    fn penalised(&self, port: PortId) -> bool {
        self.penal_gen != 0 && self.penal.get(port) == Some(&self.penal_gen)
    }
}

/// The queue-level graph as the search sees it.
#[derive(Debug, Clone, Copy)]
pub struct Graph<'a> {
    /// Physical topology.
    pub topo: &'a Topology,
    /// Queues of switch ports.
    pub switch: &'a QueueSet,
    /// Queues of host ports.
    pub host: &'a QueueSet,
    /// Per-hop constant (ns).
    pub per_hop: u64,
}

impl Graph<'_> {
    fn queues(&self, port: PortId) -> &QueueSet {
        if self.topo.is_host(self.topo.port(port).node) {
            self.host
        } else {
            self.switch
        }
    }

    /// Lower bound of the delay from a switch `hops` hops away from the destination.
    fn lower_bound(&self, hops: u32) -> u64 {
        u64::from(hops).saturating_mul(self.switch.min_budget().as_nanos() + self.per_hop)
    }
}

/// Search for the least-weight path from `q.src` to `q.dst` whose every edge passes `admit`.
/// `penalty` multiplies the cost metric of penalised ports (see [`Scratch::penalise`]).
pub fn search(
    g: Graph<'_>,
    sc: &mut Scratch,
    q: Query,
    metric: Metric,
    w: Weights,
    penalty: u64,
    admit: &mut dyn FnMut(HopCheck) -> bool,
) -> Option<Found> {
    let topo = g.topo;
    // one label per (node, hop index) within a switch limit: the index of a hop out of a
    // switch is the number of switches crossed up to it, and the hop into the destination
    // has the index of the path's last switch
    let layers = q.max_switches.map_or(1, |m| usize::from(m) + 1);
    let slot = |node: NodeId, index: u16| {
        if layers == 1 {
            node
        } else {
            node * layers + usize::from(index)
        }
    };
    let n = topo.nodes().len() * layers;
    if sc.settled.len() != n {
        sc.settled = vec![0; n];
        sc.gen = 0;
    }
    sc.gen = sc.gen.wrapping_add(1);
    if sc.gen == 0 {
        sc.settled.iter_mut().for_each(|x| *x = 0);
        sc.gen = 1;
    }
    let gen = sc.gen;
    sc.hops_to(topo, q.dst);
    sc.labels.clear();
    sc.heap.clear();
    let mut seq = 0u64;

    // edges into the destination: (switch, port)
    let into_dst: Vec<(NodeId, PortId)> =
        topo.node_ports(q.dst).iter().map(|&p| (topo.port(p).peer, topo.port(p).reverse)).collect();

    let push = |sc: &mut Scratch, from: Option<(u32, Label)>, port: PortId, seq: &mut u64| {
        let peer = topo.port(port).peer;
        let (delay0, budgets0, cost0, pred, index) = match from {
            Some((i, l)) => (l.delay, l.budgets, l.cost, i, l.index.saturating_add(1)),
            None => (0, 0, 0.0, NONE, 0),
        };
        if peer == q.src || sc.settled[slot(peer, index)] == gen {
            return;
        }
        let to_go = if peer == q.dst { 0 } else { sc.hops[peer] };
        if to_go == u32::MAX {
            return;
        }
        if let Some(m) = q.max_switches {
            if u32::from(index) + to_go > u32::from(m) || visits(&sc.labels, pred, peer) {
                return;
            }
        }
        let lb = g.lower_bound(to_go);
        let set = g.queues(port);
        let mult = if penalty > 1 && sc.penalised(port) { penalty as f64 } else { 1.0 };
        for (j, d) in set.budgets.iter().enumerate() {
            let budget = d.as_nanos();
            let hop_delay = budget + g.per_hop;
            let delay = delay0.saturating_add(hop_delay);
            if q.prune && delay.saturating_add(lb) > q.deadline {
                continue;
            }
            let c = metric.cost(budget, hop_delay) * mult;
            let cost = cost0 + c;
            let key = w.alpha * cost + w.beta * delay as f64;
            let label = Label {
                node: peer,
                hop: PathHop { port, queue: j as u8 },
                pred,
                index,
                delay,
                budgets: budgets0 + budget,
                cost,
            };
            let idx = sc.labels.len() as u32;
            sc.labels.push(label);
            sc.heap.push(HeapKey { key, seq: *seq, label: idx });
            *seq += 1;
        }
    };

    for &p in topo.node_ports(q.src) {
        let peer = topo.port(p).peer;
        if peer == q.dst || !topo.is_host(peer) {
            push(sc, None, p, &mut seq);
        }
    }

    while let Some(HeapKey { label: li, .. }) = sc.heap.pop() {
        let l = sc.labels[li as usize];
        if sc.settled[slot(l.node, l.index)] == gen {
            continue;
        }
        let (input, before) = if l.pred == NONE {
            (None, 0)
        } else {
            let p = sc.labels[l.pred as usize];
            (Some(p.hop.port), p.budgets)
        };
        let check = HopCheck {
            port: l.hop.port,
            queue: l.hop.queue,
            budgets_before: before,
            input,
            index: l.index,
        };
        if !admit(check) {
            continue;
        }
        sc.settled[slot(l.node, l.index)] = gen;
        if l.node == q.dst {
            let mut hops = Vec::new();
            let mut i = li;
            while i != NONE {
                let x = sc.labels[i as usize];
                hops.push(x.hop);
                i = x.pred;
            }
            hops.reverse();
            return Some(Found { hops, cost: l.cost, delay: l.delay });
        }
        for k in 0..topo.switch_ports(l.node).len() {
            let p = topo.switch_ports(l.node)[k];
            push(sc, Some((li, l)), p, &mut seq);
        }
        for &(sw, p) in &into_dst {
            if sw == l.node {
                push(sc, Some((li, l)), p, &mut seq);
            }
        }
    }
    None
}

/// The search `routing` names: least delay, fewest hops (ties: least delay) or LARAC.
pub fn by(
    routing: Routing,
    g: Graph<'_>,
    sc: &mut Scratch,
    q: Query,
    penalty: u64,
    admit: &mut dyn FnMut(HopCheck) -> bool,
) -> Option<Found> {
    match routing {
        Routing::LeastDelay => {
            let w = Weights { alpha: 1.0, beta: 0.0 };
            search(g, sc, q, Metric::Delay, w, penalty, admit)
        }
        Routing::MinHops => {
            let w = Weights { alpha: 1.0, beta: 1e-12 };
            search(g, sc, q, Metric::Hops, w, penalty, admit)
        }
        Routing::Larac => larac(g, sc, q, Metric::OnePlusMs, penalty, 20, admit),
    }
}

/// Does the path ending in label `at` (`NONE`: the empty path) visit `node`? Walks back at
/// most the limit on switches.
fn visits(labels: &[Label], mut at: u32, node: NodeId) -> bool {
    while at != NONE {
        let l = labels[at as usize];
        if l.node == node {
            return true;
        }
        at = l.pred;
    }
    false
}

/// LARAC (Jüttner, Szviatovszki, Mécs, Rajkó, INFOCOM 2001): delay-constrained least-cost by
/// Lagrangian relaxation, over [`search`] (so every candidate path passes the access check).
/// At most `max_iter` relaxation steps.
#[allow(clippy::too_many_arguments)]
pub fn larac(
    g: Graph<'_>,
    sc: &mut Scratch,
    q: Query,
    metric: Metric,
    penalty: u64,
    max_iter: usize,
    admit: &mut dyn FnMut(HopCheck) -> bool,
) -> Option<Found> {
    let unpruned = Query { prune: false, ..q };
    let pc = search(g, sc, unpruned, metric, Weights { alpha: 1.0, beta: 0.0 }, penalty, admit)?;
    if pc.delay <= q.deadline {
        return Some(pc);
    }
    let pruned = Query { prune: true, ..q };
    let mut pd = search(g, sc, pruned, metric, Weights { alpha: 0.0, beta: 1.0 }, penalty, admit)?;
    if pd.delay > q.deadline {
        return None;
    }
    let mut pc = pc;
    for _ in 0..max_iter {
        // pd meets the deadline, pc does not: d(pc) > d(pd), and c(pc) <= c(pd)
        let dd = pc.delay as f64 - pd.delay as f64;
        if dd <= 0.0 {
            break;
        }
        let lambda = ((pd.cost - pc.cost) / dd).max(0.0);
        let w = Weights { alpha: 1.0, beta: lambda };
        let Some(r) = search(g, sc, unpruned, metric, w, penalty, admit) else { break };
        let lr = r.cost + lambda * r.delay as f64;
        let lc = pc.cost + lambda * pc.delay as f64;
        if (lr - lc).abs() <= 1e-9 * lc.abs().max(1.0) {
            break;
        }
        if r.delay <= q.deadline {
            pd = r;
        } else {
            pc = r;
        }
    }
    Some(pd)
}
