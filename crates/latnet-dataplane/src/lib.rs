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
//! | [`drop`](mod@drop) | [`DropReason`] and [`DropCounters`] (fixed array indexed by reason) |
//! | [`queue`] | the [`Queue`] trait, [`Fifo`], [`StrictPriority`], [`LbfQueue`], [`StepCe`] (ECN step marking), [`Htb`] (shaper), [`AnyQueue`], [`QueueSpec`] |
//! | [`ecn`] | CE marking of real header bytes |
//! | [`queue::vdq`], [`queue::dualpi2`] | the L4S AQMs: [`VdqCsaqm`] (seed 001) and [`DualPi2`] (RFC 9332, Linux) |
//! | [`ppv`], [`queue::pv_mark`] | Per Packet Value: throughput-value functions, the edge [`PvMarker`], [`PvMarking`] |
//! | [`flow_counter`] | the large-flow counter of switch-assisted pacing (seed 003) |
//! | [`ratio`] | [`Ratio`]: exact fractions for configuration |
//!
//! Priorities: 0 is the highest, 7 is best effort; on the wire priority `p` is DSCP `CS(7-p)`
//! (see [`packet::priority_from_dscp`]).

pub mod classifier;
pub mod drop;
pub mod ecn;
pub mod flow_counter;
pub mod packet;
pub mod ppv;
pub mod queue;
pub mod ratio;

pub use drop::{DropCounters, DropReason};
pub use flow_counter::{CounterAction, CounterSpec, LargeFlowCounter};
pub use packet::{FlowId, Meta, Packet, Priority, BEST_EFFORT};
pub use ppv::{PvMarker, Tvf};
pub use queue::{
    AnyQueue, Dropped, DualPi2, Fifo, Htb, LbfOrder, LbfQueue, PvMarking, Queue, QueueLimits,
    QueueSpec, QueueStats, StepCe, StrictPriority, VdqCsaqm, Verdict,
};
pub use ratio::Ratio;
