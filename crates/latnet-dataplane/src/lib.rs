//! Sans-IO data-plane elements of latnet.
//!
//! Every element here is a state machine: it takes `(now, packet)` and returns decisions
//! (enqueue, forward, drop with a reason, mark) and, where it needs time to pass, the instant it
//! next wants to be woken. No element reads a clock, sleeps, spawns or touches a socket; the
//! simulator (`latnet-sim`) and the real-time switch drive the same code.
//!
//! | module | what |
//! |---|---|
//! | [`packet`] | [`Packet`]: header bytes + virtual payload length + per-run [`Meta`] |
//! | [`classifier`] | match-action tables (POF-style fields), two pipelines, the Fast-Forwarding Path |
//! | [`drop`] | [`DropReason`] and [`DropCounters`] (fixed array indexed by reason) |
//! | [`queue`] | the [`Queue`] trait, [`Fifo`], [`StrictPriority`], [`LbfQueue`], [`StepCe`] (ECN step marking), [`Htb`] (shaper), [`AnyQueue`], [`QueueSpec`] |
//! | [`ecn`] | CE marking of real header bytes |
//!
//! Priorities: 0 is the highest, 7 is best effort; on the wire priority `p` is DSCP `CS(7-p)`
//! (see [`packet::priority_from_dscp`]).

pub mod classifier;
pub mod drop;
pub mod ecn;
pub mod packet;
pub mod queue;

pub use drop::{DropCounters, DropReason};
pub use packet::{FlowId, Meta, Packet, Priority, BEST_EFFORT};
pub use queue::{
    AnyQueue, Dropped, Fifo, Htb, LbfOrder, LbfQueue, Queue, QueueLimits, QueueSpec, QueueStats,
    StepCe, StrictPriority, Verdict,
};
