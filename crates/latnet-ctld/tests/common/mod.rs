//! What the service's HTTP tests share.

#![allow(clippy::unwrap_used)] // a test fails by panicking

/// Every answer in `raw` (HTTP/1.1 responses one after the other): status and body.
pub fn answers(raw: &str) -> Vec<(u16, String)> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Some((head, tail)) = rest.split_once("\r\n\r\n") {
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let len = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
        out.push((status, tail[..len].to_owned()));
        rest = &tail[len..];
    }
    out
}
