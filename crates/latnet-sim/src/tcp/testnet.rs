//! A two-endpoint virtual-time harness for the TCP state machines, without the simulator:
//! client and server joined by one bottleneck link each way (rate, delay, FIFO limit, an
//! optional CE-marking threshold in packets, and a list of data segments to drop). Segments go
//! through their real bytes (emit + parse) on every hop.

use super::conn::{ConnEvent, Connection};
use super::segment::Segment;
use super::TcpConfig;
use latnet_units::{Bytes, Duration, Rate, Time};
use latnet_wire::{Ecn, EthernetAddress};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::Ipv4Addr;

/// One direction of the path.
#[derive(Debug)]
pub struct Link {
    pub rate: Rate,
    pub delay: Duration,
    pub limit: usize,
    pub ce_threshold: Option<usize>,
    /// Drop the n-th data segment (1-based count of data segments offered to this link).
    pub drop_nth: Vec<u64>,
    /// Delay the n-th data segment (same count) by this much more than the others: the ones
    /// after it overtake it.
    pub delay_nth: Vec<(u64, Duration)>,
    queue: VecDeque<(Vec<u8>, u32, Duration)>,
    busy: bool,
    data_seen: u64,
    pub drops: u64,
    pub marks: u64,
    pub tx_bytes: u64,
}

impl Link {
    pub fn new(rate: Rate, delay: Duration, limit: usize) -> Self {
        Link {
            rate,
            delay,
            limit,
            ce_threshold: None,
            drop_nth: Vec::new(),
            delay_nth: Vec::new(),
            queue: VecDeque::new(),
            busy: false,
            data_seen: 0,
            drops: 0,
            marks: 0,
            tx_bytes: 0,
        }
    }
}

#[derive(Debug)]
enum Ev {
    /// Frame (header bytes, virtual payload) arrives at endpoint `to`.
    Arrive { to: usize, frame: Vec<u8> },
    /// Link `dir` finished a transmission.
    Free { dir: usize },
    /// Timer of endpoint `who`, armed for `at`.
    Timer { who: usize, at: Time },
}

/// Client (0) and server (1).
#[derive(Debug)]
pub struct Net {
    pub ep: [Connection; 2],
    pub links: [Link; 2],
    pub now: Time,
    heap: BinaryHeap<Reverse<(Time, u64)>>,
    evs: Vec<Option<Ev>>,
    seq: u64,
    pub events: [Vec<(Time, ConnEvent)>; 2],
    pub delivered: [u64; 2],
    pub rtt_samples: Vec<Duration>,
    cfg: TcpConfig,
    server_open: bool,
    timer_at: [Option<Time>; 2],
}

const ADDR: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];

impl Net {
    /// A client with `cfg` connecting at t = 0 to a server with the same settings.
    pub fn new(cfg: TcpConfig, fwd: Link, rev: Link) -> Net {
        let client = Connection::connect(cfg.clone(), 1000, 2000, 0xfffe_0000);
        // the server is created from the first SYN; until then a placeholder that is replaced
        let placeholder = Connection::connect(cfg.clone(), 2000, 1000, 0);
        let mut n = Net {
            ep: [client, placeholder],
            links: [fwd, rev],
            now: Time::ZERO,
            heap: BinaryHeap::new(),
            evs: Vec::new(),
            seq: 0,
            events: [Vec::new(), Vec::new()],
            delivered: [0, 0],
            rtt_samples: Vec::new(),
            cfg,
            server_open: false,
            timer_at: [None, None],
        };
        n.flush(0);
        n
    }

    fn push(&mut self, t: Time, ev: Ev) {
        self.evs.push(Some(ev));
        self.heap.push(Reverse((t, self.seq)));
        self.seq += 1;
    }

    fn send(&mut self, from: usize, seg: Segment) {
        let mut f = Vec::new();
        let mac = EthernetAddress([2, 0, 0, 0, 0, from as u8]);
        seg.emit(&mut f, mac, mac, ADDR[from], ADDR[1 - from], 0, 64).expect("emit");
        let link = &mut self.links[from];
        let mut extra = Duration::ZERO;
        if seg.len > 0 {
            link.data_seen += 1;
            if link.drop_nth.contains(&link.data_seen) {
                link.drops += 1;
                return;
            }
            if let Some(&(_, d)) = link.delay_nth.iter().find(|(n, _)| *n == link.data_seen) {
                extra = d;
            }
        }
        if link.queue.len() >= link.limit {
            link.drops += 1;
            return;
        }
        if let Some(k) = link.ce_threshold {
            if link.queue.len() >= k {
                let (s, ..) = Segment::parse(&f).expect("parse");
                if s.ecn.is_ect() {
                    let off = 14;
                    let mut ip = latnet_wire::Ipv4Packet::new_checked(&mut f[off..]).expect("ip");
                    ip.set_ecn(Ecn::Ce);
                    link.marks += 1;
                }
            }
        }
        link.queue.push_back((f, seg.len, extra));
        if !link.busy {
            self.start(from);
        }
    }

    fn start(&mut self, dir: usize) {
        let link = &mut self.links[dir];
        let Some((f, vlen, extra)) = link.queue.pop_front() else { return };
        link.busy = true;
        let bytes = f.len() as u64 + u64::from(vlen);
        link.tx_bytes += bytes;
        let tx = link.rate.tx_time(Bytes::new(bytes)).expect("rate");
        let delay = link.delay;
        let now = self.now;
        self.push(now + tx, Ev::Free { dir });
        self.push(now + tx + delay + extra, Ev::Arrive { to: 1 - dir, frame: f });
    }

    fn flush(&mut self, who: usize) {
        if who == 1 && !self.server_open {
            return;
        }
        loop {
            while let Some(seg) = self.ep[who].poll_transmit(self.now, true) {
                self.send(who, seg);
            }
            let mut any = false;
            while let Some(e) = self.ep[who].poll_event() {
                match e {
                    ConnEvent::Data(n) => self.delivered[who] += n,
                    // the harness's application closes when the peer did
                    ConnEvent::PeerFin => {
                        self.ep[who].close();
                        any = true;
                    }
                    _ => {}
                }
                self.events[who].push((self.now, e));
            }
            if !any {
                break;
            }
        }
        if let Some(r) = self.ep[who].take_rtt_sample() {
            self.rtt_samples.push(r);
        }
        let now = self.now;
        if let Some(t) = self.ep[who].poll_timeout(now) {
            let t = t.max(now);
            if self.timer_at[who].is_none_or(|x| t < x) {
                self.timer_at[who] = Some(t);
                self.push(t, Ev::Timer { who, at: t });
            }
        }
    }

    /// The application of endpoint `who` writes `bytes` more now, and closes if `close`.
    pub fn write(&mut self, who: usize, bytes: u64, close: bool) {
        self.ep[who].write(bytes);
        if close {
            self.ep[who].close();
        }
        self.flush(who);
    }

    /// Run until `end` or until nothing is left to do.
    pub fn run_until(&mut self, end: Time) {
        while let Some(&Reverse((t, i))) = self.heap.peek() {
            if t > end {
                break;
            }
            self.heap.pop();
            self.now = t;
            let Some(ev) = self.evs[i as usize].take() else { continue };
            match ev {
                Ev::Free { dir } => {
                    self.links[dir].busy = false;
                    self.start(dir);
                }
                Ev::Arrive { to, frame } => {
                    let (seg, ..) = Segment::parse(&frame).expect("parse");
                    if to == 1 && !self.server_open {
                        let cfg = self.cfg.clone();
                        if let Some(c) = Connection::accept(cfg, &seg, 0x7000_0000) {
                            self.ep[1] = c;
                            self.server_open = true;
                        }
                    } else {
                        self.ep[to].handle_segment(t, &seg);
                    }
                    self.flush(to);
                }
                Ev::Timer { who, at } => {
                    if self.timer_at[who] != Some(at) {
                        continue; // superseded by an earlier timer
                    }
                    self.timer_at[who] = None;
                    self.ep[who].handle_timeout(t);
                    self.flush(who);
                }
            }
        }
        self.now = self.now.max(end);
    }
}
