//! QJump as Chameleon's evaluation implements it (paper §2.1.1, §5.1.1; Grosvenor et al.,
//! NSDI 2015): a network epoch `2 n P / R + ε`; a flow is admitted iff fewer than `n` flows
//! were admitted, its rate is at most `P / epoch`, its burst at most `P` and its deadline at
//! least the epoch. Flows take a shortest path (fewest hops, lowest port first); nothing is
//! checked per link.

use crate::controller::{FlowId, FlowRequest, Rejection};
use crate::topo::{NodeId, PortId, Topology};
use latnet_units::{Bytes, Duration, Rate, Rounding};
use std::collections::BTreeMap;
use std::sync::Arc;

/// QJump's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QjumpConfig {
    /// Flows admitted at most (`n`; 32 in the paper's k = 4 study).
    pub n: usize,
    /// Packet size `P` (1,500 B).
    pub packet: Bytes,
    /// Link rate `R` (1 Gbit/s).
    pub rate: Rate,
    /// Cumulative processing `ε` (4 µs).
    pub epsilon: Duration,
}

impl Default for QjumpConfig {
    fn default() -> Self {
        QjumpConfig {
            n: 32,
            packet: Bytes::new(1500),
            rate: Rate::from_gbps(1),
            epsilon: Duration::from_micros(4),
        }
    }
}

impl QjumpConfig {
    /// The epoch `2 n P / R + ε`.
    pub fn epoch(&self) -> Duration {
        let bits = 2 * self.n as u64 * self.packet.get() * 8;
        let ns = latnet_units::mul_div(
            u128::from(bits),
            1_000_000_000,
            u128::from(self.rate.bps()),
            Rounding::Up,
        )
        .unwrap_or(u64::MAX);
        Duration::from_nanos(ns) + self.epsilon
    }

    /// The largest rate a flow may have: one packet per epoch.
    pub fn max_rate(&self) -> Rate {
        Rate::from_size_per(self.packet, self.epoch(), Rounding::Down).unwrap_or(Rate::ZERO)
    }
}

/// A QJump admission controller.
#[derive(Debug, Clone)]
pub struct Qjump {
    topo: Arc<Topology>,
    cfg: QjumpConfig,
    flows: BTreeMap<FlowId, (FlowRequest, Vec<PortId>)>,
    reserved: Vec<u128>,
    next_id: FlowId,
}

impl Qjump {
    /// An empty controller.
    pub fn new(topo: Arc<Topology>, cfg: QjumpConfig) -> Qjump {
        let n = topo.ports().len();
        Qjump { topo, cfg, flows: BTreeMap::new(), reserved: vec![0; n], next_id: 0 }
    }

    /// The configuration.
    pub fn config(&self) -> &QjumpConfig {
        &self.cfg
    }

    /// Number of admitted flows.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// True if nothing is admitted.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Reserved rate of every port (bit/s).
    pub fn reserved_rates(&self) -> &[u128] {
        &self.reserved
    }

    /// The path of an admitted flow (ports).
    pub fn path(&self, id: FlowId) -> Option<&[PortId]> {
        self.flows.get(&id).map(|(_, p)| p.as_slice())
    }

    /// Admit a flow or say why not. Invalid requests are checked as by the Chameleon
    /// controller (hosts, positive parameters).
    pub fn request(&mut self, r: FlowRequest) -> Result<FlowId, Rejection> {
        let name = |n: NodeId| self.topo.nodes().get(n).map(|x| x.name.clone());
        let (Some(s), Some(d)) = (name(r.src), name(r.dst)) else {
            return Err(Rejection::UnknownHost(format!("#{}", r.src.max(r.dst))));
        };
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
        let Some(path) = self.topo.shortest_path(r.src, r.dst) else {
            return Err(Rejection::Unreachable(s, d));
        };
        if self.flows.len() >= self.cfg.n {
            return Err(Rejection::QjumpFull(self.cfg.n));
        }
        if r.rate > self.cfg.max_rate() {
            return Err(Rejection::QjumpRate(self.cfg.max_rate()));
        }
        if r.burst > self.cfg.packet {
            return Err(Rejection::QjumpBurst(self.cfg.packet));
        }
        if r.deadline < self.cfg.epoch() {
            return Err(Rejection::QjumpDeadline(self.cfg.epoch()));
        }
        for &p in &path {
            self.reserved[p] += u128::from(r.rate.bps());
        }
        let id = self.next_id;
        self.next_id += 1;
        self.flows.insert(id, (r, path));
        Ok(id)
    }

    /// Remove a flow.
    pub fn remove(&mut self, id: FlowId) -> Option<FlowRequest> {
        let (r, path) = self.flows.remove(&id)?;
        for p in path {
            self.reserved[p] -= u128::from(r.rate.bps());
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_and_rate_limit_match_the_paper() {
        let c = QjumpConfig::default();
        // 2 * 32 * 1500 B * 8 / 1 Gbps + 4 us = 772 us
        assert_eq!(c.epoch(), Duration::from_micros(772));
        // 1500 B per 772 us = 15.54 Mbit/s
        assert_eq!(c.max_rate().bps(), 15_544_041);
        // the paper's §2.1.1 example: 10 Gbps, n = 160, P = 300 B: 80.8 us, 29.7 Mbps
        let ex = QjumpConfig { n: 160, packet: Bytes::new(300), rate: Rate::from_gbps(10), ..c };
        assert_eq!(ex.epoch(), Duration::from_nanos(80_800));
        assert_eq!(ex.max_rate().bps() / 100_000, 297);
    }
}
