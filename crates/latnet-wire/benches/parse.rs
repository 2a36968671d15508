//! Hot-path cost of reading a frame: `parse_headers` on UDP/IPv4, TCP/IPv4 with options and
//! UDP/IPv6, and building a UDP/IPv4 header template.
//!
//! `cargo bench -p latnet-wire --bench parse`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use latnet_wire::{
    build_tcp_ipv4, build_udp_ipv4, build_udp_ipv6, parse_headers, Ecn, EthernetAddress, TcpFlags,
    TcpOption, TcpOptionBuf, TcpRepr, TcpSeqNumber,
};
use std::net::{Ipv4Addr, Ipv6Addr};

fn bench(c: &mut Criterion) {
    let (m1, m2) = (EthernetAddress([2, 0, 0, 0, 0, 1]), EthernetAddress([2, 0, 0, 0, 0, 2]));
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let mut udp4 = Vec::new();
    build_udp_ipv4(&mut udp4, m1, m2, a, b, 0, Ecn::NotEct, 64, 1, 2, 1000).expect("valid");
    let mut udp6 = Vec::new();
    build_udp_ipv6(
        &mut udp6,
        m1,
        m2,
        Ipv6Addr::LOCALHOST,
        Ipv6Addr::LOCALHOST,
        0,
        Ecn::Ect1,
        64,
        1,
        2,
        1000,
    )
    .expect("valid");
    let opts = TcpOptionBuf::new(&[
        TcpOption::MaxSegmentSize(1460),
        TcpOption::SackPermitted,
        TcpOption::Timestamp { tsval: 1, tsecr: 0 },
        TcpOption::NoOperation,
        TcpOption::WindowScale(7),
    ])
    .expect("valid options");
    let repr = TcpRepr {
        src_port: 40000,
        dst_port: 5201,
        seq_number: TcpSeqNumber(1),
        ack_number: TcpSeqNumber(0),
        flags: TcpFlags::SYN,
        window_len: 64240,
        urgent_at: 0,
        options: opts.as_slice(),
    };
    let mut tcp4 = Vec::new();
    build_tcp_ipv4(&mut tcp4, m1, m2, a, b, 0, Ecn::NotEct, 64, &repr, 0).expect("valid");

    let mut g = c.benchmark_group("wire");
    g.bench_function("parse_headers_udp_ipv4", |bn| bn.iter(|| parse_headers(black_box(&udp4))));
    g.bench_function("parse_headers_udp_ipv6", |bn| bn.iter(|| parse_headers(black_box(&udp6))));
    g.bench_function("parse_headers_tcp_ipv4_options", |bn| {
        bn.iter(|| parse_headers(black_box(&tcp4)))
    });
    let mut frame = Vec::with_capacity(64);
    g.bench_function("build_udp_ipv4", |bn| {
        bn.iter(|| {
            build_udp_ipv4(&mut frame, m1, m2, a, b, 0, Ecn::NotEct, 64, 1, 2, black_box(1000))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
