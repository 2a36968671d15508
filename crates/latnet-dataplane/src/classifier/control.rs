//! Control messages, typed: table-mod, flow-mod (with the seed's low-latency flag, Figure 2),
//! statistics requests; their replies and errors. The text (JSON / TOML) form is in
//! [`super::text`].

use super::instr::{Instruction, TableId};
use super::table::{Match, TableKind, TableSpec};
use latnet_units::Duration;

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Add, change or delete a table.
    Table(TableMod),
    /// Add, modify or delete an entry.
    Flow(FlowMod),
    /// Ask for counters.
    Stats(StatsRequest),
}

/// Table-mod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableMod {
    /// Create a table.
    Add(TableSpec),
    /// Replace a table's miss instructions.
    SetMiss {
        /// Table.
        table: TableId,
        /// New miss instructions.
        miss: Vec<Instruction>,
    },
    /// Delete a table and its entries.
    Delete(TableId),
}

/// Flow-mod commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowCommand {
    /// Install a new entry (its id must be free).
    Add,
    /// Change the entry with this id: instructions, flag and timeouts in place (counters
    /// kept); a new match or priority re-installs it.
    Modify,
    /// Remove the entry with this id.
    Delete,
}

/// Flow-mod, extended with the seed's low-latency flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    /// Command.
    pub command: FlowCommand,
    /// Table.
    pub table: TableId,
    /// Entry id (linear tables: the index).
    pub id: u32,
    /// Priority (mask tables).
    pub priority: u16,
    /// Match.
    pub matcher: Match,
    /// Instructions.
    pub instructions: Vec<Instruction>,
    /// The entry serves low-latency traffic (set by the controller).
    pub low_latency: bool,
    /// Idle timeout.
    pub idle_timeout: Option<Duration>,
    /// Hard timeout.
    pub hard_timeout: Option<Duration>,
}

impl FlowMod {
    /// A delete of entry `id` in `table`.
    pub fn delete(table: TableId, id: u32) -> FlowMod {
        FlowMod {
            command: FlowCommand::Delete,
            table,
            id,
            priority: 0,
            matcher: Match::Index,
            instructions: Vec::new(),
            low_latency: false,
            idle_timeout: None,
            hard_timeout: None,
        }
    }
}

/// Statistics requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsRequest {
    /// One entry.
    Flow {
        /// Table.
        table: TableId,
        /// Entry id.
        id: u32,
    },
    /// One table.
    Table(TableId),
    /// Every table (and the fast path, if any).
    All,
}

/// Counters of one entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FlowStats {
    /// Table.
    pub table: TableId,
    /// Entry id.
    pub id: u32,
    /// Priority (prefix length for LPM).
    pub priority: u16,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Low-latency flag.
    pub low_latency: bool,
    /// Flag set by learning.
    pub learned: bool,
}

/// Counters of one table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableStats {
    /// Table.
    pub table: TableId,
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: TableKind,
    /// Entries.
    pub entries: usize,
    /// Low-latency entries.
    pub low_latency_entries: usize,
    /// Lookups in the table's index.
    pub lookups: u64,
    /// Packets that matched nothing.
    pub misses: u64,
    /// Tuples (mask), trie nodes or prefix lengths (LPM), rows (linear scan).
    pub index_size: usize,
}

/// Counters of one fast-path lookup table.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LutStats {
    /// Table.
    pub table: TableId,
    /// Records held.
    pub records: usize,
    /// Capacity.
    pub capacity: usize,
    /// Hits used without verification.
    pub hits: u64,
    /// Lookups that found nothing usable.
    pub misses: u64,
    /// Records inserted.
    pub inserts: u64,
    /// Records evicted to make room.
    pub evictions: u64,
    /// Hits that needed verification.
    pub verifications: u64,
    /// Verifications that found another rule (record deleted or replaced).
    pub invalidations: u64,
    /// Records found stale (rule deleted, modified to normal, or reset).
    pub stale: u64,
}

/// Replies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply {
    /// Done.
    Ok,
    /// Entry counters.
    Flow(FlowStats),
    /// Table counters (one per table, in id order), and fast-path counters if any.
    Tables {
        /// Tables.
        tables: Vec<TableStats>,
        /// Fast-path LUTs.
        luts: Vec<LutStats>,
    },
}

/// Why a control message was refused. Nothing changes when one is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// No such table.
    #[error("table {0} does not exist")]
    NoSuchTable(TableId),
    /// The table id is taken.
    #[error("table {0} already exists")]
    TableExists(TableId),
    /// A bad table definition.
    #[error("table {table}: {message}")]
    BadTable {
        /// Table.
        table: TableId,
        /// What is wrong.
        message: String,
    },
    /// The entry id is taken.
    #[error("table {table}: entry {id} already exists (use modify)")]
    DuplicateId {
        /// Table.
        table: TableId,
        /// Entry.
        id: u32,
    },
    /// The same exact key or prefix is already installed.
    #[error("table {table}: entry {id} has the same match as entry {existing}")]
    DuplicateMatch {
        /// Table.
        table: TableId,
        /// New entry.
        id: u32,
        /// Installed entry.
        existing: u32,
    },
    /// No such entry.
    #[error("table {table}: no entry {id}")]
    NoSuchEntry {
        /// Table.
        table: TableId,
        /// Entry.
        id: u32,
    },
    /// The table is full.
    #[error("table {table} is full ({max} entries)")]
    TableFull {
        /// Table.
        table: TableId,
        /// Its size.
        max: u32,
    },
    /// The match does not fit the table.
    #[error("table {table}: bad match: {message}")]
    BadMatch {
        /// Table.
        table: TableId,
        /// What is wrong.
        message: String,
    },
    /// A goto that does not point forward.
    #[error("table {table}: goto {target} must point to a later table")]
    BadGoto {
        /// Table.
        table: TableId,
        /// Target.
        target: TableId,
    },
    /// A bad instruction.
    #[error("bad instruction: {0}")]
    BadInstruction(String),
    /// A message that cannot be parsed.
    #[error("{0}")]
    Parse(String),
}
