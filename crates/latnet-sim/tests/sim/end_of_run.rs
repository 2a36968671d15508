//! The end of a run: what is still queued or on a link counts as `end-of-run` and as nothing
//! else (no queue counts it as handed to its transmitter, marked or dropped), and a port's
//! utilisation counts only the busy time within the run.

use super::run;
use latnet_dataplane::DropReason;
use latnet_sim::Results;

/// h1 -100Mbps,1ms- s1 -10Mbps,1ms- h2 (the second link with `queue`, at `bottleneck`), a CBR
/// flow of `size`-byte frames at `rate` for 100 ms, and no drain: the run ends with packets
/// still queued at s1.
fn base(bottleneck: &str, queue: &str, rate: &str, size: u32) -> String {
    format!(
        r#"
[sim]
duration = "100ms"
drain = "0s"
[output]
packets = true
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
rate = "100Mbps"
delay = "1ms"
[[links]]
a = "s1"
b = "h2"
rate = "{bottleneck}"
delay = "1ms"
queue = {queue}
[[flows]]
name = "f"
src = "h1"
dst = "h2"
size = {size}
traffic = {{ kind = "cbr", rate = "{rate}" }}
"#
    )
}

fn port<'a>(r: &'a Results, node: &str, peer: &str) -> &'a latnet_sim::results::PortResult {
    r.ports.iter().find(|p| p.node == node && p.peer == peer).expect("port")
}

/// Every packet is received or dropped, and every port handed its transmitter exactly the
/// packets it transmitted.
fn assert_accounted(r: &Results, what: &str) {
    for f in &r.flows {
        let drops: u64 = f.drops.values().sum();
        assert_eq!(f.sent, f.received + drops, "{what}: flow {} loses packets", f.name);
        assert_eq!(f.in_flight_at_end, f.drops.get("end-of-run").copied().unwrap_or(0), "{what}");
    }
    for p in &r.ports {
        assert_eq!(
            p.queue.dequeued, p.tx_packets,
            "{what}: port {}->{} counts packets it never sent as dequeued",
            p.node, p.peer
        );
    }
}

#[test]
fn packets_still_queued_at_the_end_are_end_of_run_not_aqm_drops() {
    // 20 Mbit/s into 10: a packet that joins at t leaves at about 2t, so none waits more than
    // 50 ms before the run ends at 100 ms; the 120-odd still waiting then were neither marked
    // nor dropped by the AQM.
    let queue = r#"{ kind = "step-ce", threshold = "50ms", non_ect = "drop" }"#;
    let r = run(&base("10Mbps", queue, "20Mbps", 1000));
    assert_accounted(&r, "step-ce");
    let f = &r.flows[0];
    assert_eq!(f.sent, 250);
    assert_eq!(f.drops.keys().collect::<Vec<_>>(), ["end-of-run"], "{:?}", f.drops);
    assert_eq!(f.dropped, 0);
    assert_eq!(f.in_flight_at_end, f.sent - f.received);
    let p = port(&r, "s1", "h2");
    assert!(p.queue.drops.is_empty() && p.queue.ce_marks == 0, "{:?}", p.queue);
    assert!(p.queue.enqueued - p.queue.dequeued > 100, "{:?}", p.queue);
    let log = r.log.as_ref().expect("packets");
    let ends: Vec<_> = log.packets.iter().filter_map(|p| p.drop).collect();
    assert!(ends.iter().all(|&d| d == DropReason::EndOfRun), "{ends:?}");
}

#[test]
fn queue_counters_stop_where_the_run_stopped_in_every_kind() {
    let queues = [
        r#"{ kind = "fifo" }"#,
        r#"{ kind = "priority", classes = 2 }"#,
        r#"{ kind = "lbf" }"#,
        r#"{ kind = "step-ce", threshold = "50ms", non_ect = "drop" }"#,
        r#"{ kind = "step-ce", threshold_packets = 20 }"#,
        r#"{ kind = "htb", rate = "5Mbps" }"#,
        r#"{ kind = "dualpi2" }"#,
        r#"{ kind = "vdq-csaqm", rate = "10Mbps" }"#,
        r#"{ kind = "pv-marker", queue = { kind = "step-ce", threshold = "50ms", non_ect = "drop" } }"#,
        r#"{ kind = "fq", maxrate = "3Mbps" }"#,
    ];
    for q in queues {
        let mut src = base("10Mbps", q, "20Mbps", 1000);
        if q.contains("\"lbf\"") {
            src += "[lbf]\n"; // s1 runs the LBF forwarder (flows without an SLO pass through)
        }
        let r = run(&src);
        assert_accounted(&r, q);
        let p = port(&r, "s1", "h2");
        assert!(p.queue.enqueued > p.queue.dequeued, "{q}: the run ends with a backlog");
    }
}

#[test]
fn utilisation_counts_only_the_busy_time_within_the_run() {
    // 9000-byte frames every 14.4 ms into a 1 Mbit/s link (72 ms per frame): s1's port is busy
    // from the first frame's arrival to the end of the run, whatever is left of the last frame
    for rate in ["1Mbps", "1bps"] {
        let r = run(&base(rate, r#"{ kind = "fifo" }"#, "5Mbps", 9000));
        let log = r.log.as_ref().expect("hops");
        let first = log.hops.iter().find(|h| h.hop == 1).expect("s1 sent").start_tx_ns;
        assert_eq!(first, 1_720_000, "720 us of serialization at 100 Mbit/s and 1 ms");
        let u = port(&r, "s1", "h2").utilisation;
        let want = (r.end_ns - first) as f64 / r.end_ns as f64;
        assert!((u - want).abs() < 1e-12, "{rate}: utilisation {u}, busy {want} of the run");
        // h1 sends 7 frames of 720 us, all within the run
        let u = port(&r, "h1", "s1").utilisation;
        assert!((u - 7.0 * 720e3 / 100e6).abs() < 1e-12, "{rate}: {u}");
        assert!(r.ports.iter().all(|p| (0.0..=1.0).contains(&p.utilisation)));
    }
}
