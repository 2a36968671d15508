//! Packet captures of simulated links in the classic pcap format (nanosecond timestamps,
//! Ethernet link type), readable by tcpdump and Wireshark.
//!
//! With `[output] pcap = true` every egress port keeps one capture of the frames it delivers,
//! time-stamped at the start of their transmission, with the bytes on the wire after the node's
//! transmit-time updates (an LBF block's per-hop fields, for example). Frames lost on the link
//! are not in it. The simulator does not materialise payloads it never reads, so a record holds
//! the frame's bytes that exist (at least every header) as its captured length and the frame's
//! full length as its original length, as a capture with a snap length would.
//!
//! Layout (all fields little-endian): a 24-byte file header (magic `0xa1b23c4d` for nanosecond
//! resolution, version 2.4, zone 0, sigfigs 0, snap length 65535, link type 1), then per frame a
//! 16-byte record header (seconds, nanoseconds, captured length, original length) and the
//! captured bytes.

use latnet_units::Time;

/// Magic number of a pcap file with nanosecond timestamps.
pub const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest captured length written.
pub const SNAPLEN: u32 = 65_535;

/// A new capture: the file header alone.
pub fn new_capture() -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(&MAGIC_NS.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&SNAPLEN.to_le_bytes());
    out.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    out
}

/// Append one frame seen at `at`: `bytes` as captured (at most [`SNAPLEN`] of them are kept),
/// `wire_len` as its length on the wire (never less than what is captured).
pub fn push(capture: &mut Vec<u8>, at: Time, bytes: &[u8], wire_len: u64) {
    let ns = at.as_nanos();
    let kept = &bytes[..bytes.len().min(SNAPLEN as usize)];
    let caplen = kept.len() as u32;
    let orig = u32::try_from(wire_len).unwrap_or(u32::MAX).max(caplen);
    capture.extend_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
    capture.extend_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
    capture.extend_from_slice(&caplen.to_le_bytes());
    capture.extend_from_slice(&orig.to_le_bytes());
    capture.extend_from_slice(kept);
}

/// One record read back by [`records`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// Timestamp (ns).
    pub at_ns: u64,
    /// Length of the frame on the wire.
    pub wire_len: u32,
    /// The captured bytes.
    pub bytes: &'a [u8],
}

/// The records of a capture written by this module, or why it is not one (a wrong magic, link
/// type or a record cut short). Never panics.
pub fn records(capture: &[u8]) -> Result<Vec<Record<'_>>, String> {
    let u32_at = |b: &[u8], i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?))
    };
    let magic = u32_at(capture, 0).ok_or("shorter than a pcap file header")?;
    if magic != MAGIC_NS {
        return Err(format!("expected the nanosecond pcap magic {MAGIC_NS:#x}, got {magic:#x}"));
    }
    match u32_at(capture, 20) {
        Some(LINKTYPE_ETHERNET) => {}
        other => return Err(format!("expected link type 1 (Ethernet), got {other:?}")),
    }
    let mut out = Vec::new();
    let mut i = 24;
    while i < capture.len() {
        let field = |k: usize| {
            u32_at(capture, i + 4 * k).ok_or_else(|| format!("record at byte {i} cut short"))
        };
        let (sec, ns, caplen, orig) = (field(0)?, field(1)?, field(2)?, field(3)?);
        let start = i + 16;
        let bytes = capture
            .get(start..start + caplen as usize)
            .ok_or_else(|| format!("record at byte {i}: {caplen} captured bytes cut short"))?;
        out.push(Record {
            at_ns: u64::from(sec) * 1_000_000_000 + u64::from(ns),
            wire_len: orig,
            bytes,
        });
        i = start + caplen as usize;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_records_round_trip() {
        let mut c = new_capture();
        assert_eq!(c.len(), 24);
        assert_eq!(&c[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        push(&mut c, Time::from_nanos(1_500_000_123), &[1, 2, 3], 300);
        push(&mut c, Time::from_nanos(7), &[9; 70_000], 70_000);
        let r = records(&c).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].at_ns, r[0].wire_len, r[0].bytes), (1_500_000_123, 300, &[1u8, 2, 3][..]));
        assert_eq!((r[1].at_ns, r[1].wire_len, r[1].bytes.len()), (7, 70_000, SNAPLEN as usize));
    }

    #[test]
    fn damaged_captures_are_errors_not_panics() {
        let mut c = new_capture();
        push(&mut c, Time::from_nanos(1), &[1, 2, 3, 4], 4);
        for cut in 0..c.len() {
            let r = records(&c[..cut]);
            assert!(cut == 24 || r.is_err(), "cut at {cut}: {r:?}");
        }
        let mut bad = c.clone();
        bad[0] = 0xd4;
        assert!(records(&bad).unwrap_err().contains("magic"));
    }
}
