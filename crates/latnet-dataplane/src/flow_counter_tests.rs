//! The large-flow counter driven through a handshake, announcements, FIN / RST and idle
//! expiry, with real TCP/IPv4 headers.

use super::*;
use crate::packet::Meta;
use latnet_wire::{build_tcp_ipv4, Ecn, EthernetAddress, TcpRepr, TcpSeqNumber};
use std::net::Ipv4Addr;

const PORT: u32 = 3;
const RATE: Rate = Rate::from_mbps(100);

fn seg(
    from: u8,
    to: u8,
    sport: u16,
    dport: u16,
    flags: TcpFlags,
    opt: Option<LargeFlowMsg>,
) -> Packet {
    let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
    let repr = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq_number: TcpSeqNumber(1),
        ack_number: TcpSeqNumber(1),
        flags,
        window_len: 1000,
        urgent_at: 0,
        options: &[],
    };
    let mut f = Vec::new();
    let (a, b) = (Ipv4Addr::new(10, 0, 0, from), Ipv4Addr::new(10, 0, 0, to));
    build_tcp_ipv4(&mut f, m, m, a, b, 0, Ecn::NotEct, 64, &repr, 0).unwrap();
    if let Some(msg) = opt {
        set_large_flow_option(&mut f, &LargeFlowOption::new(msg)).unwrap();
    }
    Packet::new(f, 0, Meta::default())
}

/// Sender `h` (10.0.0.h, port 40000 + h) to the receiver 10.0.0.100:5201.
fn syn(h: u8) -> Packet {
    seg(h, 100, 40000 + u16::from(h), 5201, TcpFlags::SYN, Some(LargeFlowMsg::Register))
}
fn synack(h: u8) -> Packet {
    seg(100, h, 5201, 40000 + u16::from(h), TcpFlags::SYN | TcpFlags::ACK, None)
}
fn ack_to(h: u8) -> Packet {
    seg(100, h, 5201, 40000 + u16::from(h), TcpFlags::ACK, None)
}
fn data(h: u8) -> Packet {
    seg(h, 100, 40000 + u16::from(h), 5201, TcpFlags::ACK, None)
}
fn fin(h: u8) -> Packet {
    seg(h, 100, 40000 + u16::from(h), 5201, TcpFlags::FIN | TcpFlags::ACK, None)
}

fn t(s: u64) -> Time {
    Time::from_duration(Duration::from_secs(s))
}

fn report(p: &Packet) -> Option<(u16, u32)> {
    large_flow_option(&p.data).unwrap().map(|o| {
        assert_eq!(o.msg, LargeFlowMsg::Report);
        (o.count, o.rate_kbps)
    })
}

/// Four flows starting 15 s apart, as in the seed: each SYN-ACK reports the count including
/// the new flow, and running flows hear the new count on their next ACK, once.
#[test]
fn handshake_reports_and_announcements() {
    // (the flows here are silent between events: keep them longer than 15 s)
    let spec = CounterSpec { idle_timeout: Duration::from_secs(60), ..CounterSpec::default() };
    let mut c = LargeFlowCounter::new(spec);
    for h in 1..=4u8 {
        let now = t(15 * u64::from(h - 1));
        let mut s = syn(h);
        assert_eq!(
            c.process(now, &mut s, PORT, RATE),
            Ok(CounterAction::Registered { count: u16::from(h) })
        );
        // the SYN carries the switch's count and rate to the receiver
        let o = large_flow_option(&s.data).unwrap().unwrap();
        assert_eq!((o.msg, o.count, o.rate_kbps), (LargeFlowMsg::Register, u16::from(h), 100_000));
        let mut sa = synack(h);
        // the SYN-ACK travels the reverse direction: another egress port of the switch
        assert_eq!(
            c.process(now, &mut sa, 9, RATE),
            Ok(CounterAction::Reported { count: u16::from(h) })
        );
        assert_eq!(report(&sa), Some((u16::from(h), 100_000)));
        assert_eq!(
            large_flow_option(&sa.data).unwrap().unwrap().share_bps(),
            Some(100_000_000 / u64::from(h))
        );
        // earlier flows: their next ACK announces the new count, the one after says nothing
        for old in 1..h {
            let mut a = ack_to(old);
            assert_eq!(
                c.process(now, &mut a, 9, RATE),
                Ok(CounterAction::Announced { count: u16::from(h) })
            );
            assert_eq!(report(&a), Some((u16::from(h), 100_000)));
            let mut a = ack_to(old);
            assert_eq!(c.process(now, &mut a, 9, RATE), Ok(CounterAction::Seen));
            assert_eq!(report(&a), None);
        }
        let mut d = data(h);
        assert_eq!(c.process(now, &mut d, PORT, RATE), Ok(CounterAction::Seen));
    }
    assert_eq!(c.count(PORT), 4);
    assert_eq!(c.stats().registered, 4);
    assert_eq!(c.stats().reports, 4);
    assert_eq!(c.stats().announcements, 1 + 2 + 3);
}

#[test]
fn fin_rst_and_idle_timeout_decrement() {
    let spec = CounterSpec { idle_timeout: Duration::from_secs(5), ..CounterSpec::default() };
    let mut c = LargeFlowCounter::new(spec);
    for h in 1..=3 {
        let _ = c.process(t(0), &mut syn(h), PORT, RATE);
    }
    // a retransmitted SYN is not counted twice
    let _ = c.process(t(0), &mut syn(1), PORT, RATE);
    assert_eq!(c.count(PORT), 3);
    assert_eq!(
        c.process(t(1), &mut fin(1), PORT, RATE),
        Ok(CounterAction::Deregistered { count: 2 })
    );
    // RST from the receiver's side also removes it
    let mut rst = seg(100, 2, 5201, 40002, TcpFlags::RST, None);
    assert_eq!(c.process(t(1), &mut rst, 9, RATE), Ok(CounterAction::Deregistered { count: 1 }));
    // a second FIN of a removed connection changes nothing
    assert_eq!(c.process(t(1), &mut fin(1), PORT, RATE), Ok(CounterAction::None));
    // flow 3 stays silent: gone after 5 s of idleness, noticed when any packet passes
    let _ = c.process(t(4), &mut syn(4), PORT, RATE);
    assert_eq!(c.count(PORT), 2);
    assert_eq!(c.next_expiry(), Some(t(5)));
    let _ = c.process(t(6), &mut data(4), PORT, RATE);
    assert_eq!(c.count(PORT), 1);
    assert_eq!(c.stats().expired, 1);
    assert_eq!((c.stats().fin, c.stats().rst), (1, 1));
    // the survivor hears it
    let mut a = ack_to(4);
    assert_eq!(c.process(t(6), &mut a, 9, RATE), Ok(CounterAction::Announced { count: 1 }));
}

/// The tightest share on the path wins: a switch with a looser share leaves the option alone.
#[test]
fn tighter_share_rule_across_switches() {
    let mut edge = LargeFlowCounter::new(CounterSpec::default());
    let mut core = LargeFlowCounter::new(CounterSpec::default());
    let mut s = syn(1);
    let _ = edge.process(t(0), &mut s, 1, Rate::from_gbps(1));
    let _ = core.process(t(0), &mut s, 2, Rate::from_mbps(100));
    let o = large_flow_option(&s.data).unwrap().unwrap();
    assert_eq!((o.count, o.rate_kbps), (1, 100_000));
    let mut sa = synack(1);
    let _ = core.process(t(0), &mut sa, 7, Rate::from_mbps(100));
    let _ = edge.process(t(0), &mut sa, 8, Rate::from_gbps(1));
    assert_eq!(report(&sa), Some((1, 100_000)));
}

#[test]
fn non_tcp_and_plain_flows_are_ignored() {
    let mut c = LargeFlowCounter::new(CounterSpec::default());
    // a SYN without the option is not a large flow
    let mut s = seg(1, 100, 40001, 5201, TcpFlags::SYN, None);
    assert_eq!(c.process(t(0), &mut s, PORT, RATE), Ok(CounterAction::None));
    let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
    let mut f = Vec::new();
    latnet_wire::build_udp_ipv4(
        &mut f,
        m,
        m,
        Ipv4Addr::LOCALHOST,
        Ipv4Addr::LOCALHOST,
        0,
        Ecn::NotEct,
        64,
        1,
        2,
        10,
    )
    .unwrap();
    assert_eq!(
        c.process(t(0), &mut Packet::new(f, 0, Meta::default()), PORT, RATE),
        Ok(CounterAction::None)
    );
    assert_eq!(c.count(PORT), 0);
}

#[test]
fn malformed_options_and_frames_are_refused() {
    let mut c = LargeFlowCounter::new(CounterSpec::default());
    let mut p = seg(1, 100, 40001, 5201, TcpFlags::SYN, None);
    latnet_wire::option_edit::insert_ip_option(
        &mut p.data,
        latnet_wire::large_flow::KINDS,
        &[7; 10],
    )
    .unwrap();
    assert_eq!(c.process(t(0), &mut p, PORT, RATE), Err(DropReason::MalformedOption));
    assert_eq!(c.stats().malformed, 1);
    let mut cut = syn(1);
    cut.data.truncate(30); // IPv4 header cut short
    assert_eq!(c.process(t(0), &mut cut, PORT, RATE), Err(DropReason::Malformed));
    // a frame that is not IP is not the counter's business
    let mut other = Packet::new(vec![0xaa; 17], 0, Meta::default());
    assert_eq!(c.process(t(0), &mut other, PORT, RATE), Ok(CounterAction::None));
}

#[test]
fn table_is_bounded() {
    let mut c = LargeFlowCounter::new(CounterSpec { max_flows: 2, ..CounterSpec::default() });
    for h in 1..=3 {
        let _ = c.process(t(0), &mut syn(h), PORT, RATE);
    }
    assert_eq!(c.count(PORT), 2);
    assert_eq!(c.stats().table_full, 1);
    assert_eq!(c.flows(), 2);
}

/// A port's count is 16 bits (the option's `count`) while the table holds 65,536 flows by
/// default: the 65,536th registration on one port must not be counted (it was, with the count
/// stuck at 65,535, so the count then ran one below the flows still counted).
#[test]
fn a_port_count_never_wraps_or_sticks() {
    let mut c = LargeFlowCounter::new(CounterSpec::default());
    let n = usize::from(u16::MAX) + 1;
    for k in 0..n {
        let (host, sport) = ((k >> 16) as u8 + 1, k as u16);
        let mut s = seg(host, 100, sport, 5201, TcpFlags::SYN, Some(LargeFlowMsg::Register));
        let _ = c.process(t(0), &mut s, PORT, RATE);
    }
    assert_eq!(c.count(PORT), u16::MAX);
    assert_eq!(c.flows(), usize::from(u16::MAX), "every counted flow is in the count");
    assert_eq!(c.stats().table_full, 1);
    // removing one flows brings the count down with it
    let mut f = seg(1, 100, 7, 5201, TcpFlags::FIN | TcpFlags::ACK, None);
    assert_eq!(
        c.process(t(0), &mut f, PORT, RATE),
        Ok(CounterAction::Deregistered { count: 65534 })
    );
    assert_eq!(c.flows(), 65534);
}

/// Two counting switches on the path, the 100 Mbit/s one the bottleneck. A second large flow
/// that crosses only the 1 Gbit/s switch changes that switch's count; its announcement must
/// not tell the first flow the looser share 1 Gbit/s / 2 (it did, in both orders of the
/// switches, and the sender then paced at five times its bottleneck share).
#[test]
fn an_announcement_never_loosens_the_path_share() {
    let (gig, hundred) = (Rate::from_gbps(1), Rate::from_mbps(100));
    for loose_nearest_sender in [true, false] {
        let mut loose = LargeFlowCounter::new(CounterSpec::default());
        let mut tight = LargeFlowCounter::new(CounterSpec::default());
        // toward the receiver, then back toward the sender
        let fwd = |p: &mut Packet, l: &mut LargeFlowCounter, t_: &mut LargeFlowCounter| {
            if loose_nearest_sender {
                let _ = l.process(t(0), p, 1, gig).unwrap();
                let _ = t_.process(t(0), p, 2, hundred).unwrap();
            } else {
                let _ = t_.process(t(0), p, 2, hundred).unwrap();
                let _ = l.process(t(0), p, 1, gig).unwrap();
            }
        };
        let back = |p: &mut Packet, l: &mut LargeFlowCounter, t_: &mut LargeFlowCounter| {
            if loose_nearest_sender {
                let _ = t_.process(t(0), p, 7, hundred).unwrap();
                let _ = l.process(t(0), p, 8, gig).unwrap();
            } else {
                let _ = l.process(t(0), p, 8, gig).unwrap();
                let _ = t_.process(t(0), p, 7, hundred).unwrap();
            }
        };
        fwd(&mut syn(1), &mut loose, &mut tight);
        let mut sa = synack(1);
        back(&mut sa, &mut loose, &mut tight);
        assert_eq!(report(&sa), Some((1, 100_000)));
        // flow 2 (to another receiver) crosses only the loose switch
        let mut s2 = seg(2, 101, 40002, 5201, TcpFlags::SYN, Some(LargeFlowMsg::Register));
        assert_eq!(
            loose.process(t(0), &mut s2, 1, gig),
            Ok(CounterAction::Registered { count: 2 })
        );
        let mut a = ack_to(1);
        back(&mut a, &mut loose, &mut tight);
        let share = report(&a).map(|(n, r)| u64::from(r) * 1000 / u64::from(n));
        assert!(
            share.is_none_or(|s| s <= 100_000_000),
            "loose switch nearest the sender: {loose_nearest_sender}: told {:?}",
            report(&a)
        );
        // the bottleneck's own changes still reach the sender, down and up again
        let mut s3 = seg(3, 102, 40003, 5201, TcpFlags::SYN, Some(LargeFlowMsg::Register));
        assert_eq!(
            tight.process(t(0), &mut s3, 2, hundred),
            Ok(CounterAction::Registered { count: 2 })
        );
        let mut a = ack_to(1);
        back(&mut a, &mut loose, &mut tight);
        assert_eq!(report(&a), Some((2, 100_000)));
        let mut f3 = seg(3, 102, 40003, 5201, TcpFlags::FIN | TcpFlags::ACK, None);
        let _ = tight.process(t(0), &mut f3, 2, hundred);
        let mut a = ack_to(1);
        back(&mut a, &mut loose, &mut tight);
        assert_eq!(report(&a), Some((1, 100_000)));
        // and when flow 2 leaves the loose switch, its announcement keeps the path's share
        let mut f2 = seg(2, 101, 40002, 5201, TcpFlags::FIN | TcpFlags::ACK, None);
        let _ = loose.process(t(0), &mut f2, 1, gig);
        let mut a = ack_to(1);
        back(&mut a, &mut loose, &mut tight);
        assert!(matches!(report(&a), None | Some((1, 100_000))), "{:?}", report(&a));
    }
}

/// A port slower than the option's unit (1 kbit/s) is written as 1 kbit/s, not 0: a share of
/// 0 would stop the sender. A rate of 0 stays 0 (a port with no rate).
#[test]
fn a_port_below_one_kbit_per_second_is_written_as_one() {
    assert_eq!(kbps(Rate::from_bps(500)), 1);
    assert_eq!(kbps(Rate::from_bps(1_999)), 1);
    assert_eq!(kbps(Rate::from_bps(0)), 0);
    let mut c = LargeFlowCounter::new(CounterSpec::default());
    let mut s = syn(1);
    assert!(c.process(t(0), &mut s, PORT, Rate::from_bps(500)).is_ok());
    let o = large_flow_option(&s.data).unwrap().unwrap();
    assert_eq!((o.count, o.rate_kbps, o.share_bps()), (1, 1, Some(1_000)));
}
