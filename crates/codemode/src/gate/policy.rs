//! The policy the gate applies: mode, posture, rules, per-tool settings and
//! hooks. Built in Rust ([`Policy::default`] and its fields) or read from
//! `codemode.toml` ([`Policy::from_toml`], in `config.rs`).

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
    /// The policy file this policy was read from (canonical), set by
    /// [`Policy::load`]. Default: none.
    pub source: Option<std::path::PathBuf>,
    /// Files tool calls may not change (absolute, canonical): the policy
    /// file and every file a hook command names (its program and the
    /// arguments that are files), filled in by [`Policy::load`]. The engine
    /// protects them, and the folders holding the hook files, from writer
    /// tools and the bash sandbox (docs/SECURITY.md). Default: none.
    pub protected_paths: Vec<std::path::PathBuf>,
    /// How bash commands are confined (`[sandbox]`). Default:
    /// `workspace-write`, no network.
    pub sandbox: crate::sandbox::SandboxSettings,
    /// Protected paths the bash sandbox may write anyway (`[sandbox]
    /// writable`, relative to the workspace or absolute): the explicit way
    /// to lift a protection for bash. Default: none.
    pub sandbox_writable: Vec<String>,
    /// Grace period between SIGTERM and SIGKILL when a bash command's
    /// processes are ended (`[sandbox] kill_grace_ms`). Default: 2 s.
    pub kill_grace: std::time::Duration,
    /// Where runs' journals go and how long runs are kept (`[journal]`).
    /// The gate does not use it and the engine does not read it: a host
    /// turns it into a store ([`open_store`](crate::journal::open_store),
    /// then `EngineBuilder::journal`) and prunes by its retention, as the
    /// CLI does. Default: the local folder, 200 runs or 7 days.
    pub journal: crate::journal::JournalSettings,
    /// The run limits `[limits]` sets (docs/LIMITS.md). The gate does not
    /// use them and the engine does not read them: a host applies them to
    /// its [`Limits`](crate::Limits) ([`LimitSettings::apply`](codemode_base::limit_settings::LimitSettings::apply)),
    /// as the CLI does under its flags. Default: none set.
    pub limits: codemode_base::limit_settings::LimitSettings,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            mode: Mode::default(),
            posture: Posture::default(),
            rules: Rules::default(),
            tools: BTreeMap::new(),
            hooks: Vec::new(),
            source: None,
            protected_paths: Vec::new(),
            sandbox: crate::sandbox::SandboxSettings::default(),
            sandbox_writable: Vec::new(),
            kill_grace: codemode_base::DEFAULT_KILL_GRACE,
            journal: crate::journal::JournalSettings::default(),
            limits: codemode_base::limit_settings::LimitSettings::default(),
        }
    }
}

impl Policy {
    /// This policy as an untrusted workspace file applies (docs/SECURITY.md,
    /// "Workspace trust"): its restrictions stay (deny and ask rules, plan
    /// mode, `allowed_callers`, sandbox `read-only`) and its grants go
    /// (allow rules, a posture wider than `ask`, hooks, tool timeouts,
    /// sandbox `off`, `network`, `writable`, `kill_grace_ms`, a `[journal]
    /// url` other than `off`, which could send journals (every call's
    /// arguments and results) elsewhere; its retention numbers stay;
    /// `[limits]` above the defaults, while lower ones stay).
    /// Returns the policy and what was left out, each as a short phrase
    /// (`2 allow rules`, `posture full-access`), empty when the file grants
    /// nothing.
    pub fn without_grants(mut self) -> (Policy, Vec<String>) {
        use crate::sandbox::SandboxProfile;
        // Every field decided: a new one does not compile until it is
        // named here as a grant (dropped below) or kept, with why.
        let Policy {
            mode: _,             // plan mode only restricts: kept
            posture: _,          // a wider posture is a grant: dropped below
            rules: _,            // allow rules dropped below; ask and deny kept
            tools: _,            // timeouts dropped below; allowed_callers only narrow
            hooks: _,            // hooks run programs: dropped below
            source: _,           // where it was read from
            protected_paths: _,  // restrictions: kept
            sandbox: _,          // `off` and network dropped below
            sandbox_writable: _, // lifts protections: dropped below
            kill_grace: _,       // a longer grace is a grant: reset below
            journal: _,          // a store URL is dropped below
            limits: _,           // raised limits dropped below
        } = &self;
        let mut dropped = Vec::new();
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        if !self.rules.allow.is_empty() {
            dropped.push(plural(self.rules.allow.len(), "allow rule"));
            self.rules.allow.clear();
        }
        if self.posture > Posture::Ask {
            dropped.push(format!("posture {}", self.posture.as_str()));
            self.posture = Posture::Ask;
        }
        if !self.hooks.is_empty() {
            dropped.push(plural(self.hooks.len(), "hook"));
            self.hooks.clear();
        }
        let timeouts = self.tools.values_mut().filter_map(|t| t.timeout_ms.take()).count();
        if timeouts > 0 {
            dropped.push(plural(timeouts, "tool timeout"));
        }
        if self.sandbox.profile == SandboxProfile::Off {
            dropped.push("sandbox off".to_owned());
            self.sandbox.profile = SandboxProfile::WorkspaceWrite;
        }
        if self.sandbox.network {
            dropped.push("sandbox network".to_owned());
            self.sandbox.network = false;
        }
        if !self.sandbox_writable.is_empty() {
            dropped.push(plural(self.sandbox_writable.len(), "sandbox writable path"));
            self.sandbox_writable.clear();
        }
        if self.kill_grace != codemode_base::DEFAULT_KILL_GRACE {
            dropped.push("kill_grace_ms".to_owned());
            self.kill_grace = codemode_base::DEFAULT_KILL_GRACE;
        }
        if self.journal.url.as_deref().is_some_and(|url| url.trim() != "off") {
            dropped.push("journal url".to_owned());
            self.journal.url = None;
        }
        // Lower limits restrict; higher ones grant.
        let (limits, raised) = self.limits.without_raises(&crate::Limits::default());
        self.limits = limits;
        dropped.extend(raised.into_iter().map(|key| format!("[limits] {key} above the default")));
        (self, dropped)
    }

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
