//! Mask-match indexes: the POF baseline's linear scan and the strong pipeline's
//! priority-sorted tuple space search.
//!
//! Both return the best matching entry in the same total order: higher priority first, then
//! the lower entry id (see [`Rank`]).

use super::key::Key;
use std::collections::HashMap;

/// Order of entries: higher `prio` wins, then lower `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// Priority (for LPM tables: the prefix length).
    pub prio: u16,
    /// Entry id.
    pub id: u32,
}

impl Rank {
    /// Does `self` win over `other`?
    #[inline]
    pub fn beats(&self, other: &Rank) -> bool {
        self.prio > other.prio || (self.prio == other.prio && self.id < other.id)
    }
}

#[derive(Debug, Clone)]
struct Row {
    value: Key,
    mask: Key,
    rank: Rank,
    slot: u32,
}

/// Linear scan in rank order, as the public DPDK POF switch does: O(n) per lookup.
#[derive(Debug, Clone, Default)]
pub struct MmLinear {
    rows: Vec<Row>,
}

impl MmLinear {
    /// Add an entry.
    pub fn insert(&mut self, value: Key, mask: Key, rank: Rank, slot: u32) {
        let pos = self.rows.partition_point(|r| r.rank.beats(&rank));
        self.rows.insert(pos, Row { value, mask, rank, slot });
    }

    /// Remove the entry in `slot`.
    pub fn remove(&mut self, slot: u32) {
        if let Some(p) = self.rows.iter().position(|r| r.slot == slot) {
            self.rows.remove(p);
        }
    }

    /// The best entry matching `key`.
    #[inline]
    pub fn lookup(&self, key: &Key, nwords: usize) -> Option<u32> {
        self.rows.iter().find(|r| key.matches(&r.value, &r.mask, nwords)).map(|r| r.slot)
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

#[derive(Debug, Clone)]
struct Tuple {
    mask: Key,
    max_prio: u16,
    /// masked value -> entries with that value, best first
    map: FastMap<Key, Vec<(Rank, u32)>>,
}

/// Tuple space search: one hash table per distinct mask, searched in order of the best
/// priority each holds, stopping as soon as no remaining tuple can beat the best match.
#[derive(Debug, Clone)]
pub struct MmTuple {
    tuples: Vec<Tuple>,
    hasher: foldhash::fast::FixedState,
}

impl MmTuple {
    /// An empty index hashing with `seed`.
    pub fn new(seed: u64) -> MmTuple {
        MmTuple { tuples: Vec::new(), hasher: foldhash::fast::FixedState::with_seed(seed) }
    }

    fn resort(&mut self) {
        self.tuples.sort_by(|a, b| b.max_prio.cmp(&a.max_prio).then(a.mask.cmp(&b.mask)));
    }

    /// Add an entry.
    pub fn insert(&mut self, value: Key, mask: Key, rank: Rank, slot: u32) {
        let t = match self.tuples.iter().position(|t| t.mask == mask) {
            Some(i) => i,
            None => {
                self.tuples.push(Tuple {
                    mask,
                    max_prio: 0,
                    map: FastMap::with_hasher(self.hasher),
                });
                self.tuples.len() - 1
            }
        };
        let tuple = &mut self.tuples[t];
        let list = tuple.map.entry(value).or_default();
        let pos = list.partition_point(|(r, _)| r.beats(&rank));
        list.insert(pos, (rank, slot));
        tuple.max_prio = tuple.max_prio.max(rank.prio);
        self.resort();
    }

    /// Remove the entry in `slot` (with this value and mask).
    pub fn remove(&mut self, value: &Key, mask: &Key, slot: u32) {
        let Some(t) = self.tuples.iter().position(|t| t.mask == *mask) else { return };
        let tuple = &mut self.tuples[t];
        if let Some(list) = tuple.map.get_mut(value) {
            list.retain(|&(_, s)| s != slot);
            if list.is_empty() {
                tuple.map.remove(value);
            }
        }
        if tuple.map.is_empty() {
            self.tuples.remove(t);
        } else {
            tuple.max_prio = tuple
                .map
                .values()
                .filter_map(|l| l.first())
                .map(|(r, _)| r.prio)
                .max()
                .unwrap_or(0);
        }
        self.resort();
    }

    /// The best entry matching `key`.
    #[inline]
    pub fn lookup(&self, key: &Key) -> Option<u32> {
        let mut best: Option<(Rank, u32)> = None;
        for t in &self.tuples {
            if let Some((b, _)) = best {
                if t.max_prio < b.prio {
                    break;
                }
            }
            if let Some(list) = t.map.get(&key.and(&t.mask)) {
                if let Some(&(r, s)) = list.first() {
                    if best.is_none_or(|(b, _)| r.beats(&b)) {
                        best = Some((r, s));
                    }
                }
            }
        }
        best.map(|(_, s)| s)
    }

    /// Number of tuples (distinct masks).
    pub fn tuples(&self) -> usize {
        self.tuples.len()
    }
}
