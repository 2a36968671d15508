//! The host agent's reading of the kernel's rtnetlink answers: any bytes are an answer to the
//! request (acknowledged or an error) or none, and a chunk of a class dump (classes, the end, an
//! error) or none, never a panic or a read past the end. The input is the request's sequence
//! number (4 bytes) and then the answer.
#![no_main]

use latnet_switch::sys::rtnl::{parse_ack, parse_class_dump};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((seq, answer)) = data.split_first_chunk::<4>() else { return };
    let seq = u32::from_ne_bytes(*seq);
    if let Some(Err(e)) = parse_ack(answer, seq) {
        assert!(e.raw_os_error().is_some());
    }
    if let Some(Ok((classes, _))) = parse_class_dump(answer, seq) {
        // each class is one message of at least a header and a tcmsg
        assert!(classes.len() * 36 <= answer.len());
        for c in &classes {
            assert!(c.kind().len() < 16);
        }
    }
});
