//! A live spec (`latnet chameleon live`) against the Fig. 6 controller: any text gives a plan
//! whose scenario reads again, with requests for flows of it, or an error naming the file;
//! never a panic.
#![no_main]

use latnet_ctl::config::CtlConfig;
use latnet_ctl::live::live_plan;
use latnet_ctl::topo::Topology;
use latnet_ctl::Controller;
use latnet_sim::Scenario;
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

const FIG6: &str = include_str!("../../experiments/chameleon/fig6.toml");

fn controller() -> &'static Controller {
    static C: OnceLock<Controller> = OnceLock::new();
    C.get_or_init(|| {
        let t = Arc::new(Topology::from_toml("fig6.toml", FIG6).expect("fig6"));
        Controller::new(t, CtlConfig::chameleon(2).expect("config")).expect("controller")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match live_plan(controller(), "live.toml", text) {
        Err(e) => assert!(e.to_string().starts_with("live.toml"), "{e}"),
        Ok(p) => {
            let sc = Scenario::from_str_named("again", &p.scenario).expect("the plan's scenario");
            for r in &p.requests {
                assert!(sc.flows.iter().any(|f| f.name == r.flow));
                assert!(r.rate_bps > 0 && r.burst_bytes > 0 && r.deadline_ns > 0);
                assert!(r.at_ns < p.duration_ns);
                assert!(r.remove_at_ns.is_none_or(|x| x > r.at_ns && x < p.duration_ns));
            }
        }
    }
});
