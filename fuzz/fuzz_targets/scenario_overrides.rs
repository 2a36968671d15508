//! `--set KEY=VALUE` on a scenario: any key, value and scenario text either give TOML that reads
//! again or an error naming the file (and, for a bad key, the key); never a panic. The input is
//! the key's line, the value's line, then the scenario text.
#![no_main]

use latnet_sim::scenario::apply_overrides;
use latnet_sim::Scenario;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.splitn(3, '\n');
    let (Some(key), Some(value), Some(src)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let sets = [(key.to_owned(), value.to_owned())];
    match apply_overrides("fuzz.toml", src, &sets) {
        Err(e) => assert!(e.to_string().starts_with("fuzz.toml"), "{e}"),
        Ok(out) => {
            // what was written reads again as TOML, and as a scenario or a named error
            assert!(apply_overrides("fuzz.toml", &out, &[]).is_ok(), "{out}");
            if let Err(e) = Scenario::from_str_named("fuzz.toml", &out) {
                assert!(e.to_string().starts_with("fuzz.toml"), "{e}");
            }
        }
    }
});
