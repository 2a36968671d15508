//! What the host agent reads from a controller service: any bytes as an HTTP response, and any
//! JSON as a flow (`GET /flows/ID`), give a value or an error, never a panic; a flow it accepts
//! has tags a tagger can push and a match on a known destination.
#![no_main]

use latnet_switch::agent::{flow_entry, parse_response, AddressBook};
use latnet_switch::tagger::{Action, MAX_TAGS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((_, body)) = parse_response(data) {
        assert!(body.len() <= data.len());
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let mut book = AddressBook::new();
    book.insert("h3".into(), vec!["10.0.0.7".parse().expect("addr")]);
    for host in ["h2", "h3"] {
        if let Ok(Some(e)) = flow_entry(&v, host, &book) {
            assert_eq!(e.matches.len(), 1);
            assert!(e.tags.iter().all(|&t| t < 4096));
            let a = Action { tags: e.tags.clone(), dscp: Some(56), class: None };
            assert!(e.tags.len() <= MAX_TAGS && a.value().is_ok());
        }
    }
});
