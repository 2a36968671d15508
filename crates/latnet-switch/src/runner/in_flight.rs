//! Frames one switch of a loop sends to another switch of the same loop, with the emulated
//! instant each is due at the other end.
//!
//! A frame's emulated arrival is otherwise the instant the kernel put it into the receiving
//! ring (see the crate docs): a sending switch woken late hands the next switch its frames
//! late, and the next switch queues them late, so that the machine's lateness adds up along a
//! path. Between two switches of one loop ([`super::run_many`]) the loop knows better: the
//! sender's core gave every frame the instant it is due at the far end (its delay line's
//! release), and the receiving switch takes that instant as the frame's arrival, as far as its
//! own core's clock allows (it never goes back). The loop serves its switches in order, so a
//! stall of the process delays a frame only by how far the receiving switch had already run;
//! along a path served in the loop's order, not at all.
//!
//! Frames are matched, not counted: the record of a link holds each frame's fingerprint (its
//! bytes after the Ethernet header) with its instant; a frame read from the ring takes the first
//! record with its fingerprint among the oldest [`SEARCH`] and drops the records before it
//! (frames the kernel refused or a full ring lost). A frame nobody recorded (the kernel's own,
//! such as IPv6 neighbour discovery) keeps its ring timestamp.

use rustc_hash::FxHasher;
use std::collections::VecDeque;
use std::hash::Hasher as _;

/// Oldest records of a link a frame read from its ring is looked up among.
pub const SEARCH: usize = 64;
/// Most records a link keeps (the oldest go first): a receiving switch that stopped reading
/// does not grow them without bound.
pub const MOST: usize = 1 << 16;
/// Bytes after the Ethernet header a fingerprint covers (the IP and transport headers and the
/// start of the payload: a sender's sequence number and stamp).
const FINGERPRINT_BYTES: usize = 128;

/// The loop's record of frames in flight between its switches.
#[derive(Debug, Default)]
pub struct InFlight {
    /// `[station][iface]`: the link toward another station's interface, if any.
    toward: Vec<Vec<Option<usize>>>,
    /// `[station][iface]`: the link from another station's interface, if any.
    from: Vec<Vec<Option<usize>>>,
    /// Per link, its frames' fingerprints and due instants (switch clock, ns), oldest first.
    links: Vec<VecDeque<(u64, u64)>>,
}

impl InFlight {
    /// The links between stations, from each station's interfaces' `(mac, peer_mac)`: an
    /// interface whose peer MAC is another station's interface's MAC sends to it.
    pub fn new(ifaces: &[Vec<([u8; 6], [u8; 6])>]) -> InFlight {
        let mut f = InFlight {
            toward: ifaces.iter().map(|s| vec![None; s.len()]).collect(),
            from: ifaces.iter().map(|s| vec![None; s.len()]).collect(),
            links: Vec::new(),
        };
        for (s, station) in ifaces.iter().enumerate() {
            for (i, (_, peer)) in station.iter().enumerate() {
                let end =
                    ifaces.iter().enumerate().filter(|(s2, _)| *s2 != s).find_map(|(s2, o)| {
                        o.iter().position(|(mac, _)| mac == peer).map(|i2| (s2, i2))
                    });
                if let Some((s2, i2)) = end {
                    f.toward[s][i] = Some(f.links.len());
                    f.from[s2][i2] = Some(f.links.len());
                    f.links.push(VecDeque::new());
                }
            }
        }
        f
    }

    /// Links between the loop's switches.
    #[cfg(test)]
    pub fn links(&self) -> usize {
        self.links.len()
    }

    /// Station `s` sends `frame` on interface `i`, due at the far end at `due_ns`.
    pub fn sent(&mut self, s: usize, i: usize, frame: &[u8], due_ns: u64) {
        let Some(l) = self.toward.get(s).and_then(|v| v.get(i).copied().flatten()) else {
            return;
        };
        let Some(fp) = fingerprint(frame) else { return };
        let q = &mut self.links[l];
        if q.len() == MOST {
            q.pop_front();
        }
        q.push_back((fp, due_ns));
    }

    /// The instant `frame`, read from station `s`'s interface `i`, was due there, if another
    /// station of the loop sent it (without taking the record: see [`Self::take`]).
    pub fn due(&self, s: usize, i: usize, frame: &[u8]) -> Option<u64> {
        let (q, k) = self.find(s, i, frame)?;
        Some(self.links[q][k].1)
    }

    /// [`Self::due`], taking the frame's record and dropping the older ones (frames lost on
    /// the way).
    pub fn take(&mut self, s: usize, i: usize, frame: &[u8]) -> Option<u64> {
        let (q, k) = self.find(s, i, frame)?;
        let q = &mut self.links[q];
        q.drain(..k);
        q.pop_front().map(|(_, due)| due)
    }

    fn find(&self, s: usize, i: usize, frame: &[u8]) -> Option<(usize, usize)> {
        let l = self.from.get(s)?.get(i).copied().flatten()?;
        let q = &self.links[l];
        if q.is_empty() {
            return None;
        }
        let fp = fingerprint(frame)?;
        q.iter().take(SEARCH).position(|(f, _)| *f == fp).map(|k| (l, k))
    }
}

/// A frame's bytes after its Ethernet header (and an 802.1Q / 802.1ad tag, which the kernel
/// may take out on receipt), with their length; `None` for a frame too short to have any.
fn fingerprint(frame: &[u8]) -> Option<u64> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let start = if matches!(ethertype, 0x8100 | 0x88a8) { 18 } else { 14 };
    let body = frame.get(start..)?;
    let mut h = FxHasher::default();
    h.write_usize(body.len());
    h.write(&body[..body.len().min(FINGERPRINT_BYTES)]);
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const C: [u8; 6] = [2, 0, 0, 0, 0, 3];
    const H: [u8; 6] = [2, 0, 0, 0, 0, 9];

    fn frame(seq: u8) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[40] = seq;
        f
    }

    /// Station 0: A (toward B) and one toward a host; station 1: B (toward A) and C (toward
    /// a host).
    fn two() -> InFlight {
        InFlight::new(&[vec![(A, B), ([2, 0, 0, 0, 0, 7], H)], vec![(B, A), (C, H)]])
    }

    #[test]
    fn links_join_interfaces_whose_macs_face_each_other() {
        let f = two();
        assert_eq!(f.links(), 2);
        assert!(f.toward[0][0].is_some() && f.from[1][0] == f.toward[0][0]);
        assert!(f.toward[1][0].is_some() && f.from[0][0] == f.toward[1][0]);
        assert_eq!((f.toward[0][1], f.toward[1][1], f.from[1][1]), (None, None, None));
        assert_eq!(InFlight::new(&[vec![(A, B)]]).links(), 0, "a peer outside the loop");
    }

    #[test]
    fn a_frame_takes_its_own_instant_and_lost_ones_are_dropped() {
        let mut f = two();
        for seq in 1..=3 {
            f.sent(0, 0, &frame(seq), 1000 * u64::from(seq));
        }
        f.sent(0, 1, &frame(9), 9); // toward a host: no record
        assert_eq!(f.due(1, 0, &frame(2)), Some(2000));
        assert_eq!(f.due(1, 1, &frame(9)), None);
        // frame 1 was lost: frame 2 takes its instant and frame 1's record goes
        assert_eq!(f.take(1, 0, &frame(2)), Some(2000));
        assert_eq!(f.take(1, 0, &frame(1)), None);
        assert_eq!(f.take(1, 0, &frame(3)), Some(3000));
        assert_eq!(f.take(1, 0, &frame(3)), None, "taken once");
        // the other direction is a link of its own; a frame nobody sent keeps the ring's stamp
        f.sent(1, 0, &frame(4), 4000);
        assert_eq!(f.take(0, 0, &frame(5)), None);
        assert_eq!(f.take(0, 0, &frame(4)), Some(4000));
    }

    #[test]
    fn a_tag_the_kernel_took_out_matches_the_tagged_frame_sent() {
        let mut f = two();
        let untagged = frame(1);
        let mut tagged = untagged[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        tagged.extend_from_slice(&untagged[12..]);
        f.sent(0, 0, &tagged, 77);
        assert_eq!(f.take(1, 0, &untagged), Some(77));
        assert_eq!(f.take(1, 0, &[0u8; 10]), None, "too short: no fingerprint, no panic");
    }

    #[test]
    fn records_are_bounded_and_searched_among_the_oldest() {
        let mut f = two();
        for k in 0..(MOST as u64 + 10) {
            let mut fr = frame(0);
            fr[41..49].copy_from_slice(&k.to_be_bytes());
            f.sent(0, 0, &fr, k);
        }
        assert_eq!(f.links[0].len(), MOST);
        let mut late = frame(0);
        late[41..49].copy_from_slice(&(SEARCH as u64 + 20).to_be_bytes());
        assert_eq!(f.due(1, 0, &late), None, "beyond the oldest SEARCH records");
        let mut first = frame(0);
        first[41..49].copy_from_slice(&10u64.to_be_bytes());
        assert_eq!(f.take(1, 0, &first), Some(10));
    }
}
