//! What the kernel-side tests share: a root check, and a veth pair in a namespace of its own
//! (`vx0` 10.77.0.1/24 with permanent neighbours .2 and .3 behind `vx1`), UDP sent from `vx0`'s
//! side and read on `vx1` by the switch's own `AF_PACKET` ring, the outer tag beside the frame.
#![allow(dead_code)] // each test file uses its part

use latnet_switch::sys::{in_netns, PacketSocket};
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::Command;

/// Loading BPF programs and making namespaces need root (CI runs as root).
pub fn root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The 802.1Q tags in a frame's data (after the MAC addresses), outermost first, and the
/// offset of the EtherType that follows them.
pub fn tags_in(frame: &[u8]) -> (Vec<u16>, usize) {
    let mut at = 12;
    let mut tags = Vec::new();
    while frame.len() >= at + 4 && frame[at..at + 2] == [0x81, 0x00] {
        tags.push(u16::from_be_bytes([frame[at + 2], frame[at + 3]]));
        at += 4;
    }
    (tags, at)
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A UDP datagram as `vx1` received it: (whole tag stack, destination, port, DSCP).
pub type Seen = (Vec<u16>, [u8; 4], u16, u8);

/// The namespace, its ring on `vx1` and a socket on `vx0`'s side; removed when dropped.
pub struct Veth {
    pub ns: String,
    pub path: PathBuf,
    ring: PacketSocket,
    sock: UdpSocket,
}

impl Veth {
    pub fn new(tag: &str) -> Veth {
        let ns = format!("ln{tag}{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        sh(&["ip", "netns", "add", &ns]);
        let q = |k: &str| format!("net.ipv6.conf.{k}.disable_ipv6=1");
        sh(&["ip", "netns", "exec", &ns, "sysctl", "-qw", &q("all"), &q("default")]);
        let (a, b) = ("02:00:00:00:00:10", "02:00:00:00:00:11");
        sh(&[
            "ip", "-n", &ns, "link", "add", "vx0", "address", a, "type", "veth", "peer", "name",
            "vx1", "address", b,
        ]);
        for i in ["vx0", "vx1"] {
            sh(&["ip", "-n", &ns, "link", "set", i, "up"]);
        }
        sh(&["ip", "-n", &ns, "addr", "add", "10.77.0.1/24", "dev", "vx0"]);
        for h in ["10.77.0.2", "10.77.0.3"] {
            sh(&[
                "ip",
                "-n",
                &ns,
                "neigh",
                "add",
                h,
                "lladdr",
                b,
                "dev",
                "vx0",
                "nud",
                "permanent",
            ]);
        }
        let path = PathBuf::from("/run/netns").join(&ns);
        let ring = in_netns(&path, || PacketSocket::open("vx1", 1500, 1 << 20))
            .unwrap_or_else(|e| panic!("{e}"));
        let sock =
            in_netns(&path, || UdpSocket::bind("10.77.0.1:0")).unwrap_or_else(|e| panic!("{e}"));
        Veth { ns, path, ring, sock }
    }

    /// Send one datagram from `vx0`'s side.
    pub fn send(&self, to: &str) {
        self.sock.send_to(b"latnet tagger test", to).unwrap_or_else(|e| panic!("{to}: {e}"));
    }

    /// The next `n` UDP datagrams `vx1` receives (waiting at most 5 s).
    pub fn seen(&mut self, n: usize) -> Vec<Seen> {
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < n && std::time::Instant::now() < deadline {
            let Some(f) = self.ring.next_rx() else {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            };
            let mut tags: Vec<u16> = f.vlan.map(|(_, tci)| tci).into_iter().collect();
            let (inner, at) = tags_in(f.data);
            tags.extend(inner);
            let ip = &f.data[at + 2..];
            if f.data[at..at + 2] == [0x08, 0x00] && ip[9] == 17 {
                let dst = [ip[16], ip[17], ip[18], ip[19]];
                got.push((tags, dst, u16::from_be_bytes([ip[22], ip[23]]), ip[1] >> 2));
            }
            self.ring.release();
        }
        got
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}
