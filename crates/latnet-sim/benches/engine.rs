//! Event-engine throughput: a chain of switches carrying CBR traffic.
//!
//! `cargo bench -p latnet-sim --bench engine` reports events per second (criterion's
//! "elements") for chains of 4 and 8 switches, 1 Gbps links, 10 UDP flows at 90 % load.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use latnet_sim::{Scenario, Simulator};

fn chain(switches: usize, flows: usize, duration_ms: u64) -> String {
    let mut s = format!(
        "[sim]\nduration = \"{duration_ms}ms\"\ndrain = \"10ms\"\n[defaults.link]\nrate = \"1Gbps\"\ndelay = \"10us\"\n"
    );
    for i in 0..switches {
        s += &format!("[[nodes]]\nname = \"s{i}\"\nkind = \"switch\"\n");
    }
    for i in 1..switches {
        s += &format!("[[links]]\na = \"s{}\"\nb = \"s{i}\"\n", i - 1);
    }
    for f in 0..flows {
        s += &format!("[[nodes]]\nname = \"src{f}\"\nkind = \"host\"\n[[nodes]]\nname = \"dst{f}\"\nkind = \"host\"\n");
        s += &format!(
            "[[links]]\na = \"src{f}\"\nb = \"s0\"\n[[links]]\na = \"s{}\"\nb = \"dst{f}\"\n",
            switches - 1
        );
        s += &format!(
            "[[flows]]\nsrc = \"src{f}\"\ndst = \"dst{f}\"\nsize = 1000\ntraffic = {{ kind = \"cbr\", rate = \"{}Mbps\" }}\n",
            900 / flows
        );
    }
    s
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    for switches in [4usize, 8] {
        let sc = Scenario::from_str_named("bench", &chain(switches, 10, 100))
            .expect("valid bench scenario");
        let events = Simulator::new(sc.clone()).run().events;
        g.throughput(Throughput::Elements(events));
        g.bench_function(format!("chain{switches}_10flows_100ms"), |b| {
            b.iter(|| Simulator::new(sc.clone()).run().events)
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
