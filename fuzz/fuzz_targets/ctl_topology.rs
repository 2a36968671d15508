//! Controller topology files: any text parses to a topology or a located error; a parsed
//! topology builds a controller and answers a request between its first and last host without
//! panicking.
#![no_main]

use latnet_ctl::{Controller, CtlConfig, FlowRequest, Topology};
use latnet_units::{Bytes, Duration, Rate};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(topo) = Topology::from_toml("fuzz.toml", text) else { return };
    if topo.nodes().len() > 200 {
        return;
    }
    let hosts = topo.hosts();
    let Ok(cfg) = CtlConfig::chameleon(2) else { return };
    let Ok(mut ctl) = Controller::new(Arc::new(topo), cfg) else { return };
    if let (Some(&src), Some(&dst)) = (hosts.first(), hosts.last()) {
        let r = FlowRequest {
            src,
            dst,
            rate: Rate::from_mbps(1),
            burst: Bytes::new(500),
            deadline: Duration::from_millis(50),
        };
        if let Ok(a) = ctl.request(r) {
            let e = ctl.flow(a.id).cloned().expect("admitted flow");
            assert!(e.guarantee <= r.deadline);
            assert!(ctl.tags(&e).len() < e.hops.len());
            assert!(ctl.remove(a.id).is_some());
            assert!(ctl.is_empty());
        }
    }
});
