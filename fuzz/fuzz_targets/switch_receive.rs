//! Frames arriving at latnet-switch's core: any bytes on any interface, with any offload
//! metadata, are forwarded or counted as dropped; never a panic; time keeps going. A record
//! may instead overwrite part of a scenario flow's frame (plain UDP, an LBF shim, an IPv6
//! hop-by-hop option), so that the paths of known flows are reached too: the payload's stamp,
//! the LBF forwarder, per-hop measurement.
#![no_main]

use latnet_sim::Scenario;
use latnet_switch::core::{lbf_template, Offload, SwitchCore};
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
[lbf]
upper = "mark"
[[flows]]
src = "h1"
dst = "h2"
size = 100
traffic = { kind = "cbr", rate = "1Mbps" }
[[flows]]
src = "h1"
dst = "h2"
size = 120
traffic = { kind = "cbr", rate = "1Mbps" }
slo = { lower = "10us", upper = "1ms", carry = "timestamp" }
[[flows]]
src = "h2"
dst = "h1"
size = 150
traffic = { kind = "cbr", rate = "1Mbps" }
slo = { lower = "10us", upper = "1ms", encap = "ipv6" }
"#;

/// Flow `i`'s frame as its sender builds it (headers, shim or option, zero payload).
fn template(sc: &Scenario, i: usize) -> Vec<u8> {
    let f = &sc.flows[i];
    let mut t = match lbf_template(sc, f) {
        Some((t, _)) => t,
        None => {
            let mut t = Vec::new();
            let (src, dst) = (sc.nodes[f.src].address, sc.nodes[f.dst].address);
            let mac = latnet_wire::EthernetAddress([2, 0, 0, 0, 0, 1]);
            latnet_wire::build_udp_ipv4(
                &mut t,
                mac,
                mac,
                src,
                dst,
                0,
                latnet_wire::Ecn::NotEct,
                64,
                f.src_port,
                f.dst_port,
                f.size as usize - 42,
            )
            .expect("a valid frame");
            t
        }
    };
    t.resize(f.size as usize, 0);
    t
}

fuzz_target!(|data: &[u8]| {
    let Ok(sc) = Scenario::from_str_named("fuzz.toml", SC) else { return };
    let Ok(mut core) = SwitchCore::new(&sc, "s1") else { return };
    let templates: Vec<Vec<u8>> = (0..sc.flows.len()).map(|i| template(&sc, i)).collect();
    let mut frame = Vec::new();
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
        // flag 16: `body` overwrites flow `start % 3`'s frame from octet `off` (same length)
        let body = if flags & 16 != 0 {
            frame.clear();
            frame.extend_from_slice(&templates[usize::from(start) % templates.len()]);
            let at = usize::from(off).min(frame.len());
            let n = body.len().min(frame.len() - at);
            frame[at..at + n].copy_from_slice(&body[..n]);
            &frame[..]
        } else {
            body
        };
        core.receive(now, iface, body, offload);
    }
    core.advance(Time::MAX, &mut |_, _, _| {});
});
