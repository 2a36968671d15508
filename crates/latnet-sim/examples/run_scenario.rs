//! Run a scenario file from Rust and print the JSON summary (no Python needed).
//!
//! `cargo run --release -p latnet-sim --example run_scenario -- experiments/demo.toml [SEED]`

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: run_scenario SCENARIO.toml [SEED]");
        return ExitCode::from(2);
    };
    let seed = match args.next().map(|s| s.parse::<u64>()) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            eprintln!("run_scenario: SEED: {e}");
            return ExitCode::from(2);
        }
    };
    match latnet_sim::run_file(path.as_ref(), seed) {
        Ok(r) => {
            #[allow(clippy::print_stdout)]
            {
                println!("{}", r.to_json());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("run_scenario: {e}");
            ExitCode::from(2)
        }
    }
}
