//! The scenario loader: any text either validates or gets a located error, never a panic; a
//! scenario that validates builds a network and runs (clamped to a few packets) without panic.
#![no_main]

use latnet_sim::{Scenario, Simulator};
use latnet_units::Duration;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Scenario::from_str_named("fuzz.toml", text) {
        Err(e) => assert!(e.to_string().starts_with("fuzz.toml")),
        Ok(mut sc) => {
            sc.sim.duration = sc.sim.duration.min(Duration::from_micros(200));
            sc.sim.drain = sc.sim.drain.min(Duration::from_micros(200));
            for f in &mut sc.flows {
                f.count = Some(f.count.unwrap_or(50).min(50));
            }
            let r = Simulator::new(sc).run();
            for f in &r.flows {
                assert_eq!(f.sent, f.received + f.dropped + f.in_flight_at_end);
            }
        }
    }
});
