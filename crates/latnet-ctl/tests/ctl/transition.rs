//! Reroutes while they happen: the moved flows' sources are re-tagged mid-run and each packet
//! is held to the path it was sent on, in each order a host agent may apply the change.

use crate::{controller, fat_tree, req, FIG6};
use latnet_ctl::verify::{transition_check, CheckOptions, Order, Phase, Transition};
use latnet_ctl::{CtlConfig, RerouteConfig, Topology, Workload};
use latnet_units::Duration;
use std::sync::Arc;

fn run_named(
    r: &latnet_ctl::verify::TransitionResult,
    order: Order,
) -> impl Iterator<Item = &latnet_ctl::verify::TransitionRun> {
    r.runs.iter().filter(move |x| x.order == order.name())
}

/// Fig. 6: the 400 Mbit/s flow h2 -> h3 is moved from spine m1 to m2 to admit 700 Mbit/s
/// h1 -> h6 over s1 - m1. In sequence (move, wait for the old path to drain, then start the new
/// flow) every packet is on time, within its queues' budgets and on the path it was sent on,
/// and some of the moved flow's packets did take the old path. New flow first with the move
/// 5 ms late, 1.1 Gbit/s crosses the 1 Gbit/s link s1 - m1 for 5 ms: the check must see it.
#[test]
fn fig6_move_in_sequence_is_clean_and_new_flow_first_is_not() {
    let t = Arc::new(Topology::from_toml("fig6.toml", FIG6).unwrap_or_else(|e| panic!("{e}")));
    let mut cfg = CtlConfig::chameleon(2).unwrap_or_else(|e| panic!("{e}"));
    cfg.reroute = Some(RerouteConfig::default());
    let mut c = controller(&t, cfg);
    let big = c.request(req(&t, "h2", "h3", 400, 1500, 50)).unwrap_or_else(|e| panic!("{e}"));
    let before = c.clone();
    let mut r = req(&t, "h1", "h6", 700, 1500, 1);
    r.deadline = Duration::from_micros(800);
    let a = c.request(r).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.rerouted, vec![big.id]);
    let tr = Transition { before: &before, after: &c, new_flow: Some(a.id), moved: &a.rerouted };
    let opts = CheckOptions {
        duration: Duration::from_millis(5),
        phases: vec![Phase::Sync],
        background: false,
        ..CheckOptions::default()
    };
    let (at, lag) = (Duration::from_millis(2), Duration::from_millis(5));
    let res = transition_check(&tr, &opts, at, lag, &Order::ALL).unwrap_or_else(|e| panic!("{e}"));
    for x in &res.runs {
        let p = &x.result;
        eprintln!(
            "{:10} retag {:?} new {:?} old-path {} drain {} ns | sent {} recv {} drop {} mis {} \
             | over deadline {} over budget {} | e2e/deadline {:.3} queue/budget {:.3}",
            x.order,
            x.retag_ns,
            x.new_start_ns,
            x.old_path_packets,
            x.old_path_drain_ns,
            p.sent,
            p.received,
            p.dropped,
            p.misrouted,
            p.deadline_violations,
            p.budget_violations,
            p.max_e2e_over_deadline,
            p.max_queue_over_budget
        );
        assert!(x.old_path_packets > 0, "{}: the move happened before any packet", x.order);
        assert!(p.received > x.old_path_packets, "{}: nothing on the new path", x.order);
        assert_eq!(p.misrouted, 0, "{}: a packet left the path it was sent on", x.order);
    }
    assert_eq!(res.violations(Order::Sequential), 0);
    let s = run_named(&res, Order::Sequential).next().unwrap_or_else(|| panic!("no run"));
    // the new flow starts once the moved flow's old guarantee has passed
    assert_eq!(s.new_start_ns, Some(2_000_000 + res.old_guarantee_ns[0]));
    assert!(s.old_path_drain_ns <= res.old_guarantee_ns[0]);
    assert!(res.violations(Order::NewFirst) > 0, "new-first overloads s1 - m1");
}

/// On k = 4 with 2 queues and the paper's workload 2 (the first move comes after 65 requests),
/// the first two requests that moved admitted flows: applied in sequence, no packet misses its
/// deadline or a budget, none is dropped or leaves the path it was sent on.
#[test]
fn fat_tree_moves_in_sequence_keep_every_promise() {
    let t = fat_tree(4, 2);
    let cfg = CtlConfig::chameleon(2).unwrap_or_else(|e| panic!("{e}"));
    let mut c = controller(&t, cfg);
    let mut wl = Workload::new(2, t.hosts(), 1, 0).unwrap_or_else(|e| panic!("{e}"));
    let opts = CheckOptions {
        duration: Duration::from_millis(4),
        phases: vec![Phase::Sync, Phase::Random { spread: Duration::from_millis(2) }],
        ..CheckOptions::default()
    };
    let (mut checked, mut old_path) = (0, 0);
    for _ in 0..1000 {
        let before = c.clone();
        let out = c.request(wl.next_request().request);
        let moved = c.moved_by_last_request().to_vec();
        if moved.is_empty() {
            continue;
        }
        let tr = Transition {
            before: &before,
            after: &c,
            new_flow: out.as_ref().ok().map(|a| a.id),
            moved: &moved,
        };
        // (after the random phase's last start)
        let (at, lag) = (Duration::from_millis(3), Duration::ZERO);
        let res = transition_check(&tr, &opts, at, lag, &[Order::Sequential])
            .unwrap_or_else(|e| panic!("{e}"));
        for x in &res.runs {
            let p = &x.result;
            eprintln!(
                "moved {:?} new {:?} {}: old-path {} sent {} recv {} | e2e/deadline {:.3} \
                 queue/budget {:.3}",
                res.moved,
                res.new_flow,
                p.phase,
                x.old_path_packets,
                p.sent,
                p.received,
                p.max_e2e_over_deadline,
                p.max_queue_over_budget
            );
            assert!(p.received > 0);
            old_path += x.old_path_packets;
        }
        assert_eq!(res.violations(Order::Sequential), 0, "{res:?}");
        checked += 1;
        if checked == 2 {
            break;
        }
    }
    assert_eq!(checked, 2, "fewer than two requests moved flows");
    assert!(old_path > 0, "no moved flow sent on its old path: the change was not exercised");
}
