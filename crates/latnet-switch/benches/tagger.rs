//! ns per packet of the host agent's tagger in the kernel, as the kernel times it
//! (`BPF_PROG_TEST_RUN`: the time of the program's run, without the system call and the packet's
//! setup), for a 1,400-byte IPv4 UDP frame. One run per call: with `repeat` the kernel would
//! run the program again on the packet it already changed (tagged, it no longer reads as IPv4),
//! so every run times a fresh copy; the kernel's clock reads around each run are included (a few
//! tens of ns, the same in every case). Needs root (the program is loaded); without it, nothing is
//! measured and the bench says so.
//!
//! `cargo bench -p latnet-switch --bench tagger` — cases:
//! * `miss`: no entry matches (three lookups, the packet passes unchanged);
//! * `route`: the destination's best-effort route (three lookups, one tag, no DSCP);
//! * `flow-1tag`, `flow-4tags`: an admitted flow's exact entry (one lookup), DSCP rewritten with
//!   the IPv4 checksum, the shaper class set, one or four tags pushed;
//! * `flow-4tags-full`: the same with 4,000 other entries in the map.

use criterion::{criterion_group, criterion_main, Criterion};
use latnet_switch::tagger::{Action, Match, Tagger};
use latnet_wire::EthernetAddress;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

fn root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn frame(dst: Ipv4Addr, dport: u16) -> Vec<u8> {
    let mut f = Vec::new();
    let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
    let src = Ipv4Addr::new(10, 0, 0, 1);
    latnet_wire::build_udp_ipv4(
        &mut f,
        mac,
        mac,
        src,
        dst,
        0,
        latnet_wire::Ecn::NotEct,
        64,
        40_000,
        dport,
        1358,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    f.resize(1400, 0);
    f
}

/// A case: its name, its entries, how many other entries fill the map.
type Case = (&'static str, Vec<(Match, Action)>, usize);

fn bench(c: &mut Criterion) {
    if !root() {
        eprintln!("tagger bench: skipped (loading a BPF program needs root)");
        return;
    }
    let dst = Ipv4Addr::new(10, 0, 0, 3);
    let mut g = c.benchmark_group("tagger");
    let flow = |tags: Vec<u16>| Action { tags, dscp: Some(56), class: Some(0x0001_0002) };
    let cases: Vec<Case> = vec![
        ("miss", vec![], 0),
        (
            "route",
            vec![(Match::any_to(IpAddr::V4(dst)), Action { tags: vec![7], ..Action::default() })],
            0,
        ),
        (
            "flow-1tag",
            vec![(
                Match { dst: IpAddr::V4(dst), proto: 17, src_port: 40_000, dst_port: 5001 },
                flow(vec![1]),
            )],
            0,
        ),
        (
            "flow-4tags",
            vec![(
                Match { dst: IpAddr::V4(dst), proto: 17, src_port: 40_000, dst_port: 5001 },
                flow(vec![1, 2, 3, 4]),
            )],
            0,
        ),
        (
            "flow-4tags-full",
            vec![(
                Match { dst: IpAddr::V4(dst), proto: 17, src_port: 40_000, dst_port: 5001 },
                flow(vec![1, 2, 3, 4]),
            )],
            4000,
        ),
    ];
    for (name, entries, others) in cases {
        let t = Tagger::load("lnbench").unwrap_or_else(|e| panic!("{e}"));
        for (m, a) in &entries {
            t.set(m, a).unwrap_or_else(|e| panic!("{e}"));
        }
        for i in 0..others {
            let m = Match {
                dst: IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i as u32)),
                proto: 17,
                src_port: 0,
                dst_port: 9,
            };
            t.set(&m, &flow(vec![5])).unwrap_or_else(|e| panic!("{e}"));
        }
        let f = frame(dst, 5001);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut ns = 0u64;
                for _ in 0..iters {
                    let r = t.test_run_repeat(&f, 1).unwrap_or_else(|e| panic!("{e}"));
                    ns += u64::from(r.duration_ns);
                }
                Duration::from_nanos(ns)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
