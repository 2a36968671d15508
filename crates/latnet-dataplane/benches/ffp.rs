//! ns per packet of the plain pipelines (POF-style, strong) and the composite pipelines (with
//! the Fast-Forwarding Path) on the seed's three scenarios (`experiments/ffp/*.toml`).
//!
//! `cargo bench -p latnet-dataplane --bench ffp` — groups:
//! * `ffp_ll/<scenario>/<pipeline>/<size>`: low-latency traffic only;
//! * `ffp_mixed/<scenario>/<share>%/<part>/<pipeline>`: the low-latency or the normal part of
//!   a mix with that low-latency share (each part timed alone from the mix's warmed state);
//! * `ffp_churn/acl/<every>/<pipeline>`: low-latency traffic while a normal rule above a
//!   low-latency one is added / removed every `every` packets (verification cost).
//!
//! `latnet reproduce ffp` measures the same with medians of repeated runs and prints them
//! beside the seed's numbers.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use latnet_dataplane::classifier::workload::{self, Workload, WorkloadSpec};
use latnet_dataplane::classifier::{Algo, Classifier, Control, FfpConfig, FlowCommand, FlowMod};
use latnet_units::Time;
use std::hint::black_box;

const PIPES: [(&str, Algo, bool); 4] = [
    ("pof", Algo::Pof, false),
    ("pof+ffp", Algo::Pof, true),
    ("strong", Algo::Strong, false),
    ("strong+ffp", Algo::Strong, true),
];

fn load(name: &str) -> Workload {
    let path = format!("{}/../../experiments/ffp/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let spec: WorkloadSpec = toml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    workload::build(&spec)
}

fn classifier(w: &Workload, algo: Algo, ffp: bool) -> Classifier {
    w.classifier(algo, ffp.then(FfpConfig::default))
}

fn run(c: &mut Classifier, frames: &mut [Vec<u8>], seq: &[usize], size: u32) {
    for &i in seq {
        black_box(c.process(Time::ZERO, &mut frames[i], 1, size));
    }
}

fn bench_ll(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("ffp_ll");
    g.sample_size(20);
    g.measurement_time(std::time::Duration::from_secs(2));
    for name in ["acl", "seadp", "wsm"] {
        let w = load(name);
        let seq: Vec<usize> = workload::mix(&w, 4096, 1000, 1).into_iter().map(|x| x.1).collect();
        for size in [128usize, 1024] {
            let mut frames: Vec<Vec<u8>> =
                w.ll_flows.iter().map(|h| workload::frame(h, size)).collect();
            for (pname, algo, ffp) in PIPES {
                let mut c = classifier(&w, algo, ffp);
                run(&mut c, &mut frames, &seq, size as u32);
                g.throughput(Throughput::Elements(seq.len() as u64));
                g.bench_function(BenchmarkId::new(format!("{name}/{pname}"), size), |b| {
                    b.iter(|| run(&mut c, &mut frames, &seq, size as u32))
                });
            }
        }
    }
    g.finish();
}

fn bench_mixed(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("ffp_mixed");
    g.sample_size(15);
    g.measurement_time(std::time::Duration::from_secs(1));
    let size = 1024usize;
    for name in ["acl", "seadp", "wsm"] {
        let w = load(name);
        let nll = w.ll_flows.len();
        let mut frames: Vec<Vec<u8>> =
            w.ll_flows.iter().chain(&w.normal_flows).map(|h| workload::frame(h, size)).collect();
        for share in [0u32, 20, 50, 80, 100] {
            let all: Vec<usize> = workload::mix(&w, 4096, share * 10, 2)
                .into_iter()
                .map(|(ll, i)| if ll { i } else { nll + i })
                .collect();
            for (pname, algo, ffp) in PIPES {
                let mut c = classifier(&w, algo, ffp);
                run(&mut c, &mut frames, &all, size as u32);
                for (part, seq) in [
                    ("ll", all.iter().copied().filter(|&i| i < nll).collect::<Vec<_>>()),
                    ("normal", all.iter().copied().filter(|&i| i >= nll).collect()),
                ] {
                    if seq.is_empty() {
                        continue;
                    }
                    g.throughput(Throughput::Elements(seq.len() as u64));
                    g.bench_function(format!("{name}/{share}%/{part}/{pname}"), |b| {
                        b.iter(|| run(&mut c, &mut frames, &seq, size as u32))
                    });
                }
            }
        }
    }
    g.finish();
}

fn bench_churn(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("ffp_churn");
    g.sample_size(15);
    let w = load("acl");
    let size = 1024usize;
    let mut frames: Vec<Vec<u8>> = w.ll_flows.iter().map(|h| workload::frame(h, size)).collect();
    let seq: Vec<usize> = workload::mix(&w, 4096, 1000, 3).into_iter().map(|x| x.1).collect();
    let ll_rules: Vec<FlowMod> = w
        .messages
        .iter()
        .filter_map(|m| match m {
            Control::Flow(fm) if fm.table == 1 && fm.low_latency => Some(fm.clone()),
            _ => None,
        })
        .collect();
    for every in [100usize, 1000] {
        for (pname, algo, ffp) in PIPES {
            let mut c = classifier(&w, algo, ffp);
            let mut k = 0usize;
            g.throughput(Throughput::Elements(seq.len() as u64));
            g.bench_function(format!("acl/{every}/{pname}"), |b| {
                b.iter(|| {
                    for (i, &f) in seq.iter().enumerate() {
                        if i % every == 0 {
                            let base = &ll_rules[k % ll_rules.len()];
                            let id = 1_000_000 + k as u32;
                            let m = if k % 2 == 0 {
                                FlowMod {
                                    command: FlowCommand::Add,
                                    id,
                                    priority: u16::MAX,
                                    low_latency: false,
                                    ..base.clone()
                                }
                            } else {
                                FlowMod::delete(1, id - 1)
                            };
                            k += 1;
                            let _ = black_box(c.apply(Time::ZERO, &Control::Flow(m)));
                        }
                        black_box(c.process(Time::ZERO, &mut frames[f], 1, size as u32));
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench_ll, bench_mixed, bench_churn);
criterion_main!(benches);
