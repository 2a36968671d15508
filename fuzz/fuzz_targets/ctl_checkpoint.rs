//! Controller checkpoints (the service's snapshot, `GET /snapshot`): any JSON is a checkpoint
//! or an error naming the key, and any checkpoint is restored or refused, never a panic. A
//! refused one leaves the controller empty; a restored one is the state the controller reports
//! as its own checkpoint (flows by id, rerouted ids sorted) and still answers a request.
#![no_main]

use latnet_ctl::{Checkpoint, Controller, CtlConfig, FlowRequest, Topology};
use latnet_units::{Bytes, Duration, Rate};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let Ok(topo) = Topology::fat_tree(4, 2, Rate::from_gbps(1)) else { return };
    let topo = Arc::new(topo);
    let Ok(cp) = Checkpoint::from_json(&topo, &v) else { return };
    let Ok(cfg) = CtlConfig::chameleon(8) else { return };
    let Ok(mut ctl) = Controller::new(topo.clone(), cfg) else { return };
    match ctl.restore(&cp) {
        Err(_) => {
            assert!(ctl.is_empty());
            assert_eq!(ctl.stats(), Default::default());
        }
        Ok(()) => {
            let mine = ctl.checkpoint();
            let mut flows = cp.flows.clone();
            flows.sort_by_key(|f| f.0);
            let mut rerouted = cp.rerouted.clone();
            rerouted.sort_unstable();
            rerouted.dedup();
            assert_eq!((mine.flows, mine.rerouted), (flows, rerouted));
            let hosts = topo.hosts();
            let r = FlowRequest {
                src: hosts[0],
                dst: hosts[hosts.len() - 1],
                rate: Rate::from_mbps(1),
                burst: Bytes::new(500),
                deadline: Duration::from_millis(50),
            };
            let _ = ctl.request(r);
        }
    }
});
