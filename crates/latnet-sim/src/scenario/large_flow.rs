//! Checks of switch-assisted pacing settings: a large flow that paces with its host's `htb`
//! or `fq` queue needs that queue kind at its host's egress.

use super::error::ErrCtx;
use super::{LinkSpec, NodeSpec, ScenarioError};
use crate::tcp::app::LargeFlowPacing;
use crate::traffic::TrafficSpec;
use latnet_dataplane::QueueSpec;

/// Check flow `i` (from host `src`, traffic at `span`) against the links.
pub(super) fn check(
    cx: ErrCtx<'_>,
    i: usize,
    span: std::ops::Range<usize>,
    traffic: &TrafficSpec,
    src: usize,
    nodes: &[NodeSpec],
    links: &[LinkSpec],
) -> Result<(), ScenarioError> {
    let Some(mode) = traffic.tcp().and_then(|t| t.large_flow_mode()) else { return Ok(()) };
    let want = match mode {
        LargeFlowPacing::Htb => "htb",
        LargeFlowPacing::Fq => "fq",
        LargeFlowPacing::PerConnection | LargeFlowPacing::None => return Ok(()),
    };
    for (j, l) in links.iter().enumerate() {
        let (q, side) = if l.a == src {
            (&l.queue_ab, "queue_a")
        } else if l.b == src {
            (&l.queue_ba, "queue_b")
        } else {
            continue;
        };
        let ok = matches!(
            (mode, q),
            (LargeFlowPacing::Htb, QueueSpec::Htb { .. }) | (LargeFlowPacing::Fq, QueueSpec::Fq(_))
        );
        if !ok {
            return Err(cx.at(
                Some(span),
                format!("flows[{i}].traffic.large_flow_pacing"),
                format!(
                    "large_flow_pacing = \"{want}\" shapes the sending host's egress queue: \
                     expected links[{j}].{side} (host {:?}) to be kind = \"{want}\"",
                    nodes[src].name
                ),
            ));
        }
    }
    Ok(())
}
