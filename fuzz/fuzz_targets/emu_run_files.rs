//! The files of an emulated run that `latnet-switch results` reads back (a receiver's packet
//! log, a switch's hop and drop records; into results.json, hops.csv and packets.csv) with
//! arbitrary contents: either they are read or the result is an error naming the file and
//! line, never a panic. The first byte picks which file gets the input and whether a valid
//! header goes in front of it (so that most inputs reach the rows).
#![no_main]

use latnet_sim::Scenario;
use latnet_switch::core::{DROP_RECORDS_HEADER, HOP_RECORDS_HEADER};
use latnet_switch::results;
use latnet_switch::traffic::PACKET_LOG_HEADER;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const SCENARIO: &str = r#"
[sim]
duration = "10ms"
[defaults.link]
rate = "100Mbps"
[defaults]
queue = { kind = "lbf" }
[lbf]
upper = "mark"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "h2"
[[flows]]
name = "f"
src = "h1"
dst = "h2"
size = 500
traffic = { kind = "cbr", rate = "1Mbps" }
slo = { lower = "100us", upper = "1ms" }
"#;

fn setup() -> &'static (Scenario, std::path::PathBuf) {
    static S: OnceLock<(Scenario, std::path::PathBuf)> = OnceLock::new();
    S.get_or_init(|| {
        let sc = Scenario::from_str_named("fuzz.toml", SCENARIO).expect("valid scenario");
        let dir = std::env::temp_dir().join(format!("latnet-fuzz-emu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        (sc, dir)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let (sc, dir) = setup();
    let files = [
        ("packets-f.csv", PACKET_LOG_HEADER),
        ("hops-s1.csv", HOP_RECORDS_HEADER),
        ("drops-s1.csv", DROP_RECORDS_HEADER),
    ];
    let (name, header) = files[usize::from(pick & 3) % files.len()];
    let mut text = Vec::new();
    if pick & 4 == 0 {
        text.extend_from_slice(header.as_bytes());
    }
    text.extend_from_slice(rest);
    for (other, _) in files {
        let _ = std::fs::remove_file(dir.join(other));
    }
    std::fs::write(dir.join(name), &text).expect("write");
    match results::collect(sc, dir, 10_000_000) {
        Ok(_) => {}
        Err(e) => assert!(e.to_string().contains(name), "{e}"),
    }
    match results::hop_records(sc, dir) {
        Ok(_) => {}
        Err(e) => assert!(e.to_string().contains("hops-s1.csv"), "{e}"),
    }
    match results::packet_records(sc, dir, 1 << 40, 10_000_000) {
        Ok(_) => {}
        Err(e) => assert!(e.to_string().contains(name), "{e}"),
    }
});
