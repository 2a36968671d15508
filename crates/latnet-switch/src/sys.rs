//! The only module with `unsafe` (with its submodules): Linux system calls the switch and the
//! traffic tools need.
//!
//! * [`PacketSocket`]: an `AF_PACKET` socket bound to one interface, with a memory-mapped
//!   `TPACKET_V2` receive ring (every frame is visible as soon as the kernel wrote it; see the
//!   crate docs for why not `TPACKET_V3`), `PACKET_VNET_HDR` (so partial checksums of veth
//!   offloads are known), `PACKET_IGNORE_OUTGOING`, and batched transmission with `sendmmsg`
//!   and `PACKET_QDISC_BYPASS`.
//! * Clocks and sleeping on `CLOCK_MONOTONIC` in nanoseconds, `ppoll` with a nanosecond
//!   timeout, a 1 ns timer slack, and a flag set by SIGINT / SIGTERM.
//! * Socket options of the UDP traffic tools (`IP_TOS`, `SO_NO_CHECK`).
//! * What the TCP pacing tools need: a bound TCP socket, `connect`, raw socket options
//!   (`IP_OPTIONS`, `SO_MAX_PACING_RATE`, timeouts), `TCP_INFO`, and an IPv4 packet socket.
//!
//! * [`bpf`]: the `bpf(2)` calls of the host agent's tagger (maps, programs, `tcx` links).
//! * [`rtnl`]: the host agent's HTB classes over rtnetlink (no `tc` process per change).
//!
//! Every `unsafe` block states why it is sound. Nothing here interprets packet contents.
#![allow(unsafe_code)]

pub mod bpf;
mod ring;
pub mod rtnl;

pub use ring::{PacketSocket, RxFrame, TX_BATCH};

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// Length of the `virtio_net_hdr` that precedes every frame with `PACKET_VNET_HDR`.
pub const VNET_HDR_LEN: usize = 10;

/// `virtio_net_hdr.flags`: the checksum at `csum_start + csum_offset` is partial.
pub const VNET_NEEDS_CSUM: u8 = 1;
/// `virtio_net_hdr.gso_type`: not a GSO super-packet.
pub const VNET_GSO_NONE: u8 = 0;

/// The fields of a `virtio_net_hdr` (little-endian on the machines latnet runs on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `VNET_NEEDS_CSUM` and friends.
    pub flags: u8,
    /// GSO type (`VNET_GSO_NONE` for a plain frame).
    pub gso_type: u8,
    /// GSO segment size.
    pub gso_size: u16,
    /// Where checksumming starts, from the start of the frame.
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Parse the 10 header bytes.
    pub fn parse(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            gso_size: u16::from_le_bytes([b[4], b[5]]),
            csum_start: u16::from_le_bytes([b[6], b[7]]),
            csum_offset: u16::from_le_bytes([b[8], b[9]]),
        }
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` lives for the call and its size is passed; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Interface index of `name` in the current network namespace.
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::other("interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {name:?} in this network namespace"),
        ))
    } else {
        Ok(idx)
    }
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() {
        return Err(io::Error::other(format!("interface name {name:?} too long")));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

/// MAC address and MTU of interface `name`.
pub fn if_hwaddr_mtu(name: &str) -> io::Result<([u8; 6], u32)> {
    // SAFETY: a plain datagram socket, closed by OwnedFd.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = ifreq(name)?;
    // SAFETY: SIOCGIFHWADDR writes into the ifreq we own.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) })?;
    // SAFETY: after SIOCGIFHWADDR the union holds ifru_hwaddr.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    let mut req = ifreq(name)?;
    // SAFETY: SIOCGIFMTU writes into the ifreq we own.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut req) })?;
    // SAFETY: after SIOCGIFMTU the union holds ifru_mtu.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok((mac, u32::try_from(mtu).unwrap_or(1500)))
}

/// `CLOCK_REALTIME` (ns), the clock of the receive ring's timestamps.
pub fn real_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is ours; clock_gettime with a valid clock id only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` in nanoseconds (shared by all network namespaces of the machine).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is ours; clock_gettime with a valid clock id only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// Readings of the two clocks [`KernelClock`] takes for each offset (it keeps the tightest).
const OFFSET_READINGS: usize = 7;

/// Converts the kernel's receive timestamps (`CLOCK_REALTIME`: a packet socket's ring, a UDP
/// socket's `SO_TIMESTAMPNS`) to `CLOCK_MONOTONIC` less `t0` (a switch's clock since its start;
/// `t0` = 0: the monotonic clock itself), with the offset between the two clocks re-read every
/// 100 ms (NTP may step the real-time clock).
#[derive(Debug)]
pub struct KernelClock {
    t0: u64,
    /// `CLOCK_MONOTONIC` minus `CLOCK_REALTIME` (ns).
    offset: i128,
    next_refresh_ns: u64,
}

impl KernelClock {
    /// A converter to `CLOCK_MONOTONIC` less `t0`, its offset read now.
    pub fn new(t0: u64) -> KernelClock {
        let mut c = KernelClock { t0, offset: 0, next_refresh_ns: 0 };
        c.refresh(0);
        c
    }

    /// Re-read the clocks' offset if 100 ms have passed since the last reading (`now_ns` on
    /// this converter's clock).
    pub fn refresh(&mut self, now_ns: u64) {
        if now_ns < self.next_refresh_ns {
            return;
        }
        // the real-time reading between two monotonic ones: its error is half their gap, which
        // a preemption between the reads stretches (to 80 us on this machine's VM), so the
        // tightest of several readings
        let mut best = (u64::MAX, 0);
        for _ in 0..OFFSET_READINGS {
            let (a, r, b) = (mono_ns(), real_ns(), mono_ns());
            let offset = (i128::from(a) + i128::from(b)) / 2 - i128::from(r);
            best = best.min((b.saturating_sub(a), offset));
        }
        self.offset = best.1;
        self.next_refresh_ns = now_ns + 100_000_000;
    }

    /// The instant of a kernel timestamp on this converter's clock, if the kernel gave one (0:
    /// none); before `t0`: `t0`.
    pub fn arrival(&self, kernel_ns: u64) -> Option<u64> {
        if kernel_ns == 0 {
            return None;
        }
        let mono = i128::from(kernel_ns) + self.offset - i128::from(self.t0);
        Some(u64::try_from(mono.max(0)).unwrap_or(u64::MAX))
    }
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as _,
    }
}

/// Sleep until `CLOCK_MONOTONIC` reaches `deadline_ns` (or a signal arrives).
pub fn sleep_until(deadline_ns: u64) {
    let ts = timespec(deadline_ns);
    // SAFETY: `ts` is valid for the call; no remaining-time pointer with TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
    };
}

/// Wait until one of `fds` is readable or `timeout_ns` passed (`None`: no timeout).
/// Returns the readiness of each fd (true = readable); interrupted waits return all false.
pub fn poll_readable(
    fds: &[RawFd],
    timeout_ns: Option<u64>,
    ready: &mut Vec<bool>,
) -> io::Result<()> {
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ts = timeout_ns.map(timespec);
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` and `ts` live for the call; no signal mask.
    let r = unsafe {
        libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, tsp, std::ptr::null())
    };
    ready.clear();
    if r < 0 {
        let e = io::Error::last_os_error();
        ready.resize(fds.len(), false);
        return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
    }
    ready.extend(pfds.iter().map(|p| p.revents & (libc::POLLIN | libc::POLLERR) != 0));
    Ok(())
}

/// Wait up to `timeout_ns` for `fd` to be writable (`POLLOUT`) or in error; whether it is.
pub fn poll_writable(fd: RawFd, timeout_ns: u64) -> io::Result<bool> {
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    let ts = timespec(timeout_ns);
    // SAFETY: `p` and `ts` live for the call; no signal mask.
    let r = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(p.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0)
}

/// Make timers of this thread fire within 1 ns of their deadline (default slack is 50 us).
pub fn precise_timers() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer argument and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Set the stop flag on SIGINT and SIGTERM (instead of dying), so that statistics are written.
pub fn install_stop_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; sigaction is
    // given a fully initialised struct.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// Run `f` with the calling thread in the network namespace of the file `path` (as
/// `/run/netns/NAME`, where `ip netns add` puts them), then put the thread back into its own.
/// Sockets `f` opens stay in that namespace (their interfaces, their traffic) wherever the
/// thread goes next, so one process can switch between namespaces' interfaces.
pub fn in_netns<T>(path: &std::path::Path, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let named = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("network namespace {}: {what}: {e}", path.display()))
    };
    let own = std::fs::File::open("/proc/thread-self/ns/net").map_err(|e| named("own", e))?;
    let target = std::fs::File::open(path).map_err(|e| named("open", e))?;
    // SAFETY: setns is given an open namespace file and the matching type; it changes only the
    // calling thread's network namespace (allowed in a multithreaded process).
    cvt(unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) })
        .map_err(|e| named("enter", e))?;
    let r = f();
    // SAFETY: as above, with the thread's own namespace.
    match cvt(unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWNET) }) {
        Ok(_) => r,
        Err(e) => Err(named("leave", e)),
    }
}

/// True once SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Set the IP TOS byte (DSCP << 2 | ECN) of a socket.
pub fn set_tos(fd: RawFd, tos: u8) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, libc::c_int::from(tos))
}

/// Set the IPv6 traffic class (DSCP << 2 | ECN) of a socket's packets.
pub fn set_tclass(fd: RawFd, tclass: u8) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, libc::c_int::from(tclass))
}

/// Put hop-by-hop options `hbh` (a whole extension header, its next-header octet filled in by
/// the kernel) in every IPv6 packet the socket sends (`CAP_NET_RAW`).
pub fn set_hop_options(fd: RawFd, hbh: &[u8]) -> io::Result<()> {
    // SAFETY: `hbh` lives for the call and its length is passed; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_HOPOPTS,
            hbh.as_ptr().cast(),
            libc::socklen_t::try_from(hbh.len()).unwrap_or(libc::socklen_t::MAX),
        )
    })
    .map(drop)
}

/// Send one UDP datagram `payload` to the IPv6 address `to` with the hop-by-hop options `hbh`
/// (a whole extension header, as for [`set_hop_options`]) in this packet only: an
/// `IPV6_HOPOPTS` control message of `sendmsg(2)` (`CAP_NET_RAW`), which replaces the socket's
/// sticky options for the packet. Returns the bytes sent.
pub fn send_with_hop_options(
    fd: RawFd,
    payload: &[u8],
    to: std::net::SocketAddrV6,
    hbh: &[u8],
) -> io::Result<usize> {
    let mut sa = RawAddr::new(to.into());
    let (name, namelen) = sa.as_mut_ptr();
    let hlen = u32::try_from(hbh.len()).map_err(|_| io::Error::other("hop-by-hop too long"))?;
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(hlen) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)]; // aligned for cmsghdr
    let mut iov = libc::iovec { iov_base: payload.as_ptr() as *mut _, iov_len: payload.len() };
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = name.cast();
    msg.msg_namelen = namelen;
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg_control` holds `space` = CMSG_SPACE(hlen) bytes, so the first header and
    // `hlen` bytes of data after it fit; `hbh` is valid for `hlen` bytes.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&raw const msg);
        (*c).cmsg_level = libc::IPPROTO_IPV6;
        (*c).cmsg_type = libc::IPV6_HOPOPTS;
        (*c).cmsg_len = libc::CMSG_LEN(hlen) as _;
        std::ptr::copy_nonoverlapping(hbh.as_ptr(), libc::CMSG_DATA(c), hbh.len());
    }
    // SAFETY: every pointer in `msg` points to memory that lives for the call; the kernel
    // only reads it.
    let n = unsafe { libc::sendmsg(fd, &raw const msg, 0) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Deliver the hop-by-hop options of received IPv6 packets to [`recv_stamped`]
/// (`IPV6_RECVHOPOPTS`).
pub fn set_recv_hop_options(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPOPTS, 1)
}

/// Have the kernel stamp every datagram the socket receives (`SO_TIMESTAMPNS`, `CLOCK_REALTIME`)
/// as it enters the host's stack; [`recv_stamped`] returns the stamp.
pub fn set_rx_timestamps(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// Receive one datagram into `buf` and the packet's hop-by-hop extension header (as it
/// arrived, next-header octet first) into `hbh`, which is left empty when the packet had none
/// or the socket does not ask for them ([`set_recv_hop_options`]). Returns the payload bytes
/// and the kernel's receive timestamp (`CLOCK_REALTIME` ns; 0 when the socket does not ask for
/// one, [`set_rx_timestamps`], or the kernel gave none).
pub fn recv_stamped(fd: RawFd, buf: &mut [u8], hbh: &mut Vec<u8>) -> io::Result<(usize, u64)> {
    hbh.clear();
    // a hop-by-hop header is at most 2048 octets, a timestamp 16; aligned for cmsghdr
    let mut control = [0u64; 272];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `buf` and `control` live for the call and their lengths are passed.
    let n = unsafe { libc::recvmsg(fd, &raw mut msg, 0) };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    let mut stamp = 0;
    // SAFETY: the kernel filled `msg_controllen` bytes of `control` with whole control
    // messages; CMSG_FIRSTHDR / CMSG_NXTHDR stay within them and return null at the end, and
    // each message's data is `cmsg_len - CMSG_LEN(0)` bytes inside the buffer (a timestamp's
    // is one `timespec`, read unaligned).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            let len = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_HOPOPTS {
                hbh.extend_from_slice(std::slice::from_raw_parts(libc::CMSG_DATA(c), len));
            } else if level == libc::SOL_SOCKET
                && kind == libc::SCM_TIMESTAMPNS
                && len >= std::mem::size_of::<libc::timespec>()
            {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = (ts.tv_sec as u64)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    Ok((n, stamp))
}

/// Send UDP over IPv4 without a checksum (checksum 0), so switches may rewrite payload
/// fields without fixing it.
pub fn set_udp_no_checksum(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1)
}

/// Set the socket receive buffer (bytes), beyond rmem_max when privileged.
pub fn set_rcvbuf(fd: RawFd, bytes: usize) {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, v);
    }
}

/// Set the socket send buffer (bytes), beyond wmem_max when privileged.
pub fn set_sndbuf(fd: RawFd, bytes: usize) {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, v);
    }
}

/// Set a socket option from raw bytes (`v` empty: a null pointer and length 0, which clears
/// options such as `IP_OPTIONS`).
pub fn setsockopt_bytes(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: &[u8],
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(v.len()).unwrap_or(libc::socklen_t::MAX);
    let ptr = if v.is_empty() { std::ptr::null() } else { v.as_ptr().cast() };
    // SAFETY: `v` lives for the call and its length is passed; the kernel only reads it.
    cvt(unsafe { libc::setsockopt(fd, level, name, ptr, len) }).map(drop)
}

/// Set `SO_RCVTIMEO` or `SO_SNDTIMEO`.
pub fn set_timeout(fd: RawFd, name: libc::c_int, t: std::time::Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_usec: libc::suseconds_t::from(t.subsec_micros() as i32),
    };
    // SAFETY: `tv` lives for the call and its size is passed; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&raw const tv).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// A socket address as the kernel takes it: `sockaddr_in` or `sockaddr_in6`.
enum RawAddr {
    V4(libc::sockaddr_in),
    V6(libc::sockaddr_in6),
}

impl RawAddr {
    fn new(a: std::net::SocketAddr) -> RawAddr {
        match a {
            std::net::SocketAddr::V4(a) => RawAddr::V4(libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
                sin_zero: [0; 8],
            }),
            std::net::SocketAddr::V6(a) => RawAddr::V6(libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            }),
        }
    }

    fn family(&self) -> libc::c_int {
        match self {
            RawAddr::V4(_) => libc::AF_INET,
            RawAddr::V6(_) => libc::AF_INET6,
        }
    }

    /// Pointer and length for bind(2), connect(2) and getsockname(2).
    fn as_mut_ptr(&mut self) -> (*mut libc::sockaddr, libc::socklen_t) {
        match self {
            RawAddr::V4(a) => ((a as *mut libc::sockaddr_in).cast(), size_of_val(a) as _),
            RawAddr::V6(a) => ((a as *mut libc::sockaddr_in6).cast(), size_of_val(a) as _),
        }
    }

    fn port(&self) -> u16 {
        u16::from_be(match self {
            RawAddr::V4(a) => a.sin_port,
            RawAddr::V6(a) => a.sin6_port,
        })
    }
}

/// An unconnected TCP socket of `to`'s family, bound to an ephemeral port on every address (so
/// its port is known before it connects). Returns the socket and the port.
pub fn tcp_socket_bound(to: std::net::SocketAddr) -> io::Result<(OwnedFd, u16)> {
    let any = match to {
        std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    tcp_socket_on(std::net::SocketAddr::new(any, 0))
}

/// An unconnected TCP socket bound to `local` (port 0: an ephemeral one). Returns the socket
/// and its port.
pub fn tcp_socket_on(local: std::net::SocketAddr) -> io::Result<(OwnedFd, u16)> {
    let mut sa = RawAddr::new(local);
    // SAFETY: plain socket(2).
    let fd = cvt(unsafe { libc::socket(sa.family(), libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let (ptr, mut len) = sa.as_mut_ptr();
    // SAFETY: `ptr` points to a socket address of `len` bytes that outlives the call.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), ptr, len) })?;
    // SAFETY: as above; the kernel writes at most `len` bytes into it and updates `len`.
    cvt(unsafe { libc::getsockname(fd.as_raw_fd(), ptr, &mut len) })?;
    Ok((fd, sa.port()))
}

/// Connect a TCP socket (blocking).
pub fn connect(fd: &OwnedFd, to: std::net::SocketAddr) -> io::Result<()> {
    let mut sa = RawAddr::new(to);
    let (ptr, len) = sa.as_mut_ptr();
    // SAFETY: `ptr` points to a socket address of `len` bytes that outlives the call.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), ptr, len) }).map(drop)
}

/// Fields of `struct tcp_info` the TCP tools report (counters the running kernel's struct
/// ends before read 0; `total_rto` says whether it has that one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// The connection's state (`TCP_ESTABLISHED` is 1, `TCP_SYN_SENT` 2, `TCP_CLOSE` 7, ...).
    pub state: u8,
    /// Largest segment payload the sender uses, bytes.
    pub snd_mss: u32,
    /// Smoothed RTT, us.
    pub rtt_us: u32,
    /// Slow-start threshold, segments (`TCP_INFINITE_SSTHRESH`, `0x7fffffff`, before the
    /// first).
    pub snd_ssthresh: u32,
    /// Retransmitted segments.
    pub total_retrans: u32,
    /// The kernel's current pacing rate, bytes/s.
    pub pacing_rate: u64,
    /// `SO_MAX_PACING_RATE`, bytes/s (`u64::MAX` when never set).
    pub max_pacing_rate: u64,
    /// Whether the connection uses the TCP timestamp option (`TCPI_OPT_TIMESTAMPS`).
    pub timestamps: bool,
    /// Whether ECN was negotiated (`TCPI_OPT_ECN`).
    pub ecn: bool,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Segments sent and not yet acknowledged, SACKed, lost and retransmitted (in flight:
    /// `unacked - sacked - lost + retrans`, as `tcp_packets_in_flight`).
    pub unacked: u32,
    /// See `unacked`.
    pub sacked: u32,
    /// See `unacked`.
    pub lost: u32,
    /// See `unacked`.
    pub retrans: u32,
    /// Bytes the peer acknowledged (the SYN's and FIN's sequence numbers count, one each).
    pub bytes_acked: u64,
    /// Bytes received in order.
    pub bytes_received: u64,
    /// Segments with data received (retransmissions included).
    pub data_segs_in: u32,
    /// Segments with data sent (retransmissions included).
    pub data_segs_out: u32,
    /// Segments delivered with a CE echo (`tcpi_delivered_ce`).
    pub delivered_ce: u32,
    /// Retransmission timeouts, SYN's included (Linux 6.7 on).
    pub total_rto: Option<u16>,
}

impl TcpInfo {
    /// Packets in flight, as the kernel counts them.
    pub fn in_flight(&self) -> u32 {
        (self.unacked + self.retrans).saturating_sub(self.sacked + self.lost)
    }
}

/// TCP's counters so far in this process's network namespace that tell what a lone sender's
/// connection did: the `TcpExt` counters `TCPHystartTrainDetect`, `TCPHystartDelayDetect`
/// and `TCPLossProbes` of `/proc/net/netstat` (`None` if the kernel has no such counters).
pub fn tcp_counters() -> Option<[u64; 3]> {
    netstat_counters(&std::fs::read_to_string("/proc/net/netstat").ok()?)
}

/// [`tcp_counters`] from the text of `/proc/net/netstat` (a line of names, then a line of
/// values, per group).
fn netstat_counters(text: &str) -> Option<[u64; 3]> {
    let mut lines = text.lines();
    while let Some(names) = lines.next() {
        let values = lines.next()?;
        if !names.starts_with("TcpExt:") || !values.starts_with("TcpExt:") {
            continue;
        }
        let find = |key: &str| {
            let i = names.split_whitespace().position(|n| n == key)?;
            values.split_whitespace().nth(i)?.parse().ok()
        };
        return Some([
            find("TCPHystartTrainDetect")?,
            find("TCPHystartDelayDetect")?,
            find("TCPLossProbes")?,
        ]);
    }
    None
}

/// The congestion control of TCP socket `fd` (`TCP_CONGESTION`).
pub fn tcp_congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 16]; // TCP_CA_NAME_MAX
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf` and updates `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    let name = &buf[..(len as usize).min(buf.len())];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// `TCP_INFO` (the fields sit at fixed offsets of the kernel's `struct tcp_info`; the libc
/// crate's struct stops before the pacing fields). Refused when the kernel's struct ends
/// before the pacing fields (Linux 4.x).
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf` and updates `len`.
    cvt(unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len)
    })?;
    let len = len as usize;
    if len < 120 {
        return Err(io::Error::other("TCP_INFO too short for the pacing fields"));
    }
    // (past `len` the buffer stays zero)
    let u16_at = |o: usize| u16::from_ne_bytes([buf[o], buf[o + 1]]);
    let u32_at = |o: usize| u32::from_ne_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[o..o + 8]);
        u64::from_ne_bytes(b)
    };
    Ok(TcpInfo {
        state: buf[0],
        snd_mss: u32_at(16),
        rtt_us: u32_at(68),
        snd_ssthresh: u32_at(76),
        total_retrans: u32_at(100),
        pacing_rate: u64_at(104),
        max_pacing_rate: u64_at(112),
        timestamps: buf[5] & 1 != 0, // tcpi_options
        ecn: buf[5] & 8 != 0,
        snd_cwnd: u32_at(80),
        unacked: u32_at(24),
        sacked: u32_at(28),
        lost: u32_at(32),
        retrans: u32_at(36),
        bytes_acked: u64_at(120),
        bytes_received: u64_at(128),
        data_segs_in: u32_at(152),
        data_segs_out: u32_at(156),
        delivered_ce: u32_at(196),
        total_rto: (len >= 242).then(|| u16_at(240)),
    })
}

/// An `AF_PACKET` socket receiving every IPv4 (`v6` false) or IPv6 frame of the namespace's
/// interfaces (whole frames, Ethernet header included), with a receive timeout.
pub fn ip_packet_socket(v6: bool, timeout: std::time::Duration) -> io::Result<OwnedFd> {
    let ethertype = if v6 { libc::ETH_P_IPV6 } else { libc::ETH_P_IP };
    let proto = libc::c_int::from((ethertype as u16).to_be());
    // SAFETY: plain socket(2).
    let fd =
        cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_timeout(fd.as_raw_fd(), libc::SO_RCVTIMEO, timeout)?;
    Ok(fd)
}

/// Receive one datagram / frame into `buf` (its length, at most `buf.len()`).
pub fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes; recv writes at most that many.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    usize::try_from(n).map(|n| n.min(buf.len())).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP socket asked for `SO_TIMESTAMPNS` gets the kernel's arrival stamp with each
    /// datagram (on loopback: between the send and the read, on the real-time clock); one not
    /// asked gets none.
    #[test]
    fn received_datagrams_carry_the_kernels_arrival_stamp() {
        use std::net::UdpSocket;
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_rx_timestamps(rx.as_raw_fd()).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (mut buf, mut hbh) = (vec![0u8; 64], Vec::new());
        let before = real_ns();
        tx.send_to(b"stamp me", rx.local_addr().unwrap()).unwrap();
        tx.send_to(b"plain", plain.local_addr().unwrap()).unwrap();
        let (n, stamp) = recv_stamped(rx.as_raw_fd(), &mut buf, &mut hbh).unwrap();
        let after = real_ns();
        assert_eq!(&buf[..n], b"stamp me");
        assert!(hbh.is_empty());
        assert!(before <= stamp && stamp <= after, "{before} <= {stamp} <= {after}");
        let (n, stamp) = recv_stamped(plain.as_raw_fd(), &mut buf, &mut hbh).unwrap();
        assert_eq!((&buf[..n], stamp), (&b"plain"[..], 0));
    }

    #[test]
    fn hystart_counters_are_read_by_name_from_the_tcpext_group() {
        let text = "TcpExt: SyncookiesSent TCPLossProbes TCPHystartTrainDetect \
                    TCPHystartTrainCwnd TCPHystartDelayDetect\nTcpExt: 0 7 3 120 5\n\
                    IpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(netstat_counters(text), Some([3, 5, 7]));
        assert_eq!(netstat_counters("IpExt: InNoRoutes\nIpExt: 0\n"), None);
        assert_eq!(netstat_counters("TcpExt: TCPHystartTrainDetect\nTcpExt: 1\n"), None);
        assert_eq!(netstat_counters("TcpExt: a b\n"), None, "names without values");
        // this machine's parse
        assert!(tcp_counters().is_some(), "{:?}", std::fs::read_to_string("/proc/net/netstat"));
    }

    /// `TCP_INFO`'s fields at their offsets: a connection over loopback that sent 100 kB
    /// counts them acknowledged on one side and received on the other, in data segments.
    #[test]
    fn tcp_info_reads_the_connections_counters() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        tx.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        rx.read_exact(&mut got).unwrap();
        let deadline = mono_ns() + 2_000_000_000;
        let t = loop {
            let t = tcp_info(tx.as_raw_fd()).unwrap();
            if t.bytes_acked > 100_000 || mono_ns() > deadline {
                break t;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        let r = tcp_info(rx.as_raw_fd()).unwrap();
        assert_eq!((t.state, r.state), (1, 1), "both established");
        // (the SYN's sequence number counts as acknowledged)
        assert_eq!((t.bytes_acked, r.bytes_received), (100_001, 100_000));
        assert!(t.data_segs_out > 0 && r.data_segs_in > 0, "{t:?} {r:?}");
        assert!(t.snd_cwnd >= 10 && t.snd_mss > 0 && t.rtt_us > 0, "{t:?}");
        assert_eq!((t.in_flight(), t.total_retrans, t.ecn), (0, 0, false), "{t:?}");
        // the side that sent no data has no slow-start threshold yet
        assert_eq!(r.snd_ssthresh, 0x7fff_ffff, "{r:?}");
    }

    #[test]
    fn kernel_timestamps_convert_to_the_switch_clock() {
        let t0 = mono_ns() - 5_000_000;
        let c = KernelClock::new(t0);
        assert_eq!(c.arrival(0), None, "no timestamp from the kernel");
        // a frame stamped just now (real-time clock) arrived about 5 ms after the switch's start
        let (before, at) = (mono_ns() - t0, c.arrival(real_ns()).unwrap());
        let after = mono_ns() - t0;
        // (the tightest of several readings: within a few microseconds, not one preemption off)
        assert!(at + 5_000 >= before && at <= after + 5_000, "{before} <= {at} <= {after}");
        assert_eq!(c.arrival(1).unwrap(), 0, "before the switch's start: its start");
    }
}
