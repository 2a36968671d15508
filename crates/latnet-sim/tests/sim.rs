//! Integration tests of the simulator: exact latencies on small networks, conservation,
//! priority isolation, drops by reason, determinism.

use latnet_dataplane::{Meta, Packet};
use latnet_sim::{Results, Scenario, Simulator};
use latnet_units::Time;
use proptest::prelude::*;

#[path = "sim/tcp.rs"]
mod tcp;

fn scenario(src: &str) -> Scenario {
    Scenario::from_str_named("test.toml", src).unwrap_or_else(|e| panic!("{e}"))
}

fn run(src: &str) -> Results {
    Simulator::new(scenario(src)).run()
}

/// A TCP/IPv4 frame of no payload from `src:sport` to `dst:dport` with `flags` (sequence 1,
/// acknowledging 1 if `flags` has ACK), and with `ip_option` (a large-flow option's data, valid
/// or not) in its IP options: what the large-flow tests inject.
fn tcp_frame(
    (src, sport): (std::net::Ipv4Addr, u16),
    (dst, dport): (std::net::Ipv4Addr, u16),
    flags: latnet_wire::TcpFlags,
    ip_option: Option<&[u8]>,
) -> Vec<u8> {
    let m = latnet_wire::EthernetAddress([2, 0, 0, 0, 0, 1]);
    let ack = u32::from(flags.contains(latnet_wire::TcpFlags::ACK));
    let repr = latnet_wire::TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq_number: latnet_wire::TcpSeqNumber(1),
        ack_number: latnet_wire::TcpSeqNumber(ack),
        flags,
        window_len: 1000,
        urgent_at: 0,
        options: &[],
    };
    let mut f = Vec::new();
    let ecn = latnet_wire::Ecn::NotEct;
    latnet_wire::build_tcp_ipv4(&mut f, m, m, src, dst, 0, ecn, 64, &repr, 0).expect("a frame");
    if let Some(o) = ip_option {
        latnet_wire::option_edit::insert_ip_option(&mut f, latnet_wire::large_flow::KINDS, o)
            .expect("room for the option");
    }
    f
}

/// h1 -- s1 -- h2, 100 Mbps, 100 us per link.
fn line(extra_sim: &str, flows: &str) -> String {
    format!(
        r#"
[sim]
duration = "1s"
drain = "100ms"
{extra_sim}
[defaults.link]
rate = "100Mbps"
delay = "100us"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "h2"
{flows}
"#
    )
}

const ONE_PACKET: &str = r#"
[[flows]]
src = "h1"
dst = "h2"
size = 300
count = 1
traffic = { kind = "cbr", rate = "1Mbps" }
"#;

#[test]
fn a_single_packet_takes_exactly_serialization_plus_propagation() {
    let r = run(&line("", ONE_PACKET));
    let f = &r.flows[0];
    assert_eq!((f.sent, f.received, f.dropped), (1, 1, 0));
    let l = f.latency_ns.expect("received");
    // 2 x (24 us serialization of 300 B at 100 Mbps + 100 us propagation)
    assert_eq!((l.min, l.max), (248_000, 248_000));
    assert_eq!(r.latency_convention, "physical");
    // per hop, at start of transmission: the host at 0, the switch after one link.
    let hops: Vec<_> =
        f.hops.iter().map(|h| (h.node.as_str(), h.latency_ns.map(|l| l.max))).collect();
    assert_eq!(hops, vec![("h1", Some(0)), ("s1", Some(124_000))]);
}

#[test]
fn the_seed_convention_leaves_out_serialization() {
    let r = run(&line("latency = \"exclude-serialization\"", ONE_PACKET));
    let f = &r.flows[0];
    assert_eq!(f.latency_ns.map(|l| l.max), Some(200_000));
    assert_eq!(f.hops[1].latency_ns.map(|l| l.max), Some(100_000));
    assert_eq!(r.latency_convention, "exclude-serialization");
}

#[test]
fn overload_drops_are_counted_and_every_packet_is_accounted_for() {
    let flows = r#"
[[flows]]
src = "h1"
dst = "h2"
size = 1000
traffic = { kind = "cbr", rate = "100Mbps" }
[[flows]]
src = "h1"
dst = "h2"
size = 1000
traffic = { kind = "cbr", rate = "50Mbps" }
"#;
    // h1's NIC is the bottleneck: 150 Mbps offered into 100 Mbps, 1000-packet FIFO.
    let r = run(&line("", flows));
    let mut rx_bits = 0u64;
    for f in &r.flows {
        assert_eq!(f.sent, f.received + f.dropped + f.in_flight_at_end, "{}", f.name);
        rx_bits += f.received * u64::from(f.size) * 8;
    }
    // Periodic sources phase-lock: which flow loses is a matter of phase, the total is not.
    let full: u64 = r.flows.iter().filter_map(|f| f.drops.get("queue-full-packets")).sum();
    assert!(full > 5_000, "a third of 18,750 packets must be dropped: {full}");
    let port = &r.ports[0];
    // The bottleneck carries exactly what was received, and never more than its rate allows.
    assert_eq!(port.tx_bytes * 8, rx_bits);
    assert!(rx_bits <= 100_000_000 * r.end_ns / 1_000_000_000);
    assert_eq!((port.node.as_str(), port.peer.as_str()), ("h1", "s1"));
    assert!(port.utilisation > 0.9, "{}", port.utilisation);
    assert_eq!(port.queue.peak_packets, 1000);
    let q_drops: u64 = port.queue.drops.values().sum();
    let f_drops: u64 = r.flows.iter().map(|f| f.dropped).sum();
    assert_eq!(q_drops, f_drops);
}

#[test]
fn strict_priority_isolates_the_high_class() {
    let src = r#"
[sim]
duration = "2s"
[defaults.link]
rate = "100Mbps"
delay = "10us"
[defaults]
queue = { kind = "priority", classes = 2, limit_packets = 200 }
[[nodes]]
name = "a"
kind = "host"
[[nodes]]
name = "b"
kind = "host"
[[nodes]]
name = "s"
kind = "switch"
[[nodes]]
name = "c"
kind = "host"
[[links]]
a = "a"
b = "s"
[[links]]
a = "b"
b = "s"
[[links]]
a = "s"
b = "c"
[[flows]]
name = "urgent"
src = "a"
dst = "c"
priority = 0
size = 200
traffic = { kind = "cbr", rate = "2Mbps" }
[[flows]]
name = "bulk"
src = "b"
dst = "c"
size = 1500
traffic = { kind = "cbr", rate = "99Mbps" }
[[flows]]
name = "burst"
src = "a"
dst = "c"
size = 1500
traffic = { kind = "onoff", burst_rate = "90Mbps", period = "20ms", burst = "5ms" }
"#;
    let r = run(src);
    let urgent = r.flows[0].latency_ns.expect("urgent received");
    let bulk = r.flows[1].latency_ns.expect("bulk received");
    // urgent waits at most one 1500 B frame (120 us) at the switch, plus its own path.
    assert!(urgent.max < 2 * 120_000 + 2 * 16_000 + 20_000 + 2_000, "{urgent:?}");
    assert!(bulk.p99 > 10 * urgent.p99, "bulk {bulk:?} vs urgent {urgent:?}");
    assert_eq!(r.flows[0].dropped, 0);
    assert!(r.flows[1].dropped > 0);
    // per-class counters on the bottleneck port s -> c
    let port = r.ports.iter().find(|p| p.node == "s" && p.peer == "c").expect("port s->c");
    assert_eq!(port.classes.len(), 2);
    assert_eq!(port.classes[0].enqueued, r.flows[0].sent);
}

#[test]
fn malformed_frames_are_counted_drops_not_panics() {
    let mut sim = Simulator::new(scenario(&line("", ONE_PACKET)));
    let garbage: [&[u8]; 4] = [
        &[],
        &[0xff; 13],
        // Ethernet + IPv4 with IHL 15 but only 20 bytes present
        &[
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00, 0x4f, 0, 0, 40, 0, 0, 0, 0, 64, 17, 0,
            0, 10, 0, 0, 1, 10, 0, 0, 3,
        ],
        // ARP: not IP
        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x06, 0, 1],
    ];
    for (i, g) in garbage.iter().enumerate() {
        // port 0 is h1 -> s1: the frame arrives at s1.
        let meta = Meta { id: 1000 + i as u64, flow: u32::MAX, ..Meta::default() };
        sim.inject(Time::from_nanos(5), 0, Packet::new(g.to_vec(), 0, meta)).expect("injected");
    }
    // foreign traffic well formed: forwarded and received, in no flow's statistics
    let mut udp = Vec::new();
    let m = latnet_wire::EthernetAddress([2, 0, 0, 0, 0, 1]);
    let address = |name: &str| {
        let n = sim.scenario().nodes.iter().find(|n| n.name == name).expect("a host");
        n.address
    };
    let (a, b) = (address("h1"), address("h2"));
    let ecn = latnet_wire::Ecn::NotEct;
    latnet_wire::build_udp_ipv4(&mut udp, m, m, a, b, 0, ecn, 64, 9, 9, 64).expect("udp");
    let meta = Meta { id: 2000, flow: u32::MAX, ..Meta::default() };
    sim.inject(Time::from_nanos(5), 0, Packet::new(udp, 0, meta)).expect("injected");
    // a port the topology does not have is refused, naming it
    let ports = sim.topology().ports.len();
    let e = sim.inject(Time::from_nanos(5), ports, Packet::new(vec![], 0, Meta::default()));
    assert_eq!(e, Err(format!("port {ports}: the topology has {ports} ports (0 to {ports} - 1)")));
    let r = sim.run();
    let s1 = r.nodes.iter().find(|n| n.name == "s1").expect("s1");
    assert_eq!(s1.drops.get("malformed"), Some(&4), "{:?}", s1.drops);
    assert_eq!(r.flows[0].received, 1, "real traffic is unaffected");
    assert_eq!(r.flows[0].sent, 1);
    let to_h2 = r.ports.iter().find(|p| p.node == "s1" && p.peer == "h2").expect("s1 -> h2");
    assert_eq!(to_h2.tx_packets, 2, "the flow's packet and the foreign one");
}

#[test]
fn routing_loops_end_in_ttl_drops_and_unreachable_hosts_in_no_route() {
    let src = r#"
[sim]
duration = "10ms"
[defaults.link]
rate = "1Gbps"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "s2"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[nodes]]
name = "island"
kind = "host"
[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "s2"
[[links]]
a = "s2"
b = "h2"
[[routes]]
node = "s2"
dst = "h2"
next = "s1"
[[flows]]
src = "h1"
dst = "h2"
size = 100
count = 3
traffic = { kind = "cbr", rate = "1Mbps" }
[[flows]]
src = "h1"
dst = "island"
size = 100
count = 2
traffic = { kind = "cbr", rate = "1Mbps" }
"#;
    let r = run(src);
    assert_eq!(r.flows[0].drops.get("ttl-expired"), Some(&3));
    assert_eq!(r.flows[1].drops.get("no-route"), Some(&2));
    assert_eq!(r.flows[0].received + r.flows[1].received, 0);
}

#[test]
fn link_loss_follows_its_probability() {
    let flows = r#"
[[flows]]
src = "h1"
dst = "h2"
size = 100
traffic = { kind = "cbr", rate = "8Mbps" }
"#;
    let src = line("", flows).replace("delay = \"100us\"", "delay = \"100us\"\nloss = 0.1");
    let r = run(&src);
    let f = &r.flows[0];
    // two lossy links: P(delivered) = 0.81; 10,000 packets
    assert_eq!(f.sent, 10_000);
    let p = f.received as f64 / f.sent as f64;
    assert!((p - 0.81).abs() < 0.02, "{p}");
    assert_eq!(f.drops.get("link-loss").copied(), Some(f.sent - f.received));
}

fn poisson(seed: u64) -> String {
    let flows = r#"
[[flows]]
src = "h1"
dst = "h2"
size = 1000
traffic = { kind = "poisson", rate = "60Mbps" }
[[flows]]
src = "h1"
dst = "h2"
size = 500
traffic = { kind = "cbr", rate = "30Mbps" }
"#;
    line(&format!("seed = {seed}"), flows) + "\n[output]\npackets = true\n"
}

fn files(r: &Results, dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = r
        .write_dir(dir)
        .expect("write")
        .into_iter()
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (name, std::fs::read(&p).expect("read back"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn same_seed_gives_byte_identical_files_and_another_seed_does_not() {
    let tmp = std::env::temp_dir().join(format!("latnet-det-{}", std::process::id()));
    let a = files(&run(&poisson(3)), &tmp.join("a"));
    let b = files(&run(&poisson(3)), &tmp.join("b"));
    let c = files(&run(&poisson(4)), &tmp.join("c"));
    let names: Vec<_> = a.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["flows.csv", "hops.csv", "packets.csv", "results.json"]);
    assert_eq!(a, b, "same scenario and seed");
    for ((name, x), (_, y)) in a.iter().zip(&c) {
        assert_ne!(x, y, "{name} should change with the seed (Poisson arrivals)");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn per_packet_records_match_the_summary() {
    let r = run(&poisson(5));
    let log = r.log.as_ref().expect("packets recorded");
    let total: u64 = r.flows.iter().map(|f| f.sent).sum();
    assert_eq!(log.packets.len() as u64, total, "one record per packet");
    let received = log.packets.iter().filter(|p| p.latency_ns.is_some()).count() as u64;
    assert_eq!(received, r.flows.iter().map(|f| f.received).sum::<u64>());
    let max = log.packets.iter().filter(|p| p.flow == 0).filter_map(|p| p.latency_ns).max();
    assert_eq!(max, r.flows[0].latency_ns.map(|l| l.max));
    // every hop record starts transmission no earlier than it was enqueued
    assert!(log.hops.iter().all(|h| h.start_tx_ns >= h.enqueue_ns));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// On random chains with random CBR loads: every packet is accounted for, and none arrives
    /// faster than serialization plus propagation on its path allow.
    #[test]
    fn conservation_and_physical_lower_bound(
        hops in 1usize..5,
        rates in proptest::collection::vec(1u64..200, 1..4),
        size in 64u32..1500,
        delay_us in 0u64..500,
    ) {
        let mut src = String::from("[sim]\nduration = \"50ms\"\ndrain = \"20ms\"\n");
        src += &format!("[defaults.link]\nrate = \"100Mbps\"\ndelay = \"{delay_us}us\"\n");
        src += "[defaults]\nqueue = { kind = \"fifo\", limit_packets = 20 }\n";
        src += "[[nodes]]\nname = \"h1\"\nkind = \"host\"\n[[nodes]]\nname = \"h2\"\nkind = \"host\"\n";
        for i in 0..hops {
            src += &format!("[[nodes]]\nname = \"s{i}\"\nkind = \"switch\"\n");
        }
        src += "[[links]]\na = \"h1\"\nb = \"s0\"\n";
        for i in 1..hops {
            src += &format!("[[links]]\na = \"s{}\"\nb = \"s{i}\"\n", i - 1);
        }
        src += &format!("[[links]]\na = \"s{}\"\nb = \"h2\"\n", hops - 1);
        for r in &rates {
            src += &format!("[[flows]]\nsrc = \"h1\"\ndst = \"h2\"\nsize = {size}\ntraffic = {{ kind = \"cbr\", rate = \"{r}Mbps\" }}\n");
        }
        let r = run(&src);
        let links = hops as u64 + 1;
        let min = links * (u64::from(size) * 80 + delay_us * 1000); // 100 Mbps: 80 ns per byte
        for f in &r.flows {
            prop_assert_eq!(f.sent, f.received + f.dropped + f.in_flight_at_end);
            if let Some(l) = f.latency_ns {
                prop_assert!(l.min >= min, "min {} < {}", l.min, min);
            }
        }
    }
}

#[path = "sim/cut_through.rs"]
mod cut_through;
#[path = "sim/end_of_run.rs"]
mod end_of_run;
#[path = "sim/l4s.rs"]
mod l4s;
#[path = "sim/outputs.rs"]
mod outputs;
#[path = "sim/pacing.rs"]
mod pacing;

#[test]
fn queue_series_follows_a_bottleneck_filling_and_draining() {
    // 150 Mbit/s of 1000-byte frames from h1 into its 100 Mbit/s link for 10 ms: h1's queue
    // grows by 18.75 - 12.5 = 6.25 packets per ms, then drains at 12.5 per ms.
    let flow = r#"
[[flows]]
src = "h1"
dst = "h2"
size = 1000
stop = "10ms"
traffic = { kind = "cbr", rate = "150Mbps" }
"#;
    let src = line("[output]\nqueues = \"1ms\"", flow);
    let r = run(&src);
    let port = r.ports.iter().position(|p| p.node == "h1" && p.peer == "s1").unwrap();
    let rows: Vec<_> = r.queue_series.iter().filter(|q| q.port as usize == port).collect();
    assert_eq!(rows.len(), 1100, "one row per ms of the run and its drain");
    assert_eq!(r.queue_series.len(), 1100 * r.ports.len(), "every port every interval");
    for (k, q) in rows.iter().enumerate().take(30) {
        let t_ms = (k + 1) as f64;
        assert_eq!(q.t_ns, (k as u64 + 1) * 1_000_000);
        let want = if t_ms <= 10.0 { 6.25 * t_ms } else { (62.5 - 12.5 * (t_ms - 10.0)).max(0.0) };
        assert!((q.packets as f64 - want).abs() <= 1.5, "at {t_ms} ms: {} vs {want}", q.packets);
        assert_eq!(q.bytes, q.packets * 1000);
        assert!(q.max_packets >= q.packets && q.max_bytes == q.max_packets * 1000);
    }
    // the peak is at the end of the sending, and a drained queue reports zero
    let peak = rows.iter().map(|q| q.max_packets).max().unwrap();
    assert!((61..=64).contains(&peak), "peak {peak}");
    assert_eq!(rows[9].max_packets, peak, "the interval ending at 10 ms holds the peak");
    assert_eq!((rows[29].packets, rows[29].max_packets), (0, 0));
    let csv = r.queues_csv().unwrap();
    assert!(csv.starts_with("t_ns,node,peer,link,packets,bytes,max_packets,max_bytes\n"));
    assert_eq!(csv.lines().count(), 1 + r.queue_series.len());
    assert!(run(&line("", flow)).queues_csv().is_none());
    // an interval longer than the run and its drain: sampled, no interval ended, the header
    // alone (it was no file, as if no series had been asked for)
    let long = run(&line("[output]\nqueues = \"10s\"", flow));
    assert!(long.queue_series.is_empty());
    let header = csv.lines().next().unwrap().to_owned() + "\n";
    assert_eq!(long.queues_csv(), Some(header));
}
