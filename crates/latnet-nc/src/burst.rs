//! Burst increase along a path: how much burstier a flow is when it reaches its `h`-th hop.
//!
//! A server that delays every bit of a `(r, b)` flow by at most `d` outputs a `(r, b + r d)`
//! flow (Le Boudec & Thiran, Thm. 1.4.3). Chameleon charges each hop with the delay budget `D`
//! *allocated* to the queue the flow used there (not the current bound, which may grow later),
//! so a flow's bucket at hop `h` is `(r, b + r Σ_{i<h} D_i)` and never has to be revised.

use crate::curves::TokenBucket;
use crate::NcError;
use latnet_units::Duration;
use std::fmt;
use std::str::FromStr;

/// How a flow's burst grows from hop to hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BurstModel {
    /// No growth: `(r, b)` at every hop. Not safe in general; kept to compare with Silo's paper.
    None,
    /// `(r, b + r × Σ budgets of the earlier hops)`: what the network can actually do.
    #[default]
    Real,
    /// `(r, b + r × deadline)` at every hop: safe without knowing the path.
    WorstCase,
}

impl BurstModel {
    /// The flow's bucket at a hop whose earlier hops have budgets summing to `earlier`.
    pub fn at_hop(
        self,
        tb: TokenBucket,
        earlier: Duration,
        deadline: Duration,
    ) -> Result<TokenBucket, NcError> {
        match self {
            BurstModel::None => Ok(tb),
            BurstModel::Real => tb.delayed(earlier),
            BurstModel::WorstCase => tb.delayed(deadline),
        }
    }

    /// Stable name.
    pub const fn as_str(self) -> &'static str {
        match self {
            BurstModel::None => "none",
            BurstModel::Real => "real",
            BurstModel::WorstCase => "worst-case",
        }
    }
}

impl fmt::Display for BurstModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BurstModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(BurstModel::None),
            "real" => Ok(BurstModel::Real),
            "worst-case" | "worst" => Ok(BurstModel::WorstCase),
            _ => Err(format!("unknown burst model {s:?} (expected none, real or worst-case)")),
        }
    }
}
