use super::*;
use crate::packet::{Meta, Packet};
use proptest::prelude::*;

fn pkt(id: u64, size: u32, priority: u8) -> Packet {
    Packet::new(vec![0; 20], size.saturating_sub(20), Meta { id, priority, ..Meta::default() })
}

fn t(ns: u64) -> Time {
    Time::from_nanos(ns)
}

fn limits(p: u32, b: u64) -> QueueLimits {
    QueueLimits { limit_packets: p, limit_bytes: Bytes::new(b) }
}

#[test]
fn fifo_keeps_order_and_counts() {
    let mut q = Fifo::new(limits(10, 10_000));
    for i in 0..3 {
        assert_eq!(q.enqueue(t(i), pkt(i, 100, 7)), Verdict::Enqueued);
    }
    assert_eq!(q.len(), 3);
    assert_eq!(q.byte_len(), Bytes::new(300));
    assert_eq!(q.next_ready(t(5)), Some(t(0)));
    let ids: Vec<_> = std::iter::from_fn(|| q.dequeue(t(9))).map(|p| p.meta.id).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    assert_eq!(q.next_ready(t(9)), None);
    assert_eq!(q.stats().enqueued_packets, 3);
    assert_eq!(q.stats().dequeued_bytes, 300);
    assert_eq!(q.stats().peak_packets, 3);
}

#[test]
fn fifo_drops_at_packet_and_byte_limits_with_reasons() {
    let mut q = Fifo::new(limits(2, 250));
    assert_eq!(q.enqueue(t(0), pkt(0, 100, 7)), Verdict::Enqueued);
    match q.enqueue(t(0), pkt(1, 200, 7)) {
        Verdict::Dropped(d) => {
            assert_eq!(d.reason, DropReason::QueueFullBytes);
            assert_eq!(d.pkt.meta.id, 1, "the refused packet is handed back");
        }
        v => panic!("expected a drop, got {v:?}"),
    }
    assert_eq!(q.enqueue(t(0), pkt(2, 100, 7)), Verdict::Enqueued);
    assert!(matches!(
        q.enqueue(t(0), pkt(3, 10, 7)),
        Verdict::Dropped(Dropped { reason: DropReason::QueueFullPackets, .. })
    ));
    assert_eq!(q.stats().drops.get(DropReason::QueueFullBytes), 1);
    assert_eq!(q.stats().drops.get(DropReason::QueueFullPackets), 1);
}

#[test]
fn strict_priority_serves_highest_first_and_clamps_priorities() {
    let spec = QueueSpec::Priority { classes: 3, limits: limits(10, 100_000) };
    let mut q = spec.build().unwrap();
    // priorities 7 and 5 both land in the last class (2).
    for (id, p) in [(0, 7), (1, 1), (2, 0), (3, 5), (4, 1)] {
        assert_eq!(q.enqueue(t(0), pkt(id, 100, p)), Verdict::Enqueued);
    }
    assert_eq!(q.len(), 5);
    let ids: Vec<_> = std::iter::from_fn(|| q.dequeue(t(1))).map(|p| p.meta.id).collect();
    assert_eq!(ids, vec![2, 1, 4, 0, 3]);
    let per_class: Vec<_> = q.class_stats().iter().map(|s| s.enqueued_packets).collect();
    assert_eq!(per_class, vec![1, 2, 2]);
    assert_eq!(q.stats().dequeued_packets, 5);
}

#[test]
fn strict_priority_limits_apply_per_class() {
    let mut q = QueueSpec::Priority { classes: 2, limits: limits(1, 10_000) }.build().unwrap();
    assert_eq!(q.enqueue(t(0), pkt(0, 100, 0)), Verdict::Enqueued);
    assert!(matches!(q.enqueue(t(0), pkt(1, 100, 0)), Verdict::Dropped(_)));
    assert_eq!(q.enqueue(t(0), pkt(2, 100, 1)), Verdict::Enqueued);
    assert_eq!(q.stats().drops.get(DropReason::QueueFullPackets), 1);
}

#[test]
fn spec_parses_from_toml_and_rejects_mistakes() {
    let s: QueueSpec =
        toml::from_str("kind = \"priority\"\nclasses = 4\nlimit_packets = 64").unwrap();
    assert_eq!(
        s,
        QueueSpec::Priority {
            classes: 4,
            limits: QueueLimits { limit_packets: 64, limit_bytes: Bytes::new(1_500_000) }
        }
    );
    let s: QueueSpec = toml::from_str("kind = \"fifo\"\nlimit_bytes = \"64KiB\"").unwrap();
    assert_eq!(s, QueueSpec::Fifo { limits: limits(1000, 65_536) });
    let e = toml::from_str::<QueueSpec>("kind = \"fifo\"\nlimit_pakets = 3").unwrap_err();
    assert!(e.to_string().contains("limit_pakets"), "{e}");
    let e = toml::from_str::<QueueSpec>("kind = \"lifo\"").unwrap_err();
    assert!(e.to_string().contains("lifo"), "{e}");
}

#[test]
fn the_keys_listed_for_a_kind_are_the_ones_it_takes() {
    let kinds = ["fifo", "priority", "lbf", "lbf-slack", "lbf-dynamic", "step-ce", "htb"];
    let unknown = |text: &str| match toml::from_str::<QueueSpec>(text) {
        Ok(_) => false,
        Err(e) => e.message().contains("unknown field"),
    };
    for kind in kinds {
        // what the kind requires, so that no "missing field" hides an unknown one
        let required = match kind {
            "priority" => "classes = 2\n",
            "htb" => "rate = \"1Mbps\"\n",
            _ => "",
        };
        let keys = QueueSpec::keys(kind).unwrap();
        assert!(keys.ends_with(&["limit_packets", "limit_bytes"]), "{kind}");
        for key in keys {
            // a value of the wrong type, perhaps, but never an unknown key
            let text = if required.starts_with(key) {
                format!("kind = \"{kind}\"\n{required}")
            } else {
                format!("kind = \"{kind}\"\n{required}{key} = 1")
            };
            assert!(!unknown(&text), "{kind}: {key}");
        }
        assert!(unknown(&format!("kind = \"{kind}\"\n{required}limit_pakets = 1")), "{kind}");
    }
    // the other kinds list their keys themselves
    for kind in ["vdq-csaqm", "dualpi2", "pv-marker", "fq", "lifo"] {
        assert_eq!(QueueSpec::keys(kind), None, "{kind}");
    }
    let e = toml::from_str::<QueueSpec>("kind = \"fq\"\nquantm = 1").unwrap_err();
    assert!(e.message().contains("expected one of"), "{e}");
    let e = QueueSpec::Priority { classes: 9, limits: QueueLimits::default() }.build().unwrap_err();
    assert_eq!(e.to_string(), "field `classes`: between 1 and 8");
    let e = QueueSpec::Fifo { limits: limits(0, 10) }.build().unwrap_err();
    assert!(e.to_string().contains("limit_packets"));
}

proptest! {
    /// Conservation: every offered packet is either dequeued, dropped with a counted reason, or
    /// still held; held bytes never exceed the limit; priority order is never inverted.
    #[test]
    fn priority_conserves_and_never_inverts(
        ops in proptest::collection::vec((any::<bool>(), 0u8..8, 40u32..1600), 1..400),
        classes in 1u8..=8,
    ) {
        let lim = limits(16, 8_000);
        let mut q = QueueSpec::Priority { classes, limits: lim }.build().unwrap();
        let (mut offered, mut out, mut dropped) = (0u64, 0u64, 0u64);
        for (i, (is_enq, prio, size)) in ops.into_iter().enumerate() {
            let now = t(i as u64);
            if is_enq {
                offered += 1;
                if let Verdict::Dropped(_) = q.enqueue(now, pkt(i as u64, size, prio)) {
                    dropped += 1;
                }
            } else if let Some(p) = q.dequeue(now) {
                out += 1;
                let served = usize::from(p.meta.priority).min(usize::from(classes) - 1);
                for higher in q.class_stats().iter().take(served) {
                    // nothing of a higher class may still be waiting
                    prop_assert_eq!(higher.enqueued_packets, higher.dequeued_packets);
                }
            }
            for s in q.class_stats() {
                prop_assert!(s.enqueued_bytes - s.dequeued_bytes <= lim.limit_bytes.get());
            }
        }
        prop_assert_eq!(offered, out + dropped + q.len() as u64);
        prop_assert_eq!(dropped, q.stats().drops.total());
    }
}

/// Every queue kind, by the variant that holds it: the match has no wildcard, so a new kind
/// does not compile until it is named here and given a spec in
/// [`drain_removes_everything_and_counts_nothing_in_every_kind`].
fn variant(q: &AnyQueue) -> &'static str {
    match q {
        AnyQueue::Fifo(_) => "fifo",
        AnyQueue::Priority(_) => "priority",
        AnyQueue::Lbf(_) => "lbf",
        AnyQueue::StepCe(_) => "step-ce",
        AnyQueue::Htb(_) => "htb",
        AnyQueue::VdqCsaqm(_) => "vdq-csaqm",
        AnyQueue::Dualpi2(_) => "dualpi2",
        AnyQueue::PvMarker(_) => "pv-marker",
        AnyQueue::Fq(_) => "fq",
    }
}

/// A real UDP frame of 1000 wire bytes from host `src` (so that AQMs classify it by ECN and
/// FQ by flow), with an LBF hold until `eligible` and an expiry long before the end of time.
fn udp(id: u64, src: u8, ecn: latnet_wire::Ecn, priority: u8, eligible: Time) -> Packet {
    let m = latnet_wire::EthernetAddress([2, 0, 0, 0, 0, 1]);
    let (a, b) = (std::net::Ipv4Addr::new(10, 0, 0, src), std::net::Ipv4Addr::new(10, 0, 1, 1));
    let mut f = Vec::new();
    latnet_wire::build_udp_ipv4(&mut f, m, m, a, b, 0, ecn, 64, 1, 2, 0).unwrap();
    let virt = 1000 - f.len() as u32;
    let meta = Meta {
        id,
        priority,
        eligible,
        deadline: Some(t(2_000_000_000)),
        expires: Some(t(1_500_000_000)),
        ..Meta::default()
    };
    Packet::new(f, virt, meta)
}

/// At the end of a run the runner empties each queue with `drain`: every packet held comes out
/// whatever its eligible time, expiry, sojourn or AQM state, and none of the queue's counters
/// move (it did not hand the packets to a transmitter, mark them or drop them), in every kind
/// of queue, nested ones included.
#[test]
fn drain_removes_everything_and_counts_nothing_in_every_kind() {
    use latnet_wire::Ecn;
    let specs = [
        "kind = \"fifo\"",
        "kind = \"priority\"\nclasses = 3",
        "kind = \"lbf\"",
        "kind = \"lbf\"\nsecond = \"priority\"",
        "kind = \"lbf-slack\"",
        "kind = \"lbf-dynamic\"",
        "kind = \"step-ce\"\nthreshold = \"1us\"\nnon_ect = \"drop\"",
        "kind = \"step-ce\"\nthreshold_packets = 100\nnon_ect = \"drop\"",
        "kind = \"htb\"\nrate = \"1Mbps\"\nclasses = [{ rate = \"500kbps\" }, { rate = \"500kbps\" }]",
        "kind = \"vdq-csaqm\"\nrate = \"10Mbps\"",
        "kind = \"dualpi2\"",
        "kind = \"pv-marker\"\nqueue = { kind = \"step-ce\", threshold = \"1us\", non_ect = \"drop\" }",
        "kind = \"pv-marker\"\nqueue = { kind = \"dualpi2\" }",
        "kind = \"fq\"\nmaxrate = \"1Mbps\"",
        "kind = \"fq\"",
    ];
    let mut seen = std::collections::BTreeSet::new();
    for spec in specs {
        let mut q = toml::from_str::<QueueSpec>(spec).unwrap().build_seeded(3).unwrap();
        seen.insert(variant(&q));
        let ecns = [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce];
        let mut held = Vec::new();
        for id in 0..40u64 {
            // odd packets held by LBF queues until long after the end of the run
            let eligible = if id % 2 == 0 { Time::ZERO } else { t(1_000_000_000) };
            let p = udp(id, 1 + (id % 5) as u8, ecns[id as usize % 4], (id % 4) as u8, eligible);
            if q.enqueue(t(id * 1_000), p) == Verdict::Enqueued {
                held.push(id);
            }
        }
        // a few leave normally first, so the counters are not all zero
        for k in 0..3u64 {
            if let Some(p) = q.dequeue(t(50_000 + k)) {
                held.retain(|&id| id != p.meta.id);
            }
        }
        while let Some(d) = q.poll_drop() {
            held.retain(|&id| id != d.pkt.meta.id);
        }
        assert!(held.len() > 10, "{spec}: {} held", held.len());
        let stats = q.stats().clone();
        let classes: Vec<QueueStats> = q.class_stats().into_iter().cloned().collect();
        let aqm = format!("{:?}", q.aqm_report());
        let mut drained: Vec<u64> = std::iter::from_fn(|| q.drain()).map(|p| p.meta.id).collect();
        drained.sort_unstable();
        held.sort_unstable();
        assert_eq!(drained, held, "{spec}: drain gives back exactly what was held");
        assert_eq!((q.len(), q.byte_len()), (0, Bytes::ZERO), "{spec}");
        assert!(q.poll_drop().is_none(), "{spec}: draining drops nothing");
        assert_eq!(q.next_ready(Time::MAX), None, "{spec}");
        assert!(q.dequeue(Time::MAX).is_none(), "{spec}");
        assert_eq!(q.stats(), &stats, "{spec}: draining counts nothing");
        let after: Vec<QueueStats> = q.class_stats().into_iter().cloned().collect();
        assert_eq!(after, classes, "{spec}: nor in a class");
        assert_eq!(format!("{:?}", q.aqm_report()), aqm, "{spec}: nor in the AQM report");
    }
    let all =
        ["fifo", "priority", "lbf", "step-ce", "htb", "vdq-csaqm", "dualpi2", "pv-marker", "fq"];
    assert_eq!(seen, all.into_iter().collect(), "every kind of queue is drained above");
}
