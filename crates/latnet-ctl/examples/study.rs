//! One admission run per system: `cargo run --release -p latnet-ctl --example study -- K
//! HOSTS_PER_EDGE QUEUES SCENARIO RUNS`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use latnet_ctl::eval::{self, EvalOptions, SystemKind};
use latnet_ctl::Topology;
use latnet_units::Rate;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let a: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let (k, m, queues, scenario, runs) = (a[0], a[1], a[2], a[3], a[4]);
    let topo = Arc::new(Topology::fat_tree(k, m, Rate::from_gbps(1)).unwrap());
    let shaping = std::env::var("NOSHAPE").is_err();
    let opts = EvalOptions { queues, shaping, ..EvalOptions::default() };
    let start = Instant::now();
    let mut clock = move || start.elapsed().as_nanos() as u64;
    for kind in ["chameleon", "chameleon-noreroute", "silo", "silo-noburst", "qjump"] {
        let kind: SystemKind = kind.parse().unwrap();
        for r in 0..runs as u64 {
            let t = Instant::now();
            let res = eval::run(kind, &topo, &opts, scenario, 1, r, &mut clock).unwrap();
            let mut rt = res.runtime_ns.clone();
            rt.sort_unstable();
            let p50 = rt[rt.len() / 2] as f64 / 1e6;
            let p99 = rt[rt.len() * 99 / 100] as f64 / 1e6;
            let max = *rt.last().unwrap() as f64 / 1e6;
            println!(
                "{kind:20} run {r}: accepted {:6} ({}) reconf {:4} | p50 {p50:.3} ms p99 {p99:.3} ms max {max:.1} ms | {:.1} s",
                res.accepted, res.ended_by, res.reconfigured, t.elapsed().as_secs_f64()
            );
        }
    }
}
