//! What a restart of the controller service costs, with its whole log replayed and with the
//! log folded into a snapshot (`POST /compact`). The store holds a k = 8 fat-tree (128
//! servers, 4 queues, Chameleon with rerouting) loaded by 12,000 requests of the admission
//! study's scenario 8 (each replayed request is one admission, rerouting included; restoring
//! a snapshot reserves each admitted flow on its path once). Also what one compaction of that
//! store costs (`POST /compact` one request after the last).

use criterion::{criterion_group, criterion_main, Criterion};
use latnet_ctl::{Topology, Workload};
use latnet_ctld::{Service, ServiceConfig};
use latnet_units::Rate;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

const REQUESTS: usize = 12_000;

fn cfg() -> ServiceConfig {
    ServiceConfig::fat_tree(8, 4)
}

/// A store loaded by the workload; its file.
fn loaded(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("latnet-ctld-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = dir.join("controller.db");
    let mut svc = Service::open(&db, cfg()).expect("store");
    let topo = Arc::new(Topology::fat_tree(8, 4, Rate::from_gbps(1)).expect("fat-tree"));
    let name = |n: usize| topo.nodes()[n].name.clone();
    let mut wl = Workload::new(8, topo.hosts(), 1, 0).expect("workload");
    for _ in 0..REQUESTS {
        let r = wl.next_request().request;
        let body = json!({"src": name(r.src), "dst": name(r.dst), "rate_bps": r.rate.bps(),
                          "burst_bytes": r.burst.get(), "deadline_ns": r.deadline.as_nanos()});
        let (st, _) = svc.handle("POST", "/flows", body.to_string().as_bytes());
        assert!(matches!(st, 201 | 409), "{st}");
    }
    db
}

fn restart(c: &mut Criterion) {
    let whole = loaded("whole");
    let folded = loaded("folded");
    let mut svc = Service::open(&folded, cfg()).expect("store");
    let (st, r) = svc.handle("POST", "/compact", b"");
    assert_eq!(st, 200, "{r}");
    let flows = svc.controller().len();
    let st = svc.controller().stats();
    drop(svc);
    eprintln!(
        "{REQUESTS} requests: {flows} flows admitted, {} refused, {} reroutes",
        st.rejected, st.reroutes
    );
    let mut g = c.benchmark_group("restart");
    g.sample_size(10);
    g.bench_function("whole log replayed", |b| {
        b.iter(|| Service::open(&whole, cfg()).expect("store"));
    });
    g.bench_function("snapshot restored", |b| {
        b.iter(|| Service::open(&folded, cfg()).expect("store"));
    });
    // a compaction of the same store, one request after the last: the checkpoint, its check
    // by a restore into a fresh controller, the snapshot written, the log emptied
    let mut svc = Service::open(&folded, cfg()).expect("store");
    let topo = svc.controller().topology().clone();
    let name = |n: usize| topo.nodes()[n].name.clone();
    let mut wl = Workload::new(8, topo.hosts(), 1, 7).expect("workload");
    g.bench_function("compact after one more request", |b| {
        b.iter_custom(|iters| {
            let mut spent = std::time::Duration::ZERO;
            for _ in 0..iters {
                let r = wl.next_request().request;
                let body = json!({"src": name(r.src), "dst": name(r.dst),
                                  "rate_bps": r.rate.bps(), "burst_bytes": r.burst.get(),
                                  "deadline_ns": r.deadline.as_nanos()});
                svc.handle("POST", "/flows", body.to_string().as_bytes());
                let t = std::time::Instant::now();
                let (st, _) = svc.handle("POST", "/compact", b"");
                spent += t.elapsed();
                assert_eq!(st, 200);
            }
            spent
        });
    });
    eprintln!("{} flows admitted after the compactions", svc.controller().len());
    drop(svc);
    g.finish();
    for db in [whole, folded] {
        if let Some(dir) = db.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

criterion_group!(benches, restart);
criterion_main!(benches);
