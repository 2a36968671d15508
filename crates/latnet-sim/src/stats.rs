//! Measurement: latency summaries with exact min / mean / max and HDR-histogram percentiles.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Accumulates latency samples (ns). Min, max and mean are exact; percentiles come from an HDR
/// histogram with 3 significant digits (relative error <= 0.1 %).
#[derive(Debug, Clone)]
pub struct LatencyStats {
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    hist: Histogram<u64>,
}

impl Default for LatencyStats {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyStats {
    /// Empty.
    pub fn new() -> Self {
        // Auto-resizing: values of any magnitude are recorded, never rejected.
        // Invariant: 3 significant digits is within HdrHistogram's 0..=5.
        let mut hist = Histogram::new(3).expect("valid HDR precision");
        hist.auto(true);
        LatencyStats { count: 0, sum: 0, min: u64::MAX, max: 0, hist }
    }

    /// Record one sample.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.count += 1;
        self.sum += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        // Cannot fail with auto-resize on.
        let _ = self.hist.record(ns);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Summary, `None` without samples.
    pub fn summary(&self) -> Option<Summary> {
        if self.count == 0 {
            return None;
        }
        let q = |p: f64| self.hist.value_at_quantile(p).clamp(self.min, self.max);
        Some(Summary {
            count: self.count,
            min: self.min,
            mean: self.sum as f64 / self.count as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: self.max,
        })
    }
}

/// Latency summary in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Smallest (exact).
    pub min: u64,
    /// Mean (exact up to float rounding).
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest (exact).
    pub max: u64,
}

/// Jitter as RFC 3393 IP packet delay variation between consecutive received packets.
#[derive(Debug, Clone, Default)]
pub struct Jitter {
    last: Option<u64>,
    sum_abs: u128,
    n: u64,
}

impl Jitter {
    /// Add the latency of the next received packet.
    #[inline]
    pub fn record(&mut self, latency: u64) {
        if let Some(prev) = self.last {
            self.sum_abs += u128::from(latency.abs_diff(prev));
            self.n += 1;
        }
        self.last = Some(latency);
    }

    /// Mean absolute delay variation (ns), `None` with fewer than two packets.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum_abs as f64 / self.n as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_exact_for_min_mean_max() {
        let mut s = LatencyStats::new();
        for v in [700_000u64, 761_000, 872_000, 1] {
            s.record(v);
        }
        let m = s.summary().unwrap();
        assert_eq!((m.count, m.min, m.max), (4, 1, 872_000));
        assert!((m.mean - 583_250.25).abs() < 1e-6);
        assert!(m.p50 >= 700_000 - 700 && m.p50 <= 761_000 + 761);
        assert!(LatencyStats::new().summary().is_none());
    }

    #[test]
    fn percentiles_within_hdr_precision() {
        let mut s = LatencyStats::new();
        for v in 1..=100_000u64 {
            s.record(v * 1000);
        }
        let m = s.summary().unwrap();
        assert!((m.p99 as f64 - 99_000_000.0).abs() / 99e6 < 0.001, "{}", m.p99);
        assert!((m.p50 as f64 - 50_000_000.0).abs() / 50e6 < 0.001, "{}", m.p50);
    }

    #[test]
    fn jitter_is_mean_abs_difference() {
        let mut j = Jitter::default();
        assert_eq!(j.mean(), None);
        for v in [10, 14, 12, 12] {
            j.record(v);
        }
        assert_eq!(j.mean(), Some(2.0));
    }
}
