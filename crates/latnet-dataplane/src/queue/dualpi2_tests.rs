//! DualPI2 against hand-computed values of RFC 9332's pseudocode and Linux's scheduler.

use super::*;
use crate::packet::Meta;
use crate::queue::QueueSpec;
use latnet_wire::{build_udp_ipv4, Ecn, EthernetAddress};
use std::net::Ipv4Addr;

fn pkt(id: u64, ecn: Ecn, size: u32) -> Packet {
    let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
    let mut f = Vec::new();
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    build_udp_ipv4(&mut f, m, m, a, b, 0, ecn, 64, 1, 2, size as usize - 42).unwrap();
    Packet::new(f, size - 42, Meta { id, ..Meta::default() })
}

fn ms(x: u64) -> Time {
    Time::from_nanos(x * 1_000_000)
}

fn us(x: u64) -> Time {
    Time::from_nanos(x * 1_000)
}

fn q(spec: Dualpi2Spec) -> DualPi2 {
    DualPi2::new(&spec, 7).unwrap()
}

fn prob(q: &DualPi2) -> f64 {
    q.base_prob() as f64 / ONE as f64
}

fn ecn_of(p: &Packet) -> Ecn {
    latnet_wire::parse_headers(&p.data).unwrap().key.unwrap().ecn
}

/// Two PI updates with a Classic packet waiting since t = 0:
/// t = 16 ms: 0.16 (0.016 - 0.015) + 3.2 (0.016 - 0) = 0.05136
/// t = 32 ms: 0.05136 + 0.16 (0.032 - 0.015) + 3.2 (0.032 - 0.016) = 0.10528
#[test]
fn pi_update_by_hand() {
    let spec = Dualpi2Spec {
        alpha: Some(Ratio::parse("0.16").unwrap()),
        beta: Some(Ratio::parse("3.2").unwrap()),
        ..Dualpi2Spec::default()
    };
    let mut d = q(spec);
    assert_eq!(d.enqueue(ms(0), pkt(0, Ecn::NotEct, 1000)), Verdict::Enqueued);
    let _ = d.enqueue(ms(16), pkt(1, Ecn::NotEct, 1000));
    assert!((prob(&d) - 0.05136).abs() < 1e-9, "{}", prob(&d));
    let _ = d.enqueue(ms(32), pkt(2, Ecn::NotEct, 1000));
    assert!((prob(&d) - 0.10528).abs() < 1e-9, "{}", prob(&d));
    // queue drained at 32 ms; at 48 ms: 0.10528 + 0.16 (0 - 0.015) + 3.2 (0 - 0.032) = 0.00048
    while d.dequeue(ms(32)).is_some() {}
    let _ = d.enqueue(ms(48), pkt(3, Ecn::NotEct, 1000));
    assert!((prob(&d) - 0.00048).abs() < 1e-9, "{}", prob(&d));
    // at 64 ms (that packet waited 16 ms): 0.00048 + 0.16 (0.016 - 0.015) + 3.2 (0.016 - 0)
    let _ = d.enqueue(ms(64), pkt(4, Ecn::NotEct, 1000));
    assert!((prob(&d) - 0.05184).abs() < 1e-9, "{}", prob(&d));
    // drained at 64 ms; at 80 ms: 0.05184 - 0.0024 - 0.0512 < 0 -> clamped at 0
    while d.dequeue(ms(64)).is_some() {}
    let _ = d.enqueue(ms(80), pkt(5, Ecn::NotEct, 1000));
    assert_eq!(d.base_prob(), 0);
}

/// The Linux profile's gains are 41/256 and 819/256 Hz exactly.
#[test]
fn linux_gains_are_exact() {
    let mut d = q(Dualpi2Spec::default());
    let _ = d.enqueue(ms(0), pkt(0, Ecn::NotEct, 1000));
    let _ = d.enqueue(ms(16), pkt(1, Ecn::NotEct, 1000));
    let want = 41.0 / 256.0 * 0.001 + 819.0 / 256.0 * 0.016;
    assert!((prob(&d) - want).abs() < 1e-9, "{} vs {want}", prob(&d));
}

/// Linux takes the larger head sojourn of both queues, RFC 9332 the Classic one only.
#[test]
fn qdelay_reference_by_profile() {
    for (profile, grows) in [(Dualpi2Profile::Linux, true), (Dualpi2Profile::Rfc9332, false)] {
        let mut d = q(Dualpi2Spec { profile, ..Dualpi2Spec::default() });
        let _ = d.enqueue(ms(0), pkt(0, Ecn::Ect1, 1000));
        let _ = d.enqueue(ms(40), pkt(1, Ecn::Ect1, 1000));
        assert_eq!(d.base_prob() > 0, grows, "{profile:?}");
    }
}

/// Coupled L4S marking with RFC 9332's recur(): p' = 1/8, k = 2 -> p_CL = 1/4; the accumulator
/// marks when it exceeds 1: at packets 5, 9, 13, ... -> 249 marks in 1000.
#[test]
fn coupled_recur_marks_by_hand() {
    let mut d = q(Dualpi2Spec { profile: Dualpi2Profile::Rfc9332, ..Dualpi2Spec::default() });
    d.p = ONE / 8;
    for i in 0..1002 {
        assert_eq!(d.enqueue(us(1), pkt(i, Ecn::Ect1, 1000)), Verdict::Enqueued);
    }
    let mut marked = Vec::new();
    for k in 1..=1000u64 {
        let p = d.dequeue(us(2)).unwrap();
        if ecn_of(&p) == Ecn::Ce {
            marked.push(k);
        }
    }
    assert_eq!(marked.len(), 249);
    assert_eq!(&marked[..3], &[5, 9, 13]);
    assert_eq!(d.stats().ce_marks, 249);
    assert_eq!(d.class_stats()[0].ce_marks, 249);
}

/// No probabilistic signal while the backlog left is under `min_backlog`.
#[test]
fn no_signal_below_min_backlog() {
    let mut d = q(Dualpi2Spec { profile: Dualpi2Profile::Rfc9332, ..Dualpi2Spec::default() });
    d.p = ONE / 2; // p_CL = 1
    let _ = d.enqueue(us(1), pkt(0, Ecn::Ect1, 1000));
    let p = d.dequeue(us(2)).unwrap();
    assert_eq!(ecn_of(&p), Ecn::Ect1, "empty after dequeue: no coupled mark");
}

/// Classic: drop (Not-ECT) or mark (ECT(0)) with p'^2 = 1/4 from two rolls of 1/2.
#[test]
fn classic_squared_probability() {
    for ecn in [Ecn::NotEct, Ecn::Ect0] {
        let mut d = q(Dualpi2Spec { limit_packets: Some(50_000), ..Dualpi2Spec::default() });
        d.p = ONE / 2;
        let n = 40_000u64;
        for i in 0..n + 40 {
            assert_eq!(d.enqueue(us(1), pkt(i, ecn, 100)), Verdict::Enqueued);
        }
        let (mut sent, mut ce) = (0u64, 0u64);
        // keep the backlog above min_backlog (3000 B) so every packet may be signalled
        while d.len() > 40 {
            if let Some(p) = d.dequeue(us(2)) {
                sent += 1;
                ce += u64::from(ecn_of(&p) == Ecn::Ce);
            }
        }
        let mut dropped = 0;
        while let Some(x) = d.poll_drop() {
            assert_eq!(x.reason, DropReason::AqmDrop);
            dropped += 1;
        }
        // sigma = sqrt(n/4 * 3/4) ~ 87 for n = 40000 signals
        let signalled = if ecn == Ecn::NotEct { dropped } else { ce };
        let total = sent + dropped;
        let expect = total as f64 / 4.0;
        assert!(
            (signalled as f64 - expect).abs() < 4.0 * (total as f64 * 0.1875).sqrt(),
            "{ecn:?}: {signalled} of {total}"
        );
        if ecn == Ecn::Ect0 {
            assert_eq!(dropped, 0, "ECT(0) is marked, not dropped");
        }
    }
}

/// Overload (k p' > 1): L4S packets are dropped with p'^2 and every survivor is marked.
#[test]
fn overload_drops_l4s_classic_style() {
    let mut d = q(Dualpi2Spec::default());
    d.p = (ONE as f64 * 0.6) as i64;
    let n = 10_000u64;
    for i in 0..n + 40 {
        let _ = d.enqueue(us(1), pkt(i, Ecn::Ect1, 100));
    }
    let (mut sent, mut ce) = (0u64, 0u64);
    // keep the backlog above min_backlog (3000 B = 30 packets) so every signal applies
    while d.len() > 40 {
        if let Some(p) = d.dequeue(us(2)) {
            sent += 1;
            ce += u64::from(ecn_of(&p) == Ecn::Ce);
        }
    }
    let dropped = std::iter::from_fn(|| d.poll_drop()).count() as u64;
    assert_eq!(ce, sent, "all survivors marked");
    let total = (sent + dropped) as f64;
    assert!(
        (dropped as f64 / total - 0.36).abs() < 4.0 * (0.36 * 0.64 / total).sqrt(),
        "{dropped}"
    );
}

/// Native L4S AQM: Linux's step at 1 ms (sojourn strictly above), RFC's ramp 800 us + 400 us
/// (1 ms sojourn -> 1/2; with recur: marks at packets 3, 5, 7, ... -> 49 of 100).
#[test]
fn native_step_and_ramp() {
    let mut d = q(Dualpi2Spec::default());
    let _ = d.enqueue(ms(0), pkt(0, Ecn::Ect1, 1000));
    assert_eq!(ecn_of(&d.dequeue(ms(1)).unwrap()), Ecn::Ect1, "exactly 1 ms: no mark");
    let _ = d.enqueue(ms(2), pkt(1, Ecn::Ect1, 1000));
    assert_eq!(ecn_of(&d.dequeue(ms(2) + Duration::from_nanos(1_000_001)).unwrap()), Ecn::Ce);

    let mut d = q(Dualpi2Spec { profile: Dualpi2Profile::Rfc9332, ..Dualpi2Spec::default() });
    let mut marks = Vec::new();
    for k in 0..100u64 {
        let t = ms(2 * k);
        let _ = d.enqueue(t, pkt(k, Ecn::Ect1, 1000));
        if ecn_of(&d.dequeue(t + Duration::from_millis(1)).unwrap()) == Ecn::Ce {
            marks.push(k + 1);
        }
    }
    assert_eq!(d.base_prob(), 0);
    assert_eq!(marks.len(), 49);
    assert_eq!(&marks[..2], &[3, 5]);
}

/// Linux WRR with c_protection 10 %: credit starts at 1500 * (10 - 90) = -120000; L4S goes
/// while it is at most 0 (+15000 per L4S packet, -135000 per Classic one): 9 x L, C, repeated
/// (as sch_dualpi2 `dequeue_packet`): 100 Classic packets in the first 1000.
#[test]
fn wrr_gives_classic_ten_percent() {
    let mut d = q(Dualpi2Spec::default());
    for i in 0..1000 {
        let _ = d.enqueue(us(1), pkt(2 * i, Ecn::Ect1, 1500));
        let _ = d.enqueue(us(1), pkt(2 * i + 1, Ecn::NotEct, 1500));
    }
    let order: Vec<bool> =
        (0..1000).map(|_| ecn_of(&d.dequeue(us(2)).unwrap()) == Ecn::NotEct).collect();
    let mut first = vec![false; 9];
    first.push(true);
    assert_eq!(&order[..10], &first[..]);
    assert_eq!(&order[10..20], &first[..]);
    assert_eq!(order.iter().filter(|&&c| c).count(), 100);
}

/// RFC time-shifted FIFO: the L4S head goes first unless it arrived more than tshift (50 ms)
/// after the Classic head.
#[test]
fn time_shifted_fifo() {
    let mut d = q(Dualpi2Spec { profile: Dualpi2Profile::Rfc9332, ..Dualpi2Spec::default() });
    let _ = d.enqueue(ms(0), pkt(0, Ecn::NotEct, 100));
    let _ = d.enqueue(ms(40), pkt(1, Ecn::Ect1, 100));
    let _ = d.enqueue(ms(60), pkt(2, Ecn::NotEct, 100));
    let _ = d.enqueue(ms(120), pkt(3, Ecn::Ect1, 100));
    let ids: Vec<u64> = std::iter::from_fn(|| d.dequeue(ms(121))).map(|p| p.meta.id).collect();
    // L(40) before C(0): 40 <= 0 + 50; then C(0)... C(0) is served after L(40) because the
    // next L head (120) is more than 50 ms after C(0); then C(60) before L(120)? 120 <= 110 no.
    assert_eq!(ids, vec![1, 0, 2, 3]);
}

#[test]
fn limits_and_malformed_frames() {
    let spec = Dualpi2Spec { limit_packets: Some(2), ..Dualpi2Spec::default() };
    let mut d = q(spec);
    assert_eq!(d.enqueue(us(0), pkt(0, Ecn::Ect1, 100)), Verdict::Enqueued);
    assert_eq!(d.enqueue(us(0), pkt(1, Ecn::NotEct, 100)), Verdict::Enqueued);
    assert!(matches!(
        d.enqueue(us(0), pkt(2, Ecn::NotEct, 100)),
        Verdict::Dropped(Dropped { reason: DropReason::QueueFullPackets, .. })
    ));
    let junk = Packet::new(vec![0xff; 30], 0, Meta::default());
    assert!(matches!(
        d.enqueue(us(0), junk),
        Verdict::Dropped(Dropped { reason: DropReason::Malformed, .. })
    ));
    assert_eq!(d.stats().drops.get(DropReason::Malformed), 1);
    assert_eq!(d.len(), 2);
}

#[test]
fn spec_from_toml() {
    let s: QueueSpec =
        toml::from_str("kind = \"dualpi2\"\nprofile = \"rfc9332\"\nalpha = \"1/5\"\ntrace = true")
            .unwrap();
    let QueueSpec::Dualpi2(d) = &s else { panic!("{s:?}") };
    let c = d.resolve().unwrap();
    assert_eq!(c.alpha, Ratio::new(1, 5).unwrap());
    assert_eq!(c.beta, Ratio::new(3, 1).unwrap());
    assert_eq!(c.tupdate, Duration::from_millis(15));
    assert!(s.build_seeded(3).unwrap().aqm_report().is_some());
    let e = toml::from_str::<QueueSpec>("kind = \"dualpi2\"\nalpah = 1").unwrap_err();
    assert!(e.to_string().contains("alpah"), "{e}");
    let bad = Dualpi2Spec { coupling: Some(0), ..Dualpi2Spec::default() };
    assert!(DualPi2::new(&bad, 0).is_err());
}

/// A queue whose clock starts 500 ms before the experiment (the real-time switch): its epochs
/// move by 500 ms, what came before is left out of the report, times count from the experiment.
#[test]
fn epochs_after_an_origin() {
    let s: QueueSpec =
        toml::from_str("kind = \"dualpi2\"\nepochs = [\"1s\"]\ntrace = true").unwrap();
    let origin = Duration::from_millis(500);
    let mut d = s.with_epochs_after(origin).build_seeded(1).unwrap();
    // each packet waits 40 ms (PI updates run, and trace, while it waits); sent at 240 ms (before
    // the experiment), 740 and 1440 ms (its first second), 1640 and 1740 ms (its second epoch)
    for (i, t) in [200, 700, 1400, 1600, 1700].into_iter().enumerate() {
        assert_eq!(d.enqueue(ms(t), pkt(i as u64, Ecn::NotEct, 1000)), Verdict::Enqueued);
        assert!(d.dequeue(ms(t + 40)).is_some());
    }
    let full = d.aqm_report().unwrap();
    assert_eq!(full.epochs.len(), 3);
    let lean = d.aqm_report_with(false).unwrap(); // the switch's periodic statistics
    assert!(lean.trace.is_empty() && lean.epochs.len() == 3);
    let before = full.trace.iter().filter(|p| p.0 < 500_000_000).count();
    assert!(before > 0 && before < full.trace.len(), "{:?}", full.trace);
    let r = full.clone().since(origin);
    let starts: Vec<_> = r.epochs.iter().map(|e| (e.start_ns, e.end_ns)).collect();
    assert_eq!(starts, [(0, Some(1_000_000_000)), (1_000_000_000, None)]);
    let sent = |e: usize| r.epochs[e].classes.iter().map(|c| c.tx_packets).sum::<u64>();
    assert_eq!((sent(0), sent(1)), (2, 2), "200 ms is before the experiment");
    assert_eq!(r.trace.len(), full.trace.len() - before);
    assert!(r.trace.iter().all(|p| p.0 <= 1_240_000_000), "trace counted from the origin");
    // without an origin nothing moves
    let same = s.with_epochs_after(Duration::ZERO);
    assert_eq!(same, s);
}

/// Linux's WRR credit moves only while both queues hold packets ("if either queue is empty,
/// the WRR credit is kept unchanged", `dequeue_packet` in sch_dualpi2.c): a long stretch of
/// L4S-only traffic must not bank a debt that then gives Classic strict priority.
#[test]
fn wrr_credit_frozen_while_one_queue_is_empty() {
    let mut d = q(Dualpi2Spec {
        limit_packets: Some(50_000),
        limit_bytes: Some(Bytes::new(50_000_000)),
        ..Dualpi2Spec::default()
    });
    // 20,000 L4S packets alone (kept backlogged so the queue never empties)
    for i in 0..20_001 {
        let _ = d.enqueue(us(1), pkt(i, Ecn::Ect1, 1500));
    }
    for _ in 0..20_000 {
        assert!(d.dequeue(us(2)).is_some());
    }
    // now both backlogged: Classic gets its 10 %, from the start
    for i in 0..1000 {
        let _ = d.enqueue(us(3), pkt(100_000 + 2 * i, Ecn::Ect1, 1500));
        let _ = d.enqueue(us(3), pkt(100_001 + 2 * i, Ecn::NotEct, 1500));
    }
    let order: Vec<bool> =
        (0..100).map(|_| ecn_of(&d.dequeue(us(4)).unwrap()) == Ecn::NotEct).collect();
    let classic = order.iter().filter(|&&c| c).count();
    assert!((9..=11).contains(&classic), "{classic} Classic packets in the first 100");
}
