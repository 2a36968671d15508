//! DualPI2: the DualQ Coupled AQM of RFC 9332 with a PI2 base AQM, in two named profiles —
//! Linux `sch_dualpi2`'s defaults and RFC 9332's example (Appendix A) — for comparison with
//! VDQ-CSAQM (seed 001).
//!
//! Ports: one input, one output (pull); work-conserving. Packets with ECT(1) or CE go to the
//! L4S queue, the rest to the Classic queue (RFC 9331 section 5.1). Both queues share one
//! limit in packets and bytes (tail drop, `queue-full-*`).
//!
//! # Algorithm
//!
//! Every `tupdate` the base probability is updated (RFC 9332 Figure 4, PIE-style):
//!
//! ```text
//! qdelay = head sojourn of the Classic queue            (RFC; profile rfc9332)
//!        | max(head sojourn of L, head sojourn of C)    (Linux; profile linux)
//! p' += alpha * (qdelay - target) + beta * (qdelay - qdelay_prev)     clamped to [0, 1]
//! ```
//!
//! At dequeue (AQM decisions happen at dequeue, RFC 9332 Figures 2 and 3):
//!
//! * **Classic**: drop (Not-ECT) or mark CE (ECT(0)) with probability `p'²`, drawn as two
//!   independent rolls against `p'` (as Linux; the same probability as one roll against `p'²`).
//! * **L4S**: mark CE with `p_L = max(p_native, min(1, k p'))`, where the native AQM is a step
//!   at `l_threshold` (sojourn `>` threshold: Linux, 1 ms) or a ramp from `l_threshold` over
//!   `l_range` (RFC: 800 us + 400 us). Marking draws a random roll (`l_marking = "random"`,
//!   Linux) or the deterministic `recur()` accumulator of RFC 9332 (`"recur"`).
//! * **Overload** (`k p' > 1`, i.e. the Classic probability above `1/k²`) with
//!   `drop_overload`: L4S packets are also dropped with `p'²` (Classic-style) and the survivors
//!   are all marked.
//! * No probabilistic signal (coupled, Classic, overload) while the backlog left after the
//!   dequeue is below `min_backlog` (Linux: 2 MTU); the native step or ramp still applies.
//!
//! Scheduling between the queues: `wrr` — Linux's credit scheme giving Classic
//! `c_protection` percent (10) when both are backlogged: L4S goes while the credit is at most
//! 0 (it starts at `mtu (wc - wl)`, so L4S first), a sent L4S packet adds `wc * size`, a sent
//! Classic packet takes `wl * size` (`wl = 100 - wc`), and the credit changes only while both
//! queues hold packets (it is reset when both are empty) — or `time-shifted` FIFO (RFC 9332):
//! the L4S head goes first unless it arrived more than `tshift` after the Classic head.
//!
//! Probabilities are integers scaled by 2^32; the update computes each term as
//! `gain_num * delta_ns * 2^32 / (gain_den * 10^9)` truncated toward zero. The queue updates
//! lazily: each call first runs every update due up to `now` at its own instant (heads do not
//! change between calls, so this is exact). Random rolls come from the queue's own ChaCha
//! stream, seeded by the runner per port.
//!
//! # Profiles (every key can be overridden)
//!
//! | key | `linux` | `rfc9332` |
//! |---|---|---|
//! | `target` | 15 ms | 15 ms |
//! | `tupdate` | 16 ms | 15 ms (`min(target, RTT_max/3)`, RTT_max 100 ms) |
//! | `alpha` | 41/256 Hz (0.16) | 0.15 Hz (`0.1 Tupdate / RTT_max²`) |
//! | `beta` | 819/256 Hz (3.2) | 3 Hz (`0.3 / RTT_max`) |
//! | `coupling` (k) | 2 | 2 |
//! | `l_threshold`, `l_range` | 1 ms, 0 (step) | 800 us, 400 us (ramp) |
//! | `l_marking` | `random` | `recur` |
//! | `qdelay` | `max` | `classic` |
//! | `scheduler` | `wrr`, `c_protection` 10 % | `time-shifted`, `tshift` 50 ms |
//! | `drop_overload` | true | true |
//! | `min_backlog` | 3000 B | 1500 B (`Th_len` 1 packet) |
//! | `limit_packets`, `limit_bytes` | 10,000, 15 MB | 10,000, 15 MB |
//!
//! Counters: [`QueueStats`] overall and per class, CE marks, drops by reason (`aqm-drop`,
//! `queue-full-*`, `malformed`), per-epoch sojourn percentiles and a trace of `p'`, `p_C` and
//! `p_CL` at every update ([`AqmReport`]).

use super::aqm_stats::{AqmReport, Trace};
use super::dualq::{self, DualCounts, DualFifo, Held, CLASSIC, L4S};
use super::{Dropped, Queue, QueueStats, SpecError, Verdict};
use crate::drop::DropReason;
use crate::packet::Packet;
use crate::ratio::Ratio;
use latnet_units::{Bytes, Duration, Time};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// Probability one.
pub const ONE: i64 = 1 << 32;

/// Named parameter sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dualpi2Profile {
    /// Linux `sch_dualpi2` defaults.
    #[default]
    Linux,
    /// RFC 9332 Appendix A.
    Rfc9332,
}

/// How L4S marks are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LMarking {
    /// A random roll per packet.
    Random,
    /// RFC 9332's deterministic `recur()`.
    Recur,
}

/// Which sojourn drives the PI controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QdelayRef {
    /// The larger head sojourn of the two queues (Linux).
    Max,
    /// The Classic queue's head sojourn (RFC 9332).
    Classic,
}

/// Scheduler between the two queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dualpi2Scheduler {
    /// Linux's credit-based weighted round robin.
    Wrr,
    /// RFC 9332's time-shifted FIFO.
    TimeShifted,
}

/// DualPI2 as written in a scenario (`kind = "dualpi2"`); unset keys come from the profile.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dualpi2Spec {
    /// Parameter set (default `linux`).
    #[serde(default)]
    pub profile: Dualpi2Profile,
    /// Classic queue-delay target.
    pub target: Option<Duration>,
    /// Update interval of the PI controller.
    pub tupdate: Option<Duration>,
    /// Integral gain (Hz).
    pub alpha: Option<Ratio>,
    /// Proportional gain (Hz).
    pub beta: Option<Ratio>,
    /// Coupling factor k.
    pub coupling: Option<u32>,
    /// L4S native AQM: step threshold, or start of the ramp (sojourn).
    pub l_threshold: Option<Duration>,
    /// L4S native AQM: ramp width (0: a step).
    pub l_range: Option<Duration>,
    /// L4S marking draw.
    pub l_marking: Option<LMarking>,
    /// Sojourn driving the PI controller.
    pub qdelay: Option<QdelayRef>,
    /// Scheduler.
    pub scheduler: Option<Dualpi2Scheduler>,
    /// WRR: Classic share in percent (0..=100).
    pub c_protection: Option<u32>,
    /// Time-shifted FIFO: the shift.
    pub tshift: Option<Duration>,
    /// Drop L4S packets Classic-style on overload.
    pub drop_overload: Option<bool>,
    /// No probabilistic signal below this backlog.
    pub min_backlog: Option<Bytes>,
    /// MTU used by WRR credits (1500).
    pub mtu: Option<Bytes>,
    /// Packet limit of both queues together.
    pub limit_packets: Option<u32>,
    /// Byte limit of both queues together.
    pub limit_bytes: Option<Bytes>,
    /// Starts of reporting epochs (besides 0).
    #[serde(default)]
    pub epochs: Vec<Duration>,
    /// Record `p'`, `p_C`, `p_CL` at every update.
    #[serde(default)]
    pub trace: bool,
}

/// Resolved parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dualpi2Config {
    /// Profile the defaults came from.
    pub profile: Dualpi2Profile,
    /// See [`Dualpi2Spec`].
    pub target: Duration,
    /// See [`Dualpi2Spec`].
    pub tupdate: Duration,
    /// See [`Dualpi2Spec`].
    pub alpha: Ratio,
    /// See [`Dualpi2Spec`].
    pub beta: Ratio,
    /// See [`Dualpi2Spec`].
    pub coupling: u32,
    /// See [`Dualpi2Spec`].
    pub l_threshold: Duration,
    /// See [`Dualpi2Spec`].
    pub l_range: Duration,
    /// See [`Dualpi2Spec`].
    pub l_marking: LMarking,
    /// See [`Dualpi2Spec`].
    pub qdelay: QdelayRef,
    /// See [`Dualpi2Spec`].
    pub scheduler: Dualpi2Scheduler,
    /// See [`Dualpi2Spec`].
    pub c_protection: u32,
    /// See [`Dualpi2Spec`].
    pub tshift: Duration,
    /// See [`Dualpi2Spec`].
    pub drop_overload: bool,
    /// See [`Dualpi2Spec`].
    pub min_backlog: Bytes,
    /// See [`Dualpi2Spec`].
    pub mtu: Bytes,
    /// See [`Dualpi2Spec`].
    pub limit_packets: u32,
    /// See [`Dualpi2Spec`].
    pub limit_bytes: Bytes,
}

impl Dualpi2Spec {
    /// Fill unset keys from the profile and check ranges.
    pub fn resolve(&self) -> Result<Dualpi2Config, SpecError> {
        let linux = self.profile == Dualpi2Profile::Linux;
        let r = |n, d| Ratio::new(n, d).unwrap_or(Ratio::ZERO);
        let c = Dualpi2Config {
            profile: self.profile,
            target: self.target.unwrap_or(Duration::from_millis(15)),
            tupdate: self.tupdate.unwrap_or(if linux {
                Duration::from_millis(16)
            } else {
                Duration::from_millis(15)
            }),
            alpha: self.alpha.unwrap_or(if linux { r(41, 256) } else { r(15, 100) }),
            beta: self.beta.unwrap_or(if linux { r(819, 256) } else { r(3, 1) }),
            coupling: self.coupling.unwrap_or(2),
            l_threshold: self.l_threshold.unwrap_or(if linux {
                Duration::from_millis(1)
            } else {
                Duration::from_micros(800)
            }),
            l_range: self.l_range.unwrap_or(if linux {
                Duration::ZERO
            } else {
                Duration::from_micros(400)
            }),
            l_marking: self.l_marking.unwrap_or(if linux {
                LMarking::Random
            } else {
                LMarking::Recur
            }),
            qdelay: self.qdelay.unwrap_or(if linux { QdelayRef::Max } else { QdelayRef::Classic }),
            scheduler: self.scheduler.unwrap_or(if linux {
                Dualpi2Scheduler::Wrr
            } else {
                Dualpi2Scheduler::TimeShifted
            }),
            c_protection: self.c_protection.unwrap_or(10),
            tshift: self.tshift.unwrap_or(Duration::from_millis(50)),
            drop_overload: self.drop_overload.unwrap_or(true),
            min_backlog: self.min_backlog.unwrap_or(Bytes::new(if linux { 3000 } else { 1500 })),
            mtu: self.mtu.unwrap_or(Bytes::new(1500)),
            limit_packets: self.limit_packets.unwrap_or(10_000),
            limit_bytes: self.limit_bytes.unwrap_or(Bytes::new(15_000_000)),
        };
        let bad = |field, expected| Err(SpecError::OutOfRange { field, expected });
        if c.tupdate.is_zero() {
            return bad("tupdate", "above zero");
        }
        if c.coupling == 0 || c.coupling > 255 {
            return bad("coupling", "between 1 and 255");
        }
        if c.c_protection > 100 {
            return bad("c_protection", "a percentage, 0 to 100");
        }
        if c.limit_packets == 0 || c.limit_bytes.is_zero() {
            return bad("limit_packets", "limits of at least 1 packet and 1 byte");
        }
        if c.alpha.num() > 1_000_000 * c.alpha.den() || c.beta.num() > 1_000_000 * c.beta.den() {
            return bad("alpha", "gains up to 10^6 Hz");
        }
        Ok(c)
    }
}

/// The DualPI2 AQM. See the module documentation.
#[derive(Debug, Clone)]
pub struct DualPi2 {
    cfg: Dualpi2Config,
    q: DualFifo,
    /// Base probability p', scaled by [`ONE`].
    p: i64,
    prev_qdelay: Duration,
    next_update: Time,
    credit: i64,
    recur_l: i64,
    rng: ChaCha8Rng,
    n: DualCounts,
    trace: Trace,
}

impl DualPi2 {
    /// A DualPI2 queue; `seed` selects its random stream.
    pub fn new(spec: &Dualpi2Spec, seed: u64) -> Result<DualPi2, SpecError> {
        let cfg = spec.resolve()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(0xd2);
        let credit = Self::credit_init(&cfg);
        Ok(DualPi2 {
            next_update: Time::from_duration(cfg.tupdate),
            cfg,
            q: DualFifo::default(),
            p: 0,
            prev_qdelay: Duration::ZERO,
            credit,
            recur_l: 0,
            rng,
            n: DualCounts::new(&spec.epochs),
            trace: Trace::new(spec.trace),
        })
    }

    /// Linux `dualpi2_calculate_c_protection`: `mtu * (wc - wl)`; the L4S queue is served
    /// while the credit is at most 0.
    fn credit_init(cfg: &Dualpi2Config) -> i64 {
        let wc = i64::from(cfg.c_protection);
        (cfg.mtu.get() as i64) * (wc - (100 - wc))
    }

    /// The resolved parameters.
    pub fn config(&self) -> &Dualpi2Config {
        &self.cfg
    }

    /// Base probability p' (scaled by [`ONE`]).
    pub fn base_prob(&self) -> i64 {
        self.p
    }

    /// Per-class counters (`[l4s, classic]`).
    pub fn class_stats(&self) -> [&QueueStats; 2] {
        [&self.n.cls[L4S], &self.n.cls[CLASSIC]]
    }

    /// Per-epoch counters, sojourn percentiles and (`with_trace`) the probability trace.
    pub fn report(&self, with_trace: bool) -> AqmReport {
        let c = &self.cfg;
        let params = vec![
            ("profile".into(), format!("{:?}", c.profile)),
            ("target".into(), c.target.to_string()),
            ("tupdate".into(), c.tupdate.to_string()),
            ("alpha".into(), c.alpha.to_string()),
            ("beta".into(), c.beta.to_string()),
            ("coupling".into(), c.coupling.to_string()),
            ("l_threshold".into(), c.l_threshold.to_string()),
            ("l_range".into(), c.l_range.to_string()),
            ("l_marking".into(), format!("{:?}", c.l_marking)),
            ("qdelay".into(), format!("{:?}", c.qdelay)),
            ("scheduler".into(), format!("{:?}", c.scheduler)),
            ("c_protection".into(), c.c_protection.to_string()),
            ("tshift".into(), c.tshift.to_string()),
            ("drop_overload".into(), c.drop_overload.to_string()),
            ("min_backlog".into(), c.min_backlog.to_string()),
        ];
        AqmReport::new(
            "dualpi2",
            params,
            &self.n.epochs,
            &dualq::NAMES,
            &["p_base", "p_classic", "p_l4s_coupled"],
            with_trace.then_some(&self.trace),
        )
    }

    /// One PI update at instant `t` (RFC 9332 Figure 4).
    fn update_at(&mut self, t: Time) {
        let q = match self.cfg.qdelay {
            QdelayRef::Classic => self.q[CLASSIC].head_sojourn(t),
            QdelayRef::Max => self.q[CLASSIC].head_sojourn(t).max(self.q[L4S].head_sojourn(t)),
        };
        let qn = i128::from(q.as_nanos());
        let term = |g: Ratio, d: i128| -> i128 {
            i128::from(g.num()) * d * i128::from(ONE) / (i128::from(g.den()) * 1_000_000_000)
        };
        let delta = term(self.cfg.alpha, qn - i128::from(self.cfg.target.as_nanos()))
            + term(self.cfg.beta, qn - i128::from(self.prev_qdelay.as_nanos()));
        let max = if self.cfg.drop_overload { ONE } else { ONE / i64::from(self.cfg.coupling) };
        let p = (i128::from(self.p) + delta).clamp(0, i128::from(max));
        self.p = p as i64; // within [0, ONE]
        self.prev_qdelay = q;
        let pf = self.p as f64 / ONE as f64;
        let k = f64::from(self.cfg.coupling);
        self.trace.push(t, [pf, pf * pf, (k * pf).min(1.0)]);
    }

    /// Run every update due at or before `now`.
    fn catch_up(&mut self, now: Time) {
        while self.next_update <= now {
            let idle = self.q[L4S].is_empty() && self.q[CLASSIC].is_empty();
            if idle && self.p == 0 && self.prev_qdelay.is_zero() {
                // nothing changes while idle at rest: jump to the first update after now
                let step = self.cfg.tupdate.as_nanos();
                let behind = (now - self.next_update).as_nanos() / step + 1;
                self.next_update += Duration::from_nanos(behind.saturating_mul(step));
                break;
            }
            let t = self.next_update;
            self.update_at(t);
            self.next_update = t + self.cfg.tupdate;
        }
    }

    #[inline]
    fn roll(&mut self, p: i64) -> bool {
        i64::from(self.rng.next_u32()) < p
    }

    /// The native L4S AQM probability for a sojourn (step or ramp).
    fn native(&self, sojourn: Duration) -> i64 {
        let (th, range) = (self.cfg.l_threshold, self.cfg.l_range);
        if range.is_zero() {
            return if sojourn > th { ONE } else { 0 };
        }
        if sojourn >= th + range {
            ONE
        } else if sojourn > th {
            let x = i128::from((sojourn - th).as_nanos()) * i128::from(ONE)
                / i128::from(range.as_nanos());
            x as i64
        } else {
            0
        }
    }

    fn pick(&mut self) -> Option<usize> {
        let (l, c) = (&self.q[L4S], &self.q[CLASSIC]);
        match (l.is_empty(), c.is_empty()) {
            (true, true) => None,
            (false, true) => Some(L4S),
            (true, false) => Some(CLASSIC),
            (false, false) => Some(match self.cfg.scheduler {
                Dualpi2Scheduler::Wrr => {
                    if self.credit <= 0 {
                        L4S
                    } else {
                        CLASSIC
                    }
                }
                Dualpi2Scheduler::TimeShifted => {
                    let la = l.head_arrival().unwrap_or(Time::ZERO);
                    let ca = c.head_arrival().unwrap_or(Time::ZERO);
                    if la <= ca + self.cfg.tshift {
                        L4S
                    } else {
                        CLASSIC
                    }
                }
            }),
        }
    }

    fn drop_held(&mut self, now: Time, class: usize, h: Held) {
        self.n.aqm_drop(now, class, h.pkt);
    }
}

impl Queue for DualPi2 {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Verdict {
        self.catch_up(now);
        let len = self.q[L4S].len() + self.q[CLASSIC].len();
        let bytes = self.q[L4S].bytes() + self.q[CLASSIC].bytes();
        let full = if len >= self.cfg.limit_packets as usize {
            Some(DropReason::QueueFullPackets)
        } else if bytes.get() + pkt.wire_len().get() > self.cfg.limit_bytes.get() {
            Some(DropReason::QueueFullBytes)
        } else {
            None
        };
        pkt.meta.arrival = now;
        let (class, held) = match dualq::read(pkt, 0, false) {
            Ok(x) => x,
            Err(d) => {
                self.n.stats.on_drop(d.reason);
                return Verdict::Dropped(*d);
            }
        };
        if let Some(reason) = full {
            self.n.full(now, class, reason);
            return Verdict::drop(held.pkt, reason);
        }
        self.n.cls[class].on_enqueue(
            &held.pkt,
            self.q[class].len() + 1,
            self.q[class].bytes() + held.pkt.wire_len(),
        );
        self.n.stats.on_enqueue(&held.pkt, len + 1, bytes + held.pkt.wire_len());
        self.q[class].push(held);
        Verdict::Enqueued
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.catch_up(now);
        loop {
            let Some(class) = self.pick() else {
                // both empty (Linux `dualpi2_reset_c_protection`)
                self.credit = Self::credit_init(&self.cfg);
                return None;
            };
            // WRR credit (Linux `dequeue_packet`): changes only while the other queue holds
            // packets too, and only for a packet that is sent (not one the AQM drops)
            let both = !self.q[L4S].is_empty() && !self.q[CLASSIC].is_empty();
            let mut h = self.q[class].pop()?;
            let size = h.pkt.wire_len().get() as i64;
            let wc = i64::from(self.cfg.c_protection);
            let credit_change = match (both, class) {
                (false, _) => 0,
                (true, L4S) => wc * size,
                (true, _) => -(100 - wc) * size,
            };
            let sojourn = now - h.pkt.meta.arrival;
            let backlog = self.q[L4S].bytes() + self.q[CLASSIC].bytes();
            let signals = backlog >= self.cfg.min_backlog;
            let k = i64::from(self.cfg.coupling);
            let overload = self.cfg.drop_overload && self.p.saturating_mul(k) > ONE;
            let p = self.p;
            let mark = if class == L4S {
                if overload && signals && self.roll(p) && self.roll(p) {
                    self.drop_held(now, class, h);
                    continue;
                }
                let coupled = if signals { (p * k).min(ONE) } else { 0 };
                let pl = self.native(sojourn).max(coupled);
                match self.cfg.l_marking {
                    LMarking::Random => pl >= ONE || self.roll(pl),
                    LMarking::Recur => {
                        self.recur_l += pl;
                        if self.recur_l > ONE {
                            self.recur_l -= ONE;
                            true
                        } else {
                            false
                        }
                    }
                }
            } else if signals && self.roll(p) && self.roll(p) {
                if h.ecn == latnet_wire::Ecn::NotEct || overload {
                    self.drop_held(now, class, h);
                    continue;
                }
                true
            } else {
                false
            };
            let marked = mark && dualq::mark_ce(&mut h);
            if self.cfg.scheduler == Dualpi2Scheduler::Wrr {
                self.credit += credit_change;
            }
            if self.q[L4S].is_empty() && self.q[CLASSIC].is_empty() {
                self.credit = Self::credit_init(&self.cfg);
            }
            self.n.sent(now, class, &h.pkt, sojourn, marked);
            return Some(h.pkt);
        }
    }

    fn next_ready(&self, _now: Time) -> Option<Time> {
        self.q.next_ready()
    }

    fn poll_drop(&mut self) -> Option<Dropped> {
        self.n.dropped.pop_front()
    }

    fn drain(&mut self) -> Option<Packet> {
        self.q.drain()
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn byte_len(&self) -> Bytes {
        self.q.bytes()
    }

    fn stats(&self) -> &QueueStats {
        &self.n.stats
    }
}

#[cfg(test)]
#[path = "dualpi2_tests.rs"]
mod tests;
