//! The built network: one egress port per link direction, and a FIB per node.
//!
//! Routes are computed as shortest paths toward every host (fewest hops or least delay, per
//! `sim.routing`), ties broken by the lower link index so the result does not depend on
//! hashing; explicit `[[routes]]` override them.

use crate::scenario::{NodeKind, RoutingMetric, Scenario};
use latnet_units::{Duration, Rate};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// No forwarding entry.
pub const NO_PORT: u32 = u32::MAX;

/// A directed link end: the egress port of `node` toward `peer`.
#[derive(Debug, Clone)]
pub struct PortTopo {
    /// Owning node.
    pub node: usize,
    /// Index of this port within its node's ports.
    pub local: u16,
    /// Node at the other end.
    pub peer: usize,
    /// The port of `peer` that points back (its ingress for our frames).
    pub reverse: usize,
    /// Link index in the scenario.
    pub link: usize,
    /// Rate.
    pub rate: Rate,
    /// Propagation delay.
    pub delay: Duration,
    /// Per-frame overhead bytes for serialization.
    pub overhead: u32,
}

/// Ports and FIB of a scenario.
#[derive(Debug, Clone)]
pub struct Topology {
    /// All ports; link `i` owns ports `2i` (a to b) and `2i + 1` (b to a).
    pub ports: Vec<PortTopo>,
    /// Ports of each node, in link order.
    pub node_ports: Vec<Vec<usize>>,
    /// `fib[node][dst]`: egress port toward host `dst`, or [`NO_PORT`].
    pub fib: Vec<Vec<u32>>,
}

impl Topology {
    /// Build ports and routes.
    pub fn build(sc: &Scenario) -> Topology {
        let n = sc.nodes.len();
        let mut ports = Vec::with_capacity(sc.links.len() * 2);
        let mut node_ports = vec![Vec::new(); n];
        for (i, l) in sc.links.iter().enumerate() {
            for (node, peer, reverse) in [(l.a, l.b, 2 * i + 1), (l.b, l.a, 2 * i)] {
                let local = node_ports[node].len() as u16;
                node_ports[node].push(ports.len());
                ports.push(PortTopo {
                    node,
                    local,
                    peer,
                    reverse,
                    link: i,
                    rate: l.rate,
                    delay: l.delay,
                    overhead: l.overhead,
                });
            }
        }
        let mut fib = vec![vec![NO_PORT; n]; n];
        for dst in (0..n).filter(|&d| sc.nodes[d].kind == NodeKind::Host) {
            let dist = distances_to(sc, &ports, &node_ports, dst);
            for node in 0..n {
                if node == dst || dist[node] == u64::MAX {
                    continue;
                }
                // Hosts do not forward: a path may only pass through switches.
                let best = node_ports[node]
                    .iter()
                    .copied()
                    .filter(|&p| {
                        let peer = ports[p].peer;
                        peer == dst || sc.nodes[peer].kind == NodeKind::Switch
                    })
                    .filter(|&p| dist[ports[p].peer] != u64::MAX)
                    .min_by_key(|&p| (dist[ports[p].peer] + weight(sc.sim.routing, &ports[p]), p));
                if let Some(p) = best {
                    fib[node][dst] = p as u32;
                }
            }
        }
        for r in &sc.routes {
            if let Some(&p) = node_ports[r.node].iter().find(|&&p| ports[p].peer == r.next) {
                fib[r.node][r.dst] = p as u32;
            }
        }
        Topology { ports, node_ports, fib }
    }

    /// The sequence of nodes a packet from `src` to host `dst` visits, following the FIB;
    /// `None` if there is no route or a loop.
    pub fn path(&self, src: usize, dst: usize) -> Option<Vec<usize>> {
        let mut path = vec![src];
        let mut at = src;
        while at != dst {
            let p = *self.fib.get(at)?.get(dst)?;
            if p == NO_PORT || path.len() > self.fib.len() {
                return None;
            }
            at = self.ports[p as usize].peer;
            path.push(at);
        }
        Some(path)
    }
}

fn weight(m: RoutingMetric, p: &PortTopo) -> u64 {
    match m {
        RoutingMetric::Hops => 1,
        // +1 so that zero-delay links still count a hop.
        RoutingMetric::Delay => p.delay.as_nanos().saturating_add(1),
    }
}

/// Shortest distance from every node to host `dst`, traversing only switches in between.
fn distances_to(
    sc: &Scenario,
    ports: &[PortTopo],
    node_ports: &[Vec<usize>],
    dst: usize,
) -> Vec<u64> {
    let mut dist = vec![u64::MAX; sc.nodes.len()];
    dist[dst] = 0;
    let mut heap = BinaryHeap::from([Reverse((0u64, dst))]);
    while let Some(Reverse((d, v))) = heap.pop() {
        if d > dist[v] {
            continue;
        }
        // Hosts other than the destination are leaves: nothing is routed through them.
        if v != dst && sc.nodes[v].kind == NodeKind::Host {
            continue;
        }
        for &p in &node_ports[v] {
            // Links are symmetric: the reverse port (u -> v) has the same weight.
            let u = ports[p].peer;
            let nd = d.saturating_add(weight(sc.sim.routing, &ports[ports[p].reverse]));
            if nd < dist[u] {
                dist[u] = nd;
                heap.push(Reverse((nd, u)));
            }
        }
    }
    dist
}
