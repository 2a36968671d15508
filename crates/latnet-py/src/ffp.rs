//! Measurement of the composite pipeline for `latnet reproduce ffp`: ns per packet of the
//! plain and composite pipelines on the seed's scenarios. Timing lives here, at the edge: the
//! classifier itself never reads a clock.

use latnet_dataplane::classifier::workload::{self, Workload, WorkloadSpec};
use latnet_dataplane::classifier::{
    Algo, Classifier, Control, FfpConfig, FlowCommand, FlowMod, Match,
};
use latnet_units::Time;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::hint::black_box;
use std::time::Instant;

fn spec_of(text: &str) -> PyResult<WorkloadSpec> {
    toml::from_str(text).map_err(|e| crate::LatnetError::new_err(format!("workload spec: {e}")))
}

fn algo_of(s: &str) -> PyResult<Algo> {
    match s {
        "pof" => Ok(Algo::Pof),
        "strong" => Ok(Algo::Strong),
        _ => Err(crate::LatnetError::new_err(format!(
            "algo must be \"pof\" or \"strong\", got {s:?}"
        ))),
    }
}

/// Process the packets of `seq` (indices into the flows' frames) and return ns per packet.
/// Frames are reused per flow: the scenarios' instructions do not rewrite packets, and a
/// flow's frame stays in cache as a NIC's DMA into the last-level cache would leave it.
fn time_seq(c: &mut Classifier, frames: &mut [Vec<u8>], seq: &[usize], size: u32) -> f64 {
    if seq.is_empty() {
        return f64::NAN;
    }
    let t0 = Instant::now();
    for &i in seq {
        black_box(c.process(Time::ZERO, &mut frames[i], 1, size));
    }
    t0.elapsed().as_nanos() as f64 / seq.len() as f64
}

/// Build a workload from a TOML spec (see `experiments/ffp/*.toml`).
fn build(spec_toml: &str, flows: Option<u32>) -> PyResult<Workload> {
    let mut spec = spec_of(spec_toml)?;
    if let Some(f) = flows {
        spec.flows = f;
    }
    Ok(workload::build(&spec))
}

/// ns per packet of one pipeline on one scenario's traffic mix.
///
/// Returns a dict: `all_ns`, `ll_ns`, `normal_ns` (one value per repeat: the whole mix, then
/// its low-latency packets alone and its normal packets alone, each from the warmed state),
/// `ll_packets`, `normal_packets`, (`fast_keys`: the fast path's key assembly, see
/// [`FfpConfig::fast_keys`]), `mismatches` (decisions that differ from a plain strong
/// pipeline on the same packets), `lut_hits`, `lut_misses`.
#[pyfunction]
#[pyo3(signature = (spec_toml, algo, ffp, ll_permille, packets, size, repeats, flows=None, fast_keys=true))]
#[allow(clippy::too_many_arguments)]
pub fn ffp_measure<'py>(
    py: Python<'py>,
    spec_toml: &str,
    algo: &str,
    ffp: bool,
    ll_permille: u32,
    packets: usize,
    size: usize,
    repeats: usize,
    flows: Option<u32>,
    fast_keys: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let algo = algo_of(algo)?;
    let w = build(spec_toml, flows)?;
    let seq = workload::mix(&w, packets, ll_permille.min(1000), 7);
    let size32 = size as u32;
    // frames: low-latency flows first, then normal flows
    let nll = w.ll_flows.len();
    let mut frames: Vec<Vec<u8>> =
        w.ll_flows.iter().chain(&w.normal_flows).map(|h| workload::frame(h, size)).collect();
    let all: Vec<usize> = seq.iter().map(|&(ll, i)| if ll { i } else { nll + i }).collect();
    let ll: Vec<usize> = all.iter().copied().filter(|&i| i < nll).collect();
    let normal: Vec<usize> = all.iter().copied().filter(|&i| i >= nll).collect();
    let cfg = FfpConfig { fast_keys, ..FfpConfig::default() };
    let mut c = w.classifier(algo, ffp.then_some(cfg));
    let mut reference = w.classifier(Algo::Strong, None);
    // warm-up pass, checking every decision (and the packet bytes) against the reference
    let mut mismatches = 0u64;
    for &i in &all {
        let (mut a, mut b) = (frames[i].clone(), frames[i].clone());
        let (x, y) = (
            c.process(Time::ZERO, &mut a, 1, size32),
            reference.process(Time::ZERO, &mut b, 1, size32),
        );
        if x != y || a != b || a != frames[i] {
            mismatches += 1;
        }
    }
    let (mut t_all, mut t_ll, mut t_n) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats.max(1) {
        py.check_signals()?;
        t_all.push(time_seq(&mut c, &mut frames, &all, size32));
        t_ll.push(time_seq(&mut c, &mut frames, &ll, size32));
        t_n.push(time_seq(&mut c, &mut frames, &normal, size32));
    }
    let d = PyDict::new(py);
    d.set_item("all_ns", t_all)?;
    d.set_item("ll_ns", t_ll)?;
    d.set_item("normal_ns", t_n)?;
    d.set_item("ll_packets", ll.len())?;
    d.set_item("normal_packets", normal.len())?;
    d.set_item("mismatches", mismatches)?;
    let (hits, misses) = match &c {
        Classifier::Composite(cp) => {
            cp.lut_stats().iter().fold((0u64, 0u64), |(h, m), l| (h + l.hits, m + l.misses))
        }
        Classifier::Plain(_) => (0, 0),
    };
    d.set_item("lut_hits", hits)?;
    d.set_item("lut_misses", misses)?;
    Ok(d)
}

/// ns per low-latency packet while rules churn: every `every` packets a normal rule that beats
/// and overlaps a random low-latency stage-2 rule is added (the seed's Figure 6), and removed
/// `every` packets later. Control work is included in the time. Returns `ns` (per repeat),
/// `verifications` and `mismatches` (against a plain pipeline given the same churn).
#[pyfunction]
#[pyo3(signature = (spec_toml, algo, ffp, every, packets, size, repeats, flows=None))]
#[allow(clippy::too_many_arguments)]
pub fn ffp_churn<'py>(
    py: Python<'py>,
    spec_toml: &str,
    algo: &str,
    ffp: bool,
    every: usize,
    packets: usize,
    size: usize,
    repeats: usize,
    flows: Option<u32>,
) -> PyResult<Bound<'py, PyDict>> {
    let algo = algo_of(algo)?;
    let w = build(spec_toml, flows)?;
    let seq: Vec<usize> = workload::mix(&w, packets, 1000, 11).into_iter().map(|x| x.1).collect();
    let mut flows: Vec<Vec<u8>> = w.ll_flows.iter().map(|h| workload::frame(h, size)).collect();
    // the churn rules: copies of low-latency stage-2 rules with the top priority, normal
    let ll_rules: Vec<&FlowMod> = w
        .messages
        .iter()
        .filter_map(|m| match m {
            Control::Flow(fm) if fm.table == 1 && fm.low_latency => Some(fm),
            _ => None,
        })
        .filter(|fm| matches!(fm.matcher, Match::Masked { .. }))
        .collect();
    if ll_rules.is_empty() {
        return Err(crate::LatnetError::new_err("the scenario has no low-latency stage-2 rules"));
    }
    let every = every.max(1);
    let churn = |k: usize| -> Control {
        let base = ll_rules[k % ll_rules.len()];
        let id = 1_000_000 + k as u32;
        if k % 2 == 0 {
            Control::Flow(FlowMod {
                command: FlowCommand::Add,
                id,
                priority: u16::MAX,
                low_latency: false,
                ..base.clone()
            })
        } else {
            Control::Flow(FlowMod::delete(1, id - 1))
        }
    };
    let size32 = size as u32;
    let mut c = w.classifier(algo, ffp.then(FfpConfig::default));
    let mut reference = w.classifier(Algo::Strong, None);
    let mut mismatches = 0u64;
    let mut k = 0usize;
    for (i, &fi) in seq.iter().enumerate() {
        let f = &flows[fi];
        if i % every == 0 {
            let m = churn(k);
            k += 1;
            let (a, b) = (c.apply(Time::ZERO, &m), reference.apply(Time::ZERO, &m));
            if a.is_ok() != b.is_ok() {
                mismatches += 1;
            }
        }
        let (mut a, mut b) = (f.clone(), f.clone());
        if c.process(Time::ZERO, &mut a, 1, size32)
            != reference.process(Time::ZERO, &mut b, 1, size32)
        {
            mismatches += 1;
        }
    }
    let mut times = Vec::new();
    for _ in 0..repeats.max(1) {
        py.check_signals()?;
        let t0 = Instant::now();
        for (i, &fi) in seq.iter().enumerate() {
            if i % every == 0 {
                let m = churn(k);
                k += 1;
                let _ = black_box(c.apply(Time::ZERO, &m));
            }
            black_box(c.process(Time::ZERO, &mut flows[fi], 1, size32));
        }
        times.push(t0.elapsed().as_nanos() as f64 / seq.len().max(1) as f64);
    }
    let d = PyDict::new(py);
    d.set_item("ns", times)?;
    let ver: u64 = match &c {
        Classifier::Composite(cp) => cp.lut_stats().iter().map(|l| l.verifications).sum(),
        Classifier::Plain(_) => 0,
    };
    d.set_item("verifications", ver)?;
    d.set_item("mismatches", mismatches)?;
    Ok(d)
}

/// The rule set of a scenario as JSON control messages, one per line.
#[pyfunction]
pub fn ffp_rules_json(spec_toml: &str) -> PyResult<String> {
    Ok(build(spec_toml, Some(1))?.to_json_lines())
}

/// Register this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ffp_measure, m)?)?;
    m.add_function(wrap_pyfunction!(ffp_churn, m)?)?;
    m.add_function(wrap_pyfunction!(ffp_rules_json, m)?)?;
    Ok(())
}
