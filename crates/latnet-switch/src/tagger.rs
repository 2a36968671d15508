//! The host agent's tagger: a BPF program on the egress of a host's interface that gives each
//! admitted flow's packets what the Chameleon controller decided for them, in the host's own
//! kernel, before its queueing discipline:
//!
//! * the flow's **802.1Q tag stack** (source routing: one tag per switch, outermost first;
//!   `bpf_skb_vlan_push`, so the outermost tag travels as metadata on veth as on a NIC with
//!   VLAN offload, and a receiver's `AF_PACKET` ring hands it over beside the frame);
//! * its **DSCP** (the priority class of the host's queue; ECN bits kept, IPv4 header checksum
//!   updated);
//! * its **traffic-control class** (`skb->priority` = `major:minor`: an HTB class with the
//!   flow's token-bucket rate and burst when the agent shapes; HTB takes a packet's class from
//!   `skb->priority` when it names one of its classes).
//!
//! Packets are matched by destination address, protocol and ports, looked up three times, most
//! specific first: exact (`dst`, `proto`, `src_port`, `dst_port`); any source port; then any
//! packet to `dst` (an entry with protocol and ports 0: the host's best-effort route to that
//! destination). A packet no entry matches, or one the program cannot read (not IPv4 / IPv6,
//! truncated), passes unchanged. IPv6 extension headers (hop-by-hop and destination options,
//! routing, authentication, a first fragment) are walked to the UDP or TCP header, up to
//! [`MAX_EXT_HEADERS`] of them. IPv4 packets with options or non-first fragments, IPv6 non-first
//! fragments, ESP and longer or cut-short chains are matched by address only. Each entry
//! counts the packets and bytes it matched, and the packets it dropped because a tag could not
//! be pushed (a packet with half a stack would be misrouted). A segmentation (GSO) burst counts
//! as the packets it becomes on the wire.
//!
//! The program is assembled here, instruction by instruction ([`program`]), and loaded with raw
//! system calls ([`crate::sys::bpf`]): no compiler for BPF, no libbpf and no BPF file system are
//! needed, only a kernel with `CONFIG_BPF_SYSCALL`, `CONFIG_NET_CLS_BPF` and `tcx` links
//! (Linux 6.6+).

use crate::sys::bpf::{HashMap, Link, Program, TestRun};
use std::io;
use std::net::IpAddr;
use std::path::Path;

/// Most tags an entry pushes: as many as the wire format reads ([`latnet_wire::MAX_TAGS`]),
/// and so as many as a controller may put on a path.
pub const MAX_TAGS: usize = latnet_wire::MAX_TAGS;
/// Most IPv6 extension headers walked to find the ports.
pub const MAX_EXT_HEADERS: usize = 6;
/// Bytes of a map key: destination (16, IPv4 as `::ffff:a.b.c.d`), source port, destination
/// port (network order), protocol, 3 bytes of padding.
pub const KEY_LEN: usize = 24;
/// Bytes of a map value: tag count, DSCP (above 63: keep), 2 spare, class (`skb->priority`, 0:
/// keep), [`MAX_TAGS`] tag control words (outermost first), then three counters (packets,
/// bytes, push failures), 64 bits each, updated atomically by the program.
pub const VALUE_LEN: usize = OFF_PACKETS + 24;
/// Entries a tagger holds.
pub const MAX_ENTRIES: u32 = 4096;
/// The license the kernel is told (GPL-compatible, as the VLAN and checksum helpers require).
pub const LICENSE: &str = "Dual MIT/GPL";

const OFF_PACKETS: usize = 8 + 2 * MAX_TAGS;
const OFF_BYTES: usize = OFF_PACKETS + 8;
const OFF_FAILED: usize = OFF_PACKETS + 16;

/// `tcx` verdicts.
pub const TCX_NEXT: i32 = -1;
/// Drop the packet.
pub const TCX_DROP: i32 = 2;

/// Which packets an entry applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Match {
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol (17 UDP, 6 TCP); 0 with both ports 0: any packet to `dst`.
    pub proto: u8,
    /// Source port; 0: any.
    pub src_port: u16,
    /// Destination port; 0 (with `proto` 0): any.
    pub dst_port: u16,
}

impl Match {
    /// Any packet to `dst` (a best-effort route).
    pub fn any_to(dst: IpAddr) -> Match {
        Match { dst, proto: 0, src_port: 0, dst_port: 0 }
    }

    /// The map key.
    pub fn key(&self) -> [u8; KEY_LEN] {
        let mut k = [0u8; KEY_LEN];
        let a = match self.dst {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        k[..16].copy_from_slice(&a.octets());
        k[16..18].copy_from_slice(&self.src_port.to_be_bytes());
        k[18..20].copy_from_slice(&self.dst_port.to_be_bytes());
        k[20] = self.proto;
        k
    }
}

/// What the tagger does to an entry's packets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Action {
    /// 802.1Q tag control words (VID, and PCP in the top 3 bits), outermost first.
    pub tags: Vec<u16>,
    /// DSCP to write (0-63); `None`: keep the packet's.
    pub dscp: Option<u8>,
    /// `skb->priority` to set (a qdisc class `major << 16 | minor`); `None`: keep.
    pub class: Option<u32>,
}

/// Why an action cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    /// More tags than [`MAX_TAGS`].
    #[error("{0} tags: the tagger pushes at most {MAX_TAGS}")]
    TooManyTags(usize),
    /// A DSCP above 63.
    #[error("DSCP {0}: expected 0-63")]
    Dscp(u8),
    /// Class 0 (it means "keep").
    #[error("class 0: a class is major:minor with a major above 0")]
    Class,
}

impl Action {
    /// The map value (counters zero).
    pub fn value(&self) -> Result<[u8; VALUE_LEN], ActionError> {
        if self.tags.len() > MAX_TAGS {
            return Err(ActionError::TooManyTags(self.tags.len()));
        }
        let mut v = [0u8; VALUE_LEN];
        v[0] = self.tags.len() as u8;
        v[1] = match self.dscp {
            Some(d) if d > 63 => return Err(ActionError::Dscp(d)),
            Some(d) => d,
            None => 0xff,
        };
        let class = match self.class {
            Some(0) => return Err(ActionError::Class),
            Some(c) => c,
            None => 0,
        };
        v[4..8].copy_from_slice(&class.to_ne_bytes());
        for (i, t) in self.tags.iter().enumerate() {
            v[8 + 2 * i..10 + 2 * i].copy_from_slice(&t.to_ne_bytes());
        }
        Ok(v)
    }
}

/// What an entry counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Packets matched, as they go on the wire: a segmentation (GSO) burst counts its segments.
    pub packets: u64,
    /// Their bytes as the qdisc counts them before the tags are pushed (`wire_len`: each
    /// segment with its headers).
    pub bytes: u64,
    /// Buffers dropped because a tag could not be pushed (a GSO burst counts once).
    pub push_failures: u64,
}

impl std::ops::Add for Counters {
    type Output = Counters;
    fn add(self, b: Counters) -> Counters {
        Counters {
            packets: self.packets + b.packets,
            bytes: self.bytes + b.bytes,
            push_failures: self.push_failures + b.push_failures,
        }
    }
}

impl Counters {
    fn read(v: &[u8]) -> Counters {
        let at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v[o..o + 8]);
            u64::from_ne_bytes(b)
        };
        Counters { packets: at(OFF_PACKETS), bytes: at(OFF_BYTES), push_failures: at(OFF_FAILED) }
    }

    fn write(&self, v: &mut [u8]) {
        v[OFF_PACKETS..OFF_PACKETS + 8].copy_from_slice(&self.packets.to_ne_bytes());
        v[OFF_BYTES..OFF_BYTES + 8].copy_from_slice(&self.bytes.to_ne_bytes());
        v[OFF_FAILED..OFF_FAILED + 8].copy_from_slice(&self.push_failures.to_ne_bytes());
    }
}

// ---------------------------------------------------------------------------- the assembler

const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;
const R7: u8 = 7;
const R8: u8 = 8;
const R9: u8 = 9;
const R10: u8 = 10;

/// Access sizes (the `BPF_SIZE` bits).
#[derive(Clone, Copy)]
enum Size {
    W = 0x00,
    H = 0x08,
    B = 0x10,
    Dw = 0x18,
}

enum Item {
    Insn { code: u8, dst: u8, src: u8, off: i16, imm: i32 },
    Jump { code: u8, dst: u8, src: u8, imm: i32, to: String },
    MapFd { dst: u8, fd: i32 },
    Label(String),
}

/// A few BPF instructions at a time, with named jump targets.
#[derive(Default)]
struct Asm {
    items: Vec<Item>,
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Self {
        self.items.push(Item::Insn { code, dst, src, off, imm });
        self
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: &str) -> &mut Self {
        self.items.push(Item::Jump { code, dst, src, imm, to: to.to_owned() });
        self
    }
    fn label(&mut self, name: &str) -> &mut Self {
        self.items.push(Item::Label(name.to_owned()));
        self
    }
    fn mov(&mut self, dst: u8, src: u8) -> &mut Self {
        self.op(0xbf, dst, src, 0, 0)
    }
    fn movi(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(0xb7, dst, 0, 0, imm)
    }
    fn addi(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(0x07, dst, 0, 0, imm)
    }
    fn andi(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(0x57, dst, 0, 0, imm)
    }
    fn ori(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(0x47, dst, 0, 0, imm)
    }
    fn or(&mut self, dst: u8, src: u8) -> &mut Self {
        self.op(0x4f, dst, src, 0, 0)
    }
    fn add(&mut self, dst: u8, src: u8) -> &mut Self {
        self.op(0x0f, dst, src, 0, 0)
    }
    fn lshi(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(0x67, dst, 0, 0, imm)
    }
    fn rshi(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.op(0x77, dst, 0, 0, imm)
    }
    /// `dst = *(size *)(src + off)`
    fn ldx(&mut self, s: Size, dst: u8, src: u8, off: i16) -> &mut Self {
        self.op(0x61 | s as u8, dst, src, off, 0)
    }
    /// `*(size *)(dst + off) = src`
    fn stx(&mut self, s: Size, dst: u8, off: i16, src: u8) -> &mut Self {
        self.op(0x63 | s as u8, dst, src, off, 0)
    }
    /// `*(size *)(dst + off) = imm`
    fn st(&mut self, s: Size, dst: u8, off: i16, imm: i32) -> &mut Self {
        self.op(0x62 | s as u8, dst, 0, off, imm)
    }
    /// `lock *(u64 *)(dst + off) += src`
    fn atomic_add(&mut self, dst: u8, off: i16, src: u8) -> &mut Self {
        self.op(0xdb, dst, src, off, 0)
    }
    fn call(&mut self, helper: i32) -> &mut Self {
        self.op(0x85, 0, 0, 0, helper)
    }
    fn exit(&mut self) -> &mut Self {
        self.op(0x95, 0, 0, 0, 0)
    }
    fn ja(&mut self, to: &str) -> &mut Self {
        self.jump(0x05, 0, 0, 0, to)
    }
    fn jeqi(&mut self, dst: u8, imm: i32, to: &str) -> &mut Self {
        self.jump(0x15, dst, 0, imm, to)
    }
    fn jeq(&mut self, dst: u8, src: u8, to: &str) -> &mut Self {
        self.jump(0x1d, dst, src, 0, to)
    }
    fn jnei(&mut self, dst: u8, imm: i32, to: &str) -> &mut Self {
        self.jump(0x55, dst, 0, imm, to)
    }
    fn jgti(&mut self, dst: u8, imm: i32, to: &str) -> &mut Self {
        self.jump(0x25, dst, 0, imm, to)
    }
    fn jgt(&mut self, dst: u8, src: u8, to: &str) -> &mut Self {
        self.jump(0x2d, dst, src, 0, to)
    }
    fn jlei(&mut self, dst: u8, imm: i32, to: &str) -> &mut Self {
        self.jump(0xb5, dst, 0, imm, to)
    }
    fn jslti(&mut self, dst: u8, imm: i32, to: &str) -> &mut Self {
        self.jump(0xc5, dst, 0, imm, to)
    }
    /// `dst = map` (a 16-byte load of the map's descriptor, resolved by the kernel).
    fn map(&mut self, dst: u8, fd: i32) -> &mut Self {
        self.items.push(Item::MapFd { dst, fd });
        self
    }

    /// The encoded program. Panics on a jump to a label that was never placed (a bug here, not
    /// an input error: the program is fixed).
    fn assemble(&self) -> Vec<u8> {
        let slots = |i: &Item| match i {
            Item::Insn { .. } | Item::Jump { .. } => 1,
            Item::MapFd { .. } => 2,
            Item::Label(_) => 0,
        };
        let mut at = std::collections::HashMap::new();
        let mut pc = 0i64;
        for i in &self.items {
            if let Item::Label(l) = i {
                at.insert(l.clone(), pc);
            }
            pc += slots(i);
        }
        let enc = |out: &mut Vec<u8>, code: u8, dst: u8, src: u8, off: i16, imm: i32| {
            out.push(code);
            out.push((src << 4) | dst);
            out.extend_from_slice(&off.to_le_bytes());
            out.extend_from_slice(&imm.to_le_bytes());
        };
        let mut out = Vec::new();
        let mut pc = 0i64;
        for i in &self.items {
            match i {
                Item::Insn { code, dst, src, off, imm } => {
                    enc(&mut out, *code, *dst, *src, *off, *imm)
                }
                Item::Jump { code, dst, src, imm, to } => {
                    let target = at.get(to).copied().unwrap_or_else(|| panic!("no label {to}"));
                    let off = i16::try_from(target - pc - 1).unwrap_or(i16::MAX);
                    enc(&mut out, *code, *dst, *src, off, *imm);
                }
                Item::MapFd { dst, fd } => {
                    // BPF_LD | BPF_IMM | BPF_DW with BPF_PSEUDO_MAP_FD
                    enc(&mut out, 0x18, *dst, 1, 0, *fd);
                    enc(&mut out, 0, 0, 0, 0, 0);
                }
                Item::Label(_) => {}
            }
            pc += slots(i);
        }
        out
    }
}

// Helper functions of the kernel (`enum bpf_func_id`).
const MAP_LOOKUP_ELEM: i32 = 1;
const SKB_STORE_BYTES: i32 = 9;
const L3_CSUM_REPLACE: i32 = 10;
const SKB_VLAN_PUSH: i32 = 18;

// `struct __sk_buff` fields.
const SKB_LEN: i16 = 0;
const SKB_PRIORITY: i16 = 32;
const SKB_DATA: i16 = 76;
const SKB_DATA_END: i16 = 80;
const SKB_WIRE_LEN: i16 = 160;
const SKB_GSO_SEGS: i16 = 164;

// Stack: the key at -24..0, the new first header word at -28, the address family at -32.
const KEY: i16 = -24;
const NEW_WORD: i16 = -28;
const FAMILY: i16 = -32;

/// The tagger's program, reading the hash map whose descriptor is `map_fd`, encoded.
///
/// Registers kept across helper calls: `r6` the packet's context, `r7` the matched entry,
/// `r8` scratch, `r9` the first 16 bits of the IP header as they lie in the packet.
pub fn program(map_fd: i32) -> Vec<u8> {
    let mut a = Asm::default();
    a.mov(R6, R1);
    a.ldx(Size::W, R2, R6, SKB_DATA).ldx(Size::W, R3, R6, SKB_DATA_END);
    a.mov(R4, R2).addi(R4, 14).jgt(R4, R3, "pass");
    a.ldx(Size::H, R4, R2, 12);
    // the EtherType as the little-endian load of its two big-endian bytes
    a.jeqi(R4, 0x0008, "ipv4").jeqi(R4, 0xdd86, "ipv6").ja("pass");

    a.label("ipv4");
    a.mov(R4, R2).addi(R4, 34).jgt(R4, R3, "pass");
    a.ldx(Size::B, R4, R2, 14).andi(R4, 0xf0).jnei(R4, 0x40, "pass");
    a.st(Size::B, R10, FAMILY, 4);
    a.ldx(Size::H, R9, R2, 14);
    // key: ::ffff:a.b.c.d, then ports 0 and the protocol
    a.st(Size::Dw, R10, KEY, 0).st(Size::W, R10, KEY + 8, 0xffff_0000u32 as i32);
    a.ldx(Size::W, R4, R2, 30).stx(Size::W, R10, KEY + 12, R4);
    a.ldx(Size::B, R5, R2, 23);
    a.st(Size::W, R10, KEY + 16, 0).stx(Size::W, R10, KEY + 20, R5);
    // ports only from a UDP / TCP header right after a 20-byte header, not of a later fragment
    a.ldx(Size::B, R4, R2, 14).jnei(R4, 0x45, "lookup");
    a.ldx(Size::H, R4, R2, 20).andi(R4, 0xff1f).jnei(R4, 0, "lookup");
    a.jeqi(R5, 17, "ports4").jeqi(R5, 6, "ports4").ja("lookup");
    a.label("ports4");
    a.mov(R4, R2).addi(R4, 38).jgt(R4, R3, "lookup");
    a.ldx(Size::W, R4, R2, 34).stx(Size::W, R10, KEY + 16, R4);
    a.ja("lookup");

    a.label("ipv6");
    a.mov(R4, R2).addi(R4, 54).jgt(R4, R3, "pass");
    a.st(Size::B, R10, FAMILY, 6);
    a.ldx(Size::H, R9, R2, 14);
    a.ldx(Size::Dw, R4, R2, 38).stx(Size::Dw, R10, KEY, R4);
    a.ldx(Size::Dw, R4, R2, 46).stx(Size::Dw, R10, KEY + 8, R4);
    a.ldx(Size::B, R5, R2, 20);
    a.st(Size::W, R10, KEY + 16, 0);
    // the extension headers: r5 the next header, r8 where it starts (from the frame's start)
    a.movi(R8, 54);
    for i in 0..MAX_EXT_HEADERS {
        let (ext, ah, frag, next) =
            (format!("ext{i}"), format!("ah{i}"), format!("frag{i}"), format!("hdr{}", i + 1));
        a.label(&format!("hdr{i}"));
        a.jeqi(R5, 17, "ports6").jeqi(R5, 6, "ports6");
        a.jeqi(R5, 0, &ext).jeqi(R5, 43, &ext).jeqi(R5, 60, &ext);
        a.jeqi(R5, 51, &ext).jeqi(R5, 44, &ext).ja("proto6");
        // each starts with its next header and (but a fragment header) its length
        a.label(&ext);
        a.mov(R4, R2).add(R4, R8).mov(R1, R4).addi(R1, 8).jgt(R1, R3, "proto6");
        a.ldx(Size::B, R1, R4, 0).ldx(Size::B, R0, R4, 1);
        a.jeqi(R5, 51, &ah).jeqi(R5, 44, &frag);
        // hop-by-hop, routing, destination options: (length + 1) 8-octet units
        a.addi(R0, 1).lshi(R0, 3).add(R8, R0).mov(R5, R1).ja(&next);
        // authentication: (length + 2) 4-octet units
        a.label(&ah);
        a.addi(R0, 2).lshi(R0, 2).add(R8, R0).mov(R5, R1).ja(&next);
        // fragment: 8 octets; a later fragment has no ports (offset: the top 13 bits of the
        // big-endian word at 2, as a little-endian load sees them)
        a.label(&frag);
        a.mov(R5, R1).ldx(Size::H, R0, R4, 2).andi(R0, 0xf8ff).jnei(R0, 0, "proto6");
        a.addi(R8, 8);
    }
    a.label(&format!("hdr{MAX_EXT_HEADERS}"));
    a.jeqi(R5, 17, "ports6").jeqi(R5, 6, "ports6");
    a.label("proto6");
    a.stx(Size::W, R10, KEY + 20, R5).ja("lookup");
    a.label("ports6");
    a.stx(Size::W, R10, KEY + 20, R5);
    a.mov(R4, R2).add(R4, R8).mov(R1, R4).addi(R1, 4).jgt(R1, R3, "lookup");
    a.ldx(Size::W, R1, R4, 0).stx(Size::W, R10, KEY + 16, R1);

    a.label("lookup");
    for step in 0..3 {
        match step {
            1 => {
                a.st(Size::H, R10, KEY + 16, 0); // any source port
            }
            2 => {
                a.st(Size::W, R10, KEY + 16, 0).st(Size::W, R10, KEY + 20, 0); // anything to dst
            }
            _ => {}
        }
        a.map(R1, map_fd).mov(R2, R10).addi(R2, i32::from(KEY)).call(MAP_LOOKUP_ELEM);
        a.jnei(R0, 0, "found");
    }
    a.ja("pass");

    a.label("found");
    a.mov(R7, R0);
    // wire packets and bytes: a segmentation burst counts its segments and their headers
    a.ldx(Size::W, R1, R6, SKB_GSO_SEGS).jnei(R1, 0, "segs").movi(R1, 1);
    a.label("segs").atomic_add(R7, OFF_PACKETS as i16, R1);
    a.ldx(Size::W, R1, R6, SKB_WIRE_LEN).jnei(R1, 0, "wire").ldx(Size::W, R1, R6, SKB_LEN);
    a.label("wire").atomic_add(R7, OFF_BYTES as i16, R1);
    a.ldx(Size::W, R1, R7, 4).jeqi(R1, 0, "dscp").stx(Size::W, R6, SKB_PRIORITY, R1);

    a.label("dscp");
    a.ldx(Size::B, R1, R7, 1).jgti(R1, 63, "tags");
    a.ldx(Size::B, R2, R10, FAMILY).jeqi(R2, 6, "dscp6");
    // IPv4: the word is version/IHL, then TOS = DSCP << 2 | ECN
    a.mov(R8, R9).andi(R8, 0x03ff).lshi(R1, 10).or(R8, R1);
    a.jeq(R8, R9, "tags");
    a.stx(Size::H, R10, NEW_WORD, R8);
    a.mov(R1, R6).movi(R2, 24).mov(R3, R9).mov(R4, R8).movi(R5, 2).call(L3_CSUM_REPLACE);
    a.jslti(R0, 0, "tags");
    a.ja("store");
    a.label("dscp6");
    // IPv6: 0x60 | DSCP >> 2, then (DSCP & 3) << 6 | ECN << 4 | the flow label's first nibble
    a.mov(R8, R9).andi(R8, 0x3f00);
    a.mov(R2, R1).rshi(R2, 2).ori(R2, 0x60).or(R8, R2);
    a.andi(R1, 3).lshi(R1, 14).or(R8, R1);
    a.jeq(R8, R9, "tags");
    a.stx(Size::H, R10, NEW_WORD, R8);
    a.label("store");
    a.mov(R1, R6).movi(R2, 14).mov(R3, R10).addi(R3, i32::from(NEW_WORD));
    a.movi(R4, 2).movi(R5, 0).call(SKB_STORE_BYTES);

    a.label("tags");
    a.ldx(Size::B, R8, R7, 0);
    // innermost first: each push puts its tag outside the ones before it
    for i in (0..MAX_TAGS).rev() {
        let skip = format!("skip{i}");
        a.jlei(R8, i as i32, &skip);
        a.ldx(Size::H, R3, R7, 8 + 2 * i as i16).mov(R1, R6).movi(R2, 0x0081);
        a.call(SKB_VLAN_PUSH).jslti(R0, 0, "failed");
        a.label(&skip);
    }
    a.movi(R0, TCX_NEXT).exit();

    a.label("failed");
    a.movi(R1, 1).atomic_add(R7, OFF_FAILED as i16, R1);
    a.movi(R0, TCX_DROP).exit();

    a.label("pass");
    a.movi(R0, TCX_NEXT).exit();
    a.assemble()
}

/// A loaded tagger: its map, its program and the interfaces it is attached to.
#[derive(Debug)]
pub struct Tagger {
    map: HashMap,
    prog: Program,
    links: Vec<Link>,
}

impl Tagger {
    /// Create the map and load the program (`CAP_BPF` and `CAP_NET_ADMIN`, or root).
    pub fn load(name: &str) -> io::Result<Tagger> {
        let map = HashMap::create(name, KEY_LEN, VALUE_LEN, MAX_ENTRIES)
            .map_err(|e| io::Error::new(e.kind(), format!("creating the tagger's map: {e}")))?;
        let prog = Program::load_sched_cls(name, &program(map.raw_fd()), LICENSE)?;
        Ok(Tagger { map, prog, links: Vec::new() })
    }

    /// Attach to the egress of `iface` in the network namespace `netns` (a file such as
    /// `/run/netns/NAME`; `None`: this thread's).
    pub fn attach_egress(&mut self, netns: Option<&Path>, iface: &str) -> io::Result<()> {
        let attach = || {
            let idx = crate::sys::if_index(iface)?;
            self.prog.attach_tcx_egress(idx).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("attaching the tagger to {iface} (tcx egress, Linux 6.6+): {e}"),
                )
            })
        };
        let link = match netns {
            Some(ns) => crate::sys::in_netns(ns, attach)?,
            None => attach()?,
        };
        self.links.push(link);
        Ok(())
    }

    /// Interfaces attached.
    pub fn attached(&self) -> usize {
        self.links.len()
    }

    /// Give `m`'s packets `a` (replacing what they got before: a packet sees the old entry or
    /// the new one). The entry's counters carry over.
    pub fn set(&self, m: &Match, a: &Action) -> io::Result<()> {
        let mut v = a.value().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let key = m.key();
        if let Some(old) = self.map.lookup(&key)? {
            Counters::read(&old).write(&mut v);
        }
        self.map.update(&key, &v)
    }

    /// Stop matching `m`; what the entry counted, if it existed.
    pub fn remove(&self, m: &Match) -> io::Result<Option<Counters>> {
        let key = m.key();
        let old = self.map.lookup(&key)?;
        self.map.delete(&key)?;
        Ok(old.as_deref().map(Counters::read))
    }

    /// What `m`'s entry counted so far.
    pub fn counters(&self, m: &Match) -> io::Result<Option<Counters>> {
        Ok(self.map.lookup(&m.key())?.as_deref().map(Counters::read))
    }

    /// Run the program once on a frame (tests and diagnostics; see [`Program::test_run`]).
    pub fn test_run(&self, frame: &[u8]) -> io::Result<TestRun> {
        self.prog.test_run(frame, &[])
    }

    /// As [`Tagger::test_run`], with the context `ctx` (a prefix of `struct __sk_buff`, such as
    /// `wire_len` and `gso_segs` of a segmentation burst).
    pub fn test_run_ctx(&self, frame: &[u8], ctx: &[u8]) -> io::Result<TestRun> {
        self.prog.test_run(frame, ctx)
    }

    /// Run the program `repeat` times on a frame; the kernel's mean time per run is
    /// [`TestRun::duration_ns`] (benchmarks).
    pub fn test_run_repeat(&self, frame: &[u8], repeat: u32) -> io::Result<TestRun> {
        self.prog.test_run_repeat(frame, &[], repeat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn keys_put_ipv4_in_the_mapped_ipv6_form_and_ports_in_network_order() {
        let m = Match {
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)),
            proto: 17,
            src_port: 0x1234,
            dst_port: 5001,
        };
        let k = m.key();
        assert_eq!(&k[..16], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 3]);
        assert_eq!(&k[16..], &[0x12, 0x34, 0x13, 0x89, 17, 0, 0, 0]);
        let six = Match::any_to(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)));
        assert_eq!(&six.key()[..2], &[0x20, 0x01]);
        assert_eq!(&six.key()[16..], &[0; 8]);
    }

    #[test]
    fn values_hold_the_stack_outermost_first_and_refuse_what_does_not_fit() {
        let a = Action { tags: vec![21, 30, 100], dscp: Some(56), class: Some(0x0001_0005) };
        let v = a.value().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((v[0], v[1]), (3, 56));
        assert_eq!(u32::from_ne_bytes([v[4], v[5], v[6], v[7]]), 0x0001_0005);
        assert_eq!(u16::from_ne_bytes([v[8], v[9]]), 21);
        assert_eq!(u16::from_ne_bytes([v[12], v[13]]), 100);
        assert_eq!(&v[OFF_PACKETS..], &[0; 24]);
        assert_eq!(Action::default().value().map(|v| v[1]), Ok(0xff), "no DSCP: keep");
        let many = Action { tags: vec![1; MAX_TAGS + 1], ..Action::default() };
        assert_eq!(many.value(), Err(ActionError::TooManyTags(MAX_TAGS + 1)));
        assert_eq!(
            Action { dscp: Some(64), ..Action::default() }.value(),
            Err(ActionError::Dscp(64))
        );
        assert_eq!(Action { class: Some(0), ..Action::default() }.value(), Err(ActionError::Class));
    }

    #[test]
    fn the_program_is_whole_instructions_and_every_jump_lands_inside_it() {
        let p = program(7);
        assert_eq!(p.len() % 8, 0);
        let n = (p.len() / 8) as i64;
        let mut pc = 0i64;
        while pc < n {
            let at = (pc * 8) as usize;
            let code = p[at];
            if code == 0x18 {
                assert_eq!(p[at + 1] >> 4, 1, "map loads name a map descriptor");
                assert_eq!(i32::from_le_bytes([p[at + 4], p[at + 5], p[at + 6], p[at + 7]]), 7);
                pc += 2;
                continue;
            }
            if code & 0x07 == 0x05 && code != 0x85 && code != 0x95 {
                let off = i64::from(i16::from_le_bytes([p[at + 2], p[at + 3]]));
                let to = pc + 1 + off;
                assert!((0..n).contains(&to) && to > pc, "jump at {pc} to {to} of {n}");
            }
            pc += 1;
        }
        // ends with exit
        assert_eq!(p[p.len() - 8], 0x95);
    }
}
