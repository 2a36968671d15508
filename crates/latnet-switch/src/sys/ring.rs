//! [`PacketSocket`]: an `AF_PACKET` socket on one interface with a memory-mapped `TPACKET_V2`
//! receive ring and batched `sendmmsg` transmission.
#![allow(unsafe_code)]

use super::*;

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
