//! The host agent's reading of the kernel's rtnetlink answers: any bytes are an answer to the
//! request (acknowledged or an error) or none, never a panic or a read past the end. The
//! input is the request's sequence number (4 bytes) and then the answer.
#![no_main]

use latnet_switch::sys::rtnl::parse_ack;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((seq, answer)) = data.split_first_chunk::<4>() else { return };
    if let Some(Err(e)) = parse_ack(answer, u32::from_ne_bytes(*seq)) {
        assert!(e.raw_os_error().is_some());
    }
});
