//! Latency-Based Forwarding: the seed's six multi-hop tests cell by cell (experiments/lbf),
//! the variants (carry modes, carriers, budget skew, conventions, upper-bound policies, damper),
//! and malformed blocks.
//!
//! The paper's numbers come from a real-time run (the PoC forwards over Linux UDP sockets and
//! reads microsecond clocks), ours from exact integer-nanosecond virtual time. The seed's tables
//! are compared cell by cell with the tolerance each test can honestly be held to; see
//! `docs/lbf.md` for the measured differences.
#![allow(clippy::unwrap_used)]

use latnet_dataplane::{Meta, Packet};
use latnet_sim::{Results, Scenario, Simulator};
use latnet_units::Time;
use std::path::PathBuf;

fn experiment(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/lbf").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn run_text(src: &str) -> Results {
    let sc = Scenario::from_str_named("lbf.toml", src).unwrap_or_else(|e| panic!("{e}"));
    Simulator::new(sc).run()
}

/// min / mean / max (us) at Q1..Q4 and the receiver, for flow F1.
fn table(r: &Results) -> Vec<[f64; 3]> {
    let f = &r.flows[0];
    assert_eq!(f.name, "F1");
    let mut rows: Vec<[f64; 3]> = f.hops[1..]
        .iter()
        .map(|h| {
            let l = h.latency_ns.as_ref().unwrap();
            [l.min as f64 / 1e3, l.mean / 1e3, l.max as f64 / 1e3]
        })
        .collect();
    let l = f.latency_ns.as_ref().unwrap();
    rows.push([l.min as f64 / 1e3, l.mean / 1e3, l.max as f64 / 1e3]);
    assert_eq!(rows.len(), 5, "Q1..Q4 and the receiver");
    rows
}

/// The paper's tables (us): Fig. 7, Fig. 8 and the reference notes for the empty Fig. 9.
const PAPER: [[[f64; 3]; 5]; 6] = [
    [
        [100., 170., 252.],
        [200., 270., 352.],
        [300., 370., 452.],
        [400., 470., 552.],
        [500., 570., 652.],
    ],
    [
        [150., 210., 287.],
        [300., 339., 391.],
        [450., 469., 495.],
        [600., 600., 600.],
        [700., 700., 700.],
    ],
    [
        [100., 170., 252.],
        [200., 304., 379.],
        [300., 425., 522.],
        [400., 560., 685.],
        [500., 660., 785.],
    ],
    [
        [150., 210., 287.],
        [300., 377., 457.],
        [450., 522., 600.],
        [600., 662., 772.],
        [700., 762., 872.],
    ],
    [
        [200., 254., 324.],
        [400., 463., 532.],
        [600., 647., 709.],
        [800., 823., 892.],
        [900., 923., 992.],
    ],
    [
        [250., 299., 362.],
        [500., 548., 607.],
        [750., 787., 833.],
        [1000., 1005., 1053.],
        [1100., 1105., 1153.],
    ],
];

/// Largest |ours - paper| over the given columns (0 min, 1 mean, 2 max).
fn worst(ours: &[[f64; 3]], paper: &[[f64; 3]; 5], cols: &[usize]) -> f64 {
    let mut w: f64 = 0.0;
    for (o, p) in ours.iter().zip(paper) {
        for &c in cols {
            w = w.max((o[c] - p[c]).abs());
        }
    }
    w
}

#[test]
fn seed_tests_2_5_6_match_every_cell_within_a_microsecond_and_a_half() {
    for t in [2usize, 5, 6] {
        let ours = table(&run_text(&experiment(&format!("test{t}.toml"))));
        let w = worst(&ours, &PAPER[t - 1], &[0, 1, 2]);
        assert!(w <= 1.5, "test {t}: worst cell off by {w:.2} us: {ours:?}");
        // What LBF guarantees exactly: the lower bound is met to the nanosecond by the packets
        // that were never delayed, at every hop (lb - remaining path, split over the hops).
        let lb = [0., 700., 0., 0., 900., 1100.][t - 1];
        for (k, row) in ours.iter().enumerate() {
            let expect = 100.0 * (k as f64 + 1.0) + (lb - 500.0) * (k as f64 + 1.0) / 4.0;
            let expect = if k == 4 { lb } else { expect };
            assert_eq!(row[0], expect, "test {t} row {k} minimum");
        }
    }
    // Test 2: with nothing competing after Q1, the last hop absorbs all variation.
    let t2 = table(&run_text(&experiment("test2.toml")));
    assert_eq!(t2[3], [600.0, 600.0, 600.0]);
    assert_eq!(t2[4], [700.0, 700.0, 700.0]);
}

/// Why tests 2, 5 and 6 cannot all be cell-exact in exact arithmetic. In test 2 nothing competes
/// after Q1 and F1's packets never queue behind each other (their eligible times stay > 24 us
/// apart), so every packet's Q2 latency is an affine function of its Q1 latency:
/// L2 = L1 + 100 + (700 - (L1 + 100 + 300)) / 3 = 200 + 2/3 L1, and L3 = 300 + L2 / 2. Means
/// and extremes follow the same maps. Our model obeys them to the nanosecond; the paper's cells
/// (Q1 mean 210, Q2 mean 339) cannot both come from them under any one rounding rule.
#[test]
fn test_2_is_affine_after_q1_and_the_papers_means_contradict_that() {
    let t2 = table(&run_text(&experiment("test2.toml")));
    let (q1, q2, q3) = (t2[0], t2[1], t2[2]);
    for ((l1, l2), l3) in q1.iter().zip(q2).zip(q3) {
        let want2 = 200.0 + 2.0 / 3.0 * l1;
        let want3 = 300.0 + want2 / 2.0;
        assert!((l2 - want2).abs() < 2e-3, "Q2: {l2} vs {want2}");
        assert!((l3 - want3).abs() < 2e-3, "Q3: {l3} vs {want3}");
    }
    type Rule = fn(f64) -> f64;
    let rules: [(&str, Rule); 3] =
        [("round", f64::round), ("floor", f64::floor), ("ceil", f64::ceil)];
    let (m1, m2) = (PAPER[1][0][1], PAPER[1][1][1]);
    for (name, r) in rules {
        // every Q1 mean that this rule would print as 210, in 1 ns steps
        let hits: Vec<f64> = (208_000..212_000)
            .map(|ns| ns as f64 / 1e3)
            .filter(|&l1| r(l1) == m1 && r(200.0 + 2.0 / 3.0 * l1) == m2)
            .collect();
        assert!(hits.is_empty(), "{name}: a Q1 mean {hits:?} would print as 210 and 339");
    }
}

#[test]
fn seed_tests_1_and_3_depend_on_the_tie_rule_as_documented() {
    for t in [1usize, 3] {
        let src = experiment(&format!("test{t}.toml"));
        assert!(src.contains("tie_break = \"flow-desc\""));
        // The competing flow wins ties: means and maxima as in the paper, minimum 124 at Q1
        // (F1's base packets wait behind F2's, sent at the same instants).
        let desc = table(&run_text(&src));
        let w = worst(&desc, &PAPER[t - 1], &[1, 2]);
        assert!(w <= 1.0, "test {t} (flow-desc): means / maxima off by {w:.2} us: {desc:?}");
        assert_eq!(desc[0][0], 124.0);
        // F1 wins ties: every minimum as in the paper, the maximum at Q1 is 24 us lower.
        let asc = table(&run_text(&src.replace("\"flow-desc\"", "\"flow-asc\"")));
        assert_eq!(worst(&asc, &PAPER[t - 1], &[0]), 0.0, "test {t} (flow-asc) minima: {asc:?}");
        assert_eq!(asc[0][2], 228.0);
        assert!((asc[0][1] - 165.2).abs() < 0.05, "Q1 mean {}", asc[0][1]);
    }
}

#[test]
fn seed_test_4_within_ten_microseconds() {
    let ours = table(&run_text(&experiment("test4.toml")));
    let w = worst(&ours, &PAPER[3], &[0, 1, 2]);
    assert!(w <= 10.0, "test 4: worst cell off by {w:.2} us: {ours:?}");
}

fn short(src: &str) -> String {
    src.replace("duration = \"10s\"", "duration = \"200ms\"")
}

#[test]
fn the_three_ways_to_know_the_latency_so_far_and_both_carriers_agree() {
    let base = short(&experiment("test4.toml"));
    let reference = table(&run_text(&base));
    for slo in [
        "slo = { lower = \"700us\", carry = \"timestamp\" }",
        "slo = { lower = \"700us\", carry = \"rest-slo\" }",
        "slo = { lower = \"700us\", encap = \"ipv6\" }",
        "slo = { lower = \"700us\", carry = \"rest-slo\", encap = \"ipv6\" }",
    ] {
        let r = run_text(&base.replace("slo = { lower = \"700us\" }", slo));
        assert_eq!(table(&r), reference, "{slo}");
        let l = r.lbf.as_ref().unwrap();
        assert!(l.switches.iter().all(|s| s.counters.malformed == 0));
        assert_eq!(l.switches[0].counters.lbf_packets, r.flows[0].sent, "{slo}");
    }
}

#[test]
fn skewing_the_budget_sends_earlier_and_still_meets_the_lower_bound() {
    let base = short(&experiment("test5.toml"));
    let eq = table(&run_text(&base));
    let skew =
        table(&run_text(&base.replace("budget = \"equal\"", "budget = \"skew\"\nskew = 1.0")));
    // At FWD1 the share of the 400 us remainder is 400/7 instead of 400/4.
    assert_eq!(skew[0][0], 157.142, "100 us + floor(400 us / 7) in ns");
    assert!(skew[0][1] < eq[0][1]);
    assert_eq!(skew[4][0], 900.0);
    assert!(skew[4][0] >= eq[4][0] - 1e-9);
}

#[test]
fn the_physical_convention_counts_serialization_and_still_meets_the_bound() {
    let src = short(&experiment("test5.toml"))
        .replace("latency = \"exclude-serialization\"", "latency = \"physical\"")
        .replace("switching = \"cut-through\"", "switching = \"store-and-forward\"");
    let r = run_text(&src);
    assert_eq!(
        (r.latency_convention.as_str(), r.switching.as_str()),
        ("physical", "store-and-forward")
    );
    let l = r.lbf.as_ref().unwrap();
    assert_eq!(l.latency_convention, "physical");
    let t = table(&r);
    // Creation to last bit: never below the 900 us lower bound, and exactly there when unhindered.
    assert_eq!(t[4][0], 900.0);
    // At FWD1: 24 us serialization + 100 us + (900 - 124 - 4 x 124) / 4.
    assert_eq!(t[0][0], 124.0 + 70.0);
}

/// A notification record says, whichever way the packet carries its SLO, what the packet would
/// at least arrive with and its end-to-end upper bound: under `rest-slo` the block carries
/// only what is left of the bounds, and the switch adds back what the flow already spent.
#[test]
fn notifications_are_end_to_end_whatever_carries_the_slo() {
    let text = short(&experiment("upper-mark.toml"));
    let notes = |carry: &str| {
        let slo = format!("slo = {{ lower = \"700us\", upper = \"750us\", carry = \"{carry}\" }}");
        let r = run_text(&text.replace("slo = { lower = \"700us\", upper = \"750us\" }", &slo));
        r.lbf.unwrap_or_else(|| panic!("{carry}: no LBF results")).notifications
    };
    let so_far = notes("latency-so-far");
    assert!(!so_far.is_empty());
    assert!(so_far.iter().all(|n| n.upper_ns == 750_000 && n.projected_ns > n.upper_ns));
    for carry in ["timestamp", "rest-slo"] {
        let other = notes(carry);
        assert_eq!(other.len(), so_far.len(), "{carry}");
        for (a, b) in other.iter().zip(&so_far) {
            assert_eq!(a, b, "{carry}");
        }
    }
}

#[test]
fn a_tight_upper_bound_drops_early_or_marks_late() {
    let drop = run_text(&short(&experiment("upper-drop.toml")));
    let f = &drop.flows[0];
    let lat = f.latency_ns.as_ref().unwrap();
    assert!(lat.max <= 750_000, "nothing arrives above the upper bound: {}", lat.max);
    let l = drop.lbf.as_ref().unwrap();
    let lf = &l.flows[0];
    let early: u64 = lf.early_drops.values().sum();
    let expired: u64 = lf.expired.values().sum();
    assert!(early + expired > 0);
    assert_eq!(f.dropped, early + expired, "every F1 drop is an LBF upper-bound drop");
    assert_eq!(f.sent, f.received + f.dropped + f.in_flight_at_end);
    assert_eq!(lf.late_marked + lf.late_unmarked, 0);
    let per_switch: u64 = l.switches.iter().map(|s| s.counters.early_drops).sum();
    assert_eq!(per_switch, early);

    let mark = run_text(&short(&experiment("upper-mark.toml")));
    let f = &mark.flows[0];
    assert_eq!((f.dropped, f.received + f.in_flight_at_end), (0, f.sent));
    let l = mark.lbf.as_ref().unwrap();
    let lf = &l.flows[0];
    assert!(lf.late_marked > 0);
    assert_eq!(lf.late_unmarked, 0, "every late packet was marked on the way");
    assert_eq!(lf.marked_but_on_time, 0, "no packet was marked that could still make it");
    let marked: u64 = l.switches.iter().map(|s| s.counters.marked_late).sum();
    assert_eq!(marked, lf.late_marked);
    assert_eq!(l.notifications_total, marked);
    assert!(l.notifications.iter().all(|n| n.flow == "F1" && n.projected_ns > n.upper_ns));
    assert!(l.notifications.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
}

#[test]
fn the_damper_makes_every_hop_cost_its_bound() {
    let r = run_text(&short(&experiment("damper.toml")));
    let t = table(&r);
    // 100 us to FWD1; then per hop B = 250 us + 100 us link; the receiver applies the last residue.
    assert_eq!(t[4], [1500.0, 1500.0, 1500.0]);
    let l = r.lbf.as_ref().unwrap();
    assert!(l.switches.iter().all(|s| s.counters.damper_violations == 0));
    // A bound below what FIFO queueing needs is violated, and the violations are counted.
    let tight = run_text(&short(&experiment("damper.toml")).replace("\"250us\"", "\"20us\""));
    let v: u64 =
        tight.lbf.as_ref().unwrap().switches.iter().map(|s| s.counters.damper_violations).sum();
    assert!(v > 0);
}

#[test]
fn a_damper_flow_through_a_switch_without_a_damper_bound_is_refused() {
    let base = short(&experiment("damper.toml"));
    let unbound = "name = \"FWD3\"\nkind = \"switch\"\n";
    let cases = [
        (
            format!("{unbound}lbf = {{ damper_bound = \"0us\" }}\n"),
            "switch \"FWD3\" on its path has no damper bound (0): set `lbf.damper_bound` or \
             `nodes[3].lbf.damper_bound`",
        ),
        (
            format!("{unbound}lbf = {{ enabled = false }}\n"),
            "switch \"FWD3\" on its path does not run the LBF forwarder",
        ),
    ];
    for (node, want) in &cases {
        assert!(base.contains(unbound));
        // FWD3 keeps its LBF queues out of the way of the queue check: FIFO toward FWD4.
        let text = base.replacen(unbound, node, 1);
        let text = text.replace("queue = { kind = \"lbf\"", "queue = { kind = \"fifo\"");
        let e = Scenario::from_str_named("damper.toml", &text).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("flows[0].slo"), "{e}");
        assert!(e.message.contains("flow \"F1\" carries a damper residue"), "{e}");
        assert!(e.message.contains(*want), "{e}");
        assert!(e.line_col.is_some(), "{e}");
    }
    // A best-effort flow may cross it: only damper-mode flows need the bound.
    let text = base.replacen(unbound, &cases[0].0, 1).replace(", carry = \"damper\"", "");
    Scenario::from_str_named("damper.toml", &text).unwrap();
}

/// For each of `flows` (names), how long after its creation each of its frames became
/// eligible at `node` (ns): the shortest and the longest.
fn creation_to_eligible(r: &Results, node: &str, flows: &[&str]) -> Vec<(u64, u64)> {
    let log = r.log.as_ref().unwrap();
    let created: std::collections::HashMap<u64, u64> =
        log.packets.iter().map(|p| (p.id, p.created_ns)).collect();
    let n = r.nodes.iter().position(|x| x.name == node).unwrap() as u32;
    flows
        .iter()
        .map(|name| {
            let f = r.flows.iter().position(|x| x.name == *name).unwrap() as u32;
            let d: Vec<u64> = log
                .hops
                .iter()
                .filter(|h| h.node == n && h.flow == f)
                .map(|h| h.eligible_ns - created[&h.id])
                .collect();
            assert!(d.len() > 1000, "{name}: {} frames at {node}", d.len());
            (*d.iter().min().unwrap(), *d.iter().max().unwrap())
        })
        .collect()
}

#[test]
fn a_senders_damper_holds_every_frame_to_its_bound_serialization_included() {
    // The gLBF validation model: routers 1-3 are senders whose own FIFO is the first hop, with
    // the physical convention and store-and-forward links, so the residue subtracts the
    // serialization too and each router's frames enter router 4's FIFO exactly B_n after they
    // entered router n's, however long they queued (up to 2.1 ms) and whatever their size.
    let src = experiment("glbf-validation.toml") + "\n[output]\npackets = true\n";
    let r = run_text(&src);
    let got = creation_to_eligible(&r, "Rtr4", &["F3", "F6", "F7"]);
    let want = [2_693_334, 2_765_334, 3_101_334];
    assert_eq!(got, want.map(|b| (b, b)).to_vec());
    let l = r.lbf.as_ref().unwrap();
    assert!(l.switches.iter().all(|s| s.counters.damper_violations == 0));
    assert!(l.flows.iter().all(|f| f.sender_damper_violations == 0));
    // A sender's bound below its FIFO's worst case is violated, counted per flow, and those
    // frames arrive later than the bound says.
    let tight = run_text(&src.replace("\"2693334ns\"", "\"2000000ns\""));
    let l = tight.lbf.as_ref().unwrap();
    let v: Vec<u64> = l.flows.iter().map(|f| f.sender_damper_violations).collect();
    assert!(v[..3].iter().all(|&n| n > 0) && v[3..].iter().all(|&n| n == 0), "{v:?}");
    let (lo, hi) = creation_to_eligible(&tight, "Rtr4", &["F3"])[0];
    assert!(lo == 2_000_000 && hi > 2_000_000, "{lo} .. {hi}");
}

#[test]
fn fib_is_computed_from_link_delays_and_can_be_overridden() {
    let src = short(&experiment("test2.toml"));
    let sc = Scenario::from_str_named("t2.toml", &src).unwrap();
    let sim = Simulator::new(sc.clone());
    let fib = latnet_sim::lbf::LbfFib::build(&sc, sim.topology());
    let (r1, fwd) =
        (sc.node_index("R1").unwrap(), |i: usize| sc.node_index(&format!("FWD{i}")).unwrap());
    for i in 1..=4usize {
        let route = fib.route(fwd(i), r1).unwrap();
        assert_eq!(
            (route.hops, route.min_latency.as_micros()),
            (5 - i as u32, 100 * (5 - i as u64))
        );
    }
    // Claiming one hop and no remaining latency at FWD1 makes it take the whole budget there.
    let over = src.replace(
        "[lbf]\nbudget = \"equal\"\n",
        "[lbf]\nbudget = \"equal\"\n[[lbf.fib]]\nnode = \"FWD1\"\ndst = \"R1\"\nhops = 1\nmin_latency = 0\n",
    );
    let t = table(&run_text(&over));
    assert_eq!(t[0][0], 700.0);
    assert_eq!(t[4][0], 1100.0, "then 4 x 100 us of links still to go");
}

#[test]
fn a_malformed_lbf_block_is_dropped_and_counted_never_a_panic() {
    let src = short(&experiment("test2.toml"));
    let sc = Scenario::from_str_named("t2.toml", &src).unwrap();
    let mut sim = Simulator::new(sc.clone());
    let fwd1 = sc.node_index("FWD1").unwrap();
    let s1 = sc.node_index("S1").unwrap();
    // The S1 -> FWD1 port (link 0, a to b).
    let port = sim.topology().node_ports[s1][0];
    assert_eq!(sim.topology().ports[port].peer, fwd1);
    let (good, off) = latnet_sim::lbf::template(
        s1,
        sc.node_index("R1").unwrap(),
        sc.nodes[s1].address,
        sc.nodes[sc.node_index("R1").unwrap()].address,
        0,
        1,
        2,
        300,
        &sc.flows[0].slo.unwrap(),
    )
    .unwrap();
    let mut bad = Vec::new();
    for (i, (at, v)) in
        [(off, 0x27u8), (off + 1, 0x01), (off - 2, 27), (off + 9, 0xff)].into_iter().enumerate()
    {
        let mut f = good.clone();
        f[at] = v;
        if at == off + 9 {
            // lower bound above an upper bound
            f[off + 1] |= 0x40;
        }
        bad.push((i, f));
    }
    bad.push((9, good[..good.len() - 3].to_vec())); // shim cut short
    let n = bad.len() as u64;
    for (i, f) in bad {
        let meta = Meta { id: 1_000_000 + i as u64, flow: 0, ..Meta::default() };
        sim.inject(Time::from_nanos(1 + i as u64), port, Packet::new(f, 0, meta))
            .expect("injected");
    }
    let r = sim.run();
    let node = r.nodes.iter().find(|n| n.name == "FWD1").unwrap();
    assert_eq!(node.drops.get("lbf-malformed"), Some(&n));
    let l = r.lbf.as_ref().unwrap();
    assert_eq!(l.switches[0].node, "FWD1");
    assert_eq!(l.switches[0].counters.malformed, n);
}

#[test]
fn scenario_errors_name_the_key() {
    let base = short(&experiment("test2.toml"));
    let cases = [
        ("slo = { lower = \"700us\" }", "slo = { lower = \"700us\", upper = \"600us\" }", "flows[0].slo"),
        ("slo = { lower = \"700us\" }", "slo = { lower = \"700us\", carry = \"psychic\" }", "unknown variant `psychic`"),
        ("size = 300\ntraffic = { kind = \"onoff\", base_rate = \"1Mbps\", burst_rate = \"55Mbps\"", "size = 60\ntraffic = { kind = \"onoff\", base_rate = \"1Mbps\", burst_rate = \"55Mbps\"", "needs at least 74 bytes"),
        ("[lbf]\nbudget = \"equal\"\n", "[lbf]\nbudget = \"equal\"\nskew = -1.0\n", "lbf.skew"),
        ("[lbf]\nbudget = \"equal\"\n", "[lbf]\nbudget = \"equal\"\n[[lbf.fib]]\nnode = \"S1\"\ndst = \"R1\"\nhops = 1\nmin_latency = 0\n", "lbf.fib[0].node"),
        ("[lbf]\nbudget = \"equal\"\n", "[lbf]\nbudget = \"equal\"\n[[lbf.fib]]\nnode = \"FWD1\"\ndst = \"R1\"\nhops = 0\nmin_latency = 0\n", "lbf.fib[0].hops"),
        ("name = \"S1\"\nkind = \"host\"\n", "name = \"S1\"\nkind = \"host\"\nlbf = { budget = \"skew\" }\n", "nodes[0].lbf"),
        ("name = \"S1\"\nkind = \"host\"\n", "name = \"S1\"\nkind = \"host\"\nlbf = { damper_bound = \"1ms\", udp_shim = false }\n", "a host takes only `damper_bound`"),
        ("name = \"FWD1\"\nkind = \"switch\"\n", "name = \"FWD1\"\nkind = \"switch\"\nlbf = { skew = 2000.0 }\n", "nodes[1].lbf.skew"),
        ("[lbf]\nbudget = \"equal\"\n", "[lbf]\nbudget = \"equal\"\nswitches = \"some\"\n", "lbf.switches"),
    ];
    for (from, to, want) in cases {
        assert!(base.contains(from), "{from}");
        let e = Scenario::from_str_named("t.toml", &base.replacen(from, to, 1)).unwrap_err();
        assert!(e.to_string().contains(want), "{want}: {e}");
        assert!(e.line_col.is_some(), "{e}");
    }
}

#[test]
fn lbf_runs_are_deterministic_and_labelled() {
    let src = short(&experiment("upper-mark.toml"));
    let a = run_text(&src).to_json();
    let b = run_text(&src).to_json();
    assert_eq!(a, b);
    assert!(a.contains("\"switching\": \"cut-through\""));
    assert!(a.contains("\"latency_convention\": \"exclude-serialization\""));
    assert!(a.contains("\"lbf\": {"));
    // Without LBF switches, LBF queues would be FIFOs: refused by name.
    let plain = src
        .replace("[lbf]\nbudget = \"equal\"\nupper = \"mark\"\n", "")
        .replace("slo = { lower = \"700us\", upper = \"750us\" }", "");
    let e = Scenario::from_str_named("lbf.toml", &plain).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("links[0].queue_b"), "{e}");
    assert!(e.message.contains("switch \"FWD1\" has an LBF queue toward \"S1\""), "{e}");
    // A run without LBF switches or SLO flows has no lbf section.
    let plain = plain.replace("kind = \"lbf\"", "kind = \"fifo\"");
    let p = run_text(&plain);
    assert!(p.lbf.is_none());
    assert!(!p.to_json().contains("\"lbf\""));
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    fn small() -> Scenario {
        let src = short(&experiment("upper-drop.toml"))
            .replace("duration = \"200ms\"", "duration = \"1ms\"")
            .replace("drain = \"100ms\"", "drain = \"20ms\"");
        Scenario::from_str_named("small.toml", &src).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Frames whose LBF block (or anything after the UDP header) was overwritten or cut,
        /// and raw bytes, injected into FWD1: dropped with a reason or forwarded; every packet
        /// accounted for. The fuzz target `lbf_switch` does the same without a case limit.
        #[test]
        fn an_lbf_switch_never_panics_on_any_frame(
            edits in proptest::collection::vec((0usize..40, any::<u8>()), 0..8),
            cut in proptest::option::of(0usize..80),
            raw in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..120)),
        ) {
            let sc = small();
            let mut sim = Simulator::new(sc.clone());
            let (s1, r1) = (sc.node_index("S1").unwrap(), sc.node_index("R1").unwrap());
            let (mut f, off) = latnet_sim::lbf::template(
                s1, r1, sc.nodes[s1].address, sc.nodes[r1].address, 0, 1, 2, 300,
                &sc.flows[0].slo.unwrap(),
            ).unwrap();
            for (at, v) in edits {
                if let Some(x) = f.get_mut(off - 4 + at) { *x = v; }
            }
            if let Some(c) = cut { f.truncate(c); }
            if let Some(r) = raw { f = r; }
            let port = sim.topology().node_ports[s1][0];
            let meta = Meta { id: 1 << 40, flow: 0, ..Meta::default() };
            sim.inject(Time::from_nanos(1), port, Packet::new(f, 0, meta)).expect("injected");
            let r = sim.run();
            let fl = &r.flows[0];
            prop_assert_eq!(fl.sent + 1, fl.received + fl.dropped + fl.in_flight_at_end);
        }
    }
}

#[test]
fn a_pcap_of_every_link_shows_the_lbf_block_on_the_wire() {
    let src = short(&experiment("test2.toml")) + "\n[output]\npcap = true\n";
    let r = run_text(&src);
    assert_eq!(r.pcaps.len(), r.ports.len(), "one capture per egress port");
    let f1_dst = latnet_sim::Scenario::from_str_named("t.toml", &src).unwrap().flows[0].dst_port;
    let mut per_hop_so_far = Vec::new();
    for ((name, capture), port) in r.pcaps.iter().zip(&r.ports) {
        assert_eq!(name, &format!("{}-{}.pcap", port.node, port.peer));
        let recs = latnet_sim::pcap::records(capture).unwrap();
        assert_eq!(recs.len() as u64, port.tx_packets, "{name}: every frame the port sent");
        // one frame at a time on a 100 Mbit/s link: starts at least 24 us apart
        assert!(recs.windows(2).all(|w| w[1].at_ns >= w[0].at_ns + 24_000), "{name}");
        let mut so_far = Vec::new();
        for rec in &recs {
            assert_eq!(rec.wire_len, 300, "{name}");
            let h = latnet_wire::parse_headers(rec.bytes).unwrap();
            let lbf = latnet_wire::lbf::locate(rec.bytes, &h, true).unwrap();
            let udp_dst = u16::from_be_bytes([rec.bytes[36], rec.bytes[37]]);
            if udp_dst == f1_dst {
                let l = lbf.expect("F1 carries an LBF block");
                assert_eq!(l.repr.lower_ns, 700_000);
                so_far.push(l.repr.value_ns);
            } else {
                assert!(lbf.is_none(), "{name}: F2 is best effort");
            }
        }
        if port.node.starts_with('S') && port.peer == "FWD1" && !so_far.is_empty() {
            per_hop_so_far.push((0, so_far));
        } else if let Some(k) = port.node.strip_prefix("FWD").and_then(|k| k.parse::<usize>().ok())
        {
            if !so_far.is_empty() {
                per_hop_so_far.push((k, so_far));
            }
        }
    }
    // F1's latency-so-far field as it leaves each node, the outgoing link's delay included: one
    // link delay from the sender (F1 never waits at its own NIC here), growing by at least a link
    // delay per hop, and exactly the 700 us lower bound from FWD4 (test 2's receiver: 700 / 700 /
    // 700 us)
    per_hop_so_far.sort();
    let hops: Vec<usize> = per_hop_so_far.iter().map(|(k, _)| *k).collect();
    assert_eq!(hops, [0, 1, 2, 3, 4]);
    assert!(per_hop_so_far[0].1.iter().all(|&v| v == 100_000));
    for w in per_hop_so_far.windows(2) {
        assert_eq!(w[0].1.len(), w[1].1.len());
        for (a, b) in w[0].1.iter().zip(&w[1].1) {
            assert!(b >= &(a + 100_000), "hop {}: {a} -> {b}", w[1].0);
        }
    }
    assert!(per_hop_so_far[4].1.iter().all(|&v| v == 700_000));
}

/// Time dilation (`[sim] dilation`) runs a scenario k times slower and reports it in the
/// scenario's own time: in the simulator, where everything scales, the seed's test 4 and the
/// upper-bound runs (early drops, marks, notifications) come out as without dilation: the same
/// counts per flow, port, switch and reason, and every packet's instants within 1 ns (the
/// budgets' integer divisions round at a k times finer grain), so every minimum, mean and
/// maximum too (percentiles within the histogram's resolution). Dilation is refused where
/// something would not scale, naming the key.
#[test]
fn a_dilated_run_is_the_same_run_slower() {
    /// Rows of CSV `a` and `b` agree: text fields equal, numbers within 1.
    fn same_rows(a: &str, b: &str, what: &str) {
        assert_eq!(a.lines().count(), b.lines().count(), "{what}");
        for (x, y) in a.lines().zip(b.lines()) {
            for (u, v) in x.split(',').zip(y.split(',')) {
                match (u.parse::<u64>(), v.parse::<u64>()) {
                    (Ok(u), Ok(v)) => assert!(u.abs_diff(v) <= 1, "{what}: {x} / {y}"),
                    _ => assert_eq!(u, v, "{what}: {x} / {y}"),
                }
            }
        }
    }
    fn close(a: &latnet_sim::stats::Summary, b: &latnet_sim::stats::Summary, what: &str) {
        assert_eq!(a.count, b.count, "{what}");
        assert!(a.min.abs_diff(b.min) <= 1 && a.max.abs_diff(b.max) <= 1, "{what}: {a:?} {b:?}");
        assert!((a.mean - b.mean).abs() <= 1.0, "{what}: {a:?} {b:?}");
        for (x, y) in [(a.p50, b.p50), (a.p90, b.p90), (a.p99, b.p99), (a.p999, b.p999)] {
            assert!(x.abs_diff(y) <= 2 + x / 500, "{what}: {a:?} {b:?}");
        }
    }
    for (name, k) in [("test4.toml", 20), ("upper-mark.toml", 8), ("upper-drop.toml", 1000)] {
        let plain =
            format!("{}\n[output]\npackets = true\nqueues = \"1ms\"\n", short(&experiment(name)));
        let dilated = plain.replacen("[sim]\n", &format!("[sim]\ndilation = {k}\n"), 1);
        let sc = Scenario::from_str_named("d.toml", &dilated).unwrap_or_else(|e| panic!("{e}"));
        let want = latnet_units::Duration::from_millis(200).saturating_mul(u64::from(k));
        assert_eq!(sc.sim.duration, want, "{name}");
        assert_eq!(sc.links[0].rate.bps() * u64::from(k), 100_000_000, "{name}");
        let (a, b) = (run_text(&plain), Simulator::new(sc).run());
        assert_eq!((a.dilation, b.dilation), (1, k));
        assert_eq!((a.duration_ns, a.end_ns), (b.duration_ns, b.end_ns), "{name}");
        for (x, y) in a.flows.iter().zip(&b.flows) {
            let what = format!("{name} {}", x.name);
            assert_eq!((x.sent, x.received, &x.drops), (y.sent, y.received, &y.drops), "{what}");
            assert!((x.throughput_bps / y.throughput_bps - 1.0).abs() < 1e-6, "{what}");
            close(x.latency_ns.as_ref().unwrap(), y.latency_ns.as_ref().unwrap(), &what);
            assert_eq!(x.hops.len(), y.hops.len(), "{what}");
            for (h, g) in x.hops.iter().zip(&y.hops) {
                close(h.latency_ns.as_ref().unwrap(), g.latency_ns.as_ref().unwrap(), &what);
            }
        }
        for (x, y) in a.ports.iter().zip(&b.ports) {
            assert_eq!((x.rate_bps, x.tx_packets), (y.rate_bps, y.tx_packets), "{name}");
            assert_eq!(x.queue.drops, y.queue.drops, "{name}");
        }
        let (la, lb) = (a.lbf.as_ref().unwrap(), b.lbf.as_ref().unwrap());
        let json = |v: &latnet_sim::lbf::LbfResults| {
            serde_json::to_string(&(&v.switches, &v.flows)).unwrap()
        };
        assert_eq!(json(la), json(lb), "{name}");
        assert_eq!(la.notifications_total, lb.notifications_total, "{name}");
        for (x, y) in la.notifications.iter().zip(&lb.notifications) {
            assert_eq!(
                (&x.flow, x.seq, &x.node, x.upper_ns),
                (&y.flow, y.seq, &y.node, y.upper_ns)
            );
            assert!(x.time_ns.abs_diff(y.time_ns) <= 1, "{name}: {x:?} {y:?}");
        }
        same_rows(&a.packets_csv().unwrap(), &b.packets_csv().unwrap(), name);
        same_rows(&a.hops_csv().unwrap(), &b.hops_csv().unwrap(), name);
        assert_eq!(a.queue_series, b.queue_series, "{name}");
        assert!(a.flows[0].received > 100 || name == "upper-drop.toml", "{name}");
    }
    let base = short(&experiment("test4.toml"));
    let dil = |s: &str| s.replacen("[sim]\n", "[sim]\ndilation = 10\n", 1);
    let cases = [
        ("[sim]\n", "[sim]\ndilation = 0\n", "`sim.dilation`: expected an integer factor from 1 to 1000, got 0"),
        ("[sim]\n", "[sim]\ndilation = \"fast\"\n", "sim.dilation"),
        ("traffic = { kind = \"onoff\", base_rate = \"1Mbps\", burst_rate = \"57Mbps\", period = \"10ms\", burst = \"1ms\" }", "traffic = { kind = \"tcp-bulk\", cc = \"cubic\" }", "`flows[1].traffic`: a TCP flow cannot be dilated"),
        ("queue = { kind = \"lbf\", limit_packets = 1000 }", "queue = { kind = \"htb\", rate = \"10Mbps\" }", "`links[0].queue_a`: a queue (here or from `defaults.queue`) other than"),
    ];
    for (from, to, want) in cases {
        assert!(base.contains(from), "{from}");
        let text = if to.contains("dilation") {
            base.replacen(from, to, 1)
        } else {
            dil(&base.replacen(from, to, 1))
        };
        let e = Scenario::from_str_named("t.toml", &text).unwrap_err();
        assert!(e.to_string().contains(want), "{want}: {e}");
    }
    let e = Scenario::from_str_named("t.toml", &format!("{}\n[output]\npcap = true\n", dil(&base)));
    assert!(e.unwrap_err().to_string().contains("`output.pcap`: a packet capture"));
}

#[test]
fn under_cut_through_the_slowest_link_bounds_what_remains() {
    // h1 -1G- s1 -10M- s2 -1G- h2, cut-through, physical latency: a 1000-byte frame is whole at
    // h2 no sooner than the links' delays (30 us) plus its 800 us on the 10 Mbit/s link,
    // whatever the faster links do. An upper bound of 500 us can never
    // be met: s1 knows it and drops every packet early, where counting only the last link's
    // serialization (8 us) let them all through, late.
    let src = r#"
[sim]
duration = "20ms"
switching = "cut-through"
latency = "physical"
[defaults.link]
rate = "1Gbps"
delay = "10us"
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
[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "s2"
rate = "10Mbps"
[[links]]
a = "s2"
b = "h2"
[lbf]
budget = "equal"
[[flows]]
name = "F1"
src = "h1"
dst = "h2"
size = 1000
traffic = { kind = "cbr", rate = "1Mbps" }
slo = { lower = "0us", upper = "500us" }
"#;
    let r = run_text(src);
    let f = &r.flows[0];
    assert!(f.sent > 0);
    assert_eq!((f.received, f.drops.get("hopeless-early-drop")), (0, Some(&f.sent)), "{f:?}");
    // with room for the slow link (30 + 800 = 830 us) every packet arrives, none above it late
    let r = run_text(&src.replace("upper = \"500us\"", "upper = \"900us\""));
    let f = &r.flows[0];
    assert_eq!(f.received, f.sent, "{:?}", f.drops);
    assert!(f.latency_ns.as_ref().is_some_and(|l| l.min >= 830_000 && l.max <= 900_000));
}

/// h1 -10M- s1 -1G- s2 -1G- h2: `sim` with `latency`, `switching`, and F1's `slo`.
fn fast_egress(latency: &str, switching: &str, slo: &str) -> String {
    format!(
        r#"
[sim]
duration = "50ms"
switching = "{switching}"
latency = "{latency}"
[defaults.link]
rate = "1Gbps"
delay = "10us"
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
[[links]]
a = "h1"
b = "s1"
rate = "10Mbps"
queue_b = {{ kind = "lbf" }}
[[links]]
a = "s1"
b = "s2"
queue_a = {{ kind = "lbf" }}
[[links]]
a = "s2"
b = "h2"
queue_a = {{ kind = "lbf" }}
[lbf]
budget = "equal"
[[flows]]
name = "F1"
src = "h1"
dst = "h2"
size = 1000
traffic = {{ kind = "cbr", rate = "1Mbps" }}
slo = {slo}
"#
    )
}

/// Under cut-through a switch sending toward a faster link than the frame came in on must wait
/// for the frame's last bit (here 800 us in on 10 Mbit/s, 8 us out on 1 Gbit/s: 792 us at s1).
/// Under `physical` that wait is latency, and every way of carrying the latency so far must
/// see it: the unhindered packet arrives at exactly its lower bound (the latency-so-far field
/// and rest-SLO had missed the wait, arriving 792 us late at 5,792 us).
#[test]
fn a_frame_waiting_for_its_last_bit_still_meets_the_lower_bound_exactly() {
    for (latency, switching) in [
        ("physical", "cut-through"),
        ("physical", "store-and-forward"),
        ("exclude-serialization", "cut-through"),
    ] {
        for carry in ["latency-so-far", "timestamp", "rest-slo"] {
            let slo = format!("{{ lower = \"5ms\", carry = \"{carry}\" }}");
            let r = run_text(&fast_egress(latency, switching, &slo));
            let f = &r.flows[0];
            let l = f.latency_ns.as_ref().unwrap();
            assert!(f.received > 5, "{latency} {switching} {carry}");
            assert_eq!((l.min, l.max), (5_000_000, 5_000_000), "{latency} {switching} {carry}");
        }
    }
}

/// The same wait and an upper bound of 500 us. Physically the frame cannot be whole at h2
/// before 830 us (800 us on the slow link, three 10 us delays, 8 us into h2): hopeless on
/// arrival at s1, where it is dropped early (it had been counted as expiring in s1's queue).
/// Under `exclude-serialization` the wait is serialization, not latency: every packet arrives
/// with 30 us, on time (s1 had let it expire in the queue, 792 us of waiting for its last bit
/// being taken for lateness).
#[test]
fn the_wait_for_the_last_bit_is_lateness_only_under_the_physical_convention() {
    for carry in ["latency-so-far", "timestamp", "rest-slo"] {
        let slo = format!("{{ lower = \"0us\", upper = \"500us\", carry = \"{carry}\" }}");
        let r = run_text(&fast_egress("physical", "cut-through", &slo));
        let f = &r.flows[0];
        assert!(f.sent > 5);
        assert_eq!(f.drops.get("hopeless-early-drop"), Some(&f.sent), "{carry}: {:?}", f.drops);
        assert_eq!(r.lbf.as_ref().unwrap().flows[0].early_drops.get("s1"), Some(&f.sent));
        let r = run_text(&fast_egress("exclude-serialization", "cut-through", &slo));
        let f = &r.flows[0];
        assert_eq!(f.received, f.sent, "{carry}: {:?}", f.drops);
        let lf = &r.lbf.as_ref().unwrap().flows[0];
        assert_eq!((lf.on_time, lf.late_marked + lf.late_unmarked), (f.sent, 0), "{carry}");
        assert_eq!(f.latency_ns.as_ref().map(|l| (l.min, l.max)), Some((30_000, 30_000)));
    }
}
