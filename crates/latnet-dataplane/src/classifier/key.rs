//! Lookup keys: up to [`KEY_BITS`] bits, most significant bit first, in 64-bit words.
//!
//! A table's key is the concatenation of its fields' bits (POF style: each field is
//! `{offset, length}` in bits over the packet or the metadata). Bit `i` of a key lives in word
//! `i / 64` at bit `63 - i % 64`; unused bits are zero. Two extraction routines fill a key:
//!
//! * [`extract_bitwise`] copies one bit at a time, as the public DPDK POF switch assembles its
//!   keys (the baseline's cost model);
//! * [`extract_fast`] moves up to 56 bits per step with shifts (the strong pipeline's).
//!
//! Both read bits beyond the end of the buffer as zero (a simulated packet may carry only its
//! headers), never panic, and produce identical keys (tested).

/// Words in a key.
pub const KEY_WORDS: usize = 6;
/// Largest key, in bits.
pub const KEY_BITS: usize = KEY_WORDS * 64;

/// A lookup key (or a mask, or a value: the same layout).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Key {
    /// The bits, most significant first.
    pub w: [u64; KEY_WORDS],
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("0x")?;
        let last = self.w.iter().rposition(|&w| w != 0).unwrap_or(0);
        for w in &self.w[..=last] {
            write!(f, "{w:016x}")?;
        }
        Ok(())
    }
}

impl Key {
    /// All bits zero.
    pub const ZERO: Key = Key { w: [0; KEY_WORDS] };

    /// The first `len` bits set (a prefix mask).
    pub fn prefix_mask(len: usize) -> Key {
        let mut k = Key::ZERO;
        let len = len.min(KEY_BITS);
        for (i, w) in k.w.iter_mut().enumerate() {
            let lo = i * 64;
            if len >= lo + 64 {
                *w = u64::MAX;
            } else if len > lo {
                *w = u64::MAX << (64 - (len - lo));
            }
        }
        k
    }

    /// Bitwise and.
    #[inline]
    pub fn and(&self, m: &Key) -> Key {
        let mut k = *self;
        for (a, b) in k.w.iter_mut().zip(m.w.iter()) {
            *a &= b;
        }
        k
    }

    /// `self & mask == value` on the first `nwords` words.
    #[inline]
    pub fn matches(&self, value: &Key, mask: &Key, nwords: usize) -> bool {
        let n = nwords.min(KEY_WORDS);
        let mut diff = 0u64;
        for i in 0..n {
            diff |= (self.w[i] & mask.w[i]) ^ value.w[i];
        }
        diff == 0
    }

    /// Bit `i` (0 = most significant).
    #[inline]
    pub fn bit(&self, i: usize) -> bool {
        i < KEY_BITS && (self.w[i / 64] >> (63 - i % 64)) & 1 == 1
    }

    /// Set bit `i` to one (ignored beyond [`KEY_BITS`]).
    #[inline]
    pub fn set_bit(&mut self, i: usize) {
        if i < KEY_BITS {
            self.w[i / 64] |= 1 << (63 - i % 64);
        }
    }

    /// Write the low `n` (1..=64) bits of `v` at bit position `pos`.
    #[inline]
    pub fn put_bits(&mut self, pos: usize, n: usize, v: u64) {
        if n == 0 || pos >= KEY_BITS {
            return;
        }
        let n = n.min(64);
        let v = if n == 64 { v } else { v & ((1u64 << n) - 1) };
        // Bits past the end of the key are cut off: keep the leading (most significant) ones.
        let keep = n.min(KEY_BITS - pos);
        let v = v >> (n - keep);
        let n = keep;
        let wi = pos / 64;
        let off = pos % 64;
        // bits occupy [off, off + n) of word wi, possibly spilling into wi + 1
        if off + n <= 64 {
            self.w[wi] |= v << (64 - off - n);
        } else {
            let first = 64 - off; // bits in word wi
            let rest = n - first;
            self.w[wi] |= v >> rest;
            if wi + 1 < KEY_WORDS {
                self.w[wi + 1] |= v << (64 - rest);
            }
        }
    }

    /// Read `n` (1..=64) bits at `pos` as an integer (bits beyond the key read as zero).
    #[inline]
    pub fn get_bits(&self, pos: usize, n: usize) -> u64 {
        if n == 0 || pos >= KEY_BITS {
            return 0;
        }
        let n = n.min(64);
        let wi = pos / 64;
        let off = pos % 64;
        let hi = self.w[wi] << off;
        let lo = if off > 0 && wi + 1 < KEY_WORDS { self.w[wi + 1] >> (64 - off) } else { 0 };
        (hi | lo) >> (64 - n)
    }

    /// Do the two `(value, mask)` pairs share at least one key (the seed's mask intersection:
    /// `common = m1 & m2`, conflict-free iff `(v1 ^ v2) & common == 0`)?
    #[inline]
    pub fn intersects(v1: &Key, m1: &Key, v2: &Key, m2: &Key) -> bool {
        v1.w.iter()
            .zip(m1.w.iter())
            .zip(v2.w.iter().zip(m2.w.iter()))
            .all(|((a, ma), (b, mb))| (a ^ b) & (ma & mb) == 0)
    }
}

/// Read `n` (1..=56) bits from `src` starting at bit `off`, as an integer; bits past the end of
/// `src` read as zero.
#[inline]
pub fn read_bits(src: &[u8], off: usize, n: usize) -> u64 {
    let n = n.clamp(1, 56);
    let byte = off / 8;
    let shift = off % 8;
    let mut buf = [0u8; 8];
    if byte < src.len() {
        let end = (byte + 8).min(src.len());
        buf[..end - byte].copy_from_slice(&src[byte..end]);
    }
    let v = u64::from_be_bytes(buf);
    (v << shift) >> (64 - n)
}

/// Copy `len` bits at bit `off` of `src` into `key` at bit `pos`, 56 bits per step.
#[inline]
pub fn extract_fast(src: &[u8], off: usize, len: usize, key: &mut Key, pos: usize) {
    let mut done = 0;
    while done < len {
        let n = (len - done).min(56);
        key.put_bits(pos + done, n, read_bits(src, off + done, n));
        done += n;
    }
}

/// Copy `len` bits at bit `off` of `src` into `key` at bit `pos`, one bit at a time (the
/// public DPDK POF switch's way of assembling keys).
#[inline]
pub fn extract_bitwise(src: &[u8], off: usize, len: usize, key: &mut Key, pos: usize) {
    for b in 0..len {
        let i = off + b;
        let bit = src.get(i / 8).is_some_and(|&x| (x >> (7 - i % 8)) & 1 == 1);
        if bit {
            key.set_bit(pos + b);
        }
    }
}

/// Write the `len` bits at `pos` of `value` into `dst` at bit `off` (bits beyond `dst` are
/// ignored). Used by set-field.
pub fn write_bits(dst: &mut [u8], off: usize, len: usize, value: &Key, pos: usize) {
    for b in 0..len {
        let i = off + b;
        let Some(x) = dst.get_mut(i / 8) else { return };
        let m = 1u8 << (7 - i % 8);
        if value.bit(pos + b) {
            *x |= m;
        } else {
            *x &= !m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_masks() {
        assert_eq!(Key::prefix_mask(0), Key::ZERO);
        assert_eq!(Key::prefix_mask(4).w[0], 0xf000_0000_0000_0000);
        let m = Key::prefix_mask(70);
        assert_eq!(m.w[0], u64::MAX);
        assert_eq!(m.w[1], 0xfc00_0000_0000_0000);
        assert_eq!(Key::prefix_mask(KEY_BITS + 5).w, [u64::MAX; KEY_WORDS]);
    }

    #[test]
    fn intersection_as_in_the_seed() {
        let k = |x: u64| Key { w: [x << 56, 0, 0, 0, 0, 0] };
        // 1010xxxx and 10xx11xx intersect; 1010xxxx and 11xxxxxx do not
        assert!(Key::intersects(&k(0b1010_0000), &k(0xf0), &k(0b1000_1100), &k(0b1100_1100)));
        assert!(!Key::intersects(&k(0b1010_0000), &k(0xf0), &k(0b1100_0000), &k(0xc0)));
    }

    #[test]
    fn a_field_running_past_the_key_keeps_its_leading_bits() {
        // Found by proptest: 194 bits placed at bit 191 of a 384-bit key.
        let mut src = vec![0u8; 53];
        src[52] = 1;
        let (mut a, mut b) = (Key::ZERO, Key::ZERO);
        extract_fast(&src, 230, 194, &mut a, 191);
        extract_bitwise(&src, 230, 194, &mut b, 191);
        assert_eq!(a, b);
        let mut k = Key::ZERO;
        k.put_bits(KEY_BITS - 4, 8, 0b1011_0110);
        assert_eq!(k.get_bits(KEY_BITS - 4, 4), 0b1011);
    }

    proptest! {
        #[test]
        fn fast_and_bitwise_extraction_agree(
            src in proptest::collection::vec(any::<u8>(), 0..64),
            off in 0usize..600, len in 0usize..200, pos in 0usize..200,
        ) {
            let mut a = Key::ZERO;
            let mut b = Key::ZERO;
            extract_fast(&src, off, len, &mut a, pos);
            extract_bitwise(&src, off, len, &mut b, pos);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn put_get_round_trip(pos in 0usize..KEY_BITS - 64, n in 1usize..=64, v in any::<u64>()) {
            let mut k = Key::ZERO;
            k.put_bits(pos, n, v);
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            prop_assert_eq!(k.get_bits(pos, n), v & mask);
        }

        #[test]
        fn write_then_extract(
            mut dst in proptest::collection::vec(any::<u8>(), 1..40),
            off in 0usize..300, len in 1usize..64, v in any::<u64>(),
        ) {
            let mut val = Key::ZERO;
            val.put_bits(0, len, v);
            write_bits(&mut dst, off, len, &val, 0);
            if off + len <= dst.len() * 8 {
                let mut k = Key::ZERO;
                extract_fast(&dst, off, len, &mut k, 0);
                prop_assert_eq!(k, val);
            }
        }
    }
}
