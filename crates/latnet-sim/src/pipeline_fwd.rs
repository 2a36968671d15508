//! [`PipelineForwarder`]: a switch that classifies every arriving frame with a match-action
//! pipeline (plain or composite with the Fast-Forwarding Path) instead of the FIB.
//!
//! * `output P` sends the frame out of the switch's `P`-th port (its links in scenario order,
//!   from 0); a port it does not have drops the frame as `no-route`.
//! * `set_queue Q` sets the packet's priority (the egress queue class); without it the
//!   priority the packet arrived with is kept.
//! * `drop` drops as `rule-drop`; a table miss without miss actions, a pipeline that ends
//!   without an output, or a goto to a missing table drop as `no-route`.
//! * The switch does not touch the TTL: a POF pipeline changes only what its rules say.
//! * Entry timeouts are applied before each packet; no processing delay is modelled (the
//!   packet is enqueued at its arrival instant).

use crate::scenario::PipelineSpec;
use crate::switch::{Forward, SwitchCtx};
use latnet_dataplane::classifier::{Classifier, DropCause, Verdict};
use latnet_dataplane::{DropReason, Packet};
use latnet_units::Time;

/// A pipeline switch.
#[derive(Debug, Clone)]
pub struct PipelineForwarder {
    cls: Classifier,
}

impl PipelineForwarder {
    /// Build a switch's pipeline from its validated spec (`seed` keys its hashes).
    pub fn new(spec: &PipelineSpec, seed: u64) -> PipelineForwarder {
        let mut cls = Classifier::new(spec.algo, spec.ffp, seed);
        for m in &spec.messages {
            // validated with the scenario, in a pipeline built the same way
            if let Err(e) = cls.apply(Time::ZERO, m) {
                panic!("pipeline {}: validated message refused: {e}", spec.name);
            }
        }
        PipelineForwarder { cls }
    }

    /// The classifier.
    pub fn classifier(&self) -> &Classifier {
        &self.cls
    }

    /// Classify `pkt` arrived at `cx.node`.
    pub fn forward(&mut self, cx: &SwitchCtx<'_>, pkt: &mut Packet) -> Forward {
        if self.cls.next_expiry().is_some_and(|t| t <= cx.now) {
            self.cls.expire(cx.now);
        }
        let wire = u32::try_from(pkt.wire_len().get()).unwrap_or(u32::MAX);
        let d = self.cls.process(cx.now, &mut pkt.data, pkt.meta.ingress_port, wire);
        if let Some(q) = d.queue {
            pkt.meta.priority = q.min(7);
        }
        match d.verdict {
            Verdict::Output(p) => match cx.topo.node_ports[cx.node].get(usize::from(p)) {
                Some(&port) => Forward::Port(port),
                None => Forward::Drop(DropReason::NoRoute),
            },
            Verdict::Drop(DropCause::Rule) => Forward::Drop(DropReason::RuleDrop),
            Verdict::Drop(_) => Forward::Drop(DropReason::NoRoute),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Scenario, Simulator};

    fn scenario() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/ffp/sim_pipeline.toml");
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn a_pipeline_switch_classifies_queues_and_drops() {
        let sc = Scenario::from_str_named("sim_pipeline.toml", &scenario())
            .unwrap_or_else(|e| panic!("{e}"));
        let res = Simulator::new(sc).run();
        let f = |n: &str| res.flows.iter().find(|f| f.name == n).unwrap_or_else(|| panic!("{n}"));
        let (control, bulk, scan) = (f("control"), f("bulk"), f("scan"));
        assert!(control.sent > 50 && control.received == control.sent, "{control:?}");
        assert!(bulk.received > 0);
        assert_eq!(scan.received, 0);
        assert_eq!(scan.drops.get("rule-drop").copied(), Some(scan.sent));
        // queue 0 beats the 95 Mbit/s bulk flow sharing the 100 Mbit/s egress
        let max = |f: &crate::results::FlowResult| f.latency_ns.as_ref().map_or(0, |s| s.max);
        assert!(max(control) < max(bulk), "{} vs {}", max(control), max(bulk));
    }

    #[test]
    fn pipeline_errors_name_file_line_and_key() {
        let bad = scenario().replace("\"ipv4.dport\" = \"20002\"", "\"ipv4.dport\" = \"70000\"");
        let e = Scenario::from_str_named("x.toml", &bad).unwrap_err().to_string();
        assert!(
            e.starts_with("x.toml:")
                && e.contains("`pipelines[0].rules[2]`")
                && e.contains("does not fit in 16 bits"),
            "{e}"
        );
        let bad = scenario().replace("pipeline = \"edge\"", "pipeline = \"core\"");
        let e = Scenario::from_str_named("x.toml", &bad).unwrap_err().to_string();
        assert!(e.contains("`nodes[2].pipeline`") && e.contains("(pipelines: edge)"), "{e}");
        let bad = scenario().replace("actions = [\"goto acl\"]", "actions = [\"goto eth\"]");
        let e = Scenario::from_str_named("x.toml", &bad).unwrap_err().to_string();
        assert!(
            e.contains("`pipelines[0].rules[0]`") && e.contains("must point to a later table"),
            "{e}"
        );
    }
}
