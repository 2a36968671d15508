//! Per Packet Value (PPV): throughput-value functions ([`tvf`]) and the edge marker
//! ([`marker`]). The bottleneck side is the VDQ-CSAQM queue, [`crate::queue::VdqCsaqm`]; the
//! value travels in the packet as [`latnet_wire::ppv`] describes.

pub mod marker;
pub mod tvf;

pub use marker::{MarkMethod, MarkerSpec, MarkerStats, PvMarker};
pub use tvf::Tvf;

/// `log2(x)` in fixed point with 16 fractional bits, truncated (`x >= 1`; `log2_q16(0)` is 0).
///
/// Integer only (the mantissa is squared 16 times in 128 bits), so it gives the same result on
/// every machine. The error is below `2^-16`.
pub fn log2_q16(x: u64) -> u64 {
    if x == 0 {
        return 0;
    }
    let n = 63 - u64::from(x.leading_zeros());
    // mantissa in [1, 2) as Q63
    let mut m: u128 = u128::from(x) << (63 - n);
    let mut frac = 0u64;
    for i in (0..16).rev() {
        m = (m * m) >> 63;
        if m >= 1u128 << 64 {
            m >>= 1;
            frac |= 1 << i;
        }
    }
    (n << 16) | frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_matches_float_within_one_ulp() {
        assert_eq!(log2_q16(1), 0);
        assert_eq!(log2_q16(2), 1 << 16);
        assert_eq!(log2_q16(1 << 40), 40 << 16);
        for x in [3u64, 5, 10, 1000, 12345, 900_000, 1_000_000_000, u64::MAX] {
            let exact = (x as f64).log2() * 65536.0;
            let got = log2_q16(x) as f64;
            assert!(got <= exact + 1e-6 && exact - got < 1.0 + 1e-6, "x={x}: {got} vs {exact}");
        }
    }
}
