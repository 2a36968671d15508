//! The LBF seed's six multi-hop tests (experiments/lbf/test1..6.toml, 10 s of traffic each),
//! parsed and run back to back: the goal is under 10 s for all six on 2 cores.
//!
//! `cargo bench -p latnet-sim --bench lbf` reports the time of one pass over the six files
//! (scenario parsing from text included) and of each test alone; throughput counts events.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use latnet_sim::{Scenario, Simulator};
use std::path::PathBuf;

fn load(t: usize) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/lbf")
        .join(format!("test{t}.toml"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn run(name: &str, src: &str) -> u64 {
    let sc = Scenario::from_str_named(name, src).unwrap_or_else(|e| panic!("{e}"));
    Simulator::new(sc).run().events
}

fn bench(c: &mut Criterion) {
    let srcs: Vec<String> = (1..=6).map(load).collect();
    let events: Vec<u64> = srcs.iter().map(|s| run("lbf", s)).collect();
    let mut g = c.benchmark_group("lbf");
    g.sample_size(10);
    g.throughput(Throughput::Elements(events.iter().sum()));
    g.bench_function("six_seed_tests_10s_each", |b| {
        b.iter(|| srcs.iter().map(|s| run("lbf", s)).sum::<u64>())
    });
    for (i, (s, e)) in srcs.iter().zip(&events).enumerate() {
        g.throughput(Throughput::Elements(*e));
        g.bench_function(format!("test{}", i + 1), |b| b.iter(|| run("lbf", s)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
