//! The match-action classifier of the composite-pipeline seed (002): POF-style fields and
//! tables, control messages with the low-latency flag, two pipelines (a POF-style baseline
//! and a strong one), and the Fast-Forwarding Path ([`ffp::Composite`]).
//!
//! | module | what |
//! |---|---|
//! | [`key`] | keys of up to 384 bits; bitwise (POF) and word-wise extraction |
//! | [`field`] | `{offset, length}` fields over packet or metadata; named fields; value parsing |
//! | [`instr`] | instructions (goto, goto-direct, set-field, set-queue, push / pop tag, output, drop) |
//! | [`table`] | tables (linear, exact, LPM, mask), entries with counters, timeouts, low-latency flag |
//! | [`mm`], [`lpm`] | mask-match (linear scan, tuple space) and LPM (1-bit trie, hash per length) indexes |
//! | [`control`] | typed control messages: table-mod, flow-mod, statistics; errors |
//! | [`text`] | the JSON / TOML form of control messages, validated with clear errors |
//! | [`pipeline`] | the plain pipeline, timeouts, low-latency learning |
//! | [`ffp`] | the composite pipeline: per-table LUTs, verification, invalidation |
//! | [`workload`] | the seed's three scenarios (IPv6 ACL, SEADP, WSM) as rule sets and traffic |
//!
//! The plain and the composite pipeline make the same decision for every packet under any
//! sequence of control messages; `tests/classifier.rs` checks that on random tables, rules,
//! churn and packets.

pub mod control;
pub mod ffp;
pub mod field;
pub mod instr;
pub mod key;
pub mod lpm;
pub mod mm;
pub mod pipeline;
pub mod table;
pub mod text;
pub mod workload;

pub use control::{Control, ControlError, FlowCommand, FlowMod, Reply, StatsRequest, TableMod};
pub use ffp::{Composite, FfpConfig};
pub use field::Field;
pub use instr::{Instruction, TableId};
pub use key::Key;
pub use pipeline::{Decision, DropCause, LearnPolicy, Pipeline, Verdict};
pub use table::{Algo, Match, TableKind, TableSpec};

use latnet_units::Time;

/// A plain or a composite pipeline, chosen at run time.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Classifier {
    /// The match-action pipeline alone.
    Plain(Pipeline),
    /// The pipeline with the Fast-Forwarding Path.
    Composite(Composite),
}

impl Classifier {
    /// A classifier with `algo`'s lookups, with or without the fast path.
    pub fn new(algo: Algo, ffp: Option<FfpConfig>, seed: u64) -> Classifier {
        match ffp {
            Some(cfg) => Classifier::Composite(Composite::new(algo, seed, cfg)),
            None => Classifier::Plain(Pipeline::new(algo, seed)),
        }
    }

    /// Apply a control message.
    pub fn apply(&mut self, now: Time, msg: &Control) -> Result<Reply, ControlError> {
        match self {
            Classifier::Plain(p) => p.apply(now, msg),
            Classifier::Composite(c) => c.apply(now, msg),
        }
    }

    /// Classify one packet.
    #[inline]
    pub fn process(
        &mut self,
        now: Time,
        data: &mut Vec<u8>,
        in_port: u16,
        wire_len: u32,
    ) -> Decision {
        match self {
            Classifier::Plain(p) => p.process(now, data, in_port, wire_len),
            Classifier::Composite(c) => c.process(now, data, in_port, wire_len),
        }
    }

    /// Earliest instant an entry may expire.
    pub fn next_expiry(&self) -> Option<Time> {
        match self {
            Classifier::Plain(p) => p.next_expiry(),
            Classifier::Composite(c) => c.next_expiry(),
        }
    }

    /// Remove expired entries.
    pub fn expire(&mut self, now: Time) -> Vec<(TableId, u32)> {
        match self {
            Classifier::Plain(p) => p.expire(now),
            Classifier::Composite(c) => c.expire(now),
        }
    }

    /// Low-latency learning.
    pub fn learn(&mut self, policy: &LearnPolicy) -> usize {
        match self {
            Classifier::Plain(p) => p.learn(policy),
            Classifier::Composite(c) => c.learn(policy),
        }
    }

    /// Counters of every entry.
    pub fn flow_stats(&self) -> Vec<control::FlowStats> {
        match self {
            Classifier::Plain(p) => p.flow_stats(),
            Classifier::Composite(c) => c.flow_stats(),
        }
    }
}
