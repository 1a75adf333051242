//! What an untrusted workspace file keeps ([`ConfigFile::without_grants`]):
//! every field of every part is decided here by name, so a new field does
//! not compile until it is named as a grant (dropped) or a restriction
//! (kept), with why.

use super::{ConfigFile, SandboxConfig};
use crate::gate::{Policy, Posture, Rules, ToolSettings};
use crate::journal::{JournalSettings, Retention};
use crate::sandbox::{SandboxProfile, SandboxSettings};
use codemode_base::limit_settings::LimitSettings;

impl ConfigFile {
    /// This file as an untrusted workspace file applies (docs/SECURITY.md,
    /// "Workspace trust"): its restrictions stay (deny and ask rules, plan
    /// mode, `allowed_callers`, sandbox `read-only`) and its grants go
    /// (allow rules, a posture wider than `ask`, hooks, tool timeouts,
    /// sandbox `off`, `network`, `host_ipc`, `writable`, `kill_grace_ms`, a `[journal]
    /// url` other than `off`, which could send journals (every call's
    /// arguments and results) elsewhere, `[journal] keep_runs` and
    /// `keep_days` below the defaults, which would erase receipts sooner
    /// (longer retention stays); `[limits]` above the defaults, while lower
    /// ones stay).
    /// Returns the file and what was left out, each as a short phrase
    /// (`2 allow rules`, `posture full-access`), empty when the file grants
    /// nothing.
    pub fn without_grants(self) -> (ConfigFile, Vec<String>) {
        let ConfigFile {
            policy,          // part by part below
            sandbox,         // part by part below
            journal,         // part by part below
            limits,          // raised limits dropped below
            source,          // where it was read from: kept (it stays protected)
            protected_paths, // restrictions: kept
        } = self;
        let mut dropped = Vec::new();
        let policy = policy_without_grants(policy, &mut dropped);
        let sandbox = sandbox_without_grants(sandbox, &mut dropped);
        let journal = journal_without_grants(journal, &mut dropped);
        let limits = limits_without_raises(limits, &mut dropped);
        (ConfigFile { policy, sandbox, journal, limits, source, protected_paths }, dropped)
    }
}

/// `n what`, with an `s` unless `n` is 1.
fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The policy without allow rules, a posture wider than `ask`, hooks and
/// tool timeouts.
fn policy_without_grants(policy: Policy, dropped: &mut Vec<String>) -> Policy {
    let Policy {
        mode,      // plan mode only restricts: kept
        posture,   // a wider posture is a grant: dropped below
        rules,     // allow rules dropped below; ask and deny kept
        mut tools, // timeouts dropped below; allowed_callers only narrow
        hooks,     // hooks run programs: dropped below
        admission, // brings refusals forward, grants nothing: kept
    } = policy;
    let Rules { allow, ask, deny } = rules;
    if !allow.is_empty() {
        dropped.push(plural(allow.len(), "allow rule"));
    }
    if posture > Posture::Ask {
        dropped.push(format!("posture {}", posture.as_str()));
    }
    if !hooks.is_empty() {
        dropped.push(plural(hooks.len(), "hook"));
    }
    let (mut timeouts, mut repeats, mut compensations, mut retries, mut scopes) = (0, 0, 0, 0, 0);
    for ToolSettings { timeout_ms, allowed_callers: _, idempotent, compensate, limits } in tools.values_mut()
    {
        timeouts += usize::from(timeout_ms.take().is_some());
        // `max_in_flight` and `rate` only slow calls down: kept. A retry
        // makes more calls: a grant.
        retries += usize::from(limits.retry.take().is_some());
        // Where the counts are kept is the user's store to choose, and a
        // global limit the journal cannot keep refuses every run: the
        // limits stay, per process.
        scopes += usize::from(std::mem::take(&mut limits.global));
        // It lets a recovery repeat a call whose outcome is unknown
        // without a person: a grant.
        repeats += usize::from(std::mem::take(idempotent));
        // A rollback would make this call: a grant an untrusted file loses.
        compensations += usize::from(compensate.take().is_some());
    }
    if compensations > 0 {
        dropped.push(plural(compensations, "compensating call"));
    }
    if timeouts > 0 {
        dropped.push(plural(timeouts, "tool timeout"));
    }
    if repeats > 0 {
        dropped.push(plural(repeats, "tool marked idempotent"));
    }
    if retries > 0 {
        dropped.push(plural(retries, "tool retry policy"));
    }
    if scopes > 0 {
        dropped.push(plural(scopes, "global limit scope"));
    }
    Policy {
        mode,
        posture: posture.min(Posture::Ask),
        rules: Rules { allow: Vec::new(), ask, deny },
        tools,
        hooks: Vec::new(),
        admission,
    }
}

/// `[sandbox]` without `off`, network, host IPC, writable paths and
/// another grace period; `read-only` stays.
fn sandbox_without_grants(sandbox: SandboxConfig, dropped: &mut Vec<String>) -> SandboxConfig {
    let SandboxConfig { settings, writable, kill_grace } = sandbox;
    let SandboxSettings { profile, network, host_ipc } = settings;
    if profile == SandboxProfile::Off {
        dropped.push("sandbox off".to_owned());
    }
    if network {
        dropped.push("sandbox network".to_owned());
    }
    if host_ipc {
        dropped.push("sandbox host_ipc".to_owned());
    }
    if !writable.is_empty() {
        dropped.push(plural(writable.len(), "sandbox writable path"));
    }
    // A longer grace lets a command run on after its end; a shorter one is
    // reset too (the file has no say in how processes end).
    if kill_grace != codemode_base::DEFAULT_KILL_GRACE {
        dropped.push("kill_grace_ms".to_owned());
    }
    let profile = if profile == SandboxProfile::Off { SandboxProfile::WorkspaceWrite } else { profile };
    SandboxConfig {
        settings: SandboxSettings { profile, network: false, host_ipc: false },
        writable: Vec::new(),
        kill_grace: codemode_base::DEFAULT_KILL_GRACE,
    }
}

/// `[journal]` without a url other than `off` (it could send every call's
/// arguments and results elsewhere) and without retention shorter than the
/// defaults (it would erase the receipts a person reviews a run by, the
/// run's own included): such a number is dropped back to its default;
/// a longer retention stays.
fn journal_without_grants(journal: JournalSettings, dropped: &mut Vec<String>) -> JournalSettings {
    let JournalSettings { url, retention } = journal;
    let url = match url {
        Some(url) if url.trim() != "off" => {
            dropped.push("journal url".to_owned());
            None
        }
        off_or_none => off_or_none,
    };
    let Retention { keep_runs, keep_days } = retention;
    let defaults = Retention::default();
    let mut at_least = |name: &str, value: u64, default: u64| {
        if value < default {
            dropped.push(format!("[journal] {name} below the default"));
            default
        } else {
            value
        }
    };
    let retention = Retention {
        keep_runs: at_least("keep_runs", keep_runs, defaults.keep_runs),
        keep_days: at_least("keep_days", keep_days, defaults.keep_days),
    };
    JournalSettings { url, retention }
}

/// `[limits]` without the ones above the defaults: lower limits restrict,
/// higher ones grant. [`LimitSettings::without_raises`] (crates/base)
/// decides each of its fields by name.
fn limits_without_raises(limits: LimitSettings, dropped: &mut Vec<String>) -> LimitSettings {
    let (limits, raised) = limits.without_raises(&codemode_base::limits::Limits::default());
    dropped.extend(raised.into_iter().map(|key| format!("[limits] {key} above the default")));
    limits
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::gate::Mode;

    #[test]
    fn an_untrusted_file_keeps_its_restrictions_and_loses_its_grants() {
        let p = ConfigFile::from_toml(
            "mode = \"plan\"\nposture = \"full-access\"\n[rules]\nallow = [\"bash\", \"write\"]\n\
             ask = [\"edit\"]\ndeny = [\"read(.env)\"]\n[tools.bash]\ntimeout_ms = 900000\n\
             allowed_callers = [\"direct\"]\n[sandbox]\nprofile = \"off\"\nnetwork = true\n\
             [[hooks.before_call]]\ncommand = [\"x\"]\n",
            None,
        )
        .unwrap();
        let (kept, dropped) = p.without_grants();
        assert_eq!(kept.policy.mode, Mode::Plan);
        assert_eq!(kept.policy.posture, Posture::Ask);
        assert!(kept.policy.rules.allow.is_empty() && kept.policy.hooks.is_empty());
        assert_eq!((kept.policy.rules.ask.len(), kept.policy.rules.deny.len()), (1, 1));
        assert_eq!(kept.policy.tools["bash"].timeout_ms, None);
        assert!(kept.policy.tools["bash"].allowed_callers.is_some());
        assert_eq!(kept.sandbox, SandboxConfig::default());
        assert_eq!(
            dropped,
            [
                "2 allow rules",
                "posture full-access",
                "1 hook",
                "1 tool timeout",
                "sandbox off",
                "sandbox network"
            ]
        );
        let narrow = ConfigFile::from_toml("[sandbox]\nprofile = \"read-only\"\n", None).unwrap();
        let (kept, dropped) = narrow.clone().without_grants();
        assert_eq!((kept, dropped.len()), (narrow, 0), "a narrower sandbox is a restriction");
    }

    /// A file that grants everything a file can grant.
    const EVERY_GRANT: &str = r#"
mode = "plan"
posture = "full-access"

[rules]
allow = ["read", "bash(git status*)"]
ask = ["edit"]
deny = ["write(.env)"]

[tools.bash]
timeout_ms = 60000
allowed_callers = ["direct"]

[tools.read]
timeout_ms = 1000
max_in_flight = 2
rate = 1
retry = { attempts = 3 }
scope = "global"

[[hooks.before_call]]
command = ["audit"]

[sandbox]
profile = "off"
network = true
writable = [".git", "build/out"]
kill_grace_ms = 500

[journal]
url = "/var/lib/codemode"
keep_runs = 5
keep_days = 1

[limits]
max_calls = 5000
memory = "32MiB"
max_in_flight = 64
deadline = 30
tool_timeout = 120
"#;

    #[test]
    fn an_untrusted_file_that_grants_everything_loses_each_grant_in_order() {
        let file = ConfigFile::from_toml(EVERY_GRANT, None).unwrap();
        let (kept, dropped) = file.clone().without_grants();
        assert_eq!(
            dropped,
            [
                "2 allow rules",
                "posture full-access",
                "1 hook",
                "2 tool timeouts",
                "1 tool retry policy",
                "1 global limit scope",
                "sandbox off",
                "sandbox network",
                "2 sandbox writable paths",
                "kill_grace_ms",
                "journal url",
                "[journal] keep_runs below the default",
                "[journal] keep_days below the default",
                "[limits] max_calls above the default",
                "[limits] max_in_flight above the default",
                "[limits] tool_timeout above the default",
            ]
        );
        let mut expected = file;
        expected.policy.posture = Posture::Ask;
        expected.policy.rules.allow.clear();
        expected.policy.hooks.clear();
        for tool in expected.policy.tools.values_mut() {
            tool.timeout_ms = None;
            // A retry makes more calls; a cap and a rate only slow them.
            tool.limits.retry = None;
            tool.limits.global = false;
        }
        assert!(expected.policy.tools["read"].limits.max_in_flight.is_some());
        assert!(expected.policy.tools["read"].limits.rate.is_some());
        expected.sandbox = SandboxConfig::default();
        expected.journal.url = None;
        expected.journal.retention = Retention::default();
        expected.limits.max_calls = None;
        expected.limits.max_in_flight = None;
        expected.limits.tool_timeout = None;
        assert_eq!(kept, expected, "the restrictions stay: mode, ask and deny rules, callers, lower limits");
        assert_eq!(kept.limits.memory_bytes, Some(32 << 20));
        assert_eq!(kept.limits.deadline, Some(Duration::from_secs(30)));
    }

    #[test]
    fn an_untrusted_journal_url_and_shorter_retention_are_grants_and_longer_retention_is_not() {
        let p = ConfigFile::from_toml("[journal]\nurl = \"/tmp/x\"\nkeep_runs = 3\n", None).unwrap();
        let (kept, dropped) = p.without_grants();
        assert_eq!((kept.journal.url, kept.journal.retention), (None, Retention::default()));
        assert_eq!(dropped, ["journal url", "[journal] keep_runs below the default"]);
        let longer = ConfigFile::from_toml("[journal]\nkeep_runs = 500\nkeep_days = 30\n", None).unwrap();
        let (kept, dropped) = longer.without_grants();
        assert_eq!((kept.journal.retention.keep_runs, kept.journal.retention.keep_days), (500, 30));
        assert!(dropped.is_empty(), "{dropped:?}");
        let off = ConfigFile::from_toml("[journal]\nurl = \"off\"\n", None).unwrap();
        let (kept, dropped) = off.without_grants();
        assert_eq!((kept.journal.url.as_deref(), dropped.len()), (Some("off"), 0), "off restricts");
    }
}
