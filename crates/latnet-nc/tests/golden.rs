//! The golden vector of the reference (a published DetServ example) and property tests of the
//! calculus: exact bounds agree with a brute-force evaluation, more traffic never lowers a
//! bound, nothing panics.

use latnet_nc::{check_port, nanobits, ConcaveSum, Piece, QueueLimits, RateLatency, TokenBucket};
use latnet_units::{Bytes, Duration, Rate};
use proptest::prelude::*;

fn tb(mbps: u64, bytes: u64) -> TokenBucket {
    TokenBucket::new(Rate::from_mbps(mbps), Bytes::new(bytes))
}

fn golden(queues: [TokenBucket; 3]) -> Vec<(f64, f64, bool)> {
    let base = RateLatency::link(Rate::from_gbps(1), Bytes::new(1530), 2);
    let limits = [1_740u64, 6_600, 11_220]
        .map(|us| QueueLimits { budget: Duration::from_micros(us), buffer: Bytes::new(300_000) });
    let arrivals: Vec<_> =
        queues.iter().map(|q| ConcaveSum::new([(0, Piece::bucket(*q))]).expect("sum")).collect();
    check_port(base, &arrivals, &queues, &limits)
        .expect("check")
        .into_iter()
        .map(|v| {
            let b = v.bounds.expect("bounded");
            (b.delay_ms(), b.backlog_bytes(), v.ok)
        })
        .collect()
}

fn round(x: f64, digits: i32) -> f64 {
    let s = 10f64.powi(digits);
    (x * s).round() / s
}

#[test]
fn golden_vector_base_state() {
    let v = golden([tb(322, 186_000), tb(275, 195_000), tb(93, 90_000)]);
    assert_eq!(round(v[0].0, 4), 1.5125);
    assert_eq!(v[0].1.round(), 186_985.0);
    assert_eq!(round(v[1].0, 4), 4.5317);
    assert_eq!(v[1].1.round(), 271_684.0);
    assert_eq!(round(v[2].0, 4), 9.4106);
    assert_eq!(v[2].1.round(), 178_629.0);
    assert!(v.iter().all(|q| q.2));
}

#[test]
fn golden_vector_f1_is_rejected_by_the_lower_queue() {
    // f1 = 81 Mb/s, 5,500 B into q1
    let v = golden([tb(322, 186_000), tb(275 + 81, 195_000 + 5_500), tb(93, 90_000)]);
    assert!(v[0].2);
    assert_eq!(round(v[1].0, 4), 4.5966);
    assert_eq!(v[1].1.round(), 299_770.0);
    assert!(v[1].2, "f1 fits its own queue");
    assert_eq!(round(v[2].0, 4), 11.9145);
    assert!(!v[2].2, "but pushes q2 over its 11.22 ms budget");
}

#[test]
fn golden_vector_f2_is_accepted() {
    let v = golden([tb(322, 186_000), tb(275 + 30, 195_000 + 15_000), tb(93, 90_000)]);
    assert_eq!(round(v[1].0, 4), 4.7087);
    assert_eq!(v[1].1.round(), 295_049.0);
    assert_eq!(round(v[2].0, 4), 10.4892);
    assert!(v.iter().all(|q| q.2));
}

// ---------------- properties ----------------

const L: u64 = 1530;

fn piece_strategy() -> impl Strategy<Value = Piece> {
    (1u64..400, 64u64..200_000, prop::bool::ANY).prop_map(|(mbps, bytes, shaped)| {
        let b = tb(mbps, bytes);
        if shaped {
            Piece::shaped(b, 1_000_000_000, nanobits(Bytes::new(L)))
        } else {
            Piece::bucket(b)
        }
    })
}

fn eval_f64(pieces: &[Piece], t: f64) -> f64 {
    pieces
        .iter()
        .map(|p| {
            let a = p.r0 as f64 * t + p.b0 as f64;
            let b = p.r1 as f64 * t + p.b1 as f64;
            a.min(b)
        })
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The exact delay bound equals the largest horizontal deviation found by evaluating the
    /// curve at every breakpoint and on a grid (in floats, to a relative tolerance).
    #[test]
    fn exact_delay_matches_brute_force(
        pieces in prop::collection::vec(piece_strategy(), 1..8),
        service_mbps in 300u64..1000,
    ) {
        let beta = RateLatency::link(Rate::from_mbps(service_mbps), Bytes::new(L), 2);
        let sum = ConcaveSum::new(pieces.iter().enumerate().map(|(i, p)| (i as u32, *p))).unwrap();
        let rate: u128 = pieces.iter().map(|p| p.r1).sum();
        let got = sum.bounds(beta).unwrap();
        if rate > beta.rate {
            prop_assert!(got.is_none());
            return Ok(());
        }
        let got = got.unwrap();
        let r = beta.rate as f64;
        let t_lat = beta.latency_nb as f64 / r;
        let mut cands: Vec<f64> = pieces.iter().filter_map(|p| p.bp.map(|t| t.as_f64())).collect();
        cands.push(0.0);
        cands.extend((0..200).map(|i| i as f64 * 50_000.0));
        let h = cands.iter().map(|&t| t_lat + eval_f64(&pieces, t) / r - t).fold(0.0, f64::max);
        let v = cands
            .iter()
            .chain(std::iter::once(&t_lat))
            .map(|&t| eval_f64(&pieces, t) - (r * (t - t_lat)).max(0.0))
            .fold(0.0, f64::max);
        let tol = |x: f64| 1e-9 * x.abs() + 1e-3;
        prop_assert!((got.delay.as_f64() - h).abs() <= tol(h), "delay {} vs {}", got.delay.as_f64(), h);
        prop_assert!((got.backlog.as_f64() - v).abs() <= tol(v), "backlog {} vs {}", got.backlog.as_f64(), v);
    }

    /// Adding a piece, or taking service away (a higher queue gains traffic), never lowers a
    /// bound.
    #[test]
    fn more_traffic_never_lowers_a_bound(
        pieces in prop::collection::vec(piece_strategy(), 1..6),
        extra in piece_strategy(),
        higher in (1u64..200, 64u64..100_000),
    ) {
        let beta = RateLatency::link(Rate::from_gbps(1), Bytes::new(L), 2);
        let key = |i: usize| i as u32;
        let before = ConcaveSum::new(pieces.iter().enumerate().map(|(i, p)| (key(i), *p))).unwrap();
        let mut more = pieces.clone();
        more.push(extra);
        let after = ConcaveSum::new(more.iter().enumerate().map(|(i, p)| (key(i), *p))).unwrap();
        if let (Some(b0), Some(b1)) = (before.bounds(beta).unwrap(), after.bounds(beta).unwrap()) {
            prop_assert!(b1.delay.try_cmp(b0.delay).unwrap().is_ge());
            prop_assert!(b1.backlog.try_cmp(b0.backlog).unwrap().is_ge());
        }
        if let Some(lo) = beta.leftover(tb(higher.0, higher.1)).unwrap() {
            if let (Some(b0), Some(b1)) = (before.bounds(beta).unwrap(), before.bounds(lo).unwrap()) {
                prop_assert!(b1.delay.try_cmp(b0.delay).unwrap().is_ge());
                prop_assert!(b1.backlog.try_cmp(b0.backlog).unwrap().is_ge());
            }
        }
    }

    /// Arbitrary (even absurd) parameters give a result or an error, never a panic.
    #[test]
    fn never_panics(
        raw in prop::collection::vec((any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()), 0..6),
        rate in any::<u64>(),
        lat in any::<u64>(),
    ) {
        let pieces = raw.iter().enumerate().map(|(i, &(r, b, c, l))| {
            (i as u32, Piece::min_of_lines((u128::from(r), u128::from(b) * 1000), (u128::from(c), u128::from(l))))
        });
        if let Ok(sum) = ConcaveSum::new(pieces) {
            let beta = RateLatency { rate: u128::from(rate), latency_nb: u128::from(lat) };
            let _ = sum.bounds(beta);
            let new = Piece::bucket(TokenBucket { rate: u128::from(rate / 3), burst: u128::from(lat) });
            let _ = sum.bounds_replacing(99, None, new, beta);
        }
    }
}
