//! HTB over rtnetlink: what `tc qdisc replace dev IF root handle 1: htb default D`, `tc qdisc
//! del dev IF root`, `tc class replace dev IF parent 1: classid 1:N htb rate R ceil R burst B
//! cburst B quantum Q overhead O`, `tc class del` and `tc -s class show` do, as one message each
//! on a socket kept open, instead of a `tc` process per change (several ms each here).
//!
//! The message is the one iproute2 sends, less the rate tables: with the link layer given as
//! Ethernet the kernel computes transmission times from the rate itself and ignores them. The
//! bucket is sent, as by `tc`, as the time to send it at the rate in scheduler ticks
//! (`/proc/net/psched`).

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

const RTM_NEWQDISC: u16 = 36;
const RTM_DELQDISC: u16 = 37;
const RTM_NEWTCLASS: u16 = 40;
const RTM_DELTCLASS: u16 = 41;
const RTM_GETTCLASS: u16 = 42;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
const TC_H_ROOT: u32 = 0xffff_ffff;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_INIT: u16 = 2;
const TCA_HTB_RATE64: u16 = 6;
const TCA_HTB_CEIL64: u16 = 7;
const TC_LINKLAYER_ETHERNET: u8 = 1;

/// An HTB class's parameters, as `tc` takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtbClass {
    /// Rate, bit/s.
    pub rate_bps: u64,
    /// Ceiling, bit/s.
    pub ceil_bps: u64,
    /// Bucket at the rate, bytes.
    pub burst: u64,
    /// Bucket at the ceiling, bytes.
    pub cburst: u64,
    /// Bytes served per round among classes of one priority.
    pub quantum: u32,
    /// Bytes counted per frame beyond the kernel's length of it.
    pub overhead: u16,
}

/// Scheduler ticks per microsecond, as `tc` reads them from `/proc/net/psched` (15.625 on
/// kernels since 2.6.24: 64 ns ticks).
pub fn ticks_per_us() -> f64 {
    let text = std::fs::read_to_string("/proc/net/psched").unwrap_or_default();
    let v: Vec<u32> =
        text.split_whitespace().filter_map(|w| u32::from_str_radix(w, 16).ok()).collect();
    match v.as_slice() {
        [t2us, us2t, res, ..] if *us2t > 0 && *t2us > 0 => {
            // iproute2's compatibility rule: a nanosecond clock advertises a multiplier of
            // 1,000 that means 1
            let t2us = if *res == 1_000_000_000 { *us2t } else { *t2us };
            f64::from(t2us) / f64::from(*us2t) * (f64::from(*res) / 1e6)
        }
        _ => 15.625,
    }
}

/// The time to send `bytes` at `rate_bps`, in ticks, as `tc` computes it (whole
/// microseconds, then ticks, each truncated); `None` if it does not fit the 32 bits HTB keeps
/// it in.
fn xmit_ticks(bytes: u64, rate_bps: u64, ticks_per_us: f64) -> Option<u32> {
    let rate_bytes = (rate_bps / 8).max(1) as f64;
    let us = 1e6 * (bytes as f64 / rate_bytes);
    if us >= f64::from(u32::MAX) {
        return None;
    }
    let t = f64::from(us as u32) * ticks_per_us;
    (t < f64::from(u32::MAX)).then_some(t as u32)
}

fn attr(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len().next_multiple_of(4), 0);
}

/// A request's header; `flags` beside `NLM_F_REQUEST` (and `NLM_F_ACK` but for a dump, which
/// ends with `NLMSG_DONE` instead).
fn header(out: &mut Vec<u8>, kind: u16, flags: u16, seq: u32) {
    let ack = if flags & NLM_F_DUMP == NLM_F_DUMP { 0 } else { NLM_F_ACK };
    out.extend_from_slice(&0u32.to_ne_bytes()); // length, set at the end
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&(flags | NLM_F_REQUEST | ack).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
}

fn tcmsg(out: &mut Vec<u8>, ifindex: u32, handle: u32, parent: u32) {
    out.extend_from_slice(&[0, 0, 0, 0]); // family AF_UNSPEC, padding
    out.extend_from_slice(&ifindex.to_ne_bytes());
    out.extend_from_slice(&handle.to_ne_bytes());
    out.extend_from_slice(&parent.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes()); // info
}

fn finish(mut out: Vec<u8>) -> Vec<u8> {
    let len = out.len() as u32;
    out[..4].copy_from_slice(&len.to_ne_bytes());
    out
}

/// `tc_ratespec`: cell_log, linklayer, overhead, cell_align, mpu, rate (bytes/s, saturated).
fn ratespec(out: &mut Vec<u8>, rate_bps: u64, overhead: u16) {
    out.push(3); // what tc's rate table for a 1,600-byte MTU gives; unused with a link layer
    out.push(TC_LINKLAYER_ETHERNET);
    out.extend_from_slice(&overhead.to_ne_bytes());
    out.extend_from_slice(&(-1i16).to_ne_bytes());
    out.extend_from_slice(&0u16.to_ne_bytes());
    let bytes = rate_bps / 8;
    out.extend_from_slice(&u32::try_from(bytes).unwrap_or(u32::MAX).to_ne_bytes());
}

/// The `RTM_NEWTCLASS` message that creates or replaces HTB class `classid` under `parent` on
/// interface `ifindex`; an error if a bucket takes longer to send at its rate than HTB can
/// hold (2^32 ticks, 275 s).
pub fn htb_class_msg(
    seq: u32,
    ifindex: u32,
    parent: u32,
    classid: u32,
    c: &HtbClass,
) -> io::Result<Vec<u8>> {
    let tpu = ticks_per_us();
    let ticks = |bytes: u64, rate: u64, what: &str| {
        xmit_ticks(bytes, rate, tpu).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {what} of {bytes} bytes at {rate} bit/s takes longer to send than HTB \
                     can hold (2^32 ticks)"
                ),
            )
        })
    };
    let (buffer, cbuffer) =
        (ticks(c.burst, c.rate_bps, "burst")?, ticks(c.cburst, c.ceil_bps, "cburst")?);
    let mut m = Vec::with_capacity(128);
    header(&mut m, RTM_NEWTCLASS, NLM_F_CREATE, seq);
    tcmsg(&mut m, ifindex, classid, parent);
    attr(&mut m, TCA_KIND, b"htb\0");
    let mut opts = Vec::with_capacity(80);
    let mut parms = Vec::with_capacity(44);
    ratespec(&mut parms, c.rate_bps, c.overhead);
    ratespec(&mut parms, c.ceil_bps, c.overhead);
    for v in [
        buffer, cbuffer, c.quantum, 0, // level
        0, // prio
    ] {
        parms.extend_from_slice(&v.to_ne_bytes());
    }
    if c.rate_bps / 8 > u64::from(u32::MAX) {
        attr(&mut opts, TCA_HTB_RATE64, &(c.rate_bps / 8).to_ne_bytes());
    }
    if c.ceil_bps / 8 > u64::from(u32::MAX) {
        attr(&mut opts, TCA_HTB_CEIL64, &(c.ceil_bps / 8).to_ne_bytes());
    }
    attr(&mut opts, TCA_HTB_PARMS, &parms);
    attr(&mut m, TCA_OPTIONS, &opts);
    Ok(finish(m))
}

/// The `RTM_DELTCLASS` message that removes class `classid` of interface `ifindex`.
pub fn del_class_msg(seq: u32, ifindex: u32, classid: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(40);
    header(&mut m, RTM_DELTCLASS, 0, seq);
    tcmsg(&mut m, ifindex, classid, 0);
    finish(m)
}

/// The `RTM_NEWQDISC` message that creates or replaces the root qdisc of interface `ifindex`
/// with an HTB qdisc of handle `major:`, unclassified packets going to class `major:default`
/// (0: sent directly, unshaped). As `tc` sends it: HTB version 3, `r2q` 10.
pub fn htb_root_msg(seq: u32, ifindex: u32, major: u16, default: u16) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    header(&mut m, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, seq);
    tcmsg(&mut m, ifindex, u32::from(major) << 16, TC_H_ROOT);
    attr(&mut m, TCA_KIND, b"htb\0");
    let mut glob = Vec::with_capacity(20);
    // version, rate2quantum, default class, debug, direct packets
    for v in [3u32, 10, u32::from(default), 0, 0] {
        glob.extend_from_slice(&v.to_ne_bytes());
    }
    let mut opts = Vec::with_capacity(24);
    attr(&mut opts, TCA_HTB_INIT, &glob);
    attr(&mut m, TCA_OPTIONS, &opts);
    finish(m)
}

/// The `RTM_DELQDISC` message that removes the root qdisc of interface `ifindex` (the
/// device's default comes back).
pub fn del_root_msg(seq: u32, ifindex: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(36);
    header(&mut m, RTM_DELQDISC, 0, seq);
    tcmsg(&mut m, ifindex, 0, TC_H_ROOT);
    finish(m)
}

/// The `RTM_GETTCLASS` dump request for every class of interface `ifindex`.
pub fn class_dump_msg(seq: u32, ifindex: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(36);
    header(&mut m, RTM_GETTCLASS, NLM_F_DUMP, seq);
    tcmsg(&mut m, ifindex, 0, 0);
    finish(m)
}

/// One class's counters, as `tc -s class show` prints them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// The class (`major << 16 | minor`).
    pub classid: u32,
    /// Its kind's name, such as `htb` (at most 15 bytes).
    pub kind: [u8; 16],
    /// Bytes and packets sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u32,
    /// Packets dropped.
    pub drops: u32,
    /// Times the class was over its limit.
    pub overlimits: u32,
    /// Bytes queued now.
    pub backlog_bytes: u32,
    /// Packets queued now.
    pub backlog_packets: u32,
}

impl ClassStats {
    /// The kind's name.
    pub fn kind(&self) -> &str {
        let end = self.kind.iter().position(|&b| b == 0).unwrap_or(self.kind.len());
        std::str::from_utf8(&self.kind[..end]).unwrap_or("")
    }
}

/// The attributes of `buf` (`(type, payload)`), stopping at the first one cut short.
fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([buf[0], buf[1]]));
        if len < 4 || len > buf.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([buf[2], buf[3]]) & 0x3fff; // less the nested / order bits
        let payload = &buf[4..len];
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
        Some((kind, payload))
    })
}

fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
}

/// One chunk of the kernel's answer to class dump `seq`: the classes in it, and whether the
/// dump ended with it; an error the kernel sent; `None` if the chunk is not one (cut short,
/// lengths that do not add up). Messages of other requests are skipped.
pub fn parse_class_dump(buf: &[u8], seq: u32) -> Option<io::Result<(Vec<ClassStats>, bool)>> {
    let mut out = Vec::new();
    let mut rest = buf;
    while !rest.is_empty() {
        if rest.len() < 16 {
            return None;
        }
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len < 16 || len > rest.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        let s = u32::from_ne_bytes([rest[8], rest[9], rest[10], rest[11]]);
        let body = &rest[16..len];
        rest = &rest[len.next_multiple_of(4).min(rest.len())..];
        if s != seq {
            continue;
        }
        match kind {
            NLMSG_DONE => return Some(Ok((out, true))),
            NLMSG_ERROR => {
                let code = i32::from_ne_bytes(body.get(..4)?.try_into().ok()?);
                return Some(Err(if code == 0 {
                    io::Error::other("the kernel acknowledged a dump instead of answering it")
                } else {
                    io::Error::from_raw_os_error(code.saturating_neg())
                }));
            }
            RTM_NEWTCLASS => {
                // tcmsg: family, padding, ifindex, handle, parent, info
                let mut c = ClassStats { classid: ne_u32(body, 8)?, ..ClassStats::default() };
                for (t, v) in attrs(body.get(20..)?) {
                    match t {
                        TCA_KIND => {
                            let n = v.len().min(15);
                            c.kind[..n].copy_from_slice(&v[..n]);
                        }
                        TCA_STATS2 => {
                            for (t, v) in attrs(v) {
                                match t {
                                    // bytes (64 bits), packets
                                    TCA_STATS_BASIC if v.len() >= 12 => {
                                        c.bytes = u64::from_ne_bytes(v[..8].try_into().ok()?);
                                        c.packets = ne_u32(v, 8)?;
                                    }
                                    // qlen, backlog, drops, requeues, overlimits
                                    TCA_STATS_QUEUE if v.len() >= 20 => {
                                        c.backlog_packets = ne_u32(v, 0)?;
                                        c.backlog_bytes = ne_u32(v, 4)?;
                                        c.drops = ne_u32(v, 8)?;
                                        c.overlimits = ne_u32(v, 16)?;
                                    }
                                    _ => {}
                                }
                            }
                        }
                        _ => {}
                    }
                }
                out.push(c);
            }
            _ => {}
        }
    }
    Some(Ok((out, false)))
}

/// The kernel's answer to request `seq`: `Ok` for an acknowledgement, its error otherwise.
pub fn parse_ack(buf: &[u8], seq: u32) -> Option<io::Result<()>> {
    let mut rest = buf;
    while rest.len() >= 16 {
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len < 16 || len > rest.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        let s = u32::from_ne_bytes([rest[8], rest[9], rest[10], rest[11]]);
        if kind == NLMSG_ERROR && s == seq && len >= 20 {
            let code = i32::from_ne_bytes([rest[16], rest[17], rest[18], rest[19]]);
            return Some(if code == 0 {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(code.saturating_neg()))
            });
        }
        rest = &rest[len.next_multiple_of(4).min(rest.len())..];
    }
    None
}

/// An rtnetlink socket in one network namespace.
#[derive(Debug)]
pub struct Rtnl {
    fd: OwnedFd,
    seq: Cell<u32>,
}

impl Rtnl {
    /// A socket in the namespace of the file `netns` (`None`: this thread's).
    pub fn open(netns: Option<&Path>) -> io::Result<Rtnl> {
        let make = || {
            // SAFETY: socket(2) with constant arguments; the descriptor is owned below.
            let fd = super::cvt(unsafe {
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    libc::NETLINK_ROUTE,
                )
            })?;
            // SAFETY: fd was just returned by socket(2) and is owned by nothing else.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        };
        let fd = match netns {
            Some(p) => super::in_netns(p, make)?,
            None => make()?,
        };
        // 2 s for the kernel's answer: it never takes long; a lost one must not hang the agent
        let tv = libc::timeval { tv_sec: 2, tv_usec: 0 };
        // SAFETY: a valid descriptor and a timeval of the size given.
        super::cvt(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                std::ptr::addr_of!(tv).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        })?;
        Ok(Rtnl { fd, seq: Cell::new(1) })
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: the buffer is valid for its length; the kernel is the destination of an
        // unconnected netlink socket's send.
        let sent = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn recv<'a>(&self, buf: &'a mut [u8]) -> io::Result<&'a [u8]> {
        // SAFETY: the buffer is valid and writable for its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(&buf[..n as usize])
    }

    fn next_seq(&self) -> u32 {
        let seq = self.seq.get();
        self.seq.set(seq.wrapping_add(1));
        seq
    }

    fn request(&self, build: impl FnOnce(u32) -> io::Result<Vec<u8>>) -> io::Result<()> {
        let seq = self.next_seq();
        self.send(&build(seq)?)?;
        let mut buf = vec![0u8; 8192];
        loop {
            if let Some(r) = parse_ack(self.recv(&mut buf)?, seq) {
                return r;
            }
        }
    }

    /// Make an HTB qdisc of handle `major:` the root of interface `ifindex` (replacing what was
    /// there), unclassified packets going to class `major:default` (0: unshaped).
    pub fn htb_root(&self, ifindex: u32, major: u16, default: u16) -> io::Result<()> {
        self.request(|seq| Ok(htb_root_msg(seq, ifindex, major, default)))
    }

    /// Remove the root qdisc of interface `ifindex`.
    pub fn del_root(&self, ifindex: u32) -> io::Result<()> {
        self.request(|seq| Ok(del_root_msg(seq, ifindex)))
    }

    /// Every class of interface `ifindex` with its counters.
    pub fn class_stats(&self, ifindex: u32) -> io::Result<Vec<ClassStats>> {
        let seq = self.next_seq();
        self.send(&class_dump_msg(seq, ifindex))?;
        let mut buf = vec![0u8; 32 * 1024];
        let mut out = Vec::new();
        loop {
            let chunk = self.recv(&mut buf)?;
            match parse_class_dump(chunk, seq) {
                Some(Ok((c, done))) => {
                    out.extend(c);
                    if done {
                        return Ok(out);
                    }
                }
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the kernel's class dump could not be read",
                    ))
                }
            }
        }
    }

    /// Create or replace HTB class `classid` under `parent` on interface `ifindex`.
    pub fn htb_class(
        &self,
        ifindex: u32,
        parent: u32,
        classid: u32,
        c: &HtbClass,
    ) -> io::Result<()> {
        self.request(|seq| htb_class_msg(seq, ifindex, parent, classid, c))
    }

    /// Remove class `classid` of interface `ifindex`.
    pub fn del_class(&self, ifindex: u32, classid: u32) -> io::Result<()> {
        self.request(|seq| Ok(del_class_msg(seq, ifindex, classid)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_message_is_what_tc_sends_less_the_rate_tables() {
        let c = HtbClass {
            rate_bps: 100_000_000,
            ceil_bps: 100_000_000,
            burst: 15_000,
            cburst: 15_000,
            quantum: 1600,
            overhead: 4,
        };
        let Ok(m) = htb_class_msg(7, 3, 0x1_0000, 0x1_0002, &c) else { panic!("no message") };
        // nlmsghdr 16 + tcmsg 20 + kind 8 + options (4 + parms 4 + 44)
        assert_eq!(m.len(), 16 + 20 + 8 + 4 + 48);
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize, m.len());
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), RTM_NEWTCLASS);
        assert_eq!(u16::from_ne_bytes([m[6], m[7]]), 0x405);
        assert_eq!(u32::from_ne_bytes([m[8], m[9], m[10], m[11]]), 7);
        assert_eq!(u32::from_ne_bytes([m[20], m[21], m[22], m[23]]), 3);
        assert_eq!(u32::from_ne_bytes([m[24], m[25], m[26], m[27]]), 0x1_0002);
        assert_eq!(&m[40..44], b"htb\0");
        let parms = &m[52..96];
        assert_eq!(parms[1], TC_LINKLAYER_ETHERNET);
        assert_eq!(u16::from_ne_bytes([parms[2], parms[3]]), 4);
        assert_eq!(u32::from_ne_bytes([parms[8], parms[9], parms[10], parms[11]]), 12_500_000);
        // 15,000 bytes at 12.5 MB/s: 1.2 ms = 18,750 ticks of 64 ns
        let buffer = u32::from_ne_bytes([parms[24], parms[25], parms[26], parms[27]]);
        assert_eq!(Some(buffer), xmit_ticks(15_000, 100_000_000, ticks_per_us()));
        assert_eq!(xmit_ticks(15_000, 100_000_000, 15.625), Some(18_750));
        assert_eq!(u32::from_ne_bytes([parms[32], parms[33], parms[34], parms[35]]), 1600);
        // above 34 Gbit/s the rates go in 64-bit attributes too
        let fast = HtbClass { rate_bps: 40_000_000_000, ceil_bps: 40_000_000_000, ..c };
        let long = htb_class_msg(1, 3, 0x1_0000, 0x1_0002, &fast).map(|m| m.len());
        assert_eq!(long.ok(), Some(m.len() + 2 * 12));
        // a bucket HTB cannot hold is refused before anything is sent
        let huge = HtbClass { burst: 5_000_000_000, ..c };
        let e = htb_class_msg(1, 3, 0x1_0000, 0x1_0002, &huge).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("burst of 5000000000 bytes"), "{e}");
    }

    #[test]
    fn an_answer_is_read_by_its_sequence_number() {
        let ack = |seq: u32, code: i32| {
            let mut m = Vec::new();
            m.extend_from_slice(&36u32.to_ne_bytes());
            m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
            m.extend_from_slice(&0u16.to_ne_bytes());
            m.extend_from_slice(&seq.to_ne_bytes());
            m.extend_from_slice(&0u32.to_ne_bytes());
            m.extend_from_slice(&code.to_ne_bytes());
            m.resize(36, 0);
            m
        };
        assert!(matches!(parse_ack(&ack(5, 0), 5), Some(Ok(()))));
        let e = parse_ack(&ack(5, -libc::ENOENT), 5);
        assert!(matches!(e, Some(Err(e)) if e.raw_os_error() == Some(libc::ENOENT)));
        let mut two = ack(4, 0);
        two.extend(ack(5, -libc::EINVAL));
        assert!(matches!(parse_ack(&two, 5), Some(Err(_))));
        assert!(parse_ack(&ack(4, 0), 5).is_none());
        for cut in 0..36 {
            assert!(parse_ack(&ack(5, 0)[..cut], 5).is_none(), "{cut}");
        }
        // an error code no kernel sends (found by the fuzz target: negating it overflowed)
        assert!(matches!(parse_ack(&ack(5, i32::MIN), 5), Some(Err(_))));
        let mut bad = ack(5, 0);
        bad[..4].copy_from_slice(&9u32.to_ne_bytes());
        assert!(parse_ack(&bad, 5).is_none());
    }

    /// A class message of dump `seq` as the kernel sends it.
    fn class_msg(seq: u32, classid: u32, bytes: u64, packets: u32, queue: [u32; 5]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&RTM_NEWTCLASS.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        tcmsg(&mut m, 3, classid, 0x1_0000);
        attr(&mut m, TCA_KIND, b"htb\0");
        let mut st = Vec::new();
        let mut basic = bytes.to_ne_bytes().to_vec();
        basic.extend_from_slice(&packets.to_ne_bytes());
        basic.extend_from_slice(&[0; 4]);
        attr(&mut st, TCA_STATS_BASIC, &basic);
        let q: Vec<u8> = queue.iter().flat_map(|v| v.to_ne_bytes()).collect();
        attr(&mut st, TCA_STATS_QUEUE, &q);
        attr(&mut m, TCA_STATS2 | 0x8000, &st); // nested
        finish(m)
    }

    fn done(seq: u32) -> Vec<u8> {
        let mut m = Vec::new();
        header(&mut m, NLMSG_DONE, NLM_F_DUMP, seq);
        m.extend_from_slice(&0u32.to_ne_bytes());
        finish(m)
    }

    #[test]
    fn a_class_dump_is_read_message_by_message_to_its_end() {
        let a = class_msg(9, 0x1_0002, 1_980, 33, [7, 420, 1, 0, 8]);
        let mut chunk = a.clone();
        chunk.extend(class_msg(8, 0x1_0005, 1, 1, [0; 5])); // another request's: skipped
        chunk.extend(class_msg(9, 0x1_0003, 0, 0, [0; 5]));
        let Some(Ok((c, false))) = parse_class_dump(&chunk, 9) else { panic!("not read") };
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].classid, c[0].kind(), c[0].bytes, c[0].packets),
            (0x1_0002, "htb", 1_980, 33)
        );
        assert_eq!(
            (c[0].backlog_packets, c[0].backlog_bytes, c[0].drops, c[0].overlimits),
            (7, 420, 1, 8)
        );
        assert_eq!(c[1].classid, 0x1_0003);
        let Some(Ok((c, true))) = parse_class_dump(&done(9), 9) else { panic!("no end") };
        assert!(c.is_empty());
        // an error ends it
        let mut err = Vec::new();
        header(&mut err, NLMSG_ERROR, 0, 9);
        err.extend_from_slice(&(-libc::EPERM).to_ne_bytes());
        err.resize(36, 0);
        let err = finish(err);
        assert!(
            matches!(parse_class_dump(&err, 9), Some(Err(e)) if e.raw_os_error() == Some(libc::EPERM))
        );
        // cut anywhere inside a message: not an answer
        for cut in 1..a.len() {
            if let Some(Ok((c, _))) = parse_class_dump(&a[..cut], 9) {
                panic!("{cut}: read {c:?} from a message cut short");
            }
        }
    }
}
