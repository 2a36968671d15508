//! What a run reports of LBF: per flow (latency, late packets, drops by reason) and per switch.

use super::*;

/// Per-flow results of LBF at the receiver and where its packets were dropped.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LbfFlowResult {
    /// Flow name.
    pub flow: String,
    /// Lower bound (ns).
    pub lower_ns: u64,
    /// Upper bound (ns), if any.
    pub upper_ns: Option<u64>,
    /// How the latency so far was carried.
    pub carry: String,
    /// Where the block travelled.
    pub encap: String,
    /// Packets received.
    pub received: u64,
    /// Received below the lower bound.
    pub early: u64,
    /// Received within the bounds.
    pub on_time: u64,
    /// Received above the upper bound with the late flag set.
    pub late_marked: u64,
    /// Received above the upper bound without the late flag.
    pub late_unmarked: u64,
    /// Received with the late flag but within the bound.
    pub marked_but_on_time: u64,
    /// Early drops (`hopeless-early-drop`) by switch.
    pub early_drops: BTreeMap<String, u64>,
    /// Queue expiries (`deadline-expired`) by switch.
    pub expired: BTreeMap<String, u64>,
    /// Damper-mode packets that spent longer than their sender's damper bound in its own
    /// queue (a host's `lbf.damper_bound`).
    pub sender_damper_violations: u64,
}

impl LbfFlowResult {
    /// The (empty) results of `f`, if it has an SLO.
    pub fn new(f: &FlowSpec) -> Option<LbfFlowResult> {
        let s = f.slo?;
        Some(LbfFlowResult {
            flow: f.name.clone(),
            lower_ns: s.lower.as_nanos(),
            upper_ns: s.upper.map(Duration::as_nanos),
            carry: carry_name(s.carry).to_owned(),
            encap: match s.encap {
                Encap::UdpShim => "udp-shim",
                Encap::Ipv6 => "ipv6",
            }
            .to_owned(),
            ..LbfFlowResult::default()
        })
    }

    /// A packet arrived with latency `lat` (ns) and the late flag `late_flag`: count it as
    /// early, on time or late against the flow's bounds.
    pub fn record(&mut self, lat: u64, late_flag: bool) {
        self.received += 1;
        match self.upper_ns {
            Some(u) if lat > u => {
                if late_flag {
                    self.late_marked += 1;
                } else {
                    self.late_unmarked += 1;
                }
            }
            _ if lat < self.lower_ns => self.early += 1,
            _ => {
                self.on_time += 1;
                if late_flag {
                    self.marked_but_on_time += 1;
                }
            }
        }
    }
}

/// Per-switch LBF results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LbfSwitchResult {
    /// Switch name.
    pub node: String,
    /// Counters.
    #[serde(flatten)]
    pub counters: LbfCounters,
}

/// The LBF part of [`crate::Results`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LbfResults {
    /// Latency convention of every LBF computation and of the receiver check.
    pub latency_convention: String,
    /// When frames reach switches.
    pub switching: String,
    /// Per LBF switch.
    pub switches: Vec<LbfSwitchResult>,
    /// Per flow with an SLO.
    pub flows: Vec<LbfFlowResult>,
    /// Late notifications (the first [`MAX_NOTIFICATIONS`], in time order).
    pub notifications: Vec<Notification>,
    /// All late notifications.
    pub notifications_total: u64,
}
