//! The configuration file as canonical JSON, for the digest a paused
//! run's journal keeps: a resume refuses a policy or sandbox that changed
//! (docs/JOURNAL.md). Every field of every part it reads is decided here
//! by name, so that a new field does not compile until it is either
//! digested or named with why a resume may ignore it.

use serde_json::{Value, json};

use super::{ConfigFile, SandboxConfig};
use crate::gate::{HookSpec, Policy, Posture, Rule, Rules, ToolSettings};
use crate::sandbox::SandboxSettings;

/// The file as canonical JSON (the journal header's `policy`): what the
/// gate decides by (mode, posture, rules, per-tool settings, hooks) and how
/// bash is confined (`sandbox`), without where it was read from (paths
/// differ between machines; the content is what matters). The keys and
/// their order are those journals have always recorded.
pub(crate) fn policy_json(config: &ConfigFile, posture: Posture) -> Value {
    let ConfigFile {
        policy,
        sandbox,
        journal: _,         // where journals go is the host's, not the gate's
        limits: _,          // compared on their own (`limits_json`), as applied
        source: _,          // where it was read from differs between machines
        protected_paths: _, // derived from the hooks and the file's place
    } = config;
    let Policy {
        mode,
        posture: _, // the effective posture is the argument (a host may narrow it)
        rules,
        tools,
        hooks,
        admission: _, // checked before a run's first call only; a resume does not check again
    } = policy;
    let Rules { allow, ask, deny } = rules;
    let texts = |list: &[Rule]| list.iter().map(|r| r.to_string()).collect::<Vec<_>>();
    let tools: serde_json::Map<String, Value> = tools
        .iter()
        .map(|(name, ToolSettings { timeout_ms, allowed_callers, idempotent, compensate, limits: _ })| {
            // `limits` pace calls; they change nothing a resumed run may do.
            let mut settings = json!({
                "timeout_ms": timeout_ms,
                "allowed_callers": allowed_callers,
            });
            // Only when set: the digests of policies without it are as
            // they were (paused runs stay resumable).
            if *idempotent {
                settings["idempotent"] = json!(true);
            }
            if let Some(c) = compensate {
                settings["compensate"] = json!({"tool": c.tool, "args": c.args});
            }
            (name.clone(), settings)
        })
        .collect();
    let hooks: Vec<Value> = hooks
        .iter()
        .map(|HookSpec { matcher, command, timeout }| {
            json!({
                "matcher": matcher.as_str(),
                "command": command,
                "timeout_ms": timeout.as_millis() as u64,
            })
        })
        .collect();
    json!({
        "mode": format!("{:?}", mode).to_lowercase(),
        "posture": posture.as_str(),
        "allow": texts(allow),
        "ask": texts(ask),
        "deny": texts(deny),
        "tools": tools,
        "hooks": hooks,
        "sandbox": sandbox_json(sandbox),
    })
}

/// `[sandbox]` as the journal records it.
fn sandbox_json(sandbox: &SandboxConfig) -> Value {
    let SandboxConfig { settings, writable, kill_grace } = sandbox;
    let SandboxSettings { profile, network, host_ipc } = settings;
    let mut out = json!({
        "profile": format!("{:?}", profile),
        "network": network,
        "writable": writable,
        "kill_grace_ms": kill_grace.as_millis() as u64,
    });
    // Only when granted: the digest of every earlier file stays as it was.
    if *host_ipc {
        out["host_ipc"] = json!(true);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that sets every key the digest reads (and the ones it leaves
    /// out), each away from its default.
    const EVERY_KEY: &str = r#"
mode = "plan"
posture = "auto-review"
admission = false

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

[sandbox]
profile = "read-only"
network = true
writable = [".git", "build/out"]
kill_grace_ms = 500

[journal]
url = "/var/lib/codemode"
keep_runs = 5
keep_days = 1

[limits]
max_calls = 20
memory = "32MiB"
max_in_flight = 2
deadline = 30
tool_timeout = 5
"#;

    /// The JSON a journal header recorded for [`EVERY_KEY`] before the
    /// configuration file had an owner of its own: journals written then
    /// must still resume, so this text and its digest may never change.
    const EVERY_KEY_JSON: &str = concat!(
        r#"{"mode":"plan","posture":"auto-review","allow":["read","bash(git status*)"],"#,
        r#""ask":["bash(git push*)"],"deny":["mcp_connect__github","write(.env)"],"#,
        r#""tools":{"bash":{"timeout_ms":60000,"allowed_callers":["direct"]},"#,
        r#""read":{"timeout_ms":null,"allowed_callers":["program","direct"]}},"#,
        r#""hooks":[{"matcher":"^(bash|write)$","command":["./hooks/check.sh","--strict"],"timeout_ms":5000},"#,
        r#"{"matcher":".*","command":["audit"],"timeout_ms":10000}],"#,
        r#""sandbox":{"profile":"ReadOnly","network":true,"writable":[".git","build/out"],"kill_grace_ms":500}}"#
    );

    #[test]
    fn a_changed_rule_changes_the_policy_digest_and_is_named() {
        use crate::journal::digest::{differences, json_sha256};
        let a = ConfigFile::default();
        let mut b = ConfigFile::default();
        b.policy.rules.allow.push(Rule::parse("write(src/**)").unwrap());
        let (ja, jb) = (policy_json(&a, a.policy.posture), policy_json(&b, b.policy.posture));
        assert_ne!(json_sha256(&ja), json_sha256(&jb));
        assert_eq!(json_sha256(&ja), json_sha256(&policy_json(&ConfigFile::default(), a.policy.posture)));
        assert_eq!(differences(&ja, &jb), vec![r#"allow: [] -> ["write(src/**)"]"#.to_owned()]);
    }

    #[test]
    fn the_digest_of_a_file_with_every_key_is_pinned() {
        let file = ConfigFile::from_toml(EVERY_KEY, None).unwrap();
        let json = policy_json(&file, file.policy.posture);
        assert_eq!(serde_json::to_string(&json).unwrap(), EVERY_KEY_JSON);
        assert_eq!(
            crate::journal::digest::json_sha256(&json),
            "89c44288daef990849b7d646fb339b04dc60161d0be006e606a8140a4b7ef43a"
        );
        // The default, under another posture than its own.
        let json = policy_json(&ConfigFile::default(), Posture::FullAccess);
        assert_eq!(
            serde_json::to_string(&json).unwrap(),
            concat!(
                r#"{"mode":"work","posture":"full-access","allow":[],"ask":[],"deny":[],"tools":{},"hooks":[],"#,
                r#""sandbox":{"profile":"WorkspaceWrite","network":false,"writable":[],"kill_grace_ms":2000}}"#
            )
        );
    }
}
