//! What a switch does with a frame: the forwarding decision, as a closed set of forwarders.
//!
//! A forwarder is sans-IO: [`Forwarder::forward`] takes the arriving packet (and the switch's
//! view of the network) and returns the egress port or a drop reason; it may rewrite header
//! bytes and set [`Meta`](latnet_dataplane::Meta) fields (priority, eligible times) for the
//! queue. [`Forwarder::on_transmit`] runs when the packet starts transmission on the chosen
//! port (where per-hop fields such as accumulated latency are updated).
//!
//! | forwarder | scenario | decision |
//! |---|---|---|
//! | [`Forwarder::Fib`] | default | destination IP → FIB (shortest paths / `[[routes]]`), TTL − 1, priority from DSCP |
//! | [`Forwarder::Pipeline`] | `pipeline = "NAME"` | a match-action pipeline, optionally with the Fast-Forwarding Path ([`crate::pipeline_fwd`]) |
//! | [`Forwarder::Lbf`] | `[lbf]` / node `lbf` | as `Fib`, then Latency-Based Forwarding: per-hop budgets from the packet's LBF block, eligible times and deadlines for the queue, early drop or late marking ([`crate::lbf`]) |
//! | [`Forwarder::TagStack`] | `forwarding = { kind = "tag-stack", base = 10 }` | pop the outer 802.1Q tag `t`, egress local port `t / base`, queue `t % base` ([`crate::srcroute`]) |
//!
//! New forwarding models (LBF budgets, match-action pipelines, source routing by tag stacks)
//! are added as variants here, each in its own module.

use crate::hdr;
use crate::net::{Topology, NO_PORT};
use latnet_dataplane::packet::priority_from_dscp;
use latnet_dataplane::{DropReason, Packet};
use latnet_units::{Duration, Time};
use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

/// Cut-through toward a faster egress: how long a switch holds a frame whose last bit arrives
/// `tail` after the switch could queue it, on a port that sends the frame in `tx_out`. It may
/// not start sending before its last bit arrives minus `tx_out`, or the transmitter would run
/// out of bits; zero for a whole frame (`tail` zero) or an egress no faster than the ingress.
/// The one rule of the simulator, its LBF budgets and the real-time switch; the runners count
/// the hold as serialization (`ser_so_far`).
pub fn cut_through_hold(tail: Duration, tx_out: Duration) -> Duration {
    tail.saturating_sub(tx_out)
}

/// The switch's view of the network when it forwards.
#[derive(Debug, Clone, Copy)]
pub struct SwitchCtx<'a> {
    /// Current time.
    pub now: Time,
    /// This switch (node index).
    pub node: usize,
    /// Ports and FIB.
    pub topo: &'a Topology,
    /// Host node index by address.
    pub hosts: &'a HashMap<IpAddr, usize>,
}

/// Outcome of a forwarding decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    /// Enqueue at this egress port (global port index).
    Port(usize),
    /// Enqueue at this egress port at a later instant: the switch spends modelled processing
    /// time on the packet first (see the pipeline forwarder's `processing`).
    After(usize, Time),
    /// Drop, for this reason.
    Drop(DropReason),
}

/// A switch's forwarding model.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Forwarder {
    /// Destination-based forwarding on the FIB.
    #[default]
    Fib,
    /// A match-action pipeline (plain or composite).
    Pipeline(Box<crate::pipeline_fwd::PipelineForwarder>),
    /// Latency-Based Forwarding (see [`crate::lbf`]).
    Lbf(Box<crate::lbf::LbfSwitch>),
    /// Source routing by tag stacks: `tag = base × local port + queue`.
    TagStack {
        /// Multiplier of the port number in a tag.
        base: u16,
    },
}

/// A switch's forwarding model as written in scenario files (`forwarding = { kind = ... }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum ForwardingSpec {
    /// [`Forwarder::Fib`].
    #[default]
    Fib,
    /// [`Forwarder::TagStack`].
    TagStack {
        /// `tag = base × port + queue` (default 10).
        #[serde(default = "default_tag_base")]
        base: u16,
    },
}

fn default_tag_base() -> u16 {
    10
}

/// The forwarding model of switch `node` in scenario `sc`: its pipeline if it has one, else an
/// explicit `forwarding` model, else LBF where `[lbf]` covers it, else the FIB. The simulator and
/// the real-time switch both build their forwarders here, so they cannot diverge.
pub fn forwarder_for(
    sc: &crate::Scenario,
    node: usize,
    lbf: Option<&crate::lbf::LbfState>,
) -> Forwarder {
    let n = &sc.nodes[node];
    match n.pipeline {
        Some(p) => Forwarder::Pipeline(Box::new(crate::pipeline_fwd::PipelineForwarder::new(
            &sc.pipelines[p],
            sc.sim.seed,
        ))),
        // an explicit `forwarding` model wins over [lbf]
        None if n.forwarding != ForwardingSpec::Fib => n.forwarding.build(),
        None => match lbf.and_then(|l| l.switch(node)) {
            Some(s) => Forwarder::Lbf(Box::new(s)),
            None => Forwarder::default(),
        },
    }
}

impl ForwardingSpec {
    /// The forwarder this spec describes.
    pub fn build(self) -> Forwarder {
        match self {
            ForwardingSpec::Fib => Forwarder::Fib,
            ForwardingSpec::TagStack { base } => Forwarder::TagStack { base },
        }
    }
}

impl Forwarder {
    /// Decide where `pkt`, arrived at `cx.node`, goes.
    #[inline]
    pub fn forward(&mut self, cx: &SwitchCtx<'_>, pkt: &mut Packet) -> Forward {
        match self {
            Forwarder::Fib => fib_forward(cx, pkt),
            Forwarder::Pipeline(p) => p.forward(cx, pkt),
            Forwarder::Lbf(l) => l.forward(cx, pkt),
            Forwarder::TagStack { base } => crate::srcroute::tag_forward(cx, pkt, *base),
        }
    }

    /// `pkt` starts transmission on `port` at `now`.
    #[inline]
    pub fn on_transmit(&mut self, now: Time, port: usize, pkt: &mut Packet) {
        match self {
            Forwarder::Fib | Forwarder::Pipeline(_) | Forwarder::TagStack { .. } => {}
            Forwarder::Lbf(l) => l.on_transmit(now, port, pkt),
        }
    }
}

/// Destination lookup in the FIB, TTL decrement, priority from the DSCP.
#[inline]
pub fn fib_forward(cx: &SwitchCtx<'_>, pkt: &mut Packet) -> Forward {
    let info = match hdr::route_info(&pkt.data) {
        Ok(i) => i,
        Err(_) => return Forward::Drop(DropReason::Malformed),
    };
    let Some(&dst) = cx.hosts.get(&info.dst) else {
        return Forward::Drop(DropReason::NoRoute);
    };
    let port = cx.topo.fib[cx.node][dst];
    if port == NO_PORT {
        return Forward::Drop(DropReason::NoRoute);
    }
    if !hdr::decrement_ttl(&mut pkt.data, info.l3) {
        return Forward::Drop(DropReason::TtlExpired);
    }
    pkt.meta.priority = priority_from_dscp(info.dscp);
    Forward::Port(port as usize)
}
