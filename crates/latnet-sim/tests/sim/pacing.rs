//! Switch-assisted TCP pacing end to end: large flows register on their SYN at a counting
//! switch, read `N` from the SYN-ACK and later announcements, and pace at `C / N` per
//! connection, with their host's HTB-like shaper or with its FQ-like queue; FINs bring the
//! count back down; malformed options are counted drops; bad settings are clear errors.

use latnet_dataplane::{Meta, Packet};
use latnet_sim::results::FlowResult;
use latnet_sim::tcp::report::{LargeFlowHostResult, SeriesRow};
use latnet_sim::{Results, Scenario, Simulator};
use latnet_units::Time;

const C: u64 = 100_000_000;
const PAYLOAD: f64 = 1448.0 / 1502.0;

/// Four senders `l<i>` -> `r<i>` through sw1 -> sw2 (100 Mbit/s, 4.5 ms, 100 packets of
/// buffer); sw1 counts large flows. Flow `i` starts at `i * 0.5 s`; flows 0-2 stop at 3 s,
/// flow 3 at 3.5 s. `host_queue` is each sender's egress queue.
fn four_staggered(pacing: &str, host_queue: &str) -> String {
    let mut s = String::from(
        r#"
[sim]
duration = "4s"
drain = "300ms"
seed = 3
[defaults.link]
rate = "1Gbps"
delay = "100us"
[output]
timeseries = "100ms"
[[nodes]]
name = "sw1"
kind = "switch"
large_flows = {}
[[nodes]]
name = "sw2"
kind = "switch"
[[links]]
a = "sw1"
b = "sw2"
rate = "100Mbps"
delay = "4500us"
queue = { kind = "fifo", limit_packets = 100 }
"#,
    );
    for i in 0..4 {
        let stop = if i == 3 { "3.5s" } else { "3s" };
        let lf = match pacing {
            "regular" => String::new(),
            p => format!(", large_flow = true, large_flow_pacing = \"{p}\""),
        };
        s += &format!(
            r#"
[[nodes]]
name = "l{i}"
kind = "host"
[[nodes]]
name = "r{i}"
kind = "host"
[[links]]
a = "l{i}"
b = "sw1"
queue_a = {host_queue}
[[links]]
a = "sw2"
b = "r{i}"
[[flows]]
name = "t{i}"
src = "l{i}"
dst = "r{i}"
size = 1502
start = "{start}ms"
stop = "{stop}"
traffic = {{ kind = "tcp-bulk", cc = "cubic"{lf} }}
"#,
            start = i * 500
        );
    }
    s
}

fn run(src: &str) -> Results {
    let sc = Scenario::from_str_named("pacing.toml", src).unwrap_or_else(|e| panic!("{e}"));
    Simulator::new(sc).run()
}

fn lf(f: &FlowResult) -> &LargeFlowHostResult {
    f.tcp.as_ref().and_then(|t| t.large_flow.as_ref()).expect("a large flow")
}

fn goodput(rows: &[SeriesRow], flow: u32, from_s: f64, to_s: f64) -> f64 {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.flow == flow && r.t_ns as f64 / 1e9 > from_s + 1e-9)
        .filter(|r| r.t_ns as f64 / 1e9 <= to_s + 1e-9)
        .map(|r| r.goodput_bps)
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    s * s / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
}

const MODES: [(&str, &str); 3] = [
    ("per-connection", "{ kind = \"fifo\" }"),
    ("htb", "{ kind = \"htb\", rate = \"1Gbps\", burst = 3004 }"),
    ("fq", "{ kind = \"fq\" }"),
];

#[test]
fn four_staggered_flows_pace_at_a_quarter_and_recover_after_fins() {
    for (mode, q) in MODES {
        let r = run(&four_staggered(mode, q));
        // the rate each mode sets for a share s: payload for the socket cap, frames for qdiscs
        let set = |s: u64| match mode {
            "per-connection" => s * 1448 / 1502,
            _ => s,
        };
        for (i, f) in r.flows.iter().enumerate() {
            let l = lf(f);
            assert_eq!(l.pacing, mode);
            // the SYN-ACK tells flow i it is the (i+1)-th; flow 3 joins at 1.5 s
            let first = l.changes.first().unwrap_or_else(|| panic!("{mode}: {l:?}"));
            assert_eq!(first.count as usize, i + 1, "{mode} flow {i}: {l:?}");
            let at4 = l.changes.iter().find(|c| c.count == 4).unwrap_or_else(|| {
                panic!("{mode} flow {i} never learned N = 4: {l:?}");
            });
            assert_eq!(at4.bottleneck_bps, C);
            assert_eq!(at4.rate_bps, set(C / 4), "{mode} flow {i}");
            assert!(at4.t_ns >= 1_500_000_000 && at4.t_ns < 1_600_000_000, "{mode}: {at4:?}");
        }
        // after the FINs of flows 0-2 at 3 s, flow 3 is alone again
        let last = *lf(&r.flows[3]).changes.last().unwrap();
        assert_eq!(last.count, 1, "{mode}: {:?}", lf(&r.flows[3]));
        assert_eq!(last.rate_bps, set(C));
        assert!(last.t_ns > 3_000_000_000);
        let c = r.nodes.iter().find(|n| n.name == "sw1").unwrap().large_flows.unwrap();
        assert_eq!((c.registered, c.fin, c.rst, c.malformed), (4, 4, 0, 0), "{mode}: {c:?}");
        assert!(c.announcements >= 6, "{mode}: {c:?}");
        // 2-3 s: all four at about C / 4 of frames (per-connection: 1448/1502 of it as
        // goodput, the cap is a payload rate), fair and with the link full
        let g: Vec<f64> = (0..4).map(|i| goodput(&r.timeseries, i, 2.0, 3.0)).collect();
        for (i, x) in g.iter().enumerate() {
            let want = 25e6 * PAYLOAD;
            assert!((x - want).abs() < 0.04 * want, "{mode} flow {i}: {g:?}");
        }
        assert!(jain(&g) > 0.999, "{mode}: {g:?}");
        // flow 3 alone in 3.2-3.5 s gets the link back
        let alone = goodput(&r.timeseries, 3, 3.2, 3.5);
        assert!(alone > 0.9 * 100e6 * PAYLOAD, "{mode}: {alone}");
    }
}

#[test]
fn regular_tcp_registers_nothing() {
    let r = run(&four_staggered("regular", "{ kind = \"fifo\" }"));
    assert!(r.flows.iter().all(|f| f.tcp.as_ref().unwrap().large_flow.is_none()));
    let c = r.nodes.iter().find(|n| n.name == "sw1").unwrap().large_flows.unwrap();
    assert_eq!(c.registered, 0);
}

#[test]
fn a_configured_bottleneck_rate_replaces_the_reported_one() {
    let src = four_staggered("per-connection", "{ kind = \"fifo\" }")
        .replace("large_flow_pacing = \"per-connection\"", "bottleneck_rate = \"60Mbps\"");
    let r = run(&src);
    let l = lf(&r.flows[0]);
    let at4 = l.changes.iter().find(|c| c.count == 4).unwrap();
    assert_eq!((at4.bottleneck_bps, at4.rate_bps), (60_000_000, 15_000_000 * 1448 / 1502));
}

#[test]
fn shaping_modes_need_their_queue_at_the_host() {
    let src = four_staggered("htb", "{ kind = \"fifo\" }");
    let e = Scenario::from_str_named("pacing.toml", &src).unwrap_err().to_string();
    assert!(e.contains("pacing.toml"), "{e}");
    assert!(e.contains("flows[0].traffic.large_flow_pacing"), "{e}");
    assert!(e.contains("kind = \"htb\""), "{e}");
    let src = four_staggered("fq", "{ kind = \"htb\", rate = \"1Gbps\" }");
    let e = Scenario::from_str_named("pacing.toml", &src).unwrap_err().to_string();
    assert!(e.contains("kind = \"fq\""), "{e}");
    let src =
        four_staggered("per-connection", "{ kind = \"fifo\" }").replace("large_flow = true, ", "");
    let e = Scenario::from_str_named("pacing.toml", &src).unwrap_err().to_string();
    assert!(e.contains("need `large_flow = true`"), "{e}");
}

/// A TCP frame toward a host that sends a large flow, whose large-flow option is malformed,
/// is dropped there and counted; the run goes on.
#[test]
fn malformed_large_flow_options_at_a_host_are_counted_drops() {
    let mut sim = Simulator::new(
        Scenario::from_str_named("pacing.toml", &four_staggered("fq", "{ kind = \"fq\" }"))
            .unwrap(),
    );
    let l0 = sim.scenario().nodes.iter().position(|n| n.name == "l0").unwrap();
    let r0 = sim.scenario().nodes.iter().position(|n| n.name == "r0").unwrap();
    let (a, b) = (sim.scenario().nodes[r0].address, sim.scenario().nodes[l0].address);
    let ack = latnet_wire::TcpFlags::ACK;
    let f = crate::tcp_frame((a, 20000), (b, 10000), ack, Some(&[9; 10]));
    let into_l0 = sim.topology().ports.iter().position(|p| p.peer == l0).unwrap();
    sim.inject(Time::from_nanos(700_000_000), into_l0, Packet::new(f, 0, Meta::default()))
        .expect("injected");
    let r = sim.run();
    let node = r.nodes.iter().find(|n| n.name == "l0").unwrap();
    assert_eq!(node.drops.get("malformed-option"), Some(&1));
    assert!(lf(&r.flows[0]).changes.iter().any(|c| c.count == 4), "the flow carries on");
}

/// A registered connection that falls silent without a FIN (its hosts gone) leaves the count
/// `idle_timeout` after its last packet, woken by the simulator at the instant the counter asks
/// for, even when no packet crosses the switch afterwards.
#[test]
fn a_silent_connection_expires_at_its_idle_timeout_with_no_packet_after_it() {
    let src = r#"
[sim]
duration = "1s"
[defaults.link]
rate = "1Gbps"
delay = "10us"
[[nodes]]
name = "a"
kind = "host"
[[nodes]]
name = "b"
kind = "host"
[[nodes]]
name = "sw"
kind = "switch"
large_flows = { idle_timeout = "200ms" }
[[links]]
a = "a"
b = "sw"
[[links]]
a = "sw"
b = "b"
[[flows]]
name = "early"
src = "a"
dst = "b"
size = 100
start = "0ms"
stop = "50ms"
traffic = { kind = "cbr", rate = "1Mbps" }
"#;
    let mut sim = Simulator::new(Scenario::from_str_named("silent.toml", src).unwrap());
    let node = |name: &str| sim.scenario().nodes.iter().position(|n| n.name == name).unwrap();
    let (a, b, sw) = (node("a"), node("b"), node("sw"));
    let (from, to) = (sim.scenario().nodes[a].address, sim.scenario().nodes[b].address);
    let register = latnet_wire::LargeFlowOption::new(latnet_wire::LargeFlowMsg::Register);
    let syn = latnet_wire::TcpFlags::SYN;
    let f = crate::tcp_frame((from, 40000), (to, 5201), syn, Some(&register.to_data()));
    // the SYN as if `a` sent it on its link to the switch (in the statistics of flow 0,
    // whose packets stopped crossing the switch at 50 ms)
    let into_sw = sim.topology().ports.iter().position(|p| p.node == a && p.peer == sw).unwrap();
    sim.inject(Time::from_nanos(100_000_000), into_sw, Packet::new(f, 0, Meta::default()))
        .expect("injected");
    let r = sim.run();
    let counted = r.nodes.iter().find(|n| n.name == "sw").and_then(|n| n.large_flows).unwrap();
    assert_eq!(counted.registered, 1);
    assert_eq!(counted.expired, 1, "{counted:?}");
}
