//! The plain match-action pipeline: tables 0..=255, a packet starts at table 0 and follows
//! gotos; each stage extracts its table's key, looks it up, counts the hit and runs the
//! entry's instructions.
//!
//! Call order (sans-IO): [`Pipeline::apply`] for control messages at any time;
//! [`Pipeline::process`] per packet; [`Pipeline::expire`] when [`Pipeline::next_expiry`] has
//! come (idle / hard timeouts); [`Pipeline::learn`] periodically if entries may be marked
//! low-latency from their hit statistics (the seed's Section 4.1).

use super::control::{
    Control, ControlError, FlowCommand, FlowMod, FlowStats, Reply, StatsRequest, TableMod,
    TableStats,
};
use super::field::META_BYTES;
use super::instr::{execute, Fate, Frame, Instruction, Next, TableId};
use super::key::Key;
use super::table::{check_instructions, Algo, Entry, Table, TableKind};
use latnet_units::{Duration, Time};

/// Why the pipeline dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// A `Drop` instruction.
    Rule,
    /// A table matched nothing and has no miss instructions.
    TableMiss,
    /// The pipeline ended without an output port.
    NoOutput,
    /// A goto to a table that does not exist.
    NoTable,
}

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Out of this port.
    Output(u16),
    /// Dropped.
    Drop(DropCause),
}

/// The pipeline's decision for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Output or drop.
    pub verdict: Verdict,
    /// Queue class set by `SetQueue`, if any.
    pub queue: Option<u8>,
    /// Every entry hit was a low-latency entry (the packet's flag at the end).
    pub low_latency: bool,
    /// Tables visited.
    pub stages: u8,
}

/// Policy of low-latency learning (the seed's Section 4.1: entries that are permanent or have
/// long timeouts and keep being hit are marked low-latency at run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnPolicy {
    /// Hits since the previous pass needed to mark an entry.
    pub min_packets: u64,
    /// An entry with an idle timeout shorter than this is not long-lived (hard timeouts
    /// disqualify entirely).
    pub min_idle: Duration,
}

/// A match-action pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {
    algo: Algo,
    seed: u64,
    tables: Vec<Option<Table>>,
    next_expiry: Option<Time>,
}

impl Pipeline {
    /// An empty pipeline using `algo`'s lookup structures; `seed` keys its hash functions.
    pub fn new(algo: Algo, seed: u64) -> Pipeline {
        Pipeline { algo, seed, tables: vec![None; 256], next_expiry: None }
    }

    /// The lookup algorithms.
    pub fn algo(&self) -> Algo {
        self.algo
    }

    /// Table `id`, if it exists.
    #[inline]
    pub fn table(&self, id: TableId) -> Option<&Table> {
        self.tables[usize::from(id)].as_ref()
    }

    /// Table `id`, mutably.
    #[inline]
    pub fn table_mut(&mut self, id: TableId) -> Option<&mut Table> {
        self.tables[usize::from(id)].as_mut()
    }

    /// Tables that exist, in id order.
    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.iter().flatten()
    }

    /// Apply a control message at `now`.
    pub fn apply(&mut self, now: Time, msg: &Control) -> Result<Reply, ControlError> {
        self.apply_inner(now, msg).map(|(r, _)| r)
    }

    /// Apply; also say which table changed and which slot an add / re-install filled.
    pub(crate) fn apply_inner(
        &mut self,
        now: Time,
        msg: &Control,
    ) -> Result<(Reply, Change), ControlError> {
        match msg {
            Control::Table(tm) => self.table_mod(tm).map(|c| (Reply::Ok, c)),
            Control::Flow(fm) => self.flow_mod(now, fm).map(|c| (Reply::Ok, c)),
            Control::Stats(req) => self.stats(*req).map(|r| (r, Change::None)),
        }
    }

    fn table_mod(&mut self, tm: &TableMod) -> Result<Change, ControlError> {
        match tm {
            TableMod::Add(spec) => {
                spec.check()?;
                self.check_targets(&spec.miss)?;
                let slot = &mut self.tables[usize::from(spec.id)];
                if slot.is_some() {
                    return Err(ControlError::TableExists(spec.id));
                }
                *slot = Some(Table::new(spec.clone(), self.algo, self.seed));
                Ok(Change::Table(spec.id))
            }
            TableMod::SetMiss { table, miss } => {
                check_instructions(*table, miss)?;
                self.check_targets(miss)?;
                let t = self.table_mut(*table).ok_or(ControlError::NoSuchTable(*table))?;
                t.set_miss(miss.clone());
                Ok(Change::None)
            }
            TableMod::Delete(id) => {
                if self.tables[usize::from(*id)].take().is_none() {
                    return Err(ControlError::NoSuchTable(*id));
                }
                Ok(Change::Table(*id))
            }
        }
    }

    /// Gotos to tables that exist must suit them: `GotoDirect` reaches an index of a linear
    /// table, `GotoTable` any other kind (a linear table has no key: every packet would miss).
    /// Targets created later are not checked; a goto to a missing table drops as `NoTable`.
    fn check_targets(&self, list: &[Instruction]) -> Result<(), ControlError> {
        for ins in list {
            let Some(t) = ins.goto_target() else { continue };
            let Some(spec) = self.table(t).map(|x| x.spec()) else { continue };
            let bad = |m: String| Err(ControlError::BadInstruction(m));
            match (ins, spec.kind) {
                (Instruction::GotoDirect { index, .. }, TableKind::Linear)
                    if *index >= spec.max_entries =>
                {
                    return bad(format!(
                        "goto_direct {t} {index}: table {t} has {} entries",
                        spec.max_entries
                    ));
                }
                (Instruction::GotoDirect { .. }, TableKind::Linear) => {}
                (Instruction::GotoDirect { .. }, kind) => {
                    return bad(format!(
                        "goto_direct {t}: table {t} is a {} table; goto_direct needs a linear one \
                         (use goto {t})",
                        kind.as_str()
                    ))
                }
                (_, TableKind::Linear) => {
                    return bad(format!(
                        "goto {t}: table {t} is linear and has no key; reach its entries with \
                         goto_direct {t} INDEX"
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn flow_mod(&mut self, now: Time, fm: &FlowMod) -> Result<Change, ControlError> {
        if fm.command != FlowCommand::Delete && self.table(fm.table).is_some() {
            check_instructions(fm.table, &fm.instructions)?;
            self.check_targets(&fm.instructions)?;
        }
        let t = self.tables[usize::from(fm.table)]
            .as_mut()
            .ok_or(ControlError::NoSuchTable(fm.table))?;
        let tid = fm.table;
        match fm.command {
            FlowCommand::Delete => {
                t.remove(fm.id).ok_or(ControlError::NoSuchEntry { table: tid, id: fm.id })?;
                Ok(Change::Removed(tid))
            }
            FlowCommand::Add => {
                check_instructions(tid, &fm.instructions)?;
                let (value, mask, priority) = t.normalise(&fm.matcher, fm.priority, fm.id)?;
                let e = Entry {
                    id: fm.id,
                    priority,
                    value,
                    mask,
                    instructions: fm.instructions.clone(),
                    low_latency: fm.low_latency,
                    learned: false,
                    idle_timeout: fm.idle_timeout,
                    hard_timeout: fm.hard_timeout,
                    installed: now,
                    last_hit: now,
                    packets: 0,
                    bytes: 0,
                    learn_mark: 0,
                };
                let deadline = e.deadline();
                let slot = t.insert(e)?;
                self.note_deadline(deadline);
                Ok(Change::Added(tid, slot))
            }
            FlowCommand::Modify => {
                check_instructions(tid, &fm.instructions)?;
                let slot =
                    t.slot_of(fm.id).ok_or(ControlError::NoSuchEntry { table: tid, id: fm.id })?;
                let (value, mask, priority) = t.normalise(&fm.matcher, fm.priority, fm.id)?;
                let Some(old) = t.entry(slot) else {
                    return Err(ControlError::NoSuchEntry { table: tid, id: fm.id });
                };
                if old.value == value && old.mask == mask && old.priority == priority {
                    let Some(e) = t.entry_mut(slot) else {
                        return Err(ControlError::NoSuchEntry { table: tid, id: fm.id });
                    };
                    e.instructions = fm.instructions.clone();
                    e.low_latency = fm.low_latency;
                    e.learned = false;
                    e.idle_timeout = fm.idle_timeout;
                    e.hard_timeout = fm.hard_timeout;
                    let d = e.deadline();
                    self.note_deadline(d);
                    return Ok(Change::Modified(tid));
                }
                // a new match or priority: re-install, keeping the counters
                let mut e = old.clone();
                // refuse before removing anything if the new match collides
                if let Some(other) = find_same_match(t, value, priority, fm.id) {
                    return Err(ControlError::DuplicateMatch {
                        table: tid,
                        id: fm.id,
                        existing: other,
                    });
                }
                let _ = t.remove(fm.id);
                e.value = value;
                e.mask = mask;
                e.priority = priority;
                e.instructions = fm.instructions.clone();
                e.low_latency = fm.low_latency;
                e.learned = false;
                e.idle_timeout = fm.idle_timeout;
                e.hard_timeout = fm.hard_timeout;
                let d = e.deadline();
                let slot = t.insert(e)?;
                self.note_deadline(d);
                Ok(Change::Added(tid, slot))
            }
        }
    }

    fn note_deadline(&mut self, d: Option<Time>) {
        if let Some(d) = d {
            self.next_expiry = Some(self.next_expiry.map_or(d, |n| n.min(d)));
        }
    }

    /// Counters.
    pub fn stats(&self, req: StatsRequest) -> Result<Reply, ControlError> {
        match req {
            StatsRequest::Flow { table, id } => {
                let t = self.table(table).ok_or(ControlError::NoSuchTable(table))?;
                let e = t
                    .slot_of(id)
                    .and_then(|s| t.entry(s))
                    .ok_or(ControlError::NoSuchEntry { table, id })?;
                Ok(Reply::Flow(flow_stats(table, e)))
            }
            StatsRequest::Table(id) => {
                let t = self.table(id).ok_or(ControlError::NoSuchTable(id))?;
                Ok(Reply::Tables { tables: vec![table_stats(t)], luts: Vec::new() })
            }
            StatsRequest::All => Ok(Reply::Tables {
                tables: self.tables().map(table_stats).collect(),
                luts: Vec::new(),
            }),
        }
    }

    /// Counters of every entry, table by table in id order.
    pub fn flow_stats(&self) -> Vec<FlowStats> {
        self.tables()
            .flat_map(|t| t.entries().into_iter().map(move |e| flow_stats(t.spec().id, e)))
            .collect()
    }

    /// Earliest instant an entry may expire (a lower bound: idle deadlines move later with
    /// hits).
    pub fn next_expiry(&self) -> Option<Time> {
        self.next_expiry
    }

    /// Remove entries whose timeout passed at `now`; returns `(table, id)` of each, in order.
    pub fn expire(&mut self, now: Time) -> Vec<(TableId, u32)> {
        let mut out = Vec::new();
        if self.next_expiry.is_none_or(|t| t > now) {
            return out;
        }
        let mut next: Option<Time> = None;
        for t in self.tables.iter_mut().flatten() {
            let tid = t.spec().id;
            let mut dead = Vec::new();
            for e in t.entries() {
                match e.deadline() {
                    Some(d) if d <= now => dead.push(e.id),
                    Some(d) => next = Some(next.map_or(d, |n| n.min(d))),
                    None => {}
                }
            }
            for id in dead {
                t.remove(id);
                out.push((tid, id));
            }
        }
        self.next_expiry = next;
        out
    }

    /// Mark long-lived entries hit at least `policy.min_packets` times since the previous
    /// pass as low-latency; returns how many were marked.
    pub fn learn(&mut self, policy: &LearnPolicy) -> usize {
        let mut n = 0;
        for t in self.tables.iter_mut().flatten() {
            for slot in t.slots_by_id() {
                let Some(e) = t.entry_mut(slot) else { continue };
                let long_lived =
                    e.hard_timeout.is_none() && e.idle_timeout.is_none_or(|d| d >= policy.min_idle);
                if !e.low_latency && long_lived && e.packets - e.learn_mark >= policy.min_packets {
                    e.low_latency = true;
                    e.learned = true;
                    n += 1;
                }
                e.learn_mark = e.packets;
            }
        }
        n
    }

    /// Run one packet through the pipeline. `data` may be changed by instructions; the
    /// metadata area starts with the ingress port in its first two bytes.
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
                    let Some(tab) = self.tables[usize::from(t)].as_mut() else {
                        st.fail = Some(DropCause::NoTable);
                        break;
                    };
                    let key = tab.extract(&frame);
                    (t, tab.lookup(&key))
                }
                Next::Direct(t, i) => {
                    let Some(tab) = self.tables[usize::from(t)].as_mut() else {
                        st.fail = Some(DropCause::NoTable);
                        break;
                    };
                    (t, tab.direct(i))
                }
            };
            next = run_stage(self.tables[usize::from(tid)].as_mut(), now, hit, &mut frame, &mut st);
        }
        st.decision()
    }
}

/// What a control message changed (for the fast path's invalidation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    /// A table was created or deleted.
    Table(TableId),
    /// An entry was installed (or re-installed) in this slot.
    Added(TableId, u32),
    /// An entry was removed.
    Removed(TableId),
    /// An entry was modified in place.
    Modified(TableId),
}

fn find_same_match(t: &Table, value: Key, priority: u16, id: u32) -> Option<u32> {
    match t.spec().kind {
        TableKind::Exact | TableKind::Lpm => t
            .entries()
            .into_iter()
            .find(|e| e.id != id && e.value == value && e.priority == priority)
            .map(|e| e.id),
        _ => None,
    }
}

fn flow_stats(table: TableId, e: &Entry) -> FlowStats {
    FlowStats {
        table,
        id: e.id,
        priority: e.priority,
        packets: e.packets,
        bytes: e.bytes,
        low_latency: e.low_latency,
        learned: e.learned,
    }
}

fn table_stats(t: &Table) -> TableStats {
    TableStats {
        table: t.spec().id,
        name: t.spec().name.clone(),
        kind: t.spec().kind,
        entries: t.len(),
        low_latency_entries: t.entries().iter().filter(|e| e.low_latency).count(),
        lookups: t.lookups,
        misses: t.misses,
        index_size: t.index_size(),
    }
}

/// A frame with the ingress port in metadata bytes 0..2.
#[inline]
pub(crate) fn new_frame(data: &mut Vec<u8>, in_port: u16, wire_len: u32) -> Frame<'_> {
    let mut meta = [0u8; META_BYTES];
    meta[..2].copy_from_slice(&in_port.to_be_bytes());
    Frame { data, meta, wire_len }
}

/// Per-packet state while it crosses the pipeline.
#[derive(Debug, Default)]
pub(crate) struct StageState {
    pub fate: Fate,
    /// The packet's low-latency flag has turned false.
    pub normal: bool,
    pub stages: u8,
    pub fail: Option<DropCause>,
}

impl StageState {
    pub fn decision(&self) -> Decision {
        let verdict = if let Some(c) = self.fail {
            Verdict::Drop(c)
        } else if self.fate.dropped {
            Verdict::Drop(DropCause::Rule)
        } else if let Some(p) = self.fate.output {
            Verdict::Output(p)
        } else {
            Verdict::Drop(DropCause::NoOutput)
        };
        Decision { verdict, queue: self.fate.queue, low_latency: !self.normal, stages: self.stages }
    }
}

/// Count the hit (or miss) at one stage and run its instructions.
#[inline]
pub(crate) fn run_stage(
    tab: Option<&mut Table>,
    now: Time,
    hit: Option<u32>,
    frame: &mut Frame<'_>,
    st: &mut StageState,
) -> Next {
    st.stages = st.stages.saturating_add(1);
    let Some(tab) = tab else {
        st.fail = Some(DropCause::NoTable);
        return Next::Done;
    };
    match hit.and_then(|s| tab.entry_mut(s)) {
        Some(e) => {
            e.hit(now, frame.wire_len);
            if !e.low_latency {
                st.normal = true;
            }
            execute(&e.instructions, frame, &mut st.fate)
        }
        None => {
            st.normal = true;
            if tab.spec().miss.is_empty() {
                st.fail = Some(DropCause::TableMiss);
                Next::Done
            } else {
                execute(&tab.spec().miss, frame, &mut st.fate)
            }
        }
    }
}
