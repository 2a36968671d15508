//! The packet every element handles: real header bytes, a virtual payload length, and
//! metadata that travels with the packet inside one run (never on the wire).

use latnet_units::{Bytes, Duration, Time};

/// Index of a flow within a run (dense, assigned in scenario order).
pub type FlowId = u32;

/// Priority 0 is the highest. Eight priorities exist (0..=7); best effort is 7.
///
/// On the wire a priority `p` travels as the IPv4/IPv6 DSCP class selector `CS(7 - p)`, so that
/// real traffic keeps its real-world meaning (DSCP 0 = best effort = priority 7, CS7 = priority 0).
pub type Priority = u8;

/// The lowest priority (best effort).
pub const BEST_EFFORT: Priority = 7;

/// Map a DSCP value to a latnet priority (class selector bits only).
pub const fn priority_from_dscp(dscp: u8) -> Priority {
    7 - ((dscp >> 3) & 7)
}

/// Map a latnet priority to the DSCP class selector that carries it.
pub const fn dscp_from_priority(p: Priority) -> u8 {
    (7 - (p & 7)) << 3
}

/// A packet: header bytes that elements parse through `latnet-wire`, plus `virtual_len` payload
/// bytes that are counted for serialization and queue limits but not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The bytes present: at least the headers, possibly a real payload.
    pub data: Vec<u8>,
    /// Payload bytes counted on the wire but not present in `data`.
    pub virtual_len: u32,
    /// Per-run metadata.
    pub meta: Meta,
}

/// Metadata that travels with a packet inside one run. Nothing here is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    /// Unique id within the run.
    pub id: u64,
    /// The flow the packet belongs to.
    pub flow: FlowId,
    /// Sequence number within the flow, from 0.
    pub seq: u64,
    /// When the source created the packet.
    pub created: Time,
    /// When the packet arrived at the element now holding it (set by the runner).
    pub arrival: Time,
    /// Priority chosen by the ingress classifier; selects the queue of a priority scheduler.
    pub priority: Priority,
    /// Ingress port at the current node.
    pub ingress_port: u16,
    /// Number of transmissions so far (0 at the source host).
    pub hops: u8,
    /// Serialization time spent on earlier links (lets reports use either latency convention).
    pub ser_so_far: Duration,
    /// Not before this instant: non-work-conserving queues (LBF, dampers) hold the packet
    /// until then; set per hop by the forwarder (0 = at once).
    pub eligible: Time,
    /// Ordering deadline at this hop (LBF upper-bound budget); `None` = no deadline.
    pub deadline: Option<Time>,
    /// A queue that honours it drops the packet at dequeue once `now` is past this instant
    /// (`deadline-expired`); `None` = never.
    pub expires: Option<Time>,
    /// LBF: after this instant the packet can no longer meet its upper bound (used to mark it
    /// late when it starts transmission); `None` = no upper bound.
    pub late_at: Option<Time>,
}

impl Packet {
    /// A packet with the given header bytes and virtual payload.
    pub fn new(data: Vec<u8>, virtual_len: u32, meta: Meta) -> Self {
        Packet { data, virtual_len, meta }
    }

    /// Bytes this packet occupies on the wire and in queues (present + virtual).
    pub fn wire_len(&self) -> Bytes {
        Bytes::new(self.data.len() as u64 + u64::from(self.virtual_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dscp_priority_mapping_is_inverse_on_class_selectors() {
        for p in 0..=7u8 {
            assert_eq!(priority_from_dscp(dscp_from_priority(p)), p);
        }
        assert_eq!(priority_from_dscp(0), BEST_EFFORT);
        assert_eq!(priority_from_dscp(46), 2, "EF (46) is in class selector 5");
    }

    #[test]
    fn wire_len_counts_virtual_payload() {
        let p = Packet::new(vec![0; 42], 958, Meta::default());
        assert_eq!(p.wire_len(), Bytes::new(1000));
    }
}
