//! The policy the gate applies: mode, posture, rules, per-tool settings and
//! hooks. Built in Rust ([`Policy::default`] and its fields) or read from
//! `codemode.toml` as the `policy` of a
//! [`ConfigFile`](crate::config::ConfigFile), which owns the file's other
//! parts (`[sandbox]`, `[journal]`, `[limits]`, where it was read from).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::receipt::Caller;

/// What kind of work is allowed at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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

pub use crate::rule::Rule;

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
    /// `idempotent = true`: calling the tool twice with the same arguments
    /// has no further effect, so a recovered run repeats a call of it
    /// whose outcome the crash left unknown instead of asking a person
    /// (docs/JOURNAL.md, "Recovery"). A grant: an untrusted workspace
    /// file loses it.
    pub idempotent: bool,
    /// The call that undoes a call of this tool in a rollback
    /// (`compensate = { tool, args }`); `None`: a rollback does not undo it.
    pub compensate: Option<super::compensation::Compensation>,
    /// `max_in_flight`, `rate` and `retry`: how calls of the tool are paced
    /// (docs/LIMITS.md, "Limits per server and per tool"). An untrusted
    /// workspace file keeps the first two (they only slow calls down) and
    /// loses `retry` (it makes more calls).
    pub limits: codemode_base::pacing::CallLimits,
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
/// The rest of `codemode.toml` is the [`ConfigFile`](crate::config::ConfigFile)'s.
///
/// The default is the safe one: mode `work`, posture `ask` (writers need an
/// approval), no rules, no hooks. With the default `deny` approver, writers
/// are therefore refused until a rule, the posture or an approver allows
/// them.
#[derive(Debug, Clone, PartialEq)]
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
    /// Whether a program is checked before its first call (`admission`):
    /// the tools it names literally exist and its literal arguments fit
    /// their input schemas; a program that fails the check runs no call
    /// (error kind `admission`, docs/RECEIPTS.md). It only brings forward
    /// refusals the gate would make; the gate still decides every call.
    /// Default: true.
    pub admission: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            mode: Mode::default(),
            posture: Posture::default(),
            rules: Rules::default(),
            tools: BTreeMap::new(),
            hooks: Vec::new(),
            admission: true,
        }
    }
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
