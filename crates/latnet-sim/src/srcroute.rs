//! Source routing by tag stacks (Chameleon, CoNEXT 2020, §3.4 and §4.2).
//!
//! The source host pushes one 802.1Q tag per switch on the path (outermost first). A switch
//! reads the outermost tag `t`, pops it, and enqueues the frame at its local port
//! `t / base` in queue `t % base` (the packet's priority for the strict-priority scheduler).
//! Nothing else is looked at: no FIB, no TTL. A frame without a tag, or whose tag names a port
//! the switch does not have, is dropped as `no-route`; a frame whose tag stack does not parse
//! is dropped as `malformed`. A frame that reaches a host with tags left (a stack longer than
//! the path) is dropped there as `no-route`, as a host without VLAN interfaces discards it.

use crate::switch::{Forward, SwitchCtx};
use latnet_dataplane::{DropReason, Packet};

/// Pop the outer tag of `pkt` and decide its egress port and queue (`base` > 0).
#[inline]
pub fn tag_forward(cx: &SwitchCtx<'_>, pkt: &mut Packet, base: u16) -> Forward {
    let tag = match latnet_wire::pop_vlan(&mut pkt.data) {
        Ok(Some(t)) => t,
        Ok(None) => return Forward::Drop(DropReason::NoRoute),
        Err(_) => return Forward::Drop(DropReason::Malformed),
    };
    let base = base.max(1);
    let local = usize::from(tag.vid / base);
    let queue = (tag.vid % base).min(u16::from(u8::MAX)) as u8;
    match cx.topo.node_ports.get(cx.node).and_then(|ps| ps.get(local)) {
        Some(&port) => {
            pkt.meta.priority = queue;
            Forward::Port(port)
        }
        None => Forward::Drop(DropReason::NoRoute),
    }
}

#[cfg(test)]
mod tests {
    use crate::{Scenario, Simulator};

    /// h1 - s1, s1 - s2, s1 - s3, s2 - s4, s3 - s4, s4 - h2: two paths from s1 to s4.
    fn diamond(flow: &str) -> String {
        format!(
            r#"
[sim]
duration = "10ms"
drain = "10ms"
[defaults]
queue = {{ kind = "priority", classes = 4 }}
[defaults.link]
rate = "1Gbps"
delay = "1us"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "h2"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
forwarding = {{ kind = "tag-stack" }}
[[nodes]]
name = "s2"
kind = "switch"
forwarding = {{ kind = "tag-stack", base = 10 }}
[[nodes]]
name = "s3"
kind = "switch"
forwarding = {{ kind = "tag-stack" }}
[[nodes]]
name = "s4"
kind = "switch"
forwarding = {{ kind = "tag-stack" }}
[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "s2"
[[links]]
a = "s1"
b = "s3"
[[links]]
a = "s2"
b = "s4"
[[links]]
a = "s3"
b = "s4"
[[links]]
a = "s4"
b = "h2"
{flow}
"#
        )
    }

    fn run(flow: &str) -> crate::Results {
        let sc = Scenario::from_str_named("diamond.toml", &diamond(flow))
            .unwrap_or_else(|e| panic!("{e}"));
        Simulator::new(sc).run()
    }

    #[test]
    fn tags_choose_port_and_queue_at_every_switch() {
        // s1: port 2 (to s3) queue 1; s3: port 1 (to s4) queue 3; s4: port 2 (to h2) queue 0
        let r = run(r#"
[[flows]]
src = "h1"
dst = "h2"
size = 500
count = 10
tags = [21, 13, 20]
traffic = { kind = "cbr", rate = "10Mbps" }
"#);
        let f = &r.flows[0];
        assert_eq!((f.sent, f.received), (10, 10), "{:?}", f.drops);
        let via: Vec<_> = f.hops.iter().map(|h| (h.node.as_str(), h.toward.as_str())).collect();
        assert_eq!(via, [("h1", "s1"), ("s1", "s3"), ("s3", "s4"), ("s4", "h2")]);
        let port = |n: &str, p: &str| {
            r.ports
                .iter()
                .find(|x| x.node == n && x.peer == p)
                .unwrap_or_else(|| panic!("{n}->{p}"))
        };
        assert_eq!(port("s1", "s3").classes[1].enqueued, 10);
        assert_eq!(port("s3", "s4").classes[3].enqueued, 10);
        assert_eq!(port("s4", "h2").classes[0].enqueued, 10);
        assert_eq!(port("s1", "s2").tx_packets, 0);
        // every tag was popped: the frame arrives with its 42 header bytes + payload, 12 B shorter
        assert_eq!(port("s4", "h2").tx_bytes, 10 * (500 - 12));
    }

    /// A re-tag moves the flow at the instant it names: the packets created before it take the
    /// first stack's path (over s2), those created at or after it the second's (over s3), the
    /// frames keep their size, and the packet records say which packet went which way.
    #[test]
    fn retag_moves_the_flow_at_its_instant() {
        // 10 Mbit/s of 500 B frames: one every 400 us, the first at 0; re-tag at 2 ms
        let r = run(r#"
[output]
packets = true
[[flows]]
src = "h1"
dst = "h2"
size = 500
count = 10
tags = [10, 11, 20]
retag = [{ at = "2ms", tags = [21, 13, 20] }]
traffic = { kind = "cbr", rate = "10Mbps" }
"#);
        let f = &r.flows[0];
        assert_eq!((f.sent, f.received), (10, 10), "{:?}", f.drops);
        let port = |n: &str, p: &str| {
            r.ports
                .iter()
                .find(|x| x.node == n && x.peer == p)
                .unwrap_or_else(|| panic!("{n}->{p}"))
        };
        // created at 0, 0.4, ..., 1.6 ms: five over s2; 2.0 .. 3.6 ms: five over s3
        assert_eq!(port("s1", "s2").tx_packets, 5);
        assert_eq!(port("s1", "s3").tx_packets, 5);
        assert_eq!(port("s3", "s4").classes[3].enqueued, 5);
        assert_eq!(port("s4", "h2").tx_bytes, 10 * (500 - 12));
        let log = r.log.as_ref().unwrap_or_else(|| panic!("no packet log"));
        let s2 = r.nodes.iter().position(|n| n.name == "s2").unwrap_or_else(|| panic!("s2"));
        for h in log.hops.iter().filter(|h| h.hop == 1) {
            let p = log.packets.iter().find(|p| p.seq == h.seq).unwrap_or_else(|| panic!("seq"));
            let via_s2 = r.ports[h.port as usize].peer == r.nodes[s2].name;
            assert_eq!(via_s2, p.created_ns < 2_000_000, "packet {}", h.seq);
        }
    }

    #[test]
    fn bad_retag_is_explained() {
        let err = |flow: &str| {
            Scenario::from_str_named("diamond.toml", &diamond(flow))
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let flow = |extra: &str| {
            format!(
                "[[flows]]\nsrc = \"h1\"\ndst = \"h2\"\nsize = 54\n{extra}\n\
                 traffic = {{ kind = \"cbr\", rate = \"1Mbps\" }}\n"
            )
        };
        let e = err(&flow("retag = [{ at = \"1ms\", tags = [1] }]"));
        assert!(e.contains("flows[0].retag") && e.contains("first `tags`"), "{e}");
        let e = err(&flow(
            "tags = [1]\nretag = [{ at = \"2ms\", tags = [1] }, { at = \"1ms\", tags = [2] }]",
        ));
        assert!(e.contains("flows[0].retag[1].at") && e.contains("increasing"), "{e}");
        let e = err(&flow("tags = [1]\nretag = [{ at = \"1ms\", tags = [1, 2, 3, 4] }]"));
        assert!(e.contains("flows[0].size") && e.contains("at least 58"), "{e}");
        let e = err(&flow("tags = [1]\nretag = [{ at = \"1ms\", tags = [4096] }]"));
        assert!(e.contains("flows[0].retag[0].tags") && e.contains("0 to 4095"), "{e}");
        let e = err(&flow("tags = [1]\nretag = [{ at = \"1ms\" }]"));
        assert!(e.contains("tags"), "{e}");
    }

    #[test]
    fn missing_or_unknown_tags_are_dropped_as_no_route() {
        let r = run(r#"
[[flows]]
name = "bad-port"
src = "h1"
dst = "h2"
size = 100
count = 3
tags = [90]
traffic = { kind = "cbr", rate = "10Mbps" }
[[flows]]
name = "too-few"
src = "h1"
dst = "h2"
size = 100
count = 4
tags = [10]
traffic = { kind = "cbr", rate = "10Mbps" }
"#);
        assert_eq!(r.flows[0].drops.get("no-route"), Some(&3));
        assert_eq!(r.flows[0].received, 0);
        // s1 sends it to s2, which finds no tag left
        assert_eq!(r.flows[1].drops.get("no-route"), Some(&4));
        let s2 = r.nodes.iter().find(|n| n.name == "s2").unwrap_or_else(|| panic!("s2"));
        assert_eq!(s2.drops.get("no-route"), Some(&4));
        // one tag too many: h2 gets the frame with a tag left and discards it
        let r = run(r#"
[[flows]]
name = "too-many"
src = "h1"
dst = "h2"
size = 100
count = 2
tags = [10, 11, 20, 7]
traffic = { kind = "cbr", rate = "10Mbps" }
"#);
        assert_eq!((r.flows[0].received, r.flows[0].drops.get("no-route")), (0, Some(&2)));
        let h2 = r.nodes.iter().find(|n| n.name == "h2").unwrap_or_else(|| panic!("h2"));
        assert_eq!(h2.drops.get("no-route"), Some(&2));
    }

    #[test]
    fn bad_tag_configuration_is_explained() {
        let err = |flow: &str| {
            Scenario::from_str_named("diamond.toml", &diamond(flow))
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let e = err(r#"
[[flows]]
src = "h1"
dst = "h2"
size = 100
tags = [5000]
traffic = { kind = "cbr", rate = "1Mbps" }
"#);
        assert!(e.contains("flows[0].tags") && e.contains("0 to 4095"), "{e}");
        let e = err(r#"
[[flows]]
src = "h1"
dst = "h2"
size = 45
tags = [1, 2]
traffic = { kind = "cbr", rate = "1Mbps" }
"#);
        assert!(e.contains("flows[0].size") && e.contains("at least 50"), "{e}");
        let src = diamond("").replace(
            "name = \"h1\"\nkind = \"host\"",
            "name = \"h1\"\nkind = \"host\"\nforwarding = { kind = \"tag-stack\" }",
        );
        let e = Scenario::from_str_named("d.toml", &src).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("nodes[0].forwarding") && e.contains("only switches"), "{e}");
        let src = diamond("").replacen(
            "forwarding = { kind = \"tag-stack\" }",
            "forwarding = { kind = \"tag-stack\", base = 0 }",
            1,
        );
        let e = Scenario::from_str_named("d.toml", &src).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("base"), "{e}");
    }
}
