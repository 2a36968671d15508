//! IPv6 extension headers (RFC 8200 section 4): the walk to the upper-layer header, a generic
//! extension-header view, and the TLV options of hop-by-hop and destination-options headers.
//!
//! * [`find_upper_layer`] walks hop-by-hop (0), routing (43), fragment (44), destination
//!   options (60) and AH (51) headers, at most [`MAX_EXT_HEADERS`] of them, and returns the
//!   upper-layer protocol and its offset. Extension headers are headers: they must be present
//!   in the buffer, and must fit within the payload length.
//! * [`Ipv6ExtHeader`] views one header of the `(len + 1) * 8` family (hop-by-hop, routing,
//!   destination options); [`Ipv6HopByHopRepr`] is the repr of a hop-by-hop or
//!   destination-options header.
//! * [`Ipv6Options`] iterates option TLVs (padding included) and [`Ipv6OptionsWriter`] emits
//!   them with alignment and final padding to a multiple of 8 bytes.
//!
//! # Adding an option type
//!
//! Implement [`Ipv6OptionData`] for a small struct (its type number, alignment, how to parse and
//! write its data), as [`RouterAlert`] does. Then [`Ipv6Option::decode`] reads it from a parsed
//! option and [`Ipv6OptionsWriter::push`] writes it. Nothing else needs to change.

use crate::error::{need, Layer, Result, WireError};
use crate::ip::protocol;
use crate::ipv6;
use crate::util::{be16, clamped, put16};

/// Most extension headers [`find_upper_layer`] walks before giving up (`Unsupported`).
pub const MAX_EXT_HEADERS: usize = 8;

/// Where the upper-layer header of an IPv6 packet starts; see [`find_upper_layer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpperLayer {
    /// Upper-layer protocol (the last next-header value).
    pub protocol: u8,
    /// Offset of the upper-layer header from the start of the IPv6 header.
    pub offset: usize,
    /// Number of extension headers walked.
    pub ext_headers: u8,
    /// The packet is a fragment other than the first: what follows is not an upper-layer
    /// header.
    pub later_fragment: bool,
}

/// Walks the extension headers of the IPv6 packet starting at `packet[0]`.
///
/// Errors: `Truncated` if the fixed header or an extension header is cut short,
/// `Malformed` (Ipv6ExtHeader) for a hop-by-hop header that is not first, `Malformed` (Ipv6,
/// `payload_len`) if an extension header runs past the payload length, `Unsupported` past
/// [`MAX_EXT_HEADERS`] headers. The version is not checked.
pub fn find_upper_layer(packet: &[u8]) -> Result<UpperLayer> {
    let len = packet.len();
    need(Layer::Ipv6, ipv6::HEADER_LEN, len)?;
    let end = ipv6::HEADER_LEN + usize::from(be16(packet, 4));
    let mut nh = packet[6];
    let mut off = ipv6::HEADER_LEN;
    let mut count = 0usize;
    while matches!(
        nh,
        protocol::HOP_BY_HOP
            | protocol::IPV6_ROUTE
            | protocol::IPV6_FRAG
            | protocol::IPV6_OPTS
            | protocol::AH
    ) {
        if nh == protocol::HOP_BY_HOP && count != 0 {
            return Err(WireError::malformed(Layer::Ipv6ExtHeader, "hop-by-hop not first"));
        }
        if count == MAX_EXT_HEADERS {
            return Err(WireError::unsupported(Layer::Ipv6ExtHeader, "more than MAX_EXT_HEADERS"));
        }
        need(Layer::Ipv6ExtHeader, off + 2, len)?;
        let hl = match nh {
            protocol::IPV6_FRAG => 8,
            protocol::AH => (usize::from(packet[off + 1]) + 2) * 4,
            _ => (usize::from(packet[off + 1]) + 1) * 8,
        };
        need(Layer::Ipv6ExtHeader, off + hl, len)?;
        if off + hl > end {
            return Err(WireError::malformed(Layer::Ipv6, "payload_len"));
        }
        let later_fragment = nh == protocol::IPV6_FRAG && be16(packet, off + 2) & 0xfff8 != 0;
        nh = packet[off];
        off += hl;
        count += 1;
        if later_fragment {
            return Ok(UpperLayer {
                protocol: nh,
                offset: off,
                ext_headers: count as u8,
                later_fragment: true,
            });
        }
    }
    Ok(UpperLayer { protocol: nh, offset: off, ext_headers: count as u8, later_fragment: false })
}

/// Zero-copy view of a hop-by-hop, routing or destination-options header
/// (`length = (hdr_ext_len + 1) * 8`).
#[derive(Debug, Clone)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    /// Wraps `buffer` without checks; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Ipv6ExtHeader<T> {
        Ipv6ExtHeader { buffer }
    }

    /// Wraps `buffer` after [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv6ExtHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// `Truncated` unless the whole header (per its length field) is present.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need(Layer::Ipv6ExtHeader, 2, len)?;
        need(Layer::Ipv6ExtHeader, self.header_len(), len)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Next header.
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Header length in bytes.
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[1]) + 1) * 8
    }

    /// The bytes after next-header and length: the options of a hop-by-hop or destination
    /// header.
    #[inline]
    pub fn data(&self) -> &[u8] {
        clamped(self.buffer.as_ref(), 2, self.header_len())
    }

    /// Iterator over the options (for hop-by-hop and destination-options headers).
    pub fn options_iter(&self) -> Ipv6Options<'_> {
        Ipv6Options::new(self.data())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6ExtHeader<&'a T> {
    /// [`Ipv6ExtHeader::data`] with the lifetime of the underlying buffer.
    pub fn data_ref(&self) -> &'a [u8] {
        let d: &'a [u8] = self.buffer.as_ref();
        clamped(d, 2, self.header_len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6ExtHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    /// Sets the length field from a byte length (a multiple of 8, at least 8).
    pub fn set_header_len(&mut self, bytes: usize) {
        self.buffer.as_mut()[1] = (bytes / 8).saturating_sub(1) as u8;
    }

    /// Mutable option bytes.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        crate::util::clamped_mut(self.buffer.as_mut(), 2, hl)
    }
}

/// The fields of a hop-by-hop (or destination-options) header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6HopByHopRepr<'a> {
    /// Next header.
    pub next_header: u8,
    /// Raw option bytes, padding included: `2 + options.len()` is a multiple of 8.
    pub options: &'a [u8],
}

impl<'a> Ipv6HopByHopRepr<'a> {
    /// Reads a header and validates its options.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        header: &Ipv6ExtHeader<&'a T>,
    ) -> Result<Ipv6HopByHopRepr<'a>> {
        header.check_len()?;
        let options = header.data_ref();
        for o in Ipv6Options::new(options) {
            o?;
        }
        Ok(Ipv6HopByHopRepr { next_header: header.next_header(), options })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        2 + self.options.len()
    }

    /// `Ok` if the header length is a multiple of 8 and at most 2048.
    pub fn check(&self) -> Result<()> {
        if self.buffer_len() % 8 != 0 || self.buffer_len() > 2048 {
            return Err(WireError::malformed(Layer::Ipv6ExtHeader, "length"));
        }
        Ok(())
    }

    /// Writes the header.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Self::buffer_len`] or [`Self::check`] fails.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Ipv6ExtHeader<T>) {
        assert!(self.check().is_ok(), "Ipv6HopByHopRepr::emit: bad length");
        let d = header.buffer.as_mut();
        d[0] = self.next_header;
        d[1] = (self.buffer_len() / 8 - 1) as u8;
        d[2..self.buffer_len()].copy_from_slice(self.options);
    }
}

/// What a node that does not recognise an option must do: the two high bits of its type
/// (RFC 8200 section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnknownOptionAction {
    /// `00`: skip the option.
    Skip,
    /// `01`: discard the packet.
    Discard,
    /// `10`: discard and send ICMP Parameter Problem.
    DiscardSendIcmp,
    /// `11`: discard and send ICMP unless the destination is multicast.
    DiscardSendIcmpUnlessMulticast,
}

/// One option TLV. Pad1 is `kind 0` with empty data (a single byte on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Option<'a> {
    /// Option type.
    pub kind: u8,
    /// Option data (without type and length octets).
    pub data: &'a [u8],
}

impl<'a> Ipv6Option<'a> {
    /// Pad1.
    pub const PAD1: u8 = 0;
    /// PadN.
    pub const PADN: u8 = 1;
    /// Router alert (RFC 2711).
    pub const ROUTER_ALERT: u8 = 5;
    /// Jumbo payload (RFC 2675).
    pub const JUMBO: u8 = 0xc2;

    /// A TLV option.
    pub const fn new(kind: u8, data: &'a [u8]) -> Ipv6Option<'a> {
        Ipv6Option { kind, data }
    }

    /// Action required of a node that does not recognise this option type.
    pub const fn action(&self) -> UnknownOptionAction {
        match self.kind >> 6 {
            0 => UnknownOptionAction::Skip,
            1 => UnknownOptionAction::Discard,
            2 => UnknownOptionAction::DiscardSendIcmp,
            _ => UnknownOptionAction::DiscardSendIcmpUnlessMulticast,
        }
    }

    /// The third-highest bit: option data may change en route.
    pub const fn may_change(&self) -> bool {
        self.kind & 0x20 != 0
    }

    /// Pad1 or PadN.
    pub const fn is_padding(&self) -> bool {
        self.kind == Self::PAD1 || self.kind == Self::PADN
    }

    /// Wire length (1 for Pad1, else 2 + data).
    pub const fn buffer_len(&self) -> usize {
        if self.kind == Self::PAD1 {
            1
        } else {
            2 + self.data.len()
        }
    }

    /// Decodes this option as `O`: `None` if the type differs, `Some(Err)` if the data is
    /// malformed for `O`.
    pub fn decode<O: Ipv6OptionData<'a>>(&self) -> Option<Result<O>> {
        (self.kind == O::KIND).then(|| O::parse(self.data))
    }
}

/// A typed option: implement this to add an option type (see the module docs).
pub trait Ipv6OptionData<'a>: Sized {
    /// Option type octet.
    const KIND: u8;
    /// Alignment requirement `xn + y` as `(x, y)` with `y < x`, counted from the start of the
    /// extension header (RFC 8200 section 4.2).
    const ALIGN: (usize, usize) = (1, 0);
    /// Reads the option from its data bytes.
    fn parse(data: &'a [u8]) -> Result<Self>;
    /// Length of the data bytes (at most 255).
    fn data_len(&self) -> usize;
    /// Writes the data bytes; `buf.len() == self.data_len()`.
    fn emit_data(&self, buf: &mut [u8]);
}

/// Router alert option (RFC 2711): a 16-bit value (0 = MLD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouterAlert(pub u16);

impl Ipv6OptionData<'_> for RouterAlert {
    const KIND: u8 = Ipv6Option::ROUTER_ALERT;
    const ALIGN: (usize, usize) = (2, 0);

    fn parse(data: &[u8]) -> Result<RouterAlert> {
        match data {
            [a, b] => Ok(RouterAlert(u16::from_be_bytes([*a, *b]))),
            _ => Err(WireError::malformed(Layer::Ipv6Option, "router alert length")),
        }
    }

    fn data_len(&self) -> usize {
        2
    }

    fn emit_data(&self, buf: &mut [u8]) {
        put16(buf, 0, self.0);
    }
}

/// Iterator over the option TLVs of a hop-by-hop or destination-options header, padding
/// included. A missing length octet or a length running past the header is `Malformed`; the
/// iterator stops after the first error.
#[derive(Debug, Clone)]
pub struct Ipv6Options<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Ipv6Options<'a> {
    /// Iterates the option area `data` (the header bytes after next-header and length).
    pub const fn new(data: &'a [u8]) -> Ipv6Options<'a> {
        Ipv6Options { data, pos: 0 }
    }
}

impl<'a> Iterator for Ipv6Options<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.data.get(self.pos..)?;
        let (&kind, _) = rest.split_first()?;
        if kind == Ipv6Option::PAD1 {
            self.pos += 1;
            return Some(Ok(Ipv6Option { kind, data: &[] }));
        }
        match rest.get(1) {
            Some(&l) if 2 + usize::from(l) <= rest.len() => {
                let n = 2 + usize::from(l);
                self.pos += n;
                Some(Ok(Ipv6Option { kind, data: &rest[2..n] }))
            }
            _ => {
                self.pos = self.data.len();
                Some(Err(WireError::malformed(Layer::Ipv6Option, "length")))
            }
        }
    }
}

impl std::iter::FusedIterator for Ipv6Options<'_> {}

/// Writes options into the option area of a hop-by-hop or destination-options header, inserting
/// padding for alignment, and pads the header to a multiple of 8 bytes in [`Self::finish`].
#[derive(Debug)]
pub struct Ipv6OptionsWriter<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl<'b> Ipv6OptionsWriter<'b> {
    /// Writes into `buf`, the option area: byte 0 of `buf` is byte 2 of the header.
    pub fn new(buf: &'b mut [u8]) -> Ipv6OptionsWriter<'b> {
        Ipv6OptionsWriter { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    /// Nothing written yet.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    fn room(&mut self, n: usize) -> Result<&mut [u8]> {
        let have = self.buf.len() - self.pos;
        if n > have {
            return Err(WireError::truncated(Layer::Ipv6Option, self.pos + n, self.buf.len()));
        }
        let start = self.pos;
        self.pos += n;
        Ok(&mut self.buf[start..start + n])
    }

    /// Writes `n` bytes of padding (Pad1 for one byte, PadN otherwise).
    pub fn pad(&mut self, mut n: usize) -> Result<()> {
        while n > 0 {
            let chunk = n.min(257);
            let out = self.room(chunk)?;
            out.fill(0);
            if chunk > 1 {
                out[0] = Ipv6Option::PADN;
                out[1] = (chunk - 2) as u8;
            }
            n -= chunk;
        }
        Ok(())
    }

    fn align(&mut self, (x, y): (usize, usize)) -> Result<()> {
        if x <= 1 {
            return Ok(());
        }
        let at = 2 + self.pos; // offset from the start of the extension header
        let pad = (y % x + x - at % x) % x;
        self.pad(pad)
    }

    /// Writes a generic option (no alignment). `Malformed` if the data exceeds 255 bytes or a
    /// Pad1 carries data.
    pub fn push_raw(&mut self, option: Ipv6Option<'_>) -> Result<()> {
        if option.data.len() > 255 || (option.kind == Ipv6Option::PAD1 && !option.data.is_empty()) {
            return Err(WireError::malformed(Layer::Ipv6Option, "length"));
        }
        let out = self.room(option.buffer_len())?;
        out[0] = option.kind;
        if option.kind != Ipv6Option::PAD1 {
            out[1] = option.data.len() as u8;
            out[2..].copy_from_slice(option.data);
        }
        Ok(())
    }

    /// Writes a typed option, padding first to its alignment.
    pub fn push<'x, O: Ipv6OptionData<'x>>(&mut self, option: &O) -> Result<()> {
        let n = option.data_len();
        if n > 255 {
            return Err(WireError::malformed(Layer::Ipv6Option, "length"));
        }
        self.align(O::ALIGN)?;
        let out = self.room(2 + n)?;
        out[0] = O::KIND;
        out[1] = n as u8;
        option.emit_data(&mut out[2..]);
        Ok(())
    }

    /// Pads so that the header (2 + options) is a multiple of 8 bytes; returns the option-area
    /// length.
    pub fn finish(mut self) -> Result<usize> {
        let pad = (8 - (2 + self.pos) % 8) % 8;
        self.pad(pad)?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_alert_is_aligned_and_padded() {
        let mut area = [0xffu8; 14];
        let mut w = Ipv6OptionsWriter::new(&mut area);
        w.push(&RouterAlert(0)).expect("room");
        let n = w.finish().expect("room");
        // RFC 2711 / MLD: router alert then PadN of 0 data bytes (header of 8 bytes).
        assert_eq!(&area[..n], &[0x05, 0x02, 0x00, 0x00, 0x01, 0x00]);
        let opts: Vec<_> = Ipv6Options::new(&area[..n]).collect::<Result<_>>().expect("ok");
        assert_eq!(opts[0].decode::<RouterAlert>(), Some(Ok(RouterAlert(0))));
        assert!(opts[1].is_padding());
        assert_eq!(opts[0].action(), UnknownOptionAction::Skip);
    }

    #[test]
    fn alignment_inserts_pad1() {
        let mut area = [0xffu8; 22];
        let mut w = Ipv6OptionsWriter::new(&mut area);
        w.push_raw(Ipv6Option::new(0x3e, &[9])).expect("room"); // header offset 2..5
        w.push(&RouterAlert(7)).expect("room"); // needs 2n: one Pad1 at 5
        let n = w.finish().expect("room");
        let expect = [0x3e, 0x01, 0x09, 0x00, 0x05, 0x02, 0x00, 0x07, 0x01, 0x04, 0, 0, 0, 0];
        assert_eq!(&area[..n], &expect);
        assert_eq!((2 + n) % 8, 0);
    }

    #[test]
    fn malformed_option_lengths() {
        for bad in [&[0x05u8][..], &[0x05, 0x03, 0, 0]] {
            let r: Result<Vec<_>> = Ipv6Options::new(bad).collect();
            assert_eq!(r, Err(WireError::malformed(Layer::Ipv6Option, "length")));
        }
    }
}
