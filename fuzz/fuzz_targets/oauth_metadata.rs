//! What `codemode mcp login` reads from an authorization server
//! (crates/codemode/src/mcp/oauth/mod.rs, on rmcp's `auth`): the 401's
//! `WWW-Authenticate` challenge, protected resource metadata (RFC 9728),
//! authorization server metadata (RFC 8414 / OpenID Connect discovery),
//! the dynamic client registration response (RFC 7591) and the token
//! response, served from memory in the order rmcp asks for them.
//!
//! Input: parts separated by the byte 0xFF (never in UTF-8 text): the
//! first is the challenge (empty: none), each next one answers the next
//! request (a JSON body with status 200, or `NNN\n` and a body for status
//! NNN); requests after the last part get a 404.
//!
//! Properties: no panic, no hang; discovery makes a bounded number of
//! requests; discovered metadata serialises and reads back to the same
//! value; the challenge parses without panicking and its
//! `resource_metadata` is an absolute URL.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Most requests one login may make on any answers.
const MAX_REQUESTS: usize = 32;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0xff);
    let challenge = parts.next().and_then(|c| std::str::from_utf8(c).ok()).filter(|c| !c.is_empty());
    let answers: Vec<Vec<u8>> = parts.map(<[u8]>::to_vec).collect();
    if let Some(header) = challenge {
        let params = codemode::fuzzing::oauth_challenge(header);
        if let Some(url) = params["resource_metadata"].as_str() {
            assert!(url.contains("://"), "{url}");
        }
    }
    let run = codemode::fuzzing::oauth_login(challenge, answers);
    assert!(run.requests <= MAX_REQUESTS, "{} requests", run.requests);
    if let Some(metadata) = run.metadata {
        let text = serde_json::to_string(&metadata).unwrap();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, metadata);
    }
});
