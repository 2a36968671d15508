//! `[[pipelines]]`: match-action pipelines (the composite-pipeline seed's classifier) that
//! switches use instead of the FIB (`pipeline = "NAME"` on a `[[nodes]]` entry).
//!
//! ```toml
//! [[pipelines]]
//! name = "edge"
//! algo = "strong"        # or "pof"
//! ffp = true             # the Fast-Forwarding Path in front (default true)
//! lut_capacity = 4096    # records per fast-path table (default 16384)
//! # modelled per-packet processing cost (optional; default none): the switch works on one
//! # packet at a time; with the fast path (ffp) a packet whose every hit was low-latency costs
//! # `low_latency`, any other `normal`, each plus `per_stage` per table visited; a backlog
//! # above `max_backlog` drops
//! processing = { normal = "5us", low_latency = "1.2us", per_stage = "0ns", max_backlog = "10ms" }
//! tables = [
//!   { id = 0, name = "eth", kind = "mask", fields = ["eth.type"], size = 16 },
//!   { id = 1, name = "fib", kind = "lpm", fields = ["ipv4.dst"], size = 64 },
//! ]
//! [[pipelines.rules]]
//! table = "eth"
//! id = 1
//! priority = 10
//! low_latency = true
//! match = { "eth.type" = "0x0800" }
//! actions = ["goto fib"]
//! ```
//!
//! Tables and rules use the text form of `latnet_dataplane::classifier::text`; each is
//! validated by installing it in a scratch pipeline, so a rule that a switch would refuse is a
//! scenario error naming the file, line and key.

use super::error::ErrCtx;
use super::ScenarioError;
use latnet_dataplane::classifier::text::{RuleText, TableText};
use latnet_dataplane::classifier::{Algo, Classifier, Control, FfpConfig, TableMod, TableSpec};
use latnet_units::{Duration, Time};
use serde::Deserialize;
use toml::Spanned;

/// A validated pipeline: the control messages that build it.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineSpec {
    /// Unique name.
    pub name: String,
    /// Lookup algorithms.
    pub algo: Algo,
    /// Fast path settings, if the fast path is on.
    pub ffp: Option<FfpConfig>,
    /// Table-mods then flow-mods, in file order.
    pub messages: Vec<Control>,
    /// Modelled per-packet processing cost, if any.
    pub processing: Option<Processing>,
}

/// A modelled per-packet processing cost: the switch is one server that handles packets in
/// arrival order; each costs `low_latency` if every entry it hit was a low-latency entry (the
/// fast path's traffic; without the fast path, `ffp = false`, every packet costs `normal`),
/// `normal` otherwise, plus `per_stage` per table visited. Take the
/// figures from measurements (e.g. `latnet reproduce ffp`). A packet that would wait more than
/// `max_backlog` for the server is dropped as `processing-overload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Processing {
    /// Cost of a packet that took the low-latency path.
    #[serde(default)]
    pub low_latency: Duration,
    /// Cost of any other packet.
    #[serde(default)]
    pub normal: Duration,
    /// Added per table visited.
    #[serde(default)]
    pub per_stage: Duration,
    /// Longest wait for the server before a packet is dropped (default 10 ms).
    #[serde(default = "default_backlog")]
    pub max_backlog: Duration,
}

fn default_backlog() -> Duration {
    latnet_units::dilated_default(Duration::from_millis(10))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPipeline {
    name: Spanned<String>,
    #[serde(default = "default_algo")]
    algo: Algo,
    #[serde(default = "default_true")]
    ffp: bool,
    lut_capacity: Option<Spanned<usize>>,
    #[serde(default)]
    tables: Vec<Spanned<TableText>>,
    #[serde(default)]
    rules: Vec<Spanned<RuleText>>,
    processing: Option<Processing>,
}

fn default_algo() -> Algo {
    Algo::Strong
}

fn default_true() -> bool {
    true
}

pub(super) fn validate(
    cx: ErrCtx<'_>,
    raw: &[RawPipeline],
) -> Result<Vec<PipelineSpec>, ScenarioError> {
    let mut out: Vec<PipelineSpec> = Vec::with_capacity(raw.len());
    for (i, p) in raw.iter().enumerate() {
        let name = p.name.get_ref().trim().to_owned();
        if name.is_empty() || out.iter().any(|q| q.name == name) {
            return Err(cx.at(
                Some(p.name.span()),
                format!("pipelines[{i}].name"),
                format!("expected a unique, non-empty name, got {name:?}"),
            ));
        }
        let mut cfg = FfpConfig::default();
        if let Some(c) = &p.lut_capacity {
            if !(1..=1 << 24).contains(c.get_ref()) {
                return Err(cx.at(
                    Some(c.span()),
                    format!("pipelines[{i}].lut_capacity"),
                    "expected 1..=16777216 records",
                ));
            }
            cfg.lut_capacity = *c.get_ref();
        }
        let ffp = p.ffp.then_some(cfg);
        let mut scratch = Classifier::new(p.algo, ffp, 0);
        let mut specs: Vec<TableSpec> = Vec::new();
        let mut messages = Vec::new();
        for (j, t) in p.tables.iter().enumerate() {
            let key = format!("pipelines[{i}].tables[{j}]");
            let spec = t
                .get_ref()
                .to_spec(&specs)
                .map_err(|e| cx.at(Some(t.span()), &key, e.to_string()))?;
            let m = Control::Table(TableMod::Add(spec.clone()));
            scratch
                .apply(Time::ZERO, &m)
                .map_err(|e| cx.at(Some(t.span()), &key, e.to_string()))?;
            specs.push(spec);
            messages.push(m);
        }
        for (j, r) in p.rules.iter().enumerate() {
            let key = format!("pipelines[{i}].rules[{j}]");
            let fm = r
                .get_ref()
                .to_flow_mod(&specs)
                .map_err(|e| cx.at(Some(r.span()), &key, e.to_string()))?;
            let m = Control::Flow(fm);
            scratch
                .apply(Time::ZERO, &m)
                .map_err(|e| cx.at(Some(r.span()), &key, e.to_string()))?;
            messages.push(m);
        }
        out.push(PipelineSpec { name, algo: p.algo, ffp, messages, processing: p.processing });
    }
    Ok(out)
}
