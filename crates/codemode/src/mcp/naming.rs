//! Catalog names for MCP tools (DESIGN.md §7): `mcp__<server>__<tool>`.
//!
//! Catalog names allow `[A-Za-z0-9_-]` and at most 128 bytes (see
//! `catalog::valid_name`). Each character of the server or tool name outside
//! that set becomes `_`. When anything had to change (a character replaced,
//! or a name too long), or the name does not split back into one server
//! and one tool at the first `__` after the prefix (a server name holding
//! `__` or ending with `_`, a tool name starting with `_`: server `files_`
//! tool `read` and server `files` tool `_read` would both read
//! `mcp__files___read`), `_` and 8 hex digits of the SHA-256 of the
//! original `server`, NUL, `tool` are appended. So two different tools
//! never share a name, and every tool of such a pair gets the suffix (none
//! keeps the plain name and wins). The rule looks at one name at a time,
//! never at the other tools, so a name does not change when another
//! server's tools are listed, relisted or loaded from the schema cache.
//! Names that need no change are kept as they are, so
//! `mcp__github__create_issue` stays readable.

use sha2::{Digest, Sha256};

/// Longest catalog name (bytes), as `catalog::valid_name` allows.
pub const MAX_NAME_LEN: usize = 128;

/// The prefix of every MCP tool name.
pub const TOOL_PREFIX: &str = "mcp__";

/// The prefix of the permission a server's connection needs.
pub use codemode_base::CONNECT_PREFIX;

/// Hex digits of the disambiguating hash.
const HASH_HEX: usize = 8;

/// The catalog name of `tool` on `server`: `mcp__<server>__<tool>`,
/// sanitised as the module docs say. Always a valid catalog name.
pub fn tool_name(server: &str, tool: &str) -> String {
    let (s, s_changed) = sanitise(server);
    let (t, t_changed) = sanitise(tool);
    let plain = format!("{TOOL_PREFIX}{s}__{t}");
    let ambiguous = s.contains("__") || s.ends_with('_') || t.starts_with('_');
    let changed = s_changed || t_changed || ambiguous || s.is_empty() || t.is_empty();
    if !changed && plain.len() <= MAX_NAME_LEN {
        return plain;
    }
    with_hash(plain, &hash_of(&[server, tool]))
}

/// The permission a connection to `server` needs: `mcp_connect__<server>`,
/// sanitised the same way (the hash is of the server name alone).
pub fn connect_name(server: &str) -> String {
    let (s, changed) = sanitise(server);
    let plain = format!("{CONNECT_PREFIX}{s}");
    if !changed && !s.is_empty() && plain.len() <= MAX_NAME_LEN {
        return plain;
    }
    with_hash(plain, &hash_of(&[server]))
}

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`; says whether
/// any was replaced.
fn sanitise(name: &str) -> (String, bool) {
    let mut changed = false;
    let out = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                changed = true;
                '_'
            }
        })
        .collect();
    (out, changed)
}

fn hash_of(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hasher.update([0u8]);
        }
        hasher.update(part.as_bytes());
    }
    hasher.finalize().iter().take(HASH_HEX / 2).map(|b| format!("{b:02x}")).collect()
}

/// `name` cut to fit (all ASCII by now), then `_` and `hash`.
fn with_hash(mut name: String, hash: &str) -> String {
    name.truncate(MAX_NAME_LEN - 1 - hash.len());
    name.push('_');
    name.push_str(hash);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(tool_name("github", "create_issue"), "mcp__github__create_issue");
        assert_eq!(tool_name("fs-1", "read-file"), "mcp__fs-1__read-file");
        assert_eq!(connect_name("github"), "mcp_connect__github");
    }

    #[test]
    fn names_that_sanitise_alike_stay_distinct() {
        let a = tool_name("srv", "get.item");
        let b = tool_name("srv", "get item");
        let c = tool_name("srv", "get_item");
        assert!(a.starts_with("mcp__srv__get_item_") && b.starts_with("mcp__srv__get_item_"));
        assert_ne!(a, b);
        assert_eq!(c, "mcp__srv__get_item");
        assert!(valid(&a) && valid(&b));
        // The same tool always gets the same name.
        assert_eq!(a, tool_name("srv", "get.item"));
        // A server name with `__` cannot collide with a tool name with `__`.
        assert_ne!(tool_name("a__b", "c"), tool_name("a", "b__c"));
        assert_ne!(connect_name("my.srv"), connect_name("my srv"));
        assert!(valid(&connect_name("my.srv")));
    }

    #[test]
    fn a_server_ending_with_underscore_and_a_tool_starting_with_one_both_get_the_hash() {
        // Issue 11 item 7: both would be `mcp__files___read`.
        let a = tool_name("files_", "read");
        let b = tool_name("files", "_read");
        assert_ne!(a, b);
        for name in [&a, &b] {
            assert!(name.starts_with("mcp__files___read_"), "{name}");
            assert_eq!(name.len(), "mcp__files___read_".len() + HASH_HEX, "{name}");
            assert!(valid(name));
        }
        assert_eq!((a.clone(), b.clone()), (tool_name("files_", "read"), tool_name("files", "_read")));
        // Neither pair member is the plain spelling of another tool.
        assert_eq!(tool_name("files", "read"), "mcp__files__read");
        assert_ne!(tool_name("files", "read"), a);
    }

    #[test]
    fn long_and_odd_names_fit_the_catalog() {
        let long = "x".repeat(300);
        let a = tool_name("s", &long);
        let b = tool_name("s", &format!("{long}y"));
        assert_eq!(a.len(), MAX_NAME_LEN);
        assert!(valid(&a) && valid(&b));
        assert_ne!(a, b);
        for (server, tool) in [("", "t"), ("s", ""), ("é", "ü"), ("s", "日本語")] {
            assert!(valid(&tool_name(server, tool)), "{server:?} {tool:?}");
        }
        assert!(valid(&connect_name(&long)) && valid(&connect_name("")));
    }
}
