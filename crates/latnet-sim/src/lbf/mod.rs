//! Latency-Based Forwarding in the simulator: the LBF forwarder of a switch, what hosts do to
//! the LBF block of their flows, and the LBF part of the results.
//!
//! Source: Clemm & Eckert, "High-Precision Latency Forwarding over Packet-Programmable
//! Networks", NOMS 2020 (section IV), its proof of concept (github network2030/lbf-poc), and
//! gLBF (IETF DetNet draft) for the damper.
//!
//! # Per packet, at an LBF switch ([`LbfSwitch::forward`])
//!
//! 1. Destination lookup, TTL and priority as [`crate::switch::fib_forward`].
//! 2. Find the block ([`latnet_wire::lbf::locate`]). None: best effort (eligible at once, no
//!    deadline). Malformed: drop, `lbf-malformed`, counted.
//! 3. Latency so far `L`: the block's value (`latency-so-far`), `now - timestamp`
//!    (`timestamp`; under the seed's convention minus the serialization the packet met, see
//!    below), or 0 with the bounds read as what remains (`rest-slo`).
//! 4. From the LBF FIB ([`LbfFib`]): remaining hops `h` (this switch included) and minimum
//!    remaining latency `m` (link delays to the destination, plus serialization where the
//!    latency convention counts it). `spent = L + m`.
//! 5. Upper bound `ub`: if `spent > ub` the packet is hopeless: `upper = "drop"` drops it
//!    (`hopeless-early-drop`); `upper = "mark"` sets the late flag, writes a notification record
//!    and forwards it as best effort. Otherwise it becomes hopeless at
//!    `late_at = now + ub - spent`.
//! 6. Lower-bound budget `qmin` = `(lb - spent) / h` (`budget = "equal"`) or
//!    `(lb - spent) / (h + s (h - 1))` (`"skew"`), 0 if `spent >= lb`: eligible at `now + qmin`.
//! 7. Upper-bound budget `qmax = (ub - spent) / h` (with `best_effort_upper` for packets without
//!    a bound): deadline `now + qmax`, the ordering key of the budget / slack / dynamic queues.
//! 8. Queue expiry (`upper = "drop"`): `late_at` (`expire = "hopeless"`), the deadline
//!    (`"hop-budget"`, the PoC) or none.
//!
//! A damper-mode packet (gLBF) is simply held: eligible at `now + residue`.
//!
//! # At the start of each transmission ([`LbfSwitch::on_transmit`], [`LbfState::host_transmit`])
//!
//! The hop's cost is `transit + link delay (+ serialization where counted)`, `transit` being
//! the time since the packet arrived at this node. `latency-so-far` adds it to the value,
//! `rest-slo` subtracts it from both bounds (saturating at 0), `damper` writes the new residue
//! `B - (now - eligible) - serialization where counted` (`B` = `damper_bound` of the switch, or
//! of the sending host's own queue; 0 at hosts without one), so that every hop costs exactly
//! `B` plus the link delay; a hop that took longer counts a damper violation. With
//! `upper = "mark"`, a packet past its `late_at` is marked late here.
//!
//! # Latency conventions
//!
//! Under `sim.latency = "exclude-serialization"` (the seed's) nothing of serialization enters
//! the block or the FIB; under `"physical"` the serialization of every link a frame must be
//! whole to cross (all of them store-and-forward; only the last, into the host, with
//! `sim.switching = "cut-through"`) is counted in the hop cost, and in `m` each link's
//! (store-and-forward) or the slowest link's (cut-through: a switch cannot finish sending a
//! frame before its last bit arrived). With sender
//! timestamps the simulator subtracts the serialization the packet met on store-and-forward
//! links under the seed's convention (a real switch could not; the seed's PoC avoided the
//! question with a link model in which serialization never delays arrival, which is
//! `switching = "cut-through"`).
//!
//! Under cut-through a frame toward a faster egress than it came in on joins the queue only
//! once its last bit is near (`tail - serialization out` after its first bit; the runners count
//! that wait as serialization). The switch computes the budgets from that instant (eligible
//! time, deadline, `late_at`), and under `physical` counts the wait as latency: in `spent` at
//! arrival and in the hop cost at transmission.

mod fib;
mod frames;
mod results;

use fib::{FlowSlo, PortInfo};
pub use fib::{LbfFib, LbfNet, LbfRoute};
use frames::wire_mode;
pub use frames::{carry_name, flow_address, host_addresses, ipv6_of, template, uses_ipv6};
pub use results::{LbfFlowResult, LbfResults, LbfSwitchResult};

use crate::hdr;
use crate::net::{Topology, NO_PORT};
use crate::scenario::{
    BudgetRule, Carry, Encap, ExpirePolicy, FlowSpec, LatencyConvention, LbfSettings, NodeKind,
    Scenario, SloSpec, Switching, UpperPolicy,
};
use crate::switch::{fib_forward, Forward, SwitchCtx};
use latnet_dataplane::{DropReason, Packet};
use latnet_units::{Bytes, Duration, Rate, Time};
use latnet_wire::lbf::{self as wire, LbfMode, LbfRepr};
use latnet_wire::{parse_headers, WireError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// Most notification records a run keeps (the total is always counted).
pub const MAX_NOTIFICATIONS: usize = 10_000;

/// A record of a packet marked late (`upper = "mark"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    /// When (ns).
    pub time_ns: u64,
    /// The switch that marked it.
    pub node: String,
    /// Flow name.
    pub flow: String,
    /// Sequence number in the flow.
    pub seq: u64,
    /// Latency so far plus minimum remaining latency at that moment (ns): what it would at
    /// least arrive with.
    pub projected_ns: u64,
    /// Its upper bound (ns).
    pub upper_ns: u64,
}

/// Counters of one LBF switch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LbfCounters {
    /// Packets with a valid LBF block.
    pub lbf_packets: u64,
    /// Packets without a block (best effort).
    pub best_effort: u64,
    /// Packets dropped because their block was malformed.
    pub malformed: u64,
    /// Packets dropped at arrival because they could no longer meet their upper bound.
    pub early_drops: u64,
    /// Packets marked late here.
    pub marked_late: u64,
    /// Damper-mode packets that queued here longer than the damper bound.
    pub damper_violations: u64,
}

/// The forwarding model of an LBF switch.
#[derive(Debug, Clone)]
pub struct LbfSwitch {
    net: Arc<LbfNet>,
    node: usize,
    settings: LbfSettings,
    /// Counters.
    pub counters: LbfCounters,
    notifications: Vec<Notification>,
    notified: u64,
}

/// `now + ns`, saturating.
fn after(now: Time, ns: u64) -> Time {
    now.checked_add_duration(Duration::from_nanos(ns)).unwrap_or(Time::MAX)
}

/// The budget split of step 6.
fn lower_budget(rem: u64, hops: u32, s: &LbfSettings) -> u64 {
    let h = u128::from(hops.max(1));
    let num = u128::from(rem);
    let q = match s.budget {
        BudgetRule::Equal => num / h,
        BudgetRule::Skew => {
            let k = u128::from(s.skew_permille);
            num * 1000 / (1000 * h + k * (h - 1))
        }
    };
    u64::try_from(q).unwrap_or(u64::MAX)
}

impl LbfSwitch {
    /// A notification of `pkt`, marked late at `now`: it would at least arrive with
    /// `projected` against its upper bound `upper`, both as its block has them. Under
    /// `rest-slo` the block holds what is left of the bounds; the record is end to end in every
    /// mode, so the flow's latency so far (its end-to-end upper bound less what is left of it)
    /// is added back.
    fn notify(&mut self, now: Time, pkt: &Packet, mode: LbfMode, projected: u64, upper: u64) {
        let flow = pkt.meta.flow as usize;
        let slo_upper = self.net.flows.get(flow).and_then(|f| f.as_ref()?.slo.upper);
        let so_far = match (mode, slo_upper) {
            (LbfMode::RestSlo, Some(u)) => u.as_nanos().saturating_sub(upper),
            _ => 0,
        };
        let (projected, upper) = (projected.saturating_add(so_far), upper.saturating_add(so_far));
        self.counters.marked_late += 1;
        self.notified += 1;
        if self.notifications.len() < MAX_NOTIFICATIONS {
            self.notifications.push(Notification {
                time_ns: now.as_nanos(),
                node: self.net.node_names.get(self.node).cloned().unwrap_or_default(),
                flow: self.net.flow_names.get(flow).cloned().unwrap_or_default(),
                seq: pkt.meta.seq,
                projected_ns: projected,
                upper_ns: upper,
            });
        }
    }

    /// The notification records kept (the first [`MAX_NOTIFICATIONS`]) and how many there were.
    pub fn notifications(&self) -> (&[Notification], u64) {
        (&self.notifications, self.notified)
    }

    /// Decide where `pkt` goes and when it may leave (see the module documentation).
    pub fn forward(&mut self, cx: &SwitchCtx<'_>, pkt: &mut Packet) -> Forward {
        let port = match fib_forward(cx, pkt) {
            Forward::Port(p) => p,
            d => return d,
        };
        let now = cx.now;
        pkt.meta.eligible = now;
        pkt.meta.deadline = None;
        pkt.meta.expires = None;
        pkt.meta.late_at = None;
        let Ok(h) = parse_headers(&pkt.data) else { return Forward::Drop(DropReason::Malformed) };
        let loc = match wire::locate(&pkt.data, &h, self.settings.udp_shim) {
            Ok(Some(l)) => l,
            Ok(None) => {
                self.counters.best_effort += 1;
                return Forward::Port(port);
            }
            Err(_) => {
                self.counters.malformed += 1;
                return Forward::Drop(DropReason::LbfMalformed);
            }
        };
        self.counters.lbf_packets += 1;
        let r = loc.repr;
        if r.mode == LbfMode::Damper {
            pkt.meta.eligible = after(now, r.value_ns);
            return Forward::Port(port);
        }
        if r.late {
            return Forward::Port(port);
        }
        let dst = h.key.and_then(|k| cx.hosts.get(&k.dst).copied());
        let (hops, rml) = match dst.and_then(|d| self.net.fib.route(self.node, d)) {
            Some(route) => (route.hops, self.net.remaining(route, pkt.wire_len()).as_nanos()),
            None => (1, 0),
        };
        let latency = match r.mode {
            LbfMode::SenderTimestamp => {
                let mut l = now
                    .as_nanos()
                    .saturating_add(self.net.clock_origin_ns)
                    .saturating_sub(r.value_ns);
                if self.net.convention == LatencyConvention::ExcludeSerialization {
                    l = l.saturating_sub(pkt.meta.ser_so_far.as_nanos());
                }
                l
            }
            LbfMode::RestSlo => 0,
            _ => r.value_ns,
        };
        // Cut-through toward a faster egress, the frame joins the queue only once its last bit
        // is near: budgets run from then, and the wait is latency under `physical`.
        let wait = self.net.cut_through_wait(self.node, port, pkt);
        let at = now + wait;
        let latency = latency.saturating_add(self.net.counted(wait).as_nanos());
        let spent = latency.saturating_add(rml);
        if let Some(ub) = r.upper_ns {
            if spent > ub {
                match self.settings.upper {
                    UpperPolicy::Drop => {
                        self.counters.early_drops += 1;
                        return Forward::Drop(DropReason::HopelessEarlyDrop);
                    }
                    UpperPolicy::Mark => {
                        if let Some(mut b) = wire::block_mut(&mut pkt.data, loc.offset) {
                            b.set_late(true);
                        }
                        self.notify(now, pkt, r.mode, spent, ub);
                        return Forward::Port(port);
                    }
                }
            }
            pkt.meta.late_at = Some(after(at, ub - spent));
        }
        let qmin = lower_budget(r.lower_ns.saturating_sub(spent), hops, &self.settings);
        pkt.meta.eligible = after(at, qmin);
        let ub_eff = r.upper_ns.or(self.settings.best_effort_upper.map(Duration::as_nanos));
        if let Some(ub) = ub_eff {
            let qmax = ub.saturating_sub(spent) / u64::from(hops.max(1));
            pkt.meta.deadline = Some(after(at, qmax.max(qmin)));
        }
        if r.upper_ns.is_some() && self.settings.upper == UpperPolicy::Drop {
            pkt.meta.expires = match self.settings.expire {
                ExpirePolicy::Hopeless => pkt.meta.late_at,
                ExpirePolicy::HopBudget => pkt.meta.deadline,
                ExpirePolicy::Never => None,
            };
        }
        Forward::Port(port)
    }

    /// `pkt` starts transmission on `port` at `now`: update its block.
    pub fn on_transmit(&mut self, now: Time, port: usize, pkt: &mut Packet) {
        let Ok(h) = parse_headers(&pkt.data) else { return };
        let Ok(Some(loc)) = wire::locate(&pkt.data, &h, self.settings.udp_shim) else { return };
        let wait = self.net.counted(self.net.cut_through_wait(self.node, port, pkt));
        let cost = (self.net.hop_cost(now, port, pkt) + wait).as_nanos();
        let mark = self.settings.upper == UpperPolicy::Mark
            && !loc.repr.late
            && pkt.meta.late_at.is_some_and(|t| now > t);
        let queued = now.saturating_duration_since(pkt.meta.eligible);
        let residue = self.net.damper_residue(port, pkt, queued, self.settings.damper_bound);
        if loc.repr.mode == LbfMode::Damper && residue.is_none() {
            self.counters.damper_violations += 1;
        }
        let Some(mut b) = wire::block_mut(&mut pkt.data, loc.offset) else { return };
        update_block(&mut b, loc.repr.mode, cost, residue.unwrap_or_default().as_nanos());
        if mark {
            b.set_late(true);
            let (upper, late_at) = (loc.repr.upper_ns.unwrap_or(0), pkt.meta.late_at);
            let over = late_at.map_or(0, |t| now.as_nanos() - t.as_nanos());
            self.notify(now, pkt, loc.repr.mode, upper.saturating_add(over), upper);
        }
    }
}

fn update_block(b: &mut wire::LbfBlock<&mut [u8]>, mode: LbfMode, cost: u64, residue: u64) {
    match mode {
        LbfMode::LatencySoFar => b.set_value_ns(b.value_ns().saturating_add(cost)),
        LbfMode::RestSlo => {
            b.set_lower_ns(b.lower_ns().saturating_sub(cost));
            if b.has_upper() {
                b.set_upper_ns(b.upper_ns().saturating_sub(cost));
            }
        }
        LbfMode::Damper => b.set_value_ns(residue),
        LbfMode::SenderTimestamp => {}
    }
}

/// The simulator's LBF state: the shared net, per-flow accounting.
#[derive(Debug)]
pub struct LbfState {
    net: Arc<LbfNet>,
    flows: Vec<LbfFlowResult>,
    /// Index into `flows` of each flow with an SLO.
    slo_idx: Vec<Option<usize>>,
}

impl LbfState {
    /// The LBF state of a run, or `None` if no switch runs LBF and no flow has an SLO.
    pub fn new(sc: &Scenario, topo: &Topology, offsets: &[Option<usize>]) -> Option<LbfState> {
        if sc.lbf.is_none() && sc.flows.iter().all(|f| f.slo.is_none()) {
            return None;
        }
        let ports = topo
            .ports
            .iter()
            .map(|p| PortInfo {
                delay: p.delay,
                rate: p.rate,
                overhead: p.overhead,
                ser_counted: sc.sim.latency == LatencyConvention::Physical
                    && sc.receives_whole_frames(p.peer),
                host_damper: sc
                    .lbf
                    .as_ref()
                    .and_then(|l| l.host_damper.get(p.node).copied())
                    .unwrap_or_default(),
                reverse: p.reverse,
            })
            .collect();
        let settings = sc.lbf.as_ref().map(|l| l.nodes.clone()).unwrap_or_default();
        let flows = sc
            .flows
            .iter()
            .zip(offsets)
            .map(|(f, o)| Some(FlowSlo { slo: f.slo?, offset: (*o)? }))
            .collect();
        let net = Arc::new(LbfNet {
            fib: LbfFib::build(sc, topo),
            ports,
            node_ports: topo.node_ports.clone(),
            settings,
            flows,
            convention: sc.sim.latency,
            switching: sc.sim.switching,
            node_names: sc.nodes.iter().map(|n| n.name.clone()).collect(),
            flow_names: sc.flows.iter().map(|f| f.name.clone()).collect(),
            clock_origin_ns: 0,
        });
        let flows = sc.flows.iter().filter_map(LbfFlowResult::new).collect();
        let mut k = 0;
        let slo_idx = sc
            .flows
            .iter()
            .map(|f| {
                f.slo.map(|_| {
                    k += 1;
                    k - 1
                })
            })
            .collect();
        Some(LbfState { net, flows, slo_idx })
    }

    /// The same state for forwarders whose clock starts `origin_ns` after the senders' clock
    /// (`carry = "timestamp"`: a block stamped `ts` by the sender has waited `now + origin - ts`
    /// at a forwarder reading `now`). Call it before [`LbfState::switch`]: switches made
    /// earlier keep the old origin.
    pub fn with_clock_origin(mut self, origin_ns: u64) -> LbfState {
        let mut net = (*self.net).clone();
        net.clock_origin_ns = origin_ns;
        self.net = Arc::new(net);
        self
    }

    /// The forwarder of `node` if it runs LBF.
    pub fn switch(&self, node: usize) -> Option<LbfSwitch> {
        let settings = self.net.settings.get(node)?.clone()?;
        Some(LbfSwitch {
            net: Arc::clone(&self.net),
            node,
            settings,
            counters: LbfCounters::default(),
            notifications: Vec::new(),
            notified: 0,
        })
    }

    /// The per-flow results so far (of the flows with an SLO, in scenario order).
    pub fn flow_results(&self) -> &[LbfFlowResult] {
        &self.flows
    }

    fn slo_index(&self, flow: usize) -> Option<usize> {
        self.slo_idx.get(flow).copied().flatten()
    }

    /// A source created `pkt` at `now`: stamp the sender timestamp.
    pub fn on_emit(&self, now: Time, pkt: &mut Packet) {
        let Some(Some(f)) = self.net.flows.get(pkt.meta.flow as usize) else { return };
        if f.slo.carry == Carry::Timestamp {
            if let Some(mut b) = wire::block_mut(&mut pkt.data, f.offset) {
                b.set_value_ns(now.as_nanos());
            }
        }
    }

    /// A host starts transmitting `pkt` on `port`: the host's share of the per-hop update.
    pub fn host_transmit(&mut self, now: Time, port: usize, pkt: &mut Packet) {
        let flow = pkt.meta.flow as usize;
        let Some(Some(f)) = self.net.flows.get(flow) else { return };
        let cost = self.net.hop_cost(now, port, pkt).as_nanos();
        let mode = wire_mode(f.slo.carry);
        let offset = f.offset;
        let mut residue = Duration::ZERO;
        let bound = self.net.ports.get(port).map_or(Duration::ZERO, |p| p.host_damper);
        if mode == LbfMode::Damper && !bound.is_zero() {
            let queued = now.saturating_duration_since(pkt.meta.arrival);
            match self.net.damper_residue(port, pkt, queued, bound) {
                Some(r) => residue = r,
                None => {
                    if let Some(i) = self.slo_index(flow) {
                        self.flows[i].sender_damper_violations += 1;
                    }
                }
            }
        }
        if let Some(mut b) = wire::block_mut(&mut pkt.data, offset) {
            update_block(&mut b, mode, cost, residue.as_nanos());
        }
    }

    /// How long the receiver holds a damper-mode packet before handing it to the
    /// application (gLBF's final damper: the residue of the last hop); 0 otherwise.
    pub fn final_hold(&self, pkt: &Packet) -> u64 {
        let Some(Some(f)) = self.net.flows.get(pkt.meta.flow as usize) else { return 0 };
        if f.slo.carry != Carry::Damper {
            return 0;
        }
        pkt.data
            .get(f.offset..f.offset + wire::BLOCK_LEN)
            .map_or(0, |b| wire::LbfBlock::new_unchecked(b).value_ns())
    }

    /// A packet of a flow reached its receiver with latency `lat` (ns, run's convention).
    pub fn on_deliver(&mut self, pkt: &Packet, lat: u64) {
        let flow = pkt.meta.flow as usize;
        let Some(Some(f)) = self.net.flows.get(flow) else { return };
        let late_flag = pkt
            .data
            .get(f.offset..f.offset + wire::BLOCK_LEN)
            .map(wire::LbfBlock::new_unchecked)
            .is_some_and(|b| b.late());
        if let Some(i) = self.slo_index(flow) {
            self.flows[i].record(lat, late_flag);
        }
    }

    /// A packet of `flow` was dropped at `node` for `reason`.
    pub fn on_drop(&mut self, flow: usize, node: usize, reason: DropReason) {
        let map = match reason {
            DropReason::HopelessEarlyDrop => 0,
            DropReason::DeadlineExpired => 1,
            _ => return,
        };
        let Some(i) = self.slo_index(flow) else { return };
        let name = self.net.node_names.get(node).cloned().unwrap_or_default();
        let r = &mut self.flows[i];
        let m = if map == 0 { &mut r.early_drops } else { &mut r.expired };
        *m.entry(name).or_default() += 1;
    }

    /// The LBF results, given the switches' forwarders (in node order).
    pub fn results<'a>(self, switches: impl Iterator<Item = &'a LbfSwitch>) -> LbfResults {
        let mut out = Vec::new();
        let mut notes = Vec::new();
        let mut total = 0;
        for s in switches {
            out.push(LbfSwitchResult {
                node: self.net.node_names.get(s.node).cloned().unwrap_or_default(),
                counters: s.counters.clone(),
            });
            notes.extend(s.notifications.iter().cloned());
            total += s.notified;
        }
        LbfResults {
            latency_convention: self.net.convention.as_str().to_owned(),
            switching: self.net.switching.as_str().to_owned(),
            switches: out,
            flows: self.flows,
            notifications: first_notifications(notes),
            notifications_total: total,
        }
    }
}

/// The first [`MAX_NOTIFICATIONS`] of `notes` (several switches' records), in time order.
pub fn first_notifications(mut notes: Vec<Notification>) -> Vec<Notification> {
    notes.sort_by(|a, b| {
        (a.time_ns, &a.node, &a.flow, a.seq).cmp(&(b.time_ns, &b.node, &b.flow, b.seq))
    });
    notes.truncate(MAX_NOTIFICATIONS);
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_and_skewed_budgets() {
        let eq = LbfSettings::default();
        assert_eq!(lower_budget(200_000, 4, &eq), 50_000);
        assert_eq!(lower_budget(7, 2, &eq), 3);
        let skew = LbfSettings { budget: BudgetRule::Skew, skew_permille: 1000, ..eq.clone() };
        // h = 4, s = 1: R / 7; the last hop takes everything that remains.
        assert_eq!(lower_budget(700_000, 4, &skew), 100_000);
        assert_eq!(lower_budget(123, 1, &skew), 123);
        let none = LbfSettings { skew_permille: 0, ..skew };
        assert_eq!(lower_budget(200_000, 4, &none), 50_000);
    }

    #[test]
    fn ipv6_embeds_the_ipv4_address() {
        assert_eq!(
            ipv6_of(Ipv4Addr::new(10, 0, 0, 6)),
            "2001:db8::a00:6".parse::<Ipv6Addr>().unwrap()
        );
    }
}
