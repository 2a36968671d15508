//! Topologies: fat-tree sizes, files with located errors, shortest-path port sets.

use latnet_ctl::Topology;
use latnet_units::Rate;
use proptest::prelude::*;

#[test]
fn fat_tree_sizes_match_the_paper() {
    for (k, m, hosts) in [(4, 2, 16), (4, 80, 640), (6, 120, 2_160), (12, 240, 17_280)] {
        let t = Topology::fat_tree(k, m, Rate::from_gbps(1)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.hosts().len(), hosts, "k = {k}");
        assert_eq!(t.nodes().len() - hosts, 5 * k * k / 4, "switches");
        assert_eq!(t.links().len(), hosts + k * k * k / 2, "links");
    }
    assert!(Topology::fat_tree(5, 2, Rate::from_gbps(1)).unwrap_err().contains("even"));
    assert!(Topology::fat_tree(4, 0, Rate::from_gbps(1)).is_err());
}

/// Sizes whose node count does not fit a `usize` are refused like any other too-large size.
/// Before, the count was computed unchecked: a panic in a debug build, and in a release build
/// a wrapped count that passed the size check (k = 4 with 2^63 - 1 hosts per edge counted 12
/// nodes) and then tried to build the network.
#[test]
fn fat_tree_sizes_that_overflow_are_refused() {
    for (k, m) in [(1usize << 33, 1usize), (4, usize::MAX / 2), (1 << 31, 1 << 31), (2, usize::MAX)]
    {
        let e = Topology::fat_tree(k, m, Rate::from_gbps(1)).map(|t| t.nodes().len()).unwrap_err();
        assert!(e.contains("too large"), "k = {k}, {m} per edge: {e}");
    }
}

#[test]
fn shortest_path_ports_between_pods_of_a_k4_fat_tree() {
    let t = Topology::fat_tree(4, 2, Rate::from_gbps(1)).unwrap_or_else(|e| panic!("{e}"));
    let (s, d) = (t.node_id("h0_0_0").unwrap_or(0), t.node_id("h2_1_0").unwrap_or(0));
    // 2 edge->agg, 4 agg->core, 4 core->agg, 2 agg->edge
    assert_eq!(t.shortest_path_ports(s, d).len(), 12);
    let same_edge = t.node_id("h0_0_1").unwrap_or(0);
    assert!(t.shortest_path_ports(s, same_edge).is_empty());
    let path = t.shortest_path(s, d).unwrap_or_default();
    assert_eq!(path.len(), 6);
}

#[test]
fn file_errors_name_file_line_key_and_expectation() {
    let err = |src: &str| Topology::from_toml("topo.toml", src).unwrap_err().to_string();
    let e = err("[[nodes]]\nname = \"a\"\nkind = \"host\"\n[[links]]\na = \"a\"\nb = \"zz\"\nrate = \"1Gbps\"\n");
    assert!(e.starts_with("topo.toml:6:5: `links[0].b`: unknown node \"zz\""), "{e}");
    let e = err("[[nodes]]\nname = \"a\"\nkind = \"host\"\n[[nodes]]\nname = \"b\"\nkind = \"switch\"\n[[links]]\na = \"a\"\nb = \"b\"\n");
    assert!(e.contains("`links[0].rate`: missing rate"), "{e}");
    let e = err("[[nodes]]\nname = \"a\"\nkind = \"host\"\n");
    assert!(e.contains("host \"a\" has no link"), "{e}");
    // errors of the TOML reader name their key too
    let e = err("[[nodes]]\nname = \"a\"\nkind = \"router\"\n");
    assert!(e.starts_with("topo.toml:3:8: `nodes[0].kind`: ") && e.contains("host"), "{e}");
    let e = err("[[nodes]]\nname = \"a\"\nkind = \"host\"\n[[links]]\na = \"a\"\nbb = \"a\"\n");
    assert!(e.starts_with("topo.toml:6:1: `links[0].bb`: unknown field"), "{e}");
    let e =
        err("[[nodes]]\nname = \"a\"\nkind = \"host\"\n[[nodes]]\nname = \"a\"\nkind = \"host\"\n");
    assert!(e.contains("`nodes[1].name`: duplicate"), "{e}");
    let e = err("[defaults.link]\nrate = \"0bps\"\n[[nodes]]\nname = \"a\"\nkind = \"host\"\n[[nodes]]\nname = \"b\"\nkind = \"switch\"\n[[links]]\na = \"a\"\nb = \"b\"\n");
    assert!(e.contains("rate above zero"), "{e}");
    let e = err("nodes = 3");
    assert!(e.starts_with("topo.toml:1:"), "{e}");
}

proptest! {
    /// Any text, and any mutation of a valid file, gives a topology or an error; never a panic.
    #[test]
    fn parsing_never_panics(s in ".{0,300}") {
        let _ = Topology::from_toml("x.toml", &s);
    }

    #[test]
    fn mutated_files_never_panic(cut in 0usize..200, insert in "[a-z\\[\\]=\" \n0-9]{0,8}") {
        let base = "[defaults.link]\nrate = \"1Gbps\"\n[[nodes]]\nname = \"h\"\nkind = \"host\"\n[[nodes]]\nname = \"s\"\nkind = \"switch\"\n[[links]]\na = \"h\"\nb = \"s\"\n";
        let cut = cut.min(base.len());
        let mut s = base[..cut].to_owned();
        s.push_str(&insert);
        s.push_str(&base[cut..]);
        let _ = Topology::from_toml("x.toml", &s);
    }
}
