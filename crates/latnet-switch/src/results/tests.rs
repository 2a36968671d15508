//! Emulated runs' files merged into the simulator's results, on made-up logs.

use super::*;
use crate::core::{lbf_template, SwitchCore};
use crate::stats::RunnerCounters;
use latnet_units::Time;

const SC: &str = "[sim]\nduration = \"1s\"\n[defaults.link]\nrate = \"100Mbps\"\n\
    [defaults]\nqueue = { kind = \"lbf\" }\n[lbf]\nupper = \"mark\"\n\
    [[nodes]]\nname = \"h1\"\nkind = \"host\"\n[[nodes]]\nname = \"s1\"\nkind = \"switch\"\n\
    [[nodes]]\nname = \"h2\"\nkind = \"host\"\n\
    [[links]]\na = \"h1\"\nb = \"s1\"\n[[links]]\na = \"s1\"\nb = \"h2\"\ndelay = \"1ms\"\n\
    [[flows]]\nname = \"f\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 1250\n\
    traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n\
    slo = { lower = \"100us\", upper = \"500us\" }\n";

/// The LBF section of an emulated run: the receiver's log classified against the flow's
/// bounds with the late flag each packet arrived with, the switch's forwarder counters and
/// notification records (a 500 us upper bound behind a 1 ms link: s1 marks what it sees),
/// and drops by LBF reason per switch from the switch's flow counters.
#[test]
fn an_emulated_run_reports_lbf_as_the_simulator_does() {
    let sc = Scenario::from_str_named("t.toml", SC).unwrap();
    let dir = std::env::temp_dir().join(format!("latnet-emu-lbf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut core = SwitchCore::new(&sc, "s1").unwrap();
    let (mut frame, _) = lbf_template(&sc, &sc.flows[0]).unwrap();
    frame.resize(1250, 0);
    frame[0..6].copy_from_slice(&crate::plan::port_mac(1));
    frame[6..12].copy_from_slice(&crate::plan::port_mac(0));
    let skip = crate::traffic::payload_prefix(&sc, &sc.flows[0]).unwrap().0.len();
    for seq in 0..3 {
        crate::traffic::fill_payload(&mut frame[42 + skip..], 0, seq, 0);
        let t = Time::from_nanos(u64::from(seq) * 1_000_000);
        core.receive(t, 0, &frame, crate::core::Offload::default());
        core.advance(t + latnet_units::Duration::from_micros(500), &mut |_, _, _| {});
    }
    let mut st = SwitchStats::collect(&sc, &core, RunnerCounters::default(), true);
    st.flows[0].drops.insert("hopeless-early-drop".to_owned(), 2);
    st.write(&dir.join("switch-s1.json")).unwrap();
    std::fs::write(
        dir.join("send-f.json"),
        r#"{"flow":"f","sent":7,"send_errors":0,"late_max_ns":0}"#,
    )
    .unwrap();
    // early, on time, late (marked), late (unmarked), on time but marked
    let log = "seq,send_ns,recv_ns,intact,late\n0,1000,51000,1,0\n1,1000,301000,1,0\n\
               2,1000,2001000,1,1\n3,1000,2001000,1,0\n4,1000,301000,1,1\n";
    std::fs::write(dir.join("packets-f.csv"), log).unwrap();
    let res = collect(&sc, &dir, 1_000_000_000);
    std::fs::remove_dir_all(&dir).unwrap();
    let res = res.unwrap();
    // per hop, from the payload's stamp (0) to each start of transmission: at h1's NIC
    // on arrival, at s1 after the 100 us serialization on h1's link
    let hops: Vec<_> = res.flows[0]
        .hops
        .iter()
        .map(|h| {
            let l = h.latency_ns.map(|l| (l.count, l.min, l.max));
            (h.hop, h.node.as_str(), h.toward.as_str(), l)
        })
        .collect();
    assert_eq!(
        hops,
        [(0, "h1", "s1", Some((3, 0, 2_000_000))), (1, "s1", "h2", Some((3, 100_000, 2_100_000)))]
    );
    let lbf = res.lbf.expect("an LBF section");
    let f = &lbf.flows[0];
    assert_eq!((f.flow.as_str(), f.lower_ns, f.upper_ns), ("f", 100_000, Some(500_000)));
    assert_eq!((f.received, f.early, f.on_time), (5, 1, 2));
    assert_eq!((f.late_marked, f.late_unmarked, f.marked_but_on_time), (1, 1, 1));
    assert_eq!(f.early_drops, BTreeMap::from([("s1".to_owned(), 2)]));
    assert!(f.expired.is_empty());
    assert_eq!(lbf.latency_convention, "physical");
    assert_eq!(lbf.switches.len(), 1);
    let c = &lbf.switches[0].counters;
    assert_eq!((lbf.switches[0].node.as_str(), c.lbf_packets, c.marked_late), ("s1", 3, 3));
    assert_eq!(lbf.notifications_total, 3);
    let seqs: Vec<_> = lbf.notifications.iter().map(|n| (n.flow.as_str(), n.seq)).collect();
    assert_eq!(seqs, [("f", 0), ("f", 1), ("f", 2)]);
}

/// The switches' and senders' lateness behind their schedules, and how late the receivers
/// read what the kernel stamped, go into `emulation`, in the scenario's time (here 10 times
/// dilated: divided by 10), counts as counted; a sender's or receiver's report from before
/// the counts (no `late_100us`, no `stamped`) still reads; a damaged one is an error
/// naming the file.
#[test]
fn an_emulated_run_reports_its_lateness_in_the_scenarios_time() {
    let text = SC.replace("[sim]\n", "[sim]\ndilation = 10\n");
    let sc = Scenario::from_str_named("t.toml", &text).unwrap();
    let dir = std::env::temp_dir().join(format!("latnet-emu-late-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let core = SwitchCore::new(&sc, "s1").unwrap();
    let rc = RunnerCounters {
        late_100us: 3,
        late_max_ns: 4_500_000,
        rx_read_late_10us: 7,
        rx_read_late_max_ns: 20_000,
        rx_stamp_ahead: 2,
        rx_stamp_ahead_max_ns: 40_000,
        rx_in_loop: 5,
        rx_in_loop_absorbed_max_ns: 30_000,
        ring_drops: 1,
        ..RunnerCounters::default()
    };
    SwitchStats::collect(&sc, &core, rc, true).write(&dir.join("switch-s1.json")).unwrap();
    let send = r#"{"flow":"f","sent":7,"send_errors":0,"late_max_ns":6000000,"late_100us":2}"#;
    std::fs::write(dir.join("send-f.json"), send).unwrap();
    let recv = r#"{"host":"h2","flows":[{"flow":"f","received":6,"rx_bytes":7500,
        "corrupted":0,"reordered":0,"duplicates":0,"foreign":0,"stamped":6,
        "read_late_100us":1,"read_late_max_ns":2500000,"stamp_ahead":3,
        "stamp_ahead_max_ns":70000}]}"#;
    std::fs::write(dir.join("recv-h2.json"), recv).unwrap();
    let res = collect(&sc, &dir, 1_000_000_000);
    let old = r#"{"flow":"f","sent":7,"send_errors":0,"late_max_ns":30000}"#;
    std::fs::write(dir.join("send-f.json"), old).unwrap();
    let old = r#"{"host":"h2","flows":[{"flow":"f","received":6,"rx_bytes":7500,
        "corrupted":0,"reordered":0,"duplicates":0,"foreign":0}]}"#;
    std::fs::write(dir.join("recv-h2.json"), old).unwrap();
    let res_old = collect(&sc, &dir, 1_000_000_000);
    std::fs::write(dir.join("send-f.json"), r#"{"flow":"f","sent":"seven"}"#).unwrap();
    let bad = collect(&sc, &dir, 1_000_000_000).map(|_| ()).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(bad.contains("send-f.json: invalid type: string \"seven\""), "{bad}");
    let e = res.unwrap().emulation.expect("an emulation section");
    let s1 = EmulatedSwitch {
        node: "s1".to_owned(),
        forwarded: 0,
        tx_late_100us: 3,
        tx_late_max_ns: 450_000,
        rx_read_late_10us: 7,
        rx_read_late_max_ns: 2_000,
        rx_stamp_ahead: 2,
        rx_stamp_ahead_max_ns: 4_000,
        rx_in_loop: 5,
        rx_in_loop_absorbed_max_ns: 3_000,
        ring_drops: 1,
        tx_refused: 0,
    };
    let f = EmulatedSender { flow: "f".to_owned(), sent: 7, late_100us: 2, late_max_ns: 600_000 };
    let r = EmulatedReceiver {
        flow: "f".to_owned(),
        received: 6,
        stamped: 6,
        read_late_100us: 1,
        read_late_max_ns: 250_000,
        stamp_ahead: 3,
        stamp_ahead_max_ns: 7_000,
    };
    // (the receivers' reads are kept out of the latencies and out of `late_max_ns`)
    let want = EmulationReport {
        late_max_ns: 600_000,
        switches: vec![s1],
        senders: vec![f],
        receivers: vec![r],
    };
    assert_eq!(e, want);
    let e = res_old.unwrap().emulation.unwrap();
    assert_eq!(
        (e.late_max_ns, e.senders[0].late_100us, e.senders[0].late_max_ns),
        (450_000, 0, 3_000)
    );
    let r = &e.receivers[0];
    assert_eq!((r.received, r.stamped, r.read_late_100us, r.read_late_max_ns), (6, 0, 0, 0));
}

/// The receivers' logs and the switches' drop records become the simulator's
/// `packets.csv`: instants from the run's time zero, rows in order of sending, drops with
/// their reason and node, the rest of what the sender sent as `end-of-run`; no log, no
/// table; a bad row names the file and line.
#[test]
fn packet_logs_become_the_simulators_packets_csv() {
    let sc = Scenario::from_str_named("t.toml", SC).unwrap();
    let dir = std::env::temp_dir().join(format!("latnet-emu-pk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap(), None);
    let header = crate::traffic::PACKET_LOG_HEADER;
    // arrival order: seq 1 overtook seq 0
    let log = format!("{header}1,7000,9500,1,0\n0,6000,10000,1,1\n");
    std::fs::write(dir.join("packets-f.csv"), log).unwrap();
    let got = packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap().unwrap();
    let want = format!(
        "{},f,0,1000,5000,4000,,\n,f,1,2000,4500,2500,,\n",
        latnet_sim::results::PACKETS_CSV_HEADER
    );
    assert_eq!(got, want);
    // s1 dropped seq 2 at h1's NIC (already counted from time zero) and seq 3 itself
    let drops = dir.join("drops-s1.csv");
    let drop_header = crate::core::DROP_RECORDS_HEADER;
    let records = "f,3,hopeless-early-drop,s1,2500,2700\nf,2,queue-full-packets,h1,1500,1500\n";
    std::fs::write(&drops, format!("{drop_header}{records}")).unwrap();
    let got = packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap().unwrap();
    let want = format!(
        "{},f,0,1000,5000,4000,,\n,f,2,1500,1500,,queue-full-packets,h1\n\
         ,f,1,2000,4500,2500,,\n,f,3,2500,2700,,hopeless-early-drop,s1\n",
        latnet_sim::results::PACKETS_CSV_HEADER
    );
    assert_eq!(got, want);
    // the sender sent 6: seq 4 and 5 reached neither the receiver nor a switch's records,
    // in flight at the end as the simulator writes it, created at the flow's 10 ms period
    let send = r#"{"flow":"f","sent":6,"send_errors":0,"late_max_ns":0}"#;
    std::fs::write(dir.join("send-f.json"), send).unwrap();
    let got = packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap().unwrap();
    let lost = ",f,4,40000000,1100000000,,end-of-run,\n,f,5,50000000,1100000000,,end-of-run,\n";
    assert_eq!(got, format!("{want}{lost}"));
    std::fs::remove_file(dir.join("send-f.json")).unwrap();
    let err = |row: &str| {
        std::fs::write(&drops, format!("{drop_header}{row}\n")).unwrap();
        packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap_err().to_string()
    };
    let e = err("f,3,tired,s1,2500,2700");
    assert!(e.ends_with("drops-s1.csv:2: reason: no drop reason named \"tired\""), "{e}");
    let e = err("f,3,no-route,s9,2500,2700");
    assert!(e.ends_with("drops-s1.csv:2: node: no node named \"s9\""), "{e}");
    let e = err("g,3,no-route,s1,2500,2700");
    assert!(e.ends_with("drops-s1.csv:2: flow: no flow named \"g\""), "{e}");
    let e = err("f,3,no-route,s1,2500");
    assert!(e.contains("drops-s1.csv:2:"), "{e}");
    std::fs::remove_file(&drops).unwrap();
    std::fs::write(dir.join("packets-f.csv"), format!("{header}1,7000,x,1,0\n")).unwrap();
    let e = packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.ends_with("packets-f.csv:2: recv_ns: expected an integer, got \"x\""), "{e}");
}

/// A receiver's log with a row that is not five integers is an error naming the file, the
/// line and the field, not a packet counted with a latency made up of zeros.
#[test]
fn a_malformed_packet_log_is_an_error_naming_the_line() {
    let sc = Scenario::from_str_named("t.toml", SC).unwrap();
    let dir = std::env::temp_dir().join(format!("latnet-emu-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let header = crate::traffic::PACKET_LOG_HEADER;
    let err = |text: String| {
        std::fs::write(dir.join("packets-f.csv"), text).unwrap();
        collect(&sc, &dir, 1_000_000_000).unwrap_err().to_string()
    };
    let e = err(format!("{header}0,1000,51000,1,0\n1,1000,,1,0\n"));
    assert!(e.ends_with("packets-f.csv:3: recv_ns: expected an integer, got \"\""), "{e}");
    let e = err(format!("{header}0,1000,51000,1\n"));
    assert!(
        e.ends_with("packets-f.csv:2: expected 5 fields (seq,send_ns,recv_ns,intact,late), got 4"),
        "{e}"
    );
    let e = err("seq,send\n".to_owned());
    assert!(e.contains("packets-f.csv:1: expected the header"), "{e}");
    // a well-formed log is read
    std::fs::write(dir.join("packets-f.csv"), format!("{header}0,1000,51000,1,0\n")).unwrap();
    let res = collect(&sc, &dir, 1_000_000_000);
    std::fs::remove_dir_all(&dir).unwrap();
    let lat = res.unwrap().flows[0].latency_ns.expect("one packet");
    assert_eq!((lat.count, lat.min), (1, 50_000));
}

/// The switches' hop records become the simulator's `hops.csv`: hop index from the order
/// of each packet's transmissions, node from the port, rows in order of their start; no
/// file, no table; a bad row is an error naming the file, the line and the field.
#[test]
fn hop_records_are_merged_into_the_simulators_hops_csv() {
    let sc = Scenario::from_str_named("t.toml", SC).unwrap();
    let dir = std::env::temp_dir().join(format!("latnet-emu-hops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = latnet_sim::net::Topology::build(&sc);
    let out = |p: usize| topo.fib[p][2];
    let (p0, p1) = (out(0), out(1));
    assert_eq!(hop_records(&sc, &dir).unwrap(), None);
    let file = dir.join("hops-s1.csv");
    let header = crate::core::HOP_RECORDS_HEADER;
    std::fs::write(
        &file,
        format!(
            "{header}f,1,{p1},2,1200,1300,1400\nf,0,{p0},0,0,0,10\nf,1,{p0},0,1000,1000,1010\n"
        ),
    )
    .unwrap();
    let got = hop_records(&sc, &dir).unwrap().unwrap();
    let want = format!(
        "{}\
         ,f,0,0,h1,{p0},0,0,0,10\n,f,1,0,h1,{p0},0,1000,1000,1010\n,f,1,1,s1,{p1},2,1200,1300,1400\n",
        latnet_sim::results::HOPS_CSV_HEADER
    );
    assert_eq!(got, want);
    // the hop is the rank among the packet's transmissions, not the FIB's: a packet sent on
    // by s1 toward h1 (as a source route might) is at hop 1 there
    let back = topo.fib[1][0];
    std::fs::write(
        &file,
        format!("{header}f,2,{back},0,2200,2200,2300\nf,2,{p0},0,2000,2000,2010\n"),
    )
    .unwrap();
    let got = hop_records(&sc, &dir).unwrap().unwrap();
    assert!(
        got.ends_with(&format!(
            ",f,2,0,h1,{p0},0,2000,2000,2010\n,f,2,1,s1,{back},0,2200,2200,2300\n"
        )),
        "{got}"
    );
    let err = |text: String| {
        std::fs::write(&file, text).unwrap();
        hop_records(&sc, &dir).unwrap_err().to_string()
    };
    let e = err(format!("{header}f,0,{p0},0,0,0,10\nf,x,{p0},0,0,0,10\n"));
    assert!(e.ends_with("hops-s1.csv:3: seq: expected an integer, got \"x\""), "{e}");
    let e = err(format!("{header}g,0,{p0},0,0,0,10\n"));
    assert!(e.ends_with(":2: flow: no flow named \"g\""), "{e}");
    let e = err(format!("{header}f,0,99,0,0,0,10\n"));
    assert!(e.ends_with(":2: port: 99 is not a port of the topology"), "{e}");
    let e = err(format!("{header}f,0,{p0},256,0,0,10\n"));
    assert!(e.ends_with(":2: priority: expected at most 255, got 256"), "{e}");
    let e = err(format!("{header}f,0,{p0},0\n"));
    assert!(e.contains(":2: expected 7 fields"), "{e}");
    let e = err("seq,flow\n".to_owned());
    assert!(e.contains(":1: expected the header"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A source-routed flow's per-hop summary follows the ports it left by, not the FIB: on
/// two equal paths from s1 to s4 the tags choose the one the FIB does not, and the rows
/// are the simulator's, each with the latency measured at its port.
#[test]
fn hop_summaries_follow_the_route_the_flow_took() {
    let sc = Scenario::from_str_named(
        "diamond.toml",
        &format!(
            "[sim]\nduration = \"10ms\"\n[defaults.link]\nrate = \"1Gbps\"\n\
             [[nodes]]\nname = \"h1\"\nkind = \"host\"\n\
             [[nodes]]\nname = \"h2\"\nkind = \"host\"\n{}\
             [[links]]\na = \"h1\"\nb = \"s1\"\n[[links]]\na = \"s1\"\nb = \"s2\"\n\
             [[links]]\na = \"s1\"\nb = \"s3\"\n[[links]]\na = \"s2\"\nb = \"s4\"\n\
             [[links]]\na = \"s3\"\nb = \"s4\"\n[[links]]\na = \"s4\"\nb = \"h2\"\n\
             [[flows]]\nname = \"f\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 500\n\
             count = 10\ntags = [20, 10, 20]\n\
             traffic = {{ kind = \"cbr\", rate = \"10Mbps\" }}\n",
            ["s1", "s2", "s3", "s4"]
                .map(|s| format!(
                    "[[nodes]]\nname = \"{s}\"\nkind = \"switch\"\n\
                     forwarding = {{ kind = \"tag-stack\" }}\n"
                ))
                .concat()
        ),
    )
    .unwrap();
    let topo = latnet_sim::net::Topology::build(&sc);
    let name = |n: usize| sc.nodes[n].name.as_str();
    let fib: Vec<_> = topo.path(0, 1).unwrap().into_iter().map(name).collect();
    assert_eq!(fib, ["h1", "s1", "s2", "s4", "h2"]);
    let sim = latnet_sim::Simulator::new(sc.clone()).run();
    let route: Vec<_> =
        sim.flows[0].hops.iter().map(|h| (h.node.clone(), h.toward.clone())).collect();
    assert_eq!(route[1], ("s1".to_owned(), "s3".to_owned()), "{route:?}");
    // each port's measurement where the run would have it: at its switch, or at the switch
    // emulating the host's NIC; hop k measured k us
    let dir = std::env::temp_dir().join(format!("latnet-emu-route-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for s in ["s1", "s2", "s3", "s4"] {
        let core = SwitchCore::new(&sc, s).unwrap();
        let mut st = SwitchStats::collect(&sc, &core, RunnerCounters::default(), true);
        for (k, (node, toward)) in route.iter().enumerate() {
            let g = (0..topo.ports.len())
                .find(|&g| name(topo.ports[g].node) == node && name(topo.ports[g].peer) == toward)
                .unwrap();
            if node == s || (node == "h1" && s == "s1") {
                let mut l = LatencyStats::new();
                l.record(k as u64 * 1000);
                let latency_ns = l.summary().unwrap();
                st.flows[0].hops.push(crate::stats::PortLatency { port: g, latency_ns });
            }
        }
        st.write(&dir.join(format!("switch-{s}.json"))).unwrap();
    }
    let res = collect(&sc, &dir, 10_000_000);
    std::fs::remove_dir_all(&dir).unwrap();
    let hops: Vec<_> = res.unwrap().flows[0]
        .hops
        .iter()
        .map(|h| ((h.node.clone(), h.toward.clone()), h.latency_ns.map(|l| l.max)))
        .collect();
    let want: Vec<_> =
        route.iter().enumerate().map(|(k, r)| (r.clone(), Some(k as u64 * 1000))).collect();
    assert_eq!(hops, want);
}
