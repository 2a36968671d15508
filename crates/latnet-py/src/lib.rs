//! Python bindings: the private `latnet._latnet` module. Thin by design: it converts
//! arguments, releases nothing the core does not own, and maps each Rust error to a named
//! Python exception. A simulation run gives up the GIL between its progress reports. Everything user-facing (CLI, tables, plots, DataFrames) is in the Python
//! package `latnet`.
//!
//! Exceptions: `latnet.ScenarioError` (a scenario file that cannot be used; the message names
//! the file, line, key and expectation) and `latnet.LatnetError` (its base class).

// PyO3's macros expand to code that trips these workspace lints.
#![allow(unsafe_code, missing_debug_implementations)]

mod chameleon;
mod ffp;

use latnet_sim::{Results, Scenario, Simulator};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::path::PathBuf;

create_exception!(_latnet, LatnetError, PyException, "Base class of latnet errors.");
create_exception!(
    _latnet,
    ScenarioError,
    LatnetError,
    "A scenario that cannot be used; the message names the file, line, key and expectation."
);

fn scenario_err(e: latnet_sim::ScenarioError) -> PyErr {
    ScenarioError::new_err(e.to_string())
}

/// The results of one simulation run.
#[pyclass(module = "latnet._latnet", frozen)]
struct SimResults {
    inner: Results,
    /// The scenario's warnings (`file:line:col: \`key\`: message`).
    warnings: Vec<String>,
}

fn le_bytes<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    rows: &[T],
    f: impl Fn(&T) -> [u8; N],
) -> Bound<'py, PyBytes> {
    let mut v = Vec::with_capacity(rows.len() * N);
    for r in rows {
        v.extend_from_slice(&f(r));
    }
    PyBytes::new(py, &v)
}

#[pymethods]
impl SimResults {
    /// What the scenario holds that is valid but most likely not meant (a flow no link path
    /// joins), each naming the file, line and key.
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// The JSON summary (what `results.json` holds).
    fn json(&self) -> String {
        self.inner.to_json()
    }

    /// The per-flow table as CSV text.
    fn flows_csv(&self) -> String {
        self.inner.flows_csv()
    }

    /// Names of every accounting record packet and hop records refer to by index: the flows,
    /// then `<flow>:server` for the server side of each TCP flow.
    fn flow_names(&self) -> Vec<String> {
        let n = self.inner.flows.len() + self.inner.aux_flow_names.len();
        (0..n as u32).map(|i| self.inner.flow_name(i).to_owned()).collect()
    }

    /// The per-interval TCP time series as CSV text (`timeseries.csv`), `None` without TCP
    /// flows.
    fn timeseries_csv(&self) -> Option<String> {
        self.inner.timeseries_csv()
    }

    /// The per-port queue occupancy series as CSV text (`queues.csv`), `None` unless the
    /// scenario's `[output] queues` set an interval.
    fn queues_csv(&self) -> Option<String> {
        self.inner.queues_csv()
    }

    /// Write results.json, flows.csv (and packets.csv, hops.csv if recorded) into `dir`. A
    /// file or directory that cannot be written is an `OSError` of its kind
    /// (`PermissionError`, `FileNotFoundError`, ...) naming it.
    fn write_dir(&self, dir: PathBuf) -> PyResult<Vec<String>> {
        let paths = self.inner.write_dir(&dir).map_err(PyErr::from)?;
        Ok(paths.into_iter().map(|p| p.display().to_string()).collect())
    }

    /// Per-packet columns as little-endian arrays (`id`, `seq`, `created_ns`, `end_ns`,
    /// `latency_ns` as u64 with `u64::MAX` for "not received"; `flow` and `drop_node` as u32
    /// with `u32::MAX` for none) plus `drop_reason` as a list of str; `None` if the run did not
    /// record packets.
    fn packet_columns<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(log) = &self.inner.log else { return Ok(None) };
        let p = &log.packets;
        let d = PyDict::new(py);
        d.set_item("id", le_bytes(py, p, |r| r.id.to_le_bytes()))?;
        d.set_item("flow", le_bytes(py, p, |r| r.flow.to_le_bytes()))?;
        d.set_item("seq", le_bytes(py, p, |r| r.seq.to_le_bytes()))?;
        d.set_item("created_ns", le_bytes(py, p, |r| r.created_ns.to_le_bytes()))?;
        d.set_item("end_ns", le_bytes(py, p, |r| r.end_ns.to_le_bytes()))?;
        d.set_item(
            "latency_ns",
            le_bytes(py, p, |r| r.latency_ns.unwrap_or(u64::MAX).to_le_bytes()),
        )?;
        d.set_item(
            "drop_node",
            le_bytes(py, p, |r| r.drop_node.unwrap_or(u32::MAX).to_le_bytes()),
        )?;
        let reasons: Vec<&str> = p.iter().map(|r| r.drop.map_or("", |d| d.as_str())).collect();
        d.set_item("drop_reason", PyList::new(py, reasons)?)?;
        Ok(Some(d))
    }

    /// Per-hop columns (`id`, `enqueue_ns`, `eligible_ns`, `start_tx_ns` u64; `flow`, `node`,
    /// `port` u32; `hop`, `priority` u8), or `None` if not recorded.
    fn hop_columns<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(log) = &self.inner.log else { return Ok(None) };
        let h = &log.hops;
        let d = PyDict::new(py);
        d.set_item("id", le_bytes(py, h, |r| r.id.to_le_bytes()))?;
        d.set_item("flow", le_bytes(py, h, |r| r.flow.to_le_bytes()))?;
        d.set_item("seq", le_bytes(py, h, |r| r.seq.to_le_bytes()))?;
        d.set_item("hop", le_bytes(py, h, |r| [r.hop]))?;
        d.set_item("node", le_bytes(py, h, |r| r.node.to_le_bytes()))?;
        d.set_item("port", le_bytes(py, h, |r| r.port.to_le_bytes()))?;
        d.set_item("priority", le_bytes(py, h, |r| [r.priority]))?;
        d.set_item("enqueue_ns", le_bytes(py, h, |r| r.enqueue_ns.to_le_bytes()))?;
        d.set_item("eligible_ns", le_bytes(py, h, |r| r.eligible_ns.to_le_bytes()))?;
        d.set_item("start_tx_ns", le_bytes(py, h, |r| r.start_tx_ns.to_le_bytes()))?;
        Ok(Some(d))
    }
}

fn load(path: Option<PathBuf>, text: Option<&str>, name: &str) -> PyResult<Scenario> {
    match (path, text) {
        (Some(p), None) => Scenario::from_file(&p).map_err(scenario_err),
        (None, Some(t)) => Scenario::from_str_named(name, t).map_err(scenario_err),
        _ => Err(LatnetError::new_err("give exactly one of `path` and `text`")),
    }
}

/// Check a scenario without running it; returns a short description and the scenario's
/// warnings.
#[pyfunction]
#[pyo3(signature = (path=None, text=None, name="<string>"))]
fn check(path: Option<PathBuf>, text: Option<&str>, name: &str) -> PyResult<(String, Vec<String>)> {
    let sc = load(path, text, name)?;
    let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let about = format!(
        "{}: {}, {}, {}, {} of sending, seed {}",
        sc.name,
        count(sc.nodes.len(), "node"),
        count(sc.links.len(), "link"),
        count(sc.flows.len(), "flow"),
        sc.sim.duration,
        sc.sim.seed
    );
    Ok((about, sc.warnings.iter().map(ToString::to_string).collect()))
}

/// Run a scenario given as a file `path` or as TOML `text`.
///
/// `seed` overrides the scenario's seed; `packets` forces per-packet records on or off, `pcap`
/// the links' packet captures, `queues` (a duration such as "1ms") sets the queue series;
/// `progress(now_ns, end_ns, events)` is called about every 1 % of virtual time and may return
/// False (or raise) to stop early.
#[pyfunction]
#[pyo3(signature = (path=None, text=None, name="<string>", seed=None, packets=None, pcap=None, queues=None, progress=None))]
#[allow(clippy::too_many_arguments)] // one per keyword argument of latnet.run
fn run(
    py: Python<'_>,
    path: Option<PathBuf>,
    text: Option<&str>,
    name: &str,
    seed: Option<u64>,
    packets: Option<bool>,
    pcap: Option<bool>,
    queues: Option<&str>,
    progress: Option<PyObject>,
) -> PyResult<SimResults> {
    let mut sc = load(path, text, name)?;
    if let Some(s) = seed {
        sc.sim.seed = s;
    }
    if let Some(p) = packets {
        sc.output.packets = p;
    }
    // as if written in the file's [output]: a capture refused under dilation (its stamps would
    // be in dilated time), the interval in the scenario's time
    let k = sc.sim.dilation;
    if let Some(p) = pcap {
        if p && k != 1 {
            return Err(ScenarioError::new_err(format!(
                "pcap: a packet capture cannot be dilated (sim.dilation = {k})"
            )));
        }
        sc.output.pcap = p;
    }
    if let Some(q) = queues {
        let iv: latnet_units::Duration = q.parse().map_err(|e| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "queues: expected an interval such as \"1ms\": {e}"
            ))
        })?;
        if iv.is_zero() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "queues: expected an interval above zero, such as \"1ms\"",
            ));
        }
        sc.output.queues =
            Some(latnet_units::with_dilation(u64::from(k), || latnet_units::dilated_default(iv)));
    }
    let warnings = sc.warnings.iter().map(ToString::to_string).collect();
    let mut err: Option<PyErr> = None;
    let sim = Simulator::new(sc);
    // The run holds no Python object between reports: other Python threads run meanwhile, and
    // the GIL is taken back for each report (signals, the callback).
    let results = py.allow_threads(|| {
        sim.run_with_progress(|p| {
            // the report that closes a stopped run: the callback that raised (or the signal
            // that stopped it) is not called again, and its exception is the one raised
            if err.is_some() {
                return false;
            }
            Python::with_gil(|py| {
                if let Err(e) = py.check_signals() {
                    err = Some(e);
                    return false;
                }
                let Some(cb) = &progress else { return true };
                match cb.call1(py, (p.now.as_nanos(), p.end.as_nanos(), p.events)) {
                    Ok(v) => !v.bind(py).is(&*pyo3::types::PyBool::new(py, false)),
                    Err(e) => {
                        err = Some(e);
                        false
                    }
                }
            })
        })
    });
    match err {
        Some(e) => Err(e),
        None => Ok(SimResults { inner: results, warnings }),
    }
}

/// Scenario `text` (named `name` in errors) with each `(key, value)` of `sets` set, as TOML
/// text: `key` is a path such as `links[0].rate` or `flows[video].size`, `value` TOML or else a
/// string. Raises ScenarioError naming the key when the path does not exist.
#[pyfunction]
#[pyo3(signature = (text, sets, name="<string>"))]
fn apply_overrides(text: &str, sets: Vec<(String, String)>, name: &str) -> PyResult<String> {
    latnet_sim::scenario::apply_overrides(name, text, &sets).map_err(scenario_err)
}

/// A duration as scenario files write it ("1ms", "250us", ...) in nanoseconds; a ValueError
/// says what was expected.
#[pyfunction]
fn duration_ns(text: &str) -> PyResult<u64> {
    text.parse::<latnet_units::Duration>()
        .map(latnet_units::Duration::as_nanos)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// The frames of a pcap file as CSV (`latnet_sim::pcap::frames_csv`): an OSError if it cannot
/// be read, a ValueError naming the file if it is not a capture latnet reads.
#[pyfunction]
fn pcap_frames_csv(path: PathBuf) -> PyResult<String> {
    let bytes = std::fs::read(&path)
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", path.display())))?;
    latnet_sim::pcap::frames_csv(&bytes)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("{}: {e}", path.display())))
}

/// The private extension module behind `latnet`.
#[pymodule]
fn _latnet(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("LatnetError", m.py().get_type::<LatnetError>())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add_class::<SimResults>()?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(apply_overrides, m)?)?;
    m.add_function(wrap_pyfunction!(duration_ns, m)?)?;
    m.add_function(wrap_pyfunction!(pcap_frames_csv, m)?)?;
    ffp::register(m)?;
    chameleon::register(m)?;
    Ok(())
}
