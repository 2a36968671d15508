//! One output port under non-preemptive static priority: the leftover cascade and the
//! per-queue admission check.
//!
//! Queue 0 is served first. Queue `i` receives the base service of the link minus what queues
//! `0..i` may take, each counted by its token-bucket aggregate `(r_j, b_j)`:
//!
//! `β_i = (R − Σ_{j<i} r_j) [t − (Σ_{j<i} b_j + k L_max) / (R − Σ_{j<i} r_j)]⁺`
//!
//! (the unrolled form of `R' = R − r`, `T' = (b + R T) / (R − r)`; see
//! [`RateLatency::leftover`]). A queue is within its limits if its delay bound is strictly below
//! its budget and its backlog bound strictly below its buffer. Adding traffic to queue `q`
//! changes the arrival curve of `q` and the service of every queue below it, so an admission
//! into `q` must re-check `q` and all `j > q`; queues above `q` are unaffected.

use crate::concave::{Bounds, ConcaveSum};
use crate::curves::{nanobits, RateLatency, TokenBucket};
use crate::NcError;
use latnet_units::{Bytes, Duration};

/// Budget and buffer of one priority queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Delay budget `D` (the bound must stay strictly below it).
    pub budget: Duration,
    /// Buffer (the backlog bound must stay strictly below it).
    pub buffer: Bytes,
}

/// The outcome of checking one queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueVerdict {
    /// The bounds, or `None` if unbounded (arrival rate above the leftover rate, or no leftover).
    pub bounds: Option<Bounds>,
    /// Within budget and buffer. An empty queue is always within its limits (it holds no
    /// flow whose guarantee could break).
    pub ok: bool,
}

/// True if `b` is strictly within `lim`.
pub fn within(b: &Bounds, lim: QueueLimits) -> Result<bool, NcError> {
    Ok(b.delay.try_lt_int(u128::from(lim.budget.as_nanos()))?
        && b.backlog.try_lt_int(nanobits(lim.buffer))?)
}

/// The service curve of each queue (`None` where nothing is left).
pub fn leftovers(
    base: RateLatency,
    aggregates: &[TokenBucket],
) -> Result<Vec<Option<RateLatency>>, NcError> {
    let mut out = Vec::with_capacity(aggregates.len());
    let mut cur = Some(base);
    for tb in aggregates {
        out.push(cur);
        cur = match cur {
            Some(b) => b.leftover(*tb)?,
            None => None,
        };
    }
    Ok(out)
}

/// Check every queue of a port. `arrivals[i]` is queue `i`'s arrival curve (possibly shaped by
/// input links), `aggregates[i]` its token-bucket aggregate (which is what the leftover of lower
/// queues subtracts).
pub fn check_port(
    base: RateLatency,
    arrivals: &[ConcaveSum],
    aggregates: &[TokenBucket],
    limits: &[QueueLimits],
) -> Result<Vec<QueueVerdict>, NcError> {
    let betas = leftovers(base, aggregates)?;
    let mut out = Vec::with_capacity(arrivals.len());
    for ((alpha, beta), lim) in arrivals.iter().zip(&betas).zip(limits) {
        let bounds = match beta {
            Some(b) => alpha.bounds(*b)?,
            None => None,
        };
        let ok = alpha.is_zero()
            || match &bounds {
                Some(b) => within(b, *lim)?,
                None => false,
            };
        out.push(QueueVerdict { bounds, ok });
    }
    Ok(out)
}
