//! The discrete-event core: a priority queue of events ordered by `(time, tie, seq)`.
//!
//! * `time` is virtual time in integer nanoseconds.
//! * `tie` is a caller-chosen key that orders events at the same instant (see
//!   [`TieBreak`](crate::TieBreak)); with the default rule it is 0 for every event.
//! * `seq` is the insertion counter: events equal in `(time, tie)` run in the order they were
//!   scheduled. Ordering is therefore total and independent of memory layout or hashing, and a
//!   run is bit-for-bit reproducible.
//!
//! Payloads live in a slab beside the heap so the heap moves only small keys. The ordering key
//! is packed into one `u128` — time (64 bits), tie (24 bits), sequence (40 bits) — so that
//! comparing two events is one integer comparison. Tie keys above 2^24 - 1 are clamped (they
//! still order correctly among themselves up to that value); when the sequence counter would
//! pass 2^40 the pending events are renumbered in order, so the order stays exact for runs of
//! any length.

use latnet_units::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const SEQ_BITS: u32 = 40;
const TIE_BITS: u32 = 24;
const SEQ_MASK: u128 = (1 << SEQ_BITS) - 1;
/// Largest tie key that orders exactly (larger ones are clamped to it).
pub const MAX_TIE: u32 = (1 << TIE_BITS) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    /// time << 64 | tie << 40 | seq
    order: u128,
    slot: u32,
}

impl Key {
    #[inline]
    fn time(&self) -> Time {
        Time::from_nanos((self.order >> 64) as u64)
    }
}

/// A deterministic event queue with payloads of type `E`.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Key>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
            popped: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedule `event` at `time` with tie key `tie`.
    #[inline]
    pub fn schedule(&mut self, time: Time, tie: u32, event: E) {
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(event);
                s
            }
            None => {
                self.slots.push(Some(event));
                (self.slots.len() - 1) as u32
            }
        };
        if self.seq == SEQ_MASK as u64 {
            self.renumber();
        }
        self.seq += 1;
        let order = (u128::from(time.as_nanos()) << 64)
            | (u128::from(tie.min(MAX_TIE)) << SEQ_BITS)
            | u128::from(self.seq);
        self.heap.push(Reverse(Key { order, slot }));
    }

    /// Give the pending events consecutive sequence numbers from 1, keeping their order.
    #[cold]
    fn renumber(&mut self) {
        let mut keys: Vec<Key> = std::mem::take(&mut self.heap).into_iter().map(|r| r.0).collect();
        keys.sort_unstable();
        for (i, k) in keys.iter_mut().enumerate() {
            k.order = (k.order & !SEQ_MASK) | (i as u128 + 1);
        }
        self.seq = keys.len() as u64;
        self.heap = keys.into_iter().map(Reverse).collect();
    }

    /// The time of the next event, if any.
    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse(k)| k.time())
    }

    /// Remove and return the next event.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        loop {
            let Reverse(k) = self.heap.pop()?;
            let ev = self.slots.get_mut(k.slot as usize).and_then(Option::take);
            self.free.push(k.slot);
            if let Some(ev) = ev {
                self.popped += 1;
                return Some((k.time(), ev));
            }
        }
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True if no event waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Events popped so far.
    pub fn executed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn orders_by_time_then_tie_then_insertion() {
        let mut q = EventQueue::new();
        q.schedule(Time::from_nanos(5), 0, "c");
        q.schedule(Time::from_nanos(1), 0, "a");
        q.schedule(Time::from_nanos(5), 0, "d");
        q.schedule(Time::from_nanos(5), 1, "e");
        q.schedule(Time::from_nanos(2), 0, "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, vec!["a", "b", "c", "d", "e"]);
        assert_eq!(q.executed(), 5);
    }

    #[test]
    fn renumbering_keeps_the_order() {
        let mut q = EventQueue::new();
        q.seq = SEQ_MASK as u64 - 2;
        for i in 0..6u64 {
            q.schedule(Time::from_nanos(7), 0, i);
        }
        q.schedule(Time::from_nanos(3), 0, 99);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, vec![99, 0, 1, 2, 3, 4, 5]);
        assert!(q.seq < 10, "renumbered: {}", q.seq);
    }

    proptest! {
        #[test]
        fn pops_in_nondecreasing_order_and_reuses_slots(
            times in proptest::collection::vec((0u64..50, 0u32..3), 1..300)
        ) {
            let mut q = EventQueue::new();
            for (i, &(t, tie)) in times.iter().enumerate() {
                q.schedule(Time::from_nanos(t), tie, i);
                if i % 3 == 0 { let _ = q.pop(); }
            }
            let mut last = (Time::ZERO, 0u32, 0usize);
            let mut first = true;
            while let Some((t, i)) = q.pop() {
                let tie = times[i].1;
                if !first {
                    prop_assert!((t, tie) >= (last.0, last.1));
                    if (t, tie) == (last.0, last.1) { prop_assert!(i > last.2); }
                }
                first = false;
                last = (t, tie, i);
            }
            prop_assert!(q.slots.len() <= times.len());
        }
    }
}
