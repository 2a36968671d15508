//! Match-action tables: entries (match, priority, instructions, counters, timeouts, the
//! low-latency flag) in a slab with generation counters, and one lookup index per table whose
//! algorithm depends on the pipeline ([`Algo`]).
//!
//! | kind | key | POF baseline ([`Algo::Pof`]) | strong ([`Algo::Strong`]) |
//! |---|---|---|---|
//! | linear | the entry index (from `GotoDirect`) | direct index | direct index |
//! | exact | the fields | hash table | hash table |
//! | lpm | the fields, a prefix | 1-bit trie | hash per prefix length |
//! | mask | the fields, value/mask + priority | linear scan | tuple space search |
//!
//! Keys are assembled bit by bit for the baseline, 56 bits per step for the strong pipeline.

use super::control::ControlError;
use super::field::{Field, Space};
use super::instr::{Frame, Instruction, TableId};
use super::key::{extract_bitwise, extract_fast, Key, KEY_BITS, KEY_WORDS};
use super::lpm::{LpmHash, LpmTrie};
use super::mm::{MmLinear, MmTuple, Rank};
use latnet_units::{Duration, Time};
use std::collections::HashMap;

/// Which lookup algorithms a pipeline uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algo {
    /// Like the public DPDK POF switch: linear scan for mask match, 1-bit trie for LPM, keys
    /// assembled bit by bit.
    Pof,
    /// Tuple space search for mask match, hash per prefix length for LPM, word-wise keys.
    Strong,
}

impl Algo {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Algo::Pof => "pof",
            Algo::Strong => "strong",
        }
    }
}

/// Kinds of tables (the seed's Section 4.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TableKind {
    /// Direct index: entries are reached by `GotoDirect { table, index }`.
    Linear,
    /// Exact match on the fields.
    Exact,
    /// Longest prefix match on the fields (any width).
    Lpm,
    /// Value/mask match with priorities.
    Mask,
}

impl TableKind {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            TableKind::Linear => "linear",
            TableKind::Exact => "exact",
            TableKind::Lpm => "lpm",
            TableKind::Mask => "mask",
        }
    }
}

/// A table's definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// Identifier; packets start at table 0, gotos point to higher ids.
    pub id: TableId,
    /// Name (for rule files and reports).
    pub name: String,
    /// Kind.
    pub kind: TableKind,
    /// Match fields, in key order (none for linear tables).
    pub fields: Vec<Field>,
    /// Names of the fields (for rule files; may be empty).
    pub names: Vec<String>,
    /// Most entries the table holds.
    pub max_entries: u32,
    /// Instructions for a packet that matches no entry (default: drop).
    pub miss: Vec<Instruction>,
}

impl TableSpec {
    /// Key width in bits.
    pub fn width(&self) -> usize {
        self.fields.iter().map(|f| usize::from(f.length)).sum()
    }

    /// Check the definition.
    pub fn check(&self) -> Result<(), ControlError> {
        let bad = |m: String| ControlError::BadTable { table: self.id, message: m };
        for f in &self.fields {
            f.check().map_err(bad)?;
        }
        let w = self.width();
        if w > KEY_BITS {
            return Err(bad(format!("key of {w} bits exceeds the {KEY_BITS}-bit limit")));
        }
        match self.kind {
            TableKind::Linear if !self.fields.is_empty() => {
                return Err(bad("a linear table has no match fields".into()))
            }
            TableKind::Exact | TableKind::Lpm | TableKind::Mask if self.fields.is_empty() => {
                return Err(bad(format!("a {} table needs match fields", self.kind.as_str())))
            }
            _ => {}
        }
        if self.max_entries == 0 || self.max_entries > 1 << 24 {
            return Err(bad(format!("size must be 1..=16777216, got {}", self.max_entries)));
        }
        check_instructions(self.id, &self.miss)
    }
}

/// Check an instruction list installed in table `table`.
pub fn check_instructions(table: TableId, list: &[Instruction]) -> Result<(), ControlError> {
    for (i, ins) in list.iter().enumerate() {
        if let Some(t) = ins.goto_target() {
            if t <= table {
                return Err(ControlError::BadGoto { table, target: t });
            }
            if i + 1 != list.len() {
                return Err(ControlError::BadInstruction(
                    "a goto must be the last instruction of its list".into(),
                ));
            }
        }
        if let Instruction::SetField { field, .. } = ins {
            field.check().map_err(ControlError::BadInstruction)?;
        }
    }
    Ok(())
}

/// The match part of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// Linear tables: no match (the id is the index).
    Index,
    /// Exact match on the key.
    Exact(Key),
    /// Prefix of `len` bits.
    Prefix {
        /// Value (bits beyond `len` are cleared on install).
        value: Key,
        /// Prefix length in bits.
        len: u16,
    },
    /// Value and mask (value bits outside the mask are cleared on install).
    Masked {
        /// Value.
        value: Key,
        /// Mask.
        mask: Key,
    },
}

/// One table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Identifier in its table (for linear tables: the index).
    pub id: u32,
    /// Priority (mask tables; LPM tables use the prefix length).
    pub priority: u16,
    /// Value (masked).
    pub value: Key,
    /// Mask.
    pub mask: Key,
    /// Instructions.
    pub instructions: Vec<Instruction>,
    /// The seed's low-latency flag.
    pub low_latency: bool,
    /// Set by learning rather than by the controller.
    pub learned: bool,
    /// Remove after this long without a hit.
    pub idle_timeout: Option<Duration>,
    /// Remove this long after installation.
    pub hard_timeout: Option<Duration>,
    /// When installed.
    pub installed: Time,
    /// Last hit (or installation).
    pub last_hit: Time,
    /// Packets that hit.
    pub packets: u64,
    /// Bytes that hit.
    pub bytes: u64,
    /// `packets` at the last learning pass.
    pub(crate) learn_mark: u64,
}

impl Entry {
    /// Rank in the table's order.
    #[inline]
    pub fn rank(&self) -> Rank {
        Rank { prio: self.priority, id: self.id }
    }

    /// Does the key match?
    #[inline]
    pub fn matches(&self, key: &Key) -> bool {
        key.matches(&self.value, &self.mask, KEY_WORDS)
    }

    /// Count a hit.
    #[inline]
    pub fn hit(&mut self, now: Time, bytes: u32) {
        self.packets += 1;
        self.bytes += u64::from(bytes);
        self.last_hit = now;
    }

    /// When the entry expires, if it does.
    pub fn deadline(&self) -> Option<Time> {
        let hard = self.hard_timeout.map(|d| self.installed + d);
        let idle = self.idle_timeout.map(|d| self.last_hit + d);
        match (hard, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug, Clone)]
struct Slot {
    gen: u32,
    entry: Option<Entry>,
}

#[derive(Debug, Clone)]
enum Index {
    Linear(Vec<u32>),
    Exact(HashMap<Key, u32, foldhash::fast::FixedState>),
    MmLinear(MmLinear),
    MmTuple(MmTuple),
    LpmTrie(LpmTrie),
    LpmHash(LpmHash),
}

const NONE: u32 = u32::MAX;

/// A table: its definition, entries and lookup index.
#[derive(Debug, Clone)]
pub struct Table {
    spec: TableSpec,
    algo: Algo,
    nwords: usize,
    /// (field, position in the key)
    layout: Vec<(Field, usize)>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_id: HashMap<u32, u32>,
    index: Index,
    /// Lookups made in the table's index.
    pub lookups: u64,
    /// Packets that matched no entry.
    pub misses: u64,
}

impl Table {
    /// An empty table (the spec must have passed [`TableSpec::check`]).
    pub fn new(spec: TableSpec, algo: Algo, seed: u64) -> Table {
        let width = spec.width();
        let hasher = foldhash::fast::FixedState::with_seed(seed ^ u64::from(spec.id));
        let index = match (spec.kind, algo) {
            (TableKind::Linear, _) => Index::Linear(Vec::new()),
            (TableKind::Exact, _) => Index::Exact(HashMap::with_hasher(hasher)),
            (TableKind::Mask, Algo::Pof) => Index::MmLinear(MmLinear::default()),
            (TableKind::Mask, Algo::Strong) => Index::MmTuple(MmTuple::new(seed ^ 0x6d6d)),
            (TableKind::Lpm, Algo::Pof) => Index::LpmTrie(LpmTrie::new(width)),
            (TableKind::Lpm, Algo::Strong) => Index::LpmHash(LpmHash::new(seed ^ 0x6c70)),
        };
        let mut pos = 0;
        let layout = spec
            .fields
            .iter()
            .map(|f| {
                let p = pos;
                pos += usize::from(f.length);
                (*f, p)
            })
            .collect();
        Table {
            nwords: width.div_ceil(64).max(1),
            layout,
            spec,
            algo,
            slots: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::new(),
            index,
            lookups: 0,
            misses: 0,
        }
    }

    /// The lookup algorithms.
    pub fn algo(&self) -> Algo {
        self.algo
    }

    /// The definition.
    pub fn spec(&self) -> &TableSpec {
        &self.spec
    }

    /// Set the miss instructions (table-mod).
    pub fn set_miss(&mut self, miss: Vec<Instruction>) {
        self.spec.miss = miss;
    }

    /// Words of key in use.
    pub fn nwords(&self) -> usize {
        self.nwords
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Assemble this table's key from the frame, the pipeline's way.
    #[inline]
    pub fn extract(&self, frame: &Frame<'_>) -> Key {
        self.extract_as(frame, self.algo)
    }

    /// Assemble this table's key bit by bit ([`Algo::Pof`]) or word-wise ([`Algo::Strong`]);
    /// both give the same key.
    #[inline]
    pub fn extract_as(&self, frame: &Frame<'_>, how: Algo) -> Key {
        let mut k = Key::ZERO;
        for &(f, pos) in &self.layout {
            let src: &[u8] = match f.space {
                Space::Packet => frame.data,
                Space::Meta => &frame.meta,
            };
            let (off, len) = (usize::from(f.offset), usize::from(f.length));
            match how {
                Algo::Pof => extract_bitwise(src, off, len, &mut k, pos),
                Algo::Strong => extract_fast(src, off, len, &mut k, pos),
            }
        }
        k
    }

    /// The best entry for `key` (not for linear tables).
    #[inline]
    pub fn lookup(&mut self, key: &Key) -> Option<u32> {
        self.lookups += 1;
        let r = self.peek(key);
        if r.is_none() {
            self.misses += 1;
        }
        r
    }

    /// The best entry for `key`, without counting.
    #[inline]
    pub fn peek(&self, key: &Key) -> Option<u32> {
        match &self.index {
            Index::Linear(_) => None,
            Index::Exact(m) => m.get(key).copied(),
            Index::MmLinear(l) => l.lookup(key, self.nwords),
            Index::MmTuple(t) => t.lookup(key),
            Index::LpmTrie(t) => t.lookup(key),
            Index::LpmHash(h) => h.lookup(key),
        }
    }

    /// The entry at `index` of a linear table.
    #[inline]
    pub fn direct(&mut self, index: u32) -> Option<u32> {
        self.lookups += 1;
        let r = match &self.index {
            Index::Linear(v) => v.get(index as usize).copied().filter(|&s| s != NONE),
            _ => None,
        };
        if r.is_none() {
            self.misses += 1;
        }
        r
    }

    /// LPM verification: an entry with a longer prefix than the one in `slot` matching `key`.
    #[inline]
    pub fn lpm_longer(&self, key: &Key, slot: u32) -> Option<u32> {
        let len = usize::from(self.entry(slot)?.priority);
        match &self.index {
            Index::LpmTrie(t) => t.longer(key, slot, len),
            Index::LpmHash(h) => h.longer(key, len),
            _ => None,
        }
    }

    /// The entry in `slot`.
    #[inline]
    pub fn entry(&self, slot: u32) -> Option<&Entry> {
        self.slots.get(slot as usize).and_then(|s| s.entry.as_ref())
    }

    /// The entry in `slot`, mutably.
    #[inline]
    pub fn entry_mut(&mut self, slot: u32) -> Option<&mut Entry> {
        self.slots.get_mut(slot as usize).and_then(|s| s.entry.as_mut())
    }

    /// Generation of `slot` (changes whenever the slot is freed).
    #[inline]
    pub fn gen(&self, slot: u32) -> u32 {
        self.slots.get(slot as usize).map_or(u32::MAX, |s| s.gen)
    }

    /// Slot of the entry with this id.
    pub fn slot_of(&self, id: u32) -> Option<u32> {
        self.by_id.get(&id).copied()
    }

    /// Entries, in id order.
    pub fn entries(&self) -> Vec<&Entry> {
        let mut v: Vec<&Entry> = self.slots.iter().filter_map(|s| s.entry.as_ref()).collect();
        v.sort_by_key(|e| e.id);
        v
    }

    /// Slots in use, in id order.
    pub fn slots_by_id(&self) -> Vec<u32> {
        let mut v: Vec<(u32, u32)> = self.by_id.iter().map(|(&id, &s)| (id, s)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, s)| s).collect()
    }

    /// Normalise a match for this table: the entry's value, mask and priority.
    pub fn normalise(
        &self,
        m: &Match,
        priority: u16,
        id: u32,
    ) -> Result<(Key, Key, u16), ControlError> {
        let width = self.spec.width();
        let full = Key::prefix_mask(width);
        let t = self.spec.id;
        let bad = |s: String| ControlError::BadMatch { table: t, message: s };
        match (self.spec.kind, m) {
            (TableKind::Linear, Match::Index) => {
                if id >= self.spec.max_entries {
                    return Err(bad(format!(
                        "index {id} is beyond the linear table's {} entries",
                        self.spec.max_entries
                    )));
                }
                Ok((Key::ZERO, Key::ZERO, 0))
            }
            (TableKind::Exact, Match::Exact(k)) => {
                if k.and(&full) != *k {
                    return Err(bad(format!("value has bits beyond the {width}-bit key")));
                }
                Ok((*k, full, 0))
            }
            (TableKind::Lpm, Match::Prefix { value, len }) => {
                if usize::from(*len) > width {
                    return Err(bad(format!("prefix length {len} exceeds the {width}-bit key")));
                }
                let mask = Key::prefix_mask(usize::from(*len));
                Ok((value.and(&mask), mask, *len))
            }
            (TableKind::Mask, Match::Masked { value, mask }) => {
                let mask = mask.and(&full);
                Ok((value.and(&mask), mask, priority))
            }
            (kind, m) => Err(bad(format!(
                "a {} table cannot take a match of the form {}",
                kind.as_str(),
                match m {
                    Match::Index => "index",
                    Match::Exact(_) => "exact",
                    Match::Prefix { .. } => "prefix",
                    Match::Masked { .. } => "value/mask",
                }
            ))),
        }
    }

    /// Install an entry (already normalised); returns its slot.
    pub fn insert(&mut self, entry: Entry) -> Result<u32, ControlError> {
        let t = self.spec.id;
        if self.by_id.contains_key(&entry.id) {
            return Err(ControlError::DuplicateId { table: t, id: entry.id });
        }
        if self.by_id.len() >= self.spec.max_entries as usize {
            return Err(ControlError::TableFull { table: t, max: self.spec.max_entries });
        }
        // exact and prefix matches are unique
        let dup = match &self.index {
            Index::Exact(m) => m.get(&entry.value).copied(),
            Index::LpmTrie(t) => t.get(&entry.value, usize::from(entry.priority)),
            Index::LpmHash(h) => h.get(&entry.value, usize::from(entry.priority)),
            _ => None,
        };
        if let Some(s) = dup {
            let existing = self.entry(s).map_or(0, |e| e.id);
            return Err(ControlError::DuplicateMatch { table: t, id: entry.id, existing });
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot { gen: 0, entry: None });
                (self.slots.len() - 1) as u32
            }
        };
        match &mut self.index {
            Index::Linear(v) => {
                let i = entry.id as usize;
                if v.len() <= i {
                    v.resize(i + 1, NONE);
                }
                v[i] = slot;
            }
            Index::Exact(m) => {
                m.insert(entry.value, slot);
            }
            Index::MmLinear(l) => l.insert(entry.value, entry.mask, entry.rank(), slot),
            Index::MmTuple(tu) => tu.insert(entry.value, entry.mask, entry.rank(), slot),
            Index::LpmTrie(tr) => tr.insert(&entry.value, usize::from(entry.priority), slot),
            Index::LpmHash(h) => h.insert(&entry.value, usize::from(entry.priority), slot),
        }
        self.by_id.insert(entry.id, slot);
        self.slots[slot as usize].entry = Some(entry);
        Ok(slot)
    }

    /// Remove the entry with this id.
    pub fn remove(&mut self, id: u32) -> Option<Entry> {
        let slot = self.by_id.remove(&id)?;
        let e = self.slots[slot as usize].entry.take()?;
        match &mut self.index {
            Index::Linear(v) => {
                if let Some(x) = v.get_mut(e.id as usize) {
                    *x = NONE;
                }
            }
            Index::Exact(m) => {
                m.remove(&e.value);
            }
            Index::MmLinear(l) => l.remove(slot),
            Index::MmTuple(tu) => tu.remove(&e.value, &e.mask, slot),
            Index::LpmTrie(tr) => tr.remove(&e.value, usize::from(e.priority), slot),
            Index::LpmHash(h) => h.remove(&e.value, usize::from(e.priority)),
        }
        let s = &mut self.slots[slot as usize];
        s.gen = s.gen.wrapping_add(1);
        self.free.push(slot);
        Some(e)
    }

    /// Size of the index: mask tuples, trie nodes or prefix lengths (0 otherwise).
    pub fn index_size(&self) -> usize {
        match &self.index {
            Index::MmTuple(t) => t.tuples(),
            Index::LpmTrie(t) => t.nodes(),
            Index::LpmHash(h) => h.lengths(),
            Index::MmLinear(l) => l.len(),
            _ => 0,
        }
    }
}
