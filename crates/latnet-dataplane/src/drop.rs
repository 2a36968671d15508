//! Every drop in latnet has a typed reason, and every element counts drops in a fixed array
//! indexed by that reason (no strings, no maps on the hot path).

use std::fmt;

macro_rules! drop_reasons {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, )*) => {
        /// Why a packet was dropped.
        ///
        /// The set grows as elements land; the kebab-case name (`as_str`) is what reports print.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum DropReason {
            $( $(#[$doc])* $variant, )*
        }

        impl DropReason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            /// Number of reasons.
            pub const COUNT: usize = Self::ALL.len();

            /// The stable kebab-case name used in reports.
            pub const fn as_str(self) -> &'static str {
                match self { $(DropReason::$variant => $name,)* }
            }

            /// Its position in [`Self::ALL`] (as counters index by it).
            pub const fn index(self) -> usize {
                self as usize
            }

            /// The reason with this kebab-case name.
            pub fn from_name(name: &str) -> Option<DropReason> {
                match name { $($name => Some(DropReason::$variant),)* _ => None }
            }
        }
    };
}

drop_reasons! {
    /// The queue already held its packet limit.
    QueueFullPackets = "queue-full-packets",
    /// The queue already held its byte limit.
    QueueFullBytes = "queue-full-bytes",
    /// The headers could not be parsed.
    Malformed = "malformed",
    /// No forwarding entry for the destination.
    NoRoute = "no-route",
    /// The IP TTL / hop limit reached zero.
    TtlExpired = "ttl-expired",
    /// Lost on the link (random loss).
    LinkLoss = "link-loss",
    /// A host received a packet addressed to someone else.
    NotForHost = "not-for-host",
    /// The packet's deadline passed while it waited in a queue.
    DeadlineExpired = "deadline-expired",
    /// The packet could no longer meet its upper latency bound (dropped early).
    HopelessEarlyDrop = "hopeless-early-drop",
    /// An active queue management decision.
    AqmDrop = "aqm-drop",
    /// A policer or shaper had no tokens and no room.
    Policed = "policed",
    /// An explicit drop instruction of a classifier rule.
    RuleDrop = "rule-drop",
    /// A host received a TCP segment for no connection (and no listening flow).
    NoConnection = "no-connection",
    /// A switch's modelled processing backlog was full.
    ProcessingOverload = "processing-overload",
    /// A known IP option (packet value, large flow) that is malformed.
    MalformedOption = "malformed-option",
    /// A packet left in a queue or on a link when the run ended.
    EndOfRun = "end-of-run",
    /// A Latency-Based Forwarding block that could not be parsed.
    LbfMalformed = "lbf-malformed",
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Drop counters, one slot per [`DropReason`].
#[derive(Clone, PartialEq, Eq)]
pub struct DropCounters {
    counts: [u64; DropReason::COUNT],
}

impl Default for DropCounters {
    fn default() -> Self {
        DropCounters { counts: [0; DropReason::COUNT] }
    }
}

impl DropCounters {
    /// Count one drop.
    #[inline]
    pub fn count(&mut self, reason: DropReason) {
        self.counts[reason as usize] += 1;
    }

    /// Drops for one reason.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.counts[reason as usize]
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Add another set of counters into this one.
    pub fn merge(&mut self, other: &DropCounters) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }

    /// Non-zero counters in declaration order.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.get(r))).filter(|&(_, n)| n > 0)
    }
}

impl fmt::Debug for DropCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.nonzero().map(|(r, n)| (r.as_str(), n))).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip_and_index_all() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        for (i, &r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(DropReason::from_name(r.as_str()), Some(r));
            assert_eq!((r.index(), DropReason::ALL.get(r.index())), (i, Some(&r)));
        }
    }

    #[test]
    fn counters_count_by_reason() {
        let mut c = DropCounters::default();
        c.count(DropReason::NoRoute);
        c.count(DropReason::NoRoute);
        c.count(DropReason::Malformed);
        assert_eq!(c.get(DropReason::NoRoute), 2);
        assert_eq!(c.total(), 3);
        assert_eq!(
            c.nonzero().collect::<Vec<_>>(),
            vec![(DropReason::Malformed, 1), (DropReason::NoRoute, 2)]
        );
    }
}
