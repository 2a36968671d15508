//! What the service's HTTP tests share.

#![allow(clippy::unwrap_used)] // a test fails by panicking
#![allow(dead_code)] // each test binary uses a part

use std::path::{Path, PathBuf};

/// A directory of a test's own under the system's temporary directory, `latnet-ctld-<what>-
/// <pid>-<name>` (emptied first), removed with everything in it when the value is dropped: a
/// run leaves nothing behind, and a failed test's files go with it.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// Make the directory.
    pub fn new(what: &str, name: &str) -> Scratch {
        let d =
            std::env::temp_dir().join(format!("latnet-ctld-{what}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

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
