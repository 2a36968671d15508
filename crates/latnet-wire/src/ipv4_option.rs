//! IPv4 options (RFC 791 section 3.1): iterator over the option bytes of a header, a generic
//! TLV repr and an emitter that pads to a multiple of 4 bytes.
//!
//! Every option but End of Option List (kind 0) and No Operation (kind 1) is a TLV whose length
//! octet counts the kind and length octets; a length below 2, a missing length octet, or a
//! length that runs past the header (IHL) is `Malformed`. The iterator stops after the first
//! error and at End of Option List (the rest of the option space is padding).

use crate::error::{Layer, Result, WireError};

/// Most option bytes an IPv4 header can hold (IHL 15).
pub const MAX_OPTIONS_LEN: usize = 40;

/// One option: kind and data (without the kind and length octets).
///
/// For [`Ipv4Option::END`] and [`Ipv4Option::NOP`] `data` is empty and the option is a single
/// byte on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Option<'a> {
    /// Option type octet (copied flag, class, number).
    pub kind: u8,
    /// Option data.
    pub data: &'a [u8],
}

impl<'a> Ipv4Option<'a> {
    /// End of option list.
    pub const END: u8 = 0;
    /// No operation (padding between options).
    pub const NOP: u8 = 1;
    /// Record route.
    pub const RECORD_ROUTE: u8 = 7;
    /// Internet timestamp.
    pub const TIMESTAMP: u8 = 68;
    /// Security (RFC 1108).
    pub const SECURITY: u8 = 130;
    /// Loose source and record route.
    pub const LSRR: u8 = 131;
    /// Strict source and record route.
    pub const SSRR: u8 = 137;
    /// Router alert (RFC 2113).
    pub const ROUTER_ALERT: u8 = 148;

    /// A No Operation option.
    pub const fn nop() -> Ipv4Option<'static> {
        Ipv4Option { kind: Self::NOP, data: &[] }
    }

    /// A TLV option.
    pub const fn new(kind: u8, data: &'a [u8]) -> Ipv4Option<'a> {
        Ipv4Option { kind, data }
    }

    /// The copied flag: the option is copied into every fragment.
    pub const fn copied(&self) -> bool {
        self.kind & 0x80 != 0
    }

    /// Option class (0 control, 2 debugging and measurement).
    pub const fn class(&self) -> u8 {
        (self.kind >> 5) & 0b11
    }

    /// Option number (low five bits).
    pub const fn number(&self) -> u8 {
        self.kind & 0x1f
    }

    /// Single-byte option (END or NOP).
    pub const fn is_single_byte(&self) -> bool {
        self.kind == Self::END || self.kind == Self::NOP
    }

    /// Wire length of this option (no padding).
    pub const fn buffer_len(&self) -> usize {
        if self.is_single_byte() {
            1
        } else {
            2 + self.data.len()
        }
    }

    /// Writes this option at the start of `buf`; returns the bytes written.
    ///
    /// Errors: a single-byte kind with data, data longer than 38 bytes (`Malformed`), or `buf`
    /// too short (`Truncated`).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.buffer_len();
        if self.is_single_byte() && !self.data.is_empty() {
            return Err(WireError::malformed(Layer::Ipv4Option, "data"));
        }
        if n > MAX_OPTIONS_LEN {
            return Err(WireError::malformed(Layer::Ipv4Option, "length"));
        }
        let have = buf.len();
        let out = buf.get_mut(..n).ok_or(WireError::truncated(Layer::Ipv4Option, n, have))?;
        out[0] = self.kind;
        if n > 1 {
            out[1] = n as u8;
            out[2..].copy_from_slice(self.data);
        }
        Ok(n)
    }

    /// Length of `options` on the wire, padded to a multiple of 4.
    pub fn padded_len(options: &[Ipv4Option<'_>]) -> usize {
        let n: usize = options.iter().map(Ipv4Option::buffer_len).sum();
        n.div_ceil(4) * 4
    }

    /// Writes `options` in order and pads with End of Option List (zero bytes) to a multiple
    /// of 4; returns the padded length.
    ///
    /// Errors: as [`Self::emit`], and `Malformed` if the padded length exceeds
    /// [`MAX_OPTIONS_LEN`].
    pub fn emit_list(options: &[Ipv4Option<'_>], buf: &mut [u8]) -> Result<usize> {
        let total = Self::padded_len(options);
        if total > MAX_OPTIONS_LEN {
            return Err(WireError::malformed(Layer::Ipv4Option, "total length"));
        }
        if buf.len() < total {
            return Err(WireError::truncated(Layer::Ipv4Option, total, buf.len()));
        }
        let mut pos = 0;
        for o in options {
            pos += o.emit(&mut buf[pos..])?;
        }
        buf[pos..total].fill(0);
        Ok(total)
    }
}

/// Iterator over the options of an IPv4 header; see the module docs.
#[derive(Debug, Clone)]
pub struct Ipv4Options<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Ipv4Options<'a> {
    /// Iterates the option bytes `data` (the bytes between the fixed header and IHL).
    pub const fn new(data: &'a [u8]) -> Ipv4Options<'a> {
        Ipv4Options { data, pos: 0 }
    }

    fn stop(&mut self) {
        self.pos = self.data.len();
    }
}

impl<'a> Iterator for Ipv4Options<'a> {
    type Item = Result<Ipv4Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.data.get(self.pos..)?;
        let (&kind, _) = rest.split_first()?;
        match kind {
            Ipv4Option::END => {
                self.stop();
                None
            }
            Ipv4Option::NOP => {
                self.pos += 1;
                Some(Ok(Ipv4Option::nop()))
            }
            _ => {
                let len = match rest.get(1) {
                    Some(&l) if l >= 2 && usize::from(l) <= rest.len() => usize::from(l),
                    _ => {
                        self.stop();
                        return Some(Err(WireError::malformed(Layer::Ipv4Option, "length")));
                    }
                };
                self.pos += len;
                Some(Ok(Ipv4Option { kind, data: &rest[2..len] }))
            }
        }
    }
}

impl std::iter::FusedIterator for Ipv4Options<'_> {}

/// `Ok` if every option in `data` is well-formed.
pub fn check_options(data: &[u8]) -> Result<()> {
    for o in Ipv4Options::new(data) {
        o?;
    }
    Ok(())
}

/// Owned, padded option bytes built from a list of options: a convenient backing store for
/// [`crate::Ipv4Repr::options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4OptionBuf {
    bytes: [u8; MAX_OPTIONS_LEN],
    len: u8,
}

impl Ipv4OptionBuf {
    /// Emits `options` (see [`Ipv4Option::emit_list`]).
    pub fn new(options: &[Ipv4Option<'_>]) -> Result<Ipv4OptionBuf> {
        let mut bytes = [0u8; MAX_OPTIONS_LEN];
        let len = Ipv4Option::emit_list(options, &mut bytes)?;
        Ok(Ipv4OptionBuf { bytes, len: len as u8 })
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
    fn router_alert_and_padding() {
        let ra = Ipv4Option::new(Ipv4Option::ROUTER_ALERT, &[0, 0]);
        let buf = Ipv4OptionBuf::new(&[ra]).expect("fits");
        assert_eq!(buf.as_slice(), &[0x94, 0x04, 0x00, 0x00]);
        let buf =
            Ipv4OptionBuf::new(&[Ipv4Option::nop(), Ipv4Option::new(0x9e, &[7])]).expect("fits");
        assert_eq!(buf.as_slice(), &[0x01, 0x9e, 0x03, 0x07]);
        let got: Vec<_> = Ipv4Options::new(buf.as_slice()).collect::<Result<_>>().expect("ok");
        assert_eq!(got, [Ipv4Option::nop(), Ipv4Option::new(0x9e, &[7])]);
    }

    #[test]
    fn malformed_lengths() {
        for bad in [&[0x94u8][..], &[0x94, 0x01], &[0x94, 0x00, 0, 0], &[0x94, 0x05, 0, 0]] {
            let r: Result<Vec<_>> = Ipv4Options::new(bad).collect();
            assert_eq!(r, Err(WireError::malformed(Layer::Ipv4Option, "length")), "{bad:?}");
        }
        // END stops the walk: the garbage after it is padding.
        assert_eq!(Ipv4Options::new(&[1, 0, 0x94, 0x01]).count(), 1);
    }

    #[test]
    fn too_long_lists_are_refused() {
        let data = [0u8; 38];
        assert!(Ipv4OptionBuf::new(&[Ipv4Option::new(7, &data)]).is_ok());
        assert!(Ipv4OptionBuf::new(&[Ipv4Option::nop(), Ipv4Option::new(7, &data)]).is_err());
        assert!(Ipv4OptionBuf::new(&[Ipv4Option { kind: 1, data: &[1] }]).is_err());
    }
}
