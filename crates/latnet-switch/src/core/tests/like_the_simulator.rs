//! The core beside the simulator where the two must agree: a cut-through switch waits for a
//! frame's last bit toward a faster egress, a port's busy time counts only what lies within
//! the run, and parallel links' captures get the simulator's names.

use super::*;
use proptest::prelude::*;

/// h1 - s1 - ... - s(n-1) - h2 with one link per `(rate, delay)`, under `switching`, and one
/// frame of `size` bytes from h1 to h2 (the simulator's cut-through tests' chain).
fn chain(switching: &str, links: &[(&str, &str)], size: u32) -> Scenario {
    let mut s = format!(
        "[sim]\nduration = \"10ms\"\ndrain = \"1s\"\nswitching = \"{switching}\"\n\
         [output]\npackets = true\n\
         [[nodes]]\nname = \"h1\"\nkind = \"host\"\n[[nodes]]\nname = \"h2\"\nkind = \"host\"\n"
    );
    let names: Vec<String> = (0..=links.len())
        .map(|i| match i {
            0 => "h1".to_owned(),
            i if i == links.len() => "h2".to_owned(),
            i => format!("s{i}"),
        })
        .collect();
    for n in &names[1..links.len()] {
        s += &format!("[[nodes]]\nname = \"{n}\"\nkind = \"switch\"\n");
    }
    for (i, (rate, delay)) in links.iter().enumerate() {
        s += &format!(
            "[[links]]\na = \"{}\"\nb = \"{}\"\nrate = \"{rate}\"\ndelay = \"{delay}\"\n",
            names[i],
            names[i + 1]
        );
    }
    s += &format!(
        "[[flows]]\nsrc = \"h1\"\ndst = \"h2\"\nsize = {size}\ncount = 1\n\
         traffic = {{ kind = \"cbr\", rate = \"1Mbps\" }}\n"
    );
    Scenario::from_str_named("chain.toml", &s).unwrap()
}

/// Flow 0's frame as its source host sends it: `len` bytes, zero payload.
fn flow_frame(sc: &Scenario, len: usize) -> Vec<u8> {
    let f = &sc.flows[0];
    let mut fr = Vec::new();
    latnet_wire::build_udp_ipv4(
        &mut fr,
        latnet_wire::EthernetAddress(port_mac(0)),
        latnet_wire::EthernetAddress(port_mac(1)),
        sc.nodes[f.src].address,
        sc.nodes[f.dst].address,
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

/// The start of every transmission port `i` of `core` captured.
fn starts(core: &mut SwitchCore, i: usize) -> Vec<u64> {
    let mut file = latnet_sim::pcap::new_capture();
    file.extend(core.take_capture(i, 1).unwrap_or_default());
    latnet_sim::pcap::records(&file).unwrap().iter().map(|r| r.at_ns).collect()
}

/// `input` (frames from h1, at their instants) through the chain's switches, each a core fed
/// on the interface toward h1 what the previous one sent toward h2 (frames reach the next
/// switch at their first bit under cut-through): when each hop started transmitting, in
/// order (h1's port, which s1 emulates, then each switch's port onward), and when h2 has
/// each frame whole, in the order they reach it.
fn through_cores(sc: &Scenario, mut input: Vec<(u64, Vec<u8>)>) -> (Vec<u64>, Vec<u64>) {
    let mut started = Vec::new();
    for n in sc.nodes.iter().filter(|n| n.kind == NodeKind::Switch) {
        let mut core = SwitchCore::new(sc, &n.name).unwrap();
        core.enable_capture(sc, 0);
        let out = drive(&mut core, &input, &[]);
        assert!(out.iter().all(|(iface, _, _)| *iface == 1), "toward h2");
        for i in 0..core.ports.len() {
            started.extend(starts(&mut core, i));
        }
        input = out.into_iter().map(|(_, due, f)| (due, f)).collect();
    }
    started.sort_unstable();
    (started, input.into_iter().map(|(due, _)| due).collect())
}

/// The simulator's lone frame: the instant each hop started transmitting it, and its latency
/// (created at 0: when h2 has it whole).
fn simulated(sc: &Scenario) -> (Vec<u64>, u64) {
    let r = latnet_sim::Simulator::new(sc.clone()).run();
    let hops = r.log.as_ref().expect("packets").hops.iter().map(|h| h.start_tx_ns).collect();
    (hops, r.flows[0].latency_ns.expect("received").max)
}

#[test]
fn a_faster_egress_waits_for_the_last_bit() {
    // 1000 B: 800 us at 10 Mbit/s into s1, 8 us at 1 Gbit/s out of it. s1 has the first bit
    // at 1 ms and the last at 1.8 ms; it starts sending at 1.792 ms, to finish as the last bit
    // arrives; h2 has the whole frame 1 ms later (it had it at 2.008 ms: faster than the
    // 10 Mbit/s link it crossed allows)
    let sc = chain("cut-through", &[("10Mbps", "1ms"), ("1Gbps", "1ms")], 1000);
    let got = through_cores(&sc, vec![(0, flow_frame(&sc, 1000))]);
    assert_eq!(got, (vec![0, 1_792_000], vec![2_800_000]));
    let (hops, latency) = simulated(&sc);
    assert_eq!((got.0, got.1[0]), (hops, latency));
    // the same when the slow link ends at a switch that received the frame from another
    // switch (at its first bit, as s1 sends it under cut-through): s2 waits
    let links = [("1Gbps", "0s"), ("10Mbps", "1ms"), ("1Gbps", "1ms")];
    let sc = chain("cut-through", &links, 1000);
    let got = through_cores(&sc, vec![(0, flow_frame(&sc, 1000))]);
    assert_eq!(got, (vec![0, 0, 1_792_000], vec![2_800_000]));
    let (hops, latency) = simulated(&sc);
    assert_eq!((got.0, got.1[0]), (hops, latency));
}

#[test]
fn equal_rates_and_a_slower_egress_start_at_the_first_bit() {
    let links = [("100Mbps", "1ms"), ("100Mbps", "1ms"), ("100Mbps", "1ms")];
    let sc = chain("cut-through", &links, 1000);
    let got = through_cores(&sc, vec![(0, flow_frame(&sc, 1000))]);
    assert_eq!(got, (vec![0, 1_000_000, 2_000_000], vec![3_080_000]));
    // a slower egress cannot run out of bits
    let sc = chain("cut-through", &[("1Gbps", "1ms"), ("10Mbps", "1ms")], 1000);
    let got = through_cores(&sc, vec![(0, flow_frame(&sc, 1000))]);
    assert_eq!(got, (vec![0, 1_000_000], vec![2_800_000]));
}

/// A Poisson flow at 9 Mbit/s over a 10 Mbit/s link into s1, whose egress toward h2 runs at
/// 100 Mbit/s, under cut-through: fed the simulator's send instants, the core has every frame
/// at h2 when the simulator does, whenever the runner wakes it up.
#[test]
fn cut_through_frames_reach_the_host_when_the_simulator_has_them_there() {
    let text = SC
        .replace("duration = \"1s\"", "duration = \"200ms\"\nswitching = \"cut-through\"")
        .replace(
            "a = \"h1\"\nb = \"s1\"",
            "a = \"h1\"\nb = \"s1\"\nrate = \"10Mbps\"\ndelay = \"50us\"",
        )
        .replace("kind = \"cbr\", rate = \"1Mbps\"", "kind = \"poisson\", rate = \"9Mbps\"")
        + "[output]\npackets = true\n";
    let sc = Scenario::from_str_named("t.toml", &text).unwrap();
    let sim = latnet_sim::Simulator::new(sc.clone()).run();
    let log = sim.log.as_ref().unwrap();
    assert!(log.packets.len() > 100, "{} packets", log.packets.len());
    // (a frame the simulator drops, the core drops too)
    let mut want: Vec<u64> =
        log.packets.iter().filter(|p| p.latency_ns.is_some()).map(|p| p.end_ns).collect();
    assert!(want.len() > 100, "{} received", want.len());
    want.sort_unstable();
    let input: Vec<_> =
        log.packets.iter().map(|p| (p.created_ns, frame(1250, 7, 10_000))).collect();
    let ticks: Vec<u64> = (0..4000).map(|k| k * 50_000).collect();
    for ticks in [&[][..], &ticks] {
        let mut core = SwitchCore::new(&sc, "s1").unwrap();
        let mut got: Vec<u64> = drive(&mut core, &input, ticks).iter().map(|o| o.1).collect();
        got.sort_unstable();
        assert_eq!(got, want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// A lone frame through a chain of cut-through switches, each its own core: every hop
    /// starts it when the simulator does (at the first bit, or later so as to finish with the
    /// last bit), and h2 has it whole when the simulator's does.
    #[test]
    fn a_lone_frame_crosses_the_cores_as_the_simulator(
        hops in proptest::collection::vec((0usize..4, 0usize..3), 2..5),
        size in 64u32..1514,
    ) {
        let rates = ["10Mbps", "100Mbps", "1Gbps", "25Gbps"];
        let delays = ["0s", "10us", "1ms"];
        let links: Vec<(&str, &str)> = hops.iter().map(|&(r, d)| (rates[r], delays[d])).collect();
        let sc = chain("cut-through", &links, size);
        let (started, due) = through_cores(&sc, vec![(0, flow_frame(&sc, size as usize))]);
        let (hops, latency) = simulated(&sc);
        prop_assert_eq!(started, hops);
        prop_assert_eq!(due, vec![latency]);
    }
}

/// h1 -100Mbps- s1 -1Mbps,1ms- h2, a CBR flow of 1250-byte frames at 5 Mbit/s for 100 ms and
/// no drain: s1's port toward h2 (10 ms a frame) is busy from the first frame's arrival to
/// the end of the run and beyond. Fed the simulator's send instants, each port the core
/// emulates was busy within the run exactly as long as the simulator's (its utilisation
/// times the run), whatever it sends after the end.
#[test]
fn busy_time_counts_only_what_lies_within_the_run_as_in_the_simulator() {
    let text = SC
        .replace("duration = \"1s\"", "duration = \"100ms\"\ndrain = \"0s\"")
        .replace("delay = \"1ms\"", "delay = \"1ms\"\nrate = \"1Mbps\"")
        .replace("rate = \"1Mbps\" }", "rate = \"5Mbps\" }")
        + "[output]\npackets = true\n";
    let sc = Scenario::from_str_named("t.toml", &text).unwrap();
    let sim = latnet_sim::Simulator::new(sc.clone()).run();
    let end = sim.end_ns as f64;
    assert_eq!(end, 100e6);
    let input: Vec<_> = sim
        .log
        .as_ref()
        .unwrap()
        .packets
        .iter()
        .map(|p| (p.created_ns, frame(1250, 7, 10_000)))
        .collect();
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    assert_eq!(drive(&mut core, &input, &[]).len(), input.len(), "all sent, after the end too");
    for p in &core.ports {
        let u = p.busy_time.as_nanos() as f64 / end;
        let want = sim.ports[p.global].utilisation;
        assert!((u - want).abs() < 1e-12, "port {}: busy {u} of the run, want {want}", p.global);
        assert!((0.0..=1.0).contains(&u));
    }
    let toward_h2 = core.ports.iter().find(|p| p.global == 2).unwrap();
    assert!(toward_h2.busy_time > Duration::from_millis(95), "{:?}", toward_h2.busy_time);
}

/// The run is the experiment's: from its time zero (here 300 us after the switch's) for the
/// scenario's duration and drain (1 ms). A transmission counts only where it overlaps that.
#[test]
fn busy_time_before_the_time_zero_or_after_the_end_does_not_count() {
    let text = SC
        .replace("duration = \"1s\"", "duration = \"800us\"\ndrain = \"200us\"")
        .replace("delay = \"1ms\"", "delay = \"1ms\"\nrate = \"10Mbps\"");
    let sc = Scenario::from_str_named("t.toml", &text).unwrap();
    let mut core = SwitchCore::new_timed(&sc, "s1", 0, Duration::from_micros(300)).unwrap();
    // two frames at once on the switch's clock: h1's port sends them in [0, 100 us] and
    // [100, 200 us], before the run; s1's port toward h2 (1 ms each) in [100 us, 1.1 ms] and
    // [1.1, 2.1 ms], of which [300 us, 1.3 ms] is the run
    let input = [(0, frame(1250, 7, 1)), (0, frame(1250, 7, 1))];
    assert_eq!(drive(&mut core, &input, &[]).len(), 2);
    let busy: Vec<_> = core.ports.iter().map(|p| (p.global, p.busy_time.as_nanos())).collect();
    assert_eq!(busy, [(1, 0), (0, 0), (2, 800_000 + 200_000), (3, 0)]);
    let tx: Vec<_> = core.ports.iter().map(|p| p.tx_packets).collect();
    assert_eq!(tx, [0, 2, 2, 0], "every frame is still sent");
}

/// Two links between h1 and s1 and two between s1 and s2: each switch names the ports it
/// emulates as the simulator names their captures (`h1-s1.pcap`, then `h1-s1.1.pcap` for the
/// second link), so that no two files of the run share a name.
#[test]
fn parallel_links_captures_are_named_as_the_simulator_names_them() {
    let text = "[sim]\nduration = \"10ms\"\n[output]\npcap = true\n\
        [defaults.link]\nrate = \"100Mbps\"\n\
        [[nodes]]\nname = \"h1\"\nkind = \"host\"\n[[nodes]]\nname = \"s1\"\nkind = \"switch\"\n\
        [[nodes]]\nname = \"s2\"\nkind = \"switch\"\n[[nodes]]\nname = \"h2\"\nkind = \"host\"\n\
        [[links]]\na = \"h1\"\nb = \"s1\"\n[[links]]\na = \"s1\"\nb = \"s2\"\n\
        [[links]]\na = \"s2\"\nb = \"h2\"\n[[links]]\na = \"s1\"\nb = \"s2\"\n\
        [[links]]\na = \"h1\"\nb = \"s1\"\n\
        [[flows]]\nsrc = \"h1\"\ndst = \"h2\"\nsize = 500\ncount = 1\n\
        traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n";
    let sc = Scenario::from_str_named("t.toml", text).unwrap();
    let sim = latnet_sim::Simulator::new(sc.clone()).run();
    let want: Vec<&str> = sim.pcaps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!((want[6], want[8]), ("s1-s2.1.pcap", "h1-s1.1.pcap"), "{want:?}");
    let mut named = vec![None; want.len()];
    for s in ["s1", "s2"] {
        let mut core = SwitchCore::new(&sc, s).unwrap();
        let names = core.enable_capture(&sc, 0);
        assert_eq!(names.len(), core.ports.len());
        for (p, name) in core.ports.iter().zip(names) {
            assert_eq!(name, want[p.global], "{s}: port {}", p.global);
            assert!(named[p.global].replace(name).is_none(), "one switch emulates a port");
        }
    }
    assert!(named.iter().all(Option::is_some), "every port is emulated by a switch");
}
