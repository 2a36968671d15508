//! Run a scenario file once and print the wall time, events and per-flow TCP goodput:
//! `cargo run --release -p latnet-sim --example profile_scenario -- FILE [repeats]` (for
//! profiling; the `latnet` command is the user-facing way to run scenarios).

use latnet_sim::{Scenario, Simulator};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: profile_scenario FILE [repeats]");
        std::process::exit(2);
    };
    let repeats: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let sc = match Scenario::from_file(path.as_ref()) {
        Ok(sc) => sc,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    for _ in 0..repeats {
        let t = Instant::now();
        let r = Simulator::new(sc.clone()).run();
        let wall = t.elapsed().as_secs_f64();
        let goodput: Vec<String> = r
            .flows
            .iter()
            .filter_map(|f| f.tcp.as_ref().map(|t| format!("{:.2}", t.goodput_bps / 1e6)))
            .collect();
        eprintln!("wall {wall:.3} s, {} events, goodput Mbit/s {}", r.events, goodput.join(" "));
    }
}
