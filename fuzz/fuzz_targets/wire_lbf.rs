//! LBF block: the block parser (round trip), locating it in a frame through either carrier,
//! and in-place per-hop updates of a located block.
#![no_main]

use latnet_wire::lbf::{self, LbfBlock, LbfRepr};
use latnet_wire::parse_headers;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = LbfBlock::new_checked(data) {
        if let Ok(r) = LbfRepr::parse(&b) {
            let mut out = [0u8; lbf::BLOCK_LEN];
            r.emit_into(&mut out);
            assert_eq!(out[..], data[..lbf::BLOCK_LEN]);
        }
    }
    if let Ok(h) = parse_headers(data) {
        for shim in [false, true] {
            if let Ok(Some(loc)) = lbf::locate(data, &h, shim) {
                assert!(loc.offset + lbf::BLOCK_LEN <= data.len());
                let mut f = data.to_vec();
                let mut blk = lbf::block_mut(&mut f, loc.offset).expect("located block is present");
                blk.set_value_ns(blk.value_ns().wrapping_add(1));
                blk.set_late(true);
                let again = lbf::locate(&f, &h, shim).expect("still valid").expect("still there");
                assert!(again.repr.late);
            }
        }
    }
});
