//! Deterministic network calculus for admission control.
//!
//! What latnet's controller needs to decide whether a flow fits: token-bucket arrival curves,
//! input-link shaping (`min(r t + b, C t + L)`), rate-latency service curves, the
//! static-priority leftover cascade, delay (horizontal) and backlog (vertical) deviations, burst
//! increase along a path, and the per-queue check of Chameleon (Van Bemten et al., CoNEXT 2020,
//! §3.2; the model follows Le Boudec & Thiran, *Network Calculus*, 2001, ch. 1 and 6.2).
//!
//! # Exact arithmetic
//!
//! Every quantity is an integer in a unit chosen so that the operations stay exact: rates in
//! bit/s, bursts and backlogs in **nanobits** (so that a rate times a duration in ns is an
//! integer), times as exact rationals of the two ([`Ratio`]). Bounds are quotients of `u128`
//! integers and comparisons (`delay < budget`) are done by cross-multiplication. Consequences:
//!
//! * an admission decision is the same in every run and on every machine, including exactly at
//!   a boundary (the golden vector below is reproduced to the last digit);
//! * aggregates are sums of integers, so adding a flow and removing it restores the previous
//!   state bit for bit;
//! * bounds are monotone: more traffic never yields a smaller bound (no rounding to break it).
//!
//! Floats appear only in report accessors (`as_f64`, `delay_ms`). Overflow is reported as
//! [`NcError::Overflow`] (callers reject conservatively), never wrapped; with rates up to
//! 10¹² bit/s, aggregate bursts up to 10⁹ bytes, budgets up to an hour and a few thousand
//! pieces per queue the intermediate products stay below 2¹²⁷.
//!
//! # Modules
//!
//! | module | what |
//! |---|---|
//! | [`ratio`] | exact rationals |
//! | [`curves`] | [`TokenBucket`], [`RateLatency`] (with leftover and packetizer), [`Piece`] (shaped bucket) |
//! | [`concave`] | [`ConcaveSum`]: concave arrival curves, delay and backlog bounds, what-if with one piece replaced |
//! | [`priority`] | the static-priority cascade and per-queue check ([`check_port`]) |
//! | [`burst`] | [`BurstModel`]: none / real / worst case |
//!
//! # Golden vector (a published DetServ example, see `tests/golden.rs`)
//!
//! A 1 Gbit/s port with three queues of 300,000 B and budgets 1.74 / 6.6 / 11.22 ms, holding
//! 322 Mb/s + 186,000 B, 275 Mb/s + 195,000 B and 93 Mb/s + 90,000 B: adding 81 Mb/s + 5,500 B
//! to queue 1 pushes queue 2 to 11.9145 ms (rejected); 30 Mb/s + 15,000 B gives 10.4892 ms
//! (accepted).

pub mod burst;
pub mod concave;
pub mod curves;
pub mod priority;
pub mod ratio;

pub use burst::BurstModel;
pub use concave::{Bounds, ConcaveSum};
pub use curves::{nanobits, Piece, RateLatency, TokenBucket, NB_PER_BYTE};
pub use priority::{check_port, leftovers, within, QueueLimits, QueueVerdict};
pub use ratio::Ratio;

/// Errors of the calculus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NcError {
    /// An intermediate product exceeded `u128` (inputs far outside realistic ranges).
    #[error("arithmetic out of range (inputs far beyond realistic rates and bursts)")]
    Overflow,
    /// A piece to remove or replace was not part of the aggregate, or a zero denominator.
    #[error("inconsistent aggregate: removing something that was never added")]
    Inconsistent,
}
