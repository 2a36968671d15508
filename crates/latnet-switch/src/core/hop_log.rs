//! The switch's per-packet hop records (`latnet-switch run --hops`): written in the forwarding
//! loop as fixed-size binary records ([`HopLog`]), turned into CSV off it
//! ([`hop_records_csv`]). The byte layout is written and read only here.

use super::shifted;
use latnet_dataplane::{DropReason, Meta};
use latnet_units::Time;

/// Bytes of one hop record as the core collects them: flow index and global port (u32), then
/// sequence number and the three instants (u64), then the packet's priority (u32),
/// little-endian. A drop record has port [`DROPPED`], then the sequence number, the packet's
/// creation (its sender's stamp), the index of its reason in [`DropReason::ALL`] and of the
/// node that dropped it (u32), the instant of the drop, and the priority.
pub const HOP_RECORD_BYTES: usize = 44;

/// The port of a drop record (see [`HOP_RECORD_BYTES`]).
pub const DROPPED: u32 = u32::MAX;

/// The header of a switch's hop records (`latnet-switch run --hops`): per transmission of a
/// stamped packet of a scenario flow, the flow's name, the packet's sequence number, the global
/// egress port, the packet's priority there, and the instants it joined the queue, its
/// forwarder's hold ended and its transmission started (ns from the experiment's time zero).
pub const HOP_RECORDS_HEADER: &str = "flow,seq,port,priority,enqueue_ns,eligible_ns,start_tx_ns\n";

/// The header of a switch's drop records (`latnet-switch run --hops`): per stamped packet of a
/// scenario flow the switch dropped, the flow's name, the packet's sequence number, the
/// reason, the node that dropped it (a host for its NIC's queue, emulated here), and the
/// instants the packet was created (its sender's stamp) and dropped (ns from the experiment's
/// time zero).
pub const DROP_RECORDS_HEADER: &str = "flow,seq,reason,node,created_ns,drop_ns\n";

/// One record per transmission or drop of a stamped packet of a scenario flow, for the
/// simulator's `hops.csv` and `packets.csv`: [`HOP_RECORD_BYTES`] each, turned into CSV by
/// [`hop_records_csv`] (off the forwarding loop).
#[derive(Debug)]
pub(super) struct HopLog {
    /// Records not yet taken.
    buf: Vec<u8>,
    /// What to add to the switch's clock for the records' instants.
    offset_ns: i64,
}

impl HopLog {
    /// An empty log whose instants are the switch's clock plus `offset_ns`.
    pub(super) fn new(offset_ns: i64) -> HopLog {
        HopLog { buf: Vec::new(), offset_ns }
    }

    /// The packet of `m` started its transmission on global port `port` at `t`; no instant of
    /// the record is before `floor` (a host NIC's: its sender's stamp).
    pub(super) fn transmitted(&mut self, m: &Meta, port: usize, t: Time, floor: Time) {
        let (o, b) = (self.offset_ns, &mut self.buf);
        let arrival = m.arrival.max(floor);
        b.extend_from_slice(&m.flow.to_le_bytes());
        b.extend_from_slice(&(port as u32).to_le_bytes());
        b.extend_from_slice(&m.seq.to_le_bytes());
        b.extend_from_slice(&shifted(arrival, o).to_le_bytes());
        b.extend_from_slice(&shifted(m.eligible.max(arrival), o).to_le_bytes());
        b.extend_from_slice(&shifted(t, o).to_le_bytes());
        b.extend_from_slice(&u32::from(m.priority).to_le_bytes());
    }

    /// The packet of `m` was dropped at `t` by node `node`, for `reason`.
    pub(super) fn dropped(&mut self, m: &Meta, reason: DropReason, node: usize, t: Time) {
        let (o, b) = (self.offset_ns, &mut self.buf);
        b.extend_from_slice(&m.flow.to_le_bytes());
        b.extend_from_slice(&DROPPED.to_le_bytes());
        b.extend_from_slice(&m.seq.to_le_bytes());
        b.extend_from_slice(&shifted(m.created, o).to_le_bytes());
        b.extend_from_slice(&(reason.index() as u32).to_le_bytes());
        b.extend_from_slice(&(node as u32).to_le_bytes());
        b.extend_from_slice(&shifted(t, o).to_le_bytes());
        b.extend_from_slice(&u32::from(m.priority).to_le_bytes());
    }

    /// The records so far, if there are at least `at_least` bytes of them (and one): swapped
    /// with `spare` (which should be empty).
    pub(super) fn swap(&mut self, at_least: usize, spare: &mut Vec<u8>) -> bool {
        if self.buf.is_empty() || self.buf.len() < at_least {
            return false;
        }
        std::mem::swap(&mut self.buf, spare);
        true
    }
}

/// Append hop records `raw` (as [`super::SwitchCore::swap_hop_records`] hands them over) as
/// CSV rows: transmissions to `hops` under [`HOP_RECORDS_HEADER`], drops to `drops` under
/// [`DROP_RECORDS_HEADER`]; flows named by `names` (by index). A partial record at the end is
/// ignored.
pub fn hop_records_csv(
    raw: &[u8],
    names: &[String],
    nodes: &[String],
    hops: &mut Vec<u8>,
    drops: &mut Vec<u8>,
) {
    use std::io::Write as _;
    for r in raw.chunks_exact(HOP_RECORD_BYTES) {
        let u32_at = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().unwrap_or([0; 8]));
        let flow = names.get(u32_at(0) as usize).map_or("", String::as_str);
        let (seq, a, b, c) = (u64_at(8), u64_at(16), u64_at(24), u64_at(32));
        // (writing into a Vec cannot fail)
        let _ = match u32_at(4) {
            DROPPED => {
                let reason = DropReason::ALL.get(u32_at(24) as usize).map_or("", |r| r.as_str());
                let node = nodes.get(u32_at(28) as usize).map_or("", String::as_str);
                writeln!(drops, "{flow},{seq},{reason},{node},{a},{c}")
            }
            port => writeln!(hops, "{flow},{seq},{port},{},{a},{b},{c}", u32_at(40)),
        };
    }
}
