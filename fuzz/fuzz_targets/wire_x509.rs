//! The reader of TLS file dates the service and the host agents use (a revocation list's next
//! update, a certificate's end): any bytes are a date or `None`, never a panic, and a date
//! read is one of the calendar's, shown as it was read.
#![no_main]

use latnet_wire::x509::{next_update, not_after};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for due in [next_update(data), not_after(data)].into_iter().flatten() {
        // years 0000 (GeneralizedTime) to 9999: -62,167,219,200 to 253,402,300,799 seconds
        assert!((-62_167_219_200..=253_402_300_799).contains(&due.unix_secs), "{due:?}");
        assert_eq!(due.shown.len(), "YYYY-MM-DD HH:MM:SS UTC".len(), "{due:?}");
    }
});
