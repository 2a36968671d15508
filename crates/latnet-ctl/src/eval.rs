//! The paper's admission study (§5.1, §5.2): for one system, add requests of a scenario until
//! the first rejection and report accepted flows, link utilisation, per-request runtime and
//! reconfigured flows.
//!
//! Runtime is measured with a clock the caller passes (`FnMut() -> u64`, ns): the controller
//! itself reads no clock. Run `i` of a scenario draws the same request sequence for every
//! system (seeded stream `scenario × 2³² + i`), so systems are compared on identical inputs.

use crate::config::{CtlConfig, RerouteConfig, Routing, TagScheme};
use crate::controller::{Controller, FlowRequest, Rejection};
use crate::qjump::{Qjump, QjumpConfig};
use crate::topo::Topology;
use crate::workload::{Category, Workload, FLOW_TYPES};
use latnet_nc::BurstModel;
use latnet_units::{Bytes, Duration};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The systems of the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SystemKind {
    /// Chameleon with rerouting.
    Chameleon,
    /// Chameleon without rerouting.
    ChameleonNoReroute,
    /// Silo with a burst model.
    Silo(BurstModel),
    /// QJump.
    Qjump,
}

impl SystemKind {
    /// Stable name (`chameleon`, `chameleon-noreroute`, `silo` (real bursts), `silo-noburst`,
    /// `silo-worst`, `qjump`).
    pub fn name(self) -> &'static str {
        match self {
            SystemKind::Chameleon => "chameleon",
            SystemKind::ChameleonNoReroute => "chameleon-noreroute",
            SystemKind::Silo(BurstModel::Real) => "silo",
            SystemKind::Silo(BurstModel::None) => "silo-noburst",
            SystemKind::Silo(BurstModel::WorstCase) => "silo-worst",
            SystemKind::Qjump => "qjump",
        }
    }
}

impl fmt::Display for SystemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SystemKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "chameleon" => SystemKind::Chameleon,
            "chameleon-noreroute" => SystemKind::ChameleonNoReroute,
            "silo" | "silo-real" => SystemKind::Silo(BurstModel::Real),
            "silo-noburst" | "silo-none" => SystemKind::Silo(BurstModel::None),
            "silo-worst" => SystemKind::Silo(BurstModel::WorstCase),
            "qjump" => SystemKind::Qjump,
            _ => {
                return Err(format!(
                    "unknown system {s:?} (expected chameleon, chameleon-noreroute, silo, \
                     silo-noburst, qjump)"
                ))
            }
        })
    }
}

/// Options of a study (defaults: the paper's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalOptions {
    /// Queues per switch port for Chameleon.
    pub queues: usize,
    /// Budgets per queue (default: the paper's set for `queues`).
    pub budgets: Option<Vec<Duration>>,
    /// Buffer per queue (default: the paper's for `queues`).
    pub buffer: Option<Bytes>,
    /// Per-hop constant.
    pub per_hop: Duration,
    /// Chameleon's routing.
    pub routing: Routing,
    /// Chameleon's rerouting parameters.
    pub reroute: RerouteConfig,
    /// Input-link shaping.
    pub shaping: bool,
    /// Chameleon's burst model.
    pub burst: BurstModel,
    /// Tag scheme.
    pub tags: TagScheme,
    /// Silo's per-link budget (0.1 ms in the paper).
    pub silo_budget: Duration,
    /// QJump's parameters.
    pub qjump: QjumpConfig,
    /// Stop a run after this many requests even without a rejection (a safety bound).
    pub max_requests: u64,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            queues: 8,
            budgets: None,
            buffer: None,
            per_hop: Duration::ZERO,
            routing: Routing::LeastDelay,
            reroute: RerouteConfig::default(),
            shaping: true,
            burst: BurstModel::Real,
            tags: TagScheme::default(),
            silo_budget: Duration::from_micros(100),
            qjump: QjumpConfig::default(),
            max_requests: 10_000_000,
        }
    }
}

impl EvalOptions {
    /// The controller configuration of a system (`None` for QJump).
    pub fn config(&self, kind: SystemKind) -> Result<Option<CtlConfig>, String> {
        let mut cfg = match kind {
            SystemKind::Qjump => return Ok(None),
            SystemKind::Silo(burst) => {
                let mut c = CtlConfig::silo(burst);
                c.switch.budgets = vec![self.silo_budget];
                c.host.budgets = vec![self.silo_budget];
                c
            }
            SystemKind::Chameleon | SystemKind::ChameleonNoReroute => {
                let mut c = match &self.budgets {
                    Some(b) => CtlConfig::with_budgets(b.clone()),
                    None => CtlConfig::chameleon(self.queues)?,
                };
                if let Some(b) = self.buffer {
                    c.switch.buffer = b;
                }
                c.routing = self.routing;
                c.burst = self.burst;
                c.reroute = (kind == SystemKind::Chameleon).then_some(self.reroute);
                c
            }
        };
        cfg.per_hop = self.per_hop;
        cfg.shaping = self.shaping;
        cfg.tags = self.tags;
        Ok(Some(cfg))
    }
}

/// A system under test.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum System {
    /// Chameleon or Silo.
    Ctl(Controller),
    /// QJump.
    Qjump(Qjump),
}

impl System {
    /// Build `kind` on `topo`.
    pub fn build(
        kind: SystemKind,
        topo: &Arc<Topology>,
        opts: &EvalOptions,
    ) -> Result<System, String> {
        Ok(match opts.config(kind)? {
            Some(cfg) => System::Ctl(Controller::new(topo.clone(), cfg)?),
            None => System::Qjump(Qjump::new(topo.clone(), opts.qjump)),
        })
    }

    /// Submit a request; on success the flows rerouted to make room.
    pub fn request(&mut self, r: FlowRequest) -> Result<Vec<u64>, Rejection> {
        match self {
            System::Ctl(c) => c.request(r).map(|a| a.rerouted),
            System::Qjump(q) => q.request(r).map(|_| Vec::new()),
        }
    }

    /// Reserved rate per port.
    pub fn reserved_rates(&self) -> Vec<u128> {
        match self {
            System::Ctl(c) => c.reserved_rates(),
            System::Qjump(q) => q.reserved_rates().to_vec(),
        }
    }
}

/// The outcome of one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunResult {
    /// Flows accepted before the first rejection.
    pub accepted: u64,
    /// Why the run ended (the rejection's code, or `max-requests`).
    pub ended_by: String,
    /// Distinct admitted flows that were rerouted at least once.
    pub reconfigured: u64,
    /// Reroute operations (including those made for a request that was still refused).
    pub reroutes: u64,
    /// Accepted flows per flow type (Table 1 order).
    pub accepted_by_type: Vec<u64>,
    /// Reconfigured flows per category (IA, CS, CPS, BH).
    pub reconfigured_by_category: Vec<u64>,
    /// Reserved rate / capacity of every port between two switches, in port order.
    pub utilisation: Vec<f64>,
    /// Wall-clock time of every request (ns), the last one being the rejected request.
    pub runtime_ns: Vec<u64>,
}

/// Run `kind` on `topo` with scenario `scenario`, run index `run` (the request stream).
pub fn run(
    kind: SystemKind,
    topo: &Arc<Topology>,
    opts: &EvalOptions,
    scenario: usize,
    seed: u64,
    run: u64,
    clock: &mut dyn FnMut() -> u64,
) -> Result<RunResult, String> {
    let mut sys = System::build(kind, topo, opts)?;
    let stream = (scenario as u64) << 32 | (run & 0xffff_ffff);
    let mut wl = Workload::new(scenario, topo.hosts(), seed, stream)?;
    let mut kinds = Vec::new();
    let mut runtime_ns = Vec::new();
    let mut reroutes = 0u64;
    let mut ended_by = "max-requests".to_owned();
    for _ in 0..opts.max_requests {
        let d = wl.next_request();
        let t0 = clock();
        let out = sys.request(d.request);
        let t1 = clock();
        runtime_ns.push(t1.saturating_sub(t0));
        match out {
            Ok(rr) => {
                kinds.push(d.kind);
                reroutes += rr.len() as u64;
            }
            Err(e) => {
                ended_by = e.code().to_owned();
                break;
            }
        }
    }
    let mut accepted_by_type = vec![0u64; FLOW_TYPES.len()];
    for &k in &kinds {
        accepted_by_type[k] += 1;
    }
    let mut reconfigured_by_category = vec![0u64; 4];
    let mut reconfigured = 0;
    if let System::Ctl(c) = &sys {
        reconfigured = c.rerouted_flows() as u64;
        reroutes = c.stats().reroutes;
        for id in c.rerouted_ids() {
            if let Some(&k) = kinds.get(id as usize) {
                let cat = FLOW_TYPES[k].category;
                let i = Category::ALL.iter().position(|&c| c == cat).unwrap_or(0);
                reconfigured_by_category[i] += 1;
            }
        }
    }
    let rates = sys.reserved_rates();
    let utilisation = (0..topo.ports().len())
        .filter(|&p| !topo.touches_host(p))
        .map(|p| rates[p] as f64 / topo.port(p).rate.bps() as f64)
        .collect();
    Ok(RunResult {
        accepted: kinds.len() as u64,
        ended_by,
        reconfigured,
        reroutes,
        accepted_by_type,
        reconfigured_by_category,
        utilisation,
        runtime_ns,
    })
}
