//! A controller rebuilt from a checkpoint decides as the one it was taken from; a checkpoint
//! that describes no state the controller could reach is refused and leaves it empty.

use crate::{controller, fat_tree, req};
use latnet_ctl::{Checkpoint, Controller, CtlConfig, FlowRequest, PathHop, Topology};
use latnet_units::Duration;
use serde_json::json;

/// Request `i` of a seeded stream that fills a k = 4 fat-tree until flows are refused and
/// rerouted, with every fifth step a removal.
enum Step {
    Ask(FlowRequest),
    Remove(u64),
}

fn step(topo: &Topology, hosts: &[String], i: usize) -> Step {
    if i % 5 == 4 {
        return Step::Remove((i as u64 * 7) % (i as u64 / 2 + 1));
    }
    let (a, b) = (&hosts[(i * 5) % 16], &hosts[(i * 7 + 3) % 16]);
    let b = if a == b { &hosts[(i * 7 + 4) % 16] } else { b };
    let mut r = req(topo, a, b, 60 + (i as u64 % 7) * 10, 1500, 1);
    r.deadline = Duration::from_micros(1200 + (i as u64 % 5) * 300);
    Step::Ask(r)
}

fn apply(c: &mut Controller, s: &Step) -> String {
    match s {
        Step::Ask(r) => format!("{:?} moved {:?}", c.request(*r), c.moved_by_last_request()),
        Step::Remove(id) => format!("{:?}", c.remove(*id).map(|e| e.id)),
    }
}

fn same_state(a: &Controller, b: &Controller) {
    assert_eq!(a.snapshot(), b.snapshot(), "queues");
    assert_eq!(a.flows().collect::<Vec<_>>(), b.flows().collect::<Vec<_>>(), "flows");
    assert_eq!(a.stats(), b.stats());
    assert_eq!(a.rerouted_ids().collect::<Vec<_>>(), b.rerouted_ids().collect::<Vec<_>>());
}

#[test]
fn a_restored_controller_decides_every_later_request_as_the_original() {
    let topo = fat_tree(4, 2);
    let cfg = || CtlConfig::chameleon(8).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<String> = topo.hosts().iter().map(|&h| topo.nodes()[h].name.clone()).collect();
    let mut original = controller(&topo, cfg());
    let (mut refused, mut moved) = (0, 0);
    for i in 0..600 {
        let out = apply(&mut original, &step(&topo, &hosts, i));
        refused += usize::from(out.starts_with("Err"));
        moved += usize::from(!out.ends_with("moved []") && out.starts_with("Ok"));
        if i % 150 != 149 {
            continue;
        }
        let cp = original.checkpoint();
        let back = Checkpoint::from_json(&topo, &cp.to_json(&topo));
        assert_eq!(back.as_ref(), Ok(&cp), "the JSON form loses nothing");
        let mut restored = controller(&topo, cfg());
        restored.restore(&cp).unwrap_or_else(|e| panic!("step {i}: {e}"));
        same_state(&original, &restored);
        assert_eq!(restored.checkpoint(), cp);
        // the next 150 steps (requests, reroutes, refusals, removals) come out the same
        let mut twin = original.clone();
        for j in i + 1..i + 151 {
            let s = step(&topo, &hosts, j);
            assert_eq!(apply(&mut restored, &s), apply(&mut twin, &s), "step {j}");
        }
        same_state(&twin, &restored);
    }
    assert!(refused > 20 && moved > 5, "the stream must refuse and reroute: {refused} {moved}");
}

#[test]
fn a_checkpoint_no_controller_could_reach_is_refused_and_leaves_it_empty() {
    let topo = fat_tree(4, 2);
    let cfg = || CtlConfig::chameleon(8).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<String> = topo.hosts().iter().map(|&h| topo.nodes()[h].name.clone()).collect();
    let mut c = controller(&topo, cfg());
    for i in 0..60 {
        apply(&mut c, &step(&topo, &hosts, i));
    }
    let good = c.checkpoint();
    assert!(good.flows.len() > 10);
    let refuse = |cp: &Checkpoint, want: &str| {
        let mut fresh = controller(&topo, cfg());
        let e = fresh.restore(cp).map(|()| "restored".to_owned()).unwrap_or_else(|e| e);
        assert!(e.contains(want), "{e}");
        assert!(fresh.is_empty() && fresh.stats() == Default::default());
        assert_eq!(fresh.snapshot(), controller(&topo, cfg()).snapshot());
        // and it still takes the good one
        fresh.restore(&good).unwrap_or_else(|e| panic!("{e}"));
        same_state(&fresh, &c);
    };
    // the same flow under many ids: more than its queues hold
    let mut over = good.clone();
    let (_, r, path) = good.flows[0].clone();
    for k in 0..400 {
        over.flows.push((good.next_id + k, r, path.clone()));
    }
    over.next_id += 400;
    refuse(&over, "exceed");
    let mut twice = good.clone();
    twice.flows.push(good.flows[0].clone());
    refuse(&twice, "an id twice");
    let mut broken = good.clone();
    broken.flows[1].2.pop();
    refuse(&broken, "does not lead from its source to its destination");
    let mut elsewhere = good.clone();
    elsewhere.flows[1].2[1] = PathHop { port: elsewhere.flows[1].2[0].port, queue: 0 };
    refuse(&elsewhere, "does not leave the path's node");
    let mut queue = good.clone();
    queue.flows[1].2[1].queue = 8;
    refuse(&queue, "has no queue 8");
    for (key, v) in [("next_id", json!(-1)), ("flows", json!({})), ("stats", json!(null))] {
        let mut j = good.to_json(&topo);
        j[key] = v;
        let e = Checkpoint::from_json(&topo, &j).map(|_| ()).unwrap_err();
        assert!(e.starts_with(key), "{key}: {e}");
    }
    let mut j = good.to_json(&topo);
    j["flows"][3]["hops"][1] = json!([1, 300]);
    let e = Checkpoint::from_json(&topo, &j).map(|_| ()).unwrap_err();
    assert_eq!(e, "flows[3].hops: expected [port, queue] pairs");
    let mut late = good.clone();
    late.flows[2].1.deadline = Duration::from_micros(50);
    refuse(&late, "invalid request");
    let mut busy = controller(&topo, cfg());
    busy.request(req(&topo, &hosts[0], &hosts[9], 10, 1500, 5)).unwrap_or_else(|e| panic!("{e}"));
    assert!(busy.restore(&good).is_err_and(|e| e.contains("has admitted flows")));
}
