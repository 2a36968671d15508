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

/// Header of [`frames_csv`].
pub const FRAMES_CSV_HEADER: &str = "t_ns,wire_len,captured,src,dst,proto,sport,dport,dscp,ecn,\
lbf_carrier,lbf_mode,lbf_late,lbf_lower_ns,lbf_upper_ns,lbf_value_ns,\
lf_type,lf_filled,lf_count,lf_rate_kbps,error";

/// One row per frame of a capture (any Ethernet pcap with nanosecond timestamps, the simulator's
/// and the emulated switches' among them): its time and lengths, its IP flow fields and its LBF
/// block if it carries one (IPv6 hop-by-hop option or UDP shim) and its large-flow option of
/// switch-assisted pacing if it carries one (IPv4 option or IPv6 hop-by-hop option), as CSV
/// with [`FRAMES_CSV_HEADER`]. A frame whose headers do not parse gets the parser's message in
/// `error`; one whose LBF block or large-flow option does not gets each reader's message
/// (joined by `"; "`) and the fields it could read. A damaged file is an error. Never panics.
pub fn frames_csv(capture: &[u8]) -> Result<String, String> {
    use latnet_wire::large_flow::{large_flow_option_in, LargeFlowMsg, FLAG_FILLED};
    use latnet_wire::lbf::{locate, Carrier, LbfMode};
    use std::fmt::Write as _;
    let recs = records(capture)?;
    let mut out = String::with_capacity(64 + recs.len() * 96);
    out.push_str(FRAMES_CSV_HEADER);
    out.push('\n');
    for r in recs {
        let _ = write!(out, "{},{},{},", r.at_ns, r.wire_len, r.bytes.len());
        let (flow, lbf, lf, error) = match latnet_wire::parse_headers(r.bytes) {
            Err(e) => (None, None, None, e.to_string()),
            Ok(h) => {
                // each reader's message once (a malformed option list fails both alike)
                let mut error = String::new();
                let mut note = |e: latnet_wire::WireError| {
                    let e = e.to_string();
                    if !error.split("; ").any(|m| m == e) {
                        if !error.is_empty() {
                            error.push_str("; ");
                        }
                        error.push_str(&e);
                    }
                };
                let l = locate(r.bytes, &h, true).unwrap_or_else(|e| {
                    note(e);
                    None
                });
                let lf = large_flow_option_in(r.bytes, &h).unwrap_or_else(|e| {
                    note(e);
                    None
                });
                (h.key, l, lf, error)
            }
        };
        match flow {
            Some(k) => {
                let _ = write!(
                    out,
                    "{},{},{},{},{},{},{},",
                    k.src,
                    k.dst,
                    k.proto,
                    k.src_port,
                    k.dst_port,
                    k.dscp,
                    k.ecn.bits()
                );
            }
            None => out.push_str(",,,,,,,"),
        }
        match lbf {
            Some(l) => {
                let carrier = match l.carrier {
                    Carrier::Ipv6HopByHop => "ipv6",
                    Carrier::UdpShim => "udp-shim",
                };
                let mode = match l.repr.mode {
                    LbfMode::LatencySoFar => "latency-so-far",
                    LbfMode::SenderTimestamp => "timestamp",
                    LbfMode::RestSlo => "rest-slo",
                    LbfMode::Damper => "damper",
                };
                let upper = l.repr.upper_ns.map(|u| u.to_string()).unwrap_or_default();
                let _ = write!(
                    out,
                    "{carrier},{mode},{},{},{upper},{},",
                    u8::from(l.repr.late),
                    l.repr.lower_ns,
                    l.repr.value_ns
                );
            }
            None => out.push_str(",,,,,,"),
        }
        match lf {
            Some(o) => {
                let msg = match o.msg {
                    LargeFlowMsg::Register => "register",
                    LargeFlowMsg::Report => "report",
                    LargeFlowMsg::Deregister => "deregister",
                };
                let _ = write!(
                    out,
                    "{msg},{},{},{},",
                    u8::from(o.flags & FLAG_FILLED != 0),
                    o.count,
                    o.rate_kbps
                );
            }
            None => out.push_str(",,,,"),
        }
        // messages hold no commas or quotes of their own, but a CSV field must not break
        out.push_str(&error.replace([',', '"', '\n'], " "));
        out.push('\n');
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
    fn frames_csv_reads_flow_fields_and_lbf_blocks() {
        use latnet_wire::{lbf, EthernetAddress, LbfMode, LbfRepr};
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let slo = |value_ns| LbfRepr {
            mode: LbfMode::LatencySoFar,
            late: false,
            lower_ns: 700_000,
            upper_ns: None,
            value_ns,
        };
        let mut shim = Vec::new();
        lbf::build_udp_ipv4_shim(
            &mut shim,
            mac,
            mac,
            "10.0.0.1".parse().unwrap(),
            "10.0.0.6".parse().unwrap(),
            46,
            64,
            10_000,
            20_000,
            &slo(400_000),
            226,
        )
        .unwrap();
        let mut hbh = Vec::new();
        let late = LbfRepr { late: true, upper_ns: Some(2_000_000), ..slo(1) };
        lbf::build_udp_ipv6_hbh(
            &mut hbh,
            mac,
            mac,
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
            0,
            64,
            1,
            2,
            &late,
            10,
        )
        .unwrap();
        let mut c = new_capture();
        push(&mut c, Time::from_nanos(5), &shim, 300);
        push(&mut c, Time::from_nanos(6), &hbh, hbh.len() as u64 + 10);
        push(&mut c, Time::from_nanos(7), &shim[..30], 300); // cut inside the IPv4 header
        let mut bad_shim = shim.clone();
        bad_shim[42 + 2] = 7; // the shim's length octet
        push(&mut c, Time::from_nanos(8), &bad_shim, 300);
        let csv = frames_csv(&c).unwrap();
        let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(rows[0].join(","), FRAMES_CSV_HEADER);
        assert!(rows.iter().all(|r| r.len() == rows[0].len()), "{csv}");
        assert_eq!(
            rows[1].join(","),
            "5,300,74,10.0.0.1,10.0.0.6,17,10000,20000,46,0,udp-shim,latency-so-far,0,700000,,400000,\
             ,,,,"
        );
        assert_eq!(
            rows[2][..16].join(","),
            format!(
                "6,{},{},2001:db8::1,2001:db8::2,17,1,2,0,0,ipv6,latency-so-far,1,700000,2000000,1",
                hbh.len() + 10,
                hbh.len()
            )
        );
        assert_eq!(rows[3][3], "", "no flow fields");
        assert!(rows[3][20].contains("truncated") || rows[3][20].contains("ipv4"), "{csv}");
        assert_eq!(rows[4][3], "10.0.0.1", "the flow fields before the bad block");
        assert!(rows[4][20].contains("shim header"), "{csv}");
        assert!(frames_csv(&c[..c.len() - 1]).is_err(), "a damaged file");
    }

    #[test]
    fn frames_csv_reads_large_flow_options() {
        use latnet_wire::large_flow::{set_large_flow_option, LargeFlowMsg, LargeFlowOption};
        use latnet_wire::{build_udp_ipv4, build_udp_ipv6, Ecn, EthernetAddress};
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        // (switches put the option on TCP segments; the reader looks only at the IP header)
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.9".parse().unwrap());
        let mut v4 = Vec::new();
        build_udp_ipv4(&mut v4, mac, mac, a, b, 0, Ecn::NotEct, 64, 40000, 5201, 0).unwrap();
        set_large_flow_option(&mut v4, &LargeFlowOption::new(LargeFlowMsg::Register)).unwrap();
        let mut v6 = Vec::new();
        let a6 = "fd00::1".parse().unwrap();
        build_udp_ipv6(&mut v6, mac, mac, a6, a6, 0, Ecn::NotEct, 64, 40000, 5201, 0).unwrap();
        let mut report = LargeFlowOption::new(LargeFlowMsg::Report);
        report.fill(3, 100_000);
        set_large_flow_option(&mut v6, &report).unwrap();
        let mut bad = v4.clone();
        bad[34 + 2] = 9; // message type
        let mut c = new_capture();
        for (i, f) in [&v4, &v6, &bad].into_iter().enumerate() {
            push(&mut c, Time::from_nanos(i as u64), f, f.len() as u64);
        }
        let csv = frames_csv(&c).unwrap();
        let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        assert!(rows.iter().all(|r| r.len() == 21), "{csv}");
        assert_eq!(rows[1][16..].join(","), "register,0,0,0,");
        assert_eq!(rows[2][16..].join(","), "report,1,3,100000,");
        assert_eq!(rows[3][16..20].join(","), ",,,");
        assert_eq!(rows[3][20], "IPv4 option: malformed large-flow message type");
    }

    #[test]
    fn frames_csv_names_every_malformed_option_once() {
        use latnet_wire::large_flow::{set_large_flow_option, LargeFlowMsg, LargeFlowOption};
        use latnet_wire::{lbf, EthernetAddress, LbfMode, LbfRepr};
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let slo = LbfRepr {
            mode: LbfMode::LatencySoFar,
            late: false,
            lower_ns: 1,
            upper_ns: None,
            value_ns: 2,
        };
        let a = "2001:db8::1".parse().unwrap();
        let mut f = Vec::new();
        lbf::build_udp_ipv6_hbh(&mut f, mac, mac, a, a, 0, 64, 1, 2, &slo, 10).unwrap();
        set_large_flow_option(&mut f, &LargeFlowOption::new(LargeFlowMsg::Register)).unwrap();
        // hop-by-hop header at 54: the LBF option at 56 (block from 58), the large-flow one at
        // 86, a PadN at 98
        assert_eq!((f[56], f[57], f[86], f[87], f[98]), (0x3e, 28, 0x1e, 10, 1), "{f:?}");
        let mut both = f.clone();
        both[58] = 0x20; // LBF version 2
        both[88] = 7; // large-flow message type

        // the large-flow option twice: the header grows by 16 octets holding a second copy
        let mut dup = f.clone();
        let copy = dup[86..98].to_vec();
        dup.splice(98..98, [copy, vec![1, 2, 0, 0]].concat());
        dup[55] += 2;
        let plen = u16::from_be_bytes([dup[18], dup[19]]) + 16;
        dup[18..20].copy_from_slice(&plen.to_be_bytes());
        let mut c = new_capture();
        for (i, f) in [&both, &dup].into_iter().enumerate() {
            push(&mut c, Time::from_nanos(i as u64), f, f.len() as u64);
        }
        let csv = frames_csv(&c).unwrap();
        let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        assert!(rows.iter().all(|r| r.len() == 21), "{csv}");
        assert_eq!(
            rows[1][20],
            "LBF block: malformed version; IPv6 option: malformed large-flow message type"
        );
        assert_eq!(rows[2][10..16].join(","), "ipv6,latency-so-far,0,1,,2", "block still read");
        assert_eq!(rows[2][16..].join(","), ",,,,IPv6 option: malformed duplicate option");
        // an option list that does not parse fails both readers alike: one message
        let mut list = f.clone();
        list[87] = 40; // the large-flow option runs past its header
        let mut c = new_capture();
        push(&mut c, Time::ZERO, &list, list.len() as u64);
        let csv = frames_csv(&c).unwrap();
        let error = csv.lines().nth(1).unwrap().rsplit(',').next().unwrap();
        assert!(!error.is_empty() && !error.contains("; "), "{error}");
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
