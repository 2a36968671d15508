//! Real Linux TCP with the host side of switch-assisted pacing (seed 003) on emulated testbeds.
//!
//! `latnet-switch tcp-send` is a bulk sender on the kernel's TCP (congestion control chosen by
//! name, cubic by default). With `--register yes` it does what the seed's hosts do:
//!
//! * its SYN carries the REGISTER large-flow option ([`latnet_wire::large_flow`]), put in by
//!   the kernel as an IPv4 option (`IP_OPTIONS`) or, toward an IPv6 receiver, in a hop-by-hop
//!   extension header (`IPV6_HOPOPTS`, needs `CAP_NET_RAW`), and removed again once connected;
//! * a packet socket watches the connection's packets toward this host; every REPORT a switch
//!   wrote (in the SYN-ACK, and on later ACKs when the count at the bottleneck changes) sets
//!   the socket's `SO_MAX_PACING_RATE` to the reported share `rate / N` (converted with
//!   [`pacing_for_share`]: the kernel paces TCP segments, a switch port's rate counts Ethernet
//!   frames). The kernel's TCP paces by itself (no `fq` needed).
//!
//! With `--pace htb:DEV` the sender shapes like the seed's hosts do instead: it puts an HTB
//! qdisc with one class on `DEV` (the host's interface) and sets the class's rate to the
//! reported share on every REPORT (`tc class change`; HTB counts Ethernet frames like the
//! switch port). The qdisc is removed when the sender ends.
//!
//! `latnet-switch tcp-recv` accepts connections and reads them to the end, counting bytes per
//! connection in 100 ms bins of one shared clock, so flows can be compared over time.
//!
//! Both are bounded in time; errors name the address. Reports are JSON.

use crate::sys;
use latnet_wire::{large_flow_option, parse_headers, LargeFlowMsg, LargeFlowOption};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Width of the receiver's time bins.
pub const BIN_MS: u64 = 100;

/// What the sender should do.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Receiver address (IPv4 or IPv6).
    pub dst: SocketAddr,
    /// How long to send.
    pub seconds: f64,
    /// Congestion control (`cubic`, `reno`, `bbr`).
    pub cc: String,
    /// Register as a large flow and pace at the reported share.
    pub register: bool,
    /// How to pace at the reported share (with `register`).
    pub pace: Pace,
}

/// How a registered sender slows down to its reported share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pace {
    /// The socket's `SO_MAX_PACING_RATE` (the kernel's TCP paces the connection).
    Socket,
    /// An HTB class on the host's interface (the seed's hosts), changed with `tc`.
    Htb {
        /// The host interface the connection leaves by.
        dev: String,
    },
    /// Not at all: read the reports only (the counter alone, as a scenario's
    /// `large_flow_pacing = "none"`).
    Off,
}

impl Pace {
    /// Parse `socket`, `htb:DEV` or `none`.
    pub fn parse(s: &str) -> Result<Pace, String> {
        match s.split_once(':') {
            None if s == "socket" => Ok(Pace::Socket),
            None if s == "none" => Ok(Pace::Off),
            Some(("htb", dev)) if !dev.is_empty() && !dev.contains(char::is_whitespace) => {
                Ok(Pace::Htb { dev: dev.to_owned() })
            }
            _ => Err(format!("expected socket, htb:DEV (an interface name) or none, got {s:?}")),
        }
    }
}

/// Burst and ceiling burst of the sender's HTB class: two full frames, as in the seed.
const HTB_BURST: u32 = 2 * 1514;

/// Run `tc ARGS`; an error carries tc's message.
fn tc(args: &[String]) -> io::Result<()> {
    run_tc(None, args).map(drop)
}

/// Run `tc ARGS` (iproute2) in the network namespace of the file `netns` (through `nsenter`;
/// `None`: this process's); its output, or an error carrying the command and what `tc` said.
pub(crate) fn run_tc(netns: Option<&std::path::Path>, args: &[String]) -> io::Result<String> {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = std::process::Command::new("nsenter");
            c.arg(format!("--net={}", ns.display())).arg("--").arg("tc");
            c
        }
        None => std::process::Command::new("tc"),
    };
    let out = cmd
        .args(args)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("tc {}: {e}", args.join(" "))))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let msg = String::from_utf8_lossy(&out.stderr);
    Err(io::Error::other(format!("tc {}: {}", args.join(" "), msg.trim())))
}

/// `tc` arguments that set the sender's HTB class on `dev` to `rate_bps` with bursts of `burst`
/// bytes (`verb`: `replace` to create it, `change` to change it).
fn htb_class_args(verb: &str, dev: &str, rate_bps: u64, burst: u32) -> Vec<String> {
    let b = format!("{burst}b");
    let r = format!("{rate_bps}bit");
    ["class", verb, "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &r, "ceil", &r]
        .into_iter()
        .chain(["burst", &b, "cburst", &b, "quantum", "1514"])
        .map(str::to_owned)
        .collect()
}

/// The sender's HTB qdisc on its interface: one class, every frame in it, at `rate_bps` until
/// the first REPORT (`tcp-send`: 10 Gbit/s, unlimited; a scenario's flow: its host queue's
/// rate, as the simulator's HTB shaper starts). Removed when dropped, so a sender that fails
/// half-way leaves the interface as it was.
pub(crate) struct HtbShaper {
    dev: String,
}

impl HtbShaper {
    pub(crate) fn install(dev: &str, rate_bps: u64, burst: u32) -> io::Result<HtbShaper> {
        let root = ["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"];
        tc(&root.map(str::to_owned))?;
        let shaper = HtbShaper { dev: dev.to_owned() };
        tc(&htb_class_args("replace", dev, rate_bps, burst))?;
        Ok(shaper)
    }
}

impl Drop for HtbShaper {
    fn drop(&mut self) {
        let _ = tc(&["qdisc", "del", "dev", &self.dev, "root"].map(str::to_owned));
    }
}

/// A REPORT the sender acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// Milliseconds since the sender started.
    pub t_ms: u64,
    /// Large flows at the bottleneck.
    pub count: u16,
    /// The bottleneck port's rate, bit/s.
    pub rate_bps: u64,
    /// `SO_MAX_PACING_RATE` set, bytes/s of TCP payload (0 when pacing with HTB).
    pub pacing_bytes_per_s: u64,
    /// The HTB class's rate set, bit/s of Ethernet frames (0 when pacing the socket).
    #[serde(default)]
    pub htb_rate_bps: u64,
}

/// What the sender did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendReport {
    /// Receiver address.
    pub dst: String,
    /// Congestion control used.
    pub cc: String,
    /// Whether the SYN carried REGISTER.
    pub register: bool,
    /// How the share was applied: `socket` or `htb:DEV`.
    #[serde(default)]
    pub pace: String,
    /// Bytes handed to the kernel.
    pub bytes: u64,
    /// Seconds spent sending.
    pub seconds: f64,
    /// REPORT options seen on the connection (the same report repeated counts each time).
    pub reports_seen: u64,
    /// Packets of the connection with a malformed large-flow option (ignored).
    pub malformed_options: u64,
    /// Reports whose pacing cap the kernel (or `tc`) refused (each is retried on the next
    /// report).
    pub pacing_errors: u64,
    /// Each change of the reported share, in order.
    pub applied: Vec<Applied>,
    /// From `TCP_INFO` just before closing: the kernel's pacing rate and its cap (bytes/s;
    /// the cap is `u64::MAX` when never set), retransmitted segments and smoothed RTT.
    pub pacing_rate: u64,
    /// See `pacing_rate`.
    pub max_pacing_rate: u64,
    /// See `pacing_rate`.
    pub total_retrans: u32,
    /// See `pacing_rate`.
    pub rtt_us: u32,
}

fn named(what: &str, addr: impl std::fmt::Display, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {addr}: {e}"))
}

/// The socket option that puts the REGISTER option in the SYN toward `dst`: level, name and
/// bytes. IPv4: the option itself (kind, length, data) for `IP_OPTIONS`. IPv6: a whole
/// hop-by-hop extension header for `IPV6_HOPOPTS` (the kernel fills in its next-header octet),
/// the option aligned and padded by the wire crate's writer, as the switch writes it.
pub(crate) fn register_option(dst: &SocketAddr) -> (libc::c_int, libc::c_int, Vec<u8>) {
    let (level, name) = register_sockopt(dst);
    let opt = LargeFlowOption::new(LargeFlowMsg::Register);
    if dst.is_ipv4() {
        let data = opt.to_data();
        let mut o = vec![latnet_wire::large_flow::IPV4_KIND, (2 + data.len()) as u8];
        o.extend_from_slice(&data);
        return (level, name, o);
    }
    let mut h = vec![0u8; 2 + 14]; // next header, length, the option area
    let mut w = latnet_wire::Ipv6OptionsWriter::new(&mut h[2..]);
    let n = w.push(&opt).and_then(|()| w.finish()).expect("REGISTER fits 14 bytes");
    h.truncate(2 + n);
    h[1] = ((2 + n) / 8 - 1) as u8; // in 8-byte units, not counting the first 8
    (level, name, h)
}

/// Level and name of the socket option that carries IP options toward `dst`.
pub(crate) fn register_sockopt(dst: &SocketAddr) -> (libc::c_int, libc::c_int) {
    if dst.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_OPTIONS)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_HOPOPTS)
    }
}

/// What a frame adds to a full segment's payload: TCP header (20 bytes, 32 with the timestamp
/// option, Linux's default), IPv4 or IPv6 header and Ethernet header.
fn frame_overhead(timestamps: bool, v6: bool) -> u64 {
    20 + if timestamps { 12 } else { 0 } + if v6 { 40 } else { 20 } + 14
}

/// The pacing cap (bytes/s) for a reported share of `share_bps` bit/s of frames, for segments
/// of `mss` payload bytes with or without TCP timestamps, over IPv4 or IPv6. The kernel's TCP
/// paces payload bytes (the segment before its headers are pushed) while a switch port's rate
/// counts whole frames, so full-sized segments paced at the cap fill exactly the share.
pub fn pacing_for_share(share_bps: u64, mss: u32, timestamps: bool, v6: bool) -> u64 {
    let mss = u64::from(mss);
    share_bps / 8 * mss / (mss + frame_overhead(timestamps, v6))
}

/// What the watcher saw and did (copied into the [`SendReport`]).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) reports: u64,
    pub(crate) malformed: u64,
    pub(crate) pacing_errors: u64,
    pub(crate) applied: Vec<Applied>,
}

/// The large-flow option of a frame from `peer` to local TCP port `port`: `None` for other
/// traffic and for packets of the connection without a filled REPORT, `Some(Err(()))` for a
/// malformed option.
fn report_in(frame: &[u8], peer: SocketAddr, port: u16) -> Option<Result<LargeFlowOption, ()>> {
    let k = parse_headers(frame).ok()?.key?;
    if k.proto != 6 || k.src != peer.ip() || k.src_port != peer.port() || k.dst_port != port {
        return None;
    }
    match large_flow_option(frame) {
        Err(_) => Some(Err(())),
        Ok(Some(o)) if o.msg == LargeFlowMsg::Report && o.filled() => Some(Ok(o)),
        Ok(_) => None,
    }
}

/// What an HTB class is set to for a reported share: `share * frame / wire` bit/s with bursts
/// of `burst` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HtbRate {
    /// Numerator: a frame's bytes (`tcp-send`: 1, the share itself).
    pub(crate) frame: u64,
    /// Denominator: the frame plus the link's per-frame overhead, as the port counts it.
    pub(crate) wire: u64,
    /// Burst and ceiling burst (bytes).
    pub(crate) burst: u32,
}

impl HtbRate {
    /// `tcp-send`'s, as the seed's hosts: the share itself, bursts of two full frames.
    pub(crate) const SHARE: HtbRate = HtbRate { frame: 1, wire: 1, burst: HTB_BURST };

    /// The class's rate for a share of `share_bps` (at least 1 bit/s).
    pub(crate) fn of(self, share_bps: u64) -> u64 {
        let r = u128::from(share_bps) * u128::from(self.frame) / u128::from(self.wire.max(1));
        u64::try_from(r).unwrap_or(u64::MAX).max(1)
    }
}

/// Apply a reported share: returns the `SO_MAX_PACING_RATE` (bytes/s) or HTB rate (bit/s) set.
fn apply_share(
    pace: &Pace,
    tcp: RawFd,
    v6: bool,
    share_bps: u64,
    htb: HtbRate,
) -> io::Result<(u64, u64)> {
    match pace {
        Pace::Socket => {
            let (mss, ts) = sys::tcp_info(tcp).map_or((0, true), |i| (i.snd_mss, i.timestamps));
            // before the kernel knows: a full segment with timestamps in a 1500-byte MTU
            let mss = if mss == 0 { (1500 + 14 - frame_overhead(true, v6)) as u32 } else { mss };
            let cap = pacing_for_share(share_bps, mss, ts, v6);
            let bytes = cap.to_ne_bytes();
            sys::setsockopt_bytes(tcp, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes)?;
            Ok((cap, 0))
        }
        Pace::Htb { dev } => {
            let r = htb.of(share_bps);
            tc(&htb_class_args("change", dev, r, htb.burst)).map(|()| (0, r))
        }
        Pace::Off => Ok((0, 0)),
    }
}

/// The watcher's view of one connection.
pub(crate) struct Watch {
    pub(crate) pace: Pace,
    pub(crate) tcp: RawFd,
    pub(crate) peer: SocketAddr,
    pub(crate) port: u16,
    pub(crate) start: Instant,
    /// HTB: what the class is set to for a share ([`HtbRate::SHARE`] for `tcp-send`; a
    /// scenario's flow: the share's frames without the link's per-frame overhead, as the
    /// simulator re-shapes its host queue, and that queue's burst).
    pub(crate) htb: HtbRate,
}

/// Watch frames from `w.peer` to local port `w.port`; apply every new REPORT.
pub(crate) fn watch_reports(pkt: OwnedFd, w: Watch, stop: Arc<AtomicBool>, out: Arc<Mutex<Seen>>) {
    let mut buf = vec![0u8; 65_536];
    let mut last: Option<(u16, u32)> = None;
    while !stop.load(Ordering::Relaxed) {
        let Ok(n) = sys::recv(&pkt, &mut buf) else { continue };
        let Some(r) = report_in(&buf[..n], w.peer, w.port) else { continue };
        let mut g = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Ok(o) = r else {
            // The kernel delivers the packet anyway; the sender ignores the option and counts it.
            g.malformed += 1;
            continue;
        };
        g.reports += 1;
        if last == Some((o.count, o.rate_kbps)) {
            continue;
        }
        let Some(share) = o.share_bps() else { continue };
        let Ok((cap, htb)) = apply_share(&w.pace, w.tcp, w.peer.is_ipv6(), share, w.htb) else {
            g.pacing_errors += 1; // tried again on the next report
            continue;
        };
        last = Some((o.count, o.rate_kbps));
        g.applied.push(Applied {
            t_ms: w.start.elapsed().as_millis() as u64,
            count: o.count,
            rate_bps: u64::from(o.rate_kbps) * 1000,
            pacing_bytes_per_s: cap,
            htb_rate_bps: htb,
        });
    }
}

/// Send for `cfg.seconds` to `cfg.dst`; see the module documentation.
pub fn send(cfg: &SendConfig) -> io::Result<SendReport> {
    let start = Instant::now();
    let dst = cfg.dst;
    let (sock, port) = sys::tcp_socket_bound(dst).map_err(|e| named("socket for", dst, e))?;
    let fd = sock.as_raw_fd();
    sys::setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cfg.cc.as_bytes())
        .map_err(|e| named(&format!("congestion control {:?} for", cfg.cc), dst, e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let _shaper = match (&cfg.pace, cfg.register) {
        (Pace::Htb { dev }, true) => {
            let shaper = HtbShaper::install(dev, 10_000_000_000, HTB_BURST);
            Some(shaper.map_err(|e| named("HTB shaper on", dev, e))?)
        }
        _ => None,
    };
    let watcher = if cfg.register {
        let (level, name, opt) = register_option(&dst);
        sys::setsockopt_bytes(fd, level, name, &opt)
            .map_err(|e| named("REGISTER option (IP_OPTIONS / IPV6_HOPOPTS) for", dst, e))?;
        let pkt = sys::ip_packet_socket(dst.is_ipv6(), Duration::from_millis(50))
            .map_err(|e| named("packet socket watching", dst, e))?;
        let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
        let htb = HtbRate::SHARE;
        let w = Watch { pace: cfg.pace.clone(), tcp: fd, peer: dst, port, start, htb };
        // The watcher only sets options on `fd`; it is joined before the socket is closed.
        Some(std::thread::spawn(move || watch_reports(pkt, w, stop, seen)))
    } else {
        None
    };
    let sent = drive(&sock, cfg, start);
    let info = sys::tcp_info(fd).unwrap_or_default();
    let closed = sent.as_ref().ok().map(|_| finish(&sock));
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = watcher {
        let _ = w.join();
    }
    drop(sock);
    let bytes = sent?;
    closed.transpose().map_err(|e| named("closing the connection to", dst, e))?;
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    Ok(SendReport {
        dst: dst.to_string(),
        cc: cfg.cc.clone(),
        register: cfg.register,
        pace: match &cfg.pace {
            Pace::Socket => "socket".into(),
            Pace::Htb { dev } => format!("htb:{dev}"),
            Pace::Off => "none".into(),
        },
        bytes,
        seconds: cfg.seconds,
        reports_seen: seen.reports,
        malformed_options: seen.malformed,
        pacing_errors: seen.pacing_errors,
        applied: seen.applied,
        pacing_rate: info.pacing_rate,
        max_pacing_rate: info.max_pacing_rate,
        total_retrans: info.total_retrans,
        rtt_us: info.rtt_us,
    })
}

/// Connect, drop the REGISTER option, write until the time is up. Returns the bytes written.
fn drive(sock: &OwnedFd, cfg: &SendConfig, start: Instant) -> io::Result<u64> {
    let dst = cfg.dst;
    sys::connect(sock, dst).map_err(|e| named("connect to", dst, e))?;
    let fd = sock.as_raw_fd();
    if cfg.register {
        // Only the SYN needs it; data packets go without the option's bytes.
        let (level, name) = register_sockopt(&dst);
        sys::setsockopt_bytes(fd, level, name, &[])
            .map_err(|e| named("clearing the REGISTER option for", dst, e))?;
    }
    sys::set_timeout(fd, libc::SO_SNDTIMEO, Duration::from_millis(200))?;
    let mut s = TcpStream::from(sock.try_clone()?);
    let chunk = vec![0x5au8; 64 * 1024];
    let until = Duration::from_secs_f64(cfg.seconds.max(0.0));
    let mut bytes = 0u64;
    while start.elapsed() < until && !sys::stop_requested() {
        match s.write(&chunk) {
            Ok(n) => bytes += n as u64,
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(named("sending to", dst, e)),
        }
    }
    Ok(bytes)
}

/// Half-close and wait (at most 5 s) for the receiver to close its side.
fn finish(sock: &OwnedFd) -> io::Result<()> {
    let mut s = TcpStream::from(sock.try_clone()?);
    s.shutdown(std::net::Shutdown::Write)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            // A socket with a receive timeout returns EINTR after the process was stopped and
            // continued, even without signal handlers (signal(7)): read on.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// One connection as the receiver saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnReport {
    /// The sender's address.
    pub peer: String,
    /// Bytes received.
    pub bytes: u64,
    /// Bytes received in each [`BIN_MS`] bin since the receiver started.
    pub bins: Vec<u64>,
}

/// What the receiver saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecvReport {
    /// Listening address.
    pub bind: String,
    /// Bin width, ms.
    pub bin_ms: u64,
    /// Connections, in the order they were accepted.
    pub conns: Vec<ConnReport>,
}

/// Accept `conns` connections on `bind` (waiting at most `seconds` in all) and read each to
/// its end or until `seconds` have passed.
pub fn recv(bind: SocketAddr, conns: usize, seconds: f64) -> io::Result<RecvReport> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds.max(0.0));
    let l = TcpListener::bind(bind).map_err(|e| named("listening on", bind, e))?;
    l.set_nonblocking(true)?;
    let mut readers = Vec::new();
    while readers.len() < conns && Instant::now() < deadline {
        match l.accept() {
            Ok((s, peer)) => {
                s.set_nonblocking(false)?;
                readers.push(std::thread::spawn(move || read_conn(s, peer, start, deadline)));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(named("accepting on", bind, e)),
        }
    }
    let conns = readers
        .into_iter()
        .map(|r| r.join().unwrap_or_else(|_| Err(io::Error::other("reader panicked"))));
    Ok(RecvReport {
        bind: bind.to_string(),
        bin_ms: BIN_MS,
        conns: conns.collect::<io::Result<_>>()?,
    })
}

fn read_conn(
    mut s: TcpStream,
    peer: SocketAddr,
    start: Instant,
    deadline: Instant,
) -> io::Result<ConnReport> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut rep = ConnReport { peer: peer.to_string(), bytes: 0, bins: Vec::new() };
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        s.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))?;
        let n = match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                break
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(named("receiving from", peer, e)),
        };
        let bin = (start.elapsed().as_millis() as u64 / BIN_MS) as usize;
        if rep.bins.len() <= bin {
            rep.bins.resize(bin + 1, 0);
        }
        rep.bins[bin] += n as u64;
        rep.bytes += n as u64;
    }
    Ok(rep) // dropping `s` closes it, which answers the sender's half-close
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_register_option_is_a_valid_ipv4_option_the_switch_parses() {
        let dst = "10.0.0.3:5301".parse().unwrap();
        let (level, name, o) = register_option(&dst);
        assert_eq!((level, name), (libc::IPPROTO_IP, libc::IP_OPTIONS));
        assert_eq!(o.len(), 12, "a multiple of 4: no padding in the IP header");
        assert_eq!(o[0], latnet_wire::large_flow::IPV4_KIND);
        let parsed = LargeFlowOption::parse_data(&o[2..], latnet_wire::Layer::Ipv4).unwrap();
        assert_eq!(parsed, LargeFlowOption::new(LargeFlowMsg::Register));
    }

    #[test]
    fn the_register_option_toward_ipv6_is_a_hop_by_hop_header_the_switch_parses() {
        let dst = "[2001:db8::a00:3]:5301".parse().unwrap();
        let (level, name, h) = register_option(&dst);
        assert_eq!((level, name), (libc::IPPROTO_IPV6, libc::IPV6_HOPOPTS));
        // next header (the kernel's), length 1 (16 bytes), PadN to 4n, the 12-byte option
        #[rustfmt::skip]
        let want = [0, 1, 1, 0, latnet_wire::large_flow::IPV6_KIND, 10, 1, 0, 0, 0, 0, 0, 0, 0,
                    0, 0];
        assert_eq!(h, want);
        let mut h = h;
        h[0] = 6; // TCP, as the kernel fills it in
                  // what the kernel sends: the header after IPv6, the switch reads REGISTER from it
        use latnet_wire::{build_tcp_ipv6, Ecn, EthernetAddress, TcpFlags, TcpRepr, TcpSeqNumber};
        let a = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0xa00, 3);
        let syn = TcpRepr {
            src_port: 40_000,
            dst_port: 5301,
            seq_number: TcpSeqNumber(1),
            ack_number: TcpSeqNumber(0),
            flags: TcpFlags::SYN,
            window_len: 1000,
            urgent_at: 0,
            options: &[],
        };
        let (m, mut f) = (EthernetAddress([2, 0, 0, 0, 0, 1]), Vec::new());
        build_tcp_ipv6(&mut f, m, m, a, a, 0, Ecn::NotEct, 64, &syn, 0).unwrap();
        f[14 + 6] = 0; // next header: hop-by-hop
        f.splice(54..54, h);
        let plen = u16::from_be_bytes([f[18], f[19]]) + 16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        let o = latnet_wire::large_flow_option(&f).unwrap();
        assert_eq!(o, Some(LargeFlowOption::new(LargeFlowMsg::Register)));
    }

    #[test]
    fn pacing_fits_the_frames_into_the_share() {
        // 20 Mbit/s of frames; a 1448-byte payload is a 1514-byte frame with timestamps
        let p = pacing_for_share(20_000_000, 1448, true, false);
        assert_eq!(p, 2_500_000 * 1448 / 1514);
        let frames_bps = p * 8 * 1514 / 1448;
        assert!(frames_bps <= 20_000_000 && frames_bps > 19_999_000, "{frames_bps}");
        // without timestamps the same 1500-byte MTU carries 1460 bytes of payload
        assert_eq!(pacing_for_share(20_000_000, 1460, false, false), 2_500_000 * 1460 / 1514);
        // IPv6's header is 20 bytes longer, the segment 20 bytes shorter
        assert_eq!(pacing_for_share(20_000_000, 1428, true, true), 2_500_000 * 1428 / 1514);
        assert_eq!(pacing_for_share(20_000_000, 1440, false, true), 2_500_000 * 1440 / 1514);
    }

    #[test]
    fn reports_of_the_connection_are_read_and_malformed_ones_flagged() {
        use latnet_wire::{build_tcp_ipv4, set_large_flow_option, Ecn, EthernetAddress};
        use latnet_wire::{TcpFlags, TcpRepr, TcpSeqNumber};
        let peer = SocketAddr::new(std::net::Ipv4Addr::new(10, 0, 0, 3).into(), 5301);
        let me = std::net::Ipv4Addr::new(10, 0, 0, 1);
        let ack = |src_port: u16| {
            let repr = TcpRepr {
                src_port,
                dst_port: 40_000,
                seq_number: TcpSeqNumber(1),
                ack_number: TcpSeqNumber(1),
                flags: TcpFlags::ACK,
                window_len: 1000,
                urgent_at: 0,
                options: &[],
            };
            let (m, mut f) = (EthernetAddress([2, 0, 0, 0, 0, 1]), Vec::new());
            let src = std::net::Ipv4Addr::new(10, 0, 0, 3);
            build_tcp_ipv4(&mut f, m, m, src, me, 0, Ecn::NotEct, 64, &repr, 0).unwrap();
            f
        };
        let mut rep = LargeFlowOption::new(LargeFlowMsg::Report);
        rep.fill(2, 40_000);
        let mut f = ack(peer.port());
        assert_eq!(report_in(&f, peer, 40_000), None, "no option");
        set_large_flow_option(&mut f, &rep).unwrap();
        assert_eq!(report_in(&f, peer, 40_000), Some(Ok(rep)));
        assert_eq!(report_in(&f, peer, 40_001), None, "another connection");
        let mut other = ack(5302);
        set_large_flow_option(&mut other, &rep).unwrap();
        assert_eq!(report_in(&other, peer, 40_000), None, "another peer port");
        // the option's type byte (Ethernet 14 + IPv4 20 + kind, length) made unknown
        assert_eq!(f[34], latnet_wire::large_flow::IPV4_KIND);
        f[36] = 9;
        assert_eq!(report_in(&f, peer, 40_000), Some(Err(())));
        assert_eq!(report_in(&f[..20], peer, 40_000), None, "a truncated frame is skipped");
    }

    #[test]
    fn send_and_receive_over_loopback_without_registering() {
        loopback("127.0.0.1:0");
    }

    #[test]
    fn send_and_receive_over_ipv6_loopback_without_registering() {
        loopback("[::1]:0");
    }

    fn loopback(bind: &str) {
        let l = TcpListener::bind(bind).unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let r = std::thread::spawn(move || recv(addr, 1, 3.0));
        std::thread::sleep(Duration::from_millis(50));
        let cfg = SendConfig {
            dst: addr,
            seconds: 0.2,
            cc: "cubic".into(),
            register: false,
            pace: Pace::Socket,
        };
        let s = send(&cfg).unwrap();
        let r = r.join().unwrap().unwrap();
        assert!(s.bytes > 0);
        assert_eq!(r.conns.len(), 1);
        assert_eq!(r.conns[0].bytes, s.bytes, "every byte written arrives");
        assert_eq!(r.conns[0].bins.iter().sum::<u64>(), s.bytes);
        assert!(s.applied.is_empty() && s.reports_seen == 0 && s.malformed_options == 0);
        assert_eq!(s.max_pacing_rate, u64::MAX, "never capped without reports");
    }

    #[test]
    fn pace_parses_socket_htb_and_none_and_names_what_it_expects() {
        assert_eq!(Pace::parse("socket"), Ok(Pace::Socket));
        assert_eq!(Pace::parse("htb:veth0"), Ok(Pace::Htb { dev: "veth0".into() }));
        assert_eq!(Pace::parse("none"), Ok(Pace::Off));
        for bad in ["", "htb", "htb:", "htb:a b", "fq:eth0", "sockets", "none:x"] {
            let e = Pace::parse(bad).unwrap_err();
            assert!(e.contains("socket, htb:DEV") && e.contains(&format!("{bad:?}")), "{e}");
        }
        let a = htb_class_args("change", "eth1", 25_000_000, HTB_BURST).join(" ");
        assert_eq!(
            a,
            "class change dev eth1 parent 1: classid 1:1 htb rate 25000000bit ceil 25000000bit \
             burst 3028b cburst 3028b quantum 1514"
        );
    }

    #[test]
    fn an_htb_shaper_on_a_missing_interface_is_named() {
        let dst = SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), 9);
        let pace = Pace::Htb { dev: "nosuchdev0".into() };
        let cfg = SendConfig { dst, seconds: 0.1, cc: "cubic".into(), register: true, pace };
        let e = send(&cfg).unwrap_err().to_string();
        assert!(e.starts_with("HTB shaper on nosuchdev0: "), "{e}");
    }

    #[test]
    fn an_unknown_congestion_control_is_named() {
        let dst = SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), 9);
        let cfg = SendConfig {
            dst,
            seconds: 0.1,
            cc: "nope".into(),
            register: false,
            pace: Pace::Socket,
        };
        let e = send(&cfg).unwrap_err().to_string();
        assert!(e.contains("\"nope\"") && e.contains("127.0.0.1:9"), "{e}");
    }
}
