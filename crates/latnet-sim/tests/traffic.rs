//! Traffic sources through the simulator: a Poisson flow's long-run count is its rate whatever
//! its mean gap (fractional or under 1 ns), and a dilated run creates every packet at the
//! undilated instants (docs/scenario.md, `[sim] dilation`).

#![allow(clippy::unwrap_used)]

use latnet_sim::{Results, Scenario, Simulator};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn run_text(src: &str) -> Results {
    let sc = Scenario::from_str_named("traffic.toml", src).unwrap_or_else(|e| panic!("{e}"));
    Simulator::new(sc).run()
}

/// h1 -- s1 -- h2 at 100 Gbit/s, one flow `f` of 64 B frames.
fn line(duration: &str, traffic: &str) -> String {
    format!(
        r#"
[sim]
duration = "{duration}"
[defaults.link]
rate = "100Gbps"
delay = "1us"
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
[[flows]]
name = "f"
src = "h1"
dst = "h2"
size = 64
traffic = {traffic}
"#
    )
}

#[test]
fn a_poisson_flow_sends_its_rate_when_the_mean_gap_is_fractional() {
    // 64 B at 40 Gbit/s for 10 ms: 781,250 frames (12.8 ns apart on average; sd 884)
    let cbr = run_text(&line("10ms", r#"{ kind = "cbr", rate = "40Gbps" }"#));
    assert_eq!(cbr.flows[0].sent, 781_250);
    for seed in [1, 2] {
        let mut src = line("10ms", r#"{ kind = "poisson", rate = "40Gbps" }"#);
        src = src.replacen("[sim]\n", &format!("[sim]\nseed = {seed}\n"), 1);
        let sent = run_text(&src).flows[0].sent;
        assert!(sent.abs_diff(781_250) <= 4 * 884, "seed {seed}: {sent} frames sent");
    }
}

#[test]
fn a_poisson_flow_whose_mean_gap_is_under_a_nanosecond_runs() {
    // 64 B at 10 Tbit/s for 1 us: 19,531 frames on average (0.0512 ns apart; sd 140); time
    // used to stand still at the first instant
    let r = run_text(&line("1us", r#"{ kind = "poisson", rate = "10Tbps" }"#));
    let sent = r.flows[0].sent;
    assert!(sent.abs_diff(19_531) <= 4 * 140, "{sent} frames sent");
}

/// `created_ns` of every packet of a run, by flow and sequence number.
fn created(r: &Results) -> BTreeMap<(String, u64), u64> {
    let csv = r.packets_csv().unwrap_or_else(|| panic!("no per-packet records"));
    let mut lines = csv.lines();
    let head: Vec<_> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| head.iter().position(|&h| h == name).unwrap_or_else(|| panic!("{name}"));
    let (flow, seq, t) = (col("flow"), col("seq"), col("created_ns"));
    lines
        .map(|l| {
            let v: Vec<_> = l.split(',').collect();
            ((v[flow].to_string(), v[seq].parse().unwrap()), v[t].parse().unwrap())
        })
        .collect()
}

#[test]
fn a_dilated_demo_creates_every_packet_at_the_same_instant() {
    // the demo's backup flow is Poisson (1500 B at 88 Mbit/s), its video on/off, its control
    // cbr; dilated 10x, each gap was rounded to ns at 10x the grain and the sums drifted apart
    // (8.8 us by the end of the 2 s); 10 and 8 divide every rate of the demo. Again with each
    // flow's sender jittering up to 37 us (whose draws depended on the dilated bound).
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/demo.toml");
    let demo = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(demo.contains("kind = \"poisson\""), "the demo has a Poisson flow");
    let jittered = demo.replace("[[flows]]\n", "[[flows]]\njitter = \"37us\"\n");
    // (a jittered instant is two roundings, the pattern's and the draw's: within 2 ns)
    for (plain, k, tol) in [(&demo, 10, 1), (&demo, 8, 1), (&jittered, 10, 2), (&jittered, 8, 2)] {
        let dilated = plain.replacen("[sim]\n", &format!("[sim]\ndilation = {k}\n"), 1);
        let (a, b) = (run_text(plain), run_text(&dilated));
        assert_eq!(b.dilation, k);
        for (x, y) in a.flows.iter().zip(&b.flows) {
            assert_eq!((&x.name, x.sent), (&y.name, y.sent), "x{k}");
        }
        let (a, b) = (created(&a), created(&b));
        assert_eq!(a.len(), b.len());
        for ((key, x), (key_b, y)) in a.iter().zip(&b) {
            assert_eq!(key, key_b);
            assert!(x.abs_diff(*y) <= tol, "{key:?}: created at {x} ns, {y} ns dilated x{k}");
        }
    }
}
