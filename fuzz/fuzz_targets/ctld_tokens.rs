//! The service's token file and its check of a request's token: any file text is a token set
//! or an error naming a line, never a panic; with a set, any method, path and `Authorization`
//! value is allowed or answered 401 / 403 naming the field, and only a listed write token lets a
//! request other than GET through. The input is the file's text, a NUL, then the method's line,
//! the path's line and the header's value.
#![no_main]

use latnet_ctld::Tokens;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (file, ask) = text.split_once('\0').unwrap_or((text, ""));
    let tokens = match Tokens::parse("tokens", file) {
        Ok(t) => t,
        Err(e) => {
            assert!(e.starts_with("tokens"), "{e}");
            // the fixed set below, so that the check is exercised on every input
            match Tokens::parse("t", "write 0123456789abcdef\nread fedcba9876543210\n") {
                Ok(t) => t,
                Err(e) => panic!("{e}"),
            }
        }
    };
    let mut lines = ask.splitn(3, '\n');
    let (method, path, header) =
        (lines.next().unwrap_or(""), lines.next().unwrap_or(""), lines.next());
    match tokens.check(method, path, header) {
        Ok(()) => {
            let health = method == "GET"
                && path.split('?').next().unwrap_or("").trim_end_matches('/') == "/health";
            assert!(health || header.is_some(), "{method} {path} allowed without a token");
        }
        Err((status, body)) => {
            assert!(status == 401 || status == 403, "{status}");
            assert_eq!(body["field"], "Authorization");
        }
    }
});
