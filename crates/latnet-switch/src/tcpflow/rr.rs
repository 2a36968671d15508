//! tcp-rr flows on Linux's TCP: a new connection per request, a thread per connection on
//! both sides (blocking sockets with timeouts at the run's end).
//!
//! The client opens a connection at every request instant ([`rr_instants`]), writes the
//! request, reads the response and closes; its flow completion time runs from the open to the
//! last response byte read, as the simulator's from the SYN. The server reads the request,
//! writes the response and closes once the client has.

use super::{
    client_socket, named, sample_interval, sampler, LinuxTcp, RrConn, TcpRecv, TcpSample, TcpSent,
};
use crate::sys;
use latnet_sim::lbf::flow_address;
use latnet_sim::tcp::app::RrArrivals;
use latnet_sim::traffic::TrafficSpec;
use latnet_sim::Scenario;
use std::io::{self, Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The instants (ns from the scenario's time zero) at which tcp-rr flow `i` opens its
/// connections: the simulator's ([`RrArrivals`]: its start, then its `interval` or, for
/// `arrivals = "poisson"`, the simulator's own exponential draws), before its stop or the
/// run's end. Empty for other flows.
pub fn rr_instants(sc: &Scenario, i: usize) -> Vec<u64> {
    let f = &sc.flows[i];
    let TrafficSpec::TcpRr(t) = &f.traffic else { return Vec::new() };
    let stop = f.stop.min(latnet_units::Time::ZERO + sc.sim.duration);
    RrArrivals::new(t, f.start, stop, sc.sim.seed, i).map(|at| at.as_nanos()).collect()
}

/// One end's open connections (the clients' or the server's), for the samples of the time
/// series.
#[derive(Debug, Default)]
struct Live {
    /// Sockets of the connections not yet closed (a worker closes its socket only after
    /// taking it out, under the lock: a sample never reads a descriptor reused meanwhile).
    open: Vec<RawFd>,
    /// Retransmissions and CE echoes of the connections closed.
    closed: (u64, u64),
}

impl Live {
    /// The flow's sample at `t_ns`: windows, bytes in flight and pacing rates added up over the
    /// open connections that have sent data (as the simulator's), the first one's smoothed RTT,
    /// retransmissions and CE echoes so far.
    fn sample(&self, t_ns: u64, paced: bool) -> TcpSample {
        let mut out = TcpSample { t_ns, ..TcpSample::default() };
        (out.retransmits, out.ce_marks) = self.closed;
        for &fd in &self.open {
            let Ok(i) = sys::tcp_info(fd) else { continue };
            if i.data_segs_out == 0 {
                continue;
            }
            let s = super::sample_of(&i, t_ns, paced);
            out.cwnd += s.cwnd;
            out.in_flight += s.in_flight;
            out.pacing_bps += s.pacing_bps;
            out.retransmits += s.retransmits;
            out.ce_marks += s.ce_marks;
            if out.srtt_ns == 0 {
                out.srtt_ns = s.srtt_ns;
            }
        }
        out
    }

    /// A connection `fd` opened.
    fn open(live: &Mutex<Live>, fd: RawFd) {
        live.lock().unwrap_or_else(|p| p.into_inner()).open.push(fd);
    }

    /// Connection `fd`, whose last `TCP_INFO` is `info`, closes: it leaves `open` before its
    /// socket is closed (after this returns), so that a sample never reads a descriptor reused
    /// meanwhile.
    fn close(live: &Mutex<Live>, fd: RawFd, info: &sys::TcpInfo) {
        let mut l = live.lock().unwrap_or_else(|p| p.into_inner());
        l.open.retain(|&x| x != fd);
        l.closed.0 += u64::from(info.total_retrans);
        l.closed.1 += u64::from(info.delivered_ce);
    }

    /// Sample `live` every `every` ns from `t0_ns` until `stop`, in a thread of its own.
    fn sampler(
        live: &Arc<Mutex<Live>>,
        t0_ns: u64,
        every: u64,
        stop: &Arc<AtomicBool>,
        paced: bool,
    ) -> JoinHandle<Vec<TcpSample>> {
        let (live, stop) = (Arc::clone(live), Arc::clone(stop));
        std::thread::spawn(move || {
            sampler(t0_ns, every, &stop, |t| {
                Some(live.lock().unwrap_or_else(|p| p.into_inner()).sample(t, paced))
            })
        })
    }
}

/// Bytes counted per interval of `every` ns from `t0_ns`, at the instant they are counted.
fn bin(bins: &Mutex<Vec<u64>>, t0_ns: u64, every: u64, n: u64) {
    let k = (sys::mono_ns().saturating_sub(t0_ns) / every) as usize;
    let mut b = bins.lock().unwrap_or_else(|p| p.into_inner());
    if b.len() <= k {
        b.resize(k + 1, 0);
    }
    b[k] += n;
}

/// Remaining time until `end_ns`, at least 1 ms (a socket timeout of 0 would mean none).
fn left(end_ns: u64) -> Duration {
    Duration::from_nanos(end_ns.saturating_sub(sys::mono_ns()).max(1_000_000))
}

/// Play tcp-rr flow `i` (see the module documentation); `lt` its settings.
pub(super) fn send(
    sc: &Scenario,
    i: usize,
    t0_ns: u64,
    lt: &LinuxTcp,
    request: u64,
    response: u64,
) -> io::Result<crate::traffic::SendReport> {
    let f = &sc.flows[i];
    let src = SocketAddr::new(flow_address(sc, f, f.src), 0);
    let dst = SocketAddr::new(flow_address(sc, f, f.dst), f.dst_port);
    let end_ns = t0_ns + sc.sim.duration.as_nanos() + sc.sim.drain.as_nanos();
    sys::install_stop_handler();
    sys::precise_timers();
    let every = sample_interval(sc);
    let live = Arc::new(Mutex::new(Live::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let paced = lt.kernel_paces();
    let samples = Live::sampler(&live, t0_ns, every, &stop, paced);
    let series = sc.output.timeseries.map(|d| d.as_nanos().max(1));
    let bins = Arc::new(Mutex::new(Vec::new()));
    let mut workers: Vec<JoinHandle<(RrConn, sys::TcpInfo)>> = Vec::new();
    let (mut late_max, mut late_100us) = (0u64, 0u64);
    for at in rr_instants(sc, i) {
        let due = t0_ns + at;
        if due >= end_ns || sys::stop_requested() {
            break;
        }
        sys::sleep_until(due);
        let late = sys::mono_ns().saturating_sub(due);
        late_max = late_max.max(late);
        late_100us += u64::from(late > 100_000);
        // (a setting refused is the flow's error, not one connection's)
        let sock = client_socket(f, lt, src)?;
        let fd = sock.as_raw_fd();
        Live::open(&live, fd);
        let (live, bins) = (Arc::clone(&live), Arc::clone(&bins));
        workers.push(std::thread::spawn(move || {
            let mut c = RrConn { start_ns: at, ..RrConn::default() };
            let started = sys::mono_ns();
            let count = |n: u64| {
                if let Some(every) = series {
                    bin(&bins, t0_ns, every, n);
                }
            };
            let done = exchange(sock.try_clone(), dst, (request, response), end_ns, &mut c, count);
            if let Err(e) = done {
                c.error = Some(e.to_string());
            }
            c.fct_ns = c.fct_ns.map(|done| done - started);
            let info = sys::tcp_info(fd).unwrap_or_default();
            c.srtt_ns = u64::from(info.rtt_us) * 1000;
            Live::close(&live, fd, &info);
            drop(sock); // (after it left `open`)
            (c, info)
        }));
    }
    let mut rep = TcpSent { t0_ns, cc: lt.cc.to_owned(), ..TcpSent::default() };
    let mut rtos = Some(0u64);
    for w in workers {
        let Ok((c, info)) = w.join() else { continue };
        rep.connected |= info.data_segs_out > 0 || c.response_bytes > 0;
        rep.ecn |= info.ecn;
        rep.written += c.request_bytes;
        rep.bytes_acked += info.bytes_acked;
        rep.segments_sent += u64::from(info.data_segs_out);
        rep.retransmits += u64::from(info.total_retrans);
        rtos = rtos.zip(info.total_rto).map(|(a, b)| a + u64::from(b));
        rep.ce_marks += u64::from(info.delivered_ce);
        rep.conns.push(c);
    }
    rep.rtos = rtos;
    stop.store(true, Ordering::Relaxed);
    rep.samples = samples.join().unwrap_or_default();
    rep.bins = std::mem::take(&mut *bins.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(crate::traffic::SendReport {
        flow: f.name.clone(),
        sent: rep.segments_sent,
        send_errors: 0,
        late_max_ns: late_max,
        late_100us,
        tcp: Some(rep),
    })
}

/// One request and its response over a new connection; `c.fct_ns` gets the instant
/// (`CLOCK_MONOTONIC`) the last response byte was read.
fn exchange(
    sock: io::Result<std::os::fd::OwnedFd>,
    dst: SocketAddr,
    (request, response): (u64, u64),
    end_ns: u64,
    c: &mut RrConn,
    count: impl Fn(u64),
) -> io::Result<()> {
    let sock = sock?;
    sys::set_timeout(sock.as_raw_fd(), libc::SO_SNDTIMEO, left(end_ns))?;
    sys::connect(&sock, dst).map_err(|e| named(format!("connect to {dst}"), e))?;
    let mut s = TcpStream::from(sock);
    s.set_write_timeout(Some(left(end_ns)))?;
    write_bytes(&mut s, request).map_err(|e| named(format!("request to {dst}"), e))?;
    c.request_bytes = request;
    let mut buf = vec![0u8; 64 * 1024];
    while c.response_bytes < response {
        s.set_read_timeout(Some(left(end_ns)))?;
        match s.read(&mut buf) {
            Ok(0) => return Err(io::Error::other(format!("{dst} closed before the response"))),
            Ok(n) => {
                c.response_bytes += n as u64;
                count(n as u64);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(named(format!("response from {dst}"), e)),
        }
    }
    c.fct_ns = Some(sys::mono_ns());
    Ok(())
}

/// Write `n` bytes (blocking, with the socket's timeout).
fn write_bytes(s: &mut TcpStream, n: u64) -> io::Result<()> {
    let chunk = [0x5au8; 16 * 1024];
    let mut left = n;
    while left > 0 {
        let k = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        s.write_all(&chunk[..k])?;
        left -= k as u64;
    }
    Ok(())
}

/// The server of a tcp-rr flow: a thread per accepted connection; with a time series, one
/// more samples the open connections at the end of each interval (the simulator's series adds
/// up both ends' connections).
#[derive(Debug)]
pub(super) struct Server {
    request: u64,
    response: u64,
    until_ns: u64,
    bins: Option<(u64, u64)>,
    stats: Arc<Mutex<TcpRecv>>,
    workers: Vec<JoinHandle<()>>,
    live: Arc<Mutex<Live>>,
    stop: Arc<AtomicBool>,
    samples: Option<JoinHandle<Vec<TcpSample>>>,
}

impl Server {
    /// Serve `(request, response)` bytes until `until_ns`; `bins`: the scenario's time zero
    /// and series interval (ns), for its bins and samples; `paced`: the kernel paces the
    /// connections (their pacing rates are sampled).
    pub(super) fn new(
        (request, response): (u64, u64),
        until_ns: u64,
        bins: Option<(u64, u64)>,
        paced: bool,
    ) -> Self {
        let stats = Arc::new(Mutex::new(TcpRecv::default()));
        let live = Arc::new(Mutex::new(Live::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let samples = bins.map(|(t0, every)| Live::sampler(&live, t0, every, &stop, paced));
        let workers = Vec::new();
        Server { request, response, until_ns, bins, stats, workers, live, stop, samples }
    }

    /// Serve connection `c`.
    pub(super) fn serve(&mut self, c: TcpStream) {
        let (request, response, until, bins) =
            (self.request, self.response, self.until_ns, self.bins);
        let (stats, live) = (Arc::clone(&self.stats), Arc::clone(&self.live));
        Live::open(&live, c.as_raw_fd());
        self.workers.push(std::thread::spawn(move || {
            let _ = answer(c, (request, response), until, bins, &stats, &live);
        }));
    }

    /// Wait for every connection (they end by the run's end) and add them up into `out`.
    pub(super) fn finish(mut self, out: &mut TcpRecv) {
        for w in std::mem::take(&mut self.workers) {
            let _ = w.join();
        }
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.samples.take().and_then(|s| s.join().ok()).unwrap_or_default();
        *out = std::mem::take(&mut *self.stats.lock().unwrap_or_else(|p| p.into_inner()));
        out.samples = samples;
    }
}

impl Drop for Server {
    /// A server dropped unfinished (its receiver failed) stops sampling.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Read the request, write the response, wait for the client to close; count into `stats`;
/// take the connection out of `live` before its socket closes.
fn answer(
    mut c: TcpStream,
    (request, response): (u64, u64),
    until_ns: u64,
    bins: Option<(u64, u64)>,
    stats: &Mutex<TcpRecv>,
    live: &Mutex<Live>,
) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0u64;
    let record = |n: u64| {
        let now = sys::mono_ns();
        let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
        s.bytes += n;
        if s.first_ns == 0 || now < s.first_ns {
            s.first_ns = now;
        }
        s.last_ns = s.last_ns.max(now);
        if let Some((t0, every)) = bins {
            let k = (now.saturating_sub(t0) / every) as usize;
            if s.bins.len() <= k {
                s.bins.resize(k + 1, 0);
            }
            s.bins[k] += n;
        }
    };
    // (every way out passes `Live::close` below, before the socket closes)
    let result = (|| {
        c.set_nonblocking(false)?;
        while got < request {
            c.set_read_timeout(Some(left(until_ns)))?;
            match c.read(&mut buf) {
                Ok(0) => return Err(io::Error::other("closed before the whole request")),
                Ok(n) => {
                    got += n as u64;
                    record(n as u64);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        c.set_write_timeout(Some(left(until_ns)))?;
        write_bytes(&mut c, response)?;
        c.shutdown(Shutdown::Write)?;
        // until the client's close (its FIN after the response)
        loop {
            c.set_read_timeout(Some(left(until_ns)))?;
            match c.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    })();
    let info = sys::tcp_info(c.as_raw_fd()).unwrap_or_default();
    Live::close(live, c.as_raw_fd(), &info);
    let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
    s.conns += 1;
    s.data_segs_in += u64::from(info.data_segs_in);
    s.segments_sent += u64::from(info.data_segs_out);
    s.retransmits += u64::from(info.total_retrans);
    // every connection so far answered and closed by its client
    s.eof = result.is_ok() && (s.conns == 1 || s.eof);
    result
}
