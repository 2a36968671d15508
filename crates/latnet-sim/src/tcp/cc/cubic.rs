//! CUBIC (RFC 9438), in integer arithmetic.
//!
//! * Window function (section 4.2): `W_cubic(t) = C (t - K)^3 + W_max` with `C = 0.4`
//!   segments/s^3, `K = cbrt((W_max - cwnd_epoch) / C)`; here in bytes (`C * MSS` bytes/s^3) and
//!   nanoseconds, computed in `i128` (`(t - K)^3` is up to 8e36 ns^3 for `|t - K| <= 2000 s`).
//! * Concave and convex regions (4.4, 4.5): each ACK of `acked` bytes adds
//!   `(target - cwnd) * acked / cwnd` with `target = W_cubic(t + RTT)` clamped to
//!   `[cwnd, 1.5 cwnd]`; the remainder carries to the next ACK.
//! * Reno-friendly region (4.3): `W_est += alpha * acked * MSS / cwnd` with
//!   `alpha = 3 (1 - beta) / (1 + beta) = 9/17`, and `alpha = 1` once `W_est >= cwnd_prior`;
//!   if `W_cubic(t) < W_est`, `cwnd = W_est`.
//! * Multiplicative decrease (4.6): `ssthresh = cwnd * beta` with `beta = 0.7` (from cwnd, as
//!   Linux and ns-3 do; RFC 9438 allows it for a sender that is not application-limited), at
//!   least 2 MSS.
//! * Fast convergence (4.7): `W_max = cwnd (1 + beta) / 2` if `cwnd < W_max` at the event,
//!   else `W_max = cwnd`.
//! * Timeout (4.8): ssthresh as in 4.6 (not again when the timeout falls in a loss episode
//!   that already reduced it, as Linux), `cwnd = 1 MSS`, a new epoch after slow start.
//! * Slow start (4.10): standard, or, with `hystart = true`, ended early by Linux's HyStart
//!   ([`super::hystart`]): `ssthresh = cwnd` when an ACK train or an RTT increase says the
//!   window has filled the path. Off by default (RFC 9438 leaves it optional; the comparisons
//!   with ns-3 in VALIDATION.md run without it); Linux runs it by default.
//!
//! The epoch starts at the first ACK in congestion avoidance after a reduction, with
//! `cwnd_epoch = cwnd`; if `cwnd >= W_max` then (e.g. slow start ended without a loss) `K = 0`
//! and `W_max = cwnd`.

use super::hystart::{self, HyStart};
use super::{reno_grow, AckSample, CongestionControl};
use latnet_units::{Duration, Time};

/// `C = 0.4` as `C_NUM / C_DEN`.
const C_NUM: i128 = 4;
const C_DEN: i128 = 10;
/// `beta = 0.7` as `BETA_NUM / BETA_DEN`.
pub const BETA_NUM: u64 = 7;
/// Denominator of beta.
pub const BETA_DEN: u64 = 10;
/// `alpha = 3 (1 - 0.7) / (1 + 0.7) = 9/17`.
const ALPHA_NUM: u128 = 9;
const ALPHA_DEN: u128 = 17;
const NS3: i128 = 1_000_000_000_000_000_000_000_000_000; // (1e9 ns/s)^3
const MAX_DT: i128 = 2_000_000_000_000; // 2000 s in ns

/// Integer cube root (floor).
pub fn icbrt(v: u128) -> u64 {
    let (mut lo, mut hi) = (0u64, 7_000_000_000_000u64); // 7e12^3 > u128::MAX / 1
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let m = u128::from(mid);
        match m.checked_mul(m).and_then(|x| x.checked_mul(m)) {
            Some(c) if c <= v => lo = mid,
            _ => hi = mid - 1,
        }
    }
    lo
}

/// `W_cubic` of RFC 9438 (4.2) in bytes at `dt_ns = t - K` nanoseconds around the origin
/// `w_max` (bytes), for segments of `mss` bytes: `w_max + C * mss * dt^3`. Never below 0.
pub fn w_cubic(w_max: u64, mss: u64, dt_ns: i128) -> u64 {
    let dt = dt_ns.clamp(-MAX_DT, MAX_DT);
    // dt^3 / 1e18 keeps 1e-9 s^3 resolution and leaves room for the multiplication by C * mss.
    let cube = dt * dt * dt / 1_000_000_000_000_000_000;
    let term = cube * C_NUM * i128::from(mss) / (C_DEN * 1_000_000_000);
    let w = i128::from(w_max) + term;
    u64::try_from(w.max(0)).unwrap_or(u64::MAX)
}

/// `K` of RFC 9438 in nanoseconds: `cbrt((w_max - cwnd_epoch) / (C * mss))`.
pub fn k_ns(w_max: u64, cwnd_epoch: u64, mss: u64) -> u64 {
    let diff = u128::from(w_max.saturating_sub(cwnd_epoch)).min(10_000_000_000);
    icbrt(diff * (C_DEN as u128) * (NS3 as u128) / ((C_NUM as u128) * u128::from(mss.max(1))))
}

/// CUBIC window state.
#[derive(Debug, Clone)]
pub struct Cubic {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    acc: u64,
    /// `W_max` (bytes): the window before the last reduction (after fast convergence).
    w_max: u64,
    /// The window just before the last reduction (`cwnd_prior`).
    cwnd_prior: u64,
    epoch: Option<Epoch>,
    hystart: Option<HyStart>,
}

#[derive(Debug, Clone, Copy)]
struct Epoch {
    start: Time,
    k: u64,
    origin: u64,
    w_est: u64,
    est_acc: u128,
    cubic_acc: u128,
}

impl Cubic {
    /// Initial window `init_cwnd` bytes.
    pub fn new(mss: u64, init_cwnd: u64) -> Self {
        Cubic {
            mss,
            cwnd: init_cwnd,
            ssthresh: u64::MAX,
            acc: 0,
            w_max: 0,
            cwnd_prior: 0,
            epoch: None,
            hystart: None,
        }
    }

    /// With HyStart ending slow start ([`super::hystart`]).
    pub fn with_hystart(mut self) -> Self {
        self.hystart = Some(HyStart::new());
        self
    }

    /// HyStart's state, if it runs.
    pub fn hystart(&self) -> Option<&HyStart> {
        self.hystart.as_ref()
    }

    /// HyStart sees every RTT sample (before the window grows on this ACK, as Linux's
    /// `pkts_acked` comes before `cong_avoid`), in a reduction too, except for one second
    /// after a congestion-avoidance epoch began.
    fn hystart_sample(&mut self, now: Time, s: &AckSample) {
        let (Some(h), Some(rtt)) = (self.hystart.as_mut(), s.rtt) else { return };
        if self.epoch.is_some_and(|e| now - e.start < Duration::from_secs(1)) {
            return;
        }
        let sample = hystart::Sample {
            rtt,
            snd_una: s.snd_una,
            snd_nxt: s.snd_nxt,
            pacing_rate: s.pacing_rate,
            paced: s.paced,
        };
        if h.on_sample(now, &sample, self.cwnd, self.ssthresh, self.mss).is_some() {
            self.ssthresh = self.cwnd;
        }
    }

    /// `W_max` (bytes).
    pub fn w_max(&self) -> u64 {
        self.w_max
    }

    /// `K` of the current epoch (ns), if one started.
    pub fn k(&self) -> Option<u64> {
        self.epoch.map(|e| e.k)
    }

    fn reduce(&mut self) {
        self.epoch = None;
        self.cwnd_prior = self.cwnd;
        // fast convergence (4.7)
        self.w_max = if self.cwnd < self.w_max {
            self.cwnd * (BETA_DEN + BETA_NUM) / (2 * BETA_DEN)
        } else {
            self.cwnd
        };
        self.ssthresh = (self.cwnd * BETA_NUM / BETA_DEN).max(2 * self.mss);
    }

    fn congestion_avoidance(&mut self, now: Time, acked: u64, srtt: Duration) {
        let (mss, cwnd) = (self.mss, self.cwnd);
        let e = *self.epoch.get_or_insert_with(|| {
            let (k, origin) = if self.w_max > cwnd {
                (k_ns(self.w_max, cwnd, mss), self.w_max)
            } else {
                (0, cwnd)
            };
            Epoch { start: now, k, origin, w_est: cwnd, est_acc: 0, cubic_acc: 0 }
        });
        let mut e = e;
        let t = i128::from((now - e.start).as_nanos());
        // (4.4, 4.5): target one RTT ahead, clamped to [cwnd, 1.5 cwnd]
        let target = w_cubic(e.origin, mss, t + i128::from(srtt.as_nanos()) - i128::from(e.k))
            .clamp(cwnd, cwnd + cwnd / 2);
        e.cubic_acc += u128::from(target - cwnd) * u128::from(acked);
        let inc = (e.cubic_acc / u128::from(cwnd)) as u64;
        e.cubic_acc %= u128::from(cwnd);
        // (4.3): Reno-friendly estimate
        let alpha = if e.w_est >= self.cwnd_prior { ALPHA_DEN } else { ALPHA_NUM };
        e.est_acc += alpha * u128::from(acked) * u128::from(mss);
        let den = ALPHA_DEN * u128::from(cwnd);
        e.w_est += (e.est_acc / den) as u64;
        e.est_acc %= den;
        let w_now = w_cubic(e.origin, mss, t - i128::from(e.k));
        self.cwnd += inc;
        if w_now < e.w_est {
            self.cwnd = self.cwnd.max(e.w_est);
        }
        self.epoch = Some(e);
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> u64 {
        self.cwnd
    }
    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
    fn set_cwnd(&mut self, cwnd: u64) {
        self.cwnd = cwnd.max(self.mss);
    }
    fn on_ack(&mut self, now: Time, s: &AckSample) {
        self.hystart_sample(now, s);
        if s.in_reduction || s.app_limited || s.acked == 0 {
            return;
        }
        if self.cwnd < self.ssthresh {
            let before = self.cwnd;
            reno_grow(&mut self.cwnd, self.ssthresh, &mut self.acc, s.acked, self.mss);
            let used = self.cwnd - before;
            if used >= s.acked {
                return;
            }
            // the rest of this ACK counts in congestion avoidance
            let rest = s.acked - used;
            self.congestion_avoidance(now, rest, s.srtt.unwrap_or(Duration::ZERO));
            return;
        }
        self.congestion_avoidance(now, s.acked, s.srtt.unwrap_or(Duration::ZERO));
    }
    fn hystart_exit(&self) -> Option<hystart::Exit> {
        self.hystart.as_ref().and_then(HyStart::found)
    }
    fn reads_pacing_rate(&self) -> bool {
        self.hystart.is_some()
    }
    fn on_ecn(&mut self, _now: Time, _s: &AckSample) {
        // RFC 9438 section 4.6: ECN-Echo is a congestion event like a loss.
        self.reduce();
    }
    fn on_loss(&mut self, _now: Time, _s: &AckSample) {
        self.reduce();
    }
    fn on_rto(&mut self, _now: Time, _in_flight: u64, reduced: bool) {
        if reduced {
            self.epoch = None;
        } else {
            self.reduce();
        }
        self.cwnd = self.mss;
        self.acc = 0;
        if let Some(h) = &mut self.hystart {
            h.on_rto();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::ack;
    use super::*;

    const MSS: u64 = 1448;

    /// RFC 9438 equation 1 and 2 in floating point (segments, seconds), for comparison.
    fn rfc_w(w_max_seg: f64, cwnd_epoch_seg: f64, t: f64) -> f64 {
        let k = ((w_max_seg - cwnd_epoch_seg) / 0.4).cbrt();
        0.4 * (t - k).powi(3) + w_max_seg
    }

    #[test]
    fn window_function_matches_the_rfc_formula() {
        let (w_max, epoch) = (100 * MSS, 70 * MSS);
        let k = k_ns(w_max, epoch, MSS);
        let k_rfc = ((100.0 - 70.0) / 0.4f64).cbrt();
        assert!((k as f64 / 1e9 - k_rfc).abs() < 1e-9, "K {k} ns vs {k_rfc} s");
        for t_ms in [0u64, 100, 1000, 2500, 4217, 6000, 10_000] {
            let ours = w_cubic(w_max, MSS, i128::from(t_ms) * 1_000_000 - i128::from(k));
            let rfc = rfc_w(100.0, 70.0, t_ms as f64 / 1000.0) * MSS as f64;
            assert!((ours as f64 - rfc).abs() <= 1.0, "t={t_ms} ms: {ours} vs {rfc:.1} bytes");
        }
        // at t = 0 the window function starts from cwnd_epoch, at t = K it reaches W_max
        assert!(w_cubic(w_max, MSS, -i128::from(k)).abs_diff(epoch) <= 1);
        assert_eq!(w_cubic(w_max, MSS, 0), w_max);
    }

    #[test]
    fn icbrt_is_exact_floor() {
        for v in [0u128, 1, 7, 8, 26, 27, 1_000_000, 999_999, u128::from(u64::MAX)] {
            let r = u128::from(icbrt(v));
            assert!(r * r * r <= v && (r + 1) * (r + 1) * (r + 1) > v, "{v}");
        }
    }

    #[test]
    fn loss_reduces_by_beta_with_fast_convergence() {
        let mut c = Cubic::new(MSS, 100 * MSS);
        c.ssthresh = 0;
        c.on_loss(Time::ZERO, &ack(MSS, 10));
        assert_eq!(c.ssthresh(), 70 * MSS);
        assert_eq!(c.w_max(), 100 * MSS);
        c.on_recovery_exit(Time::ZERO);
        assert_eq!(c.cwnd(), 70 * MSS);
        // a second loss below W_max: fast convergence releases bandwidth (W_max = 0.85 cwnd)
        c.on_loss(Time::ZERO, &ack(MSS, 10));
        assert_eq!(c.w_max(), 70 * MSS * 17 / 20);
        assert_eq!(c.ssthresh(), 70 * MSS * 7 / 10);
        // an ECN-Echo is the same congestion event (RFC 9438 section 4.6)
        let mut e = Cubic::new(MSS, 100 * MSS);
        e.on_ecn(Time::ZERO, &ack(MSS, 10));
        assert_eq!((e.ssthresh(), e.w_max()), (70 * MSS, 100 * MSS));
        // a timeout within that episode keeps ssthresh and W_max (Linux tcp_enter_loss)
        e.on_rto(Time::ZERO, 50 * MSS, true);
        assert_eq!((e.cwnd(), e.ssthresh(), e.w_max()), (MSS, 70 * MSS, 100 * MSS));
    }

    /// Drive CUBIC in congestion avoidance with one ACK per segment at a fixed RTT and check
    /// that the window follows W_cubic(t) of the RFC. With W_max = 1000 segments and a 100 ms
    /// RTT the Reno-friendly estimate (about 0.53 segment per RTT) stays far below the curve.
    #[test]
    fn growth_curve_follows_the_rfc() {
        let rtt_ms = 100u64;
        let mut c = Cubic::new(MSS, 1000 * MSS);
        c.ssthresh = 0;
        c.on_loss(Time::ZERO, &ack(MSS, rtt_ms));
        c.on_recovery_exit(Time::ZERO);
        assert_eq!(c.cwnd(), 700 * MSS);
        let k_rfc = ((1000.0 - 700.0) / 0.4f64).cbrt(); // 9.09 s
        let mut now = Time::ZERO;
        let mut checked = 0;
        for round in 0..150u64 {
            let n = c.cwnd() / MSS;
            for _ in 0..n {
                c.on_ack(now, &ack(MSS, rtt_ms));
            }
            now += Duration::from_millis(rtt_ms);
            let t = now.as_secs_f64();
            // the window after this round was aimed at W_cubic(t + RTT) from the previous round
            let rfc = rfc_w(1000.0, 700.0, t) * MSS as f64;
            let ours = c.cwnd() as f64;
            if round > 5 && (t - k_rfc).abs() > 0.5 {
                assert!((ours - rfc).abs() / rfc < 0.01, "t={t:.2}s cwnd {ours} vs RFC {rfc:.0}");
                checked += 1;
            }
        }
        assert!(checked > 130, "{checked}");
        assert!(c.cwnd() > 1000 * MSS, "convex region past W_max");
    }

    #[test]
    fn reno_friendly_region_when_cubic_is_slower() {
        // tiny W_max: W_cubic grows slower than Reno at 100 ms RTT, cwnd follows W_est
        let mut c = Cubic::new(MSS, 10 * MSS);
        c.ssthresh = 0;
        c.on_loss(Time::ZERO, &ack(MSS, 100));
        c.on_recovery_exit(Time::ZERO);
        let start = c.cwnd();
        let mut now = Time::ZERO;
        for _ in 0..20 {
            let n = c.cwnd() / MSS;
            for _ in 0..n {
                c.on_ack(now, &ack(MSS, 100));
            }
            now += Duration::from_millis(100);
        }
        // W_est grows by alpha = 9/17 segment per RTT up to cwnd_prior (10 segments, after
        // 3 / (9/17) = 5.7 RTTs), then by one per RTT: 3 + 14.3 segments in 20 RTTs, while
        // W_cubic(2 s) is still about 10 segments.
        let grown = (c.cwnd() - start) as f64 / MSS as f64;
        assert!((16.0..=19.0).contains(&grown), "grew {grown} segments");
    }
}
