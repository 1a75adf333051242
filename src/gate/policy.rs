//! The policy the gate applies: mode, posture, rules, per-tool settings and
//! hooks. Built in Rust ([`Policy::default`] and its fields) or read from
//! `codemode.toml` ([`Policy::from_toml`], in `config.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::receipt::Caller;

/// What kind of work is allowed at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Only read-only tools: write, edit, bash and every tool that does not
    /// declare itself read-only are refused, directly and in programs.
    Plan,
    /// Every tool, subject to rules, hooks, posture and approvals.
    #[default]
    Work,
}

/// How calls that change things (writers) are approved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Posture {
    /// Every writer goes to the approver. The narrowest posture.
    #[default]
    Ask,
    /// Writers are allowed by deterministic rules: a writer that is neither
    /// destructive (`destructiveHint`) nor `bash` is allowed; the others go
    /// to the approver.
    AutoReview,
    /// Every call that passed the rules and hooks is allowed.
    FullAccess,
}

impl Posture {
    /// The name used in `codemode.toml` (`ask`, `auto-review`,
    /// `full-access`).
    pub fn as_str(self) -> &'static str {
        match self {
            Posture::Ask => "ask",
            Posture::AutoReview => "auto-review",
            Posture::FullAccess => "full-access",
        }
    }
}

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

/// The three rule lists. Deny wins over allow; ask makes a call go to the
/// approver whatever the posture.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    /// Calls these cover are allowed without an approval (hooks still run).
    pub allow: Vec<Rule>,
    /// Calls these cover go to the approver.
    pub ask: Vec<Rule>,
    /// Calls these cover are refused.
    pub deny: Vec<Rule>,
}

/// Per-tool settings from `[tools.<name>]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSettings {
    /// Per-call timeout in milliseconds, over the tool's own.
    pub timeout_ms: Option<u64>,
    /// Who may call the tool, over the tool's own list.
    pub allowed_callers: Option<Vec<Caller>>,
}

/// A before-call hook: an external command asked about every call whose
/// tool name matches.
#[derive(Debug, Clone)]
pub struct HookSpec {
    /// Regex on the tool name (unanchored; write `^read$` for one tool).
    pub matcher: regex::Regex,
    /// The command and its arguments (no shell).
    pub command: Vec<String>,
    /// How long the hook may take; past it the call is blocked.
    pub timeout: Duration,
}

impl PartialEq for HookSpec {
    fn eq(&self, other: &Self) -> bool {
        self.matcher.as_str() == other.matcher.as_str()
            && self.command == other.command
            && self.timeout == other.timeout
    }
}

/// Default hook timeout.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the gate applies besides the catalog and the run's budget.
///
/// The default is the safe one: mode `work`, posture `ask` (writers need an
/// approval), no rules, no hooks. With the default `deny` approver, writers
/// are therefore refused until a rule, the posture or an approver allows
/// them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    /// Plan or work. Default: work.
    pub mode: Mode,
    /// Ask, auto-review or full access. Default: ask.
    pub posture: Posture,
    /// Allow, ask and deny rules. Default: none.
    pub rules: Rules,
    /// Per-tool settings by exact tool name. Default: none.
    pub tools: BTreeMap<String, ToolSettings>,
    /// Before-call hooks, run in order. Default: none.
    pub hooks: Vec<HookSpec>,
    /// Files tool calls may not change (absolute, canonical): the policy
    /// file and the hook programs, filled in by [`Policy::load`]. A writer
    /// whose path resolves to one is refused at step 6, whatever the rules
    /// and posture say, so a program cannot loosen its own policy. (`bash`
    /// is not covered: under `full-access` a command can change anything.)
    /// Default: none.
    pub protected_paths: Vec<std::path::PathBuf>,
    /// How bash commands are confined (`[sandbox]`). Default:
    /// `workspace-write`, no network.
    pub sandbox: crate::sandbox::SandboxSettings,
}

impl Policy {
    /// The default policy with posture full access: every call that passes
    /// the rules and hooks runs without an approval.
    pub fn full_access() -> Policy {
        Policy { posture: Posture::FullAccess, ..Policy::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_names_and_patterns() {
        let r = Rule::parse("bash(git status*)").unwrap();
        assert_eq!((r.tool.as_str(), r.pattern.as_deref()), ("bash", Some("git status*")));
        assert!(r.matches("bash", Some("git status --short")));
        assert!(!r.matches("bash", Some("git push")));
        assert!(!r.matches("bash", None));
        assert!(!r.matches("read", Some("git status")));
        let any = Rule::parse("write").unwrap();
        assert!(any.matches("write", None) && any.matches("write", Some("x")));
        let paths = Rule::parse("write(docs/**)").unwrap();
        assert!(paths.matches("write", Some("docs/a/b.md")));
        assert!(!paths.matches("write", Some("src/docs/a.md")));
        assert_eq!(paths.to_string(), "write(docs/**)");
    }

    #[test]
    fn wildcards_in_names_and_broken_rules_are_errors() {
        for bad in ["mcp__github__*", "read?", "", "bash(git", "(x)", "has space", "bash([)"] {
            assert!(Rule::parse(bad).is_err(), "{bad:?} should be an error");
        }
        assert!(Rule::parse("mcp__github__*").unwrap_err().contains("mcp_connect__"));
    }

    #[test]
    fn postures_order_from_narrow_to_wide() {
        assert!(Posture::Ask < Posture::AutoReview && Posture::AutoReview < Posture::FullAccess);
    }
}
