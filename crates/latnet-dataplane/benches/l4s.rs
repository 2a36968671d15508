//! ns per packet of the L4S and pacing elements: enqueue + dequeue through VDQ-CSAQM and
//! DualPI2 (a busy 1 Gbit/s link, half L4S and half Classic packets carrying packet values),
//! the PV marker (100 flows, random-rate and token-bucket) and the large-flow counter (ACKs of
//! counted connections).
//!
//! `cargo bench -p latnet-dataplane --bench l4s`.
// Set-up of fixed, valid inputs: a failure is a bug in the bench.
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use latnet_dataplane::ppv::{MarkMethod, MarkerSpec, PvMarker};
use latnet_dataplane::queue::{Dualpi2Spec, VdqSpec};
use latnet_dataplane::{CounterSpec, LargeFlowCounter, Meta, Packet, Queue, QueueSpec};
use latnet_units::{Rate, Time};
use latnet_wire::{
    build_tcp_ipv4, build_udp_ipv4, set_large_flow_option, set_packet_value, Ecn, EthernetAddress,
    LargeFlowMsg, LargeFlowOption, PacketValue, TcpFlags, TcpRepr, TcpSeqNumber,
};
use std::hint::black_box;
use std::net::Ipv4Addr;

const M: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

/// `n` packets of 100 flows in turn (1500 B frames with a value option).
fn frames(n: usize) -> Vec<Packet> {
    (0..n)
        .map(|i| {
            let mut f = Vec::new();
            let ecn = if i % 2 == 0 { Ecn::Ect1 } else { Ecn::NotEct };
            let a = Ipv4Addr::new(10, 0, 0, (i % 100) as u8 + 1);
            build_udp_ipv4(&mut f, M, M, a, Ipv4Addr::new(10, 1, 0, 1), 0, ecn, 64, 1, 2, 1454)
                .unwrap();
            set_packet_value(&mut f, PacketValue((i as u16).wrapping_mul(2654) | 1)).unwrap();
            Packet::new(f, 1454 - 4, Meta { id: i as u64, ..Meta::default() })
        })
        .collect()
}

/// Enqueue then dequeue one packet per 12 us (1500 B at 1 Gbit/s) for `pkts`.
fn through(c: &mut Criterion, name: &str, spec: QueueSpec, pkts: &[Packet]) {
    let mut g = c.benchmark_group("l4s_queue");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    g.bench_function(name, |b| {
        b.iter_batched(
            || (spec.build_seeded(1).unwrap(), pkts.to_vec()),
            |(mut q, pkts)| {
                let mut t = 0u64;
                for p in pkts {
                    let now = Time::from_nanos(t);
                    let _ = black_box(q.enqueue(now, p));
                    black_box(q.dequeue(now));
                    while q.poll_drop().is_some() {}
                    t += 12_000;
                }
            },
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn queues(c: &mut Criterion) {
    let pkts = frames(10_000);
    through(c, "vdq-csaqm", QueueSpec::VdqCsaqm(VdqSpec::new(Rate::from_gbps(1))), &pkts);
    through(c, "dualpi2-linux", QueueSpec::Dualpi2(Dualpi2Spec::default()), &pkts);
    through(c, "fifo", QueueSpec::default(), &pkts);
}

fn marker(c: &mut Criterion) {
    let pkts = frames(10_000);
    let mut g = c.benchmark_group("pv_marker");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    for (name, method) in
        [("random-rate", MarkMethod::RandomRate), ("token-bucket", MarkMethod::TokenBucket)]
    {
        let spec = MarkerSpec { method, ..MarkerSpec::default() };
        g.bench_function(name, |b| {
            b.iter_batched(
                || (PvMarker::new(&spec, 1).unwrap(), pkts.to_vec()),
                |(mut m, mut pkts)| {
                    for (k, p) in pkts.iter_mut().enumerate() {
                        black_box(m.mark(Time::from_nanos(k as u64 * 12_000), p).unwrap());
                    }
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

fn counter(c: &mut Criterion) {
    // 64 counted connections; their ACKs pass the switch (the per-packet common case)
    let mut cnt = LargeFlowCounter::new(CounterSpec::default());
    let seg = |h: u8, flags, syn: bool| {
        let repr = TcpRepr {
            src_port: if syn { 40000 } else { 5201 },
            dst_port: if syn { 5201 } else { 40000 },
            seq_number: TcpSeqNumber(1),
            ack_number: TcpSeqNumber(1),
            flags,
            window_len: 1000,
            urgent_at: 0,
            options: &[],
        };
        let (s, d) = (Ipv4Addr::new(10, 0, 0, h), Ipv4Addr::new(10, 0, 1, 1));
        let (s, d) = if syn { (s, d) } else { (d, s) };
        let mut f = Vec::new();
        build_tcp_ipv4(&mut f, M, M, s, d, 0, Ecn::NotEct, 64, &repr, 0).unwrap();
        if syn {
            set_large_flow_option(&mut f, &LargeFlowOption::new(LargeFlowMsg::Register)).unwrap();
        }
        Packet::new(f, 0, Meta::default())
    };
    for h in 1..=64 {
        cnt.process(Time::ZERO, &mut seg(h, TcpFlags::SYN, true), 1, Rate::from_gbps(1)).unwrap();
    }
    let acks: Vec<Packet> = (1..=64).map(|h| seg(h, TcpFlags::ACK, false)).collect();
    for a in &acks {
        // tell everyone once, so the timed ACKs carry nothing new
        cnt.process(Time::ZERO, &mut a.clone(), 2, Rate::from_gbps(1)).unwrap();
    }
    let mut g = c.benchmark_group("large_flow_counter");
    g.throughput(Throughput::Elements(acks.len() as u64));
    g.bench_function("ack", |b| {
        b.iter(|| {
            for a in &acks {
                let mut p = a.clone();
                black_box(cnt.process(Time::from_nanos(1), &mut p, 2, Rate::from_gbps(1)).unwrap());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, queues, marker, counter);
criterion_main!(benches);
