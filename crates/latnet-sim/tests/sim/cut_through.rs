//! Cut-through switching: a switch acts on a frame's first bit, but cannot finish sending a
//! frame before its last bit has arrived, and hosts receive whole frames.

use super::run;
use proptest::prelude::*;

/// h1 - s1 - ... - s(n-1) - h2 with one link per `(rate, delay)`, under `switching`, and one
/// frame of `size` bytes from h1 to h2 under latency convention `latency`.
fn chain(switching: &str, latency: &str, links: &[(&str, &str)], size: u32) -> String {
    let mut s = format!(
        r#"
[sim]
duration = "10ms"
drain = "1s"
switching = "{switching}"
latency = "{latency}"
[output]
packets = true
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "h2"
kind = "host"
"#
    );
    let names: Vec<String> = (0..=links.len())
        .map(|i| match i {
            0 => "h1".to_owned(),
            i if i == links.len() => "h2".to_owned(),
            i => format!("s{i}"),
        })
        .collect();
    for n in &names[1..links.len()] {
        s += &format!("[[nodes]]\nname = \"{n}\"\nkind = \"switch\"\n");
    }
    for (i, (rate, delay)) in links.iter().enumerate() {
        s += &format!(
            "[[links]]\na = \"{}\"\nb = \"{}\"\nrate = \"{rate}\"\ndelay = \"{delay}\"\n",
            names[i],
            names[i + 1]
        );
    }
    s += &format!(
        "[[flows]]\nsrc = \"h1\"\ndst = \"h2\"\nsize = {size}\ncount = 1\n\
         traffic = {{ kind = \"cbr\", rate = \"1Mbps\" }}\n"
    );
    s
}

/// Latency (ns) of the one frame, and the instant each hop started transmitting it.
fn lone_frame(src: &str) -> (u64, Vec<u64>, f64) {
    let r = run(src);
    let f = &r.flows[0];
    assert_eq!((f.sent, f.received), (1, 1));
    let l = f.latency_ns.expect("received");
    assert_eq!(l.min, l.max);
    let starts = r.log.as_ref().expect("hops").hops.iter().map(|h| h.start_tx_ns).collect();
    (l.max, starts, f.throughput_bps)
}

#[test]
fn a_faster_egress_waits_for_the_last_bit() {
    // 1000 B: 800 us at 10 Mbit/s into s1, 8 us at 1 Gbit/s out of it. s1 has the first bit at
    // 1 ms and the last at 1.8 ms; it may start sending at 1.792 ms, to finish as the last bit
    // arrives; h2 has the whole frame 1 ms later.
    let links = [("10Mbps", "1ms"), ("1Gbps", "1ms")];
    let (lat, starts, _) = lone_frame(&chain("cut-through", "physical", &links, 1000));
    assert_eq!(starts, [0, 1_792_000]);
    assert_eq!(lat, 2_800_000, "propagation 2 ms + the 800 us the frame needs to leave h1");
    // with no propagation delay, no faster than the 10 Mbit/s it crossed
    let links = [("10Mbps", "0s"), ("1Gbps", "0s")];
    let (lat, _, thr) = lone_frame(&chain("cut-through", "physical", &links, 1000));
    assert_eq!(lat, 800_000);
    assert_eq!(thr, 10e6, "8000 bits received 800 us after the flow started");
    // the wait counts as serialization: the seed's convention leaves it out
    let links = [("10Mbps", "1ms"), ("1Gbps", "1ms")];
    let (lat, _, _) = lone_frame(&chain("cut-through", "exclude-serialization", &links, 1000));
    assert_eq!(lat, 2_000_000);
}

#[test]
fn equal_rates_and_a_slower_egress_start_at_the_first_bit() {
    // the LBF seed's link model: one link delay per switch, the serialization once
    let links = [("100Mbps", "1ms"), ("100Mbps", "1ms"), ("100Mbps", "1ms")];
    let (lat, starts, _) = lone_frame(&chain("cut-through", "physical", &links, 1000));
    assert_eq!(starts, [0, 1_000_000, 2_000_000]);
    assert_eq!(lat, 3_080_000);
    let (lat, _, _) = lone_frame(&chain("cut-through", "exclude-serialization", &links, 1000));
    assert_eq!(lat, 3_000_000);
    // a slower egress cannot run out of bits
    let links = [("1Gbps", "1ms"), ("10Mbps", "1ms")];
    let (lat, starts, _) = lone_frame(&chain("cut-through", "physical", &links, 1000));
    assert_eq!(starts, [0, 1_000_000]);
    assert_eq!(lat, 2_800_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// A lone frame through a chain of cut-through switches: each switch starts sending at the
    /// first bit, or later so as to finish with the last bit, `f' = max(f + d, f + tx + d - tx')`;
    /// the host has it whole `tx + d` after the last start. Never faster than the slowest link
    /// plus the propagation; under store-and-forward every serialization adds up.
    #[test]
    fn a_lone_frame_follows_the_cut_through_recurrence(
        hops in proptest::collection::vec((0usize..4, 0usize..3), 2..5),
        size in 64u32..1600,
    ) {
        let rates = [("10Mbps", 10_000_000u64), ("100Mbps", 100_000_000), ("1Gbps", 1_000_000_000), ("25Gbps", 25_000_000_000)];
        let delays = [("0s", 0u64), ("10us", 10_000), ("1ms", 1_000_000)];
        let links: Vec<(&str, &str)> = hops.iter().map(|&(r, d)| (rates[r].0, delays[d].0)).collect();
        let tx: Vec<u64> = hops
            .iter()
            .map(|&(r, _)| (u128::from(size) * 8 * 1_000_000_000).div_ceil(u128::from(rates[r].1)) as u64)
            .collect();
        let d: Vec<u64> = hops.iter().map(|&(_, k)| delays[k].1).collect();
        let mut start = vec![0u64];
        for k in 1..hops.len() {
            let f = start[k - 1];
            start.push((f + d[k - 1]).max((f + tx[k - 1] + d[k - 1]).saturating_sub(tx[k])));
        }
        let n = hops.len() - 1;
        let want = start[n] + tx[n] + d[n];
        let (lat, starts, _) = lone_frame(&chain("cut-through", "physical", &links, size));
        prop_assert_eq!(&starts, &start);
        prop_assert_eq!(lat, want);
        prop_assert!(lat >= d.iter().sum::<u64>() + tx.iter().max().copied().unwrap_or(0));
        let (saf, _, _) = lone_frame(&chain("store-and-forward", "physical", &links, size));
        prop_assert_eq!(saf, d.iter().sum::<u64>() + tx.iter().sum::<u64>());
        prop_assert!(lat <= saf);
    }
}
