//! Bindings of the Chameleon controller (`latnet-ctl`): a `Controller` class for library use,
//! and batch functions for the CLI and `latnet reproduce chameleon` that run whole studies
//! with the GIL released (`chameleon_eval`, `chameleon_crosscheck`, `chameleon_transitions`).
//! Results cross the boundary as JSON text or plain dicts. This is the edge where wall-clock time is read: the
//! study driver gets a monotonic clock from here.

use crate::LatnetError;
use latnet_ctl::eval::{self, EvalOptions, SystemKind};
use latnet_ctl::verify::{self, CheckOptions};
use latnet_ctl::{
    BurstModel, Controller, CtlConfig, FlowRequest, RerouteConfig, Routing, Topology, Workload,
};
use latnet_units::{Bytes, Duration, Rate};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn topology(
    k: Option<usize>,
    hosts_per_edge: Option<usize>,
    path: Option<PathBuf>,
) -> PyResult<Arc<Topology>> {
    let t = match (path, k) {
        (Some(p), _) => {
            let text = std::fs::read_to_string(&p)
                .map_err(|e| LatnetError::new_err(format!("{}: {e}", p.display())))?;
            Topology::from_toml(&p.display().to_string(), &text)
                .map_err(|e| PyValueError::new_err(e.to_string()))?
        }
        (None, Some(k)) => {
            let m = hosts_per_edge.unwrap_or(k / 2);
            Topology::fat_tree(k, m, Rate::from_gbps(1)).map_err(PyValueError::new_err)?
        }
        (None, None) => {
            return Err(PyValueError::new_err("give k (a fat-tree) or a topology file"))
        }
    };
    Ok(Arc::new(t))
}

#[allow(clippy::too_many_arguments)]
fn options(
    queues: usize,
    routing: &str,
    reroute_limit: usize,
    multiplier: u64,
    per_hop_ns: u64,
    shaping: bool,
    burst: &str,
    tag_base: u16,
    max_requests: u64,
) -> PyResult<EvalOptions> {
    Ok(EvalOptions {
        queues,
        routing: routing.parse::<Routing>().map_err(PyValueError::new_err)?,
        reroute: RerouteConfig { limit: reroute_limit, multiplier },
        per_hop: Duration::from_nanos(per_hop_ns),
        shaping,
        burst: burst.parse::<BurstModel>().map_err(PyValueError::new_err)?,
        tags: latnet_ctl::TagScheme { base: tag_base },
        max_requests,
        ..EvalOptions::default()
    })
}

/// Run the admission study for one system: `runs` (a list of run indices) of `scenario`,
/// each adding requests until the first rejection. Returns a JSON list of run results
/// (`accepted`, `ended_by`, `reconfigured`, `reroutes`, `accepted_by_type`,
/// `reconfigured_by_category`, `utilisation`, `runtime_ns`). Releases the GIL.
#[pyfunction]
#[pyo3(signature = (system, scenario, runs, k=None, queues=8, hosts_per_edge=None, seed=1,
    topology_file=None, routing="least-delay", reroute_limit=20, multiplier=30_000, per_hop_ns=0,
    shaping=true, burst="real", tag_base=10, max_requests=10_000_000))]
#[allow(clippy::too_many_arguments)]
fn chameleon_eval(
    py: Python<'_>,
    system: &str,
    scenario: usize,
    runs: Vec<u64>,
    k: Option<usize>,
    queues: usize,
    hosts_per_edge: Option<usize>,
    seed: u64,
    topology_file: Option<PathBuf>,
    routing: &str,
    reroute_limit: usize,
    multiplier: u64,
    per_hop_ns: u64,
    shaping: bool,
    burst: &str,
    tag_base: u16,
    max_requests: u64,
) -> PyResult<String> {
    let kind: SystemKind = system.parse().map_err(PyValueError::new_err)?;
    let topo = topology(k, hosts_per_edge, topology_file)?;
    let opts = options(
        queues,
        routing,
        reroute_limit,
        multiplier,
        per_hop_ns,
        shaping,
        burst,
        tag_base,
        max_requests,
    )?;
    opts.config(kind).map_err(PyValueError::new_err)?;
    let out = py.allow_threads(|| {
        let start = Instant::now();
        let mut clock = move || start.elapsed().as_nanos() as u64;
        runs.iter()
            .map(|&r| eval::run(kind, &topo, &opts, scenario, seed, r, &mut clock))
            .collect::<Result<Vec<_>, String>>()
    });
    let out = out.map_err(PyValueError::new_err)?;
    serde_json::to_string(&out).map_err(|e| LatnetError::new_err(e.to_string()))
}

/// The topology and configuration of a system the packet-level checks can model (not QJump,
/// which keeps no per-queue state), with the study's defaults.
fn checked_system(
    system: &str,
    k: Option<usize>,
    hosts_per_edge: Option<usize>,
    topology_file: Option<PathBuf>,
    queues: usize,
    per_hop_ns: u64,
) -> PyResult<(Arc<Topology>, CtlConfig)> {
    let kind: SystemKind = system.parse().map_err(PyValueError::new_err)?;
    let topo = topology(k, hosts_per_edge, topology_file)?;
    let opts =
        EvalOptions { queues, per_hop: Duration::from_nanos(per_hop_ns), ..EvalOptions::default() };
    match opts.config(kind).map_err(PyValueError::new_err)? {
        Some(cfg) => Ok((topo, cfg)),
        None => Err(PyValueError::new_err("QJump keeps no per-queue model to cross-check")),
    }
}

/// Admit requests of `scenario` (seeded) until the first rejection — or, with `tries`, offer
/// that many and keep what is admitted — then run the packet-level cross-check of the admitted
/// set in the simulator. Returns JSON: `admitted` and the check result (`flows`, `skipped`,
/// `background_flows`, `phases` with sent / received / dropped, violation counts and the
/// largest observed / bound ratios). Releases the GIL.
///
/// `phases` picks phases by name (`sync`, `aligned-0`, `aligned-1`, `random-2ms`; default
/// all). With `scenarios`, the JSON also has `scenarios` (per phase its scenario-file text, to
/// run the same set elsewhere, e.g. in emulation) and `embeddings` (per admitted flow its
/// name in those files, `f<id>`, with its request, guarantee, path (node names) and hops (port,
/// queue and whether a switch transmits, per hop)).
#[pyfunction]
#[pyo3(signature = (k=None, queues=4, hosts_per_edge=None, scenario=8, seed=1, system="chameleon",
    topology_file=None, per_hop_ns=0, duration_ms=20, background=true, tries=None, misbehave=1,
    phases=None, scenarios=false))]
#[allow(clippy::too_many_arguments)]
fn chameleon_crosscheck(
    py: Python<'_>,
    k: Option<usize>,
    queues: usize,
    hosts_per_edge: Option<usize>,
    scenario: usize,
    seed: u64,
    system: &str,
    topology_file: Option<PathBuf>,
    per_hop_ns: u64,
    duration_ms: u64,
    background: bool,
    tries: Option<u64>,
    misbehave: u64,
    phases: Option<Vec<String>>,
    scenarios: bool,
) -> PyResult<String> {
    let phases = check_phases(phases)?;
    let (topo, cfg) = checked_system(system, k, hosts_per_edge, topology_file, queues, per_hop_ns)?;
    let out = py.allow_threads(|| -> Result<String, String> {
        let mut ctl = Controller::new(topo.clone(), cfg)?;
        let mut wl = Workload::new(scenario, topo.hosts(), seed, 0)?;
        match tries {
            Some(n) => {
                for _ in 0..n {
                    let _ = ctl.request(wl.next_request().request);
                }
            }
            None => {
                for _ in 0..10_000_000u64 {
                    if ctl.request(wl.next_request().request).is_err() {
                        break;
                    }
                }
            }
        }
        let check = CheckOptions {
            duration: Duration::from_millis(duration_ms),
            background,
            seed,
            misbehave,
            phases,
            ..CheckOptions::default()
        };
        let doc = check_doc(&ctl, &check, scenarios)?;
        serde_json::to_string(&doc).map_err(|e| e.to_string())
    });
    out.map_err(PyValueError::new_err)
}

/// Offer `tries` requests of `scenario` (seeded) and, for each of the first
/// `max_transitions` that moved admitted flows (admitted after rerouting, or refused with
/// moves that stay), simulate the change in each of `orders` (`sequential`, `together`,
/// `new-first`, the moves `lag_ms` after the new flow; default all) and `phases` (default `sync`
/// and `random-2ms`), the change beginning `at_ms` into the run (see
/// `latnet_ctl::verify::transition_check`). Returns JSON:
/// `requests`, `admitted`, `refused`, `with_moves` (requests that moved flows) and
/// `transitions` (per change: `request` index, `new_flow`, `moved`, `old_guarantee_ns`,
/// `runs` per phase and order). Releases the GIL.
#[pyfunction]
#[pyo3(signature = (k=None, queues=4, hosts_per_edge=None, scenario=8, seed=1, system="chameleon",
    topology_file=None, per_hop_ns=0, duration_ms=10, background=true, tries=1000,
    max_transitions=3, orders=None, phases=None, at_ms=3, lag_ms=5))]
#[allow(clippy::too_many_arguments)]
fn chameleon_transitions(
    py: Python<'_>,
    k: Option<usize>,
    queues: usize,
    hosts_per_edge: Option<usize>,
    scenario: usize,
    seed: u64,
    system: &str,
    topology_file: Option<PathBuf>,
    per_hop_ns: u64,
    duration_ms: u64,
    background: bool,
    tries: u64,
    max_transitions: usize,
    orders: Option<Vec<String>>,
    phases: Option<Vec<String>>,
    at_ms: u64,
    lag_ms: u64,
) -> PyResult<String> {
    let (check, orders) = transition_options(duration_ms, background, seed, phases, orders)?;
    let (topo, cfg) = checked_system(system, k, hosts_per_edge, topology_file, queues, per_hop_ns)?;
    let (at, lag) = (Duration::from_millis(at_ms), Duration::from_millis(lag_ms));
    let out = py.allow_threads(|| -> Result<String, String> {
        let mut ctl = Controller::new(topo.clone(), cfg)?;
        let mut wl = Workload::new(scenario, topo.hosts(), seed, 0)?;
        let (mut admitted, mut refused, mut with_moves) = (0u64, 0u64, 0u64);
        let mut transitions = Vec::new();
        for i in 0..tries {
            let before = (transitions.len() < max_transitions).then(|| ctl.clone());
            let out = ctl.request(wl.next_request().request);
            match &out {
                Ok(_) => admitted += 1,
                Err(_) => refused += 1,
            }
            let moved = ctl.moved_by_last_request().to_vec();
            if moved.is_empty() {
                continue;
            }
            with_moves += 1;
            let Some(before) = before else { continue };
            let t = verify::Transition {
                before: &before,
                after: &ctl,
                new_flow: out.as_ref().ok().map(|a| a.id),
                moved: &moved,
            };
            let r = verify::transition_check(&t, &check, at, lag, &orders)?;
            let mut v = serde_json::to_value(&r).map_err(|e| e.to_string())?;
            v["request"] = serde_json::json!(i);
            transitions.push(v);
        }
        let doc = serde_json::json!({
            "requests": tries,
            "admitted": admitted,
            "refused": refused,
            "with_moves": with_moves,
            "transitions": transitions,
        });
        serde_json::to_string(&doc).map_err(|e| e.to_string())
    });
    out.map_err(PyValueError::new_err)
}

/// The options of a transition check: the phases by name (default `sync` and `random-2ms`) and
/// the orders by name (default all).
fn transition_options(
    duration_ms: u64,
    background: bool,
    seed: u64,
    phases: Option<Vec<String>>,
    orders: Option<Vec<String>>,
) -> PyResult<(CheckOptions, Vec<verify::Order>)> {
    let phases =
        check_phases(Some(phases.unwrap_or_else(|| vec!["sync".into(), "random-2ms".into()])))?;
    let orders: Vec<verify::Order> = match orders {
        None => verify::Order::ALL.to_vec(),
        Some(o) => o
            .iter()
            .map(|n| n.parse().map_err(|e: String| PyValueError::new_err(format!("orders: {e}"))))
            .collect::<PyResult<_>>()?,
    };
    if orders.is_empty() {
        return Err(PyValueError::new_err("orders: expected at least one order"));
    }
    let check = CheckOptions {
        duration: Duration::from_millis(duration_ms),
        background,
        seed,
        phases,
        ..CheckOptions::default()
    };
    Ok((check, orders))
}

/// The cross-check's phases by name (`None`: all of them).
fn check_phases(names: Option<Vec<String>>) -> PyResult<Vec<verify::Phase>> {
    let all = CheckOptions::default().phases;
    let Some(names) = names else { return Ok(all) };
    names
        .iter()
        .map(|n| {
            all.iter().find(|p| p.name() == *n).copied().ok_or_else(|| {
                let known: Vec<String> = all.iter().map(|p| p.name()).collect();
                PyValueError::new_err(format!(
                    "phases: unknown phase {n:?} (phases: {})",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// The cross-check of `ctl`'s admitted set as the JSON document `chameleon_crosscheck`
/// returns: `admitted`, `check`, and with `scenarios` the phases' scenario files and the
/// admitted flows' names in them.
fn check_doc(
    ctl: &Controller,
    check: &CheckOptions,
    scenarios: bool,
) -> Result<serde_json::Value, String> {
    let r = verify::cross_check(ctl, check)?;
    let mut doc = serde_json::json!({ "admitted": ctl.len(), "check": r });
    if !scenarios {
        return Ok(doc);
    }
    let files = verify::phase_scenarios(ctl, check)?
        .iter()
        .map(|(phase, sc)| {
            Ok(serde_json::json!({ "phase": phase, "toml": verify::scenario_toml(sc)? }))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let topo = ctl.topology();
    let embeddings: Vec<_> = ctl
        .flows()
        .map(|e| {
            let path: Vec<&str> =
                e.hops.iter().map(|h| topo.nodes()[topo.port(h.port).node].name.as_str()).collect();
            // per hop the port (the scenario's global index) and the queue a switch's tag picks
            let hops: Vec<_> = e
                .hops
                .iter()
                .map(|h| {
                    let switch = !topo.is_host(topo.port(h.port).node);
                    serde_json::json!({"port": h.port, "queue": h.queue, "switch": switch})
                })
                .collect();
            serde_json::json!({
                "name": format!("f{}", e.id),
                "id": e.id,
                "src": topo.nodes()[e.request.src].name,
                "dst": topo.nodes()[e.request.dst].name,
                "rate_bps": e.request.rate.bps(),
                "burst_bytes": e.request.burst.get(),
                "deadline_ns": e.request.deadline.as_nanos(),
                "guarantee_ns": e.guarantee.as_nanos(),
                "path": path,
                "hops": hops,
            })
        })
        .collect();
    doc["scenarios"] = serde_json::Value::Array(files);
    doc["embeddings"] = serde_json::Value::Array(embeddings);
    Ok(doc)
}

/// A Chameleon (or Silo) controller: admit, inspect and remove flows.
#[pyclass(module = "latnet._latnet")]
struct ChameleonController {
    inner: Controller,
}

/// A float from Python as a positive integer (at least 1), or `None`.
fn positive(x: f64) -> Option<u64> {
    (x.is_finite() && x >= 1.0 && x < u64::MAX as f64).then_some(x as u64)
}

/// A request's amount: an int exactly (the whole u64 range, as the service's log holds it: a
/// float would round above 2^53), a float by its whole part; `None` below 1 or not a number.
fn amount(x: &Bound<'_, PyAny>) -> Option<u64> {
    if x.is_instance_of::<pyo3::types::PyInt>() {
        return x.extract::<u64>().ok().filter(|&n| n >= 1);
    }
    x.extract::<f64>().ok().and_then(positive)
}

#[pymethods]
impl ChameleonController {
    /// A controller on a fat-tree (`k`, `hosts_per_edge`) or a topology file, for `system`
    /// `chameleon`, `chameleon-noreroute`, `silo` or `silo-noburst`.
    #[new]
    #[pyo3(signature = (k=None, hosts_per_edge=None, queues=8, topology_file=None,
        system="chameleon", routing="least-delay", reroute_limit=20, multiplier=30_000,
        per_hop_ns=0, shaping=true, burst="real", tag_base=10, max_tags=10))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        k: Option<usize>,
        hosts_per_edge: Option<usize>,
        queues: usize,
        topology_file: Option<PathBuf>,
        system: &str,
        routing: &str,
        reroute_limit: usize,
        multiplier: u64,
        per_hop_ns: u64,
        shaping: bool,
        burst: &str,
        tag_base: u16,
        max_tags: usize,
    ) -> PyResult<Self> {
        let kind: SystemKind = system.parse().map_err(PyValueError::new_err)?;
        let topo = topology(k, hosts_per_edge, topology_file)?;
        let opts = options(
            queues,
            routing,
            reroute_limit,
            multiplier,
            per_hop_ns,
            shaping,
            burst,
            tag_base,
            1,
        )?;
        let mut cfg: CtlConfig = opts
            .config(kind)
            .map_err(PyValueError::new_err)?
            .ok_or_else(|| PyValueError::new_err("QJump is not a per-queue controller"))?;
        cfg.max_tags = max_tags;
        let inner = Controller::new(topo, cfg).map_err(PyValueError::new_err)?;
        Ok(ChameleonController { inner })
    }

    /// Host names, in node order.
    fn hosts(&self) -> Vec<String> {
        let t = self.inner.topology();
        t.hosts().into_iter().map(|h| t.nodes()[h].name.clone()).collect()
    }

    /// Ask for a flow. Returns a dict: `admitted` (bool), and either `id` and `rerouted` (ids
    /// of flows moved to make room), or `code` and `reason` (why not; a refusal also has
    /// `rerouted`, the flows moved while looking for room, which stay moved). Invalid requests —
    /// unknown hosts, a rate, burst or deadline that is not a positive number, a deadline
    /// below what any path offers — are refused the same way, never raised.
    fn request<'py>(
        &mut self,
        py: Python<'py>,
        src: &str,
        dst: &str,
        rate_bps: &Bound<'py, PyAny>,
        burst_bytes: &Bound<'py, PyAny>,
        deadline_ns: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let refuse = |d: &Bound<'py, PyDict>, code: &str, reason: String| -> PyResult<()> {
            d.set_item("admitted", false)?;
            d.set_item("code", code)?;
            d.set_item("reason", reason)?;
            Ok(())
        };
        let t = self.inner.topology().clone();
        let (Some(s), Some(ds)) = (t.node_id(src), t.node_id(dst)) else {
            let which = if t.node_id(src).is_none() { src } else { dst };
            refuse(&d, "unknown-host", format!("invalid request: unknown host {which:?}"))?;
            return Ok(d);
        };
        let Some(rate) = amount(rate_bps) else {
            refuse(
                &d,
                "invalid-rate",
                format!("invalid request: the rate must be at least 1 bit/s, got {rate_bps}"),
            )?;
            return Ok(d);
        };
        let Some(burst) = amount(burst_bytes) else {
            refuse(
                &d,
                "invalid-burst",
                format!("invalid request: the burst must be at least 1 byte, got {burst_bytes}"),
            )?;
            return Ok(d);
        };
        let Some(deadline) = amount(deadline_ns) else {
            refuse(
                &d,
                "invalid-deadline",
                format!("invalid request: the deadline must be at least 1 ns, got {deadline_ns}"),
            )?;
            return Ok(d);
        };
        let r = FlowRequest {
            src: s,
            dst: ds,
            rate: Rate::from_bps(rate),
            burst: Bytes::new(burst),
            deadline: Duration::from_nanos(deadline),
        };
        match self.inner.request(r) {
            Ok(a) => {
                d.set_item("admitted", true)?;
                d.set_item("id", a.id)?;
                d.set_item("rerouted", a.rerouted)?;
            }
            Err(e) => {
                refuse(&d, e.code(), e.to_string())?;
                if !e.is_invalid() {
                    // flows moved while the controller looked for room stay moved
                    d.set_item("rerouted", self.inner.moved_by_last_request().to_vec())?;
                }
            }
        }
        Ok(d)
    }

    /// Remove a flow; False if there is no such flow.
    fn remove(&mut self, id: u64) -> bool {
        self.inner.remove(id).is_some()
    }

    /// The packet-level cross-check of the flows admitted now, as JSON text (the document of
    /// `chameleon_crosscheck`, whose `phases` and `scenarios` these are). Releases the GIL.
    #[pyo3(signature = (duration_ms=20, background=true, seed=1, phases=None, scenarios=false))]
    fn cross_check(
        &self,
        py: Python<'_>,
        duration_ms: u64,
        background: bool,
        seed: u64,
        phases: Option<Vec<String>>,
        scenarios: bool,
    ) -> PyResult<String> {
        let check = CheckOptions {
            duration: Duration::from_millis(duration_ms),
            background,
            seed,
            phases: check_phases(phases)?,
            ..CheckOptions::default()
        };
        let ctl = &self.inner;
        let doc = py
            .allow_threads(|| check_doc(ctl, &check, scenarios))
            .map_err(PyValueError::new_err)?;
        serde_json::to_string(&doc).map_err(|e| LatnetError::new_err(e.to_string()))
    }

    /// The network this controller configures, as scenario-file text with no flows (switches
    /// forwarding by tag stacks into its strict-priority classes and a best-effort class below
    /// them when the ports have room; see `latnet_ctl::verify::network_scenario`), to which an
    /// emulated run adds its traffic.
    #[pyo3(signature = (duration_ns=1_000_000_000))]
    fn network_toml(&self, duration_ns: u64) -> PyResult<String> {
        if duration_ns == 0 {
            return Err(PyValueError::new_err("duration_ns: expected a duration above zero"));
        }
        verify::network_scenario(&self.inner, Duration::from_nanos(duration_ns))
            .and_then(|sc| verify::scenario_toml(&sc))
            .map_err(PyValueError::new_err)
    }

    /// A live run of the spec `spec` (the text of the file `name`: `[sim]`, `[[flows]]`,
    /// `[[requests]]`; see `latnet_ctl::live`) on this controller's network, as JSON text:
    /// `scenario` (file text), `duration_ns`, `dilation`, `tag_allowance_bytes`, `requests`.
    /// A mistake is a ScenarioError naming the file and key.
    fn live_plan(&self, name: &str, spec: &str) -> PyResult<String> {
        let p = latnet_ctl::live::live_plan(&self.inner, name, spec)
            .map_err(|e| crate::ScenarioError::new_err(e.to_string()))?;
        serde_json::to_string(&p).map_err(|e| LatnetError::new_err(e.to_string()))
    }

    /// Bring this controller, with nothing admitted yet, to the state of a checkpoint: the JSON
    /// text of the service's `GET /snapshot` (or of `checkpoint()`). It then decides every
    /// later request as the controller the checkpoint was taken from. A checkpoint this
    /// controller could not have reached (another topology, over-full queues, ...) is a
    /// LatnetError naming what is wrong, and leaves the controller empty.
    fn restore(&mut self, checkpoint: &str) -> PyResult<()> {
        let v: serde_json::Value = serde_json::from_str(checkpoint)
            .map_err(|e| PyValueError::new_err(format!("the checkpoint is not JSON: {e}")))?;
        let topo = self.inner.topology().clone();
        let cp = latnet_ctl::Checkpoint::from_json(&topo, &v)
            .map_err(|e| PyValueError::new_err(format!("the checkpoint: {e}")))?;
        self.inner.restore(&cp).map_err(|e| LatnetError::new_err(format!("the checkpoint: {e}")))
    }

    /// This controller's state as checkpoint JSON text (what `restore` takes).
    fn checkpoint(&self) -> PyResult<String> {
        let v = self.inner.checkpoint().to_json(self.inner.topology());
        serde_json::to_string(&v).map_err(|e| LatnetError::new_err(e.to_string()))
    }

    /// A copy in the same state (to keep the state before a request).
    fn copy(&self) -> ChameleonController {
        ChameleonController { inner: self.inner.clone() }
    }

    /// The change from `before` (a copy taken just before the last request) to now,
    /// simulated packet by packet in each re-tag order: `new_flow` is the flow the request
    /// admitted (None if refused), `moved` the flows it moved, in the order moved (see
    /// `chameleon_transitions` for the other arguments). JSON text: `new_flow`, `moved`,
    /// `old_guarantee_ns`, `flows`, `skipped`, `runs`. Releases the GIL.
    #[pyo3(signature = (before, new_flow, moved, duration_ms=10, background=true, seed=1,
        phases=None, orders=None, at_ms=3, lag_ms=5))]
    #[allow(clippy::too_many_arguments)]
    fn transitions(
        &self,
        py: Python<'_>,
        before: &ChameleonController,
        new_flow: Option<u64>,
        moved: Vec<u64>,
        duration_ms: u64,
        background: bool,
        seed: u64,
        phases: Option<Vec<String>>,
        orders: Option<Vec<String>>,
        at_ms: u64,
        lag_ms: u64,
    ) -> PyResult<String> {
        let (check, orders) = transition_options(duration_ms, background, seed, phases, orders)?;
        let (at, lag) = (Duration::from_millis(at_ms), Duration::from_millis(lag_ms));
        let t = verify::Transition {
            before: &before.inner,
            after: &self.inner,
            new_flow,
            moved: &moved,
        };
        let r = py
            .allow_threads(|| verify::transition_check(&t, &check, at, lag, &orders))
            .map_err(PyValueError::new_err)?;
        serde_json::to_string(&r).map_err(|e| LatnetError::new_err(e.to_string()))
    }

    /// The admitted flows: id, src, dst, rate_bps, burst_bytes, deadline_ns, guarantee_ns,
    /// path (node names), queues (per hop), budgets_ns (per hop), tags (outermost first),
    /// shaper (rate_bps, burst_bytes).
    fn flows<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let t = self.inner.topology();
        self.inner
            .flows()
            .map(|e| {
                let d = PyDict::new(py);
                d.set_item("id", e.id)?;
                d.set_item("src", &t.nodes()[e.request.src].name)?;
                d.set_item("dst", &t.nodes()[e.request.dst].name)?;
                d.set_item("rate_bps", e.request.rate.bps())?;
                d.set_item("burst_bytes", e.request.burst.get())?;
                d.set_item("deadline_ns", e.request.deadline.as_nanos())?;
                d.set_item("guarantee_ns", e.guarantee.as_nanos())?;
                let path: Vec<&str> =
                    e.path(t).iter().map(|&n| t.nodes()[n].name.as_str()).collect();
                d.set_item("path", path)?;
                // a list of ints (a Vec<u8> would become bytes)
                let queues: Vec<u32> = e.hops.iter().map(|h| u32::from(h.queue)).collect();
                d.set_item("queues", queues)?;
                d.set_item(
                    "budgets_ns",
                    e.hops.iter().map(|h| h.budget.as_nanos()).collect::<Vec<_>>(),
                )?;
                d.set_item("tags", self.inner.tags(e))?;
                let sh = PyDict::new(py);
                sh.set_item("rate_bps", e.shaper().rate.bps())?;
                sh.set_item("burst_bytes", e.shaper().burst.get())?;
                d.set_item("shaper", sh)?;
                Ok(d)
            })
            .collect()
    }

    /// Number of admitted flows.
    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// Add the Chameleon functions and class to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(chameleon_eval, m)?)?;
    m.add_function(wrap_pyfunction!(chameleon_crosscheck, m)?)?;
    m.add_function(wrap_pyfunction!(chameleon_transitions, m)?)?;
    m.add_class::<ChameleonController>()?;
    Ok(())
}
