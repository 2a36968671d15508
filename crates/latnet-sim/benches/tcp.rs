//! TCP in the simulator: the ns-3 reference dumbbell (4 CUBIC flows, 100 Mbit/s / 10 ms
//! bottleneck, 100-packet DropTail, 10 simulated s) and the 1 Gbit/s / 5 ms RTT dumbbell
//! (4 flows, 3 simulated s).
//!
//! `cargo bench -p latnet-sim --bench tcp` reports the wall time per run and events per
//! second (criterion's "elements"). The side-by-side comparison with ns-3 is
//! `bench/ns3_tcp_dumbbell.py`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use latnet_sim::{Scenario, Simulator};

/// `n` bulk flows of `cc` over a dumbbell: access `access` / `access_delay`, bottleneck
/// `rate` / `delay` with a `limit`-packet FIFO, `secs` simulated seconds.
#[allow(clippy::too_many_arguments)]
pub fn dumbbell(
    n: usize,
    cc: &str,
    access: &str,
    access_delay: &str,
    rate: &str,
    delay: &str,
    limit: u32,
    secs: u32,
) -> String {
    let mut s = format!(
        "[sim]\nduration = \"{secs}s\"\ndrain = \"0s\"\n[defaults.link]\nrate = \"{access}\"\n\
         delay = \"{access_delay}\"\n[[nodes]]\nname = \"left\"\nkind = \"switch\"\n[[nodes]]\n\
         name = \"right\"\nkind = \"switch\"\n[[links]]\na = \"left\"\nb = \"right\"\n\
         rate = \"{rate}\"\ndelay = \"{delay}\"\nqueue = {{ kind = \"fifo\", limit_packets = {limit} }}\n"
    );
    for i in 0..n {
        s += &format!(
            "[[nodes]]\nname = \"l{i}\"\nkind = \"host\"\n[[nodes]]\nname = \"r{i}\"\nkind = \"host\"\n\
             [[links]]\na = \"l{i}\"\nb = \"left\"\n[[links]]\na = \"right\"\nb = \"r{i}\"\n\
             [[flows]]\nsrc = \"l{i}\"\ndst = \"r{i}\"\nsize = 1502\nstart = \"{}ms\"\n\
             traffic = {{ kind = \"tcp-bulk\", cc = \"{cc}\" }}\n",
            100 + 10 * i
        );
    }
    s
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp");
    g.sample_size(10);
    let cases = [
        (
            "dumbbell_4cubic_100M_10ms_10s",
            dumbbell(4, "cubic", "1Gbps", "1ms", "100Mbps", "10ms", 100, 10),
        ),
        (
            "dumbbell_4cubic_1G_5msRTT_3s",
            dumbbell(4, "cubic", "10Gbps", "250us", "1Gbps", "2ms", 416, 3),
        ),
    ];
    for (name, src) in cases {
        let sc = Scenario::from_str_named("bench", &src).expect("valid bench scenario");
        let events = Simulator::new(sc.clone()).run().events;
        g.throughput(Throughput::Elements(events));
        g.bench_function(name, |b| b.iter(|| Simulator::new(sc.clone()).run().events));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
