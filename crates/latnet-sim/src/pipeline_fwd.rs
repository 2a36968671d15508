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
//! * Entry timeouts are applied before each packet.
//! * Without `processing` the packet is enqueued at its arrival instant. With it, the switch
//!   is one server: a packet starts processing when the previous one is done and is enqueued
//!   after its modelled cost (see [`Processing`]); the cost is labelled modelled in the docs,
//!   it is not measured by the simulator. The `low_latency` cost is the fast path's: with
//!   `ffp = false` every packet costs `normal`.

use crate::scenario::{PipelineSpec, Processing};
use crate::switch::{Forward, SwitchCtx};
use latnet_dataplane::classifier::{Classifier, DropCause, Verdict};
use latnet_dataplane::{DropReason, Packet};
use latnet_units::Time;

/// A pipeline switch.
#[derive(Debug, Clone)]
pub struct PipelineForwarder {
    cls: Classifier,
    processing: Option<Processing>,
    /// When the modelled processor is next free.
    busy_until: Time,
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
        PipelineForwarder { cls, processing: spec.processing, busy_until: Time::ZERO }
    }

    /// The classifier.
    pub fn classifier(&self) -> &Classifier {
        &self.cls
    }

    /// Classify `pkt` arrived at `cx.node`.
    pub fn forward(&mut self, cx: &SwitchCtx<'_>, pkt: &mut Packet) -> Forward {
        // The modelled processor: a packet that would wait too long is never looked at.
        let start = self.busy_until.max(cx.now);
        if let Some(cost) = self.processing {
            if start - cx.now > cost.max_backlog {
                return Forward::Drop(DropReason::ProcessingOverload);
            }
        }
        if self.cls.next_expiry().is_some_and(|t| t <= cx.now) {
            self.cls.expire(cx.now);
        }
        let wire = u32::try_from(pkt.wire_len().get()).unwrap_or(u32::MAX);
        let d = self.cls.process(cx.now, &mut pkt.data, pkt.meta.ingress_port, wire);
        if let Some(q) = d.queue {
            pkt.meta.priority = q.min(7);
        }
        // Every processed packet occupies the processor, whatever its verdict. Only the fast
        // path is cheaper: without it a low-latency packet crosses the tables like any other.
        let fast = d.low_latency && matches!(self.cls, Classifier::Composite(_));
        let done = self.processing.map(|cost| {
            let base = if fast { cost.low_latency } else { cost.normal };
            self.busy_until = start + base + cost.per_stage.saturating_mul(u64::from(d.stages));
            self.busy_until
        });
        match d.verdict {
            Verdict::Output(p) => match cx.topo.node_ports[cx.node].get(usize::from(p)) {
                Some(&port) => match done {
                    None => Forward::Port(port),
                    Some(at) => Forward::After(port, at),
                },
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
    fn modelled_processing_delays_each_packet_by_its_path_and_can_overload() {
        let base = scenario();
        let run = |extra: &str| {
            let src = base.replacen("[[pipelines]]\n", &format!("[[pipelines]]\n{extra}\n"), 1);
            let sc = Scenario::from_str_named("p.toml", &src).unwrap_or_else(|e| panic!("{e}"));
            Simulator::new(sc).run()
        };
        let plain = run("");
        let slow = run("processing = { normal = \"20us\", low_latency = \"2us\" }");
        let min = |r: &crate::Results, n: &str| {
            let f = r.flows.iter().find(|f| f.name == n).unwrap_or_else(|| panic!("{n}"));
            f.latency_ns.as_ref().map_or(0, |s| s.min)
        };
        // control's rules are low-latency: it pays 2 us at least once more than without a model;
        // bulk pays at least 20 us.
        assert!(min(&slow, "control") >= min(&plain, "control") + 2_000);
        assert!(min(&slow, "bulk") >= min(&plain, "bulk") + 20_000);
        // a processor slower than the offered load overloads and drops with a counted reason
        let over =
            run("processing = { normal = \"1ms\", low_latency = \"1ms\", max_backlog = \"2ms\" }");
        let dropped: u64 =
            over.flows.iter().filter_map(|f| f.drops.get("processing-overload")).sum();
        assert!(dropped > 0, "{:?}", over.flows);
        for f in &over.flows {
            assert_eq!(f.sent, f.received + f.dropped + f.in_flight_at_end, "{}", f.name);
        }
    }

    #[test]
    fn without_the_fast_path_every_packet_pays_the_pipeline_cost() {
        // The modelled `low_latency` cost is the fast path's: a pipeline without it processes
        // low-latency packets in the match-action tables like any other.
        let base = scenario();
        let run = |ffp: &str| {
            let extra =
                format!("ffp = {ffp}\nprocessing = {{ normal = \"20us\", low_latency = \"2us\" }}");
            let src = base.replacen("[[pipelines]]\n", &format!("[[pipelines]]\n{extra}\n"), 1);
            let src = src.replacen("ffp = true\n", "", 1);
            let sc = Scenario::from_str_named("p.toml", &src).unwrap_or_else(|e| panic!("{e}"));
            Simulator::new(sc).run()
        };
        let min = |r: &crate::Results, n: &str| {
            let f = r.flows.iter().find(|f| f.name == n).unwrap_or_else(|| panic!("{n}"));
            f.latency_ns.as_ref().map_or(0, |s| s.min)
        };
        let (with, without) = (run("true"), run("false"));
        assert!(
            min(&without, "control") >= min(&with, "control") + 18_000,
            "{} vs {}",
            min(&without, "control"),
            min(&with, "control")
        );
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
