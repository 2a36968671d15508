//! Longest-prefix-match indexes over keys of any width: the POF baseline's 1-bit binary trie
//! and the strong pipeline's hash table per prefix length (probed from the longest length
//! present down).
//!
//! Both support the seed's LPM verification (Section 4.2.3): "is there a prefix longer than
//! the one of entry `r` that matches this key?". The trie answers it by resuming the walk at
//! `r`'s node, as the seed describes; the hashed index probes only the longer lengths.

use super::key::Key;
use std::collections::HashMap;

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    child: [u32; 2],
    slot: u32,
}

const EMPTY: Node = Node { child: [NONE; 2], slot: NONE };

/// A 1-bit (binary) trie, one node per prefix bit: O(W) per lookup.
#[derive(Debug, Clone)]
pub struct LpmTrie {
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// slot -> node holding it
    node_of: HashMap<u32, u32>,
    width: usize,
}

impl LpmTrie {
    /// An empty trie over `width`-bit keys.
    pub fn new(width: usize) -> LpmTrie {
        LpmTrie { nodes: vec![EMPTY], free: Vec::new(), node_of: HashMap::new(), width }
    }

    fn alloc(&mut self) -> u32 {
        match self.free.pop() {
            Some(n) => {
                self.nodes[n as usize] = EMPTY;
                n
            }
            None => {
                self.nodes.push(EMPTY);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Add prefix `value/len` in `slot` (the caller rejects duplicates).
    pub fn insert(&mut self, value: &Key, len: usize, slot: u32) {
        let mut n = 0u32;
        for i in 0..len {
            let b = usize::from(value.bit(i));
            let c = self.nodes[n as usize].child[b];
            n = if c == NONE {
                let c = self.alloc();
                self.nodes[n as usize].child[b] = c;
                c
            } else {
                c
            };
        }
        self.nodes[n as usize].slot = slot;
        self.node_of.insert(slot, n);
    }

    /// The slot holding exactly `value/len`.
    pub fn get(&self, value: &Key, len: usize) -> Option<u32> {
        let mut n = 0u32;
        for i in 0..len {
            n = self.nodes[n as usize].child[usize::from(value.bit(i))];
            if n == NONE {
                return None;
            }
        }
        let s = self.nodes[n as usize].slot;
        (s != NONE).then_some(s)
    }

    /// Remove prefix `value/len` held in `slot`, pruning empty nodes.
    pub fn remove(&mut self, value: &Key, len: usize, slot: u32) {
        let mut path = Vec::with_capacity(len + 1);
        let mut n = 0u32;
        path.push(n);
        for i in 0..len {
            let c = self.nodes[n as usize].child[usize::from(value.bit(i))];
            if c == NONE {
                return;
            }
            n = c;
            path.push(n);
        }
        if self.nodes[n as usize].slot != slot {
            return;
        }
        self.nodes[n as usize].slot = NONE;
        self.node_of.remove(&slot);
        // prune from the deepest node up
        for depth in (1..path.len()).rev() {
            let node = self.nodes[path[depth] as usize];
            if node.slot != NONE || node.child != [NONE; 2] {
                break;
            }
            let parent = path[depth - 1] as usize;
            let b = usize::from(value.bit(depth - 1));
            self.nodes[parent].child[b] = NONE;
            self.free.push(path[depth]);
        }
    }

    #[inline]
    fn walk(&self, key: &Key, mut n: u32, from: usize, mut best: u32) -> u32 {
        for i in from..self.width {
            let c = self.nodes[n as usize].child[usize::from(key.bit(i))];
            if c == NONE {
                break;
            }
            n = c;
            let s = self.nodes[n as usize].slot;
            if s != NONE {
                best = s;
            }
        }
        best
    }

    /// The longest prefix matching `key`.
    #[inline]
    pub fn lookup(&self, key: &Key) -> Option<u32> {
        let best = self.walk(key, 0, 0, self.nodes[0].slot);
        (best != NONE).then_some(best)
    }

    /// A prefix longer than the one in `slot` (of length `len`) that matches `key`, resuming
    /// the walk at `slot`'s node.
    pub fn longer(&self, key: &Key, slot: u32, len: usize) -> Option<u32> {
        let &n = self.node_of.get(&slot)?;
        let best = self.walk(key, n, len, NONE);
        (best != NONE).then_some(best)
    }

    /// Nodes in use.
    pub fn nodes(&self) -> usize {
        self.nodes.len() - self.free.len()
    }
}

type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

#[derive(Debug, Clone)]
struct Level {
    len: u16,
    mask: Key,
    map: FastMap<Key, u32>,
}

/// One hash table per prefix length present, probed longest first: O(number of distinct
/// lengths) hash probes per lookup.
#[derive(Debug, Clone)]
pub struct LpmHash {
    levels: Vec<Level>,
    hasher: foldhash::fast::FixedState,
}

impl LpmHash {
    /// An empty index hashing with `seed`.
    pub fn new(seed: u64) -> LpmHash {
        LpmHash { levels: Vec::new(), hasher: foldhash::fast::FixedState::with_seed(seed) }
    }

    /// Add prefix `value/len` (value already masked) in `slot`.
    pub fn insert(&mut self, value: &Key, len: usize, slot: u32) {
        let len16 = len as u16;
        let i = match self.levels.iter().position(|l| l.len == len16) {
            Some(i) => i,
            None => {
                let pos = self.levels.partition_point(|l| l.len > len16);
                self.levels.insert(
                    pos,
                    Level {
                        len: len16,
                        mask: Key::prefix_mask(len),
                        map: FastMap::with_hasher(self.hasher),
                    },
                );
                pos
            }
        };
        self.levels[i].map.insert(*value, slot);
    }

    /// The slot holding exactly `value/len` (value masked).
    pub fn get(&self, value: &Key, len: usize) -> Option<u32> {
        let l = self.levels.iter().find(|l| usize::from(l.len) == len)?;
        l.map.get(value).copied()
    }

    /// Remove prefix `value/len`.
    pub fn remove(&mut self, value: &Key, len: usize) {
        let len16 = len as u16;
        if let Some(i) = self.levels.iter().position(|l| l.len == len16) {
            self.levels[i].map.remove(value);
            if self.levels[i].map.is_empty() {
                self.levels.remove(i);
            }
        }
    }

    /// The longest prefix matching `key`.
    #[inline]
    pub fn lookup(&self, key: &Key) -> Option<u32> {
        self.levels.iter().find_map(|l| l.map.get(&key.and(&l.mask)).copied())
    }

    /// A prefix longer than `len` matching `key`.
    #[inline]
    pub fn longer(&self, key: &Key, len: usize) -> Option<u32> {
        self.levels
            .iter()
            .take_while(|l| usize::from(l.len) > len)
            .find_map(|l| l.map.get(&key.and(&l.mask)).copied())
    }

    /// Distinct prefix lengths.
    pub fn lengths(&self) -> usize {
        self.levels.len()
    }
}
