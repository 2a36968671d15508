//! latnet's real-time software switch and testbed tools.
//!
//! The switch runs the simulator's elements — the same [`latnet_sim::switch::Forwarder`]
//! (FIB lookup, TTL, priority from DSCP), the same `latnet-dataplane` queues built from the
//! same scenario file — on real frames read from veth interfaces between network namespaces,
//! with real Linux TCP stacks and applications at the hosts. Link rate and propagation delay
//! are emulated per port in userspace (there is no netem on the kernels latnet targets).
//!
//! | module | what |
//! |---|---|
//! | [`core`] | [`core::SwitchCore`]: forwarding, queues, rate / delay emulation; no I/O, no clock |
//! | [`runner`] | the real-time loop: `CLOCK_MONOTONIC`, receive rings, batched sends, `ppoll`; one switch, or several in one loop ([`runner::run_many`]) |
//! | [`sys`] | the only `unsafe` code: `AF_PACKET` rings, clocks, signals, socket options, `bpf(2)` |
//! | [`agent`] | the Chameleon host agent: polls the controller service, programs each admitted flow's tagger entry and HTB shaper, best-effort routes |
//! | [`tagger`] | the host agent's tagger: a BPF program on a host's egress pushing each flow's tag stack, DSCP and shaper class |
//! | [`plan`] | testbed conventions: namespaces, interface names, MACs, host routes |
//! | [`stats`] | the statistics file (per interface, port, queue, class, flow, node) |
//! | [`replace`] | files rewritten whole while a loop runs (statistics, the agent's status), by a thread of their own: the loop never waits for the disk |
//! | [`tcp`] | bulk sender / receiver on the kernel's TCP; the host side of switch-assisted pacing |
//! | [`traffic`] | UDP sender / receiver with one-way latency, loss, reorder and corruption checks |
//! | [`results`] | an emulated run's results in the simulator's format |
//!
//! # Receive path: why `TPACKET_V2`
//!
//! A `TPACKET_V3` ring hands frames to userspace a *block* at a time, when the block is full or
//! its retire timer (at least 1 ms) expires; a lone latency probe would wait up to that long.
//! `TPACKET_V2` rings publish every frame as soon as the kernel wrote it, and the loop still
//! works in batches: each wake-up drains up to 256 frames per ring, taking the rings' frames
//! oldest first (by their kernel timestamps, below), and sends with one `sendmmsg` per
//! interface per 64 frames.
//!
//! A frame's emulated arrival is the ring's timestamp (`tp_sec` / `tp_nsec`: when the kernel put
//! it there, `CLOCK_REALTIME` converted to the switch's `CLOCK_MONOTONIC`), not the moment the
//! switch got round to reading it, clamped so that it is never before what the core has already
//! emulated nor after the read (the clock is read once the frame is found in its ring; frames
//! waiting in several rings are taken in arrival order): a switch woken late gives the delay
//! back to the emulated link (statistics `rx_read_late_10us`, `rx_read_late_max_ns`;
//! docs/lbf.md measures the effect; a timestamp the conversion put after the read counts in
//! `rx_stamp_ahead`, `rx_stamp_ahead_max_ns`). A frame from another switch served by the same loop
//! (`run --node A,B`) arrives at the instant that switch's core made it due, not when the kernel
//! delivered it, so that the sender's late wake-ups do not add up along a path either
//! (`rx_in_loop`, `rx_in_loop_absorbed_max_ns`; see `runner::in_flight`).
//!
//! Per frame, the switch copies once: from the ring slot into a pooled buffer, which then moves
//! through the queues and delay lines and is handed to `sendmmsg` as is (the all-zero
//! `virtio_net_hdr` is a second iovec), coming back to the pool after the call. Waits shorter
//! than 20 us (typically the few hundred ns until a frame's emulated serialization ends) are
//! spent polling the clock and the rings instead of sleeping in `ppoll`. A ring was also
//! measured against `recvmmsg` straight into pooled buffers (one copy, in the switch's context
//! instead of the sender's): with `recvmmsg` TCP through the switch was 9-14 % slower and the
//! switch used about 18 % more CPU per frame (two runs each), so the ring stays.
//!
//! # Offloads
//!
//! veth interfaces hand over frames with *partial* checksums (`CHECKSUM_PARTIAL`) and, with TSO
//! / GSO on, super-packets of up to 64 KiB. The switch reads a `virtio_net_hdr` with every frame
//! (`PACKET_VNET_HDR`): partial checksums are completed in software (counted as
//! `csum_completed`), so hosts may keep checksum offload on. GSO super-packets cannot be queued
//! as one frame and are dropped as `malformed` (counted as `rx_gso`): the testbed turns TSO and
//! GSO off on host interfaces (`ethtool -K IF tso off gso off`) so that queues see real frames.
//!
//! The kernel also takes the outer 802.1Q tag out of every tagged frame it receives and hands
//! it over beside the frame (`TP_STATUS_VLAN_VALID`); the switch puts it back before parsing,
//! so tag-stack source routing sees the stack the previous switch sent.

pub mod agent;
pub mod core;
pub mod plan;
pub mod replace;
pub mod results;
pub mod runner;
pub mod stats;
pub mod sys;
pub mod tagger;
pub mod tcp;
pub mod tcpflow;
pub mod traffic;
