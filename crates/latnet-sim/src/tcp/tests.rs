//! End-to-end tests of the TCP state machines in virtual time (two endpoints, one model link
//! each way; see `testnet`).

use super::cc::CcKind;
use super::conn::{ConnEvent, Connection};
use super::testnet::{Link, Net};
use super::TcpConfig;
use latnet_units::{Duration, Rate, Time};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn secs(v: u64) -> Time {
    Time::from_nanos(v * 1_000_000_000)
}

/// 10 Mbit/s, 10 ms each way, `limit` packets; ACK path fast.
fn path(rate_mbps: u64, delay_ms: u64, limit: usize) -> (Link, Link) {
    (
        Link::new(Rate::from_mbps(rate_mbps), ms(delay_ms), limit),
        Link::new(Rate::from_gbps(1), ms(delay_ms), 10_000),
    )
}

fn transfer(cfg: TcpConfig, fwd: Link, rev: Link, bytes: u64, until: Time) -> Net {
    let mut n = Net::new(cfg, fwd, rev);
    n.ep[0].write(bytes);
    n.ep[0].close();
    n.run_until(until);
    n
}

fn closed(n: &Net, who: usize) -> bool {
    n.events[who].iter().any(|(_, e)| *e == ConnEvent::Closed)
}

#[test]
fn syn_and_syn_ack_advertise_the_unscaled_receive_buffer() {
    let cfg = TcpConfig { rcv_buf: 40_000, ..TcpConfig::default() };
    let mut a = Connection::connect(cfg.clone(), 40_000, 5_201, 1);
    let syn = a.poll_transmit(Time::ZERO, true).expect("the SYN");
    assert_eq!(syn.window, 40_000, "a SYN's window is never scaled");
    let big = TcpConfig::default();
    let mut b = Connection::accept(big.clone(), &syn, 7).expect("a SYN is accepted");
    let syn_ack = b.poll_transmit(Time::ZERO, true).expect("the SYN-ACK");
    assert_eq!(syn_ack.window, u16::MAX, "{} bytes do not fit unscaled", big.rcv_buf);
}

#[test]
fn handshake_then_bulk_transfer_completes_and_closes() {
    // a queue deep enough for slow start not to overflow it
    let (f, r) = path(10, 10, 1000);
    let n = transfer(TcpConfig::default(), f, r, 1_000_000, secs(5));
    assert_eq!(n.delivered[1], 1_000_000);
    assert!(closed(&n, 0) && closed(&n, 1), "both ends closed: {:?}", n.events);
    let s = n.ep[0].sender_stats();
    assert_eq!((s.retransmits, s.rtos), (0, 0));
    assert_eq!(n.links[0].drops, 0);
    // the handshake RTT: 2 x 10 ms plus serialization
    let first = n.rtt_samples.first().copied().expect("rtt samples");
    assert!(first >= ms(20) && first < ms(25), "{first}");
    // 1 MB at 10 Mbit/s takes 0.84 s of serialization (1502-byte frames); with slow start
    // and the handshake it completes well within 2 s.
    let done = n.events[1].iter().find(|(_, e)| *e == ConnEvent::PeerFin).map(|(t, _)| *t);
    assert!(done.is_some_and(|t| t < secs(2)), "{done:?}");
}

#[test]
fn sack_recovery_repairs_drops_without_a_timeout() {
    let (mut f, r) = path(10, 10, 1000);
    f.drop_nth = vec![30, 31, 35];
    let n = transfer(TcpConfig::default(), f, r, 500_000, secs(5));
    assert_eq!(n.delivered[1], 500_000);
    let s = n.ep[0].sender_stats();
    assert_eq!(s.rtos, 0);
    assert_eq!(s.retransmits, 3, "exactly the dropped segments");
    assert_eq!(s.recoveries, 1, "one loss episode");
}

#[test]
fn newreno_without_sack_recovers_two_losses_by_partial_acks() {
    let (mut f, r) = path(10, 10, 1000);
    f.drop_nth = vec![30, 32];
    let cfg = TcpConfig { sack: false, ..TcpConfig::for_cc(CcKind::Newreno) };
    // short enough that the queue (and the RTT) stays small while the holes are repaired
    let n = transfer(cfg, f, r, 100_000, secs(5));
    assert_eq!(n.delivered[1], 100_000);
    let s = n.ep[0].sender_stats();
    assert_eq!((s.rtos, s.retransmits, s.recoveries), (0, 2, 1));
}

#[test]
fn a_lost_tail_is_repaired_by_the_timer() {
    let (mut f, r) = path(10, 10, 1000);
    f.drop_nth = vec![10]; // the last of 10 segments: no duplicate ACKs follow
    let cfg = TcpConfig::default();
    let n = transfer(cfg, f, r, 10 * 1448, secs(5));
    assert_eq!(n.delivered[1], 10 * 1448);
    let s = n.ep[0].sender_stats();
    assert_eq!((s.rtos, s.retransmits), (1, 1));
}

/// When the server saw the FIN (the transfer's last byte).
fn fin_at(n: &Net) -> Time {
    n.events[1].iter().find(|(_, e)| *e == ConnEvent::PeerFin).expect("the FIN arrived").0
}

/// RACK-TLP (`rack_tlp`) repairs a lost tail of two segments without the timer: two RTTs
/// after the last ACK a probe retransmits the last segment, its SACK shows the one before
/// lost (RACK: sent before a delivered segment, and older than an RTT), and a recovery
/// retransmits it. Without it the 200 ms timer repairs both.
#[test]
fn rack_tlp_repairs_a_lost_tail_two_rtts_after_the_last_ack() {
    let tail = |rack_tlp: bool, drop: Vec<u64>| {
        let (mut f, r) = path(10, 10, 1000);
        f.drop_nth = drop;
        transfer(TcpConfig { rack_tlp, ..TcpConfig::default() }, f, r, 10 * 1448, secs(5))
    };
    let (timer, probe) = (tail(false, vec![9, 10]), tail(true, vec![9, 10]));
    assert_eq!(probe.delivered[1], 10 * 1448);
    let s = probe.ep[0].sender_stats();
    assert_eq!((s.rtos, s.retransmits, s.loss_probes, s.recoveries), (0, 2, 1, 1), "{s:?}");
    let t = timer.ep[0].sender_stats();
    assert_eq!((t.rtos, t.loss_probes), (1, 0), "{t:?}");
    // the first eight segments' ACKs are back at about 2 RTTs (handshake, then the flight;
    // 21 ms each); the probe leaves 2 srtt + 2 ms later, the recovery's retransmission one
    // RTT after that
    let (t_timer, t_probe) = (fin_at(&timer), fin_at(&probe));
    assert!(t_probe < Time::from_nanos(150_000_000), "{t_probe}");
    assert!(t_timer > t_probe + ms(100), "{t_timer} vs {t_probe}");
    // a single lost last segment: with one segment out the probe waits 2 srtt plus the
    // minimum RTO (for a delayed ACK), as Linux, so it goes about when the timer would
    let one = tail(true, vec![10]);
    let s = one.ep[0].sender_stats();
    assert_eq!((s.rtos, s.retransmits, s.loss_probes), (0, 1, 1), "{s:?}");
    assert!(fin_at(&one) > Time::from_nanos(250_000_000), "{}", fin_at(&one));
    // its ACK reaches only the probe's `snd_nxt`, so no reduction yet; data written later is
    // acknowledged beyond it, which shows the probe repaired a loss: one reduction (a CWR)
    let (mut f, r) = path(10, 10, 1000);
    f.drop_nth = vec![10];
    let mut n = Net::new(TcpConfig { rack_tlp: true, ..TcpConfig::default() }, f, r);
    n.ep[0].write(10 * 1448);
    n.run_until(secs(1));
    let before = n.ep[0].sender().cwnd();
    assert_eq!(n.ep[0].sender_stats().probe_recoveries, 0);
    n.write(0, 10 * 1448, true);
    n.run_until(secs(3));
    assert_eq!(n.delivered[1], 20 * 1448);
    let s = n.ep[0].sender_stats();
    assert_eq!((s.rtos, s.loss_probes, s.probe_recoveries), (0, 1, 1), "{s:?}");
    assert!(n.ep[0].sender().cwnd() < before, "{} after {before}", n.ep[0].sender().cwnd());
}

/// RACK's reordering window in a recovery (RFC 8985 `RACK.reord`): segment 60 is lost and,
/// while its recovery runs, segment 66 arrives 3 ms late, 1.8 ms after 67 (with two segments
/// SACKed above it: DupThresh does not mark it). A sender that has seen no reordering keeps no
/// window in a recovery, so 67's SACK marks 66 lost: a spurious retransmission. One that saw
/// reordering before (segment 20 overtaken by 21, never retransmitted) keeps `min_rtt / 4`
/// (5 ms here), and 66 arrives within it.
#[test]
fn rack_keeps_its_reordering_window_in_recovery_once_reordering_was_seen() {
    let run = |early_reorder: bool| {
        let (mut f, r) = path(10, 10, 1000);
        f.drop_nth = vec![60];
        f.delay_nth = vec![(66, ms(3))];
        if early_reorder {
            f.delay_nth.push((20, ms(2)));
        }
        let cfg = TcpConfig { rack_tlp: true, ..TcpConfig::default() };
        let mut n = Net::new(cfg, f, r);
        n.ep[0].write(150 * 1448);
        n.run_until(Time::from_nanos(300_000_000));
        let seen = n.ep[0].sender().reordering_seen();
        n.ep[0].close();
        n.run_until(secs(3));
        (n, seen)
    };
    let (first, seen_first) = run(true);
    let (none, seen_none) = run(false);
    assert_eq!(first.delivered[1], 150 * 1448);
    assert_eq!(none.delivered[1], 150 * 1448);
    // (66 retransmitted before its original arrived: not counted as reordering, as Linux)
    assert!(seen_first && !seen_none, "{seen_first} {seen_none}");
    let (s, t) = (first.ep[0].sender_stats(), none.ep[0].sender_stats());
    assert_eq!((s.rtos, s.recoveries, s.retransmits), (0, 1, 1), "only 60: {s:?}");
    assert_eq!((t.rtos, t.recoveries, t.retransmits), (0, 1, 2), "60 and 66: {t:?}");
}

#[test]
fn dctcp_keeps_the_queue_at_the_marking_threshold_without_loss() {
    let (mut f, r) = path(100, 1, 200);
    f.ce_threshold = Some(20);
    let n = transfer(TcpConfig::for_cc(CcKind::Dctcp), f, r, 20_000_000, secs(3));
    assert_eq!(n.delivered[1], 20_000_000);
    assert_eq!(n.links[0].drops, 0, "ECN instead of loss");
    assert!(n.links[0].marks > 0);
    let s = n.ep[0].sender_stats();
    assert_eq!(s.retransmits, 0);
    assert!(s.ecn_reductions > 10 && s.ece_acks > 0, "{s:?}");
    assert_eq!(n.ep[1].receiver_stats().ce_marks, n.links[0].marks);
    assert!(n.ep[0].ecn() && n.ep[1].ecn());
}

#[test]
fn classic_ecn_reduces_once_per_window_and_sends_cwr() {
    let (mut f, r) = path(100, 1, 200);
    f.ce_threshold = Some(20);
    let cfg = TcpConfig { ecn: true, ..TcpConfig::for_cc(CcKind::Cubic) };
    let n = transfer(cfg, f, r, 20_000_000, secs(3));
    assert_eq!(n.delivered[1], 20_000_000);
    assert_eq!(n.links[0].drops, 0);
    let s = n.ep[0].sender_stats();
    // classic receivers latch ECE until CWR: many ECE ACKs, far fewer reductions
    assert!(s.ecn_reductions > 0 && s.ece_acks > s.ecn_reductions, "{s:?}");
}

#[test]
fn no_ecn_when_one_side_declines() {
    let (mut f, r) = path(100, 1, 50);
    f.ce_threshold = Some(5);
    let n = transfer(TcpConfig::default(), f, r, 2_000_000, secs(3));
    assert_eq!(n.links[0].marks, 0, "Not-ECT packets are never marked");
    assert!(!n.ep[0].ecn());
}

/// Goodput of an unlimited transfer over `secs_run` seconds, as a fraction of the link rate
/// (frame bits, the metric a link utilisation counts).
fn utilisation(cfg: TcpConfig, rate_mbps: u64, delay_ms: u64, limit: usize, secs_run: u64) -> f64 {
    let (f, r) = path(rate_mbps, delay_ms, limit);
    let mut n = Net::new(cfg, f, r);
    n.ep[0].write(u64::MAX / 4);
    n.run_until(secs(1));
    let b0 = n.links[0].tx_bytes;
    n.run_until(secs(1 + secs_run));
    let b1 = n.links[0].tx_bytes;
    (b1 - b0) as f64 * 8.0 / (secs_run as f64 * rate_mbps as f64 * 1e6)
}

#[test]
fn every_variant_fills_a_droptail_bottleneck() {
    // 20 Mbit/s, 20 ms RTT, one BDP of buffer (34 packets)
    for cc in [CcKind::Newreno, CcKind::Cubic, CcKind::Dctcp, CcKind::Prague, CcKind::Bbr] {
        let u = utilisation(TcpConfig::for_cc(cc), 20, 10, 34, 4);
        assert!(u > 0.9, "{} utilisation {u:.3}", cc.as_str());
    }
}

#[test]
fn max_pacing_rate_caps_the_sending_rate() {
    let mut cfg = TcpConfig::default();
    cfg.pacing.max_rate = Some(Rate::from_mbps(5));
    let u = utilisation(cfg, 100, 5, 1000, 2);
    // payload leaves at 5 Mbit/s: 5 * 1502 / 1448 = 5.19 % of the link in frame bits
    assert!((0.0505..=0.0520).contains(&u), "{u}");
}

#[test]
fn the_receive_window_limits_the_flight() {
    let cfg = TcpConfig { rcv_buf: 64 * 1024, ..TcpConfig::default() };
    // 100 Mbit/s, 50 ms RTT: 64 KiB per RTT is 10.5 Mbit/s of payload
    let u = utilisation(cfg, 100, 25, 1000, 3);
    assert!((0.09..=0.12).contains(&u), "{u}");
}
