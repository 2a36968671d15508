//! Files rewritten whole while a loop runs (a switch's statistics, the host agent's status),
//! by a thread of their own.
//!
//! A file is replaced atomically: a temporary file written, then renamed over it, so that a
//! reader sees the old contents or the new, never half. The rename can wait for the disk: ext4
//! starts writing the new file's data back when it is renamed over another. A 6 KB write and
//! rename took about 1 ms at the median on this project's CI machine when idle, and 85 ms at
//! the 99th percentile and up to 2 s while another process wrote gigabytes (BENCHMARKS.md):
//! a forwarding loop that did it itself fell that far behind.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Replace `path`'s contents with `body` atomically; errors name the file as `what`.
pub fn replace_file(path: &Path, body: &str, what: &str) -> io::Result<()> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, body).map_err(named)?;
    std::fs::rename(&tmp, path).map_err(named)
}

/// Replaces one file from a thread of its own, with the latest contents handed over (those it
/// has not written in time are skipped). An error ends the thread; the next hand-over, or
/// [`Replacer::finish`], returns it.
#[derive(Debug)]
pub struct Replacer {
    path: PathBuf,
    tx: Option<mpsc::Sender<String>>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Replacer {
    /// A thread replacing `path` (named `what` in errors), nothing written yet.
    pub fn start(path: PathBuf, what: &'static str) -> io::Result<Replacer> {
        let (tx, rx) = mpsc::channel::<String>();
        let file = path.clone();
        let thread = std::thread::Builder::new().name("file-replacer".into()).spawn(move || {
            while let Ok(mut body) = rx.recv() {
                body = rx.try_iter().last().unwrap_or(body);
                replace_file(&file, &body, what)?;
            }
            Ok(())
        })?;
        Ok(Replacer { path, tx: Some(tx), thread: Some(thread) })
    }

    /// Hand over the file's next contents; the thread's error, if it has ended (after which
    /// hand-overs are dropped).
    pub fn send(&mut self, body: String) -> io::Result<()> {
        match self.tx.as_ref().map(|tx| tx.send(body)) {
            Some(Ok(())) => Ok(()),
            _ => self.join(),
        }
    }

    /// Wait until everything handed over is written; the file's path.
    pub fn finish(mut self) -> io::Result<PathBuf> {
        self.join()?;
        Ok(self.path)
    }

    fn join(&mut self) -> io::Result<()> {
        self.tx = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => {
                Err(io::Error::other(format!("{}: its writer panicked", self.path.display())))
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_ends_with_the_last_hand_over_and_a_failed_write_is_returned() {
        let dir = std::env::temp_dir().join(format!("latnet-replacer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.json");
        let mut w = Replacer::start(path.clone(), "statistics file").unwrap();
        for k in 0..100 {
            w.send(format!("{{\"k\": {k}}}\n")).unwrap();
        }
        assert_eq!(w.finish().unwrap(), path);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"k\": 99}\n");
        assert!(!dir.join("s.json.tmp").exists());
        // a directory that is not there: the writer's error comes back from a hand-over
        let gone = dir.join("gone").join("s.json");
        let mut w = Replacer::start(gone, "statistics file").unwrap();
        let mut sent = Ok(());
        for _ in 0..1000 {
            sent = w.send("{}\n".into());
            if sent.is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let e = sent.expect_err("the writer's error");
        assert!(e.to_string().contains("statistics file") && e.to_string().contains("gone"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
