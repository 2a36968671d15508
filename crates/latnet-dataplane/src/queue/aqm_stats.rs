//! Measurement inside dual-queue AQMs: per-class sojourn histograms, counters per reporting
//! epoch, and a bounded trace of the control variables (CTVs, probabilities).
//!
//! The queue sees `now` at every enqueue and dequeue, so it can attribute what it does to
//! *epochs*: consecutive intervals that start at the instants of the `epochs` parameter (the
//! first at 0). Experiments set them to the starts of their phases (flow mixes) and get
//! per-phase sojourn percentiles, utilisation, CE and drop rates without per-packet logs.
//!
//! Histograms are log-linear over nanoseconds: exact below 64 ns, then 64 sub-buckets per
//! power of two (relative error below 1/64 = 1.6 %), values clamped at 2^40 ns (18 minutes):
//! 2,304 counters per histogram. The state is integers; percentiles become floats only in
//! [`AqmReport`].

use latnet_units::{Duration, Time};
use serde::{Deserialize, Serialize};

const SUB: u32 = 6; // 64 sub-buckets
const MAX_EXP: u32 = 40;
const BUCKETS: usize = ((MAX_EXP - SUB + 1) as usize + 1) << SUB;

/// A log-linear histogram of durations (see the module docs).
#[derive(Debug, Clone)]
pub struct LogHist {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    max: u64,
}

impl Default for LogHist {
    fn default() -> Self {
        LogHist { counts: vec![0; BUCKETS], n: 0, sum: 0, max: 0 }
    }
}

fn bucket(v: u64) -> usize {
    let v = v.min((1u64 << (MAX_EXP + 1)) - 1);
    if v < (1 << SUB) {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB
    let sub = (v >> (e - SUB)) & ((1 << SUB) - 1);
    (((e - SUB + 1) as usize) << SUB) + sub as usize
}

/// Lowest and highest value of a bucket.
fn bucket_range(b: usize) -> (u64, u64) {
    let hi_bits = b >> SUB;
    if hi_bits == 0 {
        return (b as u64, b as u64);
    }
    let e = hi_bits as u32 + SUB - 1;
    let sub = (b & ((1 << SUB) - 1)) as u64;
    let lo = (1u64 << e) + (sub << (e - SUB));
    (lo, lo + (1u64 << (e - SUB)) - 1)
}

impl LogHist {
    /// Count one value.
    #[inline]
    pub fn record(&mut self, d: Duration) {
        let v = d.as_nanos();
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The value at quantile `q` (0..=1): the midpoint of the bucket holding the rank
    /// `ceil(q n)`, clamped to the largest value seen. `None` if empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_range(b);
                return Some(((lo as f64 + hi as f64) / 2.0).min(self.max as f64));
            }
        }
        Some(self.max as f64)
    }

    /// Summary for reports.
    pub fn summary(&self) -> Option<SojournSummary> {
        (self.n > 0).then(|| SojournSummary {
            count: self.n,
            mean_ns: self.sum as f64 / self.n as f64,
            p50_ns: self.quantile(0.5).unwrap_or(0.0),
            p99_ns: self.quantile(0.99).unwrap_or(0.0),
            p999_ns: self.quantile(0.999).unwrap_or(0.0),
            max_ns: self.max,
        })
    }
}

/// Sojourn-time percentiles of one class (nanoseconds).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SojournSummary {
    /// Packets measured.
    pub count: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// 99.9th percentile.
    pub p999_ns: f64,
    /// Largest.
    pub max_ns: u64,
}

/// Counters of one class in one epoch.
#[derive(Debug, Clone, Default)]
pub struct ClassCounters {
    /// Packets handed to the transmitter.
    pub tx_packets: u64,
    /// Bytes handed to the transmitter.
    pub tx_bytes: u64,
    /// Packets the AQM marked CE (of those sent).
    pub ce_marks: u64,
    /// Packets the AQM dropped (at dequeue, or at enqueue for early-drop designs).
    pub aqm_drops: u64,
    /// Packets refused because the queue was full.
    pub full_drops: u64,
    /// Sojourn times of packets sent.
    pub sojourn: LogHist,
}

/// Per-epoch, per-class counters.
#[derive(Debug, Clone)]
pub struct EpochStats {
    starts: Vec<Time>,
    /// `[epoch][class]`.
    counters: Vec<Vec<ClassCounters>>,
}

impl EpochStats {
    /// Epochs starting at 0 and at each of `starts` (sorted, duplicates and 0 ignored), for
    /// `classes` classes.
    pub fn new(starts: &[Duration], classes: usize) -> Self {
        let mut s: Vec<Time> = vec![Time::ZERO];
        let mut sorted: Vec<Duration> = starts.to_vec();
        sorted.sort_unstable();
        for d in sorted {
            let t = Time::from_duration(d);
            if s.last().is_some_and(|&l| t > l) {
                s.push(t);
            }
        }
        let counters = s.iter().map(|_| vec![ClassCounters::default(); classes]).collect();
        EpochStats { starts: s, counters }
    }

    /// The counters of `class` for the epoch holding `now`.
    #[inline]
    pub fn at(&mut self, now: Time, class: usize) -> &mut ClassCounters {
        let e = self.starts.partition_point(|&s| s <= now).saturating_sub(1);
        let row = &mut self.counters[e];
        let c = class.min(row.len() - 1);
        &mut row[c]
    }

    /// Reports, one per epoch.
    pub fn report(&self, names: &[&str]) -> Vec<EpochReport> {
        self.starts
            .iter()
            .enumerate()
            .map(|(i, s)| EpochReport {
                start_ns: s.as_nanos(),
                end_ns: self.starts.get(i + 1).map(|t| t.as_nanos()),
                classes: self.counters[i]
                    .iter()
                    .enumerate()
                    .map(|(c, k)| ClassReport {
                        class: names.get(c).copied().unwrap_or("?").to_owned(),
                        tx_packets: k.tx_packets,
                        tx_bytes: k.tx_bytes,
                        ce_marks: k.ce_marks,
                        aqm_drops: k.aqm_drops,
                        full_drops: k.full_drops,
                        sojourn: k.sojourn.summary(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// A bounded trace of control variables.
#[derive(Debug, Clone)]
pub struct Trace {
    enabled: bool,
    limit: usize,
    points: Vec<(u64, [f64; 3])>,
    lost: u64,
}

impl Trace {
    /// Most points kept; later ones are counted as lost.
    pub const LIMIT: usize = 1 << 20;

    /// A trace that records only if `enabled`.
    pub fn new(enabled: bool) -> Self {
        Trace { enabled, limit: Self::LIMIT, points: Vec::new(), lost: 0 }
    }

    /// Record the values at `now` (report values: floats are fine here).
    #[inline]
    pub fn push(&mut self, now: Time, v: [f64; 3]) {
        if !self.enabled {
            return;
        }
        if self.points.len() < self.limit {
            self.points.push((now.as_nanos(), v));
        } else {
            self.lost += 1;
        }
    }
}

/// One epoch of an [`AqmReport`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpochReport {
    /// Start (ns).
    pub start_ns: u64,
    /// End (ns), `None` for the last epoch (runs to the end).
    pub end_ns: Option<u64>,
    /// Per class.
    pub classes: Vec<ClassReport>,
}

/// One class in one epoch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClassReport {
    /// Class name (`l4s`, `classic`).
    pub class: String,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// CE marks by the AQM.
    pub ce_marks: u64,
    /// AQM drops.
    pub aqm_drops: u64,
    /// Drops because the physical queue was full.
    pub full_drops: u64,
    /// Sojourn times in the physical queue.
    pub sojourn: Option<SojournSummary>,
}

/// What a dual-queue AQM reports beside the usual queue counters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AqmReport {
    /// `vdq-csaqm` or `dualpi2`.
    pub kind: String,
    /// Parameters as resolved (defaults filled in), for the record.
    pub params: Vec<(String, String)>,
    /// Per-epoch counters.
    pub epochs: Vec<EpochReport>,
    /// Names of the traced values.
    pub trace_names: Vec<String>,
    /// `(time ns, values)` at every control update, if tracing was on.
    pub trace: Vec<(u64, [f64; 3])>,
    /// Trace points not kept (over the limit).
    pub trace_lost: u64,
}

impl AqmReport {
    /// Assemble a report; without `trace`, its points are left out (`trace` empty, `trace_lost`
    /// 0: a report taken often, whose trace would be copied every time).
    pub fn new(
        kind: &str,
        params: Vec<(String, String)>,
        epochs: &EpochStats,
        class_names: &[&str],
        trace_names: &[&str],
        trace: Option<&Trace>,
    ) -> Self {
        AqmReport {
            kind: kind.to_owned(),
            params,
            epochs: epochs.report(class_names),
            trace_names: trace_names.iter().map(|s| (*s).to_owned()).collect(),
            trace: trace.map_or_else(Vec::new, |t| t.points.clone()),
            trace_lost: trace.map_or(0, |t| t.lost),
        }
    }

    /// The report of a queue built with `QueueSpec::with_epochs_after(origin)`, as seen from the
    /// experiment's time zero at `origin`: the epoch before it and the trace points before it
    /// are left out, and every time is counted from `origin`.
    pub fn since(mut self, origin: Duration) -> AqmReport {
        let o = origin.as_nanos();
        if o == 0 {
            return self;
        }
        self.epochs.retain(|e| e.start_ns >= o);
        for e in &mut self.epochs {
            e.start_ns -= o;
            e.end_ns = e.end_ns.map(|t| t - o);
        }
        self.trace.retain(|p| p.0 >= o);
        for p in &mut self.trace {
            p.0 -= o;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_exactly() {
        for v in [0u64, 1, 63, 64, 65, 127, 128, 1000, 999_999, 1 << 39, (1 << 41) - 1] {
            let (lo, hi) = bucket_range(bucket(v));
            assert!(lo <= v && v <= hi, "{v}: [{lo}, {hi}]");
            assert!(hi - lo <= v / 64, "{v}: width {}", hi - lo);
        }
        assert!(bucket((1 << 41) - 1) < BUCKETS);
        assert!(bucket(u64::MAX) < BUCKETS);
    }

    #[test]
    fn quantiles_within_bucket_precision() {
        let mut h = LogHist::default();
        for v in 1..=10_000u64 {
            h.record(Duration::from_nanos(v * 100));
        }
        let p50 = h.quantile(0.5).unwrap();
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.016, "{p50}");
        let p99 = h.quantile(0.99).unwrap();
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.016, "{p99}");
        assert_eq!(h.quantile(1.0).unwrap(), 1_000_000.0);
        let s = h.summary().unwrap();
        assert_eq!(s.count, 10_000);
        assert!((s.mean_ns - 500_050.0).abs() < 1e-6);
    }

    #[test]
    fn epochs_by_time() {
        let mut e = EpochStats::new(&[Duration::from_secs(2), Duration::from_secs(1)], 2);
        e.at(Time::from_nanos(5), 0).tx_packets += 1;
        e.at(Time::from_duration(Duration::from_secs(1)), 1).tx_packets += 1;
        e.at(Time::from_duration(Duration::from_secs(3)), 9).tx_packets += 1; // class clamped
        let r = e.report(&["l4s", "classic"]);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].classes[0].tx_packets, 1);
        assert_eq!(r[1].start_ns, 1_000_000_000);
        assert_eq!(r[1].classes[1].tx_packets, 1);
        assert_eq!(r[2].classes[1].tx_packets, 1);
        assert_eq!(r[2].end_ns, None);
    }
}
