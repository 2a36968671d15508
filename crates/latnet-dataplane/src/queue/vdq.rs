//! VDQ-CSAQM: the Virtual DualQ Core-Stateless AQM of seed 001 (Nádas, Gombos, Fejes, Laki,
//! "A Congestion Control Independent L4S Scheduler", ANRW 2020).
//!
//! Ports: one input, one output (pull); work-conserving. The element is stateless per flow: it
//! reads each packet's ECN field and its packet value (PV, [`latnet_wire::ppv`]), written by an
//! edge marker ([`crate::ppv::PvMarker`]).
//!
//! # What the seed fixes
//!
//! * Two physical queues — L4S (ECT(1) or CE) and Classic — under strict priority (L4S first).
//! * Two virtual queues (VQs) of (PV, size) records: VQ0 gets L4S traffic only, VQ1 gets both.
//!   Each has a maximum size, a serving rate `C_vi <= C`, a delay target `D_i` and a PV
//!   histogram.
//! * Every `period` (10 ms) each VQ's congestion threshold value `CTV_i` is recomputed from its
//!   histograms and delay target.
//! * Dequeue from L4S: forward if `PV > max(CTV0, CTV1)`, else mark CE; update both VQs.
//!   Dequeue from Classic: forward if `PV > CTV1`, else drop (or mark CE, `classic_ecn`);
//!   update VQ1.
//!
//! # What latnet chose where the seed is silent (all parameters)
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `rate` | required | the link rate `C` |
//! | `vq_share` | 0.985 | `C_v0 = C_v1 = vq_share * C` (the seed's 98.4 % utilisation "caused by VQs") |
//! | `vq0_rate`, `vq1_rate` | — | override `C_v0`, `C_v1` |
//! | `delay0`, `delay1` | 1 ms, 15 ms | delay targets `D_0`, `D_1` |
//! | `vq0_max`, `vq1_max` | `2 C_vi D_i` | VQ sizes; an overflow evicts the lowest PVs first |
//! | `period` | 10 ms | CTV update period `T` |
//! | `bins` | 1024 | PV histogram bins, log scale: bin = `floor(bins * log2(PV + 1) / 16)` |
//! | `ctv_rule` | `budget` | how CTV is found (below) |
//! | `budget_gain` | 1/4 | `budget` rule: weight `g` of the backlog error, in (0, 1] |
//! | `drain` | `fifo` | order in which a VQ's service removes records: `fifo`, `lowest-pv`, `highest-pv` |
//! | `classic_ecn` | false | mark ECT(0) Classic packets instead of dropping them |
//! | `default_pv` | 0 | value of a packet without a value option |
//! | `limit_packets`, `limit_bytes` | 1000, 1.5 MB | per physical queue (tail drop) |
//!
//! What a VQ holds: a record for every packet *sent* from the physical queues it covers
//! (forwarded or CE-marked; a dropped packet loads no link, so not a dropped one). The VQ is
//! served at `C_vi` continuously (integer bit·ns, remainders carried). It also keeps `H_IN_i`,
//! the histogram of the values of every packet that arrived for it (at enqueue) during the
//! current period — AQM-dropped ones and ones a full physical queue refused included: the
//! offered load.
//!
//! `ctv_rule`:
//!
//! * `budget` (default): the bytes VQ_i may admit in the next period are
//!   `B_i = C_vi T + g (C_vi D_i - backlog_i)` (at most the link's `C T`, at least 0);
//!   `CTV_i` is the highest value `v` with
//!   `H_IN_i(PV >= v) >= B_i`, so that packets with `PV > CTV_i` — about what arrived above it
//!   last period — fill the budget; no threshold when `H_IN_i` holds less than `B_i`. With
//!   stationary arrivals this drives the VQ backlog to `C_vi D_i` and the admitted rate to
//!   `C_vi`, and because of the random-rate marker each flow keeps `min(R, V⁻¹(CTV))` — the
//!   PPV operating point, also for sources that do not react.
//! * `content` (the reconstruction in the project's reference notes): `CTV_i` is the highest
//!   `v` with bytes in VQ_i of `PV >= v` at least `C_vi D_i`; no threshold when VQ_i holds less.
//!   It is a PV-selective ramp on the virtual backlog: it regulates reacting senders, but with
//!   senders that do not react it does not settle at `C_vi` (the property tests show both).
//!
//! Within the bin where the bytes counted from the top reach the amount sought, the CTV is
//! interpolated as if the bin's bytes were spread evenly over its values (rounded so that no
//! more than that amount passes), so "`PV > CTV`" compares exact 16-bit values. "No
//! threshold" forwards everything (value 0 included).
//!
//! Counters: [`QueueStats`] overall and per class, CE marks, drops (`aqm-drop`,
//! `queue-full-*`, `malformed`, `malformed-option`), and an [`AqmReport`]: per-epoch sojourn
//! percentiles per physical queue, and a trace of `CTV0`, `CTV1` and the VQ1 backlog at every
//! update.

use super::aqm_stats::{AqmReport, Trace};
use super::dualq::{self, DualCounts, DualFifo, CLASSIC, L4S};
use super::{Dropped, Queue, QueueLimits, QueueStats, SpecError, Verdict};
use crate::packet::Packet;
use crate::ppv::log2_q16;
use crate::ratio::Ratio;
use latnet_units::{Bytes, Duration, Rate, Time};
use serde::Deserialize;
use std::collections::VecDeque;
use std::sync::Arc;

/// How CTV is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CtvRule {
    /// From the arrival histogram and the VQ's byte budget for the next period.
    #[default]
    Budget,
    /// From the VQ's content and the delay target.
    Content,
}

/// Which records a VQ's service removes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drain {
    /// Oldest first.
    #[default]
    Fifo,
    /// Lowest packet value first.
    LowestPv,
    /// Highest packet value first.
    HighestPv,
}

/// VDQ-CSAQM as written in a scenario (`kind = "vdq-csaqm"`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VdqSpec {
    /// Link rate C.
    pub rate: Rate,
    /// VQ serving rates as a share of C (default 0.985).
    pub vq_share: Option<Ratio>,
    /// Override of C_v0.
    pub vq0_rate: Option<Rate>,
    /// Override of C_v1.
    pub vq1_rate: Option<Rate>,
    /// Delay target of VQ0 (default 1 ms).
    pub delay0: Option<Duration>,
    /// Delay target of VQ1 (default 15 ms).
    pub delay1: Option<Duration>,
    /// Size of VQ0 (default 2 C_v0 D_0).
    pub vq0_max: Option<Bytes>,
    /// Size of VQ1 (default 2 C_v1 D_1).
    pub vq1_max: Option<Bytes>,
    /// CTV update period (default 10 ms).
    pub period: Option<Duration>,
    /// Histogram bins (default 1024).
    pub bins: Option<u32>,
    /// CTV rule (default `budget`).
    #[serde(default)]
    pub ctv_rule: CtvRule,
    /// Budget rule: weight of the backlog error in the budget (default 1/4).
    pub budget_gain: Option<Ratio>,
    /// Drain order of the VQs (default `fifo`).
    #[serde(default)]
    pub drain: Drain,
    /// Mark ECT(0) Classic packets instead of dropping them.
    #[serde(default)]
    pub classic_ecn: bool,
    /// Value of packets without a value option.
    #[serde(default)]
    pub default_pv: u16,
    /// Packet limit of each physical queue (default 1000).
    pub limit_packets: Option<u32>,
    /// Byte limit of each physical queue (default 1.5 MB).
    pub limit_bytes: Option<Bytes>,
    /// Starts of reporting epochs (besides 0).
    #[serde(default)]
    pub epochs: Vec<Duration>,
    /// Record CTVs at every update.
    #[serde(default)]
    pub trace: bool,
}

impl VdqSpec {
    /// A spec with every default, for link rate `rate`.
    pub fn new(rate: Rate) -> Self {
        VdqSpec {
            rate,
            vq_share: None,
            vq0_rate: None,
            vq1_rate: None,
            delay0: None,
            delay1: None,
            vq0_max: None,
            vq1_max: None,
            period: None,
            bins: None,
            ctv_rule: CtvRule::default(),
            budget_gain: None,
            drain: Drain::default(),
            classic_ecn: false,
            default_pv: 0,
            limit_packets: None,
            limit_bytes: None,
            epochs: Vec::new(),
            trace: false,
        }
    }
}

/// Maps a packet value to its histogram bin, and a bin to its highest value.
#[derive(Debug)]
struct BinMap {
    lut: Vec<u16>,
    upper: Vec<u16>,
}

impl BinMap {
    fn new(bins: u32) -> BinMap {
        let b = u64::from(bins);
        let lut: Vec<u16> = (0..=u16::MAX)
            .map(|pv| ((log2_q16(u64::from(pv) + 1) * b) >> 20).min(b - 1) as u16)
            .collect();
        let mut upper = vec![0u16; bins as usize];
        let mut last = 0u16;
        let mut k = 0usize;
        for (b, u) in upper.iter_mut().enumerate() {
            while k < lut.len() && usize::from(lut[k]) <= b {
                last = k as u16;
                k += 1;
            }
            *u = last;
        }
        BinMap { lut, upper }
    }

    #[inline]
    fn bin(&self, pv: u16) -> usize {
        usize::from(self.lut[usize::from(pv)])
    }
}

/// One virtual queue: records of (bin, bytes), served at `rate`.
#[derive(Debug, Clone)]
struct VirtualQueue {
    rate: Rate,
    target: u64,
    max: u64,
    drain: Drain,
    hist: Vec<u64>,
    backlog: u64,
    /// FIFO drain: the records; an evicted byte stays here as "debt" of its bin until its
    /// record reaches the head (it is no longer counted in `hist`).
    records: VecDeque<(u16, u32)>,
    debt: Vec<u64>,
    max_records: usize,
    last: Time,
    carry: u128,
    h_in: Vec<u64>,
    h_in_total: u64,
    evicted: u64,
}

const BITNS_PER_BYTE: u128 = 8 * 1_000_000_000;

impl VirtualQueue {
    fn new(rate: Rate, delay: Duration, max: u64, bins: usize, drain: Drain) -> Self {
        let target = rate.bytes_in(delay, latnet_units::Rounding::Down).get();
        VirtualQueue {
            rate,
            target,
            max,
            drain,
            hist: vec![0; bins],
            backlog: 0,
            records: VecDeque::new(),
            debt: vec![0; bins],
            max_records: (max / 64) as usize * 4 + 1024,
            last: Time::ZERO,
            carry: 0,
            h_in: vec![0; bins],
            h_in_total: 0,
            evicted: 0,
        }
    }

    /// Serve until `now`.
    fn advance(&mut self, now: Time) {
        if now <= self.last {
            return;
        }
        let budget = self.rate.bit_nanos(now - self.last) + self.carry;
        self.last = now;
        if self.backlog == 0 {
            self.carry = 0;
            self.clear_ghosts();
            return;
        }
        let bytes = budget / BITNS_PER_BYTE;
        self.carry = budget % BITNS_PER_BYTE;
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.serve(bytes);
    }

    fn clear_ghosts(&mut self) {
        self.records.clear();
        self.debt.iter_mut().for_each(|d| *d = 0);
    }

    fn serve(&mut self, mut bytes: u64) {
        match self.drain {
            Drain::Fifo => {
                while bytes > 0 {
                    let Some(front) = self.records.front_mut() else { break };
                    let b = usize::from(front.0);
                    let ghost = self.debt[b].min(u64::from(front.1));
                    self.debt[b] -= ghost;
                    front.1 -= ghost as u32;
                    let take = bytes.min(u64::from(front.1));
                    front.1 -= take as u32;
                    self.hist[b] -= take;
                    self.backlog -= take;
                    bytes -= take;
                    if front.1 == 0 {
                        self.records.pop_front();
                    }
                }
                if self.backlog == 0 {
                    self.clear_ghosts();
                }
            }
            Drain::LowestPv => {
                for b in 0..self.hist.len() {
                    if bytes == 0 {
                        break;
                    }
                    let take = bytes.min(self.hist[b]);
                    self.hist[b] -= take;
                    self.backlog -= take;
                    bytes -= take;
                }
            }
            Drain::HighestPv => {
                for b in (0..self.hist.len()).rev() {
                    if bytes == 0 {
                        break;
                    }
                    let take = bytes.min(self.hist[b]);
                    self.hist[b] -= take;
                    self.backlog -= take;
                    bytes -= take;
                }
            }
        }
    }

    /// Count a dequeued packet in the arrival histogram.
    fn offer(&mut self, bin: usize, size: u64) {
        self.h_in[bin] += size;
        self.h_in_total += size;
    }

    /// Add the record of a sent packet; evict the lowest values on overflow.
    fn add(&mut self, bin: usize, size: u64) {
        let mut size = size;
        let mut need = (self.backlog + size).saturating_sub(self.max);
        let mut b = 0;
        while need > 0 {
            while b < self.hist.len() && self.hist[b] == 0 {
                b += 1;
            }
            if b >= self.hist.len() || b > bin {
                // the new record is the lowest: it is (partly) not admitted
                let cut = need.min(size);
                size -= cut;
                self.evicted += cut;
                break;
            }
            let take = need.min(self.hist[b]);
            self.hist[b] -= take;
            self.backlog -= take;
            self.evicted += take;
            need -= take;
            if self.drain == Drain::Fifo {
                self.debt[b] += take;
            }
        }
        if size == 0 {
            return;
        }
        self.hist[bin] += size;
        self.backlog += size;
        if self.drain == Drain::Fifo {
            self.records.push_back((bin as u16, size as u32));
            if self.records.len() > self.max_records {
                // pathological ghost build-up: serve the head record at once
                if let Some((hb, sz)) = self.records.pop_front() {
                    let hb = usize::from(hb);
                    let ghost = self.debt[hb].min(u64::from(sz));
                    self.debt[hb] -= ghost;
                    let real = u64::from(sz) - ghost;
                    self.hist[hb] -= real;
                    self.backlog -= real;
                }
            }
        }
    }

    /// The threshold by `rule` for period `period` as a packet value, and reset the arrival
    /// histogram. Within the bin where the bytes from the top reach what is needed, the value
    /// is interpolated as if the bin's bytes were spread evenly over its values (rounded so
    /// that no more than needed passes).
    fn ctv(
        &mut self,
        rule: CtvRule,
        period: Duration,
        gain: Ratio,
        link: Rate,
        bins: &BinMap,
    ) -> Option<u16> {
        let (hist, need) = match rule {
            CtvRule::Content => (&self.hist, self.target),
            CtvRule::Budget => {
                let per = self.rate.bytes_in(period, latnet_units::Rounding::Down).get();
                let cap = link.bytes_in(period, latnet_units::Rounding::Down).get().max(per);
                let budget = if self.backlog <= self.target {
                    (per + gain.mul_u64(self.target - self.backlog)).min(cap)
                } else {
                    per.saturating_sub(gain.mul_u64(self.backlog - self.target))
                };
                (&self.h_in, budget)
            }
        };
        let total: u64 = match rule {
            CtvRule::Content => self.backlog,
            CtvRule::Budget => self.h_in_total,
        };
        let out = if total < need || (need == 0 && total == 0) {
            None
        } else {
            let need = need.max(1);
            let mut acc = 0u64;
            let mut ctv = None;
            for b in (0..hist.len()).rev() {
                if hist[b] == 0 {
                    continue;
                }
                let above = acc;
                acc += hist[b];
                if acc >= need {
                    // pass (need - above) of this bin's hist[b] bytes: its top values
                    let hi = u64::from(bins.upper[b]);
                    let lo = if b == 0 { 0 } else { u64::from(bins.upper[b - 1]) + 1 };
                    let width = hi + 1 - lo.min(hi + 1);
                    let pass = u128::from(need - above) * u128::from(width) / u128::from(hist[b]);
                    ctv = Some((hi - (pass as u64).min(width)) as u16);
                    break;
                }
            }
            ctv
        };
        self.h_in.iter_mut().for_each(|x| *x = 0);
        self.h_in_total = 0;
        out
    }
}

/// The VDQ-CSAQM queue. See the module documentation.
#[derive(Debug, Clone)]
pub struct VdqCsaqm {
    spec: VdqSpec,
    gain: Ratio,
    limits: QueueLimits,
    period: Duration,
    bins: Arc<BinMap>,
    q: DualFifo,
    vq: [VirtualQueue; 2],
    /// CTVs as packet values; `None`: no threshold.
    ctv: [Option<u16>; 2],
    next_update: Time,
    n: DualCounts,
    trace: Trace,
}

impl VdqCsaqm {
    /// Build from a spec.
    pub fn new(spec: &VdqSpec) -> Result<VdqCsaqm, SpecError> {
        let bad = |field, expected| Err(SpecError::OutOfRange { field, expected });
        if spec.rate.is_zero() {
            return bad("rate", "the link rate, above zero");
        }
        let share = spec.vq_share.unwrap_or(Ratio::new(985, 1000).unwrap_or(Ratio::ONE));
        if share.is_zero() || !share.at_most_one() {
            return bad("vq_share", "a share in (0, 1]");
        }
        let cv = Rate::from_bps(share.mul_u64(spec.rate.bps()));
        let c0 = spec.vq0_rate.unwrap_or(cv);
        let c1 = spec.vq1_rate.unwrap_or(cv);
        if c0.is_zero() || c1.is_zero() {
            return bad("vq0_rate", "VQ rates above zero");
        }
        let d0 = spec.delay0.unwrap_or(Duration::from_millis(1));
        let d1 = spec.delay1.unwrap_or(Duration::from_millis(15));
        if d0.is_zero() || d1.is_zero() {
            return bad("delay0", "delay targets above zero");
        }
        let period = spec.period.unwrap_or(Duration::from_millis(10));
        if period.is_zero() {
            return bad("period", "above zero");
        }
        let bins = spec.bins.unwrap_or(1024);
        if !(16..=65_536).contains(&bins) {
            return bad("bins", "between 16 and 65536");
        }
        let dflt_max = |c: Rate, d: Duration| {
            Bytes::new(2 * c.bytes_in(d, latnet_units::Rounding::Up).get().max(1500))
        };
        let m0 = spec.vq0_max.unwrap_or_else(|| dflt_max(c0, d0)).get();
        let m1 = spec.vq1_max.unwrap_or_else(|| dflt_max(c1, d1)).get();
        if m0 == 0 || m1 == 0 {
            return bad("vq0_max", "VQ sizes above zero");
        }
        let d = QueueLimits::default();
        let limits = super::check_limits(QueueLimits {
            limit_packets: spec.limit_packets.unwrap_or(d.limit_packets),
            limit_bytes: spec.limit_bytes.unwrap_or(d.limit_bytes),
        })?;
        let spec = spec.clone();
        let nb = bins as usize;
        let gain = spec.budget_gain.unwrap_or(Ratio::new(1, 4).unwrap_or(Ratio::ONE));
        if gain.is_zero() || !gain.at_most_one() {
            return bad("budget_gain", "a gain in (0, 1]");
        }
        Ok(VdqCsaqm {
            gain,
            period,
            bins: Arc::new(BinMap::new(bins)),
            q: DualFifo::default(),
            vq: [
                VirtualQueue::new(c0, d0, m0, nb, spec.drain),
                VirtualQueue::new(c1, d1, m1, nb, spec.drain),
            ],
            ctv: [None, None],
            next_update: Time::from_duration(period),
            n: DualCounts::new(&spec.epochs),
            trace: Trace::new(spec.trace),
            limits,
            spec,
        })
    }

    /// Per-class counters (`[l4s, classic]`).
    pub fn class_stats(&self) -> [&QueueStats; 2] {
        [&self.n.cls[L4S], &self.n.cls[CLASSIC]]
    }

    /// The current CTVs as packet values (`None`: no threshold).
    pub fn ctv(&self) -> [Option<u16>; 2] {
        self.ctv
    }

    /// VQ backlogs (bytes), served up to the last call.
    pub fn vq_backlog(&self) -> [u64; 2] {
        [self.vq[0].backlog, self.vq[1].backlog]
    }

    /// Records evicted from each VQ on overflow (bytes).
    pub fn vq_evicted(&self) -> [u64; 2] {
        [self.vq[0].evicted, self.vq[1].evicted]
    }

    /// Per-epoch counters, sojourn percentiles and (`with_trace`) the CTV trace.
    pub fn report(&self, with_trace: bool) -> AqmReport {
        let s = &self.spec;
        let params = vec![
            ("rate".into(), s.rate.to_string()),
            ("vq0_rate".into(), self.vq[0].rate.to_string()),
            ("vq1_rate".into(), self.vq[1].rate.to_string()),
            ("vq0_target_bytes".into(), self.vq[0].target.to_string()),
            ("vq1_target_bytes".into(), self.vq[1].target.to_string()),
            ("vq0_max".into(), self.vq[0].max.to_string()),
            ("vq1_max".into(), self.vq[1].max.to_string()),
            ("period".into(), self.period.to_string()),
            ("bins".into(), self.bins.upper.len().to_string()),
            ("ctv_rule".into(), format!("{:?}", s.ctv_rule)),
            ("budget_gain".into(), self.gain.to_string()),
            ("drain".into(), format!("{:?}", s.drain)),
            ("classic_ecn".into(), s.classic_ecn.to_string()),
            ("default_pv".into(), s.default_pv.to_string()),
        ];
        AqmReport::new(
            "vdq-csaqm",
            params,
            &self.n.epochs,
            &dualq::NAMES,
            &["ctv0", "ctv1", "vq1_backlog_bytes"],
            with_trace.then_some(&self.trace),
        )
    }

    fn catch_up(&mut self, now: Time) {
        while self.next_update <= now {
            let t = self.next_update;
            let idle = self.q[L4S].is_empty()
                && self.q[CLASSIC].is_empty()
                && self.vq.iter().all(|v| v.backlog == 0 && v.h_in_total == 0)
                && self.ctv == [None, None];
            if idle {
                let step = self.period.as_nanos();
                let behind = (now - t).as_nanos() / step + 1;
                self.next_update = t + Duration::from_nanos(behind.saturating_mul(step));
                for v in &mut self.vq {
                    v.last = v.last.max(now);
                }
                break;
            }
            for i in 0..2 {
                self.vq[i].advance(t);
                let (rule, link) = (self.spec.ctv_rule, self.spec.rate);
                self.ctv[i] = self.vq[i].ctv(rule, self.period, self.gain, link, &self.bins);
            }
            let c = self.ctv();
            let f = |v: Option<u16>| v.map_or(0.0, f64::from);
            self.trace.push(t, [f(c[0]), f(c[1]), self.vq[1].backlog as f64]);
            self.next_update = t + self.period;
        }
    }

    /// `PV > CTV` (`None` passes everything).
    #[inline]
    fn passes(pv: u16, ctv: Option<u16>) -> bool {
        ctv.is_none_or(|c| pv > c)
    }
}

impl Queue for VdqCsaqm {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Verdict {
        self.catch_up(now);
        pkt.meta.arrival = now;
        let (class, held) = match dualq::read(pkt, self.spec.default_pv, true) {
            Ok(x) => x,
            Err(d) => {
                self.n.stats.on_drop(d.reason);
                return Verdict::Dropped(*d);
            }
        };
        // the offered load, whether or not the physical queue has room
        let size = held.pkt.wire_len();
        let bin = self.bins.bin(held.pv);
        if class == L4S {
            self.vq[0].offer(bin, size.get());
        }
        self.vq[1].offer(bin, size.get());
        let q = &self.q[class];
        if let Some(reason) = self.limits.check(q.len(), q.bytes(), &held.pkt) {
            self.n.full(now, class, reason);
            return Verdict::drop(held.pkt, reason);
        }
        self.n.cls[class].on_enqueue(&held.pkt, q.len() + 1, q.bytes() + size);
        let (len, bytes) = (self.len() + 1, self.byte_len() + size);
        self.n.stats.on_enqueue(&held.pkt, len, bytes);
        self.q[class].push(held);
        Verdict::Enqueued
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.catch_up(now);
        self.vq[0].advance(now);
        self.vq[1].advance(now);
        loop {
            let class = if !self.q[L4S].is_empty() { L4S } else { CLASSIC };
            let mut h = self.q[class].pop()?;
            let size = h.pkt.wire_len().get();
            let bin = self.bins.bin(h.pv);
            let sojourn = now - h.pkt.meta.arrival;
            let mut marked = false;
            if class == L4S {
                let fwd = Self::passes(h.pv, self.ctv[0]) && Self::passes(h.pv, self.ctv[1]);
                if !fwd {
                    marked = dualq::mark_ce(&mut h);
                }
                self.vq[0].add(bin, size);
                self.vq[1].add(bin, size);
            } else {
                if !Self::passes(h.pv, self.ctv[1]) {
                    if self.spec.classic_ecn && h.ecn == latnet_wire::Ecn::Ect0 {
                        marked = dualq::mark_ce(&mut h);
                    } else {
                        self.n.aqm_drop(now, class, h.pkt);
                        continue;
                    }
                }
                self.vq[1].add(bin, size);
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
#[path = "vdq_tests.rs"]
mod tests;
