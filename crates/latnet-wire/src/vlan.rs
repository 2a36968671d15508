//! 802.1Q / 802.1ad tags and tag stacks.
//!
//! A tag is four bytes inserted after the source MAC: a TPID (`0x8100` for a customer tag,
//! `0x88a8` or `0x9100` for a service tag) and a TCI holding PCP (3 bits), DEI (1 bit) and VID
//! (12 bits). A frame may carry several; the first one after the MACs is the *outermost*.
//! latnet also uses stacks of up to 10 tags as source routes (Chameleon), so the functions here
//! handle any depth up to [`MAX_TAGS`] and refuse deeper stacks, which bounds the work a hostile
//! frame can cause.
//!
//! * [`VlanHeader`] is a view of one tag (TPID + TCI), [`VlanTag`] its repr;
//! * [`vlan_stack`] validates the stack of a frame once and then iterates it without allocation;
//! * [`push_vlan`] / [`pop_vlan`] add or remove the outermost tag of a `Vec<u8>` frame.
//!
//! In errors of the stack functions `need` / `have` count bytes from the start of the frame.

use crate::error::{need, Layer, Result, WireError};
use crate::ethernet::EtherType;
use crate::util::{be16, put16};

/// The deepest tag stack the functions of this module accept.
pub const MAX_TAGS: usize = 16;

/// Length of one tag.
pub const TAG_LEN: usize = 4;

/// Offset of the first TPID (or of the ethertype of an untagged frame).
const TAG_START: usize = 12;

mod field {
    pub const TPID: usize = 0;
    pub const TCI: usize = 2;
}

/// Zero-copy view of one 4-byte tag: TPID then TCI.
#[derive(Debug, Clone)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is shorter than 4 bytes.
    pub const fn new_unchecked(buffer: T) -> VlanHeader<T> {
        VlanHeader { buffer }
    }

    /// Wraps `buffer` after [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<VlanHeader<T>> {
        let v = Self::new_unchecked(buffer);
        v.check_len()?;
        Ok(v)
    }

    /// `Truncated` if the buffer is shorter than 4 bytes.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Vlan, TAG_LEN, self.buffer.as_ref().len())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Tag protocol identifier.
    #[inline]
    pub fn tpid(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), field::TPID))
    }

    /// Tag control information (PCP, DEI, VID).
    #[inline]
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (0..=7).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (0..=4095).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    /// Sets the TPID.
    pub fn set_tpid(&mut self, t: EtherType) {
        put16(self.buffer.as_mut(), field::TPID, t.0);
    }

    /// Sets the whole TCI.
    pub fn set_tci(&mut self, tci: u16) {
        put16(self.buffer.as_mut(), field::TCI, tci);
    }

    /// Sets the PCP (masked to 3 bits).
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(pcp & 7) << 13);
        self.set_tci(tci);
    }

    /// Sets the DEI bit.
    pub fn set_dei(&mut self, dei: bool) {
        let tci = (self.tci() & !0x1000) | (u16::from(dei) << 12);
        self.set_tci(tci);
    }

    /// Sets the VID (masked to 12 bits).
    pub fn set_vid(&mut self, vid: u16) {
        let tci = (self.tci() & 0xf000) | (vid & 0x0fff);
        self.set_tci(tci);
    }
}

/// One tag: the repr of [`VlanHeader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Tag protocol identifier; must satisfy [`EtherType::is_vlan_tpid`].
    pub tpid: EtherType,
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
}

impl VlanTag {
    /// A customer tag (`0x8100`) with priority 0.
    pub const fn new(vid: u16) -> VlanTag {
        VlanTag { tpid: EtherType::VLAN, pcp: 0, dei: false, vid }
    }

    /// A tag from its TPID and TCI.
    pub const fn from_tci(tpid: EtherType, tci: u16) -> VlanTag {
        VlanTag { tpid, pcp: (tci >> 13) as u8, dei: tci & 0x1000 != 0, vid: tci & 0x0fff }
    }

    /// The TCI of this tag (fields masked to their widths).
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }

    /// `Malformed` if the TPID is not a tag type, PCP exceeds 7 or VID exceeds 4095.
    pub fn check(&self) -> Result<()> {
        if !self.tpid.is_vlan_tpid() {
            return Err(WireError::malformed(Layer::Vlan, "tpid"));
        }
        if self.pcp > 7 {
            return Err(WireError::malformed(Layer::Vlan, "pcp"));
        }
        if self.vid > 0x0fff {
            return Err(WireError::malformed(Layer::Vlan, "vid"));
        }
        Ok(())
    }

    /// Reads a tag; `Malformed` if its TPID is not a tag type.
    pub fn parse<T: AsRef<[u8]>>(header: &VlanHeader<T>) -> Result<VlanTag> {
        header.check_len()?;
        let tag = VlanTag::from_tci(header.tpid(), header.tci());
        tag.check()?;
        Ok(tag)
    }

    /// Bytes [`Self::emit`] writes: 4.
    pub const fn buffer_len(&self) -> usize {
        TAG_LEN
    }

    /// The four wire bytes.
    pub fn to_bytes(&self) -> [u8; 4] {
        let [a, b] = self.tpid.0.to_be_bytes();
        let [c, d] = self.tci().to_be_bytes();
        [a, b, c, d]
    }

    /// Writes the tag.
    ///
    /// # Panics
    /// If the buffer is shorter than 4 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut VlanHeader<T>) {
        header.set_tpid(self.tpid);
        header.set_tci(self.tci());
    }
}

/// Walks the tag stack of `frame`: returns the number of tags and the inner ethertype.
///
/// The hot-path core of [`vlan_stack`] and [`crate::parse_headers`].
#[inline]
pub(crate) fn walk(frame: &[u8]) -> Result<(usize, EtherType)> {
    need(Layer::Ethernet, TAG_START + 2, frame.len())?;
    let mut off = TAG_START;
    let mut count = 0;
    loop {
        let t = EtherType(be16(frame, off));
        if !t.is_vlan_tpid() {
            return Ok((count, t));
        }
        if count == MAX_TAGS {
            return Err(WireError::unsupported(Layer::Vlan, "stack deeper than MAX_TAGS"));
        }
        // This tag and the type field after it.
        need(Layer::Vlan, off + TAG_LEN + 2, frame.len())?;
        off += TAG_LEN;
        count += 1;
    }
}

/// The validated tag stack of a frame; see [`vlan_stack`].
#[derive(Debug, Clone, Copy)]
pub struct VlanStack<'a> {
    frame: &'a [u8],
    count: usize,
    inner: EtherType,
}

impl<'a> VlanStack<'a> {
    /// Number of tags (0 for an untagged frame).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Untagged frame.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The ethertype after the last tag.
    pub fn inner_ethertype(&self) -> EtherType {
        self.inner
    }

    /// Offset of the payload after the tags and the inner ethertype.
    pub fn payload_offset(&self) -> usize {
        TAG_START + TAG_LEN * self.count + 2
    }

    /// Tag `i`, 0 being the outermost.
    pub fn get(&self, i: usize) -> Option<VlanTag> {
        if i >= self.count {
            return None;
        }
        let off = TAG_START + TAG_LEN * i;
        Some(VlanTag::from_tci(EtherType(be16(self.frame, off)), be16(self.frame, off + 2)))
    }

    /// The outermost tag.
    pub fn outer(&self) -> Option<VlanTag> {
        self.get(0)
    }

    /// The tags, outermost first.
    pub fn iter(&self) -> VlanTags<'a> {
        VlanTags { stack: *self, next: 0 }
    }
}

impl<'a> IntoIterator for VlanStack<'a> {
    type Item = VlanTag;
    type IntoIter = VlanTags<'a>;
    fn into_iter(self) -> VlanTags<'a> {
        self.iter()
    }
}

/// Iterator over a [`VlanStack`], outermost tag first.
#[derive(Debug, Clone)]
pub struct VlanTags<'a> {
    stack: VlanStack<'a>,
    next: usize,
}

impl Iterator for VlanTags<'_> {
    type Item = VlanTag;
    fn next(&mut self) -> Option<VlanTag> {
        let t = self.stack.get(self.next)?;
        self.next += 1;
        Some(t)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.stack.count - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for VlanTags<'_> {}

/// Validates the tag stack of an Ethernet frame (any depth up to [`MAX_TAGS`], each tag and the
/// inner type field present) and returns a view that iterates it without allocating.
///
/// Errors: `Truncated` (Ethernet) for a frame shorter than 14 bytes, `Truncated` (Vlan) for a
/// tag cut short, `Unsupported` (Vlan) for more than [`MAX_TAGS`] tags.
pub fn vlan_stack(frame: &[u8]) -> Result<VlanStack<'_>> {
    let (count, inner) = walk(frame)?;
    Ok(VlanStack { frame, count, inner })
}

/// Inserts `tag` as the new outermost tag, right after the MAC addresses.
///
/// Errors: the tag fails [`VlanTag::check`]; the frame's existing stack fails [`vlan_stack`];
/// the frame already holds [`MAX_TAGS`] tags (`Unsupported`). On error the frame is unchanged.
/// Allocates only if the vector lacks 4 bytes of spare capacity.
pub fn push_vlan(frame: &mut Vec<u8>, tag: VlanTag) -> Result<()> {
    tag.check()?;
    let (count, _) = walk(frame)?;
    if count >= MAX_TAGS {
        return Err(WireError::unsupported(Layer::Vlan, "stack deeper than MAX_TAGS"));
    }
    let old_len = frame.len();
    frame.extend_from_slice(&[0; TAG_LEN]);
    frame.copy_within(TAG_START..old_len, TAG_START + TAG_LEN);
    frame[TAG_START..TAG_START + TAG_LEN].copy_from_slice(&tag.to_bytes());
    Ok(())
}

/// Removes and returns the outermost tag; `Ok(None)` (frame unchanged) if the frame is untagged.
///
/// Errors: as [`vlan_stack`]: the whole stack is validated (at most [`MAX_TAGS`] tags, each one
/// and the inner type field present), so a frame `pop_vlan` accepts can always take the tag
/// back with [`push_vlan`]. On error the frame is unchanged.
pub fn pop_vlan(frame: &mut Vec<u8>) -> Result<Option<VlanTag>> {
    let (count, _) = walk(frame)?;
    if count == 0 {
        return Ok(None);
    }
    let tag = VlanTag::from_tci(EtherType(be16(frame, TAG_START)), be16(frame, TAG_START + 2));
    frame.copy_within(TAG_START + TAG_LEN.., TAG_START);
    frame.truncate(frame.len() - TAG_LEN);
    Ok(Some(tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn untagged() -> Vec<u8> {
        let mut f = vec![0xaa; 6];
        f.extend_from_slice(&[0xbb; 6]);
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0x00]);
        f
    }

    #[test]
    fn push_pop_order() {
        let orig = untagged();
        let mut f = orig.clone();
        push_vlan(&mut f, VlanTag::new(10)).expect("push");
        push_vlan(&mut f, VlanTag { tpid: EtherType::QINQ, pcp: 5, dei: true, vid: 20 })
            .expect("push");
        let s = vlan_stack(&f).expect("stack");
        assert_eq!(s.len(), 2);
        assert_eq!(s.inner_ethertype(), EtherType::IPV4);
        let vids: Vec<u16> = s.iter().map(|t| t.vid).collect();
        assert_eq!(vids, [20, 10]);
        assert_eq!(&f[12..16], &[0x88, 0xa8, 0xb0, 0x14]);
        assert_eq!(pop_vlan(&mut f).expect("pop").map(|t| t.vid), Some(20));
        assert_eq!(pop_vlan(&mut f).expect("pop"), Some(VlanTag::new(10)));
        assert_eq!(pop_vlan(&mut f).expect("pop"), None);
        assert_eq!(f, orig);
    }

    #[test]
    fn stack_depth_is_bounded() {
        let mut f = untagged();
        for i in 0..MAX_TAGS {
            push_vlan(&mut f, VlanTag::new(i as u16)).expect("push");
        }
        assert!(matches!(
            push_vlan(&mut f, VlanTag::new(99)),
            Err(WireError::Unsupported { layer: Layer::Vlan, .. })
        ));
        // A hand-made stack one deeper is refused by the walker too.
        let mut deep = f.clone();
        deep.splice(12..12, VlanTag::new(1).to_bytes());
        assert!(matches!(vlan_stack(&deep), Err(WireError::Unsupported { .. })));
        assert!(matches!(pop_vlan(&mut deep), Err(WireError::Unsupported { .. })));
    }

    #[test]
    fn bad_tags_are_refused() {
        let mut f = untagged();
        let bad = [
            VlanTag { vid: 4096, ..VlanTag::new(0) },
            VlanTag { pcp: 8, ..VlanTag::new(0) },
            VlanTag { tpid: EtherType::IPV4, ..VlanTag::new(0) },
        ];
        for t in bad {
            assert!(push_vlan(&mut f, t).is_err());
        }
        assert_eq!(f, untagged());
    }

    #[test]
    fn truncated_tags() {
        let mut f = untagged();
        push_vlan(&mut f, VlanTag::new(7)).expect("push");
        for n in 0..18 {
            let mut g = f[..n].to_vec();
            assert!(matches!(vlan_stack(&g), Err(WireError::Truncated { .. })), "{n}");
            assert!(matches!(pop_vlan(&mut g), Err(WireError::Truncated { .. })), "{n}");
            assert_eq!(g, f[..n]);
        }
    }
}
