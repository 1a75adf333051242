//! The MCP configuration parser (crates/codemode/src/mcp/config/, dialect.rs): JSONC in
//! the dialects of other clients, `${VAR}` expansion, `envFile`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let base = std::path::Path::new("/nonexistent/codemode-fuzz");
    let env = |name: &str| (name == "FUZZ_TOKEN").then(|| "fuzz-secret-value".to_owned());
    if let Ok(config) = codemode::mcp::McpConfig::parse(text, base, &env) {
        let _ = config.warnings();
        for server in config.enabled() {
            let _ = server.launch_line();
            let _ = server.launch_hash();
            let _ = server.redact(text);
        }
    }
});
