//! ns per frame of the switch's per-frame path without I/O: [`SwitchCore`] on the scenario of
//! `bench/switch_peers.py` (h1 -- sw -- h2, FIFO, rate / delay emulation on at 100 Gbit/s and
//! 0 s), frames fed as the real-time loop feeds them (`advance` to the frame's instant, then
//! `receive`, buffers handed to the sink and given back as the loop does after `sendmmsg`).
//!
//! `cargo bench -p latnet-switch --bench core` — groups:
//! * `core/<size>B/spaced`: one frame every 2 us (each leaves before the next arrives);
//! * `core/<size>B/burst64`: bursts of 64 frames at one instant, then the clock moves 200 us
//!   (what a wake-up that drains a ring sees);
//! * `core/<size>B/spaced-flow`: as `spaced`, but the frames are a scenario flow's, with the
//!   sender's stamp in the payload: the switch reads it and measures per-hop latency at both
//!   ports it emulates (the host's NIC and its own egress);
//! * `core/<size>B/spaced-flow-hops`: the same with per-packet hop records
//!   (`latnet-switch run --hops`), the records taken after each iteration as the runner hands
//!   them to its writer thread (which turns them into CSV: not measured here).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use latnet_sim::Scenario;
use latnet_switch::core::{Offload, SwitchCore};
use latnet_switch::plan::port_mac;
use latnet_units::Time;
use std::hint::black_box;

const SC: &str = r#"
[sim]
duration = "10s"
[defaults]
queue = { kind = "fifo", limit_packets = 4096, limit_bytes = "8MB" }
[defaults.link]
rate = "100Gbps"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "sw"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "sw"
[[links]]
a = "sw"
b = "h2"
"#;

/// [`SC`] with a flow whose frames are [`frame`]'s (same addresses and ports).
const FLOW: &str = r#"
[[flows]]
src = "h1"
dst = "h2"
size = 1514
traffic = { kind = "cbr", rate = "1Gbps" }
"#;

fn frame(len: usize) -> Vec<u8> {
    let mut f = Vec::new();
    latnet_wire::build_udp_ipv4(
        &mut f,
        latnet_wire::EthernetAddress(port_mac(0)),
        latnet_wire::EthernetAddress(port_mac(1)),
        std::net::Ipv4Addr::new(10, 0, 0, 1),
        std::net::Ipv4Addr::new(10, 0, 0, 3),
        0,
        latnet_wire::Ecn::NotEct,
        64,
        10_000,
        20_000,
        len - 42,
    )
    .expect("a valid frame");
    f.resize(len, 0xab);
    f
}

/// Feed `n` frames (`burst` per instant, instants `gap` ns apart); returns frames sent.
fn feed(core: &mut SwitchCore, f: &[u8], t0: &mut u64, n: usize, burst: usize, gap: u64) -> usize {
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(64);
    let mut sent = 0;
    for k in 0..n {
        if k % burst == 0 {
            *t0 += gap;
        }
        let t = Time::from_nanos(*t0);
        core.advance_owned(t, &mut |_, b, _| out.push(b));
        core.receive(t, 0, f, Offload::default());
        sent += out.len();
        for b in out.drain(..) {
            core.recycle_buffer(black_box(b));
        }
    }
    *t0 += 1_000_000;
    core.advance_owned(Time::from_nanos(*t0), &mut |_, b, _| out.push(b));
    sent += out.len();
    for b in out.drain(..) {
        core.recycle_buffer(b);
    }
    sent
}

fn bench(c: &mut Criterion) {
    let sc = Scenario::from_str_named("switch_peers.toml", SC).expect("valid bench scenario");
    let mut g = c.benchmark_group("core");
    const N: usize = 1024;
    g.throughput(Throughput::Elements(N as u64));
    for size in [60usize, 1514] {
        let f = frame(size);
        for (name, burst, gap) in [("spaced", 1usize, 2_000u64), ("burst64", 64, 200_000)] {
            let mut core = SwitchCore::new(&sc, "sw").expect("switch sw");
            let mut t0 = 0u64;
            assert_eq!(feed(&mut core, &f, &mut t0, N, burst, gap), N);
            g.bench_function(BenchmarkId::new(format!("{size}B"), name), |b| {
                b.iter(|| feed(&mut core, &f, &mut t0, N, burst, gap))
            });
        }
        let sc = Scenario::from_str_named("flow.toml", &format!("{SC}{FLOW}")).expect("valid");
        let mut f = f.clone();
        // sent at the switch's time zero: every transmission is measured
        latnet_switch::traffic::fill_payload(&mut f[42..], 0, 1, 0);
        for (name, records) in [("spaced-flow", false), ("spaced-flow-hops", true)] {
            let mut core = SwitchCore::new(&sc, "sw").expect("switch sw");
            if records {
                core.enable_hop_records(0);
            }
            let mut t0 = 0u64;
            let mut rows = Vec::new();
            assert_eq!(feed(&mut core, &f, &mut t0, N, 1, 2_000), N);
            let measured = |core: &SwitchCore| {
                core.hop_latency.iter().flatten().flatten().map(|s| s.count()).sum::<u64>()
            };
            assert_eq!(measured(&core), 2 * N as u64, "both ports measure every frame");
            assert_eq!(core.swap_hop_records(1, &mut rows), records);
            g.bench_function(BenchmarkId::new(format!("{size}B"), name), |b| {
                b.iter(|| {
                    let n = feed(&mut core, &f, &mut t0, N, 1, 2_000);
                    rows.clear();
                    core.swap_hop_records(0, &mut rows);
                    n
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
