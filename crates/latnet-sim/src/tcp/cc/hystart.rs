//! HyStart: leaving slow start before the queue overflows, as Linux's CUBIC does
//! (`net/ipv4/tcp_cubic.c`, the version of Linux 5.8 on; Ha and Rhee, "Taming the Elephants:
//! New TCP Slow Start", 2011).
//!
//! Each acknowledgment with an RTT sample updates `delay_min`, the least RTT seen (reset by a
//! timeout). In slow start the sample also counts toward *rounds* (a round ends when `snd_una`
//! passes the `snd_nxt` of its start), and, once the window is at least [`LOW_WINDOW`]
//! segments, feeds two detectors:
//!
//! * **ACK train**: ACKs that each arrive within [`ACK_DELTA`] of the previous one extend the
//!   train that began with the round; once the train is longer than `delay_min` plus an
//!   allowance for segmentation offload (`ack_delay`, below), halved unless the socket paces,
//!   the window already covers the path's delay and slow start ends.
//! * **Delay increase**: the least RTT of the round's samples, from its 9th sample on, above
//!   `delay_min + clamp(delay_min / 8, 4 ms, 16 ms)`: a queue is building; slow start ends.
//!
//! Either sets `ssthresh = cwnd`, once per slow start (`found`; a timeout starts over). The
//! allowance is Linux's `hystart_ack_delay`: `min(1 ms, 4 * gso_max_size / pacing_rate)` with
//! the socket's pacing rate (computed by Linux whether or not it paces: `cwnd / srtt` times
//! the slow-start or congestion-avoidance ratio, capped by `SO_MAX_PACING_RATE`) and a
//! `gso_max_size` of 64 KiB (veth's and loopback's). Samples are ignored for one second after
//! a congestion-avoidance epoch starts (Linux: "discard delay samples right after fast
//! recovery"); the caller ([`super::cubic::Cubic`]) checks that.
//!
//! Rounds are tracked below the low window too, as Linux does since January 2025 (commit
//! 25c1a9ca53db, "tcp_cubic: fix incorrect HyStart round start detection"; this machine's
//! 6.18 has it): the initial window's ACKs make the first round. From 5.8 until that fix,
//! Linux began the first round only at the ACK that saw a window of 16 segments, in the
//! middle of a flight, so its rounds (and ACK trains) were out of step with the flights. A
//! round here starts lazily, at the first sample after slow start (re)starts, not at the
//! connection's start or the timeout; Linux's first update ends the round begun then at
//! once, so the rounds are the same.

use latnet_units::{Duration, Rate, Time};

/// The window (segments) below which HyStart does not act (Linux `hystart_low_window`).
pub const LOW_WINDOW: u64 = 16;
/// The largest gap between two ACKs of one train (Linux `hystart_ack_delta_us`).
pub const ACK_DELTA: Duration = Duration::from_millis(2);
/// Samples of a round before the delay detector compares (Linux `HYSTART_MIN_SAMPLES`).
pub const MIN_SAMPLES: u32 = 8;
/// The delay detector's threshold above `delay_min` is `delay_min / 8` within these bounds.
pub const DELAY_MIN: Duration = Duration::from_millis(4);
/// See [`DELAY_MIN`].
pub const DELAY_MAX: Duration = Duration::from_millis(16);
/// Linux's `sk_gso_max_size` on veth and loopback (bytes).
pub const GSO_MAX_SIZE: u64 = 65_536;

/// Which detector ended slow start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The ACK train grew longer than (half) the minimum RTT.
    AckTrain,
    /// The round's RTT rose above the minimum by the threshold.
    Delay,
}

/// One acknowledgment as HyStart sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// This ACK's RTT sample.
    pub rtt: Duration,
    /// The cumulative acknowledgment after it.
    pub snd_una: u64,
    /// The next offset to send.
    pub snd_nxt: u64,
    /// The rate Linux would hold as the socket's pacing rate (`None`: no RTT yet).
    pub pacing_rate: Option<Rate>,
    /// The socket paces (internally or under a cap).
    pub paced: bool,
}

#[derive(Debug, Clone, Copy)]
struct Round {
    start: Time,
    last_ack: Time,
    end_seq: u64,
    curr_rtt: Option<Duration>,
    samples: u32,
}

/// HyStart's state for one connection.
#[derive(Debug, Clone, Default)]
pub struct HyStart {
    delay_min: Option<Duration>,
    round: Option<Round>,
    found: Option<Exit>,
}

/// `min(1 ms, 4 * GSO_MAX_SIZE / rate)` (zero without a rate).
pub fn ack_delay(rate: Option<Rate>) -> Duration {
    let Some(bps) = rate.map(Rate::bps).filter(|&b| b > 0) else { return Duration::ZERO };
    let ns = u128::from(GSO_MAX_SIZE) * 4 * 8 * 1_000_000_000 / u128::from(bps);
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)).min(Duration::from_millis(1))
}

impl HyStart {
    /// A fresh state (no `delay_min`, slow start not ended).
    pub fn new() -> Self {
        Self::default()
    }

    /// The least RTT seen since the start or the last timeout.
    pub fn delay_min(&self) -> Option<Duration> {
        self.delay_min
    }

    /// Which detector ended this slow start, if one did.
    pub fn found(&self) -> Option<Exit> {
        self.found
    }

    /// A timeout: forget `delay_min` and the round; slow start may end again (Linux resets
    /// both when it enters the Loss state).
    pub fn on_rto(&mut self) {
        *self = HyStart::new();
    }

    /// An ACK with an RTT sample at `now`; `cwnd` and `ssthresh` in bytes, `mss` the segment
    /// size. Returns the detector that ends slow start on this ACK (the caller then sets
    /// `ssthresh = cwnd`).
    pub fn on_sample(
        &mut self,
        now: Time,
        s: &Sample,
        cwnd: u64,
        ssthresh: u64,
        mss: u64,
    ) -> Option<Exit> {
        let delay = s.rtt.max(Duration::from_nanos(1));
        let delay_min = self.delay_min.map_or(delay, |m| m.min(delay));
        self.delay_min = Some(delay_min);
        if self.found.is_some() || cwnd >= ssthresh {
            return None;
        }
        let round = match self.round {
            Some(r) if s.snd_una <= r.end_seq => self.round.as_mut().expect("matched"),
            _ => self.round.insert(Round {
                start: now,
                last_ack: now,
                end_seq: s.snd_nxt,
                curr_rtt: None,
                samples: 0,
            }),
        };
        if cwnd < LOW_WINDOW * mss {
            return None;
        }
        let mut exit = None;
        if now - round.last_ack <= ACK_DELTA {
            round.last_ack = now;
            let mut threshold = delay_min + ack_delay(s.pacing_rate);
            if !s.paced {
                threshold = Duration::from_nanos(threshold.as_nanos() / 2);
            }
            if now - round.start > threshold {
                exit = Some(Exit::AckTrain);
            }
        }
        let curr = round.curr_rtt.map_or(delay, |c| c.min(delay));
        round.curr_rtt = Some(curr);
        if round.samples < MIN_SAMPLES {
            round.samples += 1;
        } else {
            let eighth = Duration::from_nanos(delay_min.as_nanos() / 8);
            if curr > delay_min + eighth.clamp(DELAY_MIN, DELAY_MAX) {
                exit = Some(Exit::Delay);
            }
        }
        if exit.is_some() {
            self.found = exit;
        }
        exit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;

    fn at_us(us: u64) -> Time {
        Time::from_nanos(us * 1000)
    }

    fn sample(rtt_us: u64, una: u64, nxt: u64) -> Sample {
        Sample {
            rtt: Duration::from_micros(rtt_us),
            snd_una: una,
            snd_nxt: nxt,
            pacing_rate: None,
            paced: false,
        }
    }

    #[test]
    fn ack_delay_is_four_offload_segments_at_the_pacing_rate_at_most_1_ms() {
        assert_eq!(ack_delay(None), Duration::ZERO);
        // 262144 B at 100 Mbit/s take 21 ms: capped at 1 ms
        assert_eq!(ack_delay(Some(Rate::from_mbps(100))), Duration::from_millis(1));
        // at 20.97152 Gbit/s they take 100 us
        assert_eq!(ack_delay(Some(Rate::from_bps(20_971_520_000))), Duration::from_micros(100));
    }

    /// A train of ACKs 100 us apart with a 20 ms minimum RTT, unpaced: slow start ends on the
    /// first ACK more than 10 ms after the round began (half of delay_min).
    #[test]
    fn ack_train_ends_slow_start_past_half_the_minimum_rtt() {
        let mut h = HyStart::new();
        let cwnd = 200 * MSS;
        let mut exit_at = None;
        for i in 0..200u64 {
            let s = sample(20_000, 1, 1_000_000);
            if let Some(e) = h.on_sample(at_us(i * 100), &s, cwnd, u64::MAX, MSS) {
                assert_eq!(e, Exit::AckTrain);
                exit_at = Some(i);
                break;
            }
        }
        // 10 ms = ACK 100; "more than" the threshold: ACK 101
        assert_eq!(exit_at, Some(101));
        assert_eq!(h.found(), Some(Exit::AckTrain));
        // once found, no more exits until a timeout resets it
        assert_eq!(h.on_sample(at_us(50_000), &sample(20_000, 1, 1), cwnd, u64::MAX, MSS), None);
        h.on_rto();
        assert_eq!((h.found(), h.delay_min()), (None, None));
    }

    #[test]
    fn a_paced_socket_waits_for_the_whole_minimum_rtt_plus_the_offload_allowance() {
        let mut h = HyStart::new();
        let mut exit_at = None;
        for i in 0..400u64 {
            let s = Sample {
                pacing_rate: Some(Rate::from_mbps(100)),
                paced: true,
                ..sample(20_000, 1, 1_000_000)
            };
            if h.on_sample(at_us(i * 100), &s, 200 * MSS, u64::MAX, MSS).is_some() {
                exit_at = Some(i);
                break;
            }
        }
        // 20 ms + 1 ms: ACK 211 is the first past 21 ms
        assert_eq!(exit_at, Some(211));
    }

    #[test]
    fn a_gap_above_2_ms_breaks_the_train() {
        let mut h = HyStart::new();
        let s = sample(20_000, 1, 1_000_000);
        assert_eq!(h.on_sample(at_us(0), &s, 200 * MSS, u64::MAX, MSS), None);
        // the next ACK 2.001 ms later is not in the train, nor is any after it
        for t in [2_001u64, 12_000, 30_000] {
            assert_eq!(h.on_sample(at_us(t), &s, 200 * MSS, u64::MAX, MSS), None);
        }
    }

    /// Sparse ACKs (no train) whose RTT rises: the delay detector compares from the 9th sample
    /// of a round, the least RTT of the round against delay_min + max(delay_min / 8, 4 ms).
    #[test]
    fn delay_increase_ends_slow_start_after_eight_samples() {
        let mut h = HyStart::new();
        let cwnd = 20 * MSS;
        // round 1: delay_min 20 ms from the first sample
        assert_eq!(h.on_sample(at_us(0), &sample(20_000, 1, 100), cwnd, u64::MAX, MSS), None);
        // round 2 (snd_una 101 > 100): RTTs of 24 ms are not above 20 + 4 ms
        let mut t = 0;
        for k in 0..20u64 {
            t += 5_000;
            let s = sample(24_000, 101 + k, 1000);
            assert_eq!(h.on_sample(at_us(t), &s, cwnd, u64::MAX, MSS), None, "sample {k}");
        }
        // round 3: 24.001 ms from its first sample on; the 9th sample ends slow start
        for k in 0..9u64 {
            t += 5_000;
            let e = h.on_sample(at_us(t), &sample(24_001, 1001 + k, 2000), cwnd, u64::MAX, MSS);
            assert_eq!(e, (k == 8).then_some(Exit::Delay), "sample {k}");
        }
    }

    /// Rounds are counted from the first ACK, below the low window too (Linux since commit
    /// 25c1a9ca53db of January 2025): the initial window's ACKs are round 1 although the
    /// window passes 16 segments during it, and the first ACK beyond them starts round 2,
    /// whose train ends slow start past half the minimum RTT. (Before that fix, round 1 began
    /// at the ACK that saw 16 segments, with that moment's `snd_nxt`, and round 2 a window
    /// later: exit at ACK 23.)
    #[test]
    fn rounds_start_at_the_first_ack_even_below_the_low_window() {
        let mut h = HyStart::new();
        // round 1: the initial window's 10 ACKs, 1 ms apart; 20 ms RTT
        for k in 0..10u64 {
            let s = sample(20_000, (k + 1) * MSS, (10 + 2 * k) * MSS);
            let e = h.on_sample(at_us(k * 1000), &s, (10 + k) * MSS, u64::MAX, MSS);
            assert_eq!(e, None, "ACK {k}");
        }
        // round 2 from 20 ms (snd_una past the initial window), ACKs 1 ms apart: the train
        // passes 10 ms at 31 ms
        let mut exit_at = None;
        for j in 0..30u64 {
            let (una, cwnd) = ((11 + j) * MSS, (20 + j) * MSS);
            let s = sample(20_000, una, una + cwnd);
            if let Some(e) = h.on_sample(at_us(20_000 + j * 1000), &s, cwnd, u64::MAX, MSS) {
                assert_eq!(e, Exit::AckTrain);
                exit_at = Some(j);
                break;
            }
        }
        assert_eq!(exit_at, Some(11));
    }

    #[test]
    fn below_the_low_window_or_outside_slow_start_nothing_happens_but_delay_min_learns() {
        let mut h = HyStart::new();
        for (i, cwnd, ssthresh) in [(0u64, 15 * MSS, u64::MAX), (1, 100 * MSS, 100 * MSS)] {
            for k in 0..300u64 {
                let s = sample(30_000 - i * 10_000, 1, 1_000_000);
                assert_eq!(h.on_sample(at_us(k * 100), &s, cwnd, ssthresh, MSS), None);
            }
        }
        assert_eq!(h.delay_min(), Some(Duration::from_millis(20)));
    }
}
