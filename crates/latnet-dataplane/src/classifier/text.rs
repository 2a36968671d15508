//! The text form of control messages (JSON for a control channel, the same shapes in TOML
//! scenario files), validated into typed [`Control`] messages with errors that say what is
//! wrong and what was expected. Parsing never panics (fuzzed: `fuzz/fuzz_targets/flow_mod.rs`).
//!
//! ```json
//! {"table_add": {"id": 0, "name": "eth", "kind": "mask",
//!                "fields": ["eth.dst", "eth.type"], "size": 64, "miss": ["drop"]}}
//! {"flow_mod": {"command": "add", "table": "eth", "id": 1, "priority": 10,
//!               "low_latency": true, "match": {"eth.type": "0x86dd"},
//!               "actions": ["goto acl"]}}
//! {"flow_mod": {"command": "delete", "table": "eth", "id": 1}}
//! {"table_miss": {"table": "eth", "miss": ["output 0"]}}
//! {"table_delete": {"table": 2}}
//! {"stats": {"table": "eth", "id": 1}}
//! ```
//!
//! Fields: a name from [`field::catalogue`](super::field::catalogue) or
//! `{name, offset, length, meta}` (bits). Match values (mask tables): `"v"` (exact),
//! `"v/len"` (prefix of the field), `"v&mask"` (any mask), `"*"` (wildcard, as an absent
//! field); exact tables need every field; LPM tables take one `"v/len"` on their field (an LPM
//! table over several fields matches a prefix of their concatenation, written `"key"`).
//! Values: decimal, `0x` hex, MAC, IPv4 or IPv6 addresses. Actions: `goto T`,
//! `goto_direct T I`, `set_field F V`, `set_queue Q`, `push_tag [TPID] TCI`, `pop_tag`,
//! `output P`, `drop` (T a table id or name, F a field name or `OFFSET:LEN` / `meta:OFFSET:LEN`).

use super::control::{Control, ControlError, FlowCommand, FlowMod, StatsRequest, TableMod};
use super::field::{catalogue, parse_value, Field, CATALOGUE_NAMES};
use super::instr::{Instruction, TableId};
use super::key::Key;
use super::table::{Match, TableKind, TableSpec};
use latnet_units::Duration;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A table named by id or by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableRef {
    /// By id.
    Id(u8),
    /// By name.
    Name(String),
}

impl<'de> Deserialize<'de> for TableRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = TableRef;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a table id 0..=255 or a table name")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<TableRef, E> {
                u8::try_from(v)
                    .map(TableRef::Id)
                    .map_err(|_| E::custom(format!("table id must be 0..=255, got {v}")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<TableRef, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("table id must be 0..=255, got {v}")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TableRef, E> {
                Ok(TableRef::Name(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A field as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldText {
    /// A catalogue name.
    Named(String),
    /// Offset and length in bits.
    Raw {
        /// Name used in matches (default `f<index>`).
        name: Option<String>,
        /// Offset in bits.
        offset: u16,
        /// Length in bits.
        length: u16,
        /// In the metadata rather than the packet.
        meta: bool,
    },
}

/// `{name, offset, length, meta}` as written, before the range checks.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFieldText {
    name: Option<String>,
    offset: u64,
    length: u64,
    #[serde(default)]
    meta: bool,
}

impl<'de> Deserialize<'de> for FieldText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FieldText;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name or {name, offset, length, meta} (bits)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FieldText, E> {
                Ok(FieldText::Named(v.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<FieldText, A::Error> {
                use serde::de::Error;
                let r =
                    RawFieldText::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let bits = |what: &str, v: u64| {
                    u16::try_from(v).map_err(|_| {
                        A::Error::custom(format!("field {what} {v} is beyond 65535 bits"))
                    })
                };
                Ok(FieldText::Raw {
                    name: r.name,
                    offset: bits("offset", r.offset)?,
                    length: bits("length", r.length)?,
                    meta: r.meta,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A table definition as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableText {
    /// Id (0 is the first table).
    pub id: u8,
    /// Name.
    pub name: Option<String>,
    /// Kind: linear, exact, lpm, mask.
    pub kind: TableKind,
    /// Match fields.
    #[serde(default)]
    pub fields: Vec<FieldText>,
    /// Most entries.
    pub size: u32,
    /// Miss actions (default: none, the packet is dropped as a table miss).
    #[serde(default)]
    pub miss: Vec<String>,
}

/// A flow-mod as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleText {
    /// add (default), modify, delete.
    #[serde(default = "default_cmd")]
    pub command: FlowCommand,
    /// Table.
    pub table: TableRef,
    /// Entry id (linear tables: the index).
    pub id: u32,
    /// Priority (mask tables; 0 when omitted, but a `modify` of a mask table's entry must give
    /// it, since it replaces the entry's).
    #[serde(default)]
    pub priority: Option<u16>,
    /// Field name -> value (omitted: none, which a mask table matches as every packet; a
    /// `modify` must give it, since it replaces the entry's match).
    #[serde(default, rename = "match")]
    pub matcher: Option<BTreeMap<String, String>>,
    /// Actions.
    #[serde(default)]
    pub actions: Vec<String>,
    /// The seed's low-latency flag.
    #[serde(default)]
    pub low_latency: bool,
    /// Idle timeout.
    pub idle_timeout: Option<Duration>,
    /// Hard timeout.
    pub hard_timeout: Option<Duration>,
}

fn default_cmd() -> FlowCommand {
    FlowCommand::Add
}

/// A control message as written (JSON: one object with one key).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum MessageText {
    /// Create a table.
    TableAdd(TableText),
    /// Replace a table's miss actions.
    TableMiss {
        /// Table.
        table: TableRef,
        /// Actions.
        miss: Vec<String>,
    },
    /// Delete a table.
    TableDelete {
        /// Table.
        table: TableRef,
    },
    /// A flow-mod.
    FlowMod(RuleText),
    /// Statistics: of one entry (table and id), one table, or everything.
    Stats {
        /// Table.
        table: Option<TableRef>,
        /// Entry.
        id: Option<u32>,
    },
}

fn perr(m: impl Into<String>) -> ControlError {
    ControlError::Parse(m.into())
}

/// Resolve a table reference against known tables.
pub fn resolve_table(r: &TableRef, tables: &[TableSpec]) -> Result<TableId, ControlError> {
    match r {
        TableRef::Id(i) => Ok(*i),
        TableRef::Name(n) => tables
            .iter()
            .find(|t| t.name == *n)
            .map(|t| t.id)
            .or_else(|| n.parse::<u8>().ok())
            .ok_or_else(|| {
                let known: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
                perr(format!("unknown table {n:?} (tables: {})", known.join(", ")))
            }),
    }
}

fn field_of(f: &FieldText, i: usize) -> Result<(String, Field), ControlError> {
    match f {
        FieldText::Named(n) => catalogue(n).map(|f| (n.clone(), f)).ok_or_else(|| {
            perr(format!(
                "unknown field {n:?}: use one of {} or {{offset, length}} in bits",
                CATALOGUE_NAMES.join(", ")
            ))
        }),
        FieldText::Raw { name, offset, length, meta } => {
            let f =
                if *meta { Field::meta(*offset, *length) } else { Field::packet(*offset, *length) };
            f.check().map_err(perr)?;
            Ok((name.clone().unwrap_or_else(|| format!("f{i}")), f))
        }
    }
}

impl TableText {
    /// The typed definition (`tables`: the tables defined so far, for goto names).
    pub fn to_spec(&self, tables: &[TableSpec]) -> Result<TableSpec, ControlError> {
        let mut fields = Vec::with_capacity(self.fields.len());
        let mut names: Vec<String> = Vec::with_capacity(self.fields.len());
        for (i, f) in self.fields.iter().enumerate() {
            let (n, f) = field_of(f, i).map_err(|e| perr(format!("fields[{i}]: {e}")))?;
            if names.contains(&n) {
                return Err(perr(format!(
                    "fields[{i}]: the name {n:?} is taken by another field (matches name fields)"
                )));
            }
            names.push(n);
            fields.push(f);
        }
        let name = self.name.clone().unwrap_or_else(|| format!("t{}", self.id));
        // a rule's `goto 3` or `table = "3"` must mean one table, not a name or an id
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
            return Err(perr(format!(
                "name: {name:?} would read as a table id; give a name that is not a number"
            )));
        }
        if let Some(t) = tables.iter().find(|t| t.name == name && t.id != self.id) {
            return Err(perr(format!("name: table {} is already called {name:?}", t.id)));
        }
        let mut known = tables.to_vec();
        let spec = TableSpec {
            id: self.id,
            name,
            kind: self.kind,
            fields,
            names,
            max_entries: self.size,
            miss: Vec::new(),
        };
        known.push(spec.clone());
        let miss = parse_actions(&self.miss, &known).map_err(|e| perr(format!("miss: {e}")))?;
        let spec = TableSpec { miss, ..spec };
        spec.check()?;
        Ok(spec)
    }
}

fn field_by_name(spec: &TableSpec, name: &str) -> Option<usize> {
    spec.names.iter().position(|n| n == name)
}

/// Parse a value `v`, `v/len` or `v&mask` of a `bits`-wide field: (value, mask).
fn parse_masked(text: &str, bits: usize) -> Result<(Key, Key), String> {
    let t = text.trim();
    if t == "*" {
        return Ok((Key::ZERO, Key::ZERO));
    }
    if let Some((v, m)) = t.split_once('&') {
        return Ok((parse_value(v, bits)?, parse_value(m, bits)?));
    }
    if let Some((v, l)) = t.rsplit_once('/') {
        let len: usize = l
            .trim()
            .parse()
            .map_err(|_| format!("expected a prefix length after '/', got {l:?}"))?;
        if len > bits {
            return Err(format!("prefix length {len} exceeds the field's {bits} bits"));
        }
        return Ok((parse_value(v, bits)?, Key::prefix_mask(len)));
    }
    Ok((parse_value(t, bits)?, Key::prefix_mask(bits)))
}

/// Shift the first `bits` bits of `k` to bit position `pos`.
fn place(k: &Key, bits: usize, pos: usize, into: &mut Key) {
    let mut done = 0;
    while done < bits {
        let n = (bits - done).min(64);
        into.put_bits(pos + done, n, k.get_bits(done, n));
        done += n;
    }
}

impl RuleText {
    /// The typed flow-mod.
    pub fn to_flow_mod(&self, tables: &[TableSpec]) -> Result<FlowMod, ControlError> {
        let tid = resolve_table(&self.table, tables)?;
        let spec = tables.iter().find(|t| t.id == tid).ok_or(ControlError::NoSuchTable(tid))?;
        let mut fm = FlowMod::delete(tid, self.id);
        fm.command = self.command;
        if self.command == FlowCommand::Delete {
            return Ok(fm);
        }
        // a modify replaces the match and priority too: left out, they would silently become
        // "every packet" at priority 0
        if self.command == FlowCommand::Modify {
            if self.matcher.is_none() && spec.kind != TableKind::Linear {
                return Err(perr(
                    "match: a modify replaces the entry's match: give it (the same one to change \
                     only the actions)",
                ));
            }
            if self.priority.is_none() && spec.kind == TableKind::Mask {
                return Err(perr(
                    "priority: a modify replaces the entry's priority: give it (the same one to \
                     keep it)",
                ));
            }
        }
        let none = BTreeMap::new();
        let matcher = self.matcher.as_ref().unwrap_or(&none);
        for name in matcher.keys() {
            if field_by_name(spec, name).is_none()
                && !(name == "key" && spec.kind == TableKind::Lpm)
            {
                return Err(perr(format!(
                    "match: table {:?} has no field {name:?} (fields: {})",
                    spec.name,
                    spec.names.join(", ")
                )));
            }
        }
        let mut value = Key::ZERO;
        let mut mask = Key::ZERO;
        let mut pos = 0;
        let width = spec.width();
        fm.matcher = match spec.kind {
            TableKind::Linear => {
                if !matcher.is_empty() {
                    return Err(perr("match: a linear table has no match (the id is the index)"));
                }
                Match::Index
            }
            TableKind::Lpm => {
                let (name, text) = match matcher.iter().next() {
                    Some(x) if matcher.len() == 1 => x,
                    _ => return Err(perr("match: an LPM rule takes exactly one \"value/len\"")),
                };
                if spec.fields.len() > 1 && name != "key" {
                    // the prefix runs over the concatenated fields, not over the one named
                    return Err(perr(format!(
                        "match {name:?}: table {:?} matches a prefix of its {} fields together \
                         ({width} bits): write it as \"key\" = \"value/len\"",
                        spec.name,
                        spec.fields.len()
                    )));
                }
                let bits = width;
                let (v, m) =
                    parse_masked(text, bits).map_err(|e| perr(format!("match {name:?}: {e}")))?;
                let len =
                    (0..=bits).rev().find(|&l| m == Key::prefix_mask(l)).ok_or_else(|| {
                        perr(format!("match {name:?}: an LPM rule needs a prefix (value/len)"))
                    })?;
                place(&v, bits, 0, &mut value);
                Match::Prefix { value, len: len as u16 }
            }
            TableKind::Exact | TableKind::Mask => {
                for (i, f) in spec.fields.iter().enumerate() {
                    let bits = usize::from(f.length);
                    let given = spec.names.get(i).and_then(|n| matcher.get(n));
                    match given {
                        Some(text) => {
                            let (v, m) = parse_masked(text, bits)
                                .map_err(|e| perr(format!("match {:?}: {e}", spec.names[i])))?;
                            if spec.kind == TableKind::Exact && m != Key::prefix_mask(bits) {
                                return Err(perr(format!(
                                    "match {:?}: an exact table takes plain values",
                                    spec.names[i]
                                )));
                            }
                            place(&v, bits, pos, &mut value);
                            place(&m, bits, pos, &mut mask);
                        }
                        None if spec.kind == TableKind::Exact => {
                            return Err(perr(format!(
                                "match: an exact table needs every field; {:?} is missing",
                                spec.names.get(i).map_or("?", |s| s.as_str())
                            )))
                        }
                        None => {}
                    }
                    pos += bits;
                }
                if spec.kind == TableKind::Exact {
                    Match::Exact(value)
                } else {
                    Match::Masked { value, mask }
                }
            }
        };
        fm.priority = self.priority.unwrap_or(0);
        fm.instructions = parse_actions(&self.actions, tables)?;
        fm.low_latency = self.low_latency;
        fm.idle_timeout = self.idle_timeout;
        fm.hard_timeout = self.hard_timeout;
        Ok(fm)
    }
}

fn num<T: std::str::FromStr>(s: Option<&str>, what: &str, action: &str) -> Result<T, String> {
    let s = s.ok_or_else(|| format!("{action:?}: missing {what}"))?;
    let t = s.trim();
    let parsed = if let Some(h) = t.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok().and_then(|v| v.to_string().parse().ok())
    } else {
        t.parse().ok()
    };
    parsed.ok_or_else(|| format!("{action:?}: expected {what}, got {s:?}"))
}

/// Parse an action list.
pub fn parse_actions(
    list: &[String],
    tables: &[TableSpec],
) -> Result<Vec<Instruction>, ControlError> {
    list.iter()
        .enumerate()
        .map(|(i, a)| parse_action(a, tables).map_err(|e| perr(format!("actions[{i}]: {e}"))))
        .collect()
}

fn parse_action(a: &str, tables: &[TableSpec]) -> Result<Instruction, String> {
    let mut w = a.split_whitespace();
    let op = w.next().unwrap_or("");
    let table = |s: Option<&str>| -> Result<TableId, String> {
        let s = s.ok_or_else(|| format!("{a:?}: missing table"))?;
        resolve_table(&TableRef::Name(s.to_owned()), tables).map_err(|e| format!("{a:?}: {e}"))
    };
    let ins = match op {
        "goto" => Instruction::GotoTable(table(w.next())?),
        "goto_direct" => {
            let t = table(w.next())?;
            Instruction::GotoDirect { table: t, index: num(w.next(), "an index", a)? }
        }
        "set_queue" => Instruction::SetQueue(num(w.next(), "a queue 0..=7", a)?),
        "push_tag" => {
            let x: u16 = num(w.next(), "a TCI", a)?;
            match w.next() {
                Some(s) => Instruction::PushTag { tpid: x, tci: num(Some(s), "a TCI", a)? },
                None => Instruction::PushTag { tpid: 0x8100, tci: x },
            }
        }
        "pop_tag" => Instruction::PopTag,
        "output" => Instruction::Output(num(w.next(), "a port", a)?),
        "drop" => Instruction::Drop,
        "set_field" => {
            let f = w.next().ok_or_else(|| format!("{a:?}: missing field"))?;
            let field = match catalogue(f) {
                Some(x) => x,
                None => {
                    let (meta, rest) = match f.strip_prefix("meta:") {
                        Some(r) => (true, r),
                        None => (false, f),
                    };
                    let (o, l) = rest.split_once(':').ok_or_else(|| {
                        format!("{a:?}: unknown field {f:?} (a name, OFFSET:LEN or meta:OFFSET:LEN)")
                    })?;
                    let o: u16 = num(Some(o), "a bit offset", a)?;
                    let l: u16 = num(Some(l), "a bit length", a)?;
                    if meta { Field::meta(o, l) } else { Field::packet(o, l) }
                }
            };
            field.check().map_err(|e| format!("{a:?}: {e}"))?;
            let v = w.next().ok_or_else(|| format!("{a:?}: missing value"))?;
            let value = parse_value(v, usize::from(field.length)).map_err(|e| format!("{a:?}: {e}"))?;
            Instruction::SetField { field, value }
        }
        _ => {
            return Err(format!(
                "unknown action {a:?} (goto, goto_direct, set_field, set_queue, push_tag, pop_tag, output, drop)"
            ))
        }
    };
    if let Some(extra) = w.next() {
        return Err(format!("{a:?}: unexpected {extra:?}"));
    }
    if let Instruction::SetQueue(q) = ins {
        if q > 7 {
            return Err(format!("{a:?}: queue must be 0..=7"));
        }
    }
    Ok(ins)
}

impl MessageText {
    /// The typed message, given the tables that exist.
    pub fn to_control(&self, tables: &[TableSpec]) -> Result<Control, ControlError> {
        Ok(match self {
            MessageText::TableAdd(t) => Control::Table(TableMod::Add(t.to_spec(tables)?)),
            MessageText::TableMiss { table, miss } => Control::Table(TableMod::SetMiss {
                table: resolve_table(table, tables)?,
                miss: parse_actions(miss, tables)?,
            }),
            MessageText::TableDelete { table } => {
                Control::Table(TableMod::Delete(resolve_table(table, tables)?))
            }
            MessageText::FlowMod(r) => Control::Flow(r.to_flow_mod(tables)?),
            MessageText::Stats { table, id } => Control::Stats(match (table, id) {
                (None, None) => StatsRequest::All,
                (Some(t), None) => StatsRequest::Table(resolve_table(t, tables)?),
                (Some(t), Some(id)) => {
                    StatsRequest::Flow { table: resolve_table(t, tables)?, id: *id }
                }
                (None, Some(_)) => return Err(perr("stats: an entry id needs its table")),
            }),
        })
    }
}

/// Parse one JSON control message against the tables that exist.
pub fn parse_json(text: &str, tables: &[TableSpec]) -> Result<Control, ControlError> {
    let m: MessageText = serde_json::from_str(text).map_err(|e| perr(format!("JSON: {e}")))?;
    m.to_control(tables)
}
