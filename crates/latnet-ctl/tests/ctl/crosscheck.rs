//! The packet-level cross-check: admitted sets on k = 4 and on a small custom topology are
//! simulated with tag-stack source routing, strict priority and greedy token-bucket sources;
//! no packet may miss its deadline and no queue may exceed its budget or its bound.

use crate::{controller, fat_tree};
use latnet_ctl::eval::{EvalOptions, SystemKind};
use latnet_ctl::verify::{cross_check, CheckOptions, Phase};
use latnet_ctl::{Controller, CtlConfig, Topology, Workload};
use latnet_units::Duration;
use std::sync::Arc;

/// Admit requests of `scenario` until the first rejection.
fn fill(ctl: &mut Controller, scenario: usize, seed: u64) -> usize {
    let mut wl =
        Workload::new(scenario, ctl.topology().hosts(), seed, 0).unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..100_000 {
        if ctl.request(wl.next_request().request).is_err() {
            break;
        }
    }
    ctl.len()
}

/// Offer `tries` requests of `scenario`, keeping whatever is admitted.
fn fill_all(ctl: &mut Controller, scenario: usize, seed: u64, tries: usize) -> usize {
    let mut wl =
        Workload::new(scenario, ctl.topology().hosts(), seed, 0).unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..tries {
        let _ = ctl.request(wl.next_request().request);
    }
    ctl.len()
}

fn report(name: &str, r: &latnet_ctl::verify::CheckResult) {
    for p in &r.phases {
        eprintln!(
            "{name} {:10} sent {:7} recv {:7} drop {} | e2e/deadline {:.3} e2e/guarantee {:.3} queue/budget {:.3} queue/bound {:.3} | violations d{} b{} nc{} mis{}",
            p.phase, p.sent, p.received, p.dropped, p.max_e2e_over_deadline, p.max_e2e_over_guarantee,
            p.max_queue_over_budget, p.max_queue_over_bound, p.deadline_violations,
            p.budget_violations, p.bound_violations, p.misrouted
        );
    }
}

fn assert_clean(r: &latnet_ctl::verify::CheckResult) {
    assert!(r.flows > 0);
    for p in &r.phases {
        assert!(p.sent > 0 && p.received > 0, "{}: nothing flowed", p.phase);
        assert_eq!(p.misrouted, 0, "{}: packets left their embedding", p.phase);
        assert_eq!(p.dropped, 0, "{}: packets dropped", p.phase);
        assert_eq!(p.deadline_violations, 0, "{}: deadline missed", p.phase);
        assert_eq!(p.budget_violations, 0, "{}: queue over budget", p.phase);
        assert_eq!(p.bound_violations, 0, "{}: queue over its NC bound", p.phase);
        assert!(p.max_queue_over_bound <= 1.0 && p.max_e2e_over_deadline <= 1.0);
    }
}

/// Scenario 1 has many bandwidth-hungry flows (100-200 Mbit/s) that share host uplinks with
/// the best-effort background: the host must serve them first, as the host model assumes.
#[test]
fn admitted_k4_set_with_heavy_flows_and_background_holds() {
    let topo = fat_tree(4, 2);
    let mut ctl = controller(&topo, CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}")));
    let n = fill(&mut ctl, 1, 1);
    assert!(n > 50, "only {n} flows admitted");
    let opts = CheckOptions {
        duration: Duration::from_millis(10),
        phases: vec![Phase::Sync, Phase::Aligned { rank: 0 }],
        ..CheckOptions::default()
    };
    let r = cross_check(&ctl, &opts).unwrap_or_else(|e| panic!("{e}"));
    report("k4-s1", &r);
    assert!(r.background_flows > 0);
    assert_clean(&r);
}

#[test]
fn admitted_k4_set_meets_every_deadline_in_packets() {
    let topo = fat_tree(4, 2);
    let mut ctl = controller(&topo, CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}")));
    let n = fill(&mut ctl, 8, 11);
    assert!(n > 100, "only {n} flows admitted");
    let opts = CheckOptions { duration: Duration::from_millis(10), ..CheckOptions::default() };
    let r = cross_check(&ctl, &opts).unwrap_or_else(|e| panic!("{e}"));
    report("k4", &r);
    assert!(r.background_flows > 0);
    assert_clean(&r);
}

#[test]
fn admitted_set_on_a_small_custom_topology_holds_with_eight_queues() {
    // two leaves, two spines, three hosts per leaf, 100 Mbit/s: small and easily saturated
    let mut src = String::from("[defaults.link]\nrate = \"100Mbps\"\n");
    for n in ["l0", "l1", "s0", "s1"] {
        src += &format!("[[nodes]]\nname = \"{n}\"\nkind = \"switch\"\n");
    }
    for l in 0..2 {
        for h in 0..3 {
            src += &format!("[[nodes]]\nname = \"h{l}{h}\"\nkind = \"host\"\n");
            src += &format!("[[links]]\na = \"h{l}{h}\"\nb = \"l{l}\"\n");
        }
        for s in 0..2 {
            src += &format!("[[links]]\na = \"l{l}\"\nb = \"s{s}\"\n");
        }
    }
    let topo =
        Arc::new(Topology::from_toml("leafspine.toml", &src).unwrap_or_else(|e| panic!("{e}")));
    let mut cfg = CtlConfig::chameleon(8).unwrap_or_else(|e| panic!("{e}"));
    cfg.per_hop = Duration::from_micros(5);
    let mut ctl = controller(&topo, cfg);
    let n = fill_all(&mut ctl, 2, 5, 600);
    assert!(n > 50, "only {n} flows admitted");
    let opts = CheckOptions {
        duration: Duration::from_millis(30),
        phases: vec![
            Phase::Sync,
            Phase::Aligned { rank: 0 },
            Phase::Random { spread: Duration::from_millis(5) },
        ],
        ..CheckOptions::default()
    };
    let r = cross_check(&ctl, &opts).unwrap_or_else(|e| panic!("{e}"));
    report("leafspine", &r);
    assert_eq!(r.background_flows, 0, "8 queues leave no class for background");
    assert_clean(&r);
}

#[test]
fn silo_admitted_set_also_holds() {
    let topo = fat_tree(4, 2);
    let cfg = EvalOptions::default().config(SystemKind::Silo(latnet_ctl::BurstModel::Real));
    let cfg = cfg.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("silo"));
    let mut ctl = controller(&topo, cfg);
    fill(&mut ctl, 8, 3);
    let opts = CheckOptions {
        duration: Duration::from_millis(10),
        phases: vec![Phase::Sync, Phase::Aligned { rank: 0 }],
        ..CheckOptions::default()
    };
    let r = cross_check(&ctl, &opts).unwrap_or_else(|e| panic!("{e}"));
    report("silo", &r);
    assert_clean(&r);
}

/// Negative control: if sources exceed what was admitted (a failed shaper), the same check
/// reports violations, so a clean result above is evidence and not a check that cannot fail.
#[test]
fn misbehaving_sources_are_caught() {
    let topo = fat_tree(4, 2);
    let mut ctl = controller(&topo, CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}")));
    fill(&mut ctl, 8, 11);
    let opts = CheckOptions {
        duration: Duration::from_millis(2),
        phases: vec![Phase::Sync],
        misbehave: 4,
        ..CheckOptions::default()
    };
    let r = cross_check(&ctl, &opts).unwrap_or_else(|e| panic!("{e}"));
    report("k4-misbehave", &r);
    let p = &r.phases[0];
    assert!(p.bound_violations > 0, "four-fold bursts and rates must overrun some bound");
    assert!(r.violations() > 0);
}

/// The phases' scenarios written as scenario files (what `latnet chameleon verify --emulated`
/// hands the testbed) read back to the very scenarios the cross-check simulates, and the file
/// of a phase, simulated, gives that phase's result.
#[test]
fn phase_scenarios_write_as_files_that_read_back_the_same() {
    use latnet_ctl::verify::{phase_scenarios, scenario_toml};
    let topo = fat_tree(4, 1);
    let mut ctl = controller(&topo, CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}")));
    assert!(fill_all(&mut ctl, 8, 3, 30) > 10);
    let opts = CheckOptions { duration: Duration::from_millis(5), ..CheckOptions::default() };
    let scs = phase_scenarios(&ctl, &opts).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = scs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["sync", "aligned-0", "aligned-1", "random-2ms"]);
    let direct = cross_check(&ctl, &opts).unwrap_or_else(|e| panic!("{e}"));
    for (k, (name, sc)) in scs.iter().enumerate() {
        assert!(sc.flows.iter().any(|f| f.tags.len() >= 3), "{name}: no long path");
        let text = scenario_toml(sc).unwrap_or_else(|e| panic!("{e}"));
        let back = latnet_sim::Scenario::from_str_named(name, &text)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(&back, sc, "{name}");
        let one = CheckOptions {
            phases: vec![opts.phases[k]],
            seed: opts.seed + k as u64,
            ..opts.clone()
        };
        let again = cross_check(&ctl, &one).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.phases[0], direct.phases[k], "{name}");
    }
    // a re-tagged flow (as the transition check writes them) reads back too
    let mut sc = scs[0].1.clone();
    let later: Vec<u16> = sc.flows[0].tags.iter().rev().copied().collect();
    sc.flows[0].retag = vec![
        latnet_sim::scenario::Retag { at: latnet_units::Time::from_nanos(1_500_000), tags: later },
        latnet_sim::scenario::Retag { at: latnet_units::Time::from_nanos(2_000_001), tags: vec![] },
    ];
    let text = scenario_toml(&sc).unwrap_or_else(|e| panic!("{e}"));
    let back = latnet_sim::Scenario::from_str_named("retag", &text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back, sc);
}

/// What the writer cannot write is an error naming it, never a file that reads back as
/// something else.
#[test]
fn scenario_toml_refuses_what_it_cannot_write() {
    use latnet_ctl::verify::{phase_scenarios, scenario_toml};
    use latnet_sim::traffic::TrafficSpec;
    let topo = fat_tree(4, 1);
    let mut ctl = controller(&topo, CtlConfig::chameleon(4).unwrap_or_else(|e| panic!("{e}")));
    fill_all(&mut ctl, 8, 3, 5);
    let opts = CheckOptions { phases: vec![Phase::Sync], ..CheckOptions::default() };
    let (_, sc) = phase_scenarios(&ctl, &opts).unwrap_or_else(|e| panic!("{e}")).remove(0);
    let mut pcap = sc.clone();
    pcap.output.pcap = true;
    assert_eq!(scenario_toml(&pcap).unwrap_err(), "cannot write outputs other than packets");
    let mut poisson = sc.clone();
    poisson.flows[0].traffic = TrafficSpec::Poisson { rate: latnet_units::Rate::from_bps(1_000) };
    let err = scenario_toml(&poisson).unwrap_err();
    let name = &sc.flows[0].name;
    assert!(err.starts_with(&format!("flow {name}: cannot write traffic Poisson")), "{err}");
}
