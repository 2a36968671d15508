use super::*;
use latnet_sim::scenario::Switching;
use latnet_units::Rate;

const SC: &str = r#"
[sim]
duration = "1s"
[defaults.link]
rate = "100Mbps"
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
delay = "1ms"
[[flows]]
src = "h1"
dst = "h2"
size = 1250
traffic = { kind = "cbr", rate = "1Mbps" }
"#;

fn scenario(extra: &str) -> Scenario {
    Scenario::from_str_named("t.toml", &format!("{SC}{extra}")).unwrap()
}

/// Scenario `text` (a variant of [`SC`]) with s1 forwarding by tag stack, base 10.
fn tag_stack_scenario(text: &str) -> Scenario {
    let s1 = "name = \"s1\"\nkind = \"switch\"";
    let text =
        text.replace(s1, &format!("{s1}\nforwarding = {{ kind = \"tag-stack\", base = 10 }}"));
    Scenario::from_str_named("t.toml", &text).unwrap()
}

/// A UDP frame h1 -> h2 of `len` bytes with DSCP for `prio`, sport `sport`.
fn frame(len: usize, prio: u8, sport: u16) -> Vec<u8> {
    let mut f = Vec::new();
    latnet_wire::build_udp_ipv4(
        &mut f,
        latnet_wire::EthernetAddress(port_mac(0)),
        latnet_wire::EthernetAddress(port_mac(1)),
        "10.0.0.1".parse().unwrap(),
        "10.0.0.3".parse().unwrap(),
        latnet_dataplane::packet::dscp_from_priority(prio),
        latnet_wire::Ecn::NotEct,
        64,
        sport,
        20_000,
        len - 42,
    )
    .unwrap();
    f.resize(len, 0xab);
    f
}

/// Flow `f`'s untagged UDP frame h1 -> h2 of `len` bytes as its host sends it (payload zero).
fn host_frame(f: &latnet_sim::scenario::FlowSpec, len: usize) -> Vec<u8> {
    let mut fr = Vec::new();
    latnet_wire::build_udp_ipv4(
        &mut fr,
        latnet_wire::EthernetAddress(port_mac(0)),
        latnet_wire::EthernetAddress(port_mac(1)),
        "10.0.0.1".parse().unwrap(),
        "10.0.0.3".parse().unwrap(),
        0,
        latnet_wire::Ecn::NotEct,
        64,
        f.src_port,
        f.dst_port,
        len - 42,
    )
    .unwrap();
    fr.resize(len, 0);
    fr
}

/// Run the core, calling `advance` at `ticks`; returns (iface, due, frame) of every output.
fn drive(
    core: &mut SwitchCore,
    input: &[(u64, Vec<u8>)],
    ticks: &[u64],
) -> Vec<(usize, u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut events: Vec<(u64, Option<usize>)> =
        input.iter().enumerate().map(|(i, (t, _))| (*t, Some(i))).collect();
    events.extend(ticks.iter().map(|&t| (t, None)));
    events.sort();
    for (t, inp) in events {
        let now = Time::from_nanos(t);
        core.advance(now, &mut |i, f, d| out.push((i, d.as_nanos(), f.to_vec())));
        if let Some(k) = inp {
            core.receive(now, 0, &input[k].1, Offload::default());
        }
        core.advance(now, &mut |i, f, d| out.push((i, d.as_nanos(), f.to_vec())));
    }
    core.advance(Time::MAX, &mut |i, f, d| out.push((i, d.as_nanos(), f.to_vec())));
    out
}

/// A pipeline switch's modelled processing cost is the simulator's alone: on real packets the
/// real cost is paid, so the emulated switch neither delays a frame by the modelled cost nor
/// drops one for the modelled processor's backlog (10 frames at once, 1 ms each, would
/// overflow its 1 ms `max_backlog` from the third on). They leave as through the FIB.
#[test]
fn a_modelled_processing_cost_neither_delays_nor_drops_real_frames() {
    let pipeline = r#"
[[pipelines]]
name = "p"
algo = "pof"
tables = [{ id = 0, name = "fib", kind = "lpm", fields = ["ipv4.dst"], size = 4 }]
processing = { normal = "1ms", low_latency = "1ms", max_backlog = "1ms" }
[[pipelines.rules]]
table = "fib"
id = 1
match = { "ipv4.dst" = "10.0.0.3/32" }
actions = ["output 1"]
"#;
    let s1 = "name = \"s1\"\nkind = \"switch\"";
    let text = format!("{SC}{pipeline}").replace(s1, &format!("{s1}\npipeline = \"p\""));
    let sc = Scenario::from_str_named("t.toml", &text).unwrap();
    // the simulator models the cost: 1 ms on top of two 100 us frames and the 1 ms link
    let sim = latnet_sim::Simulator::new(sc.clone()).run();
    assert_eq!(sim.flows[0].latency_ns.as_ref().map(|l| l.min), Some(2_200_000));
    let input: Vec<_> = (0..10).map(|_| (0u64, frame(1250, 7, 10_000))).collect();
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    // (the frames differ only in the TTL, which a pipeline switch leaves alone)
    let when = |o: Vec<(usize, u64, Vec<u8>)>| o.into_iter().map(|(i, t, _)| (i, t)).collect();
    let out: Vec<_> = when(drive(&mut core, &input, &[]));
    let mut fib = SwitchCore::new(&scenario(""), "s1").unwrap();
    let want: Vec<_> = when(drive(&mut fib, &input, &[]));
    assert_eq!(out.len(), 10);
    assert_eq!(out, want);
    assert_eq!(core.counters.node_drops.get(DropReason::ProcessingOverload), 0);
}

#[test]
fn rate_and_delay_are_emulated_exactly_in_emulated_time() {
    let sc = scenario("");
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    // 10 frames of 1250 B at t = 0: 100 us each at 100 Mbps on the host link, then again on
    // the switch's link, then 1 ms of delay.
    let input: Vec<_> = (0..10).map(|_| (0u64, frame(1250, 7, 10_000))).collect();
    let out = drive(&mut core, &input, &[]);
    assert_eq!(out.len(), 10);
    for (k, (iface, due, f)) in out.iter().enumerate() {
        assert_eq!(*iface, 1, "toward h2");
        let k = k as u64;
        assert_eq!(*due, (k + 1) * 100_000 + 100_000 + 1_000_000, "frame {k}");
        assert_eq!(&f[0..6], &port_mac(3), "destination MAC: h2's interface");
        assert_eq!(&f[6..12], &port_mac(2), "source MAC: the switch's interface");
        assert_eq!(f[14 + 8], 63, "TTL decremented once");
    }
    assert_eq!(core.flow_forwarded[0], 10, "sport 10000 is flow f0's: counted");
}

#[test]
fn cut_through_hands_frames_to_switches_at_their_first_bit() {
    // h1 - s1 - s2 - h2: s1 emulates h1's port (toward s1) and its own port toward s2
    let chain = SC
        .replace("duration = \"1s\"", "duration = \"1s\"\nswitching = \"cut-through\"")
        // (s2 after h2, which keeps its address 10.0.0.3)
        .replacen("[[links]]", "[[nodes]]\nname = \"s2\"\nkind = \"switch\"\n[[links]]", 1)
        .replace(
            "a = \"s1\"\nb = \"h2\"",
            "a = \"s1\"\nb = \"s2\"\ndelay = \"1ms\"\n[[links]]\na = \"s2\"\nb = \"h2\"",
        );
    let sc = Scenario::from_str_named("t.toml", &chain).unwrap();
    assert_eq!(sc.sim.switching, Switching::CutThrough);
    let input: Vec<_> = (0..10).map(|_| (0u64, frame(1250, 7, 10_000))).collect();
    let out = drive(&mut SwitchCore::new(&sc, "s1").unwrap(), &input, &[]);
    // frame k leaves h1 at k x 100 us and reaches s1 then (first bit, no delay); s1 starts
    // sending it at once and s2 has its first bit 1 ms later
    let due: Vec<_> = out.iter().map(|(i, d, _)| (*i, *d)).collect();
    assert_eq!(due, (0..10).map(|k| (1, k * 100_000 + 1_000_000)).collect::<Vec<_>>());
    // store-and-forward (the default): both serializations and the delay
    let saf =
        Scenario::from_str_named("t.toml", &chain.replace("cut-through", "store-and-forward"))
            .unwrap();
    let out = drive(&mut SwitchCore::new(&saf, "s1").unwrap(), &input, &[]);
    let due: Vec<_> = out.iter().map(|(_, d, _)| *d).collect();
    assert_eq!(due, (0..10).map(|k| (k + 1) * 100_000 + 100_000 + 1_000_000).collect::<Vec<_>>());
    // toward a host a frame is whole even under cut-through: h1 - s1 - h2 as in SC, where only
    // h1's port (toward s1) hands frames on at their first bit
    let text = SC.replace("duration = \"1s\"", "duration = \"1s\"\nswitching = \"cut-through\"");
    let sc = Scenario::from_str_named("t.toml", &text).unwrap();
    let out = drive(&mut SwitchCore::new(&sc, "s1").unwrap(), &input, &[]);
    let due: Vec<_> = out.iter().map(|(_, d, _)| *d).collect();
    assert_eq!(due, (0..10).map(|k| (k + 1) * 100_000 + 1_000_000).collect::<Vec<_>>());
}

#[test]
fn malformed_frames_are_counted_and_dropped() {
    let sc = scenario("");
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    core.receive(Time::ZERO, 1, &[0u8; 10], Offload::default());
    let mut arp = frame(60, 7, 1);
    arp[12] = 0x08;
    arp[13] = 0x06;
    core.receive(Time::ZERO, 1, &arp, Offload::default());
    core.receive(Time::ZERO, 0, &frame(1250, 7, 1), Offload { gso: true, ..Offload::default() });
    assert_eq!(core.counters.node_drops.get(DropReason::Malformed), 3);
    assert_eq!(core.counters.rx_non_ip, 2);
    assert_eq!(core.counters.rx_gso, 1);
    assert_eq!(core.next_wakeup(), None, "nothing queued");
}

#[test]
fn strict_priority_serves_the_high_class_first() {
    let sc = scenario("[defaults]\nqueue = { kind = \"priority\", classes = 2 }\n");
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    // Five best-effort frames, then one priority-0 frame, all at t = 0 from h1.
    let mut input: Vec<_> = (0..5).map(|_| (0u64, frame(1250, 7, 1))).collect();
    input.push((0, frame(1250, 0, 2)));
    let out = drive(&mut core, &input, &[]);
    let order: Vec<u8> = out.iter().map(|(_, _, f)| f[14 + 1] >> 2).collect();
    // The host port sends the first best-effort frame before the priority frame is offered
    // (all arrive at 0: frame 0 starts at once); from then on priority 0 goes first.
    assert_eq!(order, vec![0, 56, 0, 0, 0, 0]);
}

/// A 300-byte UDP frame of h1 and the same frame as the kernel hands it over with
/// CHECKSUM_PARTIAL: the UDP checksum replaced by the pseudo-header sum (also returned).
fn partial_checksum_frame() -> (Vec<u8>, Vec<u8>, u16) {
    let full = frame(300, 7, 5);
    let mut partial = full.clone();
    let ph = latnet_wire::checksum::pseudo_header_v4(
        "10.0.0.1".parse().unwrap(),
        "10.0.0.3".parse().unwrap(),
        17,
        (300 - 34) as u16,
    );
    partial[40..42].copy_from_slice(&ph.to_be_bytes());
    (full, partial, ph)
}

#[test]
fn partial_checksums_are_completed() {
    let (full, mut partial, ph) = partial_checksum_frame();
    assert!(complete_checksum(&mut partial, 34, 6, 300));
    let mut expect = full.clone();
    // The reference: compute the UDP checksum the ordinary way.
    expect[40..42].copy_from_slice(&[0, 0]);
    let sum = latnet_wire::checksum::combine(&[ph, latnet_wire::checksum::data(&expect[34..])]);
    let c = match !sum {
        0 => 0xffff,
        c => c,
    };
    assert_eq!(u16::from_be_bytes([partial[40], partial[41]]), c);
    assert!(!complete_checksum(&mut partial, 34, 6, 20), "out of range is refused");
}

#[test]
fn loss_follows_the_seeded_stream() {
    let sc = Scenario::from_str_named(
        "t.toml",
        &SC.replace("delay = \"1ms\"", "delay = \"1ms\"\nloss = 0.5"),
    )
    .unwrap();
    let run = || {
        let mut core = SwitchCore::new(&sc, "s1").unwrap();
        let input: Vec<_> = (0..200).map(|k| (k * 200_000, frame(1250, 7, 1))).collect();
        drive(&mut core, &input, &[]).into_iter().map(|(_, d, _)| d).collect::<Vec<_>>()
    };
    let a = run();
    assert!(a.len() > 60 && a.len() < 140, "about half survive: {}", a.len());
    assert_eq!(a, run(), "same seed, same losses");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Emulated instants do not depend on when the runner wakes up: calling `advance` late
    /// (or rarely) gives the same due times as calling it often.
    #[test]
    fn due_times_do_not_depend_on_wakeups(
        gaps in proptest::collection::vec(0u64..300_000, 1..40),
        sizes in proptest::collection::vec(64usize..1514, 40),
        ticks in proptest::collection::vec(0u64..20_000_000, 0..30),
    ) {
        let sc = scenario("");
        let mut t = 0;
        let input: Vec<_> = gaps.iter().zip(&sizes).map(|(g, &s)| { t += g; (t, frame(s, 7, 1)) }).collect();
        let a = drive(&mut SwitchCore::new(&sc, "s1").unwrap(), &input, &[]);
        let b = drive(&mut SwitchCore::new(&sc, "s1").unwrap(), &input, &ticks);
        let fine: Vec<u64> = (0..2000).map(|k| k * 10_000).collect();
        let c = drive(&mut SwitchCore::new(&sc, "s1").unwrap(), &input, &fine);
        let due = |v: &Vec<(usize, u64, Vec<u8>)>| v.iter().map(|x| x.1).collect::<Vec<_>>();
        proptest::prop_assert_eq!(due(&a), due(&b));
        proptest::prop_assert_eq!(due(&a), due(&c));
        proptest::prop_assert_eq!(a.len(), input.len());
        // Frames leave no earlier than a 100 Mbps link allows after the previous one.
        for w in a.windows(2) {
            let tx = Rate::from_mbps(100).tx_time(Bytes::new(w[1].2.len() as u64)).unwrap();
            proptest::prop_assert!(w[1].1 >= w[0].1 + tx.as_nanos());
        }
    }

    /// Any bytes on any interface: counted, never a panic.
    #[test]
    fn arbitrary_frames_never_panic(
        frames in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..200), 0..20),
        csum in proptest::option::of((0u16..300, 0u16..300)),
    ) {
        let sc = scenario("");
        let mut core = SwitchCore::new(&sc, "s1").unwrap();
        for (k, f) in frames.iter().enumerate() {
            let off = Offload { partial_csum: csum, ..Offload::default() };
            core.receive(Time::from_nanos(k as u64), k % 2, f, off);
        }
        core.advance(Time::MAX, &mut |_, _, _| {});
    }
}

/// A TCP segment h1 -> h2 (or back, `rev`) with `flags`, and a large-flow REGISTER option on
/// request.
fn tcp_frame(rev: bool, flags: latnet_wire::TcpFlags, register: bool) -> Vec<u8> {
    use latnet_wire::{LargeFlowMsg, LargeFlowOption, TcpRepr, TcpSeqNumber};
    let repr = TcpRepr {
        src_port: if rev { 5201 } else { 40_000 },
        dst_port: if rev { 40_000 } else { 5201 },
        seq_number: TcpSeqNumber(1),
        ack_number: TcpSeqNumber(1),
        flags,
        window_len: 1000,
        urgent_at: 0,
        options: &[],
    };
    let (a, b): (std::net::Ipv4Addr, std::net::Ipv4Addr) =
        ("10.0.0.1".parse().unwrap(), "10.0.0.3".parse().unwrap());
    let (src, dst) = if rev { (b, a) } else { (a, b) };
    let m = latnet_wire::EthernetAddress(port_mac(0));
    let mut f = Vec::new();
    latnet_wire::build_tcp_ipv4(&mut f, m, m, src, dst, 0, latnet_wire::Ecn::NotEct, 64, &repr, 0)
        .unwrap();
    if register {
        latnet_wire::set_large_flow_option(&mut f, &LargeFlowOption::new(LargeFlowMsg::Register))
            .unwrap();
    }
    f
}

#[test]
fn large_flows_are_counted_and_reported_as_in_the_simulator() {
    use latnet_wire::TcpFlags;
    let sc = Scenario::from_str_named(
        "t.toml",
        &SC.replace(
            "name = \"s1\"\nkind = \"switch\"",
            "name = \"s1\"\nkind = \"switch\"\nlarge_flows = { max_flows = 16 }",
        ),
    )
    .unwrap();
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    let now = Time::from_nanos(1_000);
    core.receive(now, 0, &tcp_frame(false, TcpFlags::SYN, true), Offload::default());
    // the SYN-ACK comes back from h2 and carries the count toward h1
    core.receive(
        now,
        1,
        &tcp_frame(true, TcpFlags::SYN | TcpFlags::ACK, false),
        Offload::default(),
    );
    let mut out = Vec::new();
    core.advance(Time::MAX, &mut |i, f, _| out.push((i, f.to_vec())));
    let st = core.large_flow_stats().expect("the switch has a counter");
    assert_eq!((st.registered, st.reports, st.malformed), (1, 1, 0));
    let back = out.iter().find(|(i, _)| *i == 0).expect("the SYN-ACK reached h1");
    let opt = latnet_wire::large_flow_option(&back.1).unwrap().expect("a report option");
    assert_eq!((opt.count, opt.rate_kbps), (1, 100_000));
    // a malformed option is a counted drop
    let mut bad = tcp_frame(false, TcpFlags::SYN, false);
    latnet_wire::option_edit::insert_ip_option(&mut bad, latnet_wire::large_flow::KINDS, &[7; 10])
        .unwrap();
    core.receive(now, 0, &bad, Offload::default());
    core.advance(Time::MAX, &mut |_, _, _| ());
    assert_eq!(core.large_flow_stats().unwrap().malformed, 1);
    assert_eq!(core.counters.node_drops.get(DropReason::MalformedOption), 1);
    // without `large_flows` nothing is counted
    let mut plain = SwitchCore::new(&scenario(""), "s1").unwrap();
    plain.receive(now, 0, &tcp_frame(false, TcpFlags::SYN, true), Offload::default());
    plain.advance(Time::MAX, &mut |_, _, _| ());
    assert!(plain.large_flow_stats().is_none());
}

#[test]
fn a_silent_large_flow_leaves_the_count_at_its_idle_timeout_without_another_packet() {
    use latnet_wire::TcpFlags;
    let sc = Scenario::from_str_named(
        "t.toml",
        &SC.replace(
            "name = \"s1\"\nkind = \"switch\"",
            "name = \"s1\"\nkind = \"switch\"\nlarge_flows = { idle_timeout = \"200ms\" }",
        ),
    )
    .unwrap();
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    let at = |ms: u64| Time::from_nanos(ms * 1_000_000);
    core.receive(at(100), 0, &tcp_frame(false, TcpFlags::SYN, true), Offload::default());
    core.advance(at(100), &mut |_, _, _| ());
    core.advance(at(150), &mut |_, _, _| ()); // the SYN left
                                              // the core asks to be woken when the connection expires, 200 ms after the switch had the
                                              // SYN (its whole frame, a few microseconds after it was received), and it leaves the
                                              // count then
    let wake = core.next_wakeup().unwrap();
    assert!(wake > at(300) && wake < at(300) + latnet_units::Duration::from_micros(10), "{wake:?}");
    core.advance(at(300), &mut |_, _, _| ());
    assert_eq!(core.large_flow_stats().unwrap().expired, 0);
    core.advance(wake, &mut |_, _, _| ());
    assert_eq!(core.large_flow_stats().unwrap().expired, 1);
    assert_eq!(core.next_wakeup(), None, "nothing left to wake for");
}

#[test]
fn tag_stack_forwarding_is_built_as_in_the_simulator() {
    let sc = tag_stack_scenario(SC);
    let core = SwitchCore::new(&sc, "s1").unwrap();
    assert!(matches!(core.fwd, Forwarder::TagStack { base: 10 }));
    // an untagged frame has no route under source routing
    let mut core = core;
    core.receive(Time::ZERO, 0, &frame(300, 0, 1), Offload::default());
    core.advance(Time::MAX, &mut |_, _, _| ());
    assert_eq!(core.counters.node_drops.get(DropReason::NoRoute), 1);
}

/// The source's tagger runs where the host's port is emulated: a tagged flow's frames leave
/// the host untagged, get the flow's stack pushed at its port, and the tag-stack switch pops
/// it and sends them on the port the tag names (here port 1, toward h2).
#[test]
fn host_tagger_pushes_the_flow_tag_stack() {
    let sc = tag_stack_scenario(&SC.replace("size = 1250", "size = 300\ntags = [10]"));
    let sent = host_frame(&sc.flows[0], 296);
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    let out = drive(&mut core, &[(0, sent.clone())], &[]);
    assert_eq!(core.counters.node_drops.get(DropReason::NoRoute), 0);
    assert_eq!(out.len(), 1, "{out:?}");
    let (iface, _, got) = &out[0];
    assert_eq!(*iface, 1);
    // the tag is gone again; the IP datagram is the one h1 sent
    assert_eq!(got.len(), 296);
    assert_eq!(got[14..], sent[14..]);
    // the host port carried the tagged frame: 300 bytes, as the scenario's size says
    assert_eq!(core.ports.iter().map(|p| p.tx_bytes).sum::<u64>(), 300 + 296);
}

/// A re-tagged flow: the source's tagger pushes the stack of the packet's creation instant,
/// read off its sequence number exactly as the simulator's sources number their packets (1
/// Mbit/s of 300 B frames: one every 2.4 ms, so with the re-tag at 5 ms packets 0-2 carry
/// `[10]` and packets 3 and later `[10, 99]`). Packets without latnet's stamp keep the first
/// stack.
#[test]
fn host_tagger_follows_the_retag_schedule_by_sequence_number() {
    let text = SC.replace(
        "size = 1250",
        "size = 300\ntags = [10]\nretag = [{ at = \"5ms\", tags = [10, 99] }]",
    );
    let sc = tag_stack_scenario(&text);
    // the host sends the frame without the tags its stack will add
    let sent = |seq: Option<u32>, tags: usize| {
        let mut fr = host_frame(&sc.flows[0], 300 - 4 * tags);
        if let Some(seq) = seq {
            crate::traffic::fill_payload(&mut fr[42..], 0, seq, u64::from(seq) * 2_400_000);
        }
        fr
    };
    let input = [
        (0, sent(Some(0), 1)),
        (2_400_000, sent(Some(2), 1)),
        (4_800_000, sent(Some(3), 2)),
        (7_200_000, sent(Some(4), 2)),
        (9_600_000, sent(None, 1)),
    ];
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    let out = drive(&mut core, &input, &[]);
    // s1 popped 10; the re-tagged packets still carry 99 toward h2, whose kernel would
    // discard them: they are counted as no-route drops (as the simulator's host counts them)
    let delivered: Vec<Option<u32>> = out
        .iter()
        .map(|(_, _, fr)| {
            assert_eq!(fr.len(), 296, "one tag popped, none left");
            crate::traffic::payload_stamp(&fr[42..]).map(|(seq, _)| seq)
        })
        .collect();
    assert_eq!(delivered, [Some(0), Some(2), None]);
    assert_eq!(core.counters.node_drops.get(DropReason::NoRoute), 2);
    // every frame was 300 bytes on the host's port, as the scenario's size says
    assert_eq!(core.ports.iter().find(|p| p.global == 0).map(|p| p.tx_bytes), Some(5 * 300));
}

/// A tag the kernel handed over beside the frame is put back before forwarding, and a partial
/// checksum's offsets (counted on the frame without it) move with it.
#[test]
fn a_stripped_vlan_tag_is_put_back() {
    let sc = tag_stack_scenario(SC);
    let (full, partial, ph) = partial_checksum_frame();
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    // tag 10: port 1 (toward h2), queue 0; it arrives on the h1 side beside the frame
    let off =
        Offload { partial_csum: Some((34, 6)), vlan: Some((0x8100, 10)), ..Offload::default() };
    core.receive(Time::ZERO, 0, &partial, off);
    let mut out = Vec::new();
    core.advance(Time::MAX, &mut |i, f, _| out.push((i, f.to_vec())));
    assert_eq!(core.counters.node_drops.get(DropReason::NoRoute), 0);
    assert_eq!(core.counters.csum_completed, 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1);
    // tag popped, checksum the one computed the ordinary way
    let sum = latnet_wire::checksum::combine(&[ph, latnet_wire::checksum::data(&full[34..])]);
    let c = match !sum {
        0 => 0xffff,
        c => c,
    };
    let mut expect = full.clone();
    expect[40..42].copy_from_slice(&c.to_be_bytes());
    assert_eq!(out[0].1[12..], expect[12..]);
}

/// `advance_owned` (buffers handed out and given back later, as the runner does after
/// `sendmmsg`) emits exactly what `advance` emits: same frames, interfaces and instants, also
/// when reused buffers come back while other frames are queued, and under a priority queue
/// with frames of several sizes (the serialization-time memo sees sizes change).
#[test]
fn owned_buffers_give_the_same_output_as_borrowed_ones() {
    let sc = scenario("[defaults]\nqueue = { kind = \"priority\", classes = 2 }\n");
    let mut input = Vec::new();
    for k in 0..60u64 {
        let len = [1250, 60, 600, 1250][(k % 4) as usize];
        input.push((k * 37_000, frame(len, if k % 3 == 0 { 0 } else { 7 }, 10_000 + k as u16)));
    }
    let ticks: Vec<u64> = (0..400).map(|k| k * 13_000).collect();
    let mut a = SwitchCore::new(&sc, "s1").unwrap();
    let expect = drive(&mut a, &input, &ticks);
    let mut b = SwitchCore::new(&sc, "s1").unwrap();
    let mut got = Vec::new();
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut events: Vec<(u64, Option<usize>)> =
        input.iter().enumerate().map(|(i, (t, _))| (*t, Some(i))).collect();
    events.extend(ticks.iter().map(|&t| (t, None)));
    events.sort();
    for (t, inp) in events.into_iter().chain([(u64::MAX, None)]) {
        let now = Time::from_nanos(t);
        b.advance_owned(now, &mut |i, f, d| {
            got.push((i, d.as_nanos(), f.clone()));
            held.push(f);
        });
        // Give buffers back only every few steps, as a batch would.
        if held.len() >= 3 {
            for f in held.drain(..) {
                b.recycle_buffer(f);
            }
        }
        if let Some(k) = inp {
            b.receive(now, 0, &input[k].1, Offload::default());
        }
        b.advance_owned(now, &mut |i, f, d| {
            got.push((i, d.as_nanos(), f.clone()));
            held.push(f);
        });
    }
    assert_eq!(expect.len(), 60);
    assert_eq!(got, expect);
}

/// `carry = "timestamp"`: the switch reads a sender's stamp on the senders' clock, whose reading
/// at the switch's time zero is the core's clock origin. A frame stamped 200 us before that
/// instant has waited 200 us more, so it is released 200 us earlier; the origin itself moves
/// nothing when stamps move with it.
#[test]
fn sender_timestamps_are_read_on_the_senders_clock() {
    let slo = "traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n\
               slo = { lower = \"3ms\", carry = \"timestamp\" }\n\
               [defaults]\nqueue = { kind = \"lbf\" }\n[lbf]\nbudget = \"equal\"\n";
    let sc = Scenario::from_str_named(
        "t.toml",
        &SC.replace("traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n", slo),
    )
    .unwrap();
    let (template, block) = lbf_template(&sc, &sc.flows[0]).unwrap();
    let release = |origin: u64, stamp: u64| {
        let mut f = template.clone();
        f[0..6].copy_from_slice(&port_mac(1));
        f[6..12].copy_from_slice(&port_mac(0));
        latnet_wire::lbf::block_mut(&mut f, block).unwrap().set_value_ns(stamp);
        let mut core = SwitchCore::new_at(&sc, "s1", origin).unwrap();
        let out = drive(&mut core, &[(0, f)], &[]);
        assert_eq!(out.len(), 1, "{out:?}");
        out[0].1
    };
    let origin = 5_000_000_000;
    let on_time = release(0, 0);
    assert!(on_time >= 3_000_000, "held to the 3 ms lower bound: {on_time}");
    assert_eq!(release(origin, origin), on_time);
    assert_eq!(release(origin, origin - 200_000), on_time - 200_000);
}

#[test]
fn captures_hold_what_each_port_transmits_stamped_from_the_experiments_time_zero() {
    let sc = Scenario::from_str_named(
        "t.toml",
        &SC.replace("delay = \"1ms\"", "delay = \"1ms\"\nloss = 0.5"),
    )
    .unwrap();
    // the switch started 300 us before the experiment's time zero
    let mut core = SwitchCore::new_timed(&sc, "s1", 0, Duration::from_micros(300)).unwrap();
    let names = core.enable_capture(&sc, -300_000);
    // ports: s1's egress toward h1, h1's (emulated here), s1's toward h2, h2's
    assert_eq!(names, ["s1-h1.pcap", "h1-s1.pcap", "s1-h2.pcap", "h2-s1.pcap"]);
    let input: Vec<_> = (0..50).map(|k| (1_000_000 + k * 200_000, frame(1250, 7, 1))).collect();
    let out = drive(&mut core, &input, &[]);
    assert!(out.len() > 10 && out.len() < 40, "about half survive the lossy link: {}", out.len());
    let records = |core: &mut SwitchCore, i: usize| {
        let mut file = latnet_sim::pcap::new_capture();
        file.extend(core.take_capture(i, 1).unwrap_or_default());
        latnet_sim::pcap::records(&file)
            .unwrap()
            .into_iter()
            .map(|r| (r.at_ns, r.wire_len, r.bytes.to_vec()))
            .collect::<Vec<_>>()
    };
    assert!(records(&mut core, 0).is_empty(), "nothing went back to h1");
    assert!(records(&mut core, 3).is_empty(), "nor came from h2");
    // the host's port: every frame, stamped as it arrived (its transmitter is idle)
    let from_host = records(&mut core, 1);
    assert_eq!(from_host.len(), 50);
    for (k, (at, len, bytes)) in from_host.iter().enumerate() {
        assert_eq!(*at, 1_000_000 + k as u64 * 200_000 - 300_000, "frame {k}");
        assert_eq!((*len, bytes), (1250, &input[k].1));
    }
    // the lossy egress: exactly the frames that were delivered, stamped at the start of their
    // transmission (100 us of serialization and 1 ms of delay before they are due), with the
    // bytes delivered (MACs rewritten, TTL decremented)
    let egress = records(&mut core, 2);
    assert_eq!(egress.len(), out.len(), "lost frames are not in the capture");
    for ((at, len, bytes), (iface, due, f)) in egress.iter().zip(&out) {
        assert_eq!(*iface, 1);
        assert_eq!(*at, due - 1_100_000 - 300_000);
        assert_eq!((*len as usize, bytes), (f.len(), f));
    }
    assert_eq!(core.take_capture(2, 1), None, "taken");
    // a reused buffer is emptied before it takes a port's records
    drive(&mut core, &[(50_000_000, frame(1250, 7, 1))], &[]);
    let mut spare = vec![0xee; 7];
    assert!(!core.swap_capture(1, 1 << 20, &mut spare), "less than asked for");
    assert!(core.swap_capture(1, 1, &mut spare));
    let mut file = latnet_sim::pcap::new_capture();
    file.extend(&spare);
    let r = latnet_sim::pcap::records(&file).unwrap();
    assert_eq!((r.len(), r[0].at_ns), (1, 50_000_000 - 300_000));
}

#[test]
fn queue_series_equals_the_simulators_for_the_same_arrivals() {
    // h1 sends Poisson at 9 Mbit/s into s1's 10 Mbit/s link toward h2: s1's queue comes and
    // goes. The simulator's run gives the send instants and its own queue series; the core,
    // fed the same frames at the same instants, must sample the same queues.
    let text = SC
        .replace("delay = \"1ms\"", "delay = \"1ms\"\nrate = \"10Mbps\"")
        .replace("kind = \"cbr\", rate = \"1Mbps\"", "kind = \"poisson\", rate = \"9Mbps\"")
        .replace(
            "duration = \"1s\"",
            "duration = \"300ms\"\n[output]\npackets = true\nqueues = \"5ms\"",
        );
    let sc = Scenario::from_str_named("t.toml", &text).unwrap();
    let sim = latnet_sim::Simulator::new(sc.clone()).run();
    let created: Vec<u64> =
        sim.log.as_ref().unwrap().packets.iter().map(|p| p.created_ns).collect();
    assert!(created.len() > 200, "{} packets", created.len());
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    core.enable_queue_series(sc.output.queues.unwrap(), sc.sim.duration + sc.sim.drain);
    let mut input: Vec<_> = created.iter().map(|&t| (t, frame(1250, 7, 10_000))).collect();
    input.sort_by_key(|(t, _)| *t);
    drive(&mut core, &input, &[]);
    let mut got = core.take_queue_series();
    got.sort_by_key(|r| (r.t_ns, r.port));
    let mut want = sim.queue_series.clone();
    want.sort_by_key(|r| (r.t_ns, r.port));
    assert!(want.iter().any(|r| r.max_packets >= 3), "the queue builds");
    assert_eq!(got.len(), want.len());
    if let Some(k) = (0..got.len()).find(|&k| got[k] != want[k]) {
        panic!("row {k}: emulated {:?}, simulated {:?}", got[k], want[k]);
    }
}

/// A frame of the scenario's first flow (its LBF template) from h1, carrying the latnet
/// payload of packet `seq`.
fn slo_frame(sc: &Scenario, seq: u32) -> Vec<u8> {
    let (mut f, _) = lbf_template(sc, &sc.flows[0]).unwrap();
    f[0..6].copy_from_slice(&port_mac(1));
    f[6..12].copy_from_slice(&port_mac(0));
    let skip = crate::traffic::payload_prefix(sc, &sc.flows[0]).unwrap().0.len();
    f.resize(sc.flows[0].size as usize, 0);
    crate::traffic::fill_payload(&mut f[42 + skip..], 0, seq, 0);
    f
}

/// `upper = "mark"` with an upper bound below the path's delay: s1 marks every packet and
/// reports it as the simulator's forwarder does, with the packet's sequence number read from
/// its payload and the instant counted from the experiment's time zero (the switch started
/// `run_start` before it). The counters are the forwarder's; notification records come only
/// with the final statistics.
#[test]
fn lbf_marks_are_reported_with_sequence_numbers_from_the_experiments_time_zero() {
    let with = |extra: &str| {
        let slo = format!(
            "traffic = {{ kind = \"cbr\", rate = \"1Mbps\" }}\n\
             slo = {{ lower = \"0us\", upper = \"500us\" }}\n{extra}"
        );
        let text = SC.replace("traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n", &slo);
        Scenario::from_str_named("t.toml", &text).unwrap()
    };
    let sc = with("[defaults]\nqueue = { kind = \"lbf\" }\n[lbf]\nupper = \"mark\"\n");
    let marks = |run_start: Duration| {
        let mut core = SwitchCore::new_timed(&sc, "s1", 0, run_start).unwrap();
        let input = [(0, slo_frame(&sc, 7)), (500_000, slo_frame(&sc, 8))];
        let out = drive(&mut core, &input, &[]);
        assert_eq!(out.len(), 2, "marked packets are forwarded");
        assert!(core.lbf_stats(false).unwrap().notifications.is_empty());
        core.lbf_stats(true).unwrap()
    };
    let (late, early) = (marks(Duration::ZERO), marks(Duration::from_micros(50)));
    let c = late.counters.clone().unwrap();
    assert_eq!((c.lbf_packets, c.marked_late, c.early_drops), (2, 2, 0));
    assert_eq!(late.notifications_total, 2);
    let seqs: Vec<_> = late.notifications.iter().map(|n| n.seq).collect();
    assert_eq!(seqs, [7, 8]);
    assert!(late.notifications.iter().all(|n| n.node == "s1" && n.upper_ns == 500_000));
    for (a, b) in late.notifications.iter().zip(&early.notifications) {
        assert_eq!(a.time_ns, b.time_ns + 50_000);
    }
    // a switch that only forwards by FIB reports no forwarder counters
    let core = SwitchCore::new(&with(""), "s1").unwrap();
    assert!(core.lbf_stats(true).unwrap().counters.is_none());
}

/// The scenario's first flow's per-hop latency in `core`'s statistics: (global port, count,
/// min, max) per hop.
fn first_flow_hops(sc: &Scenario, core: &SwitchCore) -> Vec<(usize, u64, u64, u64)> {
    let st = crate::stats::SwitchStats::collect(sc, core, Default::default(), true);
    st.flows[0]
        .hops
        .iter()
        .map(|h| (h.port, h.latency_ns.count, h.latency_ns.min, h.latency_ns.max))
        .collect()
}

/// Per-hop latency on real packets: from the sender's stamp (on the senders' clock, which
/// reads `origin` when the switch's reads zero) to the emulated start of each transmission,
/// at the host's emulated NIC (hop 0) and at s1 (hop 1); frames without latnet's payload are
/// not measured.
#[test]
fn hop_latency_runs_from_the_senders_stamp_to_each_start_of_transmission() {
    let sc = scenario("");
    let origin = 7_000_000_000;
    let mut core = SwitchCore::new_at(&sc, "s1", origin).unwrap();
    let stamped = |seq: u32, send_ns: u64| {
        let mut f = frame(1250, 7, 10_000);
        crate::traffic::fill_payload(&mut f[42..], 0, seq, send_ns);
        f
    };
    // the senders' stacks took 30 and 50 us; the third frame is not latnet's payload
    let input = [
        (30_000, stamped(0, origin)),
        (1_050_000, stamped(1, origin + 1_000_000)),
        (2_000_000, frame(1250, 7, 10_000)),
    ];
    assert_eq!(drive(&mut core, &input, &[]).len(), 3);
    let hops = first_flow_hops(&sc, &core);
    // h1's NIC (global port 0) starts each frame on arrival; s1's port toward h2 (global 2)
    // after its 100 us serialization on h1's link
    assert_eq!(hops, [(0, 2, 30_000, 50_000), (2, 2, 130_000, 150_000)]);
}

/// A host's emulated NIC cannot start a frame before its sender stamped it: a frame whose
/// receive instant converts to 10 us before its stamp (the clocks' offset is read to within a
/// few us, more while the machine stalls) is measured at the stamp, waiting 0, and still gets
/// its first hop record; s1's hop runs from the stamp as before.
#[test]
fn a_hosts_nic_measures_a_frame_received_before_its_stamp_at_the_stamp() {
    let sc = scenario("");
    let origin = 7_000_000_000;
    let mut core = SwitchCore::new_at(&sc, "s1", origin).unwrap();
    core.enable_hop_records(0);
    let mut f = frame(1250, 7, 10_000);
    crate::traffic::fill_payload(&mut f[42..], 0, 3, origin + 40_000);
    assert_eq!(drive(&mut core, &[(30_000, f)], &[]).len(), 1);
    let hops = first_flow_hops(&sc, &core);
    // serialization still starts on arrival: s1 starts 100 us after 30 us, 90 us after the stamp
    assert_eq!(hops, [(0, 1, 0, 0), (2, 1, 90_000, 90_000)]);
    let mut rows = Vec::new();
    assert!(core.swap_hop_records(0, &mut rows));
    let names: Vec<String> = sc.flows.iter().map(|f| f.name.clone()).collect();
    let nodes: Vec<String> = sc.nodes.iter().map(|n| n.name.clone()).collect();
    let (mut csv, mut drops) = (Vec::new(), Vec::new());
    hop_records_csv(&rows, &names, &nodes, &mut csv, &mut drops);
    let name = &names[0];
    assert_eq!(
        String::from_utf8(csv).unwrap(),
        format!("{name},3,0,7,40000,40000,40000\n{name},3,2,7,130000,130000,130000\n")
    );
}

/// Per-packet hop records: one row per transmission of a stamped frame of a scenario flow, at
/// the host's emulated NIC and at s1, instants shifted by the offset (the experiment's time
/// zero 1 ms after the switch's); the frame without latnet's payload has none. A stamped frame
/// the full queue of h1's NIC refuses is a drop record: reason, creation and drop instants.
#[test]
fn hop_records_are_one_row_per_transmission_of_a_stamped_frame() {
    let sc = scenario("[defaults]\nqueue = { kind = \"fifo\", limit_packets = 1 }\n");
    let origin = 7_000_000_000;
    let mut core = SwitchCore::new_at(&sc, "s1", origin).unwrap();
    core.enable_hop_records(-1_000_000);
    // (priority 3, from the frame's DSCP, in every record)
    let stamped = |seq: u32, send_ns: u64| {
        let mut f = frame(1250, 3, 10_000);
        crate::traffic::fill_payload(&mut f[42..], 0, seq, send_ns);
        f
    };
    // seq 5 waits behind seq 4's 100 us at h1's NIC; seq 6 finds the one place taken
    let input = [
        (1_030_000, stamped(4, origin + 1_000_000)),
        (1_030_000, stamped(5, origin + 1_010_000)),
        (1_030_000, stamped(6, origin + 1_020_000)),
        (1_500_000, frame(1250, 7, 10_000)),
        (2_050_000, stamped(7, origin + 2_000_000)),
    ];
    assert_eq!(drive(&mut core, &input, &[]).len(), 4);
    let mut rows = Vec::new();
    assert!(core.swap_hop_records(1, &mut rows));
    assert_eq!(rows.len(), 7 * HOP_RECORD_BYTES);
    let names: Vec<String> = sc.flows.iter().map(|f| f.name.clone()).collect();
    let (mut csv, mut drops) = (Vec::new(), Vec::new());
    // (a partial record at the end is left out)
    rows.push(0);
    let nodes: Vec<String> = sc.nodes.iter().map(|n| n.name.clone()).collect();
    hop_records_csv(&rows, &names, &nodes, &mut csv, &mut drops);
    let name = &names[0];
    let want = format!(
        "{name},4,0,3,30000,30000,30000\n{name},4,2,3,130000,130000,130000\n\
         {name},5,0,3,30000,30000,130000\n{name},5,2,3,230000,230000,230000\n\
         {name},7,0,3,1050000,1050000,1050000\n{name},7,2,3,1150000,1150000,1150000\n"
    );
    assert_eq!(String::from_utf8(csv).unwrap(), want);
    assert_eq!(
        String::from_utf8(drops).unwrap(),
        format!("{name},6,queue-full-packets,h1,20000,30000\n")
    );
    // taken: nothing left, and nothing below the threshold
    let mut spare = Vec::new();
    assert!(!core.swap_hop_records(0, &mut spare));
}

mod like_the_simulator;
