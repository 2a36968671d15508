//! Big-endian field access. Callers guarantee the range is in bounds (checked views).

#[inline(always)]
pub(crate) fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

#[inline(always)]
pub(crate) fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

#[inline(always)]
pub(crate) fn put16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn put32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// `&d[start..end]` clamped to the buffer: never panics, possibly empty.
#[inline(always)]
pub(crate) fn clamped(d: &[u8], start: usize, end: usize) -> &[u8] {
    let end = end.min(d.len());
    d.get(start..end).unwrap_or(&[])
}

/// Mutable [`clamped`].
#[inline(always)]
pub(crate) fn clamped_mut(d: &mut [u8], start: usize, end: usize) -> &mut [u8] {
    let end = end.min(d.len());
    if start <= end {
        &mut d[start..end]
    } else {
        &mut []
    }
}
