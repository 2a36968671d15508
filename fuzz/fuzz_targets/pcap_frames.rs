//! Packet captures: the record reader and the per-frame table (`latnet.read_pcap`) never panic,
//! whatever the file holds, and every row has the header's columns. The input is used as is
//! (damaged files) and as the records of a well-formed file (arbitrary frames).
#![no_main]

use latnet_sim::pcap::{frames_csv, new_capture, push, FRAMES_CSV_HEADER};
use latnet_units::Time;
use libfuzzer_sys::fuzz_target;

fn check(csv: &str) {
    let cols = FRAMES_CSV_HEADER.split(',').count();
    for line in csv.lines() {
        assert_eq!(line.split(',').count(), cols, "{line}");
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(csv) = frames_csv(data) {
        check(&csv);
    }
    let mut c = new_capture();
    for (i, frame) in data.split(|&b| b == 0xff).enumerate() {
        push(&mut c, Time::from_nanos(i as u64), frame, frame.len() as u64);
    }
    check(&frames_csv(&c).expect("a capture written by push reads back"));
});
