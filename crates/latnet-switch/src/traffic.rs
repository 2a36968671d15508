//! latnet's own UDP traffic for emulation: a sender that plays a scenario flow's pattern in real
//! time (the simulator's [`Source`], so emission instants are the same), and a receiver that
//! measures one-way latency, loss, reordering and corruption.
//!
//! # Payload
//!
//! | bytes | field |
//! |---|---|
//! | 0..2 | magic `0x4c4e` ("LN") |
//! | 2..4 | flow index (big-endian) |
//! | 4..8 | sequence number within the flow |
//! | 8..16 | send instant, `CLOCK_MONOTONIC` ns (all namespaces of a machine share it) |
//! | 16.. | pattern: byte `k` is `(seq + k) as u8 ^ 0x5a` (the receiver checks every byte) |
//!
//! Frames are the scenario's `size` (Ethernet + IPv4 + UDP + payload), so at least 58 bytes.
//! One-way latency is the instant the receiving host's kernel stamped the datagram as it entered
//! its stack (`SO_TIMESTAMPNS`, converted to `CLOCK_MONOTONIC`) minus the send instant: it
//! includes the sender's stack, every emulated link and the switches, but not how late the
//! receiver process read the datagram (which the receiver counts: [`FlowRecv::read_late_100us`]).
//! Where the kernel gives no stamp the receiver's clock when `recvmsg` returns stands in.

use crate::sys;
use latnet_sim::lbf::{flow_address, uses_ipv6};
use latnet_sim::scenario::FlowSpec;
use latnet_sim::scenario::{Carry, Encap};
use latnet_sim::traffic::Source;
use latnet_sim::Scenario;
use latnet_units::Time;
use latnet_wire::lbf::HBH_LEN;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::io::{self, Write as _};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Bytes of the latency header at the start of the payload.
pub const HEADER_LEN: usize = 16;
/// Ethernet + IPv4 + UDP.
pub const HEADERS: usize = 42;
/// Ethernet + IPv6, where a hop-by-hop header starts.
const IPV6_HEADERS: usize = 54;
/// Smallest frame the traffic tools send.
pub const MIN_FRAME: u32 = (HEADERS + HEADER_LEN) as u32;
const MAGIC: u16 = 0x4c4e;
/// The simulator's RNG stream numbering of flows.
const STREAM_FLOW: u64 = 1 << 32;

/// Fill `buf` (the UDP payload) for packet `seq` of `flow`, stamped `send_ns`.
pub fn fill_payload(buf: &mut [u8], flow: u16, seq: u32, send_ns: u64) {
    if buf.len() < HEADER_LEN {
        return;
    }
    buf[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    buf[2..4].copy_from_slice(&flow.to_be_bytes());
    buf[4..8].copy_from_slice(&seq.to_be_bytes());
    buf[8..16].copy_from_slice(&send_ns.to_be_bytes());
    for (k, b) in buf[HEADER_LEN..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(k as u8) ^ 0x5a;
    }
}

/// A parsed payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Flow index.
    pub flow: u16,
    /// Sequence number.
    pub seq: u32,
    /// Send instant (ns).
    pub send_ns: u64,
    /// Every pattern byte was intact.
    pub intact: bool,
}

/// The sequence number and send instant of a payload written by [`fill_payload`] (without
/// checking the rest of it); `None` if it is not one. The switches read this at ingress.
pub fn payload_stamp(buf: &[u8]) -> Option<(u32, u64)> {
    let b: &[u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
    (u16::from_be_bytes([b[0], b[1]]) == MAGIC).then(|| {
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[8..16]);
        (u32::from_be_bytes([b[4], b[5], b[6], b[7]]), u64::from_be_bytes(t))
    })
}

/// Parse a payload written by [`fill_payload`]; `None` if it is not one.
pub fn parse_payload(buf: &[u8]) -> Option<Stamp> {
    let (seq, send_ns) = payload_stamp(buf)?;
    let flow = u16::from_be_bytes([buf[2], buf[3]]);
    let intact = buf[HEADER_LEN..]
        .iter()
        .enumerate()
        .all(|(k, &b)| b == (seq as u8).wrapping_add(k as u8) ^ 0x5a);
    Some(Stamp { flow, seq, send_ns, intact })
}

/// What a sender did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendReport {
    /// Flow name.
    pub flow: String,
    /// Packets sent.
    pub sent: u64,
    /// Packets the socket refused (counted as sent: the scenario created them).
    pub send_errors: u64,
    /// Largest delay of a send behind its scheduled instant (ns).
    pub late_max_ns: u64,
    /// Sends more than 100 us behind their scheduled instants.
    #[serde(default)]
    pub late_100us: u64,
    /// A TCP flow's account (its `sent` is the data segments sent; the lateness, its
    /// connection's start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<crate::tcpflow::TcpSent>,
}

fn flow_index(sc: &Scenario, name: &str) -> io::Result<usize> {
    sc.flows.iter().position(|f| f.name == name).ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("no flow named {name:?} in the scenario"))
    })
}

/// The bytes a flow's UDP payload starts with: the LBF shim (and block) of the simulator's
/// template for flows with an SLO carried as a UDP shim, nothing otherwise; and, for
/// `carry = "timestamp"`, where in the payload the sender stamps its clock.
pub fn payload_prefix(sc: &Scenario, f: &FlowSpec) -> io::Result<(Vec<u8>, Option<usize>)> {
    let Some(slo) = f.slo.as_ref().filter(|s| s.encap == Encap::UdpShim) else {
        return Ok((Vec::new(), None));
    };
    let (t, block) = template(sc, f)?;
    let stamp = (slo.carry == Carry::Timestamp).then(|| block.checked_sub(HEADERS)).flatten();
    Ok((t.get(HEADERS..).unwrap_or_default().to_vec(), stamp))
}

/// Where the receiver of a flow with an SLO reads the LBF block of its packets: for the late
/// flag, and in damper mode for the residue it holds each packet by before handing it on
/// (gLBF's final damper, as the simulator's receiver does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockAt {
    /// At this offset of the UDP payload (the shim).
    Payload(usize),
    /// At this offset of the hop-by-hop header, which the kernel hands over beside the payload.
    HopOptions(usize),
}

/// `None` for flows without an SLO.
fn block_at(sc: &Scenario, f: &FlowSpec) -> io::Result<Option<BlockAt>> {
    if f.slo.is_none() {
        return Ok(None);
    }
    if let Some((_, at)) = hop_options(sc, f)? {
        return Ok(Some(BlockAt::HopOptions(at)));
    }
    let (_, block) = template(sc, f)?;
    Ok(block.checked_sub(HEADERS).map(BlockAt::Payload))
}

/// For a flow whose SLO rides in an IPv6 hop-by-hop option: the extension header of the
/// simulator's template (the kernel sends it as given) and where in it the LBF block sits.
pub fn hop_options(sc: &Scenario, f: &FlowSpec) -> io::Result<Option<(Vec<u8>, usize)>> {
    if !uses_ipv6(f) {
        return Ok(None);
    }
    let (t, block) = template(sc, f)?;
    let hbh = t.get(IPV6_HEADERS..IPV6_HEADERS + HBH_LEN).unwrap_or_default().to_vec();
    Ok(Some((hbh, block.saturating_sub(IPV6_HEADERS))))
}

fn template(sc: &Scenario, f: &FlowSpec) -> io::Result<(Vec<u8>, usize)> {
    crate::core::lbf_template(sc, f)
        .ok_or_else(|| io::Error::other(format!("flow {:?}: no LBF template", f.name)))
}

/// Octets in front of the payload: Ethernet, IP (and the hop-by-hop header), UDP.
fn header_len(f: &FlowSpec) -> usize {
    if uses_ipv6(f) {
        IPV6_HEADERS + HBH_LEN + 8
    } else {
        HEADERS
    }
}

/// Bytes of a flow's largest tag stack: its `size` includes them, but the switch the source is
/// attached to pushes them (the source's tagger), so the host sends a frame that much shorter.
fn tag_bytes(f: &FlowSpec) -> usize {
    4 * f.tag_stacks().map(<[u16]>::len).max().unwrap_or(0)
}

fn check_size(f: &FlowSpec, prefix: usize) -> io::Result<()> {
    let least = MIN_FRAME as usize + (header_len(f) - HEADERS) + prefix + tag_bytes(f);
    if (f.size as usize) < least || f.size > 1514 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "flow {:?}: emulation sends frames of {least} to 1514 bytes (latency stamp, \
                 no IP fragmentation, 4 bytes per tag), the scenario says {}",
                f.name, f.size
            ),
        ));
    }
    Ok(())
}

/// The emission instants of flow `i` of `sc`, from its time zero: the simulator's (same
/// pattern, same seeded stream), up to the flow's stop time or packet count. Packet `k` of
/// the flow (its sequence number) is the `k`-th.
#[derive(Debug)]
pub struct Emissions {
    rng: ChaCha8Rng,
    source: Source,
    stop: Time,
    left: Option<u64>,
}

impl Emissions {
    /// Flow `i`'s instants.
    pub fn new(sc: &Scenario, i: usize) -> Emissions {
        let f = &sc.flows[i];
        let mut rng = ChaCha8Rng::seed_from_u64(sc.sim.seed);
        rng.set_stream(STREAM_FLOW + i as u64);
        let source = Source::new(f.traffic.clone(), f.size, f.start).with_jitter(f.jitter);
        Emissions { rng, source, stop: f.stop, left: f.count }
    }
}

impl Iterator for Emissions {
    type Item = Time;

    fn next(&mut self) -> Option<Time> {
        if self.left == Some(0) {
            return None;
        }
        let t = self.source.next_emission(&mut self.rng).filter(|&t| t < self.stop)?;
        self.left = self.left.map(|n| n - 1);
        Some(t)
    }
}

/// Play flow `name` of `sc` from this host: packet `k` leaves at `t0_ns` + the simulator's
/// emission instant `k` ([`Emissions`]). Blocks until the flow's stop time or packet count.
/// A TCP flow runs on Linux's TCP ([`crate::tcpflow::send`]).
pub fn send(sc: &Scenario, name: &str, t0_ns: u64) -> io::Result<SendReport> {
    let i = flow_index(sc, name)?;
    let f = &sc.flows[i];
    if f.traffic.tcp().is_some() {
        return crate::tcpflow::send(sc, i, t0_ns);
    }
    let (prefix, stamp_at) = payload_prefix(sc, f)?;
    let mut hbh = hop_options(sc, f)?;
    check_size(f, prefix.len())?;
    let src = SocketAddr::new(flow_address(sc, f, f.src), f.src_port);
    let dst = SocketAddr::new(flow_address(sc, f, f.dst), f.dst_port);
    let sock = UdpSocket::bind(src)
        .map_err(|e| io::Error::new(e.kind(), format!("bind {src} for flow {name:?}: {e}")))?;
    let dscp = latnet_dataplane::packet::dscp_from_priority(f.priority);
    let opts = match &hbh {
        // (also with carry = "timestamp", whose packets bring their own option: setting it
        // here fails early and by name without CAP_NET_RAW)
        Some((h, _)) => sys::set_tclass(sock.as_raw_fd(), dscp << 2)
            .and_then(|()| sys::set_hop_options(sock.as_raw_fd(), h)),
        None => sys::set_tos(sock.as_raw_fd(), dscp << 2),
    };
    opts.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("socket options of flow {name:?} (TOS / IPv6 options): {e}"),
        )
    })?;
    sys::set_sndbuf(sock.as_raw_fd(), 4 << 20);
    if !prefix.is_empty() {
        // Switches rewrite the LBF block: UDP over IPv4 without a checksum.
        sys::set_udp_no_checksum(sock.as_raw_fd())?;
    }
    sys::precise_timers();
    sys::install_stop_handler();
    let mut emissions = Emissions::new(sc, i);
    // the payload of a packet whose source pushes `tags` (the frame keeps its size)
    let payload_len = |tags: &[u16]| f.size as usize - 4 * tags.len() - header_len(f);
    let mut payload = vec![0u8; f.tag_stacks().map(payload_len).max().unwrap_or(0)];
    payload[..prefix.len()].copy_from_slice(&prefix);
    let mut rep = SendReport {
        flow: f.name.clone(),
        sent: 0,
        send_errors: 0,
        late_max_ns: 0,
        late_100us: 0,
        tcp: None,
    };
    while !sys::stop_requested() {
        let Some(t) = emissions.next() else { break };
        let due = t0_ns.saturating_add(t.as_nanos());
        let mut now = sys::mono_ns();
        if now < due {
            sys::sleep_until(due);
            now = sys::mono_ns();
        }
        let late = now.saturating_sub(due);
        let payload = &mut payload[..payload_len(f.tags_at(t))];
        rep.late_max_ns = rep.late_max_ns.max(late);
        rep.late_100us += u64::from(late > 100_000);
        let stamp = sys::mono_ns();
        // carry = "timestamp": the switches read the same clock (CLOCK_MONOTONIC)
        if let Some(mut b) = stamp_at.and_then(|o| latnet_wire::lbf::block_mut(payload, o)) {
            b.set_value_ns(stamp);
        }
        fill_payload(&mut payload[prefix.len()..], i as u16, rep.sent as u32, stamp);
        let sent = match (hbh.as_mut().filter(|_| carry_timestamp(f)), dst) {
            // in a hop-by-hop option: this packet's own option, in the same system call
            (Some((h, at)), SocketAddr::V6(dst6)) => {
                if let Some(mut b) = latnet_wire::lbf::block_mut(h, *at) {
                    b.set_value_ns(stamp);
                }
                sys::send_with_hop_options(sock.as_raw_fd(), payload, dst6, h)
            }
            _ => sock.send_to(payload, dst),
        };
        if sent.is_err() {
            rep.send_errors += 1;
        }
        rep.sent += 1;
    }
    Ok(rep)
}

fn carry_timestamp(f: &FlowSpec) -> bool {
    f.slo.as_ref().is_some_and(|s| s.carry == Carry::Timestamp)
}

/// What a receiver saw of one flow.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FlowRecv {
    /// Flow name.
    pub flow: String,
    /// Packets received (duplicates excluded).
    pub received: u64,
    /// Frame bytes received (UDP payload + the headers in front of it: 42 octets over IPv4).
    pub rx_bytes: u64,
    /// Packets whose payload was not intact.
    pub corrupted: u64,
    /// Packets that arrived after a higher sequence number of the same flow.
    pub reordered: u64,
    /// Packets received twice.
    pub duplicates: u64,
    /// Datagrams on the flow's port that were not latnet payloads of this flow.
    pub foreign: u64,
    /// Packets received that the kernel stamped on arrival (the rest were timed when read).
    #[serde(default)]
    pub stamped: u64,
    /// Of those, packets read more than 100 us after the kernel stamped them (kept out of the
    /// latencies, which run to the stamp).
    #[serde(default)]
    pub read_late_100us: u64,
    /// The latest read after a stamp (ns).
    #[serde(default)]
    pub read_late_max_ns: u64,
    /// Packets whose stamp, converted to `CLOCK_MONOTONIC`, fell after their read: the
    /// conversion's error (`KernelClock`; such a packet's latency runs to the read).
    #[serde(default)]
    pub stamp_ahead: u64,
    /// By how much such a stamp was ahead of the read, at most (ns).
    #[serde(default)]
    pub stamp_ahead_max_ns: u64,
    /// A TCP flow's account (its `received` is the data segments received, `rx_bytes` the
    /// bytes read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<crate::tcpflow::TcpRecv>,
}

/// What a receiver saw.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecvReport {
    /// Host name.
    pub host: String,
    /// Per flow addressed to the host.
    pub flows: Vec<FlowRecv>,
}

struct RxFlow {
    index: usize,
    skip: usize,
    /// Octets of the frame in front of the UDP payload.
    headers: usize,
    /// Where the flow's packets carry their LBF block.
    block_at: Option<BlockAt>,
    /// Damper mode: hold each packet by the residue in its block.
    hold: bool,
    sock: UdpSocket,
    stats: FlowRecv,
    seen: Vec<u64>,
    max_seq: Option<u32>,
    log: io::BufWriter<std::fs::File>,
}

/// The header of a receiver's packet log, `packets-<flow>.csv` (see [`recv`]).
pub const PACKET_LOG_HEADER: &str = "seq,send_ns,recv_ns,intact,late\n";

/// Receive every flow addressed to host `host` until `until_ns` (`CLOCK_MONOTONIC`) or a
/// signal; writes `packets-<flow>.csv` (`seq,send_ns,recv_ns,intact,late`, arrival order; `late`
/// is the LBF block's late flag, 0 for flows without an SLO) into `dir`. `recv_ns` is the
/// kernel's arrival stamp on `CLOCK_MONOTONIC` (the read instant where it gave none); a
/// damper-mode flow's includes the final hold (the residue its packet carries). A TCP flow's
/// connection is accepted and read to its end ([`crate::tcpflow::TcpRx`]; with `t0_ns`, the
/// scenario's time zero, its bytes are counted per interval of the scenario's time series).
/// `ready` is called once every socket is bound: from then on nothing sent to the host is lost
/// for want of a receiver.
pub fn recv(
    sc: &Scenario,
    host: &str,
    until_ns: u64,
    t0_ns: Option<u64>,
    dir: &Path,
    ready: impl FnOnce() -> io::Result<()>,
) -> io::Result<RecvReport> {
    let h = sc
        .node_index(host)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no node {host:?}")))?;
    std::fs::create_dir_all(dir)?;
    let mut flows = Vec::new();
    let mut tcp = Vec::new();
    for (i, f) in sc.flows.iter().enumerate().filter(|(_, f)| f.dst == h) {
        if f.traffic.tcp().is_some() {
            tcp.push(crate::tcpflow::TcpRx::bind(sc, i, t0_ns, until_ns)?);
            continue;
        }
        let addr = SocketAddr::new(flow_address(sc, f, h), f.dst_port);
        let sock = UdpSocket::bind(addr).map_err(|e| {
            io::Error::new(e.kind(), format!("bind {addr} for flow {:?}: {e}", f.name))
        })?;
        sock.set_nonblocking(true)?;
        let block_at = block_at(sc, f)?;
        if matches!(block_at, Some(BlockAt::HopOptions(_))) {
            sys::set_recv_hop_options(sock.as_raw_fd()).map_err(|e| {
                io::Error::new(e.kind(), format!("IPV6_RECVHOPOPTS for flow {:?}: {e}", f.name))
            })?;
        }
        sys::set_rx_timestamps(sock.as_raw_fd()).map_err(|e| {
            io::Error::new(e.kind(), format!("SO_TIMESTAMPNS for flow {:?}: {e}", f.name))
        })?;
        sys::set_rcvbuf(sock.as_raw_fd(), 16 << 20);
        let file = std::fs::File::create(dir.join(format!("packets-{}.csv", f.name)))?;
        let mut log = io::BufWriter::new(file);
        log.write_all(PACKET_LOG_HEADER.as_bytes())?;
        flows.push(RxFlow {
            index: i,
            skip: payload_prefix(sc, f)?.0.len(),
            headers: header_len(f),
            block_at,
            hold: f.slo.is_some_and(|s| s.carry == Carry::Damper),
            sock,
            stats: FlowRecv { flow: f.name.clone(), ..FlowRecv::default() },
            seen: Vec::new(),
            max_seq: None,
            log,
        });
    }
    sys::install_stop_handler();
    ready()?;
    let udp = flows.len();
    let mut fds: Vec<_> = flows.iter().map(|f| f.sock.as_raw_fd()).collect();
    let mut ready = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut hbh = Vec::new();
    let mut clock = sys::KernelClock::new(0);
    loop {
        let now = sys::mono_ns();
        clock.refresh(now);
        if now >= until_ns || sys::stop_requested() || flows.is_empty() && tcp.is_empty() {
            break;
        }
        fds.truncate(udp);
        fds.extend(tcp.iter().map(crate::tcpflow::TcpRx::fd));
        sys::poll_readable(&fds, Some((until_ns - now).min(100_000_000)), &mut ready)?;
        for (k, t) in tcp.iter_mut().enumerate() {
            if ready.get(udp + k).copied().unwrap_or(false) {
                t.on_ready(&mut buf)?;
            }
        }
        for (k, fl) in flows.iter_mut().enumerate() {
            if !ready.get(k).copied().unwrap_or(false) {
                continue;
            }
            loop {
                // (a hop-by-hop header only where the flow's block rides in it)
                let (n, stamp) = match sys::recv_stamped(fl.sock.as_raw_fd(), &mut buf, &mut hbh) {
                    Ok(got) => got,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                let read = sys::mono_ns();
                record(fl, &buf[..n], &hbh, clock.arrival(stamp), read)?;
            }
        }
    }
    let mut rep = RecvReport { host: host.to_owned(), flows: Vec::new() };
    for mut fl in flows {
        fl.log.flush()?;
        rep.flows.push(fl.stats);
    }
    for mut t in tcp {
        t.close();
        rep.flows.push(FlowRecv {
            flow: sc.flows[t.flow].name.clone(),
            received: t.stats.data_segs_in,
            rx_bytes: t.stats.bytes,
            tcp: Some(t.stats),
            ..FlowRecv::default()
        });
    }
    Ok(rep)
}

/// Account for one datagram of `fl` read at `read_ns`, which the kernel stamped on arrival at
/// `arrived_ns` (if it did; both `CLOCK_MONOTONIC`).
fn record(
    fl: &mut RxFlow,
    payload: &[u8],
    hbh: &[u8],
    arrived_ns: Option<u64>,
    read_ns: u64,
) -> io::Result<()> {
    let Some(s) = parse_payload(payload.get(fl.skip..).unwrap_or_default())
        .filter(|s| usize::from(s.flow) == fl.index)
    else {
        fl.stats.foreign += 1;
        return Ok(());
    };
    let word = (s.seq / 64) as usize;
    if fl.seen.len() <= word {
        fl.seen.resize(word + 1, 0);
    }
    let bit = 1u64 << (s.seq % 64);
    if fl.seen[word] & bit != 0 {
        fl.stats.duplicates += 1;
        return Ok(());
    }
    fl.seen[word] |= bit;
    if fl.max_seq.is_some_and(|m| s.seq < m) {
        fl.stats.reordered += 1;
    }
    fl.max_seq = Some(fl.max_seq.map_or(s.seq, |m| m.max(s.seq)));
    fl.stats.received += 1;
    let recv_ns = match arrived_ns {
        Some(at) => {
            let late = read_ns.saturating_sub(at);
            fl.stats.stamped += 1;
            fl.stats.read_late_100us += u64::from(late > 100_000);
            fl.stats.read_late_max_ns = fl.stats.read_late_max_ns.max(late);
            // not after the read: the clocks' offset is good to a microsecond, but a
            // preemption while it was read can leave it some microseconds off (counted)
            let ahead = at.saturating_sub(read_ns);
            fl.stats.stamp_ahead += u64::from(ahead > 0);
            fl.stats.stamp_ahead_max_ns = fl.stats.stamp_ahead_max_ns.max(ahead);
            at.min(read_ns)
        }
        None => read_ns,
    };
    fl.stats.rx_bytes += (payload.len() + fl.headers) as u64;
    if !s.intact {
        fl.stats.corrupted += 1;
    }
    let block = fl
        .block_at
        .and_then(|h| match h {
            BlockAt::Payload(o) => payload.get(o..),
            BlockAt::HopOptions(o) => hbh.get(o..),
        })
        .and_then(|b| latnet_wire::lbf::LbfBlock::new_checked(b).ok());
    // a damper-mode packet reaches the application when the last hop's residue has passed
    let hold = block.as_ref().filter(|_| fl.hold).map_or(0, |b| b.value_ns());
    let late = block.is_some_and(|b| b.late());
    let recv_ns = recv_ns.saturating_add(hold);
    let (intact, late) = (u8::from(s.intact), u8::from(late));
    writeln!(fl.log, "{},{},{},{intact},{late}", s.seq, s.send_ns, recv_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trips_and_detects_corruption() {
        let mut b = vec![0u8; 100];
        fill_payload(&mut b, 3, 77, 123_456_789);
        let s = parse_payload(&b).unwrap();
        assert_eq!((s.flow, s.seq, s.send_ns, s.intact), (3, 77, 123_456_789, true));
        b[50] ^= 1;
        assert!(!parse_payload(&b).unwrap().intact);
        assert!(parse_payload(&b[..10]).is_none());
        b[0] = 0;
        assert!(parse_payload(&b).is_none());
    }

    /// A received packet's latency runs to its kernel stamp, read late or not; a stamp the
    /// clock conversion put after the read is counted (and by how much) and the read stands.
    #[test]
    fn a_stamp_after_the_read_is_counted_and_the_read_stands() {
        let dir = std::env::temp_dir().join(format!("latnet-rx-ahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("packets-f.csv");
        let mut fl = RxFlow {
            index: 0,
            skip: 0,
            headers: 42,
            block_at: None,
            hold: false,
            sock: UdpSocket::bind("127.0.0.1:0").unwrap(),
            stats: FlowRecv::default(),
            seen: Vec::new(),
            max_seq: None,
            log: io::BufWriter::new(std::fs::File::create(&path).unwrap()),
        };
        let mut b = vec![0u8; 100];
        for (seq, arrived, read) in
            [(0, Some(1_000), 151_000), (1, Some(2_005), 2_000), (2, Some(3_700), 3_000)]
        {
            fill_payload(&mut b, 0, seq, 500);
            record(&mut fl, &b, &[], arrived, read).unwrap();
        }
        fill_payload(&mut b, 0, 3, 500);
        record(&mut fl, &b, &[], None, 4_000).unwrap();
        fl.log.flush().unwrap();
        let st = &fl.stats;
        assert_eq!((st.received, st.stamped, st.read_late_100us), (4, 3, 1));
        assert_eq!((st.read_late_max_ns, st.stamp_ahead, st.stamp_ahead_max_ns), (150_000, 2, 700));
        let log = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let recv: Vec<_> = log.lines().map(|l| l.split(',').nth(2).unwrap()).collect();
        assert_eq!(recv, ["1000", "2000", "3000", "4000"]);
    }

    /// A tagged flow's size includes its tags, which the switch pushes: the host's frame is
    /// shorter by 4 bytes per tag, and a size that leaves no room for the latency stamp is
    /// refused with the flow's name and the least size.
    #[test]
    fn tagged_flow_sizes_leave_room_for_the_tags() {
        let text = "[sim]\nduration = \"1s\"\n[[nodes]]\nname = \"h1\"\nkind = \"host\"\n\
                    [[nodes]]\nname = \"h2\"\nkind = \"host\"\n[[links]]\na = \"h1\"\nb = \"h2\"\nrate = \"1Gbps\"\n\
                    [[flows]]\nname = \"t\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 300\ntags = [10, 20]\n\
                    traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n";
        let sc = Scenario::from_str_named("t.toml", text).unwrap();
        let mut f = sc.flows[0].clone();
        assert_eq!(tag_bytes(&f), 8);
        let least = MIN_FRAME as usize + 8;
        f.size = least as u32;
        assert!(check_size(&f, 0).is_ok());
        f.size -= 1;
        let e = check_size(&f, 0).unwrap_err().to_string();
        assert!(e.contains("\"t\"") && e.contains(&format!("frames of {least} to 1514")), "{e}");
    }

    /// A flow whose SLO rides in an IPv6 hop-by-hop option sends its block there, not in the
    /// payload: the option (type 0x3E) is the simulator's, the payload carries no shim, and
    /// the headers in front of the payload grow by the IPv6 and hop-by-hop octets.
    #[test]
    fn ipv6_flows_carry_the_block_in_a_hop_by_hop_option() {
        let text = "[sim]\nduration = \"1s\"\n[defaults.link]\nrate = \"100Mbps\"\n\
                    [[nodes]]\nname = \"h1\"\nkind = \"host\"\n\
                    [[nodes]]\nname = \"s1\"\nkind = \"switch\"\n\
                    [[nodes]]\nname = \"h2\"\nkind = \"host\"\n\
                    [[links]]\na = \"h1\"\nb = \"s1\"\n[[links]]\na = \"s1\"\nb = \"h2\"\n\
                    [[flows]]\nname = \"v6\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 300\n\
                    slo = { lower = \"1ms\", encap = \"ipv6\", carry = \"timestamp\" }\n\
                    traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n";
        let sc = Scenario::from_str_named("t.toml", text).unwrap();
        let f = &sc.flows[0];
        assert_eq!(payload_prefix(&sc, f).unwrap(), (Vec::new(), None));
        let (hbh, at) = hop_options(&sc, f).unwrap().unwrap();
        assert_eq!(hbh.len(), HBH_LEN);
        assert_eq!(hbh[2], latnet_wire::lbf::LBF_OPTION_TYPE);
        let mut hbh = hbh;
        latnet_wire::lbf::block_mut(&mut hbh, at).unwrap().set_value_ns(42);
        let (t, block) = crate::core::lbf_template(&sc, f).unwrap();
        assert_eq!(block, IPV6_HEADERS + at);
        assert_eq!(&t[IPV6_HEADERS + 2..IPV6_HEADERS + 4], &hbh[2..4], "option type and length");
        assert_eq!(header_len(f), 14 + 40 + HBH_LEN + 8);
        assert_eq!(flow_address(&sc, f, f.src).to_string(), "2001:db8::a00:1");
        assert_eq!(block_at(&sc, f).unwrap(), Some(BlockAt::HopOptions(at)));
        // the receiver finds the block (late flag, a damper's residue) where it sits, in either
        // carrier: past the shim header in the payload, or where the sender puts it in the option
        for (encap, want) in [
            ("ipv6", BlockAt::HopOptions(at)),
            ("udp-shim", BlockAt::Payload(latnet_wire::lbf::SHIM_HEADER_LEN)),
        ] {
            let text = text.replace(
                "lower = \"1ms\", encap = \"ipv6\", carry = \"timestamp\"",
                &format!("carry = \"damper\", encap = \"{encap}\""),
            ) + "[lbf]\ndamper_bound = \"100us\"\n";
            let sc = Scenario::from_str_named("t.toml", &text).unwrap();
            assert_eq!(block_at(&sc, &sc.flows[0]).unwrap(), Some(want), "{encap}");
        }
    }
}
