//! The one error type of this crate: [`WireError`], tagged with the [`Layer`] it concerns.

use std::fmt;

/// The protocol layer (or sub-structure) an error concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// Ethernet II header.
    Ethernet,
    /// An 802.1Q / 802.1ad tag or a stack of them.
    Vlan,
    /// IPv4 fixed header.
    Ipv4,
    /// An IPv4 option.
    Ipv4Option,
    /// IPv6 fixed header.
    Ipv6,
    /// An IPv6 extension header (hop-by-hop, routing, fragment, destination options).
    Ipv6ExtHeader,
    /// A TLV option inside a hop-by-hop or destination-options header.
    Ipv6Option,
    /// UDP header.
    Udp,
    /// TCP header.
    Tcp,
    /// A TCP option.
    TcpOption,
    /// The Latency-Based Forwarding block (see [`crate::lbf`]).
    Lbf,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Ethernet => "Ethernet",
            Layer::Vlan => "802.1Q tag",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv4Option => "IPv4 option",
            Layer::Ipv6 => "IPv6",
            Layer::Ipv6ExtHeader => "IPv6 extension header",
            Layer::Ipv6Option => "IPv6 option",
            Layer::Udp => "UDP",
            Layer::Tcp => "TCP",
            Layer::TcpOption => "TCP option",
            Layer::Lbf => "LBF block",
        })
    }
}

/// Why bytes could not be read as (or written as) a header.
///
/// `Copy` and a few words wide, so returning it on the hot path costs nothing. In `Truncated`,
/// `need` and `have` count bytes from the start of the buffer the failing call was given (the
/// header for a view, the frame for [`crate::parse_headers`] and the tag-stack functions, the
/// IPv6 header for the extension-header walk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The buffer ends before the header (or option) does.
    #[error("{layer}: truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Layer whose header is cut short.
        layer: Layer,
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// A field holds a value that makes the header inconsistent.
    #[error("{layer}: malformed {field}")]
    Malformed {
        /// Layer of the field.
        layer: Layer,
        /// Name of the field.
        field: &'static str,
    },
    /// The header is well-formed but uses something this crate does not handle.
    #[error("{layer}: unsupported {what}")]
    Unsupported {
        /// Layer concerned.
        layer: Layer,
        /// What is not supported.
        what: &'static str,
    },
}

impl WireError {
    /// The layer this error concerns.
    pub fn layer(&self) -> Layer {
        match *self {
            WireError::Truncated { layer, .. }
            | WireError::Malformed { layer, .. }
            | WireError::Unsupported { layer, .. } => layer,
        }
    }

    pub(crate) const fn truncated(layer: Layer, need: usize, have: usize) -> WireError {
        WireError::Truncated { layer, need, have }
    }

    pub(crate) const fn malformed(layer: Layer, field: &'static str) -> WireError {
        WireError::Malformed { layer, field }
    }

    pub(crate) const fn unsupported(layer: Layer, what: &'static str) -> WireError {
        WireError::Unsupported { layer, what }
    }
}

/// Result with [`WireError`].
pub type Result<T, E = WireError> = std::result::Result<T, E>;

/// Fails with `Truncated` unless `have >= need`.
#[inline]
pub(crate) fn need(layer: Layer, need: usize, have: usize) -> Result<()> {
    if have < need {
        Err(WireError::truncated(layer, need, have))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_layer_and_field() {
        let e = WireError::malformed(Layer::Ipv4, "ihl");
        assert_eq!(e.to_string(), "IPv4: malformed ihl");
        let e = WireError::truncated(Layer::Tcp, 20, 7);
        assert_eq!(e.to_string(), "TCP: truncated: need 20 bytes, have 7");
        assert_eq!(e.layer(), Layer::Tcp);
        assert!(std::mem::size_of::<WireError>() <= 32);
    }
}
