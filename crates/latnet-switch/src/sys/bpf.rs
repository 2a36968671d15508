//! The `bpf(2)` calls of the host agent's tagger: hash maps, loading a `SCHED_CLS` program
//! (with the verifier's log when it refuses), test runs, and attaching a program to an
//! interface's egress through a `tcx` link (Linux 6.6 and later). Raw system calls: no libbpf,
//! no BPF file system, nothing pinned. Every object is a file descriptor; closing the last one
//! (the process ending included) removes it, so a tagger never outlives its agent.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
/// `enum bpf_attach_type`: `BPF_TCX_EGRESS`.
const BPF_TCX_EGRESS: u32 = 47;

/// The attribute block of one call (`union bpf_attr`, of which no command here uses more
/// than 80 bytes; the rest stays zero, as the kernel requires).
struct Attr([u8; 128]);

impl Default for Attr {
    fn default() -> Attr {
        Attr([0; 128])
    }
}

impl Attr {
    fn u32(&mut self, at: usize, v: u32) -> &mut Self {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, at: usize, v: u64) -> &mut Self {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn ptr<T>(&mut self, at: usize, p: *const T) -> &mut Self {
        self.u64(at, p as usize as u64)
    }
    fn name(&mut self, at: usize, name: &str) -> &mut Self {
        // object names: at most 15 characters of [A-Za-z0-9_.]
        let n: Vec<u8> = name
            .bytes()
            .filter(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
            .take(15)
            .collect();
        self.0[at..at + n.len()].copy_from_slice(&n);
        self
    }
    fn get_u32(&self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.0[at..at + 4]);
        u32::from_ne_bytes(b)
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, writable buffer of the size passed; every pointer stored in it
    // points to memory that the caller keeps alive for the call with the lengths stated beside
    // it. The kernel reads (and for some commands writes) only within those bounds.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len() as libc::c_uint)
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_of(r: libc::c_long) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(r).map_err(|_| io::Error::other("bpf returned no descriptor"))?;
    // SAFETY: a successful BPF_MAP_CREATE / PROG_LOAD / LINK_CREATE returns a new descriptor
    // that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A BPF hash map with fixed key and value sizes.
#[derive(Debug)]
pub struct HashMap {
    fd: OwnedFd,
    key_size: usize,
    value_size: usize,
}

impl HashMap {
    /// Create a map of at most `max_entries` entries.
    pub fn create(
        name: &str,
        key_size: usize,
        value_size: usize,
        max_entries: u32,
    ) -> io::Result<HashMap> {
        let mut a = Attr::default();
        a.u32(0, BPF_MAP_TYPE_HASH)
            .u32(4, key_size as u32)
            .u32(8, value_size as u32)
            .u32(12, max_entries)
            .name(28, name);
        let fd = fd_of(bpf(BPF_MAP_CREATE, &mut a)?)?;
        Ok(HashMap { fd, key_size, value_size })
    }

    /// The descriptor a program refers to the map by.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn sizes(&self, key: &[u8], value: Option<&[u8]>) -> io::Result<()> {
        if key.len() != self.key_size || value.is_some_and(|v| v.len() != self.value_size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bpf map: wrong key or value size",
            ));
        }
        Ok(())
    }

    /// Insert or replace one entry (atomically for a reader in the kernel: a packet sees the old
    /// value or the new one).
    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.sizes(key, Some(value))?;
        let mut a = Attr::default();
        a.u32(0, self.fd.as_raw_fd() as u32).ptr(8, key.as_ptr()).ptr(16, value.as_ptr());
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(drop)
    }

    /// Remove one entry; `false` if there was none.
    pub fn delete(&self, key: &[u8]) -> io::Result<bool> {
        self.sizes(key, None)?;
        let mut a = Attr::default();
        a.u32(0, self.fd.as_raw_fd() as u32).ptr(8, key.as_ptr());
        match bpf(BPF_MAP_DELETE_ELEM, &mut a) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The value of one entry.
    pub fn lookup(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.sizes(key, None)?;
        let mut value = vec![0u8; self.value_size];
        let mut a = Attr::default();
        a.u32(0, self.fd.as_raw_fd() as u32).ptr(8, key.as_ptr()).ptr(16, value.as_mut_ptr());
        match bpf(BPF_MAP_LOOKUP_ELEM, &mut a) {
            Ok(_) => Ok(Some(value)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A loaded `SCHED_CLS` program (traffic control: a `tcx` hook or `cls_bpf`).
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

/// What a test run of a program gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value.
    pub retval: i32,
    /// The packet as the program left it (a tag it pushed first is metadata, not here).
    pub data: Vec<u8>,
    /// `struct __sk_buff` as the program left it (the fields the kernel copies back:
    /// `mark`, `priority`, ...).
    pub ctx: Vec<u8>,
    /// The kernel's mean time per run (ns).
    pub duration_ns: u32,
}

impl Program {
    /// Load `insns` (8-byte instructions, as encoded) under `license`. When the verifier
    /// refuses, the error carries its log.
    pub fn load_sched_cls(name: &str, insns: &[u8], license: &str) -> io::Result<Program> {
        let lic = std::ffi::CString::new(license)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "license with a NUL"))?;
        let mut log = vec![0u8; 256 * 1024];
        let mut a = Attr::default();
        a.u32(0, BPF_PROG_TYPE_SCHED_CLS)
            .u32(4, (insns.len() / 8) as u32)
            .ptr(8, insns.as_ptr())
            .ptr(16, lic.as_ptr())
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .ptr(32, log.as_mut_ptr())
            .name(48, name);
        match bpf(BPF_PROG_LOAD, &mut a) {
            Ok(r) => Ok(Program { fd: fd_of(r)? }),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let tail: Vec<&str> = text.lines().rev().take(12).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(io::Error::new(
                    e.kind(),
                    format!("the kernel refused the program ({e}); verifier: {}", tail.join(" | ")),
                ))
            }
        }
    }

    /// Run the program once on `data` (an Ethernet frame) with the context `ctx` (a prefix of
    /// `struct __sk_buff`; empty: the kernel's default).
    pub fn test_run(&self, data: &[u8], ctx: &[u8]) -> io::Result<TestRun> {
        self.test_run_repeat(data, ctx, 1)
    }

    /// As [`Program::test_run`], `repeat` times (the kernel times them: [`TestRun::duration_ns`],
    /// the mean); the result is the last run's. The kernel runs the program again on the packet
    /// as the previous run left it, so only a program that leaves it unchanged is timed on the
    /// same packet each time.
    pub fn test_run_repeat(&self, data: &[u8], ctx: &[u8], repeat: u32) -> io::Result<TestRun> {
        let mut out = vec![0u8; data.len() + 256];
        let mut ctx_out = vec![0u8; 192];
        let mut a = Attr::default();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u32(8, data.len() as u32)
            .u32(12, out.len() as u32)
            .ptr(16, data.as_ptr())
            .ptr(24, out.as_mut_ptr())
            .u32(32, repeat.max(1))
            .u32(40, ctx.len() as u32)
            .u32(44, ctx_out.len() as u32)
            .ptr(48, if ctx.is_empty() { std::ptr::null() } else { ctx.as_ptr() })
            .ptr(56, ctx_out.as_mut_ptr());
        bpf(BPF_PROG_TEST_RUN, &mut a)?;
        let retval = a.get_u32(4) as i32;
        out.truncate((a.get_u32(12) as usize).min(out.len()));
        ctx_out.truncate((a.get_u32(44) as usize).min(ctx_out.len()));
        Ok(TestRun { retval, data: out, ctx: ctx_out, duration_ns: a.get_u32(36) })
    }

    /// Attach to the egress of interface `ifindex` of the calling thread's network namespace,
    /// after any programs already there. Detached when the link is dropped.
    pub fn attach_tcx_egress(&self, ifindex: u32) -> io::Result<Link> {
        let mut a = Attr::default();
        a.u32(0, self.fd.as_raw_fd() as u32).u32(4, ifindex).u32(8, BPF_TCX_EGRESS);
        Ok(Link { _fd: fd_of(bpf(BPF_LINK_CREATE, &mut a)?)? })
    }
}

/// A program attached to an interface; dropping it detaches the program.
#[derive(Debug)]
pub struct Link {
    _fd: OwnedFd,
}
