//! TCP flows in the simulator: utilisation per congestion control, ECN marking bottlenecks,
//! completion times, request/response, pacing and shaping, accounting, determinism, errors.

use latnet_sim::results::FlowResult;
use latnet_sim::tcp::report::SeriesRow;
use latnet_sim::{Results, Scenario, Simulator};

fn run(src: &str) -> Results {
    let sc = Scenario::from_str_named("tcp.toml", src).unwrap_or_else(|e| panic!("{e}"));
    Simulator::new(sc).run()
}

/// `n` senders and receivers around a bottleneck `rate` / one-way `delay` with `queue`; access
/// links 1 Gbit/s, 100 us. `flows` are appended (`l<i>` -> `r<i>`).
fn dumbbell(n: usize, rate: &str, delay: &str, queue: &str, sim: &str, flows: &str) -> String {
    let mut s = format!(
        r#"
[sim]
{sim}
[defaults.link]
rate = "1Gbps"
delay = "100us"
[[nodes]]
name = "sw1"
kind = "switch"
[[nodes]]
name = "sw2"
kind = "switch"
[[links]]
a = "sw1"
b = "sw2"
rate = "{rate}"
delay = "{delay}"
queue = {queue}
"#
    );
    for i in 0..n {
        s += &format!(
            "[[nodes]]\nname = \"l{i}\"\nkind = \"host\"\n[[nodes]]\nname = \"r{i}\"\nkind = \"host\"\n\
             [[links]]\na = \"l{i}\"\nb = \"sw1\"\n[[links]]\na = \"sw2\"\nb = \"r{i}\"\n"
        );
    }
    s + flows
}

fn bulk(i: usize, traffic: &str) -> String {
    format!(
        "[[flows]]\nname = \"t{i}\"\nsrc = \"l{i}\"\ndst = \"r{i}\"\nsize = 1502\ntraffic = {traffic}\n"
    )
}

fn tcp(f: &FlowResult) -> &latnet_sim::tcp::report::TcpFlowResult {
    f.tcp.as_ref().expect("a TCP flow")
}

/// Mean goodput of flow `flow` over the intervals ending in `(from_s, to_s]` seconds.
fn goodput_between(rows: &[SeriesRow], flow: u32, from_s: f64, to_s: f64) -> f64 {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| {
            r.flow == flow && r.t_ns as f64 / 1e9 > from_s && r.t_ns as f64 / 1e9 <= to_s + 1e-9
        })
        .map(|r| r.goodput_bps)
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Payload share of a 1502-byte frame: the most goodput a link can carry.
const PAYLOAD: f64 = 1448.0 / 1502.0;

#[test]
fn every_variant_fills_a_droptail_bottleneck() {
    // 50 Mbit/s, 20 ms RTT (2 x (10 ms + 2 x 100 us)), one BDP of buffer (85 packets)
    for cc in ["newreno", "cubic", "dctcp", "prague", "bbr"] {
        let s = dumbbell(
            1,
            "50Mbps",
            "9800us",
            "{ kind = \"fifo\", limit_packets = 85 }",
            "duration = \"4s\"\ndrain = \"200ms\"",
            &bulk(0, &format!("{{ kind = \"tcp-bulk\", cc = \"{cc}\" }}")),
        );
        let r = run(&s);
        let g = goodput_between(&r.timeseries, 0, 1.0, 4.0);
        let u = g / (50e6 * PAYLOAD);
        assert!(u > 0.9, "{cc}: utilisation {u:.3} after the first second");
        assert_eq!(tcp(&r.flows[0]).cc, cc);
        // every packet accounted for
        let f = &r.flows[0];
        assert_eq!(f.sent, f.received + f.dropped + f.in_flight_at_end, "{cc}");
    }
}

/// HyStart (`hystart = true`, Linux's CUBIC) leaves slow start on its own signal before the
/// queue overflows; standard slow start overshoots into the buffer and loses a window's worth.
/// 100 Mbit/s, 20 ms RTT (one BDP: 166 packets), 100-packet buffer.
#[test]
fn hystart_leaves_slow_start_before_the_buffer_overflows() {
    let run_with = |hystart: bool| {
        let s = dumbbell(
            1,
            "100Mbps",
            "9800us",
            "{ kind = \"fifo\", limit_packets = 100 }",
            "duration = \"3s\"\ndrain = \"0s\"",
            &bulk(0, &format!("{{ kind = \"tcp-bulk\", cc = \"cubic\", hystart = {hystart} }}")),
        );
        tcp(&run(&s).flows[0]).clone()
    };
    let (plain, hy) = (run_with(false), run_with(true));
    let (p, h) =
        (plain.slow_start.as_ref().expect("ended"), hy.slow_start.as_ref().expect("ended"));
    assert_eq!(p.cause.as_deref(), Some("loss"), "{p:?}");
    assert!(matches!(h.cause.as_deref(), Some("hystart-train" | "hystart-delay")), "{h:?}");
    // HyStart set the threshold earlier, near BDP plus buffer (1448-byte segments), while
    // standard slow start ran on until the buffer overflowed, its window half as large again
    // (ssthresh = 0.7 of it)
    let (bdp, buffer) = (166 * 1448, 100 * 1448);
    assert!(h.t_ns < p.t_ns, "{h:?} {p:?}");
    assert!(bdp < h.ssthresh_bytes && h.ssthresh_bytes < (bdp + buffer) * 11 / 10, "{h:?}");
    assert!(p.ssthresh_bytes * 10 / 7 > 3 * (bdp + buffer) / 2, "{p:?}");
    assert!(hy.retransmits * 5 < plain.retransmits, "{} vs {}", hy.retransmits, plain.retransmits);
    assert!(hy.goodput_bps > 0.9 * 100e6 * PAYLOAD, "{}", hy.goodput_bps);
    // a key of CUBIC's alone; RACK-TLP reads SACK blocks
    for (traffic, why) in [
        ("cc = \"bbr\", hystart = true", "`hystart` belongs to cc = \"cubic\""),
        ("rack_tlp = true, sack = false", "`rack_tlp = true` needs SACK"),
    ] {
        let flow = bulk(0, &format!("{{ kind = \"tcp-bulk\", {traffic} }}"));
        let s = dumbbell(1, "100Mbps", "1ms", "{ kind = \"fifo\" }", "duration = \"1s\"", &flow);
        let e = Scenario::from_str_named("tcp.toml", &s).expect_err("refused");
        assert!(e.to_string().contains(why), "{e}");
    }
}

#[test]
fn dctcp_on_a_step_marking_bottleneck_has_marks_and_no_loss() {
    let s = dumbbell(
        2,
        "100Mbps",
        "2ms",
        "{ kind = \"step-ce\", threshold_packets = 20, limit_packets = 200 }",
        "duration = \"2s\"\ndrain = \"200ms\"",
        &(bulk(0, "{ kind = \"tcp-bulk\", cc = \"dctcp\" }")
            + &bulk(1, "{ kind = \"tcp-bulk\", cc = \"dctcp\" }")),
    );
    let r = run(&s);
    let port = r.ports.iter().find(|p| p.node == "sw1" && p.peer == "sw2").expect("bottleneck");
    assert!(port.queue.drops.is_empty(), "no loss: {:?}", port.queue.drops);
    assert!(port.queue.ce_marks > 100);
    // the queue stays near K = 20 (a window's worth of overshoot at most)
    assert!(port.queue.peak_packets < 60, "peak {}", port.queue.peak_packets);
    let marks: u64 = r.flows.iter().map(|f| tcp(f).ce_marks).sum();
    assert_eq!(marks, port.queue.ce_marks, "every CE mark reached a receiver");
    for f in &r.flows {
        let t = tcp(f);
        assert!(t.ecn && t.ecn_reductions > Some(0) && t.retransmits == 0, "{t:?}");
    }
    let total: f64 = r.flows.iter().map(|f| tcp(f).goodput_bps).sum();
    assert!(total > 0.9 * 100e6 * PAYLOAD, "together they fill the link: {total}");
}

#[test]
fn bulk_with_bytes_completes_and_reports_its_completion_time() {
    let s = dumbbell(
        1,
        "100Mbps",
        "5ms",
        "{ kind = \"fifo\", limit_packets = 1000 }",
        "duration = \"2s\"\ndrain = \"1s\"",
        &bulk(0, "{ kind = \"tcp-bulk\", cc = \"cubic\", bytes = \"1MB\" }"),
    );
    let r = run(&s);
    let t = tcp(&r.flows[0]);
    assert_eq!(t.delivered_bytes, 1_000_000);
    assert_eq!((t.completed, t.connections, t.retransmits), (1, 1, 0));
    // >= handshake (1 RTT) + serialization of 691 frames at 100 Mbit/s (83 ms) + 1/2 RTT
    let c = t.completion_ns.expect("completed") as f64 / 1e6;
    assert!(c > 83.0 + 15.0 && c < 400.0, "{c} ms");
    let rtt = t.rtt_ns.expect("samples");
    // 2 x (5 ms + 2 x 100 us) of propagation plus serialization
    assert!(rtt.min >= 10_400_000 && rtt.min < 10_700_000, "{rtt:?}");
    // the connection closed: nothing left anywhere at the end
    assert_eq!(r.flows[0].in_flight_at_end, 0);
}

#[test]
fn request_response_flows_report_completion_times() {
    let s = dumbbell(
        1,
        "100Mbps",
        "1ms",
        "{ kind = \"fifo\", limit_packets = 1000 }",
        "duration = \"1s\"\ndrain = \"500ms\"",
        &bulk(
            0,
            "{ kind = \"tcp-rr\", cc = \"cubic\", request = 200, response = \"20kB\", \
             interval = \"10ms\", requests = 50 }",
        ),
    );
    let r = run(&s);
    let t = tcp(&r.flows[0]);
    assert_eq!((t.connections, t.completed, t.aborted), (50, 50, 0));
    let fct = t.fct_ns.expect("completion times");
    assert_eq!(fct.count, 50);
    // RTT 2.4 ms: SYN/SYN-ACK, then the request, then a response of 14 segments that takes
    // the initial window (10) and one more round: at least 3 RTTs, all alike (no competition)
    assert!(fct.min > 3 * 2_400_000 && fct.max < 4 * 2_400_000, "{fct:?}");
    assert_eq!(fct.min, fct.max);
    assert_eq!(t.delivered_bytes, 50 * (200 + 20_000));
}

#[test]
fn max_pacing_rate_and_host_shaper_limit_the_sender() {
    let paced = dumbbell(
        1,
        "100Mbps",
        "2ms",
        "{ kind = \"fifo\", limit_packets = 1000 }",
        "duration = \"2s\"\ndrain = \"100ms\"",
        &bulk(0, "{ kind = \"tcp-bulk\", cc = \"cubic\", max_pacing_rate = \"20Mbps\" }"),
    );
    let r = run(&paced);
    let g = goodput_between(&r.timeseries, 0, 0.5, 2.0);
    // the cap is a payload rate (as cwnd and the pacer count payload)
    assert!((g / 20e6 - 1.0).abs() < 0.03, "paced goodput {g}");
    // HTB at the sender's egress (queue_a of the l0 -- sw1 link) at 30 Mbit/s
    let shaped = paced
        .replace(
            "[[links]]\na = \"l0\"\nb = \"sw1\"\n",
            "[[links]]\na = \"l0\"\nb = \"sw1\"\nqueue_a = { kind = \"htb\", rate = \"30Mbps\" }\n",
        )
        .replace(", max_pacing_rate = \"20Mbps\"", "");
    let r = run(&shaped);
    let g = goodput_between(&r.timeseries, 0, 0.5, 2.0);
    assert!((g / (30e6 * PAYLOAD) - 1.0).abs() < 0.03, "shaped goodput {g}");
    let host = r.ports.iter().find(|p| p.node == "l0").expect("host port");
    assert!(host.queue.drops.is_empty(), "backpressure, not drops, at the host: {host:?}");
}

#[test]
fn same_seed_same_results_and_time_series() {
    let s = dumbbell(
        2,
        "50Mbps",
        "5ms",
        "{ kind = \"fifo\", limit_packets = 50 }",
        "duration = \"1s\"\ndrain = \"100ms\"\nseed = 9",
        &(bulk(0, "{ kind = \"tcp-bulk\", cc = \"cubic\" }")
            + &bulk(1, "{ kind = \"tcp-bulk\", cc = \"bbr\" }")),
    );
    let (a, b) = (run(&s), run(&s));
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.timeseries_csv(), b.timeseries_csv());
    assert!(a.timeseries_csv().is_some_and(|c| c.lines().count() > 10));
}

#[test]
fn scenario_errors_name_the_tcp_key() {
    let base = |t: &str, extra: &str| {
        dumbbell(
            1,
            "10Mbps",
            "1ms",
            "{ kind = \"fifo\" }",
            "duration = \"1s\"",
            &format!("[[flows]]\nsrc = \"l0\"\ndst = \"r0\"\nsize = 1502\n{extra}traffic = {t}\n"),
        )
    };
    let err = |s: String| Scenario::from_str_named("x.toml", &s).unwrap_err().to_string();
    let e = err(base("{ kind = \"tcp-bulk\", cc = \"vegas\" }", ""));
    assert!(e.contains("vegas") && e.contains("x.toml:"), "{e}");
    let e = err(base("{ kind = \"tcp-bulk\" }", "count = 3\n"));
    assert!(e.contains("`flows[0].count`"), "{e}");
    let e = err(base("{ kind = \"tcp-rr\", request = 1 }", ""));
    assert!(e.contains("`response`"), "{e}");
    let e = err(base("{ kind = \"tcp-bulk\", window = 3 }", ""));
    assert!(e.contains("window"), "{e}");
    let two = base("{ kind = \"tcp-bulk\" }", "dst_port = 80\n")
        + "[[flows]]\nsrc = \"l0\"\ndst = \"r0\"\nsize = 1502\ndst_port = 80\n\
           traffic = { kind = \"tcp-bulk\" }\n";
    let e = err(two);
    assert!(e.contains("already listens"), "{e}");
    let q = dumbbell(1, "10Mbps", "1ms", "{ kind = \"step-ce\" }", "duration = \"1s\"", "");
    assert!(err(q).contains("exactly one"));
}
