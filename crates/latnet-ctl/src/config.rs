//! Controller configuration: queues, delay budgets and buffers per port, the per-hop constant,
//! the network-calculus options, routing, rerouting and the tag scheme.
//!
//! Defaults follow the Chameleon paper (§4.1.2, §5.1.1, §5.2) and its shipped code; where the
//! two differ the choice is configurable and documented on the field.

use latnet_nc::BurstModel;
use latnet_units::{Bytes, Duration};
use std::fmt;
use std::str::FromStr;

/// The priority queues of one kind of port: one delay budget per queue (queue 0 = highest
/// priority) and a buffer per queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSet {
    /// Delay budget of each queue.
    pub budgets: Vec<Duration>,
    /// Buffer of each queue.
    pub buffer: Bytes,
}

impl QueueSet {
    /// Number of queues.
    pub fn len(&self) -> usize {
        self.budgets.len()
    }
    /// True if there is no queue.
    pub fn is_empty(&self) -> bool {
        self.budgets.is_empty()
    }
    /// The smallest budget.
    pub fn min_budget(&self) -> Duration {
        self.budgets.iter().copied().min().unwrap_or(Duration::ZERO)
    }
}

/// The paper's delay budgets for switch ports with `n` queues (§4.1.2): 8 → {0.1, 0.5, 1,
/// 1.5, 3, 6, 12, 24} ms, 4 → {0.1, 1, 6, 24}, 2 → {0.1, 6}, 1 → {0.5} (what host ports get).
/// Other counts have no default.
pub fn paper_budgets(n: usize) -> Option<Vec<Duration>> {
    let us: &[u64] = match n {
        1 => &[500],
        2 => &[100, 6_000],
        4 => &[100, 1_000, 6_000, 24_000],
        8 => &[100, 500, 1_000, 1_500, 3_000, 6_000, 12_000, 24_000],
        _ => return None,
    };
    Some(us.iter().map(|&u| Duration::from_micros(u)).collect())
}

/// The paper's per-queue buffer for `n` queues per port (measured on real switches, §5.1.1 and
/// §5.2): 8 → 97,024 B (64 × 1,516 B), 4 → 190 KB, 2 → 356 KB, 1 → 590 KB (Silo's single queue).
pub fn paper_buffer(n: usize) -> Bytes {
    Bytes::new(match n {
        0 | 1 => 590_000,
        2 | 3 => 356_000,
        4..=7 => 190_000,
        _ => 97_024,
    })
}

/// How a path is chosen on the queue-level graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Routing {
    /// Least-delay Dijkstra (cost = allocated delay), as the paper's text describes (§4.1.4).
    #[default]
    LeastDelay,
    /// LARAC delay-constrained least cost with cost `1 + D` (D in ms), as the shipped code.
    Larac,
    /// Fewest hops (Silo's and QJump's shortest-path routing).
    MinHops,
}

impl Routing {
    /// Stable name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Routing::LeastDelay => "least-delay",
            Routing::Larac => "larac",
            Routing::MinHops => "min-hops",
        }
    }
}

impl FromStr for Routing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "least-delay" | "dijkstra" => Ok(Routing::LeastDelay),
            "larac" => Ok(Routing::Larac),
            "min-hops" | "shortest" => Ok(Routing::MinHops),
            _ => Err(format!("unknown routing {s:?} (expected least-delay, larac or min-hops)")),
        }
    }
}

impl fmt::Display for Routing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Rerouting of admitted flows when a request fails (the paper's Fig. 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RerouteConfig {
    /// Try at most this many candidate flows. The paper says 20 (§4.1.3), the shipped
    /// configuration 10; default 20.
    pub limit: usize,
    /// Factor on the cost of the queues the candidate should leave and of the new flow's
    /// shortest paths (30,000 in the paper).
    pub multiplier: u64,
}

impl Default for RerouteConfig {
    fn default() -> Self {
        RerouteConfig { limit: 20, multiplier: 30_000 }
    }
}

/// `tag = base × port + queue` (the shipped switch rules use base 10, the paper's example
/// 100). Tags are 802.1Q VIDs, so they must stay below 4,096.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagScheme {
    /// Multiplier of the local port number.
    pub base: u16,
}

impl Default for TagScheme {
    fn default() -> Self {
        TagScheme { base: 10 }
    }
}

impl TagScheme {
    /// The tag of `(port, queue)`, or `None` if it does not fit a 12-bit VID or the queue does
    /// not fit the base.
    pub fn tag(self, local_port: u16, queue: u8) -> Option<u16> {
        if u16::from(queue) >= self.base {
            return None;
        }
        let t = u32::from(self.base) * u32::from(local_port) + u32::from(queue);
        u16::try_from(t).ok().filter(|&t| t < 4096)
    }
    /// `(port, queue)` of a tag.
    pub fn decode(self, tag: u16) -> Option<(u16, u8)> {
        if self.base == 0 {
            return None;
        }
        Some((tag / self.base, u8::try_from(tag % self.base).ok()?))
    }
}

/// Most tags a host pushes unless configured otherwise (10 in the shipped end-host code).
pub const DEFAULT_MAX_TAGS: usize = 10;

/// Everything the controller needs besides the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlConfig {
    /// Queues of switch ports (toward switches and toward hosts).
    pub switch: QueueSet,
    /// Queues of host ports (a host's uplink): one queue of 0.5 ms in the paper.
    pub host: QueueSet,
    /// Constant added per hop to the end-to-end delay (switch processing and priority-queuing
    /// overhead; 11–29 µs measured on real switches). Default 0: the paper's admission study
    /// counts queueing budgets only.
    pub per_hop: Duration,
    /// Largest packet anywhere (non-preemptive blocking and packetization): 1,530 B.
    pub l_max: Bytes,
    /// Shape each queue's arrival curve by the rate of the input links (on in the shipped code).
    pub shaping: bool,
    /// Burst increase along paths.
    pub burst: BurstModel,
    /// Path selection.
    pub routing: Routing,
    /// Rerouting when a request fails; `None` disables it.
    pub reroute: Option<RerouteConfig>,
    /// Tag scheme.
    pub tags: TagScheme,
    /// Most tags a host may push (10 in the shipped end-host code).
    pub max_tags: usize,
}

impl CtlConfig {
    /// Chameleon with `n` queues per switch port, the paper's budgets and buffers (other counts
    /// need [`CtlConfig::with_budgets`]).
    pub fn chameleon(n: usize) -> Result<CtlConfig, String> {
        let budgets = paper_budgets(n).ok_or_else(|| {
            format!("no default delay budgets for {n} queues (defaults exist for 1, 2, 4, 8)")
        })?;
        Ok(CtlConfig::with_budgets(budgets))
    }

    /// Chameleon with the given switch-port budgets (queue 0 first) and the paper's buffer for
    /// that many queues.
    pub fn with_budgets(budgets: Vec<Duration>) -> CtlConfig {
        let buffer = paper_buffer(budgets.len());
        CtlConfig {
            switch: QueueSet { budgets, buffer },
            host: QueueSet { budgets: vec![Duration::from_micros(500)], buffer: paper_buffer(1) },
            per_hop: Duration::ZERO,
            l_max: Bytes::new(1530),
            shaping: true,
            burst: BurstModel::Real,
            routing: Routing::LeastDelay,
            reroute: Some(RerouteConfig::default()),
            tags: TagScheme::default(),
            max_tags: DEFAULT_MAX_TAGS,
        }
    }

    /// Silo as the paper configures it (§5.1.1): one queue per port with a 590 KB buffer and a
    /// per-link delay of 0.1 ms, shortest-path routing, no rerouting.
    pub fn silo(burst: BurstModel) -> CtlConfig {
        let q = QueueSet { budgets: vec![Duration::from_micros(100)], buffer: paper_buffer(1) };
        CtlConfig {
            switch: q.clone(),
            host: q,
            burst,
            routing: Routing::MinHops,
            reroute: None,
            ..CtlConfig::with_budgets(vec![Duration::from_micros(100)])
        }
    }

    /// Check the configuration on its own.
    pub fn validate(&self) -> Result<(), String> {
        for (what, q) in [("switch", &self.switch), ("host", &self.host)] {
            if q.is_empty() || q.len() > 8 {
                return Err(format!("{what} ports need 1 to 8 queues, got {}", q.len()));
            }
            if q.budgets.iter().any(|d| d.is_zero()) {
                return Err(format!("{what} queue budgets must be above zero"));
            }
            if q.buffer.is_zero() {
                return Err(format!("{what} queue buffers must be above zero"));
            }
        }
        if self.l_max.is_zero() {
            return Err("l_max must be above zero".into());
        }
        if let Some(r) = self.reroute {
            if r.multiplier == 0 {
                return Err("the rerouting cost multiplier must be at least 1".into());
            }
        }
        if usize::from(self.tags.base) < self.switch.len() {
            return Err(format!(
                "tag base {} cannot encode {} queues",
                self.tags.base,
                self.switch.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_respect_the_vid_range() {
        let s = TagScheme { base: 10 };
        assert_eq!(s.tag(50, 3), Some(503));
        assert_eq!(s.decode(503), Some((50, 3)));
        assert_eq!(s.tag(409, 6), None, "4096 does not fit a VID");
        assert_eq!(s.tag(1, 10), None, "queue 10 does not fit base 10");
        let p = TagScheme { base: 100 };
        assert_eq!(p.tag(5, 3), Some(503), "the paper's example");
    }

    #[test]
    fn paper_defaults() {
        let c = CtlConfig::chameleon(4).unwrap();
        assert_eq!(c.switch.budgets[3], Duration::from_millis(24));
        assert_eq!(c.switch.buffer, Bytes::new(190_000));
        assert_eq!(c.host.budgets, vec![Duration::from_micros(500)]);
        assert!(CtlConfig::chameleon(3).is_err());
        assert!(CtlConfig::silo(BurstModel::None).validate().is_ok());
    }
}
