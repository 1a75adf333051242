//! Arguments of MCP tool calls as they reach the server (issue 35, item
//! 7): a `null` for an optional property passes the input-schema check
//! and is sent as written (over HTTP its `Mcp-Param-*` header is omitted,
//! as for an absent argument: the conformance scenario
//! `http-custom-headers`, tests/all/conformance.rs). A real `codemode run`
//! and the fixture server, whose `echo` returns the arguments it got.

use serde_json::{Value, json};

use crate::cli::codemode;
use crate::mcp_support::fixture;

#[test]
fn a_null_for_an_optional_property_is_sent_as_written() {
    let ws = crate::common::workspace();
    let file = ws.path().join("servers.json");
    let servers = json!({"mcpServers": {"fixture": {"command": "python3", "args": [fixture(), "normal"]}}});
    std::fs::write(&file, servers.to_string()).unwrap();
    let program = "const got = []; \
        for (const args of [{text: null}, {text: 5}]) { \
          try { const c = (await tools.call('mcp__fixture__echo', args)).content; \
                got.push(typeof c === 'string' ? JSON.parse(c) : c); } \
          catch (e) { got.push([e.kind, e.message]); } \
        } return got;";
    let out = codemode(&["run", "-", "--json", "--mcp-config", file.to_str().unwrap()], program, ws.path());
    let receipt: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no receipt ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let got = &receipt["value"];
    assert_eq!(got[0], json!({"text": null}), "{receipt:#}");
    // A value of the wrong type is still refused before it is sent.
    assert_eq!(got[1][0], "refused", "{receipt:#}");
    assert!(got[1][1].as_str().unwrap().contains("/text"), "{receipt:#}");
}
