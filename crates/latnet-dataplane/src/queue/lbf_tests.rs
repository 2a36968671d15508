use super::*;
use crate::packet::Meta;
use crate::queue::{AnyQueue, QueueSpec};
use proptest::prelude::*;

fn t(us: u64) -> Time {
    Time::from_nanos(us * 1000)
}

fn pkt(id: u64, eligible: u64, deadline: Option<u64>, expires: Option<u64>) -> Packet {
    let meta = Meta {
        id,
        eligible: t(eligible),
        deadline: deadline.map(t),
        expires: expires.map(t),
        ..Meta::default()
    };
    Packet::new(vec![0; 40], 260, meta)
}

fn limits() -> QueueLimits {
    QueueLimits { limit_packets: 100, limit_bytes: Bytes::new(1_000_000) }
}

fn ids(q: &mut LbfQueue, now: u64) -> Vec<u64> {
    std::iter::from_fn(|| q.dequeue(t(now))).map(|p| p.meta.id).collect()
}

#[test]
fn holds_a_packet_until_its_eligible_time() {
    let mut q = LbfQueue::new(limits(), LbfOrder::Fifo);
    assert_eq!(q.enqueue(t(0), pkt(1, 100, None, None)), Verdict::Enqueued);
    assert_eq!(q.dequeue(t(99)), None);
    assert_eq!(q.next_ready(t(99)), Some(t(100)));
    assert_eq!(q.waiting(), 1);
    assert_eq!(q.dequeue(t(100)).map(|p| p.meta.id), Some(1));
    assert_eq!(q.next_ready(t(100)), None);
    assert!(q.is_empty());
}

#[test]
fn first_stage_is_a_pifo_on_eligible_time_ties_in_arrival_order() {
    let mut q = LbfQueue::new(limits(), LbfOrder::Fifo);
    for (id, at, el) in [(1, 0, 300), (2, 10, 200), (3, 20, 200), (4, 30, 250)] {
        assert_eq!(q.enqueue(t(at), pkt(id, el, None, None)), Verdict::Enqueued);
    }
    assert_eq!(ids(&mut q, 300), vec![2, 3, 4, 1]);
}

#[test]
fn fifo_second_stage_keeps_eligibility_order_across_dequeues() {
    let mut q = LbfQueue::new(limits(), LbfOrder::Fifo);
    let _ = q.enqueue(t(0), pkt(1, 10, None, None));
    let _ = q.enqueue(t(0), pkt(2, 20, None, None));
    let _ = q.enqueue(t(0), pkt(3, 5, None, None));
    assert_eq!(q.dequeue(t(12)).map(|p| p.meta.id), Some(3));
    let _ = q.enqueue(t(12), pkt(4, 12, None, None));
    assert_eq!(ids(&mut q, 30), vec![1, 4, 2]);
}

#[test]
fn expired_packets_are_dropped_at_dequeue_with_a_reason() {
    let mut q = LbfQueue::new(limits(), LbfOrder::Fifo);
    let _ = q.enqueue(t(0), pkt(1, 0, Some(50), Some(50)));
    let _ = q.enqueue(t(0), pkt(2, 0, None, Some(500)));
    // at exactly the expiry instant the packet may still go; after it, not.
    assert_eq!(q.dequeue(t(51)).map(|p| p.meta.id), Some(2));
    let d = q.poll_drop().expect("one drop");
    assert_eq!((d.pkt.meta.id, d.reason), (1, DropReason::DeadlineExpired));
    assert_eq!(q.poll_drop(), None);
    assert_eq!(q.stats().drops.get(DropReason::DeadlineExpired), 1);
    assert_eq!((q.len(), q.byte_len()), (0, Bytes::ZERO));
    let _ = q.enqueue(t(60), pkt(3, 60, None, Some(70)));
    assert_eq!(q.dequeue(t(70)).map(|p| p.meta.id), Some(3));
}

#[test]
fn budget_classes_serve_the_smaller_upper_budget_first() {
    let order = LbfOrder::Budget { width: Duration::from_micros(100), classes: 4 };
    let mut q = LbfQueue::new(limits(), order);
    // arrival 0: budgets 350 us (class 3), 50 us (class 0), none (last class), 150 us (class 1)
    let _ = q.enqueue(t(0), pkt(1, 0, Some(350), None));
    let _ = q.enqueue(t(0), pkt(2, 0, Some(50), None));
    let _ = q.enqueue(t(0), pkt(3, 0, None, None));
    let _ = q.enqueue(t(0), pkt(4, 0, Some(150), None));
    assert_eq!(ids(&mut q, 0), vec![2, 4, 1, 3]);
}

#[test]
fn slack_buckets_then_earliest_eligible() {
    let order = LbfOrder::Slack { width: Duration::from_micros(100), buckets: 8 };
    let mut q = LbfQueue::new(limits(), order);
    // slack = deadline - eligible
    let _ = q.enqueue(t(0), pkt(1, 30, Some(330), None)); // slack 300: bucket 3
    let _ = q.enqueue(t(0), pkt(2, 20, Some(120), None)); // slack 100: bucket 1
    let _ = q.enqueue(t(0), pkt(3, 10, Some(390), None)); // slack 380: bucket 3
    let _ = q.enqueue(t(0), pkt(4, 40, Some(140), None)); // slack 100: bucket 1
    assert_eq!(ids(&mut q, 50), vec![2, 4, 3, 1]);
}

#[test]
fn dynamic_priority_is_least_laxity_first() {
    let mut q = LbfQueue::new(limits(), LbfOrder::Deadline);
    let _ = q.enqueue(t(0), pkt(1, 0, None, None));
    let _ = q.enqueue(t(0), pkt(2, 5, Some(900), None));
    let _ = q.enqueue(t(0), pkt(3, 0, Some(300), None));
    let _ = q.enqueue(t(0), pkt(4, 40, Some(100), None)); // not yet eligible at 10
    assert_eq!(q.dequeue(t(10)).map(|p| p.meta.id), Some(3));
    assert_eq!(ids(&mut q, 40), vec![4, 2, 1]);
}

#[test]
fn limits_apply_to_both_stages() {
    let l = QueueLimits { limit_packets: 2, limit_bytes: Bytes::new(1_000_000) };
    let mut q = LbfQueue::new(l, LbfOrder::Fifo);
    let _ = q.enqueue(t(0), pkt(1, 0, None, None));
    let _ = q.enqueue(t(0), pkt(2, 500, None, None));
    match q.enqueue(t(0), pkt(3, 0, None, None)) {
        Verdict::Dropped(d) => assert_eq!(d.reason, DropReason::QueueFullPackets),
        Verdict::Enqueued => panic!("over the limit"),
    }
    assert_eq!(q.stats().peak_packets, 2);
}

#[test]
fn drain_ignores_eligibility_and_expiry() {
    let mut q = LbfQueue::new(limits(), LbfOrder::Fifo);
    let _ = q.enqueue(t(0), pkt(1, 1_000, None, Some(1)));
    let _ = q.enqueue(t(0), pkt(2, 0, None, Some(1)));
    let got: Vec<_> = std::iter::from_fn(|| q.drain()).map(|p| p.meta.id).collect();
    assert_eq!(got, vec![2, 1]);
    assert_eq!(q.poll_drop(), None);
    assert_eq!(q.stats().drops.total(), 0);
}

#[test]
fn specs_build_and_explain() {
    let parse = |s: &str| toml::from_str::<QueueSpec>(s);
    let q = parse("kind = \"lbf\"").unwrap().build().unwrap();
    assert!(matches!(q, AnyQueue::Lbf(ref l) if l.order() == LbfOrder::Fifo));
    let q = parse("kind = \"lbf\"\nsecond = \"priority\"\nclass_width = \"50us\"\nclasses = 4")
        .unwrap()
        .build()
        .unwrap();
    assert!(matches!(q, AnyQueue::Lbf(ref l)
        if l.order() == LbfOrder::Budget { width: Duration::from_micros(50), classes: 4 }));
    let q = parse("kind = \"lbf-slack\"\nbucket = \"1ms\"\nbuckets = 10\nlimit_packets = 7")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(q.byte_len(), Bytes::ZERO);
    assert!(matches!(q, AnyQueue::Lbf(ref l) if l.limits().limit_packets == 7));
    assert!(parse("kind = \"lbf-dynamic\"").unwrap().build().is_ok());
    let e = parse("kind = \"lbf-slack\"\nbuckets = 0").unwrap().build().unwrap_err();
    assert!(e.to_string().contains("buckets"), "{e}");
    let e = parse("kind = \"lbf\"\nsecond = \"priority\"\nclass_width = 0").unwrap().build();
    assert!(e.unwrap_err().to_string().contains("class_width"));
    assert!(parse("kind = \"lbf\"\nsecond = \"lifo\"").is_err());
}

fn order_strategy() -> impl Strategy<Value = LbfOrder> {
    prop_oneof![
        Just(LbfOrder::Fifo),
        (1u64..300, 1u16..10)
            .prop_map(|(w, c)| LbfOrder::Budget { width: Duration::from_micros(w), classes: c }),
        (1u64..300, 1u16..10)
            .prop_map(|(w, c)| LbfOrder::Slack { width: Duration::from_micros(w), buckets: c }),
        Just(LbfOrder::Deadline),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Enq { hold: u64, budget: Option<u64>, expire: Option<u64> },
    Deq,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..400, proptest::option::of(0u64..800), proptest::option::of(0u64..800))
            .prop_map(|(hold, budget, expire)| Op::Enq { hold, budget, expire }),
        Just(Op::Deq),
        (0u64..200).prop_map(Op::Advance),
    ]
}

proptest! {
    /// No packet ever leaves before its eligible time or after its expiry; `next_ready` is
    /// truthful; every packet is accounted for.
    #[test]
    fn never_early_never_expired_and_conserving(order in order_strategy(), ops in proptest::collection::vec(op(), 1..200)) {
        let l = QueueLimits { limit_packets: 50, limit_bytes: Bytes::new(1_000_000) };
        let mut q = LbfQueue::new(l, order);
        let mut now = 0u64;
        let (mut offered, mut out, mut dropped) = (0u64, 0u64, 0u64);
        for (i, o) in ops.into_iter().enumerate() {
            match o {
                Op::Enq { hold, budget, expire } => {
                    offered += 1;
                    let p = pkt(i as u64, now + hold, budget.map(|b| now + hold + b), expire.map(|e| now + e));
                    if let Verdict::Dropped(_) = q.enqueue(t(now), p) { dropped += 1; }
                }
                Op::Deq => {
                    match q.dequeue(t(now)) {
                        Some(p) => {
                            out += 1;
                            prop_assert!(p.meta.eligible <= t(now), "released early");
                            prop_assert!(p.meta.expires.is_none_or(|e| t(now) <= e), "released expired");
                        }
                        None => {
                            if let Some(r) = q.next_ready(t(now)) {
                                prop_assert!(r > t(now), "said ready but gave nothing");
                            }
                        }
                    }
                    while let Some(d) = q.poll_drop() {
                        prop_assert_eq!(d.reason, DropReason::DeadlineExpired);
                        prop_assert!(d.pkt.meta.expires.is_some_and(|e| t(now) > e));
                        dropped += 1;
                    }
                }
                Op::Advance(d) => now += d,
            }
            prop_assert_eq!(offered, out + dropped + q.len() as u64);
            prop_assert_eq!(q.byte_len().get(), q.len() as u64 * 300);
        }
        // Everything left comes out, never before its time, when woken at next_ready.
        let mut guard = 0;
        while let Some(r) = q.next_ready(t(now)) {
            guard += 1;
            prop_assert!(guard < 1000);
            now = now.max(r.as_nanos() / 1000 + u64::from(r.as_nanos() % 1000 != 0));
            if let Some(p) = q.dequeue(t(now)) {
                prop_assert!(p.meta.eligible <= t(now));
            }
            while q.poll_drop().is_some() {}
        }
        prop_assert!(q.is_empty());
    }
}
