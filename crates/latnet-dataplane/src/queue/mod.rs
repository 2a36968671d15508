//! Queues and schedulers: one trait, a closed set of implementations behind [`AnyQueue`].
//!
//! # Contract of [`Queue`]
//!
//! The runner (simulator or real-time switch) owns time and calls, for each egress port:
//!
//! 1. [`Queue::enqueue`]`(now, pkt)` for each packet classified to the port. The verdict says
//!    whether the packet was taken or dropped (and gives the dropped packet back).
//! 2. When the transmitter is idle: [`Queue::dequeue`]`(now)`. `None` means nothing is eligible
//!    *now*; then [`Queue::next_ready`]`(now)` says when to ask again (`None`: the queue is empty;
//!    a time `<= now` would mean a packet is eligible, which `dequeue` would have returned).
//!    Work-conserving queues are ready whenever they are non-empty; non-work-conserving ones
//!    (LBF, shapers, dampers) return a future instant and the runner schedules a wake-up.
//! 3. After any call, [`Queue::poll_drop`] until `None`: packets the queue dropped on its own
//!    (expired at dequeue, pushed out), each with its reason, so the runner can record them.
//! 4. At the end of a run, [`Queue::drain`] until `None`: every packet still held, regardless of
//!    eligible times, expiry, sojourn and AQM state. Draining counts nothing: the packets were
//!    neither handed to a transmitter nor marked nor dropped by the queue (the runner counts
//!    them as `end-of-run`), so [`QueueStats`] (and per-class and AQM counters) stay as they
//!    were. Every queue implements it itself, without going through `dequeue`.
//!
//! Every queue is bounded in packets and bytes ([`QueueLimits`]) and counts what it does in
//! [`QueueStats`], drops by [`DropReason`].

pub mod aqm_stats;
pub mod dualpi2;
mod dualq;
mod fifo;
pub mod fq_pace;
pub mod htb;
mod lbf;
mod prio;
pub mod pv_mark;
pub mod step_ce;
pub mod vdq;

pub use aqm_stats::AqmReport;
pub use dualpi2::{DualPi2, Dualpi2Profile, Dualpi2Spec};
pub use fifo::Fifo;
pub use fq_pace::{FqPace, FqSpec};
pub use htb::{Htb, HtbClassSpec};
pub use lbf::{LbfOrder, LbfQueue};
pub use prio::StrictPriority;
pub use pv_mark::{MarkAt, PvMarking, PvMarkingSpec};
pub use step_ce::{NonEct, StepCe, Threshold};
pub use vdq::{CtvRule, Drain, VdqCsaqm, VdqSpec};

use crate::drop::{DropCounters, DropReason};
use crate::packet::Packet;
use latnet_units::{Bytes, Duration, Rate, Time};
use serde::Deserialize;

/// A packet the element dropped, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The dropped packet.
    pub pkt: Packet,
    /// Why.
    pub reason: DropReason,
}

/// Outcome of [`Queue::enqueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Verdict {
    /// The queue took the packet.
    Enqueued,
    /// The queue refused the packet.
    Dropped(Dropped),
}

impl Verdict {
    /// A drop verdict.
    pub fn drop(pkt: Packet, reason: DropReason) -> Verdict {
        Verdict::Dropped(Dropped { pkt, reason })
    }
}

/// A queue or scheduler. See the module documentation for the call order.
pub trait Queue {
    /// Offer a packet at `now`.
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Verdict;
    /// Take the next packet eligible at `now`, if any.
    fn dequeue(&mut self, now: Time) -> Option<Packet>;
    /// When a packet will next be eligible; `None` if the queue is empty.
    fn next_ready(&self, now: Time) -> Option<Time>;
    /// A packet the queue dropped on its own since the last call, if any.
    fn poll_drop(&mut self) -> Option<Dropped> {
        None
    }
    /// Remove any packet, ignoring eligible times, expiry and AQM state (the runner empties
    /// queues this way at the end of a run). Counts nothing: no counter of [`QueueStats`], of a
    /// class or of an AQM report changes; only the packets held (`len`, `byte_len`) go down.
    /// Required (no default): a default through `dequeue` would count the packets as handed
    /// out and let an AQM act on them.
    fn drain(&mut self) -> Option<Packet>;
    /// Packets held.
    fn len(&self) -> usize;
    /// Bytes held (wire length).
    fn byte_len(&self) -> Bytes;
    /// True if no packet is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Counters.
    fn stats(&self) -> &QueueStats;
}

/// Packet and byte limits of a queue. Both always apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueLimits {
    /// At most this many packets.
    #[serde(default = "QueueLimits::default_packets")]
    pub limit_packets: u32,
    /// At most this many bytes (wire length).
    #[serde(default = "QueueLimits::default_bytes")]
    pub limit_bytes: Bytes,
}

impl QueueLimits {
    fn default_packets() -> u32 {
        1000
    }
    fn default_bytes() -> Bytes {
        Bytes::new(1_500_000)
    }

    /// The reason `pkt` may not join a queue holding `len` packets / `bytes`, if any.
    #[inline]
    pub fn check(&self, len: usize, bytes: Bytes, pkt: &Packet) -> Option<DropReason> {
        if len >= self.limit_packets as usize {
            Some(DropReason::QueueFullPackets)
        } else if bytes.get() + pkt.wire_len().get() > self.limit_bytes.get() {
            Some(DropReason::QueueFullBytes)
        } else {
            None
        }
    }
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits { limit_packets: Self::default_packets(), limit_bytes: Self::default_bytes() }
    }
}

/// What a queue has done. Updated by the queue itself on every operation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets accepted.
    pub enqueued_packets: u64,
    /// Bytes accepted.
    pub enqueued_bytes: u64,
    /// Packets handed out by `dequeue`.
    pub dequeued_packets: u64,
    /// Bytes handed out by `dequeue`.
    pub dequeued_bytes: u64,
    /// Packets ECN-marked (CE) by the queue.
    pub ce_marks: u64,
    /// Largest number of packets held at once.
    pub peak_packets: u64,
    /// Largest number of bytes held at once.
    pub peak_bytes: u64,
    /// Drops by reason.
    pub drops: DropCounters,
}

impl QueueStats {
    /// Account an accepted packet; `len`/`bytes` are the queue's size after it joined.
    #[inline]
    pub fn on_enqueue(&mut self, pkt: &Packet, len: usize, bytes: Bytes) {
        self.enqueued_packets += 1;
        self.enqueued_bytes += pkt.wire_len().get();
        self.peak_packets = self.peak_packets.max(len as u64);
        self.peak_bytes = self.peak_bytes.max(bytes.get());
    }
    /// Account a packet handed out.
    #[inline]
    pub fn on_dequeue(&mut self, pkt: &Packet) {
        self.dequeued_packets += 1;
        self.dequeued_bytes += pkt.wire_len().get();
    }
    /// Account a drop.
    #[inline]
    pub fn on_drop(&mut self, reason: DropReason) {
        self.drops.count(reason);
    }
}

/// Errors in a queue specification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A field is out of its range.
    #[error("field `{field}`: {expected}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// What was expected.
        expected: &'static str,
    },
}

/// Configuration of a queue, as written in scenario files (`kind = "fifo"`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum QueueSpec {
    /// A bounded FIFO (tail drop).
    Fifo {
        /// Limits.
        #[serde(flatten)]
        limits: QueueLimits,
    },
    /// Strict priority over `classes` FIFOs (priority 0 first; priorities beyond the last
    /// class go to the last class), each with the given limits.
    Priority {
        /// Number of classes, 1..=8.
        classes: u8,
        /// Limits of each class.
        #[serde(flatten)]
        limits: QueueLimits,
    },
    /// The LBF seed's two-stage queue: PIFO on the eligible time, then FIFO or strict priority
    /// by upper-bound budget (see [`LbfQueue`]).
    Lbf {
        /// Stage 2: `fifo` (default) or `priority`.
        #[serde(default)]
        second: LbfSecond,
        /// Width of a budget class (`second = "priority"`), default 100 us.
        #[serde(default = "default_lbf_width")]
        class_width: Duration,
        /// Number of budget classes (`second = "priority"`), default 8.
        #[serde(default = "default_lbf_classes")]
        classes: u16,
        /// Limits over both stages.
        #[serde(flatten)]
        limits: QueueLimits,
    },
    /// The LBF proof of concept's queue: slack buckets, earliest eligible first.
    LbfSlack {
        /// Width of a slack bucket, default 100 us.
        #[serde(default = "default_lbf_width")]
        bucket: Duration,
        /// Number of buckets, default 64.
        #[serde(default = "default_lbf_buckets")]
        buckets: u16,
        /// Limits over both stages.
        #[serde(flatten)]
        limits: QueueLimits,
    },
    /// LBF with dynamic priority: among eligible packets, least laxity (earliest deadline).
    LbfDynamic {
        /// Limits over both stages.
        #[serde(flatten)]
        limits: QueueLimits,
    },
    /// A FIFO marking ECN-capable packets CE above a step threshold (see [`StepCe`]); exactly
    /// one of the thresholds.
    StepCe {
        /// Mark at enqueue when the queue holds at least this many packets.
        threshold_packets: Option<u32>,
        /// Mark at enqueue when the queue holds at least this many bytes.
        threshold_bytes: Option<Bytes>,
        /// Mark at dequeue when the packet waited longer than this.
        threshold: Option<Duration>,
        /// Not-ECT packets above the threshold: `pass` or `drop`.
        #[serde(default)]
        non_ect: NonEct,
        /// Limits.
        #[serde(flatten)]
        limits: QueueLimits,
    },
    /// An HTB-like shaper (see [`Htb`]).
    Htb {
        /// Root rate.
        rate: Rate,
        /// Root bucket depth (default: 1 ms at `rate`, at least 3200 B).
        burst: Option<Bytes>,
        /// Classes by priority (none: one class at `rate`).
        #[serde(default)]
        classes: Vec<HtbClassSpec>,
        /// Limits of each class.
        #[serde(flatten)]
        limits: QueueLimits,
    },
    /// VDQ-CSAQM, the L4S scheduler of seed 001 (see [`VdqCsaqm`]).
    VdqCsaqm(VdqSpec),
    /// DualPI2 (RFC 9332 / Linux `sch_dualpi2`, see [`DualPi2`]).
    Dualpi2(Dualpi2Spec),
    /// A Per Packet Value marker around a queue (see [`PvMarking`]).
    PvMarker(PvMarkingSpec),
    /// FQ-like per-flow pacing (see [`FqPace`]).
    Fq(FqSpec),
}

/// Stage 2 of the `lbf` queue kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LbfSecond {
    /// FIFO in eligible order.
    #[default]
    Fifo,
    /// Strict priority by upper-bound budget classes.
    Priority,
}

fn default_lbf_width() -> Duration {
    latnet_units::dilated_default(Duration::from_micros(100))
}
fn default_lbf_classes() -> u16 {
    8
}
fn default_lbf_buckets() -> u16 {
    64
}

fn check_classes(n: u16, field: &'static str) -> Result<u16, SpecError> {
    if n == 0 || usize::from(n) > lbf::MAX_CLASSES {
        return Err(SpecError::OutOfRange { field, expected: "between 1 and 1024" });
    }
    Ok(n)
}

fn check_width(w: Duration, field: &'static str) -> Result<Duration, SpecError> {
    if w.is_zero() {
        return Err(SpecError::OutOfRange { field, expected: "a duration above zero" });
    }
    Ok(w)
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec::Fifo { limits: QueueLimits::default() }
    }
}

impl QueueSpec {
    /// The keys queue `kind` takes besides `kind`, for a scenario reader's "unknown field"
    /// error, which serde leaves without them where the limits are flattened into the kind;
    /// `None` for the kinds whose own spec lists its keys (and for unknown kinds).
    pub fn keys(kind: &str) -> Option<&'static [&'static str]> {
        Some(match kind {
            "fifo" | "lbf-dynamic" => &["limit_packets", "limit_bytes"],
            "priority" => &["classes", "limit_packets", "limit_bytes"],
            "lbf" => &["second", "class_width", "classes", "limit_packets", "limit_bytes"],
            "lbf-slack" => &["bucket", "buckets", "limit_packets", "limit_bytes"],
            "step-ce" => &[
                "threshold_packets",
                "threshold_bytes",
                "threshold",
                "non_ect",
                "limit_packets",
                "limit_bytes",
            ],
            "htb" => &["rate", "burst", "classes", "limit_packets", "limit_bytes"],
            _ => return None,
        })
    }

    /// Build the queue this spec describes (random streams seeded with 0; see
    /// [`Self::build_seeded`]).
    pub fn build(&self) -> Result<AnyQueue, SpecError> {
        self.build_seeded(0)
    }

    /// This spec for a queue whose clock starts `origin` before the experiment's time zero (the
    /// real-time switch, started before the senders): the reporting epochs of dual-queue AQMs
    /// move by `origin`, and one more epoch, `[0, origin)`, collects what came before; see
    /// [`AqmReport::since`]. Other queues have no epochs and are returned as they are.
    pub fn with_epochs_after(&self, origin: Duration) -> QueueSpec {
        let shift = |epochs: &[Duration]| -> Vec<Duration> {
            std::iter::once(origin).chain(epochs.iter().map(|&e| e + origin)).collect()
        };
        match self {
            _ if origin.is_zero() => self.clone(),
            QueueSpec::VdqCsaqm(s) => {
                QueueSpec::VdqCsaqm(VdqSpec { epochs: shift(&s.epochs), ..s.clone() })
            }
            QueueSpec::Dualpi2(s) => {
                QueueSpec::Dualpi2(Dualpi2Spec { epochs: shift(&s.epochs), ..s.clone() })
            }
            QueueSpec::PvMarker(s) => QueueSpec::PvMarker(PvMarkingSpec {
                queue: Box::new(s.queue.with_epochs_after(origin)),
                ..s.clone()
            }),
            _ => self.clone(),
        }
    }

    /// Build the queue this spec describes; queues that draw random numbers (DualPI2, the PV
    /// marker) seed their own ChaCha stream from `seed` (the runner passes one per port).
    pub fn build_seeded(&self, seed: u64) -> Result<AnyQueue, SpecError> {
        match self {
            QueueSpec::VdqCsaqm(s) => Ok(AnyQueue::VdqCsaqm(Box::new(VdqCsaqm::new(s)?))),
            QueueSpec::Dualpi2(s) => Ok(AnyQueue::Dualpi2(Box::new(DualPi2::new(s, seed)?))),
            QueueSpec::PvMarker(s) => Ok(AnyQueue::PvMarker(Box::new(PvMarking::new(s, seed)?))),
            QueueSpec::Fq(s) => Ok(AnyQueue::Fq(Box::new(FqPace::new(s)?))),
            QueueSpec::Fifo { limits } => Ok(AnyQueue::Fifo(Fifo::new(check_limits(*limits)?))),
            QueueSpec::Priority { classes, limits } => {
                if !(1..=8).contains(classes) {
                    return Err(SpecError::OutOfRange {
                        field: "classes",
                        expected: "between 1 and 8",
                    });
                }
                let limits = check_limits(*limits)?;
                let children =
                    (0..*classes).map(|_| AnyQueue::Fifo(Fifo::new(limits))).collect::<Vec<_>>();
                Ok(AnyQueue::Priority(StrictPriority::new(children)))
            }
            QueueSpec::Lbf { second, class_width, classes, limits } => {
                let order = match second {
                    LbfSecond::Fifo => LbfOrder::Fifo,
                    LbfSecond::Priority => LbfOrder::Budget {
                        width: check_width(*class_width, "class_width")?,
                        classes: check_classes(*classes, "classes")?,
                    },
                };
                Ok(AnyQueue::Lbf(LbfQueue::new(check_limits(*limits)?, order)))
            }
            QueueSpec::LbfSlack { bucket, buckets, limits } => {
                let order = LbfOrder::Slack {
                    width: check_width(*bucket, "bucket")?,
                    buckets: check_classes(*buckets, "buckets")?,
                };
                Ok(AnyQueue::Lbf(LbfQueue::new(check_limits(*limits)?, order)))
            }
            QueueSpec::LbfDynamic { limits } => {
                Ok(AnyQueue::Lbf(LbfQueue::new(check_limits(*limits)?, LbfOrder::Deadline)))
            }
            QueueSpec::StepCe {
                threshold_packets,
                threshold_bytes,
                threshold,
                non_ect,
                limits,
            } => {
                let t = match (threshold_packets, threshold_bytes, threshold) {
                    (Some(k), None, None) => Threshold::Packets(*k),
                    (None, Some(b), None) => Threshold::Bytes(*b),
                    (None, None, Some(d)) => Threshold::Sojourn(*d),
                    _ => {
                        return Err(SpecError::OutOfRange {
                            field: "threshold",
                            expected: "exactly one of `threshold_packets`, `threshold_bytes` \
                                       and `threshold` (sojourn time)",
                        })
                    }
                };
                Ok(AnyQueue::StepCe(StepCe::new(check_limits(*limits)?, t, *non_ect)))
            }
            QueueSpec::Htb { rate, burst, classes, limits } => {
                if rate.is_zero() {
                    return Err(SpecError::OutOfRange { field: "rate", expected: "above zero" });
                }
                if classes.len() > 8 {
                    return Err(SpecError::OutOfRange {
                        field: "classes",
                        expected: "at most 8 classes",
                    });
                }
                for c in classes {
                    if c.rate.is_zero() || c.ceil.is_some_and(|x| x < c.rate) {
                        return Err(SpecError::OutOfRange {
                            field: "classes",
                            expected: "each class with `rate` above zero and `ceil` >= `rate`",
                        });
                    }
                }
                let burst = burst.unwrap_or_else(|| htb::default_burst(*rate));
                if burst.is_zero() {
                    return Err(SpecError::OutOfRange { field: "burst", expected: "above zero" });
                }
                Ok(AnyQueue::Htb(Htb::new(*rate, burst, classes, check_limits(*limits)?)))
            }
        }
    }
}

fn check_limits(l: QueueLimits) -> Result<QueueLimits, SpecError> {
    if l.limit_packets == 0 {
        return Err(SpecError::OutOfRange { field: "limit_packets", expected: "at least 1" });
    }
    if l.limit_bytes.is_zero() {
        return Err(SpecError::OutOfRange { field: "limit_bytes", expected: "at least 1 byte" });
    }
    Ok(l)
}

/// The closed set of queues, dispatched by `match`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyQueue {
    /// See [`Fifo`].
    Fifo(Fifo),
    /// See [`StrictPriority`].
    Priority(StrictPriority),
    /// See [`LbfQueue`].
    Lbf(LbfQueue),
    /// See [`StepCe`].
    StepCe(StepCe),
    /// See [`Htb`].
    Htb(Htb),
    /// See [`VdqCsaqm`].
    VdqCsaqm(Box<VdqCsaqm>),
    /// See [`DualPi2`].
    Dualpi2(Box<DualPi2>),
    /// See [`PvMarking`].
    PvMarker(Box<PvMarking>),
    /// See [`FqPace`].
    Fq(Box<FqPace>),
}

macro_rules! dispatch {
    ($self:ident, $q:ident => $e:expr) => {
        match $self {
            AnyQueue::Fifo($q) => $e,
            AnyQueue::Priority($q) => $e,
            AnyQueue::Lbf($q) => $e,
            AnyQueue::StepCe($q) => $e,
            AnyQueue::Htb($q) => $e,
            AnyQueue::VdqCsaqm($q) => $e,
            AnyQueue::Dualpi2($q) => $e,
            AnyQueue::PvMarker($q) => $e,
            AnyQueue::Fq($q) => $e,
        }
    };
}

impl Queue for AnyQueue {
    #[inline]
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Verdict {
        dispatch!(self, q => q.enqueue(now, pkt))
    }
    #[inline]
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        dispatch!(self, q => q.dequeue(now))
    }
    #[inline]
    fn next_ready(&self, now: Time) -> Option<Time> {
        dispatch!(self, q => q.next_ready(now))
    }
    #[inline]
    fn poll_drop(&mut self) -> Option<Dropped> {
        dispatch!(self, q => q.poll_drop())
    }
    fn drain(&mut self) -> Option<Packet> {
        dispatch!(self, q => q.drain())
    }
    fn len(&self) -> usize {
        dispatch!(self, q => q.len())
    }
    fn byte_len(&self) -> Bytes {
        dispatch!(self, q => q.byte_len())
    }
    fn stats(&self) -> &QueueStats {
        dispatch!(self, q => q.stats())
    }
}

impl AnyQueue {
    /// Per-class statistics for schedulers with classes (empty for a single queue).
    pub fn class_stats(&self) -> Vec<&QueueStats> {
        match self {
            AnyQueue::Priority(p) => p.classes().iter().map(|c| c.stats()).collect(),
            AnyQueue::Htb(h) => h.class_stats(),
            AnyQueue::VdqCsaqm(q) => q.class_stats().to_vec(),
            AnyQueue::Dualpi2(q) => q.class_stats().to_vec(),
            AnyQueue::PvMarker(q) => q.inner().class_stats(),
            _ => Vec::new(),
        }
    }

    /// The report of a dual-queue AQM (per-epoch sojourn percentiles, control traces), if this
    /// queue is one (or wraps one).
    pub fn aqm_report(&self) -> Option<AqmReport> {
        self.aqm_report_with(true)
    }

    /// As [`Self::aqm_report`]; without `trace` the control trace is left out (not copied).
    pub fn aqm_report_with(&self, trace: bool) -> Option<AqmReport> {
        match self {
            AnyQueue::VdqCsaqm(q) => Some(q.report(trace)),
            AnyQueue::Dualpi2(q) => Some(q.report(trace)),
            AnyQueue::PvMarker(q) => q.inner().aqm_report_with(trace),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
