//! TCP options (RFC 9293 section 3.2, RFC 7323, RFC 2018): typed [`TcpOption`], the
//! [`TcpOptions`] iterator and a padded emitter.
//!
//! Known kinds must have their exact lengths (MSS 4, window scale 3, SACK-permitted 2, SACK
//! 2 + 8n with n in 1..=4, timestamps 10), otherwise they are `Malformed`. Unknown kinds are
//! kept as [`TcpOption::Unknown`] with their data, so nothing is lost. A length below 2 or
//! running past the data offset is `Malformed`.

use crate::error::{Layer, Result, WireError};
use crate::util::{be16, be32, put16, put32};

/// Most option bytes a TCP header can hold (data offset 15).
pub const MAX_OPTIONS_LEN: usize = 40;

/// Option kinds.
pub mod kind {
    /// End of option list.
    pub const END: u8 = 0;
    /// No operation.
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMP: u8 = 8;
}

/// Up to four SACK blocks `(left edge, right edge)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SackBlocks {
    blocks: [(u32, u32); 4],
    len: u8,
}

impl SackBlocks {
    /// The blocks of `blocks`; `None` if there are none or more than four.
    pub fn new(blocks: &[(u32, u32)]) -> Option<SackBlocks> {
        if blocks.is_empty() || blocks.len() > 4 {
            return None;
        }
        let mut s = SackBlocks { blocks: [(0, 0); 4], len: blocks.len() as u8 };
        s.blocks[..blocks.len()].copy_from_slice(blocks);
        Some(s)
    }

    /// The blocks.
    pub fn as_slice(&self) -> &[(u32, u32)] {
        &self.blocks[..usize::from(self.len)]
    }
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpOption<'a> {
    /// End of option list (the rest of the option space is padding).
    EndOfList,
    /// No operation.
    NoOperation,
    /// Maximum segment size.
    MaxSegmentSize(u16),
    /// Window scale shift count.
    WindowScale(u8),
    /// SACK permitted.
    SackPermitted,
    /// SACK blocks.
    Sack(SackBlocks),
    /// Timestamps (RFC 7323).
    Timestamp {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// Any other kind, data preserved.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data (without kind and length).
        data: &'a [u8],
    },
}

fn malformed(what: &'static str) -> WireError {
    WireError::malformed(Layer::TcpOption, what)
}

impl<'a> TcpOption<'a> {
    /// Option kind octet.
    pub const fn kind(&self) -> u8 {
        match self {
            TcpOption::EndOfList => kind::END,
            TcpOption::NoOperation => kind::NOP,
            TcpOption::MaxSegmentSize(_) => kind::MSS,
            TcpOption::WindowScale(_) => kind::WINDOW_SCALE,
            TcpOption::SackPermitted => kind::SACK_PERMITTED,
            TcpOption::Sack(_) => kind::SACK,
            TcpOption::Timestamp { .. } => kind::TIMESTAMP,
            TcpOption::Unknown { kind, .. } => *kind,
        }
    }

    /// Wire length.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(s) => 2 + 8 * s.as_slice().len(),
            TcpOption::Timestamp { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Reads the option at the start of `data`; returns it and its length.
    pub fn parse(data: &'a [u8]) -> Result<(TcpOption<'a>, usize)> {
        let (&k, _) = data.split_first().ok_or(malformed("length"))?;
        match k {
            kind::END => return Ok((TcpOption::EndOfList, 1)),
            kind::NOP => return Ok((TcpOption::NoOperation, 1)),
            _ => {}
        }
        let len = match data.get(1) {
            Some(&l) if l >= 2 && usize::from(l) <= data.len() => usize::from(l),
            _ => return Err(malformed("length")),
        };
        let body = &data[2..len];
        let opt = match (k, len) {
            (kind::MSS, 4) => TcpOption::MaxSegmentSize(be16(body, 0)),
            (kind::MSS, _) => return Err(malformed("mss length")),
            (kind::WINDOW_SCALE, 3) => TcpOption::WindowScale(body[0]),
            (kind::WINDOW_SCALE, _) => return Err(malformed("window scale length")),
            (kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (kind::SACK_PERMITTED, _) => return Err(malformed("sack permitted length")),
            (kind::SACK, 10 | 18 | 26 | 34) => {
                let mut s = SackBlocks { blocks: [(0, 0); 4], len: 0 };
                for (i, b) in body.chunks_exact(8).enumerate() {
                    s.blocks[i] = (be32(b, 0), be32(b, 4));
                }
                s.len = (body.len() / 8) as u8;
                TcpOption::Sack(s)
            }
            (kind::SACK, _) => return Err(malformed("sack length")),
            (kind::TIMESTAMP, 10) => {
                TcpOption::Timestamp { tsval: be32(body, 0), tsecr: be32(body, 4) }
            }
            (kind::TIMESTAMP, _) => return Err(malformed("timestamp length")),
            _ => TcpOption::Unknown { kind: k, data: body },
        };
        Ok((opt, len))
    }

    /// Writes the option at the start of `buf`; returns its length.
    ///
    /// Errors: `Truncated` if `buf` is too short; `Malformed` for an `Unknown` with a known
    /// kind or data over 38 bytes, or a SACK without blocks (`SackBlocks::default()`), which
    /// [`TcpOption::parse`] would refuse.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match self {
            TcpOption::Unknown { kind, data }
                if matches!(*kind, 0..=5 | 8) || data.len() > MAX_OPTIONS_LEN - 2 =>
            {
                return Err(malformed("unknown option"));
            }
            TcpOption::Sack(s) if s.as_slice().is_empty() => return Err(malformed("sack length")),
            _ => {}
        }
        let n = self.buffer_len();
        let have = buf.len();
        let out = buf.get_mut(..n).ok_or(WireError::truncated(Layer::TcpOption, n, have))?;
        out[0] = self.kind();
        if n > 1 {
            out[1] = n as u8;
        }
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation | TcpOption::SackPermitted => {}
            TcpOption::MaxSegmentSize(v) => put16(out, 2, *v),
            TcpOption::WindowScale(v) => out[2] = *v,
            TcpOption::Sack(s) => {
                for (i, (l, r)) in s.as_slice().iter().enumerate() {
                    put32(out, 2 + 8 * i, *l);
                    put32(out, 6 + 8 * i, *r);
                }
            }
            TcpOption::Timestamp { tsval, tsecr } => {
                put32(out, 2, *tsval);
                put32(out, 6, *tsecr);
            }
            TcpOption::Unknown { data, .. } => out[2..].copy_from_slice(data),
        }
        Ok(n)
    }

    /// Length of `options` padded to a multiple of 4.
    pub fn padded_len(options: &[TcpOption<'_>]) -> usize {
        options.iter().map(TcpOption::buffer_len).sum::<usize>().div_ceil(4) * 4
    }

    /// Writes `options` in order, padded with zeros (End of Option List) to a multiple of 4;
    /// returns the padded length. `Malformed` if that exceeds [`MAX_OPTIONS_LEN`].
    pub fn emit_list(options: &[TcpOption<'_>], buf: &mut [u8]) -> Result<usize> {
        let total = Self::padded_len(options);
        if total > MAX_OPTIONS_LEN {
            return Err(malformed("total length"));
        }
        if buf.len() < total {
            return Err(WireError::truncated(Layer::TcpOption, total, buf.len()));
        }
        let mut pos = 0;
        for o in options {
            pos += o.emit(&mut buf[pos..])?;
        }
        buf[pos..total].fill(0);
        Ok(total)
    }
}

/// Iterator over the options of a TCP header. Yields [`TcpOption::EndOfList`] and then stops;
/// stops after the first error.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> TcpOptions<'a> {
    /// Iterates the option bytes `data`.
    pub const fn new(data: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions { data, pos: 0 }
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.data.get(self.pos..).filter(|r| !r.is_empty())?;
        match TcpOption::parse(rest) {
            Ok((TcpOption::EndOfList, _)) => {
                self.pos = self.data.len();
                Some(Ok(TcpOption::EndOfList))
            }
            Ok((o, n)) => {
                self.pos += n;
                Some(Ok(o))
            }
            Err(e) => {
                self.pos = self.data.len();
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for TcpOptions<'_> {}

/// `Ok` if every option in `data` is well-formed.
pub fn check_options(data: &[u8]) -> Result<()> {
    for o in TcpOptions::new(data) {
        o?;
    }
    Ok(())
}

/// Owned, padded option bytes built from a list of options: a backing store for
/// [`crate::TcpRepr::options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpOptionBuf {
    bytes: [u8; MAX_OPTIONS_LEN],
    len: u8,
}

impl TcpOptionBuf {
    /// Emits `options` (see [`TcpOption::emit_list`]).
    pub fn new(options: &[TcpOption<'_>]) -> Result<TcpOptionBuf> {
        let mut bytes = [0u8; MAX_OPTIONS_LEN];
        let len = TcpOption::emit_list(options, &mut bytes)?;
        Ok(TcpOptionBuf { bytes, len: len as u8 })
    }

    /// The padded option bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_lengths_are_enforced() {
        for bad in [
            &[2u8, 3, 5][..],
            &[3, 4, 7, 0],
            &[4, 3, 0],
            &[5, 2],
            &[5, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            &[8, 9, 0, 0, 0, 0, 0, 0, 0],
            &[0x22, 1],
            &[0x22],
            &[0x22, 5, 0],
        ] {
            assert!(check_options(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sack_blocks_round_trip() {
        let s = SackBlocks::new(&[(1, 2), (3, 4), (5, 6), (7, 8)]).expect("four");
        let b = TcpOptionBuf::new(&[
            TcpOption::NoOperation,
            TcpOption::NoOperation,
            TcpOption::Sack(s),
        ])
        .expect("fits");
        assert_eq!(b.as_slice().len(), 36);
        let got: Vec<_> = TcpOptions::new(b.as_slice()).collect::<Result<_>>().expect("ok");
        assert_eq!(got[2], TcpOption::Sack(s));
        assert!(SackBlocks::new(&[(0, 0); 5]).is_none());
    }

    /// What the emitter writes, the parser reads: a SACK of no blocks (the `Default` of
    /// `SackBlocks`) was written as `[5, 2]`, which every parser refuses, so a `TcpRepr` built
    /// on it failed `check()` and `TcpRepr::emit` panicked.
    #[test]
    fn a_sack_without_blocks_is_not_emitted() {
        let empty = TcpOption::Sack(SackBlocks::default());
        let mut b = [0u8; 8];
        assert_eq!(empty.emit(&mut b), Err(malformed("sack length")));
        assert!(TcpOptionBuf::new(&[TcpOption::SackPermitted, empty]).is_err());
    }

    #[test]
    fn unknown_must_not_shadow_known_kinds() {
        let mut b = [0u8; 8];
        assert!(TcpOption::Unknown { kind: 2, data: &[5, 180] }.emit(&mut b).is_err());
        assert_eq!(TcpOption::Unknown { kind: 30, data: &[1, 2] }.emit(&mut b), Ok(4));
        assert_eq!(&b[..4], &[30, 4, 1, 2]);
    }
}
