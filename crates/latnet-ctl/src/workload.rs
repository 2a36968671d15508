//! The paper's workloads (§5.1.2, Tables 1 and 2): flow types per application category and
//! eight scenarios mixing the categories. A [`Workload`] draws an endless, seeded sequence of
//! requests: a uniformly random source and distinct destination host, a category by the
//! scenario's probabilities, a type uniformly within the category, then rate, burst and
//! deadline uniformly within the type's ranges (integers in bit/s, bytes and ns).

use crate::controller::FlowRequest;
use crate::topo::NodeId;
use latnet_units::{Bytes, Duration, Rate};
use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Application categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// Industrial applications.
    Industrial,
    /// Clock synchronisation.
    ClockSync,
    /// Control-plane synchronisation.
    ControlPlane,
    /// Bandwidth-hungry applications.
    BandwidthHungry,
}

impl Category {
    /// All categories in the order of the scenario tuples (IA, CS, CPS, BH).
    pub const ALL: [Category; 4] = [
        Category::Industrial,
        Category::ClockSync,
        Category::ControlPlane,
        Category::BandwidthHungry,
    ];

    /// Short name as in the paper.
    pub const fn short(self) -> &'static str {
        match self {
            Category::Industrial => "IA",
            Category::ClockSync => "CS",
            Category::ControlPlane => "CPS",
            Category::BandwidthHungry => "BH",
        }
    }
}

/// One row of Table 1: ranges in kbit/s, bytes and µs (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowType {
    /// Name.
    pub name: &'static str,
    /// Category.
    pub category: Category,
    /// Rate range (kbit/s).
    pub rate_kbps: (u64, u64),
    /// Burst range (bytes).
    pub burst: (u64, u64),
    /// Deadline range (µs).
    pub deadline_us: (u64, u64),
}

const fn ft(
    name: &'static str,
    category: Category,
    rate_kbps: (u64, u64),
    burst: (u64, u64),
    deadline_ms: (u64, u64),
) -> FlowType {
    FlowType {
        name,
        category,
        rate_kbps,
        burst,
        deadline_us: (deadline_ms.0 * 1000, deadline_ms.1 * 1000),
    }
}

/// Table 1 of the paper.
pub const FLOW_TYPES: [FlowType; 11] = [
    ft("database", Category::Industrial, (300, 550), (100, 400), (80, 120)),
    ft("scada", Category::Industrial, (150, 550), (100, 400), (150, 200)),
    ft("production-control", Category::Industrial, (100, 500), (100, 400), (10, 20)),
    ft("control-ntp", Category::Industrial, (1, 100), (80, 120), (10, 20)),
    ft("ptp", Category::ClockSync, (1, 220), (80, 300), (2, 4)),
    ft("eventual-consistency", Category::ControlPlane, (2_000, 4_000), (80, 140), (50, 200)),
    ft("strict-consistency", Category::ControlPlane, (5_000, 8_000), (1000, 3000), (50, 200)),
    ft("adaptive-consistency", Category::ControlPlane, (2_000, 4_000), (80, 120), (50, 200)),
    ft("hadoop-1", Category::BandwidthHungry, (100_000, 150_000), (1000, 5000), (10, 100)),
    ft("hadoop-2", Category::BandwidthHungry, (100_000, 200_000), (1000, 3000), (10, 100)),
    ft("hadoop-3", Category::BandwidthHungry, (80_000, 200_000), (1000, 3000), (50, 100)),
];

/// Table 2 of the paper: probabilities of (IA, CS, CPS, BH) per scenario 1..=8.
pub const SCENARIOS: [[f64; 4]; 8] = [
    [0.25, 0.25, 0.25, 0.25],
    [0.2, 0.2, 0.5, 0.1],
    [0.2, 0.5, 0.2, 0.1],
    [0.5, 0.2, 0.2, 0.1],
    [0.1, 0.4, 0.4, 0.1],
    [0.4, 0.1, 0.4, 0.1],
    [0.4, 0.4, 0.1, 0.1],
    [0.33, 0.33, 0.33, 0.01],
];

/// A request with the type it was drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    /// The request.
    pub request: FlowRequest,
    /// Index into [`FLOW_TYPES`].
    pub kind: usize,
}

/// An endless seeded sequence of requests for one scenario on a set of hosts.
#[derive(Debug, Clone)]
pub struct Workload {
    hosts: Vec<NodeId>,
    probs: [f64; 4],
    rng: ChaCha8Rng,
}

impl Workload {
    /// Scenario `scenario` (1..=8) over `hosts` (at least two), seeded: the same `(seed,
    /// stream)` gives the same sequence. Use one `stream` per run.
    pub fn new(
        scenario: usize,
        hosts: Vec<NodeId>,
        seed: u64,
        stream: u64,
    ) -> Result<Workload, String> {
        let probs = *SCENARIOS
            .get(scenario.wrapping_sub(1))
            .ok_or_else(|| format!("unknown scenario {scenario} (the paper defines 1 to 8)"))?;
        if hosts.len() < 2 {
            return Err("a workload needs at least two hosts".into());
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Ok(Workload { hosts, probs, rng })
    }

    /// The next request.
    pub fn next_request(&mut self) -> Drawn {
        let n = self.hosts.len();
        let s = self.rng.gen_range(0..n);
        let mut d = self.rng.gen_range(0..n - 1);
        if d >= s {
            d += 1;
        }
        let total: f64 = self.probs.iter().sum();
        let mut x = self.rng.gen_range(0.0..total);
        let mut cat = Category::ALL[3];
        for (c, p) in Category::ALL.iter().zip(self.probs) {
            if x < p {
                cat = *c;
                break;
            }
            x -= p;
        }
        let kinds: Vec<usize> =
            (0..FLOW_TYPES.len()).filter(|&i| FLOW_TYPES[i].category == cat).collect();
        let kind = kinds[self.rng.gen_range(0..kinds.len())];
        let t = FLOW_TYPES[kind];
        let rate = self.rng.gen_range(t.rate_kbps.0 * 1000..=t.rate_kbps.1 * 1000);
        let burst = self.rng.gen_range(t.burst.0..=t.burst.1);
        let deadline = self.rng.gen_range(t.deadline_us.0 * 1000..=t.deadline_us.1 * 1000);
        Drawn {
            request: FlowRequest {
                src: self.hosts[s],
                dst: self.hosts[d],
                rate: Rate::from_bps(rate),
                burst: Bytes::new(burst),
                deadline: Duration::from_nanos(deadline),
            },
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_seeded_and_within_table_1() {
        let hosts: Vec<_> = (0..16).collect();
        let mut a = Workload::new(1, hosts.clone(), 7, 3).unwrap();
        let mut b = Workload::new(1, hosts.clone(), 7, 3).unwrap();
        let mut c = Workload::new(1, hosts, 7, 4).unwrap();
        let xs: Vec<_> = (0..500).map(|_| a.next_request()).collect();
        let ys: Vec<_> = (0..500).map(|_| b.next_request()).collect();
        let zs: Vec<_> = (0..500).map(|_| c.next_request()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        for d in &xs {
            let t = FLOW_TYPES[d.kind];
            let r = d.request;
            assert_ne!(r.src, r.dst);
            assert!((t.rate_kbps.0 * 1000..=t.rate_kbps.1 * 1000).contains(&r.rate.bps()));
            assert!((t.burst.0..=t.burst.1).contains(&r.burst.get()));
            let us = r.deadline.as_nanos() / 1000;
            assert!((t.deadline_us.0..=t.deadline_us.1).contains(&us));
        }
        // scenario 1 is uniform over categories: each near 25 %
        for cat in Category::ALL {
            let n = xs.iter().filter(|d| FLOW_TYPES[d.kind].category == cat).count();
            assert!((90..160).contains(&n), "{cat:?}: {n}");
        }
        assert!(Workload::new(9, vec![0, 1], 1, 1).is_err());
    }
}
