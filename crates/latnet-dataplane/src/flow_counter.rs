//! The large-flow counter of switch-assisted TCP pacing (seed 003, Kfoury et al.): a switch
//! element that counts registered large flows per egress port and tells their senders.
//!
//! Ports: none of its own; a switch calls [`LargeFlowCounter::process`] for every packet it
//! forwards, with the packet's egress port and that port's rate, before enqueueing it. The
//! element may rewrite the packet's IP options ([`latnet_wire::large_flow`]) and never holds
//! packets. Sans-IO: it reads no clock; idle flows expire when a runner calls
//! [`LargeFlowCounter::expire`] at [`LargeFlowCounter::next_expiry`] (latnet's simulator and
//! real-time switch do, so an idle connection leaves the count `idle_timeout` after its last
//! packet, with or without packets after it), and also when packets pass, in a scan at most
//! every quarter of `idle_timeout` (a runner that never calls `expire` still removes them, at
//! the first packet 1 to 1.25 `idle_timeout` after).
//!
//! # Protocol (the seed's, completed where it is silent)
//!
//! * **Register**: a TCP SYN (without ACK) carrying a REGISTER option counts its connection at
//!   the SYN's egress port (a retransmitted SYN is not counted twice). The switch writes its
//!   count `N` and the port rate into the option if that share `rate / N` is tighter than what
//!   an earlier switch wrote, so the receiver sees the path's tightest share.
//! * **Report in the SYN-ACK**: the SYN-ACK of a counted connection (the reverse 5-tuple) gets
//!   a REPORT option with the port's `N` and rate (inserted, or updated when tighter than one
//!   already there). The sender sets its pacing rate to `rate / N`.
//! * **Announce**: when a port's `N` changes, every counted connection on it is told on its
//!   next packet toward the sender (usually an ACK) by the same REPORT option — piggybacked, so
//!   the switch never creates packets. Disable with `announce = false`.
//! * **Several counting switches**: every REPORT toward the sender of a counted connection is
//!   tightened to the switch's share if that is smaller, and a switch remembers the last
//!   REPORT that reached it (the switches nearer the receiver): its own announcement starts
//!   from that, so a change at a switch that is not the bottleneck never tells the sender a
//!   looser share than the path's.
//! * **Deregister**: a FIN or RST in either direction, a DEREGISTER option, or no packet of the
//!   connection in either direction for `idle_timeout` (default 5 s) removes it from its port's
//!   count.
//!
//! Parameters: `idle_timeout`, `max_flows` (default 65,536: a registration beyond is not
//! counted, and is counted in `table_full`; so is one at a port that already counts 65,535, the
//! most the option's 16-bit count can say), `announce`. Counters: [`CounterStats`].
//! A packet with a malformed large-flow option is refused with `malformed-option`; the switch
//! drops and counts it.

use crate::drop::DropReason;
use crate::packet::Packet;
use latnet_units::{Duration, Rate, Time};
use latnet_wire::{
    large_flow_option, parse_headers, set_large_flow_option, LargeFlowMsg, LargeFlowOption,
    TcpFlags, L4,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Settings (`large_flows = { idle_timeout = "5s" }` on a switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterSpec {
    /// A connection with no packet for this long is no longer counted.
    #[serde(default = "CounterSpec::default_idle")]
    pub idle_timeout: Duration,
    /// Most connections counted at once.
    #[serde(default = "CounterSpec::default_max_flows")]
    pub max_flows: u32,
    /// Tell running senders when their port's count changes.
    #[serde(default = "CounterSpec::default_announce")]
    pub announce: bool,
}

impl CounterSpec {
    fn default_idle() -> Duration {
        Duration::from_secs(5)
    }
    fn default_max_flows() -> u32 {
        65_536
    }
    fn default_announce() -> bool {
        true
    }
}

impl Default for CounterSpec {
    fn default() -> Self {
        CounterSpec {
            idle_timeout: Self::default_idle(),
            max_flows: Self::default_max_flows(),
            announce: Self::default_announce(),
        }
    }
}

/// What the counter has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterStats {
    /// Connections registered.
    pub registered: u64,
    /// Removed on FIN.
    pub fin: u64,
    /// Removed on RST.
    pub rst: u64,
    /// Removed by a DEREGISTER option.
    pub deregistered: u64,
    /// Removed after `idle_timeout`.
    pub expired: u64,
    /// REPORT options written in SYN-ACKs.
    pub reports: u64,
    /// REPORT options written in later packets (announcements).
    pub announcements: u64,
    /// Registrations not counted because the table was full.
    pub table_full: u64,
    /// Packets refused for a malformed large-flow option.
    pub malformed: u64,
    /// Options that could not be written (no room in the header).
    pub unwritable: u64,
}

/// What [`LargeFlowCounter::process`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterAction {
    /// Nothing (not TCP, or not a counted connection).
    None,
    /// Counted a new connection; the port now has `count`.
    Registered {
        /// Large flows at the port.
        count: u16,
    },
    /// A SYN-ACK got a REPORT of `count`.
    Reported {
        /// Large flows at the port.
        count: u16,
    },
    /// A packet toward a sender got an announcement of `count`.
    Announced {
        /// Large flows at the port.
        count: u16,
    },
    /// Removed a connection; its port now has `count`.
    Deregistered {
        /// Large flows left at the port.
        count: u16,
    },
    /// A packet of a counted connection, nothing to say.
    Seen,
}

/// A connection as the sender sees it: (sender, receiver, sender port, receiver port).
type ConnKey = (IpAddr, IpAddr, u16, u16);

#[derive(Debug, Clone, Copy)]
struct Entry {
    port: u32,
    last_seen: Time,
    /// The count last told to the sender.
    told: u16,
    /// `(count, rate)` of the last filled REPORT that reached this switch toward the sender:
    /// the tightest share of the switches nearer the receiver.
    path: Option<(u16, u32)>,
}

#[derive(Debug, Clone, Copy, Default)]
struct PortCount {
    count: u16,
    rate_kbps: u32,
}

/// The counter. See the module documentation.
#[derive(Debug, Clone)]
pub struct LargeFlowCounter {
    spec: CounterSpec,
    flows: BTreeMap<ConnKey, Entry>,
    ports: BTreeMap<u32, PortCount>,
    next_scan: Time,
    stats: CounterStats,
}

/// A port's rate as the option carries it, kbit/s: at least 1 for a port with any rate (the
/// option has no smaller unit, and 0 would say the port has none).
fn kbps(r: Rate) -> u32 {
    let k = (r.bps() / 1000).max(u64::from(r.bps() > 0));
    u32::try_from(k).unwrap_or(u32::MAX)
}

impl LargeFlowCounter {
    /// An empty counter.
    pub fn new(spec: CounterSpec) -> Self {
        LargeFlowCounter {
            spec,
            flows: BTreeMap::new(),
            ports: BTreeMap::new(),
            next_scan: Time::ZERO,
            stats: CounterStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &CounterStats {
        &self.stats
    }

    /// Large flows counted at `port`.
    pub fn count(&self, port: u32) -> u16 {
        self.ports.get(&port).map_or(0, |p| p.count)
    }

    /// Connections counted.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// When the next idle connection would expire (`None` if none is counted).
    pub fn next_expiry(&self) -> Option<Time> {
        self.flows.values().map(|e| e.last_seen + self.spec.idle_timeout).min()
    }

    /// Remove connections idle for `idle_timeout` at `now`.
    pub fn expire(&mut self, now: Time) {
        let idle = self.spec.idle_timeout;
        let gone: Vec<ConnKey> = self
            .flows
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.last_seen) >= idle)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            self.remove(&k);
            self.stats.expired += 1;
        }
        self.next_scan = now + Duration::from_nanos((idle.as_nanos() / 4).max(1));
    }

    fn remove(&mut self, k: &ConnKey) -> Option<u16> {
        let e = self.flows.remove(k)?;
        let p = self.ports.entry(e.port).or_default();
        p.count = p.count.saturating_sub(1);
        Some(p.count)
    }

    fn write(&mut self, pkt: &mut Packet, opt: &LargeFlowOption) -> bool {
        if set_large_flow_option(&mut pkt.data, opt).is_ok() {
            true
        } else {
            self.stats.unwritable += 1;
            false
        }
    }

    /// Handle a packet about to be enqueued at `egress` (a port id of the caller's choosing,
    /// stable per port) of rate `egress_rate`. See the module documentation.
    pub fn process(
        &mut self,
        now: Time,
        pkt: &mut Packet,
        egress: u32,
        egress_rate: Rate,
    ) -> Result<CounterAction, DropReason> {
        if now >= self.next_scan {
            self.expire(now);
        }
        let Ok(h) = parse_headers(&pkt.data) else { return Err(DropReason::Malformed) };
        let (L4::Tcp { offset }, Some(key)) = (h.l4, h.key) else {
            return Ok(CounterAction::None);
        };
        let opt = match large_flow_option(&pkt.data) {
            Ok(o) => o,
            Err(_) => {
                self.stats.malformed += 1;
                return Err(DropReason::MalformedOption);
            }
        };
        let flags = pkt
            .data
            .get(offset + 12..offset + 14)
            .map_or(TcpFlags::NONE, |b| TcpFlags(u16::from_be_bytes([b[0], b[1]]) & 0x0fff));
        let fwd: ConnKey = (key.src, key.dst, key.src_port, key.dst_port);
        let rev: ConnKey = (key.dst, key.src, key.dst_port, key.src_port);
        let syn = flags.contains(TcpFlags::SYN);
        let ack = flags.contains(TcpFlags::ACK);

        // Deregistration: FIN, RST, DEREGISTER, either direction.
        let dereg = if flags.contains(TcpFlags::RST) {
            Some(0)
        } else if flags.contains(TcpFlags::FIN) {
            Some(1)
        } else if opt.is_some_and(|o| o.msg == LargeFlowMsg::Deregister) {
            Some(2)
        } else {
            None
        };
        if let Some(why) = dereg {
            let left = self.remove(&fwd).or_else(|| self.remove(&rev));
            if let Some(count) = left {
                match why {
                    0 => self.stats.rst += 1,
                    1 => self.stats.fin += 1,
                    _ => self.stats.deregistered += 1,
                }
                return Ok(CounterAction::Deregistered { count });
            }
            return Ok(CounterAction::None);
        }

        // Registration: a SYN with REGISTER.
        if syn && !ack {
            if let Some(mut o) = opt.filter(|o| o.msg == LargeFlowMsg::Register) {
                let port = self.ports.entry(egress).or_default();
                port.rate_kbps = kbps(egress_rate);
                if let Some(e) = self.flows.get_mut(&fwd) {
                    e.last_seen = now; // retransmitted SYN
                } else if self.flows.len() >= self.spec.max_flows as usize || port.count == u16::MAX
                {
                    // the table, or the port's 16-bit count (the option's), is full
                    self.stats.table_full += 1;
                    return Ok(CounterAction::None);
                } else {
                    let port = self.ports.entry(egress).or_default();
                    port.count += 1;
                    self.flows
                        .insert(fwd, Entry { port: egress, last_seen: now, told: 0, path: None });
                    self.stats.registered += 1;
                }
                let p = self.ports.get(&egress).copied().unwrap_or_default();
                if o.is_tighter(p.count, p.rate_kbps) {
                    o.fill(p.count, p.rate_kbps);
                    self.write(pkt, &o);
                }
                return Ok(CounterAction::Registered { count: p.count });
            }
        }

        // Data of a counted connection.
        if let Some(e) = self.flows.get_mut(&fwd) {
            e.last_seen = now;
            return Ok(CounterAction::Seen);
        }

        // Toward the sender of a counted connection: SYN-ACK report, or an announcement.
        let Some(e) = self.flows.get(&rev).copied() else { return Ok(CounterAction::None) };
        let p = self.ports.get(&e.port).copied().unwrap_or_default();
        let synack = syn && ack;
        let announce = self.spec.announce && e.told != p.count;
        // what the switches nearer the receiver say on this packet, and said last
        let arriving = opt.filter(|o| o.msg == LargeFlowMsg::Report && o.filled());
        let path = arriving.map(|o| (o.count, o.rate_kbps)).or(e.path);
        let mut action = CounterAction::Seen;
        let mut ok = true;
        if synack || announce || arriving.is_some() {
            let mut o = opt
                .filter(|o| o.msg == LargeFlowMsg::Report)
                .unwrap_or(LargeFlowOption::new(LargeFlowMsg::Report));
            let mut dirty = false;
            if let Some((c, r)) = path.filter(|_| !o.filled()) {
                // a REPORT of our own must not loosen the tightest share the sender was told
                o.fill(c, r);
                dirty = true;
            }
            if o.is_tighter(p.count, p.rate_kbps) {
                o.fill(p.count, p.rate_kbps);
                dirty = true;
            }
            ok = !dirty || self.write(pkt, &o);
            if ok && synack {
                self.stats.reports += 1;
                action = CounterAction::Reported { count: p.count };
            } else if ok && announce {
                self.stats.announcements += 1;
                action = CounterAction::Announced { count: p.count };
            }
        }
        if let Some(e) = self.flows.get_mut(&rev) {
            e.last_seen = now;
            e.path = path;
            if ok && (synack || announce) {
                e.told = p.count;
            }
        }
        Ok(action)
    }
}

#[cfg(test)]
#[path = "flow_counter_tests.rs"]
mod tests;
