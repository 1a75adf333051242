//! `codemode mcp serve --http` (crates/serve/src/http.rs): the raw bytes of one HTTP/1.1
//! connection from a client on loopback, through hyper's parser, the path and bearer-token
//! checks and rmcp's streamable HTTP service (Host, Origin, `Mcp-Session-Id`,
//! `MCP-Protocol-Version`, `Accept`, `Content-Type`, the body).
//!
//! Input: bytes, sent as they are to two fronts: one that requires a bearer token and one that
//! does not (loopback's default). Their engine has no tools.
//!
//! Property: no panic; the front with a token answers nothing but an error to a request that does
//! not carry the token (the fuzzer cannot guess it): no `HTTP/1.1 2xx`.
#![no_main]

use std::sync::OnceLock;

use codemode_serve::fuzzing::HttpFront;
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "fuzz-token-b1c0a8e4d5f6a7b8c9d0e1f2";

fn fronts() -> &'static (HttpFront, HttpFront) {
    static FRONTS: OnceLock<(HttpFront, HttpFront)> = OnceLock::new();
    FRONTS.get_or_init(|| {
        let workspace = std::env::temp_dir().join(format!("codemode-fuzz-http-{}", std::process::id()));
        std::fs::create_dir_all(&workspace).expect("a workspace folder");
        (HttpFront::new(&workspace, Some(TOKEN)), HttpFront::new(&workspace, None))
    })
}

fuzz_target!(|data: &[u8]| {
    let (guarded, open) = fronts();
    let answer = guarded.answer(data);
    let carries_token = data.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes());
    if !carries_token {
        assert!(!answer.starts_with(b"HTTP/1.1 2"), "answered without the token: {}", String::from_utf8_lossy(&answer));
    }
    let _ = open.answer(data);
});
