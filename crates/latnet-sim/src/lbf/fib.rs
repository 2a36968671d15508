//! The LBF FIB (remaining hops and minimum remaining latency per destination, computed from
//! the topology) and what every LBF participant of a run shares: ports, settings, flows' SLOs.

use super::*;

/// One FIB entry of an LBF switch: toward one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbfRoute {
    /// Remaining hops, this switch included.
    pub hops: u32,
    /// Sum of link delays to the destination (or the override).
    pub min_latency: Duration,
    /// Egress ports from here to the destination (for serialization, physical convention);
    /// empty for an override.
    pub path: Vec<u32>,
}

/// The LBF FIB: `routes[node][dst]`, computed from the topology (following the forwarding
/// FIB) for every switch running LBF, then overridden by `[[lbf.fib]]`.
#[derive(Debug, Clone, Default)]
pub struct LbfFib {
    pub(super) routes: Vec<Vec<Option<LbfRoute>>>,
}

impl LbfFib {
    /// Compute the FIB of every LBF switch of `sc`.
    pub fn build(sc: &Scenario, topo: &Topology) -> LbfFib {
        let n = sc.nodes.len();
        let mut routes = vec![Vec::new(); n];
        let Some(l) = &sc.lbf else { return LbfFib { routes } };
        for (node, row) in routes.iter_mut().enumerate() {
            if l.nodes.get(node).and_then(Option::as_ref).is_none() {
                continue;
            }
            *row = (0..n)
                .map(|dst| {
                    if sc.nodes[dst].kind != NodeKind::Host {
                        return None;
                    }
                    let mut path = Vec::new();
                    let mut at = node;
                    while at != dst {
                        let p = topo.fib[at][dst];
                        if p == NO_PORT || path.len() > n {
                            return None;
                        }
                        path.push(p);
                        at = topo.ports[p as usize].peer;
                    }
                    let min_latency = path.iter().map(|&p| topo.ports[p as usize].delay).sum();
                    Some(LbfRoute { hops: path.len() as u32, min_latency, path })
                })
                .collect();
        }
        for o in &l.fib {
            if let Some(slot) = routes.get_mut(o.node).and_then(|r| r.get_mut(o.dst)) {
                *slot =
                    Some(LbfRoute { hops: o.hops, min_latency: o.min_latency, path: Vec::new() });
            }
        }
        LbfFib { routes }
    }

    /// The route of `node` toward `dst`.
    pub fn route(&self, node: usize, dst: usize) -> Option<&LbfRoute> {
        self.routes.get(node)?.get(dst)?.as_ref()
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct PortInfo {
    pub(super) delay: Duration,
    pub(super) rate: Rate,
    pub(super) overhead: u32,
    /// Serialization on this link is part of the latency the block counts.
    pub(super) ser_counted: bool,
    /// Damper bound of the host owning the port (zero for a switch's port).
    pub(super) host_damper: Duration,
    /// The port transmitting toward this one on the same link.
    pub(super) reverse: usize,
}

/// What every LBF participant of a run shares (read-only).
#[derive(Debug, Clone)]
pub struct LbfNet {
    pub(super) fib: LbfFib,
    pub(super) ports: Vec<PortInfo>,
    /// Ports of each node, by local index (what `Meta::ingress_port` holds).
    pub(super) node_ports: Vec<Vec<usize>>,
    pub(super) settings: Vec<Option<LbfSettings>>,
    pub(super) flows: Vec<Option<FlowSlo>>,
    pub(super) convention: LatencyConvention,
    pub(super) switching: Switching,
    pub(super) node_names: Vec<String>,
    pub(super) flow_names: Vec<String>,
    /// What the senders' clock reads when the forwarders' clock reads zero: 0 in the
    /// simulator (one clock); the real-time switch's start on `CLOCK_MONOTONIC`, which the
    /// emulated senders stamp (see [`LbfState::with_clock_origin`]).
    pub(super) clock_origin_ns: u64,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct FlowSlo {
    pub(super) slo: SloSpec,
    /// Offset of the block in the flow's frames.
    pub(super) offset: usize,
}

impl LbfNet {
    pub(super) fn hop_cost(&self, now: Time, port: usize, pkt: &Packet) -> Duration {
        let transit = now.saturating_duration_since(pkt.meta.arrival);
        let Some(p) = self.ports.get(port) else { return transit };
        transit + p.delay + self.counted_ser(port, pkt)
    }

    /// Under `cut-through`, how long switch `node` has `pkt` (from its first bit) before it can
    /// queue it on `port`: toward a faster egress the frame waits for its last bit, `tail -
    /// serialization out`, `tail` being its serialization on the ingress link (the rule of the
    /// simulator and of the real-time switch). The runners count the wait as serialization
    /// (`ser_so_far`): under `physical` it is latency, under `exclude-serialization` it is not.
    pub(super) fn cut_through_wait(&self, node: usize, port: usize, pkt: &Packet) -> Duration {
        if self.switching != Switching::CutThrough {
            return Duration::ZERO;
        }
        let tx = |p: &PortInfo| {
            p.rate.tx_time(pkt.wire_len() + Bytes::new(u64::from(p.overhead))).unwrap_or_default()
        };
        let upstream = self
            .node_ports
            .get(node)
            .and_then(|ps| ps.get(usize::from(pkt.meta.ingress_port)))
            .and_then(|&local| self.ports.get(local))
            .and_then(|p| self.ports.get(p.reverse));
        match (upstream, self.ports.get(port)) {
            (Some(up), Some(out)) => crate::switch::cut_through_hold(tx(up), tx(out)),
            _ => Duration::ZERO,
        }
    }

    /// The part of a [`Self::cut_through_wait`] the run's convention counts as latency.
    pub(super) fn counted(&self, wait: Duration) -> Duration {
        match self.convention {
            LatencyConvention::Physical => wait,
            LatencyConvention::ExcludeSerialization => Duration::ZERO,
        }
    }

    /// The serialization of `pkt` on `port` where the run's convention counts it.
    pub(super) fn counted_ser(&self, port: usize, pkt: &Packet) -> Duration {
        match self.ports.get(port) {
            Some(p) if p.ser_counted => p
                .rate
                .tx_time(pkt.wire_len() + Bytes::new(u64::from(p.overhead)))
                .unwrap_or(Duration::ZERO),
            _ => Duration::ZERO,
        }
    }

    /// The damper residue of a packet leaving `port` after `queued` in a hop of bound `bound`:
    /// what the next hop holds it so that the hop costs exactly `bound` plus the link delay
    /// (queueing, plus the serialization where counted, plus the hold); `None` when the hop
    /// already took longer (a violation; the residue is then 0).
    pub(super) fn damper_residue(
        &self,
        port: usize,
        pkt: &Packet,
        queued: Duration,
        bound: Duration,
    ) -> Option<Duration> {
        bound.checked_sub(queued + self.counted_ser(port, pkt))
    }

    /// The least latency left on `route` for a frame of `size`: the links' delays and the
    /// serialization the convention counts. Store-and-forward, each link's; cut-through, the
    /// slowest link's (a switch cannot finish sending before the last bit arrived, so the frame
    /// is whole at the host no sooner than that after its first bit left).
    pub(super) fn remaining(&self, route: &LbfRoute, size: Bytes) -> Duration {
        let ser = |p: &PortInfo| {
            p.rate.tx_time(size + Bytes::new(u64::from(p.overhead))).unwrap_or_default()
        };
        let ports = route.path.iter().filter_map(|&p| self.ports.get(p as usize));
        let ser = if self.convention == LatencyConvention::ExcludeSerialization {
            Duration::ZERO
        } else if self.switching == Switching::CutThrough {
            ports.map(ser).max().unwrap_or_default()
        } else {
            ports.filter(|p| p.ser_counted).map(ser).sum()
        };
        route.min_latency + ser
    }
}
