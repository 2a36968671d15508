//! The service's HTTP/1.1 request reader: any bytes are a request not yet whole, a request
//! (method, path, and the body once whole) or the reply a client would get (400, 413, 431, 501,
//! 505, naming what is wrong), never a panic; a body is never larger than the service takes.
#![no_main]

use latnet_ctld::{read_request, ReadRequest, MAX_BODY};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match read_request(data) {
        Ok(None) => {}
        Ok(Some(ReadRequest { method, target: path, body })) => {
            assert!(!method.is_empty() && path.starts_with('/'), "{method:?} {path:?}");
            assert!(body.is_none_or(|b| b.len() <= MAX_BODY));
        }
        Err((status, body)) => {
            assert!(matches!(status, 400 | 413 | 431 | 501 | 505), "{status}");
            assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{body}");
        }
    }
});
