//! [`Rule`]: one policy rule, `tool` or `tool(pattern)`. A leaf: the gate
//! applies rules, and the confinement tools get keeps the deny rules that
//! hide paths from searches, so the type lives below both.

use globset::{GlobBuilder, GlobMatcher};

/// One rule: an exact tool name, optionally with a pattern on the tool's
/// primary argument (`bash(git status*)`, `write(docs/**)`).
///
/// Tool names never contain wildcards: `mcp__github__*` is an error, not a
/// rule for every tool of a server (deny `mcp_connect__github` for that).
/// The pattern is a glob over the whole primary argument: `*` matches any
/// run of characters, including `/` and spaces; `?` one character;
/// `[abc]` one of a set; `{a,b}` either; `\` escapes. Paths are compared in
/// their workspace-relative form (`./src/a.rs` and `/ws/src/a.rs` are
/// `src/a.rs`).
#[derive(Debug, Clone)]
pub struct Rule {
    /// The exact tool name.
    pub tool: String,
    /// The pattern as written, when there is one.
    pub pattern: Option<String>,
    matcher: Option<GlobMatcher>,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.tool == other.tool && self.pattern == other.pattern
    }
}

impl Eq for Rule {}

impl Rule {
    /// Parses `tool` or `tool(pattern)`.
    ///
    /// # Errors
    /// A message saying what is wrong: an empty name, a wildcard in the
    /// name, unbalanced parentheses, an invalid glob.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let text = text.trim();
        let (tool, pattern) = match text.find('(') {
            Some(open) => {
                let Some(inner) = text[open + 1..].strip_suffix(')') else {
                    return Err(format!("rule `{text}` opens `(` without closing it at the end"));
                };
                (text[..open].trim(), Some(inner))
            }
            None => (text, None),
        };
        if tool.is_empty() {
            return Err(format!("rule `{text}` has no tool name"));
        }
        if tool.contains(['*', '?', '[', '{']) {
            return Err(format!(
                "rule `{text}`: tool names are exact, `{tool}` has a wildcard; list each tool \
                 (to cover a whole MCP server, use mcp_connect__<server>)"
            ));
        }
        if !tool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(format!("rule `{text}`: `{tool}` is not a tool name (A-Z, a-z, 0-9, `_`, `-`)"));
        }
        let matcher = match pattern {
            None => None,
            Some(p) => Some(
                GlobBuilder::new(p)
                    .literal_separator(false)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| format!("rule `{text}`: the pattern is not a valid glob: {e}"))?
                    .compile_matcher(),
            ),
        };
        Ok(Rule { tool: tool.to_owned(), pattern: pattern.map(str::to_owned), matcher })
    }

    /// Whether the rule covers a call of `tool` whose primary argument is
    /// `primary` (already normalised). A rule with a pattern never covers a
    /// call without a primary argument.
    pub fn matches(&self, tool: &str, primary: Option<&str>) -> bool {
        if self.tool != tool {
            return false;
        }
        match (&self.matcher, primary) {
            (None, _) => true,
            (Some(m), Some(arg)) => m.is_match(arg),
            (Some(_), None) => false,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{}({p})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}
