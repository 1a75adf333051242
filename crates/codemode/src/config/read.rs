//! Reading a [`ConfigFile`] from `codemode.toml`.
//!
//! The file is read in two passes. First `toml` deserialises it into the
//! `Raw*` structs below, every table with `deny_unknown_fields`, so a typo
//! is an error naming the key rather than a setting silently ignored. Then
//! every value is checked and converted: rule strings go through
//! [`Rule::parse`], hook regexes are compiled, tool names and timeouts are
//! checked. Values that can be wrong in the second pass are kept as
//! [`Spanned`], so each error names the line it is about.
//!
//! Errors stop at the first one found: `toml`'s own errors (syntax, duplicate
//! or unknown keys, wrong types, a bad caller name, a missing hook `command`)
//! first, then the checks in the order mode, posture, rules (allow, ask,
//! deny), tools (by name), hooks (in order), sandbox, journal, limits.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use codemode_base::pacing::{self, CallLimits};
use serde::Deserialize;
use toml::Spanned;

use super::{ConfigFile, SandboxConfig};
use crate::gate::{DEFAULT_HOOK_TIMEOUT, HookSpec, Mode, Policy, Posture, Rule, Rules, ToolSettings};
use crate::journal::JournalSettings;
use crate::receipt::Caller;

/// Why a policy file could not be read: the file, the line (1-based) when
/// known, and what is wrong.
///
/// Displayed with the path and the line when they are known:
///
/// ```text
/// codemode.toml:12: rule `mcp__x__*`: tool names are exact, ...
/// codemode.toml: cannot read the policy file: No such file or directory ...
/// line 12: rule `mcp__x__*`: tool names are exact, ...
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[error("{}", Located::of(self))]
pub struct PolicyError {
    /// The file, when the policy was read from one (or given a name).
    pub path: Option<PathBuf>,
    /// The 1-based line the error is about, when known.
    pub line: Option<usize>,
    /// What is wrong, naming the key, rule or value.
    pub message: String,
}

/// The `Display` of [`PolicyError`].
struct Located<'a> {
    path: Option<&'a Path>,
    line: Option<usize>,
    message: &'a str,
}

impl<'a> Located<'a> {
    fn of(e: &'a PolicyError) -> Located<'a> {
        Located { path: e.path.as_deref(), line: e.line, message: &e.message }
    }
}

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.path, self.line) {
            (Some(path), Some(line)) => write!(f, "{}:{line}: {}", path.display(), self.message),
            (Some(path), None) => write!(f, "{}: {}", path.display(), self.message),
            (None, Some(line)) => write!(f, "line {line}: {}", self.message),
            (None, None) => f.write_str(self.message),
        }
    }
}

impl ConfigFile {
    /// Reads a configuration file from TOML text; `path` is used in errors
    /// only.
    ///
    /// Every key is optional (an empty text is [`ConfigFile::default`]); an
    /// unknown key is an error. See `examples/codemode.sample.toml` for every key.
    ///
    /// # Errors
    /// A [`PolicyError`] naming the line and the key, rule or value that is
    /// wrong: TOML syntax, an unknown key, a bad `mode`, `posture` or caller,
    /// a rule [`Rule::parse`] refuses, a `[tools.X]` name that is not a tool
    /// name, a `timeout_ms` of 0, an empty `allowed_callers`, a hook with an
    /// invalid `match` regex or an empty `command`.
    pub fn from_toml(text: &str, path: Option<&Path>) -> Result<ConfigFile, PolicyError> {
        let reader = Reader { text, path };
        let raw: RawPolicy = toml::from_str(text).map_err(|e| reader.toml_error(&e))?;
        reader.convert(raw)
    }

    /// Reads `path` (see [`ConfigFile::from_toml`]).
    ///
    /// # Errors
    /// A [`PolicyError`] naming the path when the file cannot be read, or
    /// the errors of [`ConfigFile::from_toml`].
    ///
    /// A hook command given as a relative path with a `/` (`./hooks/check.sh`)
    /// is taken relative to the folder of the policy file, not the
    /// workspace. The file is recorded in [`ConfigFile::source`], and it and
    /// every file a hook names in [`ConfigFile::protected_paths`]: tool
    /// calls may not change them.
    pub fn load(path: &Path) -> Result<ConfigFile, PolicyError> {
        let text = codemode_base::config_file::read_config(path).map_err(|e| PolicyError {
            path: Some(path.to_owned()),
            line: None,
            message: format!("cannot read the policy file: {e}"),
        })?;
        ConfigFile::load_text(path, &text)
    }

    /// [`ConfigFile::load`] of `text`, the bytes already read from `path`
    /// (once: a host that decides the file's trust by the same bytes, as
    /// the CLI does with [`ReadFile`](crate::trust::ReadFile), parses them
    /// here rather than reading the file again).
    ///
    /// # Errors
    /// The errors of [`ConfigFile::from_toml`].
    pub fn load_text(path: &Path, text: &str) -> Result<ConfigFile, PolicyError> {
        let mut file = ConfigFile::from_toml(text, Some(path))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        for hook in &mut file.policy.hooks {
            if let Some(program) = hook.command.first_mut()
                && program.contains('/')
                && Path::new(program.as_str()).is_relative()
            {
                *program = dir.join(program.as_str()).display().to_string();
            }
        }
        file.source = std::fs::canonicalize(path).ok();
        // Every file a hook names: its program, and arguments that are
        // files, taken from the policy file's folder or the workspace (the
        // hook's working folder, here assumed to be the policy file's).
        let named = file.policy.hooks.iter().flat_map(|h| h.command.iter()).map(|arg| dir.join(arg));
        let mut protected: Vec<PathBuf> = Vec::new();
        for file in std::iter::once(path.to_path_buf()).chain(named) {
            if let Ok(file) = std::fs::canonicalize(&file)
                && file.is_file()
                && !protected.contains(&file)
            {
                protected.push(file);
            }
        }
        file.protected_paths = protected;
        Ok(file)
    }
}

/// The file as written. Every table refuses unknown keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a policy table")]
struct RawPolicy {
    mode: Option<Spanned<String>>,
    posture: Option<Spanned<String>>,
    admission: Option<bool>,
    rules: Option<RawRules>,
    #[serde(default)]
    tools: BTreeMap<Spanned<String>, RawTool>,
    hooks: Option<RawHooks>,
    sandbox: Option<RawSandbox>,
    journal: Option<RawJournal>,
    limits: Option<RawLimits>,
}

/// `[limits]` (docs/LIMITS.md): counts as integers (a negative one is
/// refused with the range, not as a type error), `memory` and `max_value` as bytes or a
/// size with a unit, durations as seconds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a limits table")]
struct RawLimits {
    max_calls: Option<Spanned<i64>>,
    memory: Option<Spanned<toml::Value>>,
    max_in_flight: Option<Spanned<i64>>,
    deadline: Option<Spanned<f64>>,
    tool_timeout: Option<Spanned<f64>>,
    max_value: Option<Spanned<toml::Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a journal table")]
struct RawJournal {
    url: Option<Spanned<String>>,
    keep_runs: Option<u64>,
    keep_days: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a sandbox table")]
struct RawSandbox {
    profile: Option<Spanned<String>>,
    network: Option<bool>,
    host_ipc: Option<bool>,
    #[serde(default)]
    writable: Vec<Spanned<String>>,
    kill_grace_ms: Option<Spanned<u64>>,
}

/// The longest `[sandbox] kill_grace_ms`: 60 s.
const MAX_KILL_GRACE_MS: u64 = 60_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of rule lists")]
struct RawRules {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of tool settings")]
struct RawTool {
    timeout_ms: Option<Spanned<u64>>,
    allowed_callers: Option<Spanned<Vec<Caller>>>,
    idempotent: Option<bool>,
    compensate: Option<Spanned<RawCompensate>>,
    max_in_flight: Option<Spanned<serde_json::Value>>,
    rate: Option<Spanned<serde_json::Value>>,
    retry: Option<Spanned<serde_json::Value>>,
    scope: Option<Spanned<serde_json::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table `{ tool = \"NAME\", args = { ... } }`")]
struct RawCompensate {
    tool: String,
    #[serde(default)]
    args: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of hook lists")]
struct RawHooks {
    #[serde(default)]
    before_call: Vec<RawHook>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a hook table")]
struct RawHook {
    /// Regex on the tool name; every tool when left out.
    #[serde(rename = "match")]
    matcher: Option<Spanned<String>>,
    command: Spanned<Vec<String>>,
    timeout_ms: Option<Spanned<u64>>,
}

/// The regex a hook without `match` gets: every tool name.
const MATCH_EVERY_TOOL: &str = ".*";

/// The text being read and its name, for errors.
struct Reader<'a> {
    text: &'a str,
    path: Option<&'a Path>,
}

impl Reader<'_> {
    /// The 1-based line holding byte `offset` of the text.
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
    }

    fn error(&self, offset: Option<usize>, message: String) -> PolicyError {
        PolicyError { path: self.path.map(Path::to_owned), line: offset.map(|o| self.line_of(o)), message }
    }

    fn error_at<T>(&self, value: &Spanned<T>, message: String) -> PolicyError {
        self.error(Some(value.span().start), message)
    }

    /// `toml`'s error as a [`PolicyError`]: its span becomes the line, and
    /// the key it was reading, when it knows one, prefixes the message.
    fn toml_error(&self, e: &toml::de::Error) -> PolicyError {
        let mut message = e.message().trim().to_owned();
        let quoted = e.span().and_then(|s| self.text.get(s)).filter(|q| !q.is_empty() && !q.contains('\n'));
        if let (Some(quoted), "duplicate key") = (quoted, message.as_str()) {
            message = format!("duplicate key `{quoted}`");
        }
        let message = match toml_error_key(e) {
            Some(key) if !message.contains(&format!("`{key}`")) => format!("`{key}`: {message}"),
            _ => message,
        };
        self.error(e.span().map(|s| s.start), message)
    }

    fn convert(&self, raw: RawPolicy) -> Result<ConfigFile, PolicyError> {
        let mode = self.choice("mode", raw.mode.as_ref(), &[("plan", Mode::Plan), ("work", Mode::Work)])?;
        let posture = self.choice(
            "posture",
            raw.posture.as_ref(),
            &[Posture::Ask, Posture::AutoReview, Posture::FullAccess].map(|p| (p.as_str(), p)),
        )?;
        let rules = raw.rules.unwrap_or_default();
        let rules = Rules {
            allow: self.rules(rules.allow)?,
            ask: self.rules(rules.ask)?,
            deny: self.rules(rules.deny)?,
        };
        let mut tools = BTreeMap::new();
        for (name, settings) in raw.tools {
            let settings = self.tool(&name, settings)?;
            tools.insert(name.into_inner(), settings);
        }
        let hooks = raw
            .hooks
            .unwrap_or_default()
            .before_call
            .into_iter()
            .map(|h| self.hook(h))
            .collect::<Result<_, _>>()?;
        let mut sandbox = SandboxConfig::default();
        if let Some(raw) = raw.sandbox {
            self.sandbox(raw, &mut sandbox)?;
        }
        let mut journal = JournalSettings::default();
        if let Some(raw) = raw.journal {
            self.journal(raw, &mut journal)?;
        }
        let limits = match raw.limits {
            Some(raw) => self.limits(raw)?,
            None => codemode_base::limit_settings::LimitSettings::default(),
        };
        // Where the file is and what its hooks name: filled in by `load`.
        Ok(ConfigFile {
            policy: Policy { mode, posture, rules, tools, hooks, admission: raw.admission.unwrap_or(true) },
            sandbox,
            journal,
            limits,
            source: None,
            protected_paths: Vec::new(),
        })
    }

    /// The `[limits]` table, each value checked against its range.
    fn limits(&self, raw: RawLimits) -> Result<codemode_base::limit_settings::LimitSettings, PolicyError> {
        use codemode_base::limit_settings as l;
        let wrong = |span: std::ops::Range<usize>, key: &str, e: String| {
            self.error(Some(span.start), format!("`limits.{key}`: {e}"))
        };
        let count = |value: &Option<Spanned<i64>>, key: &str, range| {
            value
                .as_ref()
                .map(|v| l::check_count(*v.get_ref(), range).map_err(|e| wrong(v.span(), key, e)))
                .transpose()
        };
        let seconds = |value: &Option<Spanned<f64>>, key: &str| {
            value
                .as_ref()
                .map(|v| l::check_seconds(*v.get_ref()).map_err(|e| wrong(v.span(), key, e)))
                .transpose()
        };
        // A size: a string with a unit, or a whole number of bytes.
        let size =
            |value: &Option<Spanned<toml::Value>>, key: &str, parse: fn(&str) -> Result<usize, String>| {
                value
                    .as_ref()
                    .map(|v| {
                        match v.get_ref() {
                        toml::Value::String(text) => parse(text),
                        toml::Value::Integer(n) => parse(&n.to_string()),
                        _ => Err(
                            "give a size as a string with a unit, e.g. \"64MiB\", or a whole number of bytes"
                                .to_owned(),
                        ),
                    }
                    .map_err(|e| wrong(v.span(), key, e))
                    })
                    .transpose()
            };
        let memory = size(&raw.memory, "memory", l::parse_memory)?;
        let mut settings = codemode_base::limit_settings::LimitSettings::default();
        settings.max_calls = count(&raw.max_calls, "max_calls", l::MAX_CALLS_RANGE)?;
        settings.memory_bytes = memory;
        settings.max_in_flight = count(&raw.max_in_flight, "max_in_flight", l::MAX_IN_FLIGHT_RANGE)?;
        settings.deadline = seconds(&raw.deadline, "deadline")?;
        settings.tool_timeout = seconds(&raw.tool_timeout, "tool_timeout")?;
        settings.value_bytes = size(&raw.max_value, "max_value", l::parse_value_size)?;
        Ok(settings)
    }

    /// The `[journal]` table into `journal`.
    fn journal(&self, raw: RawJournal, journal: &mut JournalSettings) -> Result<(), PolicyError> {
        if let Some(url) = raw.url {
            crate::journal::JournalSpec::parse(url.get_ref())
                .map_err(|e| self.error_at(&url, format!("`journal.url`: {e}")))?;
            journal.url = Some(url.into_inner().trim().to_owned());
        }
        if let Some(n) = raw.keep_runs {
            journal.retention.keep_runs = n;
        }
        if let Some(days) = raw.keep_days {
            journal.retention.keep_days = days;
        }
        Ok(())
    }

    /// The `[sandbox]` table into `sandbox`.
    fn sandbox(&self, raw: RawSandbox, sandbox: &mut SandboxConfig) -> Result<(), PolicyError> {
        use crate::sandbox::SandboxProfile;
        if let Some(profile) = &raw.profile {
            sandbox.settings.profile = SandboxProfile::parse(profile.get_ref()).ok_or_else(|| {
                self.error_at(
                    profile,
                    format!(
                        "`sandbox.profile` is `{}`; use workspace-write, read-only or off",
                        profile.get_ref()
                    ),
                )
            })?;
        }
        sandbox.settings.network = raw.network.unwrap_or(false);
        sandbox.settings.host_ipc = raw.host_ipc.unwrap_or(false);
        for path in raw.writable {
            if path.get_ref().trim().is_empty() {
                return Err(self.error_at(&path, "`sandbox.writable` holds an empty path".to_owned()));
            }
            sandbox.writable.push(path.into_inner());
        }
        if let Some(ms) = &raw.kill_grace_ms {
            if *ms.get_ref() > MAX_KILL_GRACE_MS {
                return Err(self.error_at(
                    ms,
                    format!("`sandbox.kill_grace_ms` is {}; give 0 to {MAX_KILL_GRACE_MS}", ms.get_ref()),
                ));
            }
            sandbox.kill_grace = Duration::from_millis(*ms.get_ref());
        }
        Ok(())
    }

    /// A `mode` or `posture` value: one of `choices`, by its name in the
    /// file.
    fn choice<T: Copy + Default>(
        &self,
        key: &str,
        value: Option<&Spanned<String>>,
        choices: &[(&str, T)],
    ) -> Result<T, PolicyError> {
        let Some(value) = value else { return Ok(T::default()) };
        if let Some((_, choice)) = choices.iter().find(|(name, _)| name == value.get_ref()) {
            return Ok(*choice);
        }
        let names: Vec<String> = choices.iter().map(|(name, _)| format!("`{name}`")).collect();
        Err(self.error_at(
            value,
            format!("`{key}`: unknown value `{}`, expected {}", value.get_ref(), names.join(" or ")),
        ))
    }

    fn rules(&self, list: Vec<Spanned<String>>) -> Result<Vec<Rule>, PolicyError> {
        list.iter().map(|r| Rule::parse(r.get_ref()).map_err(|e| self.error_at(r, e))).collect()
    }

    fn tool(&self, name: &Spanned<String>, raw: RawTool) -> Result<ToolSettings, PolicyError> {
        let tool = name.get_ref();
        if tool.contains(['*', '?', '[', '{']) {
            return Err(self.error_at(
                name,
                format!(
                    "[tools.{tool}]: tool names are exact, `{tool}` has a wildcard; give each tool \
                     its own table"
                ),
            ));
        }
        if tool.is_empty() || !tool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(self.error_at(
                name,
                format!("[tools.{tool}]: `{tool}` is not a tool name (A-Z, a-z, 0-9, `_`, `-`)"),
            ));
        }
        let timeout_ms = match raw.timeout_ms {
            Some(t) => Some(self.timeout(&t, &format!("[tools.{tool}] timeout_ms"))?.1),
            None => None,
        };
        let allowed_callers = match raw.allowed_callers {
            Some(callers) if callers.get_ref().is_empty() => {
                return Err(self.error_at(
                    &callers,
                    format!(
                        "[tools.{tool}] allowed_callers is empty; list \"program\", \"direct\" or \
                         both (to forbid the tool, deny it in [rules])"
                    ),
                ));
            }
            Some(callers) => {
                let mut unique = Vec::new();
                for caller in callers.into_inner() {
                    if !unique.contains(&caller) {
                        unique.push(caller);
                    }
                }
                Some(unique)
            }
            None => None,
        };
        let compensate = match raw.compensate {
            Some(c) => {
                let at = c.span().start;
                let RawCompensate { tool: by, args } = c.into_inner();
                let comp = crate::gate::compensation::Compensation { tool: by, args };
                if let Err(e) = comp.check() {
                    return Err(self.error(Some(at), format!("[tools.{tool}] compensate: {e}")));
                }
                Some(comp)
            }
            None => None,
        };
        let idempotent = raw.idempotent.unwrap_or(false);
        let limits = CallLimits::new(
            self.limit(tool, "max_in_flight", raw.max_in_flight, pacing::parse_max_in_flight)?,
            self.limit(tool, "rate", raw.rate, pacing::parse_rate)?,
            self.limit(tool, "retry", raw.retry, pacing::parse_retry)?.flatten(),
        )
        .with_global(self.limit(tool, "scope", raw.scope, pacing::parse_scope)?.unwrap_or(false));
        Ok(ToolSettings { timeout_ms, allowed_callers, idempotent, compensate, limits })
    }

    /// `[tools.NAME]`'s `key` (`max_in_flight`, `rate`, `retry`) read by
    /// `parse` (codemode_base::pacing, whose checks the MCP configuration
    /// shares).
    fn limit<T>(
        &self,
        tool: &str,
        key: &str,
        value: Option<Spanned<serde_json::Value>>,
        parse: impl Fn(&serde_json::Value) -> Result<T, String>,
    ) -> Result<Option<T>, PolicyError> {
        value
            .map(|v| parse(v.get_ref()).map_err(|m| self.error_at(&v, format!("[tools.{tool}] {key}: {m}"))))
            .transpose()
    }

    fn hook(&self, raw: RawHook) -> Result<HookSpec, PolicyError> {
        let matcher = match &raw.matcher {
            Some(m) => regex::Regex::new(m.get_ref()).map_err(|e| {
                self.error_at(
                    m,
                    format!("hook match `{}` is not a valid regex: {}", m.get_ref(), regex_reason(&e)),
                )
            })?,
            None => regex::Regex::new(MATCH_EVERY_TOOL).expect("a valid regex"),
        };
        let command = raw.command.get_ref();
        match command.first() {
            None => return Err(self.error_at(&raw.command, "hook command is empty".to_owned())),
            Some(program) if program.trim().is_empty() => {
                return Err(self.error_at(&raw.command, "hook command has an empty program name".to_owned()));
            }
            Some(_) => {}
        }
        let timeout = match &raw.timeout_ms {
            Some(t) => self.timeout(t, "hook timeout_ms")?.0,
            None => DEFAULT_HOOK_TIMEOUT,
        };
        Ok(HookSpec { matcher, command: raw.command.into_inner(), timeout })
    }

    /// A `timeout_ms` value, which must not be 0.
    fn timeout(&self, value: &Spanned<u64>, what: &str) -> Result<(Duration, u64), PolicyError> {
        match *value.get_ref() {
            0 => Err(self.error_at(value, format!("{what} is 0; give a positive number of milliseconds"))),
            ms => Ok((Duration::from_millis(ms), ms)),
        }
    }
}

/// The dotted key `toml` was reading when it failed, when it knows one.
///
/// `toml::de::Error` keeps the key private but prints it as a last line
/// ``in `a.b` `` when it has no input to quote, so a copy without input
/// gives it.
fn toml_error_key(e: &toml::de::Error) -> Option<String> {
    let mut bare = e.clone();
    bare.set_input(None);
    let shown = bare.to_string();
    let last = shown.trim_end().lines().last()?;
    let key = last.strip_prefix("in `")?.strip_suffix('`')?;
    (!key.is_empty()).then(|| key.to_owned())
}

/// The reason a regex is invalid, on one line (`regex` prints the pattern
/// with a caret over several lines, then `error: ...`).
fn regex_reason(e: &regex::Error) -> String {
    let shown = e.to_string();
    shown
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map_or_else(|| shown.split_whitespace().collect::<Vec<_>>().join(" "), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error for `text`, with no path.
    fn err(text: &str) -> PolicyError {
        ConfigFile::from_toml(text, None).expect_err("the text should be refused")
    }

    /// The policy part of `text`, which must be read.
    fn policy(text: &str) -> Policy {
        ConfigFile::from_toml(text, None).unwrap().policy
    }

    /// Asserts the error for `text` is on `line` and its message holds each
    /// of `needles`.
    #[track_caller]
    fn assert_err(text: &str, line: usize, needles: &[&str]) {
        let e = err(text);
        assert_eq!(e.line, Some(line), "line of {e} for:\n{text}");
        for needle in needles {
            assert!(e.message.contains(needle), "{:?} should contain {needle:?}", e.message);
        }
        assert!(!e.message.contains('\n'), "one line: {:?}", e.message);
    }

    fn rule(text: &str) -> Rule {
        Rule::parse(text).unwrap()
    }

    const FULL: &str = r#"
mode = "plan"
posture = "auto-review"

[rules]
allow = ["read", "bash(git status*)"]
ask = ["bash(git push*)"]
deny = ["mcp_connect__github", "write(.env)"]

[tools.bash]
timeout_ms = 60000
allowed_callers = ["direct"]

[tools.read]
allowed_callers = ["program", "direct"]

[[hooks.before_call]]
match = "^(bash|write)$"
command = ["./hooks/check.sh", "--strict"]
timeout_ms = 5000

[[hooks.before_call]]
command = ["audit"]
"#;

    #[test]
    fn a_tool_table_takes_call_limits_and_bad_ones_name_the_key_and_line() {
        let p = policy(
            "[tools.search]\nmax_in_flight = 4\nrate = 0.5\nretry = { attempts = 5, jitter = false }\n",
        );
        let limits = &p.tools["search"].limits;
        assert_eq!(limits.max_in_flight, Some(4));
        assert_eq!(limits.rate.unwrap().interval(), Duration::from_secs(2));
        assert_eq!(limits.retry.unwrap().attempts, 5);
        assert!(!limits.retry.unwrap().jitter);
        assert_err("[tools.search]\nmax_in_flight = 0\n", 2, &["[tools.search] max_in_flight", "1 to 1024"]);
        assert_err("[tools.search]\nrate = -1\n", 2, &["[tools.search] rate", "above 0"]);
        assert_err(
            "\n[tools.search]\nretry = { tries = 2 }\n",
            3,
            &["[tools.search] retry", "unknown key `tries`"],
        );
    }

    #[test]
    fn admission_is_on_unless_the_file_turns_it_off() {
        assert!(policy("").admission);
        assert!(policy("admission = true").admission);
        assert!(!policy("admission = false").admission);
        assert_err("admission = \"off\"", 1, &["admission"]);
    }

    #[test]
    fn a_full_file_reads_into_the_policy() {
        let p = ConfigFile::from_toml(FULL, Some(Path::new("codemode.toml"))).unwrap().policy;
        assert_eq!(p.mode, Mode::Plan);
        assert_eq!(p.posture, Posture::AutoReview);
        assert_eq!(p.rules.allow, vec![rule("read"), rule("bash(git status*)")]);
        assert_eq!(p.rules.ask, vec![rule("bash(git push*)")]);
        assert_eq!(p.rules.deny, vec![rule("mcp_connect__github"), rule("write(.env)")]);
        assert!(p.rules.allow[1].matches("bash", Some("git status --short")));
        let tools: Vec<_> = p.tools.keys().map(String::as_str).collect();
        assert_eq!(tools, ["bash", "read"]);
        assert_eq!(
            p.tools["bash"],
            ToolSettings {
                timeout_ms: Some(60_000),
                allowed_callers: Some(vec![Caller::Direct]),
                idempotent: false,
                compensate: None,
                limits: CallLimits::default(),
            }
        );
        assert_eq!(
            p.tools["read"],
            ToolSettings {
                timeout_ms: None,
                allowed_callers: Some(vec![Caller::Program, Caller::Direct]),
                idempotent: false,
                compensate: None,
                limits: CallLimits::default(),
            }
        );
        assert_eq!(p.hooks.len(), 2);
        assert_eq!(p.hooks[0].matcher.as_str(), "^(bash|write)$");
        assert!(p.hooks[0].matcher.is_match("bash") && !p.hooks[0].matcher.is_match("bash2"));
        assert_eq!(p.hooks[0].command, ["./hooks/check.sh", "--strict"]);
        assert_eq!(p.hooks[0].timeout, Duration::from_millis(5000));
        assert_eq!(p.hooks[1].command, ["audit"]);
        assert_eq!(p.hooks[1].timeout, DEFAULT_HOOK_TIMEOUT);
        assert!(p.hooks[1].matcher.is_match("anything") && p.hooks[1].matcher.is_match(""));
    }

    #[test]
    fn an_empty_file_is_the_default_policy() {
        for empty in
            ["", "# only a comment\n\n", "[rules]\n[tools]\n[hooks]\n[sandbox]\n[journal]\n[limits]\n"]
        {
            assert_eq!(ConfigFile::from_toml(empty, None).unwrap(), ConfigFile::default(), "{empty:?}");
        }
        assert_eq!(policy("posture = \"full-access\"\nmode = \"work\"\n"), Policy::full_access());
    }

    #[test]
    fn mcp_connect_is_an_ordinary_rule() {
        let p = policy("[rules]\nallow = [\"mcp_connect__github\", \"mcp__github__list_issues\"]\n");
        assert_eq!(p.rules.allow, vec![rule("mcp_connect__github"), rule("mcp__github__list_issues")]);
        assert!(p.rules.allow[0].matches("mcp_connect__github", None));
    }

    #[test]
    fn a_wildcard_tool_name_in_any_rule_list_names_its_line() {
        for list in ["allow", "ask", "deny"] {
            let text =
                format!("mode = \"work\"\n\n[rules]\n{list} = [\n  \"read\",\n  \"mcp__github__*\",\n]\n");
            assert_err(&text, 6, &["mcp__github__*", "exact", "mcp_connect__"]);
        }
        // On one line with others, and after a multi-line string.
        assert_err(
            "posture = \"\"\"\nask\"\"\"\n[rules]\ndeny = [\"read\", \"mcp__x__*\"]\n",
            4,
            &["rule `mcp__x__*`"],
        );
        assert_err("[rules]\nask = []\ndeny = [\"read\", \"mcp__x__*\"]\n", 3, &["rule `mcp__x__*`"]);
    }

    #[test]
    fn broken_rules_name_their_line() {
        assert_err("[rules]\nallow = [\n\"read\",\n\"bash(git\"]\n", 4, &["bash(git", "("]);
        assert_err("[rules]\nallow = [\"has space\"]\n", 2, &["has space", "not a tool name"]);
        assert_err("[rules]\ndeny = [\"\"]\n", 2, &["no tool name"]);
        assert_err("[rules]\ndeny = [\"write([)\"]\n", 2, &["write([)", "glob"]);
        assert_err("[rules]\ndeny = \"read\"\n", 2, &["rules.deny", "sequence"]);
    }

    #[test]
    fn unknown_keys_are_errors_naming_key_and_line() {
        assert_err("mode = \"work\"\nposturee = \"ask\"\n", 2, &["posturee"]);
        assert_err("[rules]\nallow = []\nalow = [\"read\"]\n", 3, &["alow"]);
        assert_err("[tools.bash]\ntimeout_ms = 5\ntimeout = 5\n", 3, &["`timeout`"]);
        assert_err("[[hooks.before_call]]\ncommand = [\"x\"]\nmatches = \"read\"\n", 3, &["matches"]);
        assert_err("[hooks]\n[[hooks.after_call]]\ncommand = [\"x\"]\n", 2, &["after_call"]);
        assert_err("[approvals]\nx = 1\n", 1, &["approvals"]);
    }

    #[test]
    fn bad_enum_values_name_key_value_and_line() {
        assert_err("\nmode = \"build\"\n", 2, &["mode", "build", "plan", "work"]);
        assert_err("posture = \"auto_review\"\n", 1, &["posture", "auto_review", "auto-review"]);
        assert_err("posture = 3\n", 1, &["posture"]);
        assert_err(
            "[tools.bash]\nallowed_callers = [\"direct\", \"host\"]\n",
            2,
            &["allowed_callers", "host", "program"],
        );
    }

    #[test]
    fn hook_errors_name_their_line() {
        assert_err(
            "[[hooks.before_call]]\nmatch = \"^(bash\"\ncommand = [\"x\"]\n",
            2,
            &["match", "^(bash", "regex", "unclosed"],
        );
        assert_err("[[hooks.before_call]]\nmatch = \"read\"\ncommand = []\n", 3, &["command", "empty"]);
        assert_err("[[hooks.before_call]]\ncommand = [\"\", \"x\"]\n", 2, &["command", "empty"]);
        assert_err(
            "[[hooks.before_call]]\ncommand = [\"x\"]\n\n[[hooks.before_call]]\ncommand = [\"y\"]\ntimeout_ms = 0\n",
            6,
            &["timeout_ms", "0"],
        );
        let e = err("[[hooks.before_call]]\nmatch = \"read\"\n");
        assert!(e.message.contains("command"), "{e}");
        assert_eq!(e.line, Some(1), "{e}");
    }

    #[test]
    fn tool_settings_errors_name_their_line() {
        assert_err("[tools.bash]\ntimeout_ms = 0\n", 2, &["[tools.bash] timeout_ms", "0"]);
        assert_err("[tools.bash]\ntimeout_ms = -5\n", 2, &["timeout_ms"]);
        assert_err("[tools.bash]\nallowed_callers = []\n", 2, &["[tools.bash] allowed_callers", "empty"]);
        assert_err("\n[tools.\"mcp__github__*\"]\ntimeout_ms = 5\n", 2, &["mcp__github__*", "exact"]);
        assert_err("[tools]\n\"a b\" = { timeout_ms = 5 }\n", 2, &["`a b`", "not a tool name"]);
        assert_err("[tools.\"\"]\n", 1, &["not a tool name"]);
        assert_err("[tools]\nbash = 5\n", 2, &["tools.bash"]);
    }

    #[test]
    fn toml_syntax_errors_name_their_line() {
        assert_err("mode = \"work\"\n[rules\nallow = []\n", 2, &[]);
        assert_err("mode = \"work\"\nposture = \n", 2, &[]);
        assert_err("mode = \"work\"\nmode = \"plan\"\n", 2, &["mode"]);
    }

    #[test]
    fn errors_display_path_and_line() {
        let e =
            ConfigFile::from_toml("\n[rules]\nallow = [\"mcp__x__*\"]\n", Some(Path::new("codemode.toml")))
                .unwrap_err();
        assert_eq!(e.path.as_deref(), Some(Path::new("codemode.toml")));
        assert!(e.to_string().starts_with("codemode.toml:3: rule `mcp__x__*`: tool names are exact"), "{e}");
        assert!(err("[rules]\nallow = [\"mcp__x__*\"]").to_string().starts_with("line 2: rule `mcp__x__*`"));
        let none = PolicyError { path: None, line: None, message: "m".into() };
        assert_eq!(none.to_string(), "m");
    }

    #[test]
    fn load_reads_a_file_and_names_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("codemode-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("codemode.toml");
        std::fs::write(&path, FULL).unwrap();
        let mut loaded = ConfigFile::load(&path).unwrap();
        let real_dir = std::fs::canonicalize(&dir).unwrap();
        // Relative hook programs are taken from the policy file's folder;
        // the policy file itself is protected.
        assert_eq!(
            loaded.policy.hooks[0].command[0],
            real_dir.join("./hooks/check.sh").display().to_string()
        );
        assert_eq!(loaded.policy.hooks[1].command[0], "audit", "a bare name is looked up on PATH");
        assert_eq!(loaded.protected_paths, vec![std::fs::canonicalize(&path).unwrap()]);
        loaded.policy.hooks[0].command[0] = "./hooks/check.sh".into();
        assert_eq!(loaded.source, Some(std::fs::canonicalize(&path).unwrap()));
        loaded.protected_paths.clear();
        loaded.source = None;
        assert_eq!(loaded, ConfigFile::from_toml(FULL, None).unwrap());
        std::fs::write(&path, "mode = \"plan\"\n\nposture = \"none\"\n").unwrap();
        let e = ConfigFile::load(&path).unwrap_err();
        assert_eq!((e.path.as_deref(), e.line), (Some(path.as_path()), Some(3)));
        assert!(e.to_string().starts_with(&format!("{}:3: ", path.display())), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();

        let missing = dir.join("missing.toml");
        let e = ConfigFile::load(&missing).unwrap_err();
        assert_eq!((e.path.as_deref(), e.line), (Some(missing.as_path()), None));
        assert!(e.to_string().contains("missing.toml"), "{e}");
        assert!(e.message.contains("cannot read"), "{e}");
    }

    #[test]
    fn the_example_config_parses_and_sets_every_key() {
        let path =
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("examples/codemode.sample.toml");
        let file = ConfigFile::load(&path).unwrap();
        let p = &file.policy;
        let text = policy(include_str!("../../../../examples/codemode.sample.toml"));
        assert_eq!(
            (&p.rules, &p.tools, p.mode, p.posture),
            (&text.rules, &text.tools, text.mode, text.posture)
        );
        assert_eq!((p.mode, p.posture), (Mode::Work, Posture::Ask));
        assert!(!p.rules.allow.is_empty() && !p.rules.ask.is_empty() && !p.rules.deny.is_empty());
        let bash = &p.tools["bash"];
        assert!(bash.timeout_ms.is_some() && bash.allowed_callers.is_some());
        assert!(!p.hooks.is_empty());
        assert_ne!(p.hooks[0].timeout, DEFAULT_HOOK_TIMEOUT);
        assert_eq!(file.sandbox.writable, vec![".git".to_owned()]);
        assert_eq!(file.journal.url.as_deref(), Some("/var/lib/codemode/journals"));
        assert_eq!(file.journal.retention, crate::journal::Retention::default());
    }

    #[test]
    fn the_sandbox_table_is_read_and_checked() {
        use crate::sandbox::SandboxProfile;
        let s = ConfigFile::from_toml(
            "[sandbox]\nprofile = \"read-only\"\nnetwork = true\nwritable = [\".git\"]\nkill_grace_ms = 500\n",
            None,
        )
        .unwrap()
        .sandbox;
        assert_eq!(s.settings.profile, SandboxProfile::ReadOnly);
        assert!(s.settings.network);
        assert_eq!(s.writable, vec![".git".to_owned()]);
        assert_eq!(s.kill_grace, Duration::from_millis(500));
        let d = ConfigFile::from_toml("", None).unwrap().sandbox;
        assert_eq!((d.settings.profile, d.settings.network), (SandboxProfile::WorkspaceWrite, false));
        for (bad, says) in [
            ("[sandbox]\nprofile = \"none\"\n", "workspace-write, read-only or off"),
            ("[sandbox]\nkill_grace_ms = 600000\n", "0 to 60000"),
            ("[sandbox]\nnetwrok = true\n", "netwrok"),
        ] {
            let e = err(bad);
            assert!(e.message.contains(says) && e.line == Some(2), "{bad}: {e}");
        }
    }

    #[test]
    fn the_journal_table_is_read_and_checked() {
        use crate::journal::Retention;
        let j = ConfigFile::from_toml(
            "[journal]\nurl = \" /var/lib/cm \"\nkeep_runs = 50\nkeep_days = 0\n",
            None,
        )
        .unwrap()
        .journal;
        assert_eq!(j.url.as_deref(), Some("/var/lib/cm"));
        assert_eq!(j.retention, Retention { keep_runs: 50, keep_days: 0 });
        let d = ConfigFile::from_toml("[journal]\n", None).unwrap().journal;
        assert_eq!((d.url, d.retention), (None, Retention { keep_runs: 200, keep_days: 7 }));
        for (bad, says, line) in [
            ("[journal]\nurl = \"\"\n", "journal.url", 2),
            ("\n[journal]\nurl = \"mysql://db\"\n", "not supported", 3),
            ("[journal]\nkeep_runs = -1\n", "keep_runs", 2),
            ("[journal]\nkeep_run = 5\n", "keep_run", 2),
            ("[journal]\nurl = 5\n", "url", 2),
        ] {
            let e = err(bad);
            assert!(e.message.contains(says) && e.line == Some(line), "{bad}: {e}");
        }
    }
}
