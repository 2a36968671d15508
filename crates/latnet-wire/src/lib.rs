//! Zero-copy views and validated reprs of the packet formats latnet forwards, in the style of
//! smoltcp's `wire` module.
//!
//! | module | format | view | repr / helpers |
//! |---|---|---|---|
//! | [`ethernet`] | Ethernet II | [`EthernetFrame`] | [`EthernetRepr`], [`EthernetAddress`], [`EtherType`] |
//! | [`vlan`] | 802.1Q / 802.1ad tags and stacks | [`VlanHeader`] | [`VlanTag`], [`vlan_stack`], [`push_vlan`], [`pop_vlan`] |
//! | [`ipv4`] | IPv4 | [`Ipv4Packet`] | [`Ipv4Repr`], incremental `set_ecn` / `decrement_ttl` |
//! | [`ipv4_option`] | IPv4 options | — | [`Ipv4Option`], [`Ipv4Options`], [`Ipv4OptionBuf`] |
//! | [`ipv6`] | IPv6 fixed header | [`Ipv6Packet`] | [`Ipv6Repr`] |
//! | [`ipv6_ext`] | IPv6 extension headers, hop-by-hop options | [`Ipv6ExtHeader`] | [`find_upper_layer`], [`Ipv6HopByHopRepr`], [`Ipv6Option`], [`Ipv6OptionsWriter`] |
//! | [`udp`] | UDP | [`UdpPacket`] | [`UdpRepr`] |
//! | [`tcp`] | TCP | [`TcpPacket`] | [`TcpRepr`], [`TcpFlags`], [`TcpSeqNumber`] |
//! | [`tcp_option`] | TCP options | — | [`TcpOption`], [`TcpOptions`], [`TcpOptionBuf`] |
//! | [`checksum`] | RFC 1071 / RFC 1624 checksums, pseudo-headers | — | free functions |
//! | [`lbf`] | Latency-Based Forwarding block (IPv6 hop-by-hop option or UDP shim) | [`LbfBlock`] | [`LbfRepr`], [`LbfMode`], [`lbf::locate`] |
//! | [`headers`] | one-call walk for switches | — | [`parse_headers`] → [`Headers`], [`FlowKey`] |
//! | [`build`] | header builders for simulators | — | [`build_udp_ipv4`], [`build_udp_ipv6`], [`build_tcp_ipv4`], [`build_tcp_ipv6`] |
//! | [`option_edit`] | one IPv4 option / IPv6 hop-by-hop option of a whole frame | — | [`find_ip_option`], [`set_ip_option`] (rewrite or insert) |
//! | [`ppv`] | Per Packet Value option (16-bit value) | — | [`PacketValue`], [`packet_info`], [`set_packet_value`] |
//! | [`large_flow`] | large-flow option of switch-assisted pacing | — | [`LargeFlowOption`], [`large_flow_option`], [`set_large_flow_option`] |
//! | [`x509`] | two dates of a DER certificate or revocation list (the control plane's TLS files) | — | [`x509::not_after`], [`x509::next_update`], [`x509::left`] |
//!
//! # Views and reprs
//!
//! A view `Xxx<T: AsRef<[u8]>>` wraps a buffer without copying. `new_unchecked` wraps blindly;
//! `new_checked` first runs `check_len`, which validates that the header is complete and
//! self-consistent. **Once `new_checked` succeeded, no accessor of that view panics**; accessors
//! whose range depends on a length field (options, payload) clamp to the buffer, so they stay
//! panic-free even after a setter rewrote that field. Setters exist for `T: AsMut<[u8]>`.
//!
//! A repr (`XxxRepr`) is the validated content of a header: `parse(&view)` checks everything the
//! format requires (version, IPv4 header checksum, option syntax), `buffer_len()` is the number of
//! bytes `emit(&self, &mut view)` writes, and `parse` then `emit` reproduces the header byte for
//! byte (options are kept as raw, validated bytes for that reason). `emit` panics only if the
//! buffer is shorter than `buffer_len()` or the repr fails its `check()`.
//!
//! # Virtual payloads (the truncation convention)
//!
//! In latnet's simulator a packet often carries only its header bytes plus a *virtual* payload
//! length: the IP and UDP length fields say 1500 while the buffer holds 42 bytes. Therefore the
//! IPv4, IPv6, UDP and TCP views validate only their headers, never that the payload is present.
//! `payload()` returns the bytes that are present (up to the declared length) and
//! `payload_missing()` / `is_truncated()` tell how many are absent. Checksums over a payload can
//! be *verified* only when it is complete (`verify_checksum` returns `None` otherwise); they can
//! always be *filled*, counting absent bytes as zeros. The IPv4 header checksum covers the header
//! only and always works. UDP over IPv4 may carry checksum 0 ("none").
//!
//! # Errors and the no-panic promise
//!
//! Every parser returns [`WireError`] (`Truncated`, `Malformed` or `Unsupported`, tagged with the
//! [`Layer`]) and never panics on any input; property tests and the cargo-fuzz targets in the
//! repository's `fuzz/` directory exercise that. Hostile inputs are bounded: at most
//! [`MAX_TAGS`] VLAN tags and [`ipv6_ext::MAX_EXT_HEADERS`] extension headers are walked.
#![forbid(unsafe_code)]

pub mod build;
pub mod checksum;
mod error;
pub mod ethernet;
pub mod headers;
pub mod ip;
pub mod ipv4;
pub mod ipv4_option;
pub mod ipv6;
pub mod ipv6_ext;
pub mod large_flow;
pub mod lbf;
pub mod option_edit;
pub mod ppv;
pub mod tcp;
pub mod tcp_option;
pub mod udp;
mod util;
pub mod vlan;
pub mod x509;

pub use build::{build_tcp_ipv4, build_tcp_ipv6, build_udp_ipv4, build_udp_ipv6};
pub use error::{Layer, Result, WireError};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use headers::{parse_headers, FlowKey, Headers, L3, L4};
pub use ip::{protocol, Ecn};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv4_option::{Ipv4Option, Ipv4OptionBuf, Ipv4Options};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use ipv6_ext::{
    find_upper_layer, Ipv6ExtHeader, Ipv6HopByHopRepr, Ipv6Option, Ipv6OptionData, Ipv6Options,
    Ipv6OptionsWriter, RouterAlert, UnknownOptionAction, UpperLayer,
};
pub use large_flow::{large_flow_option, set_large_flow_option, LargeFlowMsg, LargeFlowOption};
pub use lbf::{LbfBlock, LbfMode, LbfRepr};
pub use option_edit::{find_ip_option, set_ip_option, OptionKinds};
pub use ppv::{packet_info, packet_value, set_packet_value, PacketValue, PvInfo};
pub use tcp::{TcpFlags, TcpPacket, TcpRepr, TcpSeqNumber};
pub use tcp_option::{SackBlocks, TcpOption, TcpOptionBuf, TcpOptions};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{
    pop_vlan, push_vlan, vlan_stack, VlanHeader, VlanStack, VlanTag, VlanTags, MAX_TAGS,
};
