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
//! * `flow-4tags-full`: the same with 4,000 other entries in the map;
//! * `flow-16tags`: `flow-4tags` with sixteen tags (the most an entry pushes);
//! * `flow6-hbh-4tags`: `flow-4tags` for a 1,400-byte IPv6 UDP frame with a 24-byte hop-by-hop
//!   header (as an LBF block is carried) before the UDP header, walked to find the ports.

use criterion::{criterion_group, criterion_main, Criterion};
use latnet_switch::tagger::{Action, Match, Tagger};
use latnet_wire::EthernetAddress;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
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

const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 3);

/// A 1,400-byte IPv6 UDP frame to `DST6` with a 24-byte hop-by-hop header.
fn frame6_hbh(dport: u16) -> Vec<u8> {
    let mut f = Vec::new();
    let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
    let src = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    latnet_wire::build_udp_ipv6(
        &mut f,
        mac,
        mac,
        src,
        DST6,
        0,
        latnet_wire::Ecn::NotEct,
        64,
        40_000,
        dport,
        1400 - 86,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // next header UDP, 2 units of 8 octets beyond the first, padded with a PadN option
    let mut hbh = vec![17, 2, 1, 20];
    hbh.resize(24, 0);
    f[20] = 0;
    let len = u16::from_be_bytes([f[18], f[19]]) + 24;
    f[18..20].copy_from_slice(&len.to_be_bytes());
    f.splice(54..54, hbh);
    f.resize(1400, 0);
    f
}

/// A case: its name, its entries, how many other entries fill the map, its frame.
type Case = (&'static str, Vec<(Match, Action)>, usize, Vec<u8>);

fn bench(c: &mut Criterion) {
    if !root() {
        eprintln!("tagger bench: skipped (loading a BPF program needs root)");
        return;
    }
    let dst = Ipv4Addr::new(10, 0, 0, 3);
    let mut g = c.benchmark_group("tagger");
    let flow = |tags: Vec<u16>| Action { tags, dscp: Some(56), class: Some(0x0001_0002) };
    let exact = Match { dst: IpAddr::V4(dst), proto: 17, src_port: 40_000, dst_port: 5001 };
    let v4 = frame(dst, 5001);
    let cases: Vec<Case> = vec![
        ("miss", vec![], 0, v4.clone()),
        (
            "route",
            vec![(Match::any_to(IpAddr::V4(dst)), Action { tags: vec![7], ..Action::default() })],
            0,
            v4.clone(),
        ),
        ("flow-1tag", vec![(exact, flow(vec![1]))], 0, v4.clone()),
        ("flow-4tags", vec![(exact, flow(vec![1, 2, 3, 4]))], 0, v4.clone()),
        ("flow-4tags-full", vec![(exact, flow(vec![1, 2, 3, 4]))], 4000, v4.clone()),
        ("flow-16tags", vec![(exact, flow((1..=16).collect()))], 0, v4.clone()),
        (
            "flow6-hbh-4tags",
            vec![(Match { dst: IpAddr::V6(DST6), ..exact }, flow(vec![1, 2, 3, 4]))],
            0,
            frame6_hbh(5001),
        ),
    ];
    for (name, entries, others, f) in cases {
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
        // the case times what it says: a run matches its entry
        if let Some((m, _)) = entries.first() {
            t.test_run_repeat(&f, 1).unwrap_or_else(|e| panic!("{e}"));
            let c = t.counters(m).unwrap_or_else(|e| panic!("{e}")).unwrap_or_default();
            assert!(c.packets == 1 && c.push_failures == 0, "{name}: its entry did not match");
        }
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
