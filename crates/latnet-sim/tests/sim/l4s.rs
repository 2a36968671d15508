//! VDQ-CSAQM and DualPI2 in the simulator with UDP sources: PV marking at the senders' ports,
//! max-min shares at the bottleneck, the AQM report in the results, malformed values counted.

use super::scenario;
use latnet_dataplane::{Meta, Packet};
use latnet_sim::Simulator;
use latnet_units::Time;

/// Three CBR senders (20, 40, 80 Mbit/s of 1000-byte frames) mark at their egress ports and
/// share a 100 Mbit/s VDQ-CSAQM bottleneck.
fn dumbbell(bottleneck: &str) -> String {
    let mut s = String::from(
        r#"
[sim]
duration = "3s"
drain = "200ms"
seed = 5
[defaults.link]
rate = "1Gbps"
delay = "100us"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "rx"
kind = "host"
"#,
    );
    for (i, r) in [20, 40, 80].iter().enumerate() {
        s += &format!(
            r#"
[[nodes]]
name = "h{i}"
kind = "host"
[[links]]
a = "h{i}"
b = "s1"
queue_a = {{ kind = "pv-marker" }}
[[flows]]
name = "f{i}"
src = "h{i}"
dst = "rx"
size = 1000
traffic = {{ kind = "cbr", rate = "{r}Mbps" }}
"#
        );
    }
    s += &format!(
        r#"
[[links]]
a = "s1"
b = "rx"
rate = "100Mbps"
queue_a = {bottleneck}
"#
    );
    s
}

const VDQ: &str = r#"{ kind = "vdq-csaqm", rate = "100Mbps", epochs = ["1s"], trace = true }"#;

#[test]
fn vdq_gives_max_min_shares_to_greedy_udp() {
    let r = Simulator::new(scenario(&dumbbell(VDQ))).run();
    let thr: Vec<f64> = r.flows.iter().map(|f| f.throughput_bps / 1e6).collect();
    // frames carry 4 more bytes (the value option): offered 20.08, 40.16, 80.32 Mbit/s;
    // shares of 98.5 Mbit/s: 20.08, then (98.5 - 20.08) / 2 = 39.21 each.
    let want = [20.08, 39.21, 39.21];
    for (g, w) in thr.iter().zip(want) {
        assert!((g - w).abs() < 1.5, "throughputs {thr:?}, want {want:?}");
    }
    let port = r.ports.iter().find(|p| p.node == "s1" && p.peer == "rx").unwrap();
    assert!(port.utilisation > 0.9, "{}", port.utilisation);
    let aqm = port.aqm.as_ref().expect("the VDQ reports");
    assert_eq!(aqm.kind, "vdq-csaqm");
    assert_eq!(aqm.epochs.len(), 2);
    let classic = &aqm.epochs[1].classes[1];
    assert!(classic.aqm_drops > 0 && classic.tx_packets > 0);
    // the physical Classic queue stays short: the VQ (15 ms at 98.5 %) keeps it near empty
    let soj = classic.sojourn.as_ref().unwrap();
    assert!(soj.p99_ns < 15e6, "{soj:?}");
    assert!(aqm.trace.len() >= 290, "a CTV every 10 ms: {}", aqm.trace.len());
    assert!(r.to_json().contains("\"ctv1\""));
}

#[test]
fn dualpi2_runs_and_reports() {
    let q = r#"{ kind = "dualpi2", trace = true }"#;
    let r = Simulator::new(scenario(&dumbbell(q))).run();
    let port = r.ports.iter().find(|p| p.node == "s1" && p.peer == "rx").unwrap();
    let aqm = port.aqm.as_ref().unwrap();
    assert_eq!(aqm.kind, "dualpi2");
    // unresponsive Not-ECT overload: the PI controller saturates and drops
    assert!(port.queue.drops.get("aqm-drop").copied().unwrap_or(0) > 0);
    assert!(aqm.trace.iter().any(|(_, v)| v[0] > 0.1));
}

#[test]
fn same_seed_same_results_with_random_markers_and_aqms() {
    for q in [VDQ, r#"{ kind = "dualpi2" }"#] {
        let a = Simulator::new(scenario(&dumbbell(q))).run().to_json();
        let b = Simulator::new(scenario(&dumbbell(q))).run().to_json();
        assert_eq!(a, b);
    }
}

/// A frame whose value option is malformed is dropped at the bottleneck queue and counted as
/// `malformed-option`, not a crash.
#[test]
fn malformed_value_options_are_counted_drops() {
    let mut sim = Simulator::new(scenario(&dumbbell(VDQ)));
    let m = latnet_wire::EthernetAddress([2, 0, 0, 0, 0, 1]);
    let mut f = Vec::new();
    let (a, b) = ("10.0.0.3".parse().unwrap(), "10.0.0.2".parse().unwrap());
    latnet_wire::build_udp_ipv4(&mut f, m, m, a, b, 0, latnet_wire::Ecn::Ect1, 64, 1, 2, 100)
        .unwrap();
    latnet_wire::option_edit::insert_ip_option(&mut f, latnet_wire::ppv::KINDS, &[9; 6]).unwrap();
    // arrive at s1 over the link from h0 (port 0 of the scenario is h0 -> s1)
    let h0_to_s1 = sim.topology().ports.iter().position(|p| p.peer == 0).unwrap();
    sim.inject(Time::from_nanos(1_000), h0_to_s1, Packet::new(f, 0, Meta::default()))
        .expect("injected");
    let r = sim.run();
    let port = r.ports.iter().find(|p| p.node == "s1" && p.peer == "rx").unwrap();
    assert_eq!(port.queue.drops.get("malformed-option"), Some(&1));
}

/// Switch-assisted pacing, switch side: a SYN with a REGISTER option is counted at its egress
/// port and carries the count on; a malformed option is a counted drop.
#[test]
fn large_flow_counting_at_a_switch() {
    let sc = dumbbell(VDQ).replace(
        "name = \"s1\"\nkind = \"switch\"",
        "name = \"s1\"\nkind = \"switch\"\nlarge_flows = { idle_timeout = \"10s\" }",
    );
    let mut sim = Simulator::new(scenario(&sc));
    let syn = |opt: Option<&[u8]>| {
        let (a, b) = ("10.0.0.3".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let f = crate::tcp_frame((a, 40000), (b, 5201), latnet_wire::TcpFlags::SYN, opt);
        Packet::new(f, 0, Meta::default())
    };
    let register = latnet_wire::LargeFlowOption::new(latnet_wire::LargeFlowMsg::Register).to_data();
    let h0_to_s1 = sim.topology().ports.iter().position(|p| p.peer == 0).unwrap();
    sim.inject(Time::from_nanos(1_000), h0_to_s1, syn(Some(&register))).expect("injected");
    sim.inject(Time::from_nanos(2_000), h0_to_s1, syn(Some(&[9; 10]))).expect("injected");
    let r = sim.run();
    let s1 = r.nodes.iter().find(|n| n.name == "s1").unwrap();
    let c = s1.large_flows.expect("s1 counts large flows");
    assert_eq!(c.registered, 1);
    assert_eq!(c.malformed, 1);
    assert_eq!(s1.drops.get("malformed-option"), Some(&1));
    assert!(r.to_json().contains("\"large_flows\""));
    // only on switches
    let bad = dumbbell(VDQ).replace(
        "name = \"rx\"\nkind = \"host\"",
        "name = \"rx\"\nkind = \"host\"\nlarge_flows = {}",
    );
    let e = latnet_sim::Scenario::from_str_named("x.toml", &bad).unwrap_err().to_string();
    assert!(e.contains("large_flows") && e.contains("switch"), "{e}");
}
