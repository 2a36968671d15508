//! Sums of concave pieces and their delay (horizontal) and backlog (vertical) deviations from a
//! rate-latency service curve, exactly.
//!
//! An arrival curve `α = Σ pieces` is concave and piecewise linear; its breakpoints are those of
//! its pieces. Against `β = R [t − T]⁺` (with `N = R T`):
//!
//! * delay bound `h = T + sup_t (α(t)/R − t) = (N + sup_t g(t)) / R` with `g(t) = α(t) − R t`;
//!   `g` is concave, so its supremum is at the first breakpoint after which the slope of `α` is
//!   at most `R` (or at `0⁺`); if the long-term rate of `α` exceeds `R` there is no bound;
//! * backlog bound `v = sup_t (α(t) − β(t))`: `α(T)` if the maximiser `t*` of `g` lies at or
//!   before `T`, else `g(t*) + N`.
//!
//! A [`ConcaveSum`] sorts its breakpoints once and keeps prefix sums, so that a bound against a
//! new service curve (what a lower-priority queue sees when a higher one gains a flow) costs a
//! binary search, and a bound with one piece replaced (what the target queue sees when a flow
//! joins from one input link) costs one merge pass without allocation.

use crate::curves::{Piece, RateLatency};
use crate::ratio::{add, mul, Ratio};
use crate::NcError;
use std::cmp::Ordering;

/// Delay and backlog bounds of one queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Worst-case delay (ns).
    pub delay: Ratio,
    /// Worst-case backlog (nanobits).
    pub backlog: Ratio,
}

impl Bounds {
    /// Delay in ms, for reports.
    pub fn delay_ms(&self) -> f64 {
        self.delay.as_f64() / 1e6
    }
    /// Backlog in bytes, for reports.
    pub fn backlog_bytes(&self) -> f64 {
        self.backlog.as_f64() / crate::NB_PER_BYTE as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Sums {
    r0: u128,
    b0: u128,
    r1: u128,
    b1: u128,
}

#[derive(Debug, Clone, Copy)]
struct Bp {
    t: Ratio,
    key: u32,
    piece: Piece,
}

/// A concave arrival curve: the sum of pieces, each optionally identified by a key (e.g. the
/// input link it comes from) so that one piece can be replaced in a what-if bound.
#[derive(Debug, Clone)]
pub struct ConcaveSum {
    /// Pieces without a breakpoint, summed.
    flat_r: u128,
    flat_b: u128,
    /// Pieces with a breakpoint, sorted by it (ties by key).
    bps: Vec<Bp>,
    /// `pre[i]`: sums over `bps[..i]`.
    pre: Vec<Sums>,
}

impl Default for ConcaveSum {
    /// The zero curve.
    fn default() -> Self {
        ConcaveSum { flat_r: 0, flat_b: 0, bps: Vec::new(), pre: vec![Sums::default()] }
    }
}

/// The maximiser of `g(t) = α(t) − R t`, as `t = p / q`, and `q × g(t)`.
#[derive(Debug, Clone, Copy)]
struct Sup {
    p: u128,
    q: u128,
    qg: u128,
}

impl ConcaveSum {
    /// The sum of `(key, piece)`s.
    pub fn new(pieces: impl IntoIterator<Item = (u32, Piece)>) -> Result<ConcaveSum, NcError> {
        let mut s = ConcaveSum { pre: Vec::new(), ..ConcaveSum::default() };
        for (key, piece) in pieces {
            match piece.bp {
                None => {
                    s.flat_r = add(s.flat_r, piece.r0)?;
                    s.flat_b = add(s.flat_b, piece.b0)?;
                }
                Some(t) => s.bps.push(Bp { t, key, piece }),
            }
        }
        let mut err = None;
        s.bps.sort_by(|a, b| match a.t.try_cmp(b.t) {
            Ok(Ordering::Equal) => a.key.cmp(&b.key),
            Ok(o) => o,
            Err(e) => {
                err = Some(e);
                Ordering::Equal
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        s.pre = Vec::with_capacity(s.bps.len() + 1);
        let mut acc = Sums::default();
        s.pre.push(acc);
        for b in &s.bps {
            acc = Sums {
                r0: add(acc.r0, b.piece.r0)?,
                b0: add(acc.b0, b.piece.b0)?,
                r1: add(acc.r1, b.piece.r1)?,
                b1: add(acc.b1, b.piece.b1)?,
            };
            s.pre.push(acc);
        }
        Ok(s)
    }

    fn total(&self) -> Sums {
        self.pre.last().copied().unwrap_or_default()
    }

    /// Long-term rate (bit/s).
    pub fn rate(&self) -> u128 {
        self.flat_r + self.total().r1
    }

    /// Value at `0⁺` (nanobits): the sum of the initial bursts.
    pub fn burst(&self) -> u128 {
        self.flat_b + self.total().b0
    }

    /// True if the curve is identically zero.
    pub fn is_zero(&self) -> bool {
        self.flat_r == 0 && self.flat_b == 0 && self.bps.is_empty()
    }

    /// Number of breakpoints.
    pub fn breakpoints(&self) -> usize {
        self.bps.len()
    }

    /// How many breakpoints are at or before `t = p / q`.
    fn count_le(&self, p: u128, q: u128) -> Result<usize, NcError> {
        let t = Ratio::new(p, q).ok_or(NcError::Inconsistent)?;
        // binary search: first index whose breakpoint is > t
        let (mut lo, mut hi) = (0usize, self.bps.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.bps[mid].t.try_cmp(t)? == Ordering::Greater {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// `q × α(p / q)` with `idx` breakpoints at or before the point.
    fn eval_scaled_at(&self, idx: usize, p: u128, q: u128) -> Result<u128, NcError> {
        let tot = self.total();
        let pre = self.pre.get(idx).copied().unwrap_or_default();
        let r = self.flat_r + pre.r1 + (tot.r0 - pre.r0);
        let b = self.flat_b + pre.b1 + (tot.b0 - pre.b0);
        add(mul(r, p)?, mul(b, q)?)
    }

    /// `q × α(p / q)`.
    pub fn eval_scaled(&self, p: u128, q: u128) -> Result<u128, NcError> {
        let idx = self.count_le(p, q)?;
        self.eval_scaled_at(idx, p, q)
    }

    /// The slope of `α` right after the `i`-th breakpoint.
    fn slope_after(&self, i: usize) -> u128 {
        let tot = self.total();
        let pre = self.pre[i + 1];
        self.flat_r + pre.r1 + (tot.r0 - pre.r0)
    }

    fn sup(&self, rate: u128) -> Result<Option<Sup>, NcError> {
        let s0 = self.flat_r + self.total().r0;
        if s0 <= rate {
            return Ok(Some(Sup { p: 0, q: 1, qg: self.burst() }));
        }
        if self.rate() > rate {
            return Ok(None);
        }
        // first breakpoint after which the slope is <= rate (slopes decrease)
        let (mut lo, mut hi) = (0usize, self.bps.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.slope_after(mid) <= rate {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let t = self.bps[lo].t;
        let (p, q) = (t.numer(), t.denom());
        let qa = self.eval_scaled(p, q)?;
        let qg = qa.checked_sub(mul(rate, p)?).ok_or(NcError::Inconsistent)?;
        Ok(Some(Sup { p, q, qg }))
    }

    /// Delay and backlog bounds against `beta`; `None` if the long-term rate exceeds the service
    /// rate (no finite bound).
    pub fn bounds(&self, beta: RateLatency) -> Result<Option<Bounds>, NcError> {
        let Some(sup) = self.sup(beta.rate)? else { return Ok(None) };
        finish(sup, beta, |p, q| self.eval_scaled(p, q))
    }

    /// The bounds of this sum with the piece of `key` (`old`, which must be part of the sum, or
    /// `None`) replaced by `new`, against `beta`. One merge pass, no allocation.
    pub fn bounds_replacing(
        &self,
        key: u32,
        old: Option<Piece>,
        new: Piece,
        beta: RateLatency,
    ) -> Result<Option<Bounds>, NcError> {
        let rate = beta.rate;
        let tot = self.total();
        let (old_r0, old_b0) = old.map_or((0, 0), |o| (o.r0, o.b0));
        let sub = |a: u128, b: u128| a.checked_sub(b).ok_or(NcError::Inconsistent);
        let s0 = add(sub(self.flat_r + tot.r0, old_r0)?, new.r0)?;
        let b0 = add(sub(self.burst(), old_b0)?, new.b0)?;
        let long = add(sub(self.rate(), old.map_or(0, |o| o.r1))?, new.r1)?;
        let eval = |p: u128, q: u128| -> Result<u128, NcError> {
            let base = self.eval_scaled(p, q)?;
            let o = match &old {
                Some(o) => o.eval_scaled(p, q)?,
                None => 0,
            };
            add(sub(base, o)?, new.eval_scaled(p, q)?)
        };
        let sup = if s0 <= rate {
            Sup { p: 0, q: 1, qg: b0 }
        } else if long > rate {
            return Ok(None);
        } else {
            let skip_old = old.is_some_and(|o| o.bp.is_some());
            let mut slope = s0;
            let mut pending_new = new.bp;
            let mut found = None;
            for b in &self.bps {
                if skip_old && b.key == key {
                    continue;
                }
                if let Some(tn) = pending_new {
                    if tn.try_cmp(b.t)? != Ordering::Greater {
                        slope = sub(slope, new.r0 - new.r1)?;
                        pending_new = None;
                        if slope <= rate {
                            found = Some(tn);
                            break;
                        }
                    }
                }
                slope = sub(slope, b.piece.r0 - b.piece.r1)?;
                if slope <= rate {
                    found = Some(b.t);
                    break;
                }
            }
            let t = match (found, pending_new) {
                (Some(t), _) => t,
                (None, Some(tn)) => tn,
                (None, None) => return Err(NcError::Inconsistent),
            };
            let (p, q) = (t.numer(), t.denom());
            let qg = sub(eval(p, q)?, mul(rate, p)?)?;
            Sup { p, q, qg }
        };
        finish(sup, beta, eval)
    }
}

/// Turn the maximiser of `g` into delay and backlog bounds against `beta`.
fn finish(
    sup: Sup,
    beta: RateLatency,
    eval: impl Fn(u128, u128) -> Result<u128, NcError>,
) -> Result<Option<Bounds>, NcError> {
    let n = beta.latency_nb;
    let r = beta.rate;
    if r == 0 {
        return Ok(None);
    }
    // h = (N + G/q) / R = (N q + G) / (R q)
    let delay = Ratio::new(add(mul(n, sup.q)?, sup.qg)?, mul(r, sup.q)?);
    // t* <= T  <=>  p R <= N q
    let backlog = if mul(sup.p, r)? <= mul(n, sup.q)? {
        // alpha(T) with T = N / R
        Ratio::new(eval(n, r)?, r)
    } else {
        Ratio::new(add(sup.qg, mul(n, sup.q)?)?, sup.q)
    };
    match (delay, backlog) {
        (Some(delay), Some(backlog)) => Ok(Some(Bounds { delay, backlog })),
        _ => Err(NcError::Inconsistent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curves::{nanobits, TokenBucket};
    use latnet_units::{Bytes, Rate};

    fn gbps() -> RateLatency {
        RateLatency::link(Rate::from_gbps(1), Bytes::new(1530), 2)
    }

    #[test]
    fn token_bucket_bounds_are_the_textbook_ones() {
        let tb = TokenBucket::new(Rate::from_mbps(322), Bytes::new(186_000));
        let s = ConcaveSum::new([(0, Piece::bucket(tb))]).unwrap();
        let b = s.bounds(gbps()).unwrap().unwrap();
        // T + b / R = 24.48 us + 1.488 ms
        assert_eq!(b.delay.as_f64(), 1_512_480.0);
        // b + r T = 186,000 B + 322 Mbps * 24.48 us
        assert!((b.backlog_bytes() - 186_985.32).abs() < 1e-6);
    }

    #[test]
    fn shaping_lowers_the_delay_of_a_large_burst() {
        let tb = TokenBucket::new(Rate::from_mbps(100), Bytes::new(100_000));
        let l = nanobits(Bytes::new(1530));
        let beta = RateLatency::link(Rate::from_mbps(500), Bytes::new(1530), 2);
        let unshaped = ConcaveSum::new([(0, Piece::bucket(tb))]).unwrap();
        let shaped = ConcaveSum::new([(0, Piece::shaped(tb, 1_000_000_000, l))]).unwrap();
        let u = unshaped.bounds(beta).unwrap().unwrap();
        let s = shaped.bounds(beta).unwrap().unwrap();
        assert!(s.delay.as_f64() < u.delay.as_f64());
        // by hand: the burst arrives at 1 Gbps, the queue drains at 500 Mbps: the maximiser is
        // the breakpoint t = (100,000 - 1,530) B * 8 / 900 Mbps = 875.29 us
        let t = (100_000.0 - 1530.0) * 8.0 / 900e6;
        let alpha_t = 1530.0 * 8.0 + 1e9 * t;
        let h = 2.0 * 1530.0 * 8.0 / 500e6 + alpha_t / 500e6 - t;
        assert!((s.delay.as_f64() / 1e9 - h).abs() < 1e-12, "{} vs {h}", s.delay.as_f64());
    }

    #[test]
    fn the_empty_curve_has_the_service_latency_as_delay() {
        let s = ConcaveSum::default();
        let b = s.bounds(gbps()).unwrap().unwrap();
        assert_eq!(b.delay.as_f64(), 24_480.0);
        assert_eq!(b.backlog.as_f64(), 0.0);
        let tb = TokenBucket::new(Rate::from_mbps(1), Bytes::new(100));
        let got = s.bounds_replacing(3, None, Piece::bucket(tb), gbps()).unwrap().unwrap();
        let want = ConcaveSum::new([(3, Piece::bucket(tb))]).unwrap().bounds(gbps()).unwrap();
        assert_eq!(Some(got), want);
    }

    #[test]
    fn unstable_aggregate_has_no_bound() {
        let tb = TokenBucket::new(Rate::from_mbps(600), Bytes::new(1000));
        let beta = RateLatency::link(Rate::from_mbps(500), Bytes::new(1530), 2);
        let s = ConcaveSum::new([(0, Piece::bucket(tb))]).unwrap();
        assert!(s.bounds(beta).unwrap().is_none());
    }

    #[test]
    fn replacing_a_piece_equals_rebuilding() {
        let l = nanobits(Bytes::new(1530));
        let c = 1_000_000_000;
        let mk = |r: u64, b: u64| {
            Piece::shaped(TokenBucket::new(Rate::from_mbps(r), Bytes::new(b)), c, l)
        };
        let pieces =
            [(1, mk(50, 20_000)), (2, mk(30, 9_000)), (3, mk(10, 1_000)), (4, mk(80, 3_000))];
        let sum = ConcaveSum::new(pieces).unwrap();
        let beta = RateLatency::link(Rate::from_mbps(400), Bytes::new(1530), 2);
        for (key, old) in pieces {
            let new = mk(60, 50_000);
            let mut rebuilt: Vec<_> = pieces.iter().copied().filter(|(k, _)| *k != key).collect();
            rebuilt.push((key, new));
            let want = ConcaveSum::new(rebuilt).unwrap().bounds(beta).unwrap().unwrap();
            let got = sum.bounds_replacing(key, Some(old), new, beta).unwrap().unwrap();
            assert_eq!(got, want, "key {key}");
        }
        // adding a piece from a new key
        let new = mk(5, 40_000);
        let mut all = pieces.to_vec();
        all.push((9, new));
        let want = ConcaveSum::new(all).unwrap().bounds(beta).unwrap().unwrap();
        assert_eq!(sum.bounds_replacing(9, None, new, beta).unwrap().unwrap(), want);
    }
}
