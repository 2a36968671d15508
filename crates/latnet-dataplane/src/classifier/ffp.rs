//! The composite pipeline: the seed's Fast-Forwarding Path (FFP) in front of a match-action
//! pipeline (Section 4.2), with runtime updating and verification (Section 4.2.3).
//!
//! * Every packet starts with its low-latency flag TRUE; hitting a normal entry (or missing a
//!   table) turns it FALSE, after which the packet is processed by the plain pipeline only.
//! * Each mask-match and LPM table has a lookup table (LUT) in the FFP: a hash table keyed on
//!   that table's match fields only (the key the stage extracts anyway). Exact-match and
//!   linear tables are shared with the pipeline (their lookup is already O(1)).
//! * At a stage with a LUT, a packet whose flag is still TRUE looks its key up in the LUT. A
//!   usable record gives the entry at once; otherwise the packet continues in the pipeline *at
//!   that stage* (not from the start), and if the entry it hits there is low-latency, a record
//!   `key -> entry` is inserted.
//! * Records are verified, as in the seed: when an entry `n` is added that beats a cached
//!   low-latency entry `r` (higher priority, or a longer prefix) and intersects it
//!   (`(v1 ^ v2) & (m1 & m2) == 0`), `n` joins `r`'s `extra_rules`; a record of `r` checks the
//!   extra rules it has not yet checked before it is trusted — by walking the list, or by one
//!   lookup in the table when that is cheaper (the seed's `T_v = min{t_list, t_pipeline}`).
//!   If the packet matches one of them, the record is deleted (a normal entry) or replaced
//!   (a low-latency entry); otherwise the record is confirmed (its `extra_rule_num` drops to
//!   0). For LPM tables an added longer prefix under `r` sets `r`'s verify flag instead, and
//!   verification resumes the trie walk at `r`'s node (the strong pipeline probes only the
//!   longer prefix lengths).
//! * Deleted entries (flow-mod delete, timeouts), entries modified to normal, and slots reused
//!   by other entries make their records stale; stale records are dropped when found
//!   (generation counters), so deletions cost nothing on the control path.
//!
//! Representation: the seed keeps `extra_rules` per LUT record. Here each cached entry keeps
//! one append-only list and each record a watermark of how much of it the record has
//! verified; `extra_rule_num` of a record is `len - watermark`. The behaviour is the same; an
//! add costs one append per intersecting cached entry instead of one per record. A list longer
//! than [`FfpConfig::max_extra_rules`] resets the entry's records.
//!
//! Bounded memory against hostile traffic: each LUT is a set-associative array of fixed
//! capacity (4 ways per set, least recently used way evicted), indexed by a keyed hash
//! (foldhash with a per-pipeline seed), so no traffic can grow it or aim at one set without
//! knowing the key.

use super::control::{Control, ControlError, FlowStats, LutStats, Reply, StatsRequest};
use super::instr::{Next, TableId};
use super::key::Key;
use super::pipeline::{
    new_frame, run_stage, Change, Decision, DropCause, LearnPolicy, Pipeline, StageState,
};
use super::table::{Algo, Table, TableKind};
use latnet_units::Time;
use std::hash::BuildHasher;

/// Settings of the fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FfpConfig {
    /// Records per LUT (rounded up to whole sets of 4 ways).
    pub lut_capacity: usize,
    /// An entry whose extra-rule list grows beyond this many rules has its records reset.
    pub max_extra_rules: usize,
    /// The fast path assembles its keys word-wise, whatever the pipeline does (the key is the
    /// same, and a miss hands it to the pipeline, which does not extract it again). `false`
    /// makes it use the pipeline's own key assembly (bit by bit for the POF baseline).
    pub fast_keys: bool,
}

impl Default for FfpConfig {
    fn default() -> Self {
        FfpConfig { lut_capacity: 16_384, max_extra_rules: 64, fast_keys: true }
    }
}

const WAYS: usize = 4;

#[derive(Debug, Clone, Copy, Default)]
struct Rec {
    slot: u32,
    gen: u32,
    epoch: u32,
    /// mask tables: extra rules verified; LPM tables: verify sequence confirmed
    mark: u32,
}

#[derive(Debug, Clone)]
struct Lut {
    sets: usize,
    hasher: foldhash::fast::FixedState,
    nwords: usize,
    tags: Vec<u64>,
    keys: Vec<Key>,
    recs: Vec<Rec>,
    stamps: Vec<u64>,
    clock: u64,
    len: usize,
}

impl Lut {
    fn new(capacity: usize, nwords: usize, seed: u64) -> Lut {
        let sets = capacity.div_ceil(WAYS).max(1);
        let n = sets * WAYS;
        Lut {
            sets,
            hasher: foldhash::fast::FixedState::with_seed(seed),
            nwords,
            tags: vec![0; n],
            keys: vec![Key::ZERO; n],
            recs: vec![Rec::default(); n],
            stamps: vec![0; n],
            clock: 0,
            len: 0,
        }
    }

    #[inline]
    fn hash(&self, key: &Key) -> u64 {
        self.hasher.hash_one(&key.w[..self.nwords]) | 1
    }

    /// First way of `h`'s set: the high bits of `h` scaled to the number of sets (any number,
    /// not only powers of two, so the capacity is the one configured).
    #[inline]
    fn base(&self, h: u64) -> usize {
        ((u128::from(h) * self.sets as u128) >> 64) as usize * WAYS
    }

    #[inline]
    fn find(&mut self, h: u64, key: &Key) -> Option<usize> {
        let base = self.base(h);
        for i in base..base + WAYS {
            if self.tags[i] == h && self.keys[i].w[..self.nwords] == key.w[..self.nwords] {
                self.clock += 1;
                self.stamps[i] = self.clock;
                return Some(i);
            }
        }
        None
    }

    /// Insert (or overwrite); returns whether a record was evicted.
    fn insert(&mut self, h: u64, key: &Key, rec: Rec) -> bool {
        let base = self.base(h);
        let mut victim = base;
        let mut evicted = false;
        let mut found = false;
        for i in base..base + WAYS {
            if self.tags[i] == h && self.keys[i].w[..self.nwords] == key.w[..self.nwords] {
                victim = i;
                found = true;
                break;
            }
        }
        if !found {
            match (base..base + WAYS).find(|&i| self.tags[i] == 0) {
                Some(i) => {
                    victim = i;
                    self.len += 1;
                }
                None => {
                    victim = (base..base + WAYS).min_by_key(|&i| self.stamps[i]).unwrap_or(base);
                    evicted = true;
                }
            }
        }
        self.clock += 1;
        self.tags[victim] = h;
        self.keys[victim] = *key;
        self.recs[victim] = rec;
        self.stamps[victim] = self.clock;
        evicted
    }

    fn remove(&mut self, i: usize) {
        if self.tags[i] != 0 {
            self.tags[i] = 0;
            self.len -= 1;
        }
    }
}

#[derive(Debug, Clone, Default)]
struct RuleFfp {
    gen: u32,
    cached: bool,
    epoch: u32,
    extras: Vec<(u32, u32)>,
    vseq: u32,
}

#[derive(Debug, Clone)]
struct TableFfp {
    kind: TableKind,
    lut: Lut,
    rules: Vec<RuleFfp>,
    cached: Vec<u32>,
    stats: LutStats,
}

impl TableFfp {
    fn new(t: &Table, cfg: &FfpConfig, seed: u64) -> Option<TableFfp> {
        let kind = t.spec().kind;
        if !matches!(kind, TableKind::Mask | TableKind::Lpm) {
            return None;
        }
        let lut = Lut::new(cfg.lut_capacity, t.nwords(), seed ^ (u64::from(t.spec().id) << 40));
        let stats =
            LutStats { table: t.spec().id, capacity: lut.sets * WAYS, ..LutStats::default() };
        Some(TableFfp { kind, lut, rules: Vec::new(), cached: Vec::new(), stats })
    }

    fn rule(&mut self, slot: u32, gen: u32) -> &mut RuleFfp {
        let i = slot as usize;
        if self.rules.len() <= i {
            self.rules.resize_with(i + 1, RuleFfp::default);
        }
        let r = &mut self.rules[i];
        if r.gen != gen {
            r.gen = gen;
            r.epoch = r.epoch.wrapping_add(1);
            r.extras.clear();
            r.vseq = 0;
        }
        r
    }

    /// A record for `key -> slot` (a low-latency entry just hit by a low-latency packet).
    fn record(&mut self, tab: &Table, h: u64, key: &Key, slot: u32) {
        let gen = tab.gen(slot);
        let kind = self.kind;
        let r = self.rule(slot, gen);
        let rec = Rec {
            slot,
            gen,
            epoch: r.epoch,
            mark: match kind {
                TableKind::Lpm => r.vseq,
                _ => r.extras.len() as u32,
            },
        };
        let newly = !r.cached;
        r.cached = true;
        if newly {
            self.cached.push(slot);
        }
        self.stats.inserts += 1;
        if self.lut.insert(h, key, rec) {
            self.stats.evictions += 1;
        }
    }

    /// Screen an added entry against the cached low-latency entries (Section 4.2.3).
    fn screen(&mut self, tab: &Table, slot: u32, max_extra: usize) {
        let Some(n) = tab.entry(slot) else { return };
        let (nrank, nval, nmask) = (n.rank(), n.value, n.mask);
        let ngen = tab.gen(slot);
        let mut i = 0;
        while i < self.cached.len() {
            let c = self.cached[i];
            let live = self.rules.get(c as usize).is_some_and(|r| r.gen == tab.gen(c))
                && tab.entry(c).is_some();
            if !live {
                if let Some(r) = self.rules.get_mut(c as usize) {
                    r.cached = false;
                }
                self.cached.swap_remove(i);
                continue;
            }
            i += 1;
            if c == slot {
                continue;
            }
            let Some(e) = tab.entry(c) else { continue };
            if !nrank.beats(&e.rank()) || !Key::intersects(&nval, &nmask, &e.value, &e.mask) {
                continue;
            }
            let r = &mut self.rules[c as usize];
            match self.kind {
                TableKind::Lpm => r.vseq = r.vseq.wrapping_add(1),
                _ => {
                    r.extras.push((slot, ngen));
                    if r.extras.len() > max_extra {
                        r.epoch = r.epoch.wrapping_add(1);
                        r.extras.clear();
                    }
                }
            }
        }
    }

    /// The entry for `key` at this stage: from the LUT if it has a usable record, else from
    /// the table (recording a low-latency hit).
    #[inline]
    fn resolve(&mut self, tab: &mut Table, key: &Key) -> Option<u32> {
        let h = self.lut.hash(key);
        if let Some(i) = self.lut.find(h, key) {
            let rec = self.lut.recs[i];
            let usable = tab.gen(rec.slot) == rec.gen
                && tab.entry(rec.slot).is_some_and(|e| e.low_latency)
                && self
                    .rules
                    .get(rec.slot as usize)
                    .is_some_and(|r| r.gen == rec.gen && r.epoch == rec.epoch);
            if usable {
                if let Some(s) = self.use_record(tab, i, rec, key, h) {
                    return Some(s);
                }
            } else {
                self.lut.remove(i);
                self.stats.stale += 1;
            }
        }
        self.stats.misses += 1;
        let hit = tab.lookup(key);
        if let Some(s) = hit {
            if tab.entry(s).is_some_and(|e| e.low_latency) {
                self.record(tab, h, key, s);
            }
        }
        hit
    }

    /// A record that is not stale: trust it, or verify it first.
    #[inline]
    fn use_record(
        &mut self,
        tab: &mut Table,
        i: usize,
        rec: Rec,
        key: &Key,
        h: u64,
    ) -> Option<u32> {
        let slot = rec.slot;
        let r = &self.rules[slot as usize];
        let best = match self.kind {
            TableKind::Lpm => {
                if rec.mark == r.vseq {
                    self.stats.hits += 1;
                    return Some(slot);
                }
                self.stats.verifications += 1;
                tab.lpm_longer(key, slot)
            }
            _ => {
                let from = rec.mark as usize;
                if from >= r.extras.len() {
                    self.stats.hits += 1;
                    return Some(slot);
                }
                self.stats.verifications += 1;
                // the seed's T_v = min{t_list, t_pipeline}: walk the list unless one table
                // lookup is expected to be cheaper
                let pending = r.extras.len() - from;
                let lookup_cost = match tab.algo() {
                    Algo::Pof => tab.len() / 2,
                    Algo::Strong => 4 * tab.index_size(),
                };
                let found = if pending > lookup_cost.max(4) {
                    tab.lookup(key).filter(|&b| b != slot)
                } else {
                    let mut best: Option<(super::mm::Rank, u32)> = None;
                    for &(s, g) in &r.extras[from..] {
                        if tab.gen(s) != g {
                            continue;
                        }
                        if let Some(e) = tab.entry(s) {
                            if e.matches(key) && best.is_none_or(|(b, _)| e.rank().beats(&b)) {
                                best = Some((e.rank(), s));
                            }
                        }
                    }
                    best.map(|(_, s)| s)
                };
                found
            }
        };
        match best {
            None => {
                // confirmed: the record needs no verification until the next change
                let r = &self.rules[slot as usize];
                self.lut.recs[i].mark = match self.kind {
                    TableKind::Lpm => r.vseq,
                    _ => r.extras.len() as u32,
                };
                Some(slot)
            }
            Some(b) => {
                self.stats.invalidations += 1;
                if tab.entry(b).is_some_and(|e| e.low_latency) {
                    // a new low-latency entry: the record now points to it
                    self.record(tab, h, key, b);
                    self.stats.inserts -= 1;
                } else {
                    self.lut.remove(i);
                }
                Some(b)
            }
        }
    }
}

/// A pipeline with the Fast-Forwarding Path in front of it. Same semantics as the plain
/// [`Pipeline`]: for every packet and every sequence of control messages, the decision, the
/// packet bytes and every entry's counters are identical (property-tested).
#[derive(Debug, Clone)]
pub struct Composite {
    pipe: Pipeline,
    ffp: Vec<Option<TableFfp>>,
    cfg: FfpConfig,
    seed: u64,
}

impl Composite {
    /// An empty composite pipeline over `algo`'s tables.
    pub fn new(algo: Algo, seed: u64, cfg: FfpConfig) -> Composite {
        Composite { pipe: Pipeline::new(algo, seed), ffp: vec![None; 256], cfg, seed }
    }

    /// The pipeline behind the fast path.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipe
    }

    /// Apply a control message.
    pub fn apply(&mut self, now: Time, msg: &Control) -> Result<Reply, ControlError> {
        // the tables' counters with their fast paths' (one table's: its own LUT's, if any)
        if let Control::Stats(req @ (StatsRequest::All | StatsRequest::Table(_))) = msg {
            let Reply::Tables { tables, .. } = self.pipe.stats(*req)? else {
                return Err(ControlError::Parse("unexpected stats reply".into()));
            };
            let mut luts = self.lut_stats();
            luts.retain(|l| tables.iter().any(|t| t.table == l.table));
            return Ok(Reply::Tables { tables, luts });
        }
        let (reply, change) = self.pipe.apply_inner(now, msg)?;
        match change {
            Change::Table(t) => {
                let seed = self.seed;
                self.ffp[usize::from(t)] =
                    self.pipe.table(t).and_then(|tab| TableFfp::new(tab, &self.cfg, seed));
            }
            Change::Added(t, slot) => {
                if let (Some(f), Some(tab)) =
                    (self.ffp[usize::from(t)].as_mut(), self.pipe.table(t))
                {
                    f.screen(tab, slot, self.cfg.max_extra_rules);
                }
            }
            Change::Removed(_) | Change::Modified(_) | Change::None => {}
        }
        Ok(reply)
    }

    /// Counters of every LUT, in table order.
    pub fn lut_stats(&self) -> Vec<LutStats> {
        self.ffp
            .iter()
            .flatten()
            .map(|f| LutStats { records: f.lut.len, ..f.stats.clone() })
            .collect()
    }

    /// Counters of every entry (as [`Pipeline::flow_stats`]).
    pub fn flow_stats(&self) -> Vec<FlowStats> {
        self.pipe.flow_stats()
    }

    /// Earliest instant an entry may expire.
    pub fn next_expiry(&self) -> Option<Time> {
        self.pipe.next_expiry()
    }

    /// Remove expired entries (their records go stale).
    pub fn expire(&mut self, now: Time) -> Vec<(TableId, u32)> {
        self.pipe.expire(now)
    }

    /// Low-latency learning (as [`Pipeline::learn`]).
    pub fn learn(&mut self, policy: &LearnPolicy) -> usize {
        self.pipe.learn(policy)
    }

    /// Run one packet through the fast path and, where it leaves it, the pipeline.
    pub fn process(
        &mut self,
        now: Time,
        data: &mut Vec<u8>,
        in_port: u16,
        wire_len: u32,
    ) -> Decision {
        let mut frame = new_frame(data, in_port, wire_len);
        let mut st = StageState::default();
        let mut next = Next::Table(0);
        loop {
            let (tid, hit) = match next {
                Next::Done => break,
                Next::Table(t) => {
                    let Some(tab) = self.pipe.table_mut(t) else {
                        st.fail = Some(DropCause::NoTable);
                        break;
                    };
                    let hit = match self.ffp[usize::from(t)].as_mut() {
                        Some(f) if !st.normal => {
                            let key = if self.cfg.fast_keys {
                                tab.extract_as(&frame, Algo::Strong)
                            } else {
                                tab.extract(&frame)
                            };
                            f.resolve(tab, &key)
                        }
                        _ => {
                            let key = tab.extract(&frame);
                            tab.lookup(&key)
                        }
                    };
                    (t, hit)
                }
                Next::Direct(t, i) => {
                    let Some(tab) = self.pipe.table_mut(t) else {
                        st.fail = Some(DropCause::NoTable);
                        break;
                    };
                    (t, tab.direct(i))
                }
            };
            next = run_stage(self.pipe.table_mut(tid), now, hit, &mut frame, &mut st);
        }
        st.decision()
    }
}
