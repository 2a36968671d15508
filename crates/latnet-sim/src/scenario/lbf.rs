//! Scenario syntax of Latency-Based Forwarding: the `[lbf]` table (switch settings and FIB
//! overrides), per-node `lbf = { ... }` overrides, and per-flow `slo = { ... }`.
//! Documented in `docs/scenario.md` (section "Latency-Based Forwarding").

use super::error::ErrCtx;
use super::{LinkSpec, NodeKind, NodeSpec, ScenarioError};
use latnet_dataplane::QueueSpec;
use latnet_units::Duration;
use serde::Deserialize;
use std::collections::HashMap;
use toml::Spanned;

/// How a switch splits the remaining lower-bound budget over the remaining hops
/// (seed section IV.A).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetRule {
    /// `qmin = R / h`: the remainder `R` split equally over the `h` remaining hops.
    #[default]
    Equal,
    /// `qmin = R / (h + s (h - 1))`: err toward sending early while many hops remain (the seed's
    /// refinement), so later hops hold the packet; the last hop (`h = 1`) still takes all of
    /// `R`. `s` is `skew`.
    Skew,
}

/// What a switch does with a packet that can no longer meet its upper bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpperPolicy {
    /// Drop it (`hopeless-early-drop` at arrival; the queue expiry per `expire`).
    #[default]
    Drop,
    /// Forward it, set the block's late flag and write a notification record (once per packet).
    Mark,
}

/// Which instant the LBF queue uses to drop a waiting packet (`deadline-expired`), with
/// `upper = "drop"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpirePolicy {
    /// The moment the packet can no longer meet its upper bound even with no further queueing
    /// (`arrival + ub - latency so far - remaining min latency`): a drop happens at the first
    /// hop where the packet becomes hopeless.
    #[default]
    Hopeless,
    /// The PoC: the end of this hop's upper-bound budget (`arrival + qmax`).
    HopBudget,
    /// Never drop in the queue.
    Never,
}

/// Settings of one LBF switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbfSettings {
    /// Lower-bound budget rule.
    pub budget: BudgetRule,
    /// Skew factor `s` of [`BudgetRule::Skew`] in thousandths.
    pub skew_permille: u32,
    /// Upper-bound policy.
    pub upper: UpperPolicy,
    /// Queue expiry of `upper = "drop"`.
    pub expire: ExpirePolicy,
    /// Upper bound assumed for the per-hop deadline (ordering only) of packets without one
    /// (the PoC uses 10 ms); `None`: no deadline.
    pub best_effort_upper: Option<Duration>,
    /// Look for the UDP shim (the IPv6 option is always read).
    pub udp_shim: bool,
    /// gLBF damper: the per-hop bound `B`; a damper-mode packet leaves this hop
    /// `B - (time it queued here)` later at the next hop.
    pub damper_bound: Duration,
}

impl Default for LbfSettings {
    fn default() -> Self {
        LbfSettings {
            budget: BudgetRule::Equal,
            skew_permille: 1000,
            upper: UpperPolicy::Drop,
            expire: ExpirePolicy::Hopeless,
            best_effort_upper: None,
            udp_shim: true,
            damper_bound: Duration::ZERO,
        }
    }
}

/// A FIB override: at `node`, for host `dst`, these remaining hops and minimum latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LbfFibOverride {
    /// Switch (node index).
    pub node: usize,
    /// Destination host (node index).
    pub dst: usize,
    /// Remaining hops, this switch included.
    pub hops: u32,
    /// Minimum latency from this switch to the destination.
    pub min_latency: Duration,
}

/// The LBF part of a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LbfScenario {
    /// Settings per node: `Some` for every switch that runs LBF.
    pub nodes: Vec<Option<LbfSettings>>,
    /// FIB overrides.
    pub fib: Vec<LbfFibOverride>,
    /// Damper bound of each host's own egress queue (`nodes[i].lbf.damper_bound` of a host;
    /// zero for switches and hosts without one): a damper-mode packet spends it there
    /// (queueing plus hold at the next hop) instead of leaving with a residue of 0.
    pub host_damper: Vec<Duration>,
}

/// How a flow's packets tell the latency so far (seed section IV.A, plus the gLBF damper).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Carry {
    /// A latency-so-far field each hop adds its transit and link delay to (the PoC's choice).
    #[default]
    LatencySoFar,
    /// The sender's timestamp; switches subtract it from their (synchronized) clock.
    Timestamp,
    /// The remaining objective ("rest-SLO"), rewritten at each hop.
    RestSlo,
    /// gLBF damper residue (ignores the bounds for queueing).
    Damper,
}

/// Where a flow carries its LBF block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encap {
    /// A shim at the start of the UDP payload over IPv4 (the PoC's UDP-only senders).
    #[default]
    UdpShim,
    /// An IPv6 hop-by-hop option (addresses `2001:db8::<IPv4 address>`).
    Ipv6,
}

/// A flow's latency objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SloSpec {
    /// Lower bound of the end-to-end latency.
    pub lower: Duration,
    /// Upper bound (`None`: best effort).
    pub upper: Option<Duration>,
    /// How the latency so far is carried.
    pub carry: Carry,
    /// Where the block travels.
    pub encap: Encap,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLbf {
    budget: Option<BudgetRule>,
    skew: Option<Spanned<f64>>,
    upper: Option<UpperPolicy>,
    expire: Option<ExpirePolicy>,
    best_effort_upper: Option<Duration>,
    udp_shim: Option<bool>,
    damper_bound: Option<Duration>,
    /// Which switches run LBF: all of them (default) or none unless a node says so.
    switches: Option<Spanned<String>>,
    #[serde(default)]
    fib: Vec<RawFib>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLbfNode {
    enabled: Option<bool>,
    budget: Option<BudgetRule>,
    skew: Option<Spanned<f64>>,
    upper: Option<UpperPolicy>,
    expire: Option<ExpirePolicy>,
    best_effort_upper: Option<Duration>,
    udp_shim: Option<bool>,
    damper_bound: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFib {
    node: Spanned<String>,
    dst: Spanned<String>,
    hops: Spanned<u32>,
    min_latency: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSlo {
    #[serde(default)]
    lower: Duration,
    upper: Option<Duration>,
    #[serde(default)]
    carry: Carry,
    #[serde(default)]
    encap: Encap,
}

fn skew(cx: ErrCtx<'_>, s: &Spanned<f64>, key: String) -> Result<u32, ScenarioError> {
    let v = *s.get_ref();
    if !(0.0..=1000.0).contains(&v) {
        return Err(cx.at(Some(s.span()), key, format!("expected a skew in [0, 1000], got {v}")));
    }
    Ok((v * 1000.0).round() as u32)
}

/// Validate `[lbf]` and the nodes' `lbf` overrides.
pub(crate) fn validate(
    cx: ErrCtx<'_>,
    raw: Option<&RawLbf>,
    node_raw: &[Option<&Spanned<RawLbfNode>>],
    nodes: &[NodeSpec],
    index: &HashMap<String, usize>,
) -> Result<Option<LbfScenario>, ScenarioError> {
    if raw.is_none() && node_raw.iter().all(Option::is_none) {
        return Ok(None);
    }
    let empty = RawLbf::default();
    let r = raw.unwrap_or(&empty);
    let mut base = LbfSettings::default();
    if let Some(v) = r.budget {
        base.budget = v;
    }
    if let Some(s) = &r.skew {
        base.skew_permille = skew(cx, s, "lbf.skew".into())?;
    }
    if let Some(v) = r.upper {
        base.upper = v;
    }
    if let Some(v) = r.expire {
        base.expire = v;
    }
    if r.best_effort_upper.is_some() {
        base.best_effort_upper = r.best_effort_upper;
    }
    if let Some(v) = r.udp_shim {
        base.udp_shim = v;
    }
    if let Some(v) = r.damper_bound {
        base.damper_bound = v;
    }
    let all = match &r.switches {
        None => raw.is_some(),
        Some(s) => match s.get_ref().as_str() {
            "all" => true,
            "listed" => false,
            other => {
                return Err(cx.at(
                    Some(s.span()),
                    "lbf.switches",
                    format!("expected \"all\" or \"listed\", got {other:?}"),
                ))
            }
        },
    };
    let mut out = Vec::with_capacity(nodes.len());
    let mut host_damper = vec![Duration::ZERO; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let o = node_raw.get(i).copied().flatten();
        if let Some(o) = o.filter(|_| n.kind != NodeKind::Switch) {
            // exhaustive: a setting added later must be sorted into hosts' or switches' here
            let RawLbfNode {
                enabled,
                budget,
                skew,
                upper,
                expire,
                best_effort_upper,
                udp_shim,
                damper_bound,
            } = o.get_ref();
            let only_damper = enabled.is_none()
                && budget.is_none()
                && skew.is_none()
                && upper.is_none()
                && expire.is_none()
                && best_effort_upper.is_none()
                && udp_shim.is_none();
            if !only_damper {
                return Err(cx.at(
                    Some(o.span()),
                    format!("nodes[{i}].lbf"),
                    "a host takes only `damper_bound` (the damper of its own egress queue); the \
                     other LBF settings apply to switches (hosts stamp the block of their flows)",
                ));
            }
            host_damper[i] = damper_bound.unwrap_or_default();
        }
        let enabled = n.kind == NodeKind::Switch
            && o.and_then(|o| o.get_ref().enabled).unwrap_or(all || o.is_some());
        if !enabled {
            out.push(None);
            continue;
        }
        let mut s = base.clone();
        if let Some(o) = o.map(Spanned::get_ref) {
            if let Some(v) = o.budget {
                s.budget = v;
            }
            if let Some(k) = &o.skew {
                s.skew_permille = skew(cx, k, format!("nodes[{i}].lbf.skew"))?;
            }
            if let Some(v) = o.upper {
                s.upper = v;
            }
            if let Some(v) = o.expire {
                s.expire = v;
            }
            if o.best_effort_upper.is_some() {
                s.best_effort_upper = o.best_effort_upper;
            }
            if let Some(v) = o.udp_shim {
                s.udp_shim = v;
            }
            if let Some(v) = o.damper_bound {
                s.damper_bound = v;
            }
        }
        out.push(Some(s));
    }
    let lookup = |s: &Spanned<String>, key: String| -> Result<usize, ScenarioError> {
        index
            .get(s.get_ref().trim())
            .copied()
            .ok_or_else(|| cx.at(Some(s.span()), key, format!("unknown node {:?}", s.get_ref())))
    };
    let mut fib = Vec::with_capacity(r.fib.len());
    for (i, f) in r.fib.iter().enumerate() {
        let node = lookup(&f.node, format!("lbf.fib[{i}].node"))?;
        let dst = lookup(&f.dst, format!("lbf.fib[{i}].dst"))?;
        if nodes[node].kind != NodeKind::Switch {
            return Err(cx.at(
                Some(f.node.span()),
                format!("lbf.fib[{i}].node"),
                "expected a switch",
            ));
        }
        if nodes[dst].kind != NodeKind::Host {
            return Err(cx.at(Some(f.dst.span()), format!("lbf.fib[{i}].dst"), "expected a host"));
        }
        let hops = *f.hops.get_ref();
        if hops == 0 {
            return Err(cx.at(
                Some(f.hops.span()),
                format!("lbf.fib[{i}].hops"),
                "expected at least 1 (this switch counts)",
            ));
        }
        fib.push(LbfFibOverride { node, dst, hops, min_latency: f.min_latency });
    }
    Ok(Some(LbfScenario { nodes: out, fib, host_damper }))
}

/// Refuse LBF queues at a switch that does not run the LBF forwarder: nothing there gives a
/// packet an eligible time or a deadline, so the queue would silently be a FIFO.
pub(crate) fn check_queues(
    cx: ErrCtx<'_>,
    links: &[LinkSpec],
    nodes: &[NodeSpec],
    lbf: Option<&LbfScenario>,
) -> Result<(), ScenarioError> {
    let runs_lbf = |n: usize| lbf.is_some_and(|l| l.nodes.get(n).is_some_and(Option::is_some));
    for (i, l) in links.iter().enumerate() {
        for (node, peer, q, key) in
            [(l.a, l.b, &l.queue_ab, "queue_a"), (l.b, l.a, &l.queue_ba, "queue_b")]
        {
            let lbf_queue = matches!(
                q,
                QueueSpec::Lbf { .. } | QueueSpec::LbfSlack { .. } | QueueSpec::LbfDynamic { .. }
            );
            if lbf_queue && nodes[node].kind == NodeKind::Switch && !runs_lbf(node) {
                return Err(cx.at(
                    None,
                    format!("links[{i}].{key}"),
                    format!(
                        "switch {:?} has an LBF queue toward {:?} but does not run the LBF \
                         forwarder, so the queue would be a FIFO: add an [lbf] table (or \
                         `lbf = {{ ... }}` on the node with `lbf.switches = \"listed\"`), or \
                         give the port another queue kind",
                        nodes[node].name, nodes[peer].name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Validate a flow's `slo`; `size` is its frame length.
pub(crate) fn validate_slo(
    cx: ErrCtx<'_>,
    raw: &Spanned<RawSlo>,
    key: String,
    size: u32,
) -> Result<SloSpec, ScenarioError> {
    let r = raw.get_ref();
    if let Some(u) = r.upper {
        if u < r.lower {
            return Err(cx.at(
                Some(raw.span()),
                key,
                format!("expected `upper` ({u}) at or above `lower` ({})", r.lower),
            ));
        }
    }
    let min = min_frame(r.encap);
    if size < min {
        return Err(cx.at(
            Some(raw.span()),
            key,
            format!(
                "a frame carrying the LBF block ({}) needs at least {min} bytes, the flow's `size` is {size}",
                match r.encap {
                    Encap::UdpShim => "Ethernet + IPv4 + UDP + 32-byte shim",
                    Encap::Ipv6 => "Ethernet + IPv6 + 32-byte hop-by-hop header + UDP",
                }
            ),
        ));
    }
    Ok(SloSpec { lower: r.lower, upper: r.upper, carry: r.carry, encap: r.encap })
}

/// Smallest frame that carries the block with this encapsulation.
pub const fn min_frame(e: Encap) -> u32 {
    match e {
        Encap::UdpShim => 42 + latnet_wire::lbf::SHIM_LEN as u32,
        Encap::Ipv6 => 62 + latnet_wire::lbf::HBH_LEN as u32,
    }
}

/// Refuse a damper-mode flow (`carry = "damper"`) whose path crosses a switch that cannot keep
/// the damper: one that does not run the LBF forwarder (it would neither hold the packet nor
/// rewrite its residue, so the next hop would apply a stale one) or whose `damper_bound` is
/// zero (the default: every packet that queues there would count a violation). `slo_spans[i]`
/// is where flow `i`'s `slo` is written. Flows without a route are left to the simulator's
/// `no-route` drop.
pub(crate) fn check_damper_paths(
    cx: ErrCtx<'_>,
    sc: &super::Scenario,
    slo_spans: &[Option<std::ops::Range<usize>>],
) -> Result<(), ScenarioError> {
    let damper = |f: &super::FlowSpec| f.slo.is_some_and(|s| s.carry == Carry::Damper);
    if !sc.flows.iter().any(damper) {
        return Ok(());
    }
    let topo = crate::net::Topology::build(sc);
    let settings = |n: usize| sc.lbf.as_ref().and_then(|l| l.nodes.get(n)).and_then(Option::as_ref);
    for (i, f) in sc.flows.iter().enumerate().filter(|(_, f)| damper(f)) {
        let Some(path) = topo.path(f.src, f.dst) else { continue };
        for &n in &path[1..path.len() - 1] {
            let name = &sc.nodes[n].name;
            let problem = match settings(n) {
                None => format!("switch {name:?} on its path does not run the LBF forwarder"),
                Some(s) if s.damper_bound.is_zero() => format!(
                    "switch {name:?} on its path has no damper bound (0): set \
                     `lbf.damper_bound` or `nodes[{n}].lbf.damper_bound`"
                ),
                Some(_) => continue,
            };
            return Err(cx.at(
                slo_spans.get(i).cloned().flatten(),
                format!("flows[{i}].slo"),
                format!(
                    "flow {:?} carries a damper residue (`carry = \"damper\"`), which needs every \
                     switch it crosses to hold it to a damper bound above zero; {problem}",
                    f.name
                ),
            ));
        }
    }
    Ok(())
}
