//! Per-request cost of the controller on a loaded fat-tree, with 4 queues, 40 servers per edge
//! switch, least-delay routing, no rerouting. The network is first loaded as a run leaves it at
//! its first rejection; fresh requests of scenario 8 are then split into
//! those that are admitted (benchmarked as admit + remove, so the state is the same at every
//! iteration) and those that are refused (a refusal explores every admissible label, so it is
//! the expensive case). The distribution over whole runs, rerouting included, is measured by
//! `bench/chameleon_runtime.py`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use latnet_ctl::{Controller, CtlConfig, Topology, Workload};
use latnet_units::Rate;
use std::hint::black_box;
use std::sync::Arc;

type Reqs = Vec<latnet_ctl::FlowRequest>;

fn loaded(k: usize, m: usize) -> (Controller, Reqs, Reqs) {
    let topo = Arc::new(Topology::fat_tree(k, m, Rate::from_gbps(1)).expect("fat-tree"));
    let mut cfg = CtlConfig::chameleon(4).expect("4 queues");
    cfg.reroute = None;
    // load the network until the first rejection of a run
    let mut ctl = Controller::new(topo.clone(), cfg).expect("controller");
    let mut wl = Workload::new(8, topo.hosts(), 1, 0).expect("workload");
    while ctl.request(wl.next_request().request).is_ok() {}
    let mut fresh = Workload::new(8, topo.hosts(), 1, 99).expect("workload");
    let (mut ok, mut refused) = (Vec::new(), Vec::new());
    for _ in 0..2000 {
        let r = fresh.next_request().request;
        match ctl.request(r) {
            Ok(a) => {
                ctl.remove(a.id);
                ok.push(r);
            }
            Err(_) => refused.push(r),
        }
    }
    (ctl, ok, refused)
}

fn admission(c: &mut Criterion) {
    let mut g = c.benchmark_group("chameleon_request");
    g.sample_size(30);
    for k in [4usize, 8, 12] {
        let (mut ctl, ok, refused) = loaded(k, 40);
        for (name, reqs) in [("admitted", ok), ("refused", refused)] {
            if reqs.is_empty() {
                continue;
            }
            let mut i = 0;
            g.bench_with_input(BenchmarkId::new(name, k), &k, |b, _| {
                b.iter(|| {
                    let r = reqs[i % reqs.len()];
                    i += 1;
                    if let Ok(a) = ctl.request(black_box(r)) {
                        ctl.remove(a.id);
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, admission);
criterion_main!(benches);
