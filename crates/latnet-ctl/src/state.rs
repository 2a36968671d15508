//! Reservation state of every port and the per-queue admission check (paper §3.2.2, §3.2.3).
//!
//! Per queue the state holds integer aggregates only: the token-bucket sum of all its flows
//! (what lower queues' leftover service subtracts) and one sum per input link (what input-link
//! shaping bounds by `C t + L`); flows that start on this port (a host's uplink) are summed
//! apart and never shaped. Adding and removing a flow are integer additions and subtractions,
//! so removal restores the previous state exactly. The arrival curve of each queue and the
//! leftover service of each queue are caches rebuilt from the aggregates on every change.
//!
//! [`PortState::admits`] answers "can this flow bucket join queue `q` from this input?": it
//! checks `q` (new arrival curve, same service) and every non-empty `j > q` (same arrival
//! curve, service reduced by the flow's bucket), delay and backlog strictly within budget and
//! buffer.

use latnet_nc::{
    within, Bounds, ConcaveSum, NcError, Piece, QueueLimits, RateLatency, TokenBucket,
};

/// Key of traffic that starts on the port (not shaped).
pub const LOCAL: u32 = u32::MAX;

/// The aggregate arriving at a queue from one input link (or [`LOCAL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputAgg {
    /// The input port (the upstream egress port), or [`LOCAL`].
    pub key: u32,
    /// Rate of that input link (bit/s); 0 for [`LOCAL`] (not shaped).
    pub link_rate: u128,
    /// Sum of the flows' buckets at this hop.
    pub tb: TokenBucket,
}

/// One priority queue of a port.
#[derive(Debug, Clone)]
pub struct QueueState {
    /// All flows of the queue.
    pub agg: TokenBucket,
    /// Per input, sorted by key; entries that drop to zero are removed.
    pub inputs: Vec<InputAgg>,
    /// Number of flow hops reserved here.
    pub flows: u32,
    curve: ConcaveSum,
}

/// How arrival pieces are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shaping {
    /// Shape inputs by their link rate.
    pub enabled: bool,
    /// `L_max` in nanobits.
    pub l_max_nb: u128,
}

impl Shaping {
    /// The arrival piece of an input aggregate.
    pub fn piece(self, key: u32, link_rate: u128, tb: TokenBucket) -> Piece {
        if self.enabled && key != LOCAL && link_rate > 0 {
            Piece::shaped(tb, link_rate, self.l_max_nb)
        } else {
            Piece::bucket(tb)
        }
    }
}

/// All queues of one egress port.
#[derive(Debug, Clone)]
pub struct PortState {
    base: RateLatency,
    limits: Vec<QueueLimits>,
    queues: Vec<QueueState>,
    betas: Vec<Option<RateLatency>>,
    shaping: Shaping,
}

/// What one queue holds, for equality checks and reports (caches excluded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// Aggregate of all flows.
    pub agg: TokenBucket,
    /// Per-input aggregates.
    pub inputs: Vec<InputAgg>,
    /// Flow count.
    pub flows: u32,
}

impl PortState {
    /// An empty port of service `base` with these queues.
    pub fn new(base: RateLatency, limits: Vec<QueueLimits>, shaping: Shaping) -> PortState {
        let n = limits.len();
        let queues = (0..n)
            .map(|_| QueueState {
                agg: TokenBucket::ZERO,
                inputs: Vec::new(),
                flows: 0,
                curve: ConcaveSum::default(),
            })
            .collect();
        let mut s = PortState { base, limits, queues, betas: vec![Some(base); n], shaping };
        // an empty port: every queue gets the full base service
        s.betas = vec![Some(base); n];
        s
    }

    /// Number of queues.
    pub fn len(&self) -> usize {
        self.queues.len()
    }

    /// True if the port has no queue.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Budget and buffer of queue `q`.
    pub fn limits(&self, q: usize) -> QueueLimits {
        self.limits[q]
    }

    /// Queue `q`.
    pub fn queue(&self, q: usize) -> &QueueState {
        &self.queues[q]
    }

    /// Total reserved rate (bit/s).
    pub fn reserved_rate(&self) -> u128 {
        self.queues.iter().map(|q| q.agg.rate).sum()
    }

    /// The current bounds of queue `q` (`None`: unbounded or empty with no service).
    pub fn bounds(&self, q: usize) -> Result<Option<Bounds>, NcError> {
        match self.betas[q] {
            Some(b) => self.queues[q].curve.bounds(b),
            None => Ok(None),
        }
    }

    /// Snapshot of every queue.
    pub fn snapshot(&self) -> Vec<QueueSnapshot> {
        self.queues
            .iter()
            .map(|q| QueueSnapshot { agg: q.agg, inputs: q.inputs.clone(), flows: q.flows })
            .collect()
    }

    /// Does every queue that holds flows keep them within its budget and buffer? (What each
    /// admission checked, for a port whose reservations were not built by admissions.)
    pub fn holds(&self) -> Result<bool, NcError> {
        for (q, queue) in self.queues.iter().enumerate() {
            if queue.flows == 0 {
                continue;
            }
            match self.bounds(q)? {
                Some(b) if within(&b, self.limits[q])? => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Can a flow whose bucket at this hop is `tb` join queue `q` from input `key` (an input
    /// link of rate `link_rate`, or [`LOCAL`])?
    pub fn admits(
        &self,
        q: usize,
        key: u32,
        link_rate: u128,
        tb: TokenBucket,
    ) -> Result<bool, NcError> {
        let Some(beta) = self.betas[q] else { return Ok(false) };
        let queue = &self.queues[q];
        let (old, new) = match queue.inputs.binary_search_by_key(&key, |i| i.key) {
            Ok(i) => {
                let cur = queue.inputs[i];
                let old = self.shaping.piece(key, cur.link_rate, cur.tb);
                (Some(old), self.shaping.piece(key, cur.link_rate, cur.tb.checked_add(tb)?))
            }
            Err(_) => (None, self.shaping.piece(key, link_rate, tb)),
        };
        match queue.curve.bounds_replacing(key, old, new, beta)? {
            Some(b) if within(&b, self.limits[q])? => {}
            _ => return Ok(false),
        }
        for j in q + 1..self.queues.len() {
            let lower = &self.queues[j];
            if lower.flows == 0 {
                continue;
            }
            let Some(bj) = self.betas[j] else { return Ok(false) };
            let Some(bj) = bj.leftover(tb)? else { return Ok(false) };
            match lower.curve.bounds(bj)? {
                Some(b) if within(&b, self.limits[j])? => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Reserve `tb` in queue `q` from input `key`.
    pub fn add(
        &mut self,
        q: usize,
        key: u32,
        link_rate: u128,
        tb: TokenBucket,
    ) -> Result<(), NcError> {
        let queue = &mut self.queues[q];
        queue.agg = queue.agg.checked_add(tb)?;
        match queue.inputs.binary_search_by_key(&key, |i| i.key) {
            Ok(i) => queue.inputs[i].tb = queue.inputs[i].tb.checked_add(tb)?,
            Err(i) => queue.inputs.insert(i, InputAgg { key, link_rate, tb }),
        }
        queue.flows += 1;
        self.refresh(q)
    }

    /// Release `tb` from queue `q`, input `key` (exactly what [`PortState::add`] reserved).
    pub fn remove(&mut self, q: usize, key: u32, tb: TokenBucket) -> Result<(), NcError> {
        let queue = &mut self.queues[q];
        let i = queue
            .inputs
            .binary_search_by_key(&key, |i| i.key)
            .map_err(|_| NcError::Inconsistent)?;
        queue.agg = queue.agg.checked_sub(tb)?;
        let left = queue.inputs[i].tb.checked_sub(tb)?;
        if left == TokenBucket::ZERO {
            queue.inputs.remove(i);
        } else {
            queue.inputs[i].tb = left;
        }
        queue.flows = queue.flows.checked_sub(1).ok_or(NcError::Inconsistent)?;
        self.refresh(q)
    }

    fn refresh(&mut self, q: usize) -> Result<(), NcError> {
        let shaping = self.shaping;
        let queue = &mut self.queues[q];
        queue.curve = ConcaveSum::new(
            queue.inputs.iter().map(|i| (i.key, shaping.piece(i.key, i.link_rate, i.tb))),
        )?;
        let aggs: Vec<_> = self.queues.iter().map(|q| q.agg).collect();
        self.betas = latnet_nc::leftovers(self.base, &aggs)?;
        Ok(())
    }
}
