//! Frames arriving at latnet-switch's core: any bytes on any interface, with any offload
//! metadata, are forwarded or counted as dropped; never a panic; time keeps going.
#![no_main]

use latnet_sim::Scenario;
use latnet_switch::core::{Offload, SwitchCore};
use latnet_units::Time;
use libfuzzer_sys::fuzz_target;

const SC: &str = r#"
[sim]
duration = "1s"
[defaults]
queue = { kind = "priority", classes = 2, limit_packets = 8 }
[defaults.link]
rate = "100Mbps"
delay = "10us"
loss = 0.1
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "s2"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "s2"
[[links]]
a = "s2"
b = "h2"
"#;

fuzz_target!(|data: &[u8]| {
    let Ok(sc) = Scenario::from_str_named("fuzz.toml", SC) else { return };
    let Ok(mut core) = SwitchCore::new(&sc, "s1") else { return };
    let mut t = 0u64;
    // Each record: [iface, flags, csum_start, csum_off, len, bytes...]
    let mut rest = data;
    while rest.len() >= 5 {
        let (iface, flags, start, off, len) =
            (rest[0] as usize % 3, rest[1], rest[2], rest[3], rest[4] as usize);
        let body = &rest[5..(5 + len).min(rest.len())];
        rest = &rest[(5 + len).min(rest.len())..];
        let offload = Offload {
            partial_csum: (flags & 1 != 0).then_some((u16::from(start), u16::from(off))),
            gso: flags & 2 != 0,
            truncated: flags & 4 != 0,
            vlan: (flags & 8 != 0).then_some((0x8100, u16::from(start) << 4 | u16::from(off))),
        };
        t += u64::from(flags) * 1000;
        let now = Time::from_nanos(t);
        core.advance(now, &mut |_, _, due| assert!(due <= now));
        core.receive(now, iface, body, offload);
    }
    core.advance(Time::MAX, &mut |_, _, _| {});
});
