//! Throughput-value functions (TVFs): the policy of the Per Packet Value framework.
//!
//! A TVF `V(x)` maps a rate `x` (bit/s) to a packet value (16 bits, higher = more valuable)
//! and is non-increasing in `x`. A marker gives the packets of a flow sending at `R` the values
//! `V(u R)`, `u` uniform in [0, 1); a bottleneck that forwards only values above a threshold
//! (the congestion threshold value, CTV) then lets each flow through at `min(R, V⁻¹(CTV))`.
//! One TVF shared by every flow gives max-min fairness; a policy class with weight `w` uses
//! `V(x / w)` (a class of weight 2 gets twice the throughput of weight 1 at every CTV, whatever
//! the TVF's shape).
//!
//! | family | `V(x)` | parameters (defaults) |
//! |---|---|---|
//! | `hyperbolic` | `v_max * k / (x + k)` | `v_max` (65535), `k` (900 kbit/s) — the PPV papers' example |
//! | `linear` | `max(0, v0 - v0 * x / x_max)` | `v0` (65535), `x_max` (1 Gbit/s) |
//! | `log-linear` | `v0 - per_octave * log2(x / x0)` for `x > x0`, `v0` below, at least 1 | `v0` (65535), `x0` (10 kbit/s), `per_octave` (2048) |
//!
//! All evaluation is integer (128-bit products, a fixed-point `log2` with 16 fractional bits),
//! so it is exact and the same on every machine. The log-linear family has the same relative
//! resolution at every rate (one value step is 0.034 % of rate with the defaults); the
//! hyperbolic one is coarse at high rates (about 1.7 % per step near 1 Gbit/s with `k` = 900
//! kbit/s). Values are clamped to `0..=65535`; only `linear` reaches 0.

use super::log2_q16;
use latnet_units::Rate;
use serde::Deserialize;

/// A throughput-value function as written in a scenario (`tvf = { kind = "log-linear" }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Tvf {
    /// `v_max * k / (x + k)`.
    Hyperbolic {
        /// Value at rate 0.
        #[serde(default = "default_v")]
        v_max: u16,
        /// Rate at which the value halves.
        #[serde(default = "default_k")]
        k: Rate,
    },
    /// `max(0, v0 - v0 * x / x_max)`.
    Linear {
        /// Value at rate 0.
        #[serde(default = "default_v")]
        v0: u16,
        /// Rate at which the value reaches 0.
        #[serde(default = "default_x_max")]
        x_max: Rate,
    },
    /// `v0 - per_octave * log2(x / x0)` above `x0`, at least 1.
    LogLinear {
        /// Value up to `x0`.
        #[serde(default = "default_v")]
        v0: u16,
        /// Rate where the value starts to fall.
        #[serde(default = "default_x0")]
        x0: Rate,
        /// Value lost per doubling of the rate.
        #[serde(default = "default_per_octave")]
        per_octave: u32,
    },
}

fn default_v() -> u16 {
    u16::MAX
}
fn default_k() -> Rate {
    Rate::from_kbps(900)
}
fn default_x_max() -> Rate {
    Rate::from_gbps(1)
}
fn default_x0() -> Rate {
    Rate::from_kbps(10)
}
fn default_per_octave() -> u32 {
    2048
}

impl Default for Tvf {
    fn default() -> Self {
        Tvf::LogLinear { v0: u16::MAX, x0: default_x0(), per_octave: default_per_octave() }
    }
}

impl Tvf {
    /// The PPV papers' hyperbolic example: `65535 * 900 kbit/s / (x + 900 kbit/s)`.
    pub const fn hyperbolic_default() -> Tvf {
        Tvf::Hyperbolic { v_max: u16::MAX, k: Rate::from_kbps(900) }
    }

    /// Check the parameters; the message says what was expected.
    pub fn validate(&self) -> Result<(), &'static str> {
        match *self {
            Tvf::Hyperbolic { k, .. } if k.is_zero() => Err("`k` above zero"),
            Tvf::Linear { x_max, .. } if x_max.is_zero() => Err("`x_max` above zero"),
            Tvf::LogLinear { x0, .. } if x0.is_zero() => Err("`x0` above zero"),
            Tvf::LogLinear { per_octave: 0, .. } => Err("`per_octave` above zero"),
            _ => Ok(()),
        }
    }

    /// `V(x)` for a rate in bit/s.
    pub fn value(&self, x_bps: u64) -> u16 {
        match *self {
            Tvf::Hyperbolic { v_max, k } => {
                let k = u128::from(k.bps().max(1));
                (u128::from(v_max) * k / (u128::from(x_bps) + k)) as u16
            }
            Tvf::Linear { v0, x_max } => {
                let xm = u128::from(x_max.bps().max(1));
                let drop = u128::from(v0) * u128::from(x_bps) / xm;
                u128::from(v0).saturating_sub(drop) as u16
            }
            Tvf::LogLinear { v0, x0, per_octave } => {
                let x0 = x0.bps().max(1);
                if x_bps <= x0 {
                    return v0;
                }
                let l = log2_q16(x_bps) - log2_q16(x0); // Q16, > 0
                let drop = (u128::from(l) * u128::from(per_octave)) >> 16;
                u128::from(v0).saturating_sub(drop).max(1) as u16
            }
        }
    }

    /// `V(x / w)` for a class of weight `w = num / den` (`num > 0`).
    pub fn value_weighted(&self, x_bps: u64, num: u64, den: u64) -> u16 {
        let x = u128::from(x_bps) * u128::from(den) / u128::from(num.max(1));
        self.value(u64::try_from(x).unwrap_or(u64::MAX))
    }

    /// `V⁻¹(v)`: the largest rate `x` (bit/s) with `V(x) > v`, 0 if `V(0) <= v`; for reports
    /// and tests. Found by bisection on [`Self::value`] itself, so it agrees with it exactly.
    pub fn inverse(&self, v: u16) -> f64 {
        if self.value(0) <= v {
            return 0.0;
        }
        let (mut lo, mut hi) = (0u64, 1u64);
        while self.value(hi) > v {
            if hi >= u64::MAX / 2 {
                return hi as f64;
            }
            hi *= 2;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.value(mid) > v {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyperbolic_example() {
        let t = Tvf::hyperbolic_default();
        assert_eq!(t.value(0), 65535);
        assert_eq!(t.value(900_000), 32767);
        // 65535 * 0.9 / 10.9 = 5411.1
        assert_eq!(t.value(10_000_000), 5411);
        assert_eq!(t.value(1_000_000_000), 58);
        // one value step is about 2 kbit/s here: V(x) > 5411 up to 9.998 Mbit/s
        assert!((t.inverse(5411) - 10_000_000.0).abs() < 2_100.0);
    }

    #[test]
    fn linear_reaches_zero() {
        let t = Tvf::Linear { v0: 1000, x_max: Rate::from_mbps(100) };
        assert_eq!(t.value(0), 1000);
        assert_eq!(t.value(50_000_000), 500);
        assert_eq!(t.value(100_000_000), 0);
        assert_eq!(t.value(u64::MAX), 0);
    }

    #[test]
    fn log_linear_loses_per_octave() {
        let t = Tvf::default();
        assert_eq!(t.value(5_000), 65535);
        assert_eq!(t.value(10_000), 65535);
        assert_eq!(t.value(20_000), 65535 - 2048);
        assert_eq!(t.value(10_240_000), 65535 - 10 * 2048);
        // 10 Mbit/s: log2(1000) = 9.9658 octaves -> 20409.9 lost
        assert_eq!(t.value(10_000_000), 65535 - 20409);
        assert_eq!(t.value(u64::MAX), 1, "never 0: 0 is 'no value'");
        // monotone
        let mut last = u16::MAX;
        for e in 0..60 {
            let v = t.value(1u64 << e);
            assert!(v <= last);
            last = v;
        }
    }

    #[test]
    fn weights_scale_the_rate_axis() {
        let t = Tvf::default();
        assert_eq!(t.value_weighted(20_000_000, 2, 1), t.value(10_000_000));
        assert_eq!(t.value_weighted(5_000_000, 1, 2), t.value(10_000_000));
        let x = t.inverse(t.value(10_000_000));
        assert!((x / 10_000_000.0 - 1.0).abs() < 0.001, "{x}");
    }

    #[test]
    fn validation() {
        assert!(Tvf::Hyperbolic { v_max: 1, k: Rate::ZERO }.validate().is_err());
        assert!(Tvf::LogLinear { v0: 1, x0: Rate::from_bps(1), per_octave: 0 }.validate().is_err());
        assert!(Tvf::default().validate().is_ok());
    }
}
