//! The only module with `unsafe`: Linux system calls the switch and the traffic tools need.
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
pub mod rtnl;

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

/// One received frame, borrowed from the ring until [`PacketSocket::release`].
#[derive(Debug)]
pub struct RxFrame<'a> {
    /// The frame as captured (`snaplen` bytes from the Ethernet header on).
    pub data: &'a [u8],
    /// Its length on the wire; larger than `data.len()` if the ring truncated it.
    pub wire_len: u32,
    /// The `virtio_net_hdr` the kernel wrote before it.
    pub vnet: VnetHdr,
    /// The outer 802.1Q tag (TPID, TCI), if the kernel took it out of the frame (it does for
    /// every tagged frame it receives: the tag travels beside the data, not in it).
    pub vlan: Option<(u16, u16)>,
    /// When the kernel put the frame into the ring (`CLOCK_REALTIME`, ns; 0 if it gave none).
    pub kernel_ns: u64,
}

/// An `AF_PACKET` socket on one interface: `TPACKET_V2` receive ring, `sendmmsg` transmit.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ring: NonNull<u8>,
    ring_len: usize,
    frame_size: usize,
    frames: usize,
    next: usize,
    /// Transmit batch: frames waiting for [`PacketSocket::flush`] (without vnet header).
    tx: Vec<Vec<u8>>,
    /// Buffers of sent frames, until [`PacketSocket::take_spent`].
    spent: Vec<Vec<u8>>,
    tx_calls: u64,
}

// SAFETY: the ring mapping is owned by this value alone and only touched through &mut self.
unsafe impl Send for PacketSocket {}

/// `TPACKET_V2` frame header (`struct tpacket2_hdr`).
#[repr(C)]
struct Tpacket2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
    tp_padding: [u8; 4],
}

/// `tpacket_versions::TPACKET_V2`.
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// `tp_vlan_tci` holds a tag taken out of the frame.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `tp_vlan_tpid` holds its TPID (else it was 0x8100).
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const PACKET_OUTGOING: u8 = 4;
/// Offset of the `sockaddr_ll` after the frame header (TPACKET_ALIGN(sizeof tpacket2_hdr)).
const SLL_OFFSET: usize = 32;

/// Most frames per `sendmmsg` call.
pub const TX_BATCH: usize = 64;

impl PacketSocket {
    /// Open a socket on `ifname` with a receive ring of about `ring_bytes`, frames large
    /// enough for `mtu`.
    pub fn open(ifname: &str, mtu: u32, ring_bytes: usize) -> io::Result<PacketSocket> {
        let ifindex = if_index(ifname)?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: creating a socket has no memory effects; the fd is owned below.
        let raw = cvt(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            )
        })?;
        // SAFETY: `raw` was just returned by socket() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_VERSION, TPACKET_V2)?;
        setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
        // Older kernels lack it; outgoing frames are then skipped by their packet type.
        let _ = setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1);
        let _ = setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1);
        let _ = setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, 4 << 20);

        // Frame: header, sockaddr_ll, padding, vnet header, Ethernet frame (+ 4 VLAN tags).
        let need = 128 + VNET_HDR_LEN + mtu as usize + 14 + 16;
        let frame_size = need.next_power_of_two().max(2048);
        let block_size = (1usize << 20).max(frame_size);
        let blocks = (ring_bytes / block_size).max(1);
        let frames = blocks * (block_size / frame_size);
        let req = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: frames as u32,
        };
        // SAFETY: `req` lives for the call and its size is passed; the kernel only reads it.
        cvt(unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                (&req as *const libc::tpacket_req).cast(),
                std::mem::size_of::<libc::tpacket_req>() as libc::socklen_t,
            )
        })?;
        let ring_len = block_size * blocks;
        // SAFETY: mapping the ring the kernel just allocated for this socket; the mapping is
        // unmapped in Drop and never handed out beyond &self / &mut self borrows.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
                raw,
                0,
            )
        };
        let p = if p == libc::MAP_FAILED {
            // MAP_LOCKED may exceed RLIMIT_MEMLOCK: try without it.
            // SAFETY: as above.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    ring_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_POPULATE,
                    raw,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            p
        } else {
            p
        };
        let ring =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        // SAFETY: sockaddr_ll is plain old data; zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` lives for the call and its size is passed.
        let bound = cvt(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        });
        let sock = PacketSocket {
            fd,
            ring,
            ring_len,
            frame_size,
            frames,
            next: 0,
            tx: Vec::with_capacity(TX_BATCH),
            spent: Vec::with_capacity(TX_BATCH),
            tx_calls: 0,
        };
        bound?;
        Ok(sock)
    }

    /// The socket's file descriptor (for `ppoll`).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn hdr(&self, i: usize) -> *mut Tpacket2Hdr {
        // SAFETY (of the arithmetic): i < frames, frames * frame_size <= ring_len.
        unsafe { self.ring.as_ptr().add(i * self.frame_size).cast::<Tpacket2Hdr>() }
    }

    /// The next received frame, if the kernel has written one. Call [`Self::release`] after
    /// use; frames sent by this host itself are skipped.
    pub fn next_rx(&mut self) -> Option<RxFrame<'_>> {
        loop {
            let h = self.hdr(self.next);
            // SAFETY: `h` points into our mapping at a frame boundary; tp_status is shared
            // with the kernel, so it is read volatile, then an acquire fence orders the reads
            // of the frame after it.
            let status = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*h).tp_status)) };
            if status & TP_STATUS_USER == 0 {
                return None;
            }
            std::sync::atomic::fence(Ordering::Acquire);
            // SAFETY: the kernel handed this frame to us (TP_STATUS_USER); it does not write it
            // until we set TP_STATUS_KERNEL.
            let (len, snap, mac, tci, tpid, sec, nsec) = unsafe {
                let h = &*h;
                (
                    h.tp_len,
                    h.tp_snaplen as usize,
                    usize::from(h.tp_mac),
                    h.tp_vlan_tci,
                    h.tp_vlan_tpid,
                    h.tp_sec,
                    h.tp_nsec,
                )
            };
            let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 { tpid } else { 0x8100 };
            let vlan = (status & TP_STATUS_VLAN_VALID != 0).then_some((tpid, tci));
            let base = h.cast::<u8>();
            // SAFETY: the sockaddr_ll follows the header inside the frame.
            let pkttype = unsafe { *base.add(SLL_OFFSET + 10) };
            let in_bounds = mac >= VNET_HDR_LEN && mac + snap <= self.frame_size;
            if pkttype == PACKET_OUTGOING || !in_bounds {
                self.release();
                continue;
            }
            // SAFETY: bounds checked above against the frame size; the frame is ours until
            // release(), and the returned borrow of self prevents release() meanwhile.
            let (vnet, data) = unsafe {
                let v = &*(base.add(mac - VNET_HDR_LEN).cast::<[u8; VNET_HDR_LEN]>());
                (VnetHdr::parse(v), std::slice::from_raw_parts(base.add(mac), snap))
            };
            let kernel_ns = u64::from(sec) * 1_000_000_000 + u64::from(nsec);
            return Some(RxFrame { data, wire_len: len, vnet, vlan, kernel_ns });
        }
    }

    /// Give the current frame back to the kernel and move on.
    pub fn release(&mut self) {
        let h = self.hdr(self.next);
        std::sync::atomic::fence(Ordering::Release);
        // SAFETY: `h` is a frame header in our mapping; writing TP_STATUS_KERNEL returns it.
        unsafe {
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*h).tp_status), TP_STATUS_KERNEL)
        };
        self.next = (self.next + 1) % self.frames;
    }

    /// Queue a copy of `frame` for transmission (with an all-zero vnet header: no offloads);
    /// sends the batch when it is full. Returns frames the kernel refused.
    pub fn push_tx(&mut self, frame: &[u8]) -> usize {
        let mut b = self.spent.pop().unwrap_or_else(|| Vec::with_capacity(self.frame_size));
        b.clear();
        b.extend_from_slice(frame);
        self.push_tx_owned(b)
    }

    /// Queue `frame` for transmission without copying it (an all-zero vnet header goes in
    /// front of it in the same message); sends the batch when it is full. Returns frames the
    /// kernel refused. Sent buffers come back through [`Self::take_spent`].
    pub fn push_tx_owned(&mut self, frame: Vec<u8>) -> usize {
        let mut refused = 0;
        if self.tx.len() == TX_BATCH {
            refused = self.flush();
        }
        self.tx.push(frame);
        refused
    }

    /// Frames waiting in the transmit batch.
    pub fn tx_pending(&self) -> usize {
        self.tx.len()
    }

    /// Buffers of frames already handed to the kernel (for reuse), emptied by the call.
    pub fn take_spent(&mut self) -> std::vec::Drain<'_, Vec<u8>> {
        self.spent.drain(..)
    }

    /// Send the queued frames with `sendmmsg`; returns how many the kernel refused.
    pub fn flush(&mut self) -> usize {
        let n = self.tx.len();
        if n == 0 {
            return 0;
        }
        static ZERO_VNET: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];
        let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let mut iov = [empty; 2 * TX_BATCH];
        // SAFETY: mmsghdr is plain old data; zero is valid (no name, no control).
        let mut msgs: [libc::mmsghdr; TX_BATCH] = unsafe { std::mem::zeroed() };
        for (k, b) in self.tx.iter_mut().enumerate() {
            // The kernel only reads the vnet header (sendmmsg does not write its iovecs' data).
            iov[2 * k] = libc::iovec {
                iov_base: ZERO_VNET.as_ptr() as *mut libc::c_void,
                iov_len: VNET_HDR_LEN,
            };
            iov[2 * k + 1] = libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() };
        }
        for (k, m) in msgs[..n].iter_mut().enumerate() {
            m.msg_hdr.msg_iov = iov[2 * k..].as_mut_ptr();
            m.msg_hdr.msg_iovlen = 2;
        }
        let mut sent = 0usize;
        let mut refused = 0usize;
        while sent < n {
            self.tx_calls += 1;
            // SAFETY: msgs[sent..n] point to iovecs that point into self.tx buffers and the
            // static header, all alive and unmodified for the duration of the call.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr().add(sent),
                    (n - sent) as u32,
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The first message failed (e.g. ENOBUFS, EMSGSIZE): count it and go on.
                refused += 1;
                sent += 1;
            } else {
                sent += r as usize;
            }
        }
        self.spent.append(&mut self.tx);
        // Callers that never take the buffers back do not make this grow without bound.
        self.spent.truncate(16 * TX_BATCH);
        refused
    }

    /// `sendmmsg` calls so far.
    pub fn tx_calls(&self) -> u64 {
        self.tx_calls
    }

    /// Whether a received frame is waiting in the ring (frames sent by this host itself are
    /// skipped and given back on the way).
    pub fn rx_ready(&mut self) -> bool {
        self.next_rx().is_some()
    }

    /// Frames the kernel dropped because the receive ring was full, since the last call.
    pub fn ring_drops(&self) -> u64 {
        let mut st = libc::tpacket_stats { tp_packets: 0, tp_drops: 0 };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` and `len` are ours and sized correctly; the kernel writes at most len.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if r < 0 {
            0
        } else {
            u64::from(st.tp_drops)
        }
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // SAFETY: the mapping was created in open() with this length and nothing borrows it.
        unsafe { libc::munmap(self.ring.as_ptr().cast(), self.ring_len) };
    }
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
    let mut sa = RawAddr::new(std::net::SocketAddr::new(any, 0));
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

/// Fields of `struct tcp_info` the pacing tools report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Largest segment payload the sender uses, bytes.
    pub snd_mss: u32,
    /// Smoothed RTT, us.
    pub rtt_us: u32,
    /// Retransmitted segments.
    pub total_retrans: u32,
    /// The kernel's current pacing rate, bytes/s.
    pub pacing_rate: u64,
    /// `SO_MAX_PACING_RATE`, bytes/s (`u64::MAX` when never set).
    pub max_pacing_rate: u64,
    /// Whether the connection uses the TCP timestamp option (`TCPI_OPT_TIMESTAMPS`).
    pub timestamps: bool,
}

/// `TCP_INFO` (the fields sit at fixed offsets of the kernel's `struct tcp_info` since 4.x;
/// the libc crate's struct stops before the pacing fields).
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf` and updates `len`.
    cvt(unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len)
    })?;
    if (len as usize) < 120 {
        return Err(io::Error::other("TCP_INFO too short for the pacing fields"));
    }
    let u32_at = |o: usize| u32::from_ne_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[o..o + 8]);
        u64::from_ne_bytes(b)
    };
    Ok(TcpInfo {
        snd_mss: u32_at(16),
        rtt_us: u32_at(68),
        total_retrans: u32_at(100),
        pacing_rate: u64_at(104),
        max_pacing_rate: u64_at(112),
        timestamps: buf[5] & 1 != 0, // tcpi_options
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
