//! An LBF switch fed arbitrary frames: the frame either is dropped with a counted reason or is
//! forwarded, never a panic. Half of the inputs are edits of a valid LBF frame (so the block
//! parser and the budget arithmetic see near-valid blocks with extreme values), half raw bytes.
#![no_main]

use latnet_dataplane::{Meta, Packet};
use latnet_sim::{Scenario, Simulator};
use latnet_units::Time;
use libfuzzer_sys::fuzz_target;

const SCENARIO: &str = r#"
[sim]
duration = "1ms"
drain = "50ms"
switching = "cut-through"
[defaults.link]
rate = "100Mbps"
delay = "10us"
[defaults]
queue = { kind = "lbf-dynamic", limit_packets = 100 }
[lbf]
upper = "mark"
best_effort_upper = "10ms"
[[nodes]]
name = "a"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "s2"
kind = "switch"
lbf = { upper = "drop", expire = "hop-budget", budget = "skew", damper_bound = "5us" }
[[nodes]]
name = "b"
kind = "host"
[[links]]
a = "a"
b = "s1"
[[links]]
a = "s1"
b = "s2"
[[links]]
a = "s2"
b = "b"
[[flows]]
src = "a"
dst = "b"
size = 300
count = 1
traffic = { kind = "cbr", rate = "1Mbps" }
slo = { lower = "50us", upper = "1ms" }
"#;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let sc = Scenario::from_str_named("fuzz.toml", SCENARIO).expect("valid scenario");
    let mut sim = Simulator::new(sc.clone());
    let frame = if sel & 1 == 0 {
        rest.to_vec()
    } else {
        let (mut f, off) = latnet_sim::lbf::template(
            0,
            3,
            sc.nodes[0].address,
            sc.nodes[3].address,
            0,
            1,
            2,
            300,
            &sc.flows[0].slo.expect("slo"),
        )
        .expect("template");
        // Overwrite the block (and what follows) with the input.
        for (i, b) in rest.iter().enumerate() {
            if let Some(x) = f.get_mut(off - 4 + i) {
                *x = *b;
            }
        }
        if sel & 2 != 0 {
            f.truncate(off + usize::from(sel >> 2));
        }
        f
    };
    let len = frame.len() as u32;
    let meta = Meta { id: 1 << 40, flow: 0, ..Meta::default() };
    let port = sim.topology().node_ports[0][0];
    sim.inject(Time::from_nanos(1), port, Packet::new(frame, 300u32.saturating_sub(len), meta));
    let r = sim.run();
    let f = &r.flows[0];
    // The injected packet is counted for flow 0 as received or dropped (it was not "sent").
    assert_eq!(f.sent + 1, f.received + f.dropped + f.in_flight_at_end);
});
