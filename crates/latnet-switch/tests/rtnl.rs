//! HTB classes made over rtnetlink (the host agent's way) are the classes `tc` makes from the
//! same words: `tc -d class show` prints them alike, a class is replaced in place, and a
//! missing one is an error.

mod common;

use common::{root, Veth};
use latnet_switch::sys::{if_index, in_netns, rtnl::HtbClass, rtnl::Rtnl};
use std::process::Command;

fn tc(ns: &str, words: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "tc"])
        .args(words.split_whitespace())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "tc {words}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `tc -d class show`'s text for class `1:minor`, its id left out.
fn shown(ns: &str, minor: u32) -> String {
    let all = tc(ns, "-d class show dev vx0");
    let id = format!("class htb 1:{minor:x} ");
    let line = all.lines().find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("{all}"));
    line.replacen(&id, "", 1)
}

#[test]
fn classes_over_rtnetlink_are_the_classes_tc_makes() {
    if !root() {
        eprintln!("skipped: needs root");
        return;
    }
    let v = Veth::new("rtn");
    tc(&v.ns, "qdisc replace dev vx0 root handle 1: htb default 0");
    let rtnl = Rtnl::open(Some(&v.path)).unwrap_or_else(|e| panic!("{e}"));
    let index = in_netns(&v.path, || if_index("vx0")).unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        (100_000_000u64, 15_000u64, 4u16),
        (1_000_000, 1_500, 0),
        (8, 1, 0),
        (2_500_000_000, 64_000, 4),
        (40_000_000_000, 100_000, 4), // above 34 Gbit/s: the 64-bit rate attributes
    ];
    for (i, &(rate, burst, overhead)) in cases.iter().enumerate() {
        let (ours, theirs) = (2 + 2 * i as u32, 3 + 2 * i as u32);
        let c = HtbClass {
            rate_bps: rate,
            ceil_bps: rate,
            burst,
            cburst: burst,
            quantum: 1600,
            overhead,
        };
        rtnl.htb_class(index, 0x1_0000, 0x1_0000 | ours, &c).unwrap_or_else(|e| panic!("{e}"));
        tc(
            &v.ns,
            &format!(
                "class replace dev vx0 parent 1: classid 1:{theirs:x} htb rate {rate}bit ceil \
                 {rate}bit burst {burst}b cburst {burst}b quantum 1600 overhead {overhead}"
            ),
        );
        assert_eq!(shown(&v.ns, ours), shown(&v.ns, theirs), "rate {rate} burst {burst}");
    }
    // replaced in place, then removed; removing it again is the kernel's error
    let c = HtbClass {
        rate_bps: 5_000_000,
        ceil_bps: 5_000_000,
        burst: 3_000,
        cburst: 3_000,
        quantum: 1600,
        overhead: 4,
    };
    rtnl.htb_class(index, 0x1_0000, 0x1_0002, &c).unwrap_or_else(|e| panic!("{e}"));
    assert!(shown(&v.ns, 2).contains("rate 5Mbit"), "{}", shown(&v.ns, 2));
    rtnl.del_class(index, 0x1_0002).unwrap_or_else(|e| panic!("{e}"));
    assert!(!tc(&v.ns, "class show dev vx0").contains("1:2 "));
    let e = rtnl.del_class(index, 0x1_0002).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    // a class under a parent that does not exist is refused by the kernel
    let e = rtnl.htb_class(index, 0x7_0000, 0x7_0001, &c).unwrap_err();
    assert!(e.raw_os_error().is_some(), "{e}");
}

/// The root qdisc made over rtnetlink is the one `tc` makes; the class counters read over
/// rtnetlink are the ones `tc -s class show` prints, after traffic went through a class; the
/// root removed, the device's default qdisc is back.
#[test]
fn the_root_qdisc_and_the_class_counters_over_rtnetlink_are_tcs() {
    if !root() {
        eprintln!("skipped: needs root");
        return;
    }
    let v = Veth::new("rtq");
    let rtnl = Rtnl::open(Some(&v.path)).unwrap_or_else(|e| panic!("{e}"));
    let index = in_netns(&v.path, || if_index("vx0")).unwrap_or_else(|e| panic!("{e}"));
    let qdisc = |ns: &str| {
        let all = tc(ns, "-d qdisc show dev vx0");
        all.lines().next().unwrap_or_default().to_owned()
    };
    let default = qdisc(&v.ns);
    tc(&v.ns, "qdisc replace dev vx0 root handle 1: htb default 2");
    let theirs = qdisc(&v.ns);
    tc(&v.ns, "qdisc del dev vx0 root");
    rtnl.htb_root(index, 1, 2).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(qdisc(&v.ns), theirs);
    // class 1:2 takes what is unclassified; 1:3 sees nothing
    let c = HtbClass {
        rate_bps: 8_000,
        ceil_bps: 8_000,
        burst: 1_500,
        cburst: 1_500,
        quantum: 1600,
        overhead: 0,
    };
    for minor in [2, 3] {
        rtnl.htb_class(index, 0x1_0000, 0x1_0000 | minor, &c).unwrap_or_else(|e| panic!("{e}"));
    }
    for _ in 0..40 {
        v.send("10.77.0.2:5001");
    }
    // 40 datagrams of 60 bytes at 8 kbit/s (60 ms each) with a 1,500-byte bucket: some are
    // still queued when the counters are read. They are read over rtnetlink before and after
    // `tc` reads them; if a packet left meanwhile, again
    let read = || {
        latnet_switch::agent::class_stats_of(
            &rtnl.class_stats(index).unwrap_or_else(|e| panic!("{e}")),
        )
    };
    let (ours, text) = (0..5)
        .find_map(|_| {
            let before = read();
            let text = tc(&v.ns, "-s class show dev vx0");
            (read() == before).then_some((before, text))
        })
        .unwrap_or_else(|| panic!("the counters changed during each of 5 reads"));
    assert_eq!(ours, latnet_switch::agent::parse_class_stats(&text), "{text}");
    assert_eq!(ours.len(), 2);
    let two = &ours[&2];
    let n = |k: &str| two[k].as_u64().unwrap_or(0);
    assert!(n("sent_packets") > 0 && n("backlog_packets") > 0, "{two}");
    assert_eq!(n("sent_packets") + n("backlog_packets"), 40, "{two}");
    assert_eq!(n("sent_bytes"), 60 * n("sent_packets"), "{two}");
    assert_eq!(ours[&3]["sent_packets"], 0);
    rtnl.del_root(index).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(qdisc(&v.ns), default);
    let e = rtnl.del_root(index).unwrap_err();
    assert!(e.raw_os_error().is_some(), "removing a root twice is the kernel's error: {e}");
}
