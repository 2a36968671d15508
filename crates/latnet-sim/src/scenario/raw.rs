//! A scenario file as written: the TOML tables serde reads, spans kept for error messages.

use super::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) description: String,
    pub(super) sim: RawSim,
    #[serde(default)]
    pub(super) defaults: RawDefaults,
    pub(super) nodes: Vec<RawNode>,
    #[serde(default)]
    pub(super) links: Vec<RawLink>,
    #[serde(default)]
    pub(super) routes: Vec<RawRoute>,
    #[serde(default)]
    pub(super) flows: Vec<RawFlow>,
    #[serde(default)]
    pub(super) output: OutputSpec,
    #[serde(default)]
    pub(super) pipelines: Vec<pipeline::RawPipeline>,
    pub(super) lbf: Option<lbf::RawLbf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSim {
    pub(super) duration: Spanned<Duration>,
    pub(super) drain: Option<Duration>,
    #[serde(default = "default_seed")]
    pub(super) seed: u64,
    #[serde(default)]
    pub(super) tie_break: TieBreak,
    #[serde(default)]
    pub(super) latency: LatencyConvention,
    #[serde(default)]
    pub(super) routing: RoutingMetric,
    #[serde(default)]
    pub(super) switching: Switching,
    pub(super) dilation: Option<Spanned<u32>>,
}

fn default_seed() -> u64 {
    1
}

/// `[sim] dilation` of scenario text `src`, read before the rest (which is read under it).
pub(super) fn peek_dilation(cx: ErrCtx<'_>, src: &str) -> Result<u32, ScenarioError> {
    if !src.contains("dilation") {
        return Ok(1);
    }
    #[derive(Deserialize)]
    struct Peek {
        sim: Option<PeekSim>,
    }
    #[derive(Deserialize)]
    struct PeekSim {
        dilation: Option<Spanned<toml::Value>>,
    }
    // a syntax error is reported by the full read
    let Ok(Peek { sim: Some(PeekSim { dilation: Some(d) }) }) = toml::from_str::<Peek>(src) else {
        return Ok(1);
    };
    match d.get_ref().as_integer().and_then(|k| u32::try_from(k).ok()) {
        Some(k @ 1..=MAX_DILATION) => Ok(k),
        _ => Err(cx.at(
            Some(d.span()),
            "sim.dilation",
            format!("expected an integer factor from 1 to {MAX_DILATION}, got {}", d.get_ref()),
        )),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    pub(super) queue: Option<Spanned<QueueSpec>>,
    pub(super) link: Option<RawLinkDefaults>,
    pub(super) tcp: Option<Spanned<toml::Table>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLinkDefaults {
    pub(super) rate: Option<Spanned<Rate>>,
    pub(super) delay: Option<Duration>,
    pub(super) loss: Option<Spanned<f64>>,
    pub(super) overhead: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNode {
    pub(super) name: Spanned<String>,
    pub(super) kind: NodeKind,
    pub(super) address: Option<Spanned<String>>,
    pub(super) queue: Option<Spanned<QueueSpec>>,
    pub(super) pipeline: Option<Spanned<String>>,
    pub(super) lbf: Option<Spanned<lbf::RawLbfNode>>,
    pub(super) forwarding: Option<Spanned<ForwardingSpec>>,
    pub(super) large_flows: Option<Spanned<latnet_dataplane::CounterSpec>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLink {
    pub(super) a: Spanned<String>,
    pub(super) b: Spanned<String>,
    pub(super) rate: Option<Spanned<Rate>>,
    pub(super) delay: Option<Duration>,
    pub(super) loss: Option<Spanned<f64>>,
    pub(super) overhead: Option<u32>,
    pub(super) queue: Option<Spanned<QueueSpec>>,
    pub(super) queue_a: Option<Spanned<QueueSpec>>,
    pub(super) queue_b: Option<Spanned<QueueSpec>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub(super) node: Spanned<String>,
    pub(super) dst: Spanned<String>,
    pub(super) next: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlow {
    pub(super) name: Option<Spanned<String>>,
    pub(super) src: Spanned<String>,
    pub(super) dst: Spanned<String>,
    pub(super) priority: Option<Spanned<u8>>,
    pub(super) size: Spanned<u32>,
    pub(super) start: Option<Time>,
    pub(super) stop: Option<Spanned<Time>>,
    pub(super) count: Option<u64>,
    pub(super) src_port: Option<u16>,
    pub(super) dst_port: Option<u16>,
    pub(super) traffic: Spanned<TrafficSpec>,
    pub(super) jitter: Option<Spanned<Duration>>,
    pub(super) slo: Option<Spanned<lbf::RawSlo>>,
    pub(super) tags: Option<Spanned<Vec<u16>>>,
    pub(super) retag: Option<Spanned<Vec<RawRetag>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetag {
    pub(super) at: Time,
    pub(super) tags: Vec<u16>,
}
