//! Instructions of table entries and their execution on a packet.
//!
//! An entry's instruction list runs in order. `SetField`, `SetQueue`, `PushTag` and `PopTag`
//! act at once; `Output` and `Drop` set the packet's fate (the last one wins); `GotoTable` /
//! `GotoDirect` end the list and continue at a later table (gotos point forward, checked when
//! the entry is installed, so a pipeline always terminates). A list that ends without a goto
//! ends the pipeline: the packet leaves on its output port, or is dropped.

use super::field::{Field, Space, META_BYTES};
use super::key::{write_bits, Key};

/// Table identifier (0 is where every packet starts).
pub type TableId = u8;

/// One instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    /// Continue at this table (must be later than the current one).
    GotoTable(TableId),
    /// Continue at the linear table `table`, at entry `index`.
    GotoDirect {
        /// A linear table.
        table: TableId,
        /// Its entry.
        index: u32,
    },
    /// Overwrite a field with a value (the field's first `length` bits of `value`).
    SetField {
        /// Where.
        field: Field,
        /// What.
        value: Key,
    },
    /// Put the packet in this egress queue class (0 is the highest priority).
    SetQueue(u8),
    /// Push an 802.1Q-style tag (`tpid`, `tci`) after the MAC addresses.
    PushTag {
        /// Tag protocol identifier (0x8100, 0x88a8).
        tpid: u16,
        /// Tag control information (PCP, DEI, VID).
        tci: u16,
    },
    /// Pop the outermost tag, if any.
    PopTag,
    /// Send the packet out of this port.
    Output(u16),
    /// Drop the packet.
    Drop,
}

impl Instruction {
    /// The table this instruction jumps to, if it is a goto.
    pub fn goto_target(&self) -> Option<TableId> {
        match self {
            Instruction::GotoTable(t) | Instruction::GotoDirect { table: t, .. } => Some(*t),
            _ => None,
        }
    }
}

/// The packet as the pipeline sees it: bytes, metadata, and what has been decided so far.
#[derive(Debug)]
pub struct Frame<'a> {
    /// Packet bytes (instructions may change them).
    pub data: &'a mut Vec<u8>,
    /// Metadata area.
    pub meta: [u8; META_BYTES],
    /// Bytes on the wire (for byte counters).
    pub wire_len: u32,
}

/// Where the packet goes after an instruction list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// To a table.
    Table(TableId),
    /// To a linear table's entry.
    Direct(TableId, u32),
    /// Nowhere: the pipeline ends.
    Done,
}

/// The fate being built up while instructions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fate {
    /// Output port, if one was chosen.
    pub output: Option<u16>,
    /// Dropped by an instruction.
    pub dropped: bool,
    /// Queue class, if set.
    pub queue: Option<u8>,
}

/// Run `list` on `frame`.
#[inline]
pub fn execute(list: &[Instruction], frame: &mut Frame<'_>, fate: &mut Fate) -> Next {
    for ins in list {
        match ins {
            Instruction::GotoTable(t) => return Next::Table(*t),
            Instruction::GotoDirect { table, index } => return Next::Direct(*table, *index),
            Instruction::SetField { field, value } => {
                let (off, len) = (usize::from(field.offset), usize::from(field.length));
                match field.space {
                    Space::Packet => write_bits(frame.data, off, len, value, 0),
                    Space::Meta => write_bits(&mut frame.meta, off, len, value, 0),
                }
            }
            Instruction::SetQueue(q) => fate.queue = Some(*q),
            Instruction::PushTag { tpid, tci } => {
                if frame.data.len() >= 12 {
                    let mut tag = [0u8; 4];
                    tag[..2].copy_from_slice(&tpid.to_be_bytes());
                    tag[2..].copy_from_slice(&tci.to_be_bytes());
                    frame.data.splice(12..12, tag);
                    frame.wire_len = frame.wire_len.saturating_add(4);
                }
            }
            Instruction::PopTag => {
                if frame.data.len() >= 18 {
                    let tpid = u16::from_be_bytes([frame.data[12], frame.data[13]]);
                    if matches!(tpid, 0x8100 | 0x88a8 | 0x9100) {
                        frame.data.drain(12..16);
                        frame.wire_len = frame.wire_len.saturating_sub(4);
                    }
                }
            }
            Instruction::Output(p) => {
                fate.output = Some(*p);
                fate.dropped = false;
            }
            Instruction::Drop => {
                fate.dropped = true;
                fate.output = None;
            }
        }
    }
    Next::Done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_then_pop_restores_the_frame() {
        let mut data: Vec<u8> = (0..40).collect();
        let orig = data.clone();
        let mut f = Frame { data: &mut data, meta: [0; META_BYTES], wire_len: 40 };
        let mut fate = Fate::default();
        let next = execute(
            &[Instruction::PushTag { tpid: 0x8100, tci: 7 }, Instruction::SetQueue(2)],
            &mut f,
            &mut fate,
        );
        assert_eq!(next, Next::Done);
        assert_eq!(f.data[12..16], [0x81, 0x00, 0x00, 0x07]);
        assert_eq!(f.wire_len, 44);
        execute(&[Instruction::PopTag, Instruction::Output(3)], &mut f, &mut fate);
        assert_eq!(*f.data, orig);
        assert_eq!(fate, Fate { output: Some(3), dropped: false, queue: Some(2) });
    }

    #[test]
    fn goto_ends_the_list() {
        let mut data = vec![0u8; 20];
        let mut f = Frame { data: &mut data, meta: [0; META_BYTES], wire_len: 20 };
        let mut fate = Fate::default();
        let n = execute(&[Instruction::GotoTable(3), Instruction::Drop], &mut f, &mut fate);
        assert_eq!(n, Next::Table(3));
        assert!(!fate.dropped);
    }
}
