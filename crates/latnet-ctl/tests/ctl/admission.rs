//! Admission decisions: the golden vector through the whole controller, monotone bounds and
//! exact release as properties, invalid requests, rerouting, tags, routing variants.

use crate::{controller, fat_tree, req};
use latnet_ctl::eval::{self, EvalOptions, SystemKind};
use latnet_ctl::{
    BurstModel, Checkpoint, Controller, CtlConfig, PathHop, QueueSet, Rejection, RerouteConfig,
    Routing, Topology, Workload,
};
use latnet_units::{Bytes, Duration};
use proptest::prelude::*;
use std::sync::Arc;

fn topo(src: &str) -> Arc<Topology> {
    Arc::new(Topology::from_toml("t.toml", src).unwrap_or_else(|e| panic!("{e}")))
}

/// h1 - s - h2 at 1 Gbit/s.
const LINE: &str = r#"
[defaults.link]
rate = "1Gbps"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "s"
[[links]]
a = "s"
b = "h2"
"#;

/// The reference's golden vector, decided by the controller end to end: three queues at the
/// switch port with the DetServ budgets, no shaping, no burst increase.
#[test]
fn golden_vector_through_the_controller() {
    let t = topo(LINE);
    let cfg = CtlConfig {
        switch: QueueSet {
            budgets: [1_740, 6_600, 11_220].map(Duration::from_micros).to_vec(),
            buffer: Bytes::new(300_000),
        },
        host: QueueSet { budgets: vec![Duration::from_millis(50)], buffer: Bytes::new(10_000_000) },
        shaping: false,
        burst: BurstModel::None,
        reroute: None,
        ..CtlConfig::with_budgets(vec![Duration::from_millis(1)])
    };
    let mut c = controller(&t, cfg);
    let sw_port = t.node_ports(t.node_id("s").unwrap_or(0))[1];
    let queue_of = |c: &Controller, id| c.flow(id).map(|e| e.hops[1].queue);
    let a = c.request(req(&t, "h1", "h2", 322, 186_000, 52)).unwrap_or_else(|e| panic!("{e}"));
    let b = c.request(req(&t, "h1", "h2", 275, 195_000, 60)).unwrap_or_else(|e| panic!("{e}"));
    let q2 = c.request(req(&t, "h1", "h2", 93, 90_000, 62)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(queue_of(&c, a.id), Some(0));
    assert_eq!(queue_of(&c, b.id), Some(1), "q0 would exceed 1.74 ms");
    assert_eq!(queue_of(&c, q2.id), Some(2), "q1 would exceed its 300,000 B buffer");
    let ms = |c: &Controller, q| c.bounds(sw_port, q).map(|b| (b.delay_ms() * 1e4).round() / 1e4);
    assert_eq!(ms(&c, 0), Some(1.5125));
    assert_eq!(ms(&c, 1), Some(4.5317));
    assert_eq!(ms(&c, 2), Some(9.4106));
    let before = c.snapshot();
    // f1 fits q0 and q1 on its own but would push q2 to 11.9145 ms > 11.22 ms
    let f1 = c.request(req(&t, "h1", "h2", 81, 5_500, 57));
    assert_eq!(f1, Err(Rejection::NoPath));
    assert_eq!(c.snapshot(), before, "a rejection reserves nothing");
    // f2 is accepted: q2 stays at 10.4892 ms
    let f2 = c.request(req(&t, "h1", "h2", 30, 15_000, 57)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(queue_of(&c, f2.id), Some(0));
    assert_eq!(ms(&c, 2), Some(10.4892));
}

fn all_bounds(c: &Controller) -> Vec<Option<f64>> {
    let n = c.topology().ports().len();
    let mut v = Vec::new();
    for p in 0..n {
        let st = c.port_state(p);
        for q in 0..st.len() {
            v.push(
                (st.queue(q).flows > 0)
                    .then(|| c.bounds(p, q).map_or(f64::INFINITY, |b| b.delay.as_f64())),
            );
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// Adding a flow never lowers any existing bound; removing it restores the previous state
    /// exactly, after which the same request gets the same embedding again.
    #[test]
    fn adding_never_lowers_a_bound_and_removing_restores_exactly(
        seed in 0u64..1000, scenario in 1usize..=8, queues in prop::sample::select(vec![2usize, 4, 8]),
    ) {
        let t = fat_tree(4, 2);
        let mut cfg = CtlConfig::chameleon(queues).unwrap_or_else(|e| panic!("{e}"));
        cfg.reroute = None;
        let mut c = controller(&t, cfg);
        let mut wl = Workload::new(scenario, t.hosts(), seed, 0).unwrap_or_else(|e| panic!("{e}"));
        let mut admitted = 0;
        for _ in 0..150 {
            let r = wl.next_request().request;
            let snap = c.snapshot();
            let bounds = all_bounds(&c);
            match c.request(r) {
                Ok(a) => {
                    admitted += 1;
                    let after = all_bounds(&c);
                    for (b0, b1) in bounds.iter().zip(&after) {
                        if let (Some(b0), Some(b1)) = (b0, b1) {
                            prop_assert!(b1 >= b0, "a bound went down: {b0} -> {b1}");
                        }
                    }
                    let e = c.remove(a.id).unwrap_or_else(|| panic!("admitted flow"));
                    prop_assert_eq!(c.snapshot(), snap.clone());
                    let again = c.request(r).unwrap_or_else(|e| panic!("{e}"));
                    let e2 = c.flow(again.id).unwrap_or_else(|| panic!("re-admitted"));
                    prop_assert_eq!(&e.hops, &e2.hops);
                }
                Err(_) => prop_assert_eq!(c.snapshot(), snap),
            }
        }
        prop_assert!(admitted > 0);
    }

    /// With rerouting, removing every flow in any order leaves the empty state.
    #[test]
    fn removing_everything_after_reroutes_leaves_nothing(seed in 0u64..1000, order in any::<u64>()) {
        let t = fat_tree(4, 2);
        let mut c = controller(&t, CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}")));
        let empty = c.snapshot();
        let mut wl = Workload::new(8, t.hosts(), seed, 1).unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..400 {
            let _ = c.request(wl.next_request().request);
        }
        let mut ids: Vec<_> = c.flows().map(|e| e.id).collect();
        prop_assert!(!ids.is_empty());
        let n = ids.len();
        ids.rotate_left((order % n as u64) as usize);
        for id in ids {
            prop_assert!(c.remove(id).is_some());
        }
        prop_assert_eq!(c.snapshot(), empty);
        prop_assert!(c.remove(0).is_none(), "a removed flow cannot be removed twice");
    }
}

#[test]
fn invalid_requests_get_a_clear_reason() {
    let t = fat_tree(4, 2);
    let mut c = controller(&t, CtlConfig::chameleon(8).unwrap_or_else(|e| panic!("{e}")));
    let ok = req(&t, "h0_0_0", "h3_1_1", 1, 200, 50);
    let cases = [
        (latnet_ctl::FlowRequest { rate: latnet_units::Rate::ZERO, ..ok }, "invalid-rate", "rate"),
        (latnet_ctl::FlowRequest { burst: Bytes::ZERO, ..ok }, "invalid-burst", "burst"),
        (
            latnet_ctl::FlowRequest { deadline: Duration::ZERO, ..ok },
            "invalid-deadline",
            "deadline",
        ),
        (latnet_ctl::FlowRequest { dst: 10_000, ..ok }, "unknown-host", "unknown host"),
        (
            latnet_ctl::FlowRequest { dst: t.node_id("e0_0").unwrap_or(0), ..ok },
            "not-a-host",
            "switch",
        ),
        (latnet_ctl::FlowRequest { dst: ok.src, ..ok }, "same-host", "same host"),
        (
            latnet_ctl::FlowRequest { deadline: Duration::from_micros(700), ..ok },
            "deadline-below-minimum",
            "minimum 1ms",
        ),
    ];
    for (r, code, words) in cases {
        let e = c.request(r).unwrap_err();
        assert_eq!(e.code(), code);
        assert!(e.is_invalid());
        assert!(e.to_string().contains(words), "{e}");
    }
    assert_eq!(c.stats().invalid, 7);
    assert!(c.is_empty());
    // across pods a path crosses 5 switches (edge, aggregation, core, aggregation, edge): with
    // tags for 3, invalid, naming the fewest; within an edge switch's hosts, admitted
    let mut cfg = CtlConfig::chameleon(8).unwrap_or_else(|e| panic!("{e}"));
    cfg.max_tags = 3;
    let mut c = controller(&t, cfg);
    let e = c.request(ok).unwrap_err();
    assert_eq!((e.code(), e.is_invalid()), ("beyond-max-tags", true));
    assert!(e.to_string().contains("than max_tags (3), one tag each: the fewest is 5"), "{e}");
    assert!(c.request(req(&t, "h0_0_0", "h0_0_1", 1, 200, 50)).is_ok());
    // the minimum is per path: same edge switch is 0.5 + 0.1 ms
    assert!(c.request(req(&t, "h0_0_0", "h0_0_1", 1, 200, 1)).is_ok());
}

/// Fig. 1 of the paper in miniature: a big flow sits on the only link a new flow can use;
/// rerouting moves it to the other spine and the new flow fits. Without rerouting the new
/// flow is refused. (Make-before-break counts the moved flow twice where its old and new
/// paths merge, so it must fit there twice: 2 x 400 Mbit/s.)
#[test]
fn rerouting_makes_room_as_in_fig_6() {
    let t = topo(crate::FIG6);
    for reroute in [false, true] {
        let mut cfg = CtlConfig::chameleon(2).unwrap_or_else(|e| panic!("{e}"));
        cfg.reroute = reroute.then_some(RerouteConfig::default());
        let mut c = controller(&t, cfg);
        let big = c.request(req(&t, "h2", "h3", 400, 1500, 50)).unwrap_or_else(|e| panic!("{e}"));
        let path = |c: &Controller, id| {
            c.flow(id)
                .map(|e| e.path(&t).iter().map(|&n| t.nodes()[n].name.clone()).collect::<Vec<_>>())
        };
        assert_eq!(
            path(&c, big.id),
            Some(vec!["h2".into(), "s1".into(), "m1".into(), "s2".into(), "h3".into()])
        );
        // 0.8 ms: only the direct path s1 - m1 (0.7 ms) fits, not the detour over m2 (0.9 ms)
        let mut r = req(&t, "h1", "h6", 700, 1500, 1);
        r.deadline = Duration::from_micros(800);
        let new = c.request(r);
        if reroute {
            let a = new.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(a.rerouted, vec![big.id]);
            assert_eq!(
                path(&c, big.id),
                Some(vec!["h2".into(), "s1".into(), "m2".into(), "s2".into(), "h3".into()])
            );
            assert_eq!(
                path(&c, a.id),
                Some(vec!["h1".into(), "s1".into(), "m1".into(), "h6".into()])
            );
            assert_eq!(c.rerouted_flows(), 1);
            assert_eq!(c.stats().admitted_after_reroute, 1);
        } else {
            assert_eq!(new, Err(Rejection::NoPath));
        }
    }
}

#[test]
fn tag_stacks_spell_the_path_and_the_queues() {
    let t = fat_tree(4, 2);
    for base in [10u16, 100] {
        let mut cfg = CtlConfig::chameleon(8).unwrap_or_else(|e| panic!("{e}"));
        cfg.tags.base = base;
        let mut c = controller(&t, cfg.clone());
        let mut wl = Workload::new(1, t.hosts(), 3, 0).unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..100 {
            let _ = c.request(wl.next_request().request);
        }
        assert!(c.len() > 10);
        for e in c.flows() {
            let tags = c.tags(e);
            assert_eq!(tags.len(), e.hops.len() - 1, "one tag per switch");
            // walk the topology by the tags from the first switch
            let mut at = t.port(e.hops[0].port).peer;
            for (i, &tag) in tags.iter().enumerate() {
                let (port, queue) = cfg.tags.decode(tag).unwrap_or_else(|| panic!("tag {tag}"));
                let p = t.node_ports(at)[usize::from(port)];
                assert_eq!(p, e.hops[i + 1].port);
                assert_eq!(queue, e.hops[i + 1].queue);
                at = t.port(p).peer;
            }
            assert_eq!(at, e.request.dst);
            assert_eq!(e.shaper().rate, e.request.rate);
            assert!(e.guarantee <= e.request.deadline);
        }
    }
    // a base too large for the VID range is refused up front, not at the first flow
    let big = fat_tree(4, 40);
    let mut cfg = CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}"));
    cfg.tags.base = 100;
    let e = Controller::new(big, cfg).unwrap_err();
    assert!(e.contains("4095"), "{e}");
}

#[test]
fn larac_and_least_delay_both_respect_deadlines() {
    let t = fat_tree(4, 4);
    for routing in [Routing::LeastDelay, Routing::Larac, Routing::MinHops] {
        let mut cfg = CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}"));
        cfg.routing = routing;
        cfg.per_hop = Duration::from_micros(20);
        let mut c = controller(&t, cfg);
        let mut wl = Workload::new(8, t.hosts(), 9, 0).unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..300 {
            let _ = c.request(wl.next_request().request);
        }
        assert!(c.len() > 100, "{routing}: {}", c.len());
        for e in c.flows() {
            let sum: u64 = e.hops.iter().map(|h| h.budget.as_nanos() + 20_000).sum();
            assert_eq!(e.guarantee.as_nanos(), sum);
            assert!(e.guarantee <= e.request.deadline, "{routing}");
        }
    }
}

#[test]
fn study_runs_are_deterministic_and_chameleon_beats_the_baselines() {
    let t = fat_tree(4, 2);
    let opts = EvalOptions::default();
    let mut clock = || 0u64;
    let mut accepted = Vec::new();
    for kind in ["chameleon", "chameleon-noreroute", "silo", "silo-noburst", "qjump"] {
        let kind: SystemKind = kind.parse().unwrap_or_else(|e| panic!("{e}"));
        let a = eval::run(kind, &t, &opts, 4, 1, 0, &mut clock).unwrap_or_else(|e| panic!("{e}"));
        let b = eval::run(kind, &t, &opts, 4, 1, 0, &mut clock).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b, "{kind}: same seed, same run");
        assert_eq!(a.runtime_ns.len() as u64, a.accepted + 1, "{kind}: one time per request");
        assert!(a.utilisation.iter().all(|&u| (0.0..=1.0).contains(&u)));
        assert_eq!(a.accepted_by_type.iter().sum::<u64>(), a.accepted);
        accepted.push(a.accepted);
    }
    assert!(accepted[0] >= accepted[1], "rerouting never loses flows on the same sequence");
    assert!(accepted[1] >= 2 * accepted[2].max(accepted[4]), "{accepted:?}");
    assert!(accepted[4] <= 32, "QJump admits at most n = 32 flows");
    assert!("nope".parse::<SystemKind>().unwrap_err().contains("chameleon"));
}

/// `moved_by_last_request` names exactly the flows whose path or queues the last request
/// changed: an admission's `rerouted`, and the moves a refused request made before giving up.
#[test]
fn the_flows_a_request_moved_are_reported_also_when_it_is_refused() {
    let topo = fat_tree(4, 2);
    let mut c = controller(&topo, CtlConfig::chameleon(8).unwrap_or_else(|e| panic!("{e}")));
    let hosts: Vec<String> = topo.hosts().iter().map(|&h| topo.nodes()[h].name.clone()).collect();
    let (mut admitted_moves, mut refused_moves) = (0, 0);
    for i in 0..400usize {
        let before: Vec<_> = c.flows().map(|e| (e.id, e.hops.clone())).collect();
        let (a, b) = (&hosts[(i * 5) % 16], &hosts[(i * 7 + 3) % 16]);
        if a == b {
            continue;
        }
        let mbps = 60 + (i as u64 % 7) * 10;
        let us = 1200 + (i as u64 % 5) * 300;
        let mut r = req(&topo, a, b, mbps, 1500, 1);
        r.deadline = Duration::from_micros(us);
        let out = c.request(r);
        let changed: Vec<u64> = before
            .iter()
            .filter(|(id, hops)| c.flow(*id).is_some_and(|now| now.hops != *hops))
            .map(|(id, _)| *id)
            .collect();
        let mut reported = c.moved_by_last_request().to_vec();
        reported.sort_unstable();
        assert_eq!(reported, changed, "request {i}: {out:?}");
        match out {
            Ok(adm) => {
                assert_eq!(adm.rerouted, c.moved_by_last_request());
                admitted_moves += adm.rerouted.len();
            }
            Err(_) => refused_moves += changed.len(),
        }
    }
    assert!(admitted_moves > 0 && refused_moves > 0, "{admitted_moves} {refused_moves}");
}

/// Delays are summed in u64 ns along paths: a per-hop constant (or a budget) so large that a
/// sum could wrap is refused when the controller is built. Before, `min_delay` overflowed at
/// the first request (a panic in a debug build; in a release build the sums wrapped, and a
/// request with the largest deadline was admitted with a guarantee far below the real one).
#[test]
fn delays_whose_path_sums_could_wrap_are_refused_up_front() {
    let t = fat_tree(4, 2);
    let mut cfg = CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}"));
    cfg.per_hop = Duration::from_nanos(u64::MAX / 2);
    let e = Controller::new(t.clone(), cfg.clone()).unwrap_err();
    assert!(e.contains("per_hop") && e.contains("2^64"), "{e}");
    cfg.per_hop = Duration::ZERO;
    cfg.switch.budgets[3] = Duration::from_nanos(u64::MAX / 3);
    let e = Controller::new(t.clone(), cfg.clone()).unwrap_err();
    assert!(e.contains("largest queue budget"), "{e}");
    // large but representable: built, and a request is decided without overflow
    cfg.switch.budgets[3] = Duration::from_secs(3600);
    cfg.per_hop = Duration::from_secs(60);
    let mut c = controller(&t, cfg);
    let mut r = req(&t, "h0_0_0", "h3_1_1", 1, 200, 50);
    r.deadline = Duration::from_nanos(u64::MAX);
    let a = c.request(r).unwrap_or_else(|e| panic!("{e}"));
    let e = c.flow(a.id).unwrap_or_else(|| panic!("admitted"));
    let sum: u64 = e.hops.iter().map(|h| h.budget.as_nanos() + 60_000_000_000).sum();
    assert_eq!(e.guarantee.as_nanos(), sum);
}

/// A checkpoint whose path forwards through another host (which forwards nothing) or visits
/// a switch twice describes no state the search can reach, and is refused, naming it.
#[test]
fn a_checkpoint_path_through_a_host_or_around_a_loop_is_refused() {
    let t = fat_tree(4, 2);
    let cfg = || CtlConfig::chameleon(8).unwrap_or_else(|e| panic!("{e}"));
    let n = |s: &str| t.node_id(s).unwrap_or_else(|| panic!("{s}"));
    let hop = |a: &str, b: &str| {
        let port = t.node_ports(n(a)).iter().copied().find(|&p| t.port(p).peer == n(b));
        PathHop { port: port.unwrap_or_else(|| panic!("{a}-{b}")), queue: 0 }
    };
    let r = req(&t, "h0_0_0", "h0_1_0", 1, 200, 50);
    let cp = |path: Vec<PathHop>| Checkpoint {
        flows: vec![(0, r, path)],
        next_id: 1,
        stats: Default::default(),
        rerouted: vec![],
    };
    let direct = vec![
        hop("h0_0_0", "e0_0"),
        hop("e0_0", "a0_0"),
        hop("a0_0", "e0_1"),
        hop("e0_1", "h0_1_0"),
    ];
    let mut c = controller(&t, cfg());
    c.restore(&cp(direct.clone())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.len(), 1);
    let via_host = [
        vec![hop("h0_0_0", "e0_0"), hop("e0_0", "h0_0_1"), hop("h0_0_1", "e0_0")],
        direct[1..].to_vec(),
    ]
    .concat();
    let around = [
        vec![hop("h0_0_0", "e0_0"), hop("e0_0", "a0_0"), hop("a0_0", "e0_0")],
        direct[1..].to_vec(),
    ]
    .concat();
    for (path, want) in
        [(via_host, "flow 0: the path goes through host h0_0_1"), (around, "visits e0_0 twice")]
    {
        let mut fresh = controller(&t, cfg());
        let e = fresh.restore(&cp(path)).map(|()| "restored".to_owned()).unwrap_or_else(|e| e);
        assert!(e.contains(want), "{e}");
        assert!(fresh.is_empty());
        assert_eq!(fresh.snapshot(), controller(&t, cfg()).snapshot());
    }
}

/// When the least-delay path crosses more switches than a host pushes tags for, the
/// fewest-hops path that meets the deadline is taken instead of refusing the request. Here
/// s1 - s2 is a 10 Mbit/s link, whose first queue (100 us) can hold nothing (two frames take
/// 2.4 ms), so the least delay is the 4-switch detour at 1 Gbit/s in the first queues; with
/// tags for 3 the flow goes s1 - s2 in the second queue (10 ms) within its 50 ms deadline.
#[test]
fn a_path_within_max_tags_is_taken_when_the_least_delay_one_is_beyond() {
    let mut text = String::from("[defaults.link]\nrate = \"1Gbps\"\n");
    for (n, kind) in [("h1", "host"), ("h2", "host"), ("s1", "switch"), ("s2", "switch")] {
        text += &format!("[[nodes]]\nname = \"{n}\"\nkind = \"{kind}\"\n");
    }
    for n in ["s3", "s4"] {
        text += &format!("[[nodes]]\nname = \"{n}\"\nkind = \"switch\"\n");
    }
    for (a, b) in [("h1", "s1"), ("s2", "h2"), ("s1", "s3"), ("s3", "s4"), ("s4", "s2")] {
        text += &format!("[[links]]\na = \"{a}\"\nb = \"{b}\"\n");
    }
    text += "[[links]]\na = \"s1\"\nb = \"s2\"\nrate = \"10Mbps\"\n";
    let t = Arc::new(Topology::from_toml("line.toml", &text).unwrap_or_else(|e| panic!("{e}")));
    let budgets = vec![Duration::from_micros(100), Duration::from_millis(10)];
    let cfg = |max_tags| CtlConfig {
        max_tags,
        reroute: None,
        ..CtlConfig::with_budgets(budgets.clone())
    };
    let path = |c: &Controller, id| -> Vec<String> {
        let e = c.flows().find(|e| e.id == id).unwrap_or_else(|| panic!("flow {id}"));
        e.hops.iter().map(|h| t.nodes()[t.port(h.port).node].name.clone()).collect()
    };
    let r = req(&t, "h1", "h2", 1, 1500, 50);
    // with tags enough, the detour
    let mut c = controller(&t, cfg(10));
    let id = c.request(r).unwrap_or_else(|e| panic!("{e}")).id;
    assert_eq!(path(&c, id), ["h1", "s1", "s3", "s4", "s2"]);
    // with tags for 3, the direct link in its second queue
    let mut c = controller(&t, cfg(3));
    let a = c.request(r).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(path(&c, a.id), ["h1", "s1", "s2"]);
    let e = c.flows().find(|e| e.id == a.id).unwrap_or_else(|| panic!("admitted"));
    assert_eq!(e.hops.iter().map(|h| h.queue).collect::<Vec<_>>(), [0, 1, 0]);
}

/// Within `max_tags`, the least-delay path is taken, not the fewest-hops one. Three ways from
/// s1 to s2: direct at 10 Mbit/s (two switches; only the 5 ms queue holds two frames), over s5
/// with s1 - s5 at 50 Mbit/s (three switches; the 1 ms queue there) and the 1 Gbit/s detour
/// s3 - s4 (four switches, the 100 us queues: the least delay). With tags for 3 the flow goes
/// over s5 (1.2 ms of switch budgets); the fewest-hops search would take the direct link
/// (5.1 ms).
#[test]
fn within_max_tags_the_least_delay_path_is_taken_not_the_fewest_hops() {
    let mut text = String::from("[defaults.link]\nrate = \"1Gbps\"\n");
    for n in ["h1", "h2"] {
        text += &format!("[[nodes]]\nname = \"{n}\"\nkind = \"host\"\n");
    }
    for n in ["s1", "s2", "s3", "s4", "s5"] {
        text += &format!("[[nodes]]\nname = \"{n}\"\nkind = \"switch\"\n");
    }
    for (a, b) in
        [("h1", "s1"), ("s2", "h2"), ("s1", "s3"), ("s3", "s4"), ("s4", "s2"), ("s5", "s2")]
    {
        text += &format!("[[links]]\na = \"{a}\"\nb = \"{b}\"\n");
    }
    text += "[[links]]\na = \"s1\"\nb = \"s2\"\nrate = \"10Mbps\"\n";
    text += "[[links]]\na = \"s1\"\nb = \"s5\"\nrate = \"50Mbps\"\n";
    let t = Arc::new(Topology::from_toml("three.toml", &text).unwrap_or_else(|e| panic!("{e}")));
    let budgets = [100, 1_000, 5_000].map(Duration::from_micros).to_vec();
    let admit = |max_tags, routing| {
        let cfg = CtlConfig {
            max_tags,
            routing,
            reroute: None,
            ..CtlConfig::with_budgets(budgets.clone())
        };
        let mut c = controller(&t, cfg);
        let id = c.request(req(&t, "h1", "h2", 1, 1500, 50)).unwrap_or_else(|e| panic!("{e}")).id;
        let e = c.flows().find(|e| e.id == id).unwrap_or_else(|| panic!("flow {id}"));
        let nodes: Vec<String> =
            e.hops.iter().map(|h| t.nodes()[t.port(h.port).node].name.clone()).collect();
        (nodes, e.hops.iter().map(|h| h.queue).collect::<Vec<_>>(), e.guarantee)
    };
    let (detour, queues, _) = admit(10, Routing::LeastDelay);
    assert_eq!(detour, ["h1", "s1", "s3", "s4", "s2"]);
    assert_eq!(queues, [0; 5]);
    let (over_s5, queues, g) = admit(3, Routing::LeastDelay);
    assert_eq!(over_s5, ["h1", "s1", "s5", "s2"]);
    assert_eq!(queues, [0, 1, 0, 0]);
    assert_eq!(g, Duration::from_micros(500 + 1_000 + 100 + 100));
    // LARAC (cost 1 + D[ms] per hop) picks the same within 3 switches
    let (larac, _, _) = admit(3, Routing::Larac);
    assert_eq!(larac, ["h1", "s1", "s5", "s2"]);
    // the fewest-hops routing: the direct link
    let (direct, queues, _) = admit(3, Routing::MinHops);
    assert_eq!(direct, ["h1", "s1", "s2"]);
    assert_eq!(queues, [0, 2, 0]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// On random meshes of 4 to 8 switches (a chain plus random links of mixed rates), what is
    /// admitted under a limit of tags crosses at most that many switches, none twice, within
    /// its deadline; and a limit no path reaches changes nothing.
    #[test]
    fn an_admitted_path_fits_the_tags_and_visits_no_switch_twice(
        n in 4usize..=8,
        extra in prop::collection::vec((0usize..8, 0usize..8, 0usize..3), 0..10),
        max_tags in 1usize..=4,
        routing in prop::sample::select(vec![Routing::LeastDelay, Routing::Larac, Routing::MinHops]),
        flows in 1usize..=6,
    ) {
        let rates = ["10Mbps", "50Mbps", "1Gbps"];
        let mut text = String::new();
        for h in ["h1", "h2"] {
            text += &format!("[[nodes]]\nname = \"{h}\"\nkind = \"host\"\n");
        }
        for i in 0..n {
            text += &format!("[[nodes]]\nname = \"s{i}\"\nkind = \"switch\"\n");
        }
        let mut links = vec![("h1".to_owned(), "s0".to_owned(), 2), (format!("s{}", n - 1), "h2".to_owned(), 2)];
        links.extend((1..n).map(|i| (format!("s{}", i - 1), format!("s{i}"), i % 3)));
        links.extend(extra.iter().filter(|(a, b, _)| a % n != b % n).map(|&(a, b, r)| (format!("s{}", a % n), format!("s{}", b % n), r)));
        for (a, b, r) in &links {
            text += &format!("[[links]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"{}\"\n", rates[*r]);
        }
        let t = Arc::new(Topology::from_toml("mesh.toml", &text).unwrap_or_else(|e| panic!("{e}")));
        let budgets = [100, 1_000, 5_000].map(Duration::from_micros).to_vec();
        let cfg = |max_tags| CtlConfig {
            max_tags,
            routing,
            reroute: None,
            ..CtlConfig::with_budgets(budgets.clone())
        };
        let run = |max_tags| {
            let mut c = controller(&t, cfg(max_tags));
            let mut paths = Vec::new();
            for _ in 0..flows {
                match c.request(req(&t, "h1", "h2", 1, 1500, 50)) {
                    Ok(a) => {
                        let e = c.flows().find(|e| e.id == a.id).unwrap_or_else(|| panic!("admitted"));
                        paths.push(Some((e.hops.clone(), e.guarantee)));
                    }
                    Err(_) => paths.push(None),
                }
            }
            paths
        };
        let limited = run(max_tags);
        for (hops, guarantee) in limited.iter().flatten() {
            let nodes: Vec<_> = hops.iter().map(|h| t.port(h.port).node).collect();
            let switches = nodes.iter().filter(|&&v| !t.is_host(v)).count();
            prop_assert!(switches <= max_tags, "{switches} switches, tags for {max_tags}");
            let mut seen = nodes.clone();
            seen.sort_unstable();
            seen.dedup();
            prop_assert_eq!(seen.len(), nodes.len(), "a node twice: {:?}", nodes);
            prop_assert!(*guarantee <= Duration::from_millis(50));
        }
        // tags for every switch: the limit never binds, so it changes nothing
        prop_assert_eq!(run(n), run(10));
    }
}
