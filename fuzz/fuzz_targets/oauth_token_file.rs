//! The login file codemode reads back (crates/codemode/src/mcp/oauth/store.rs):
//! `{"url": URL, "credentials": ...}` with rmcp's stored credentials.
//!
//! Input: the file's content.
//!
//! Properties: no panic; a file that reads writes back as text that reads
//! again to the same JSON (a fixed point); an error names the file and
//! where it broke and never quotes the content (it may hold tokens).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match codemode::fuzzing::oauth_token_file(data) {
        Ok(Some(text)) => {
            // Compared as JSON: the token response's extra fields are a
            // map whose order may change from one write to the next.
            let again = codemode::fuzzing::oauth_token_file(text.as_bytes()).unwrap().unwrap();
            let json = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
            assert_eq!(json(&again), json(&text), "written back, it reads the same");
        }
        Ok(None) => {}
        Err(message) => {
            let path = codemode::fuzzing::oauth_token_file_path();
            let rest = message.strip_prefix(&path).unwrap_or_else(|| panic!("{message}"));
            let fixed = rest.chars().filter(|c| !c.is_ascii_digit()).collect::<String>();
            assert!(
                fixed == " is not a codemode login (line , column ); remove it with `codemode mcp logout`"
                    || fixed == " is larger than  KiB, more than a codemode login holds; remove it with `codemode mcp logout`",
                "{message}"
            );
        }
    }
});
