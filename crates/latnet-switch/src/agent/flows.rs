//! A flow of the service (`GET /flows/ID`) as tagger entries at its source host.

use super::*;

/// One admitted flow of a source host, as the agent programs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowEntry {
    /// The controller's id.
    pub id: u64,
    /// Destination host.
    pub dst: String,
    /// Tagger keys: the flow's match to each address of the destination.
    pub matches: Vec<Match>,
    /// Tag stack, outermost first.
    pub tags: Vec<u16>,
    /// Switches and hosts of the path (for the record).
    pub path: Vec<String>,
    /// Token-bucket rate (bit/s) and burst (bytes) of its shaper.
    pub shaper: (u64, u64),
    /// The end-to-end delay the controller guarantees on this path (ns), if it said.
    pub guarantee_ns: Option<u64>,
}

/// Why a flow cannot be programmed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// The flow has no `match`: the agent cannot tell its packets.
    #[error(
        "flow {0} has no match: its packets cannot be told from others (request it with \"match\")"
    )]
    NoMatch(u64),
    /// The destination is not a host of the testbed.
    #[error("flow {id}: destination {dst:?} is not a host of the testbed")]
    UnknownDestination {
        /// Flow.
        id: u64,
        /// Its destination.
        dst: String,
    },
    /// More tags than the tagger pushes.
    #[error("flow {id}: {tags} tags, the tagger pushes at most {}", crate::tagger::MAX_TAGS)]
    TooManyTags {
        /// Flow.
        id: u64,
        /// Its tags.
        tags: usize,
    },
    /// The service's answer lacks a field or has the wrong type.
    #[error("flow {id}: {field}: {what}")]
    Field {
        /// Flow (0 if even the id was unreadable).
        id: u64,
        /// Field.
        field: &'static str,
        /// What was expected.
        what: &'static str,
    },
}

/// Read a flow as `GET /flows/ID` shows it; `Ok(None)` if its source is not `host`.
/// `addresses`: every host's addresses.
pub fn flow_entry(
    flow: &Value,
    host: &str,
    addresses: &AddressBook,
) -> Result<Option<FlowEntry>, FlowError> {
    let id = flow["id"].as_u64().ok_or(FlowError::Field {
        id: 0,
        field: "id",
        what: "a whole number",
    })?;
    let field = |field: &'static str, what: &'static str| FlowError::Field { id, field, what };
    let src = flow["src"].as_str().ok_or_else(|| field("src", "a host name"))?;
    if src != host {
        return Ok(None);
    }
    let dst = flow["dst"].as_str().ok_or_else(|| field("dst", "a host name"))?;
    let m = flow.get("match").filter(|m| !m.is_null()).ok_or(FlowError::NoMatch(id))?;
    let proto = match m["proto"].as_str() {
        Some("udp") => 17,
        Some("tcp") => 6,
        _ => return Err(field("match.proto", "\"udp\" or \"tcp\"")),
    };
    let port = |v: &Value| v.as_u64().and_then(|p| u16::try_from(p).ok());
    let dst_port = port(&m["dst_port"]).ok_or_else(|| field("match.dst_port", "a port"))?;
    let src_port = match m.get("src_port") {
        None | Some(Value::Null) => 0,
        Some(v) => port(v).ok_or_else(|| field("match.src_port", "a port"))?,
    };
    let addrs = addresses
        .get(dst)
        .ok_or_else(|| FlowError::UnknownDestination { id, dst: dst.to_owned() })?;
    let matches = addrs.iter().map(|&a| Match { dst: a, proto, src_port, dst_port }).collect();
    let tags = flow["tags"]
        .as_array()
        .ok_or_else(|| field("tags", "a list of tags"))?
        .iter()
        .map(|t| t.as_u64().and_then(|t| u16::try_from(t).ok()).filter(|&t| t < 4096))
        .collect::<Option<Vec<u16>>>()
        .ok_or_else(|| field("tags", "VLAN ids, 0-4095"))?;
    if tags.len() > crate::tagger::MAX_TAGS {
        return Err(FlowError::TooManyTags { id, tags: tags.len() });
    }
    let path = flow["path"]
        .as_array()
        .map(|p| p.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let rate =
        flow["shaper"]["rate_bps"].as_u64().ok_or_else(|| field("shaper.rate_bps", "bit/s"))?;
    let burst = flow["shaper"]["burst_bytes"]
        .as_u64()
        .ok_or_else(|| field("shaper.burst_bytes", "bytes"))?;
    let guarantee_ns = flow["guarantee_ns"].as_u64();
    Ok(Some(FlowEntry {
        id,
        dst: dst.to_owned(),
        matches,
        tags,
        path,
        shaper: (rate, burst),
        guarantee_ns,
    }))
}
