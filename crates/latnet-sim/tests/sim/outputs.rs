//! Output files: one capture and one queue row per port even where links run in parallel, and
//! an I/O error that names the file it could not write.

use super::run;

/// h1 -100Mbps- s1 -10Mbps- h2 plus an idle second link h1 -1Gbps- s1 (routes take the first:
/// equal hops, the lower link index), a 5 Mbit/s CBR flow of 1000-byte frames for 100 ms.
const PARALLEL: &str = r#"
[sim]
duration = "100ms"
[output]
pcap = true
queues = "10ms"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "s1"
rate = "100Mbps"
delay = "1ms"
[[links]]
a = "s1"
b = "h2"
rate = "10Mbps"
delay = "1ms"
[[links]]
a = "h1"
b = "s1"
rate = "1Gbps"
[[flows]]
name = "f"
src = "h1"
dst = "h2"
size = 1000
traffic = { kind = "cbr", rate = "5Mbps" }
"#;

fn frames(capture: &[u8]) -> usize {
    latnet_sim::pcap::records(capture).expect("a capture").len()
}

#[test]
fn parallel_links_get_their_own_captures_and_queue_rows() {
    let r = run(PARALLEL);
    let names: Vec<&str> = r.pcaps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["h1-s1.pcap", "s1-h1.pcap", "s1-h2.pcap", "h2-s1.pcap", "h1-s1.1.pcap", "s1-h1.1.pcap"],
        "the first link between two nodes keeps the plain name"
    );
    let count: Vec<usize> = r.pcaps.iter().map(|(_, c)| frames(c)).collect();
    assert_eq!(count, [63, 0, 63, 0, 0, 0]);
    let dir = std::env::temp_dir().join(format!("latnet-parallel-{}", std::process::id()));
    let written = r.write_dir(&dir).expect("write");
    for (name, n) in names.iter().zip(count) {
        let p = dir.join("pcap").join(name);
        assert!(written.contains(&p), "{name}");
        assert_eq!(frames(&std::fs::read(&p).expect("read back")), n, "{name}");
    }
    // queues.csv: per interval, one row per port, told apart by the link
    let csv = r.queues_csv().expect("a series");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("t_ns,node,peer,link,packets,bytes,max_packets,max_bytes"));
    let first: Vec<&str> =
        lines.take(6).map(|l| l.splitn(5, ',').take(4).last().unwrap_or("")).collect();
    assert_eq!(first, ["0", "0", "1", "1", "2", "2"]);
    let keys: std::collections::BTreeSet<_> =
        csv.lines().skip(1).map(|l| l.splitn(5, ',').take(4).collect::<Vec<_>>()).collect();
    assert_eq!(keys.len(), csv.lines().count() - 1, "no two rows share time, node, peer and link");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn names_stay_distinct_when_node_names_run_together() {
    // "a-b" toward "c" and "a" toward "b-c" both make "a-b-c"; two links a -- b-c as well
    let pairs =
        [("a-b", "c"), ("c", "a-b"), ("a", "b-c"), ("b-c", "a"), ("a", "b-c"), ("b-c", "a")];
    let names = latnet_sim::results::capture_names(pairs);
    assert_eq!(
        names,
        ["a-b-c.pcap", "c-a-b.pcap", "a-b-c.1.pcap", "b-c-a.pcap", "a-b-c.2.pcap", "b-c-a.1.pcap"]
    );
}

#[test]
fn an_io_error_names_the_file_it_could_not_write() {
    let r = run(PARALLEL);
    let dir = std::env::temp_dir().join(format!("latnet-io-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // a directory where flows.csv should go
    std::fs::create_dir_all(dir.join("flows.csv")).expect("mkdir");
    let e = r.write_dir(&dir).expect_err("flows.csv is a directory").to_string();
    let want = dir.join("flows.csv").display().to_string();
    assert!(e.contains(&want), "{e}");
    std::fs::remove_dir_all(&dir).expect("clean");
    // a file where the capture directory should go
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("pcap"), b"").expect("a file");
    let e = r.write_dir(&dir).expect_err("pcap is a file").to_string();
    assert!(e.contains(&dir.join("pcap").display().to_string()), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
