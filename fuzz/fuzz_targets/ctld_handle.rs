//! The Chameleon service's request handling: any method, path and body gets an answer with a
//! status in 2xx-5xx and a JSON body (or none), never a panic; a body that is not a valid flow
//! request changes nothing. The input is the method's line, the path's line, then the body.
#![no_main]

use latnet_ctld::{Service, ServiceConfig};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == b'\n');
    let (Some(method), Some(path), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let (Ok(method), Ok(path)) = (std::str::from_utf8(method), std::str::from_utf8(path)) else {
        return;
    };
    let cfg = ServiceConfig::fat_tree(4, 4);
    let Ok(mut svc) = Service::open(Path::new(":memory:"), cfg) else { return };
    let (status, reply) = svc.handle(method, path, body);
    assert!((200..600).contains(&status), "{status}");
    if status >= 400 {
        assert_eq!(svc.controller().len(), 0, "{status} {reply}");
    }
});
