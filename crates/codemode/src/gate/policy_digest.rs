//! The policy as canonical JSON, for the digest a paused run's journal
//! keeps: a resume refuses a policy that changed (docs/JOURNAL.md). It
//! lives with the policy so that a new field of [`Policy`] is decided here,
//! where its meaning is known.

use serde_json::{Value, json};

use super::{Policy, Posture, Rule};

/// The policy as canonical JSON: what the gate decides by (mode, posture,
/// rules, per-tool settings, hooks, sandbox), without where it was read
/// from (paths differ between machines; the content is what matters).
pub(crate) fn policy_json(policy: &Policy, posture: Posture) -> Value {
    // Every field decided: a new one does not compile until it is either
    // digested below or named here with why a resume may ignore it.
    let Policy {
        mode,
        posture: _, // the effective posture is the argument (a host may narrow it)
        rules,
        tools,
        hooks,
        source: _,          // where it was read from differs between machines
        protected_paths: _, // derived from the hooks and the file's place
        sandbox,
        sandbox_writable,
        kill_grace,
        journal: _, // where journals go is the host's, not the gate's
        limits: _,  // compared on their own (`limits_json`), as applied
    } = policy;
    let texts = |list: &[Rule]| list.iter().map(|r| r.to_string()).collect::<Vec<_>>();
    let tools: serde_json::Map<String, Value> = tools
        .iter()
        .map(|(name, t)| {
            (
                name.clone(),
                json!({
                    "timeout_ms": t.timeout_ms,
                    "allowed_callers": t.allowed_callers,
                }),
            )
        })
        .collect();
    let hooks: Vec<Value> = hooks
        .iter()
        .map(|h| {
            json!({
                "matcher": h.matcher.as_str(),
                "command": h.command,
                "timeout_ms": h.timeout.as_millis() as u64,
            })
        })
        .collect();
    json!({
        "mode": format!("{:?}", mode).to_lowercase(),
        "posture": posture.as_str(),
        "allow": texts(&rules.allow),
        "ask": texts(&rules.ask),
        "deny": texts(&rules.deny),
        "tools": tools,
        "hooks": hooks,
        "sandbox": {
            "profile": format!("{:?}", sandbox.profile),
            "network": sandbox.network,
            "writable": sandbox_writable,
            "kill_grace_ms": kill_grace.as_millis() as u64,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that sets every key the digest reads (and the ones it leaves
    /// out), each away from its default.
    const EVERY_KEY: &str = r#"
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
    fn the_digest_of_a_file_with_every_key_is_pinned() {
        let policy = Policy::from_toml(EVERY_KEY, None).unwrap();
        let json = policy_json(&policy, policy.posture);
        assert_eq!(serde_json::to_string(&json).unwrap(), EVERY_KEY_JSON);
        assert_eq!(
            crate::journal::digest::json_sha256(&json),
            "89c44288daef990849b7d646fb339b04dc60161d0be006e606a8140a4b7ef43a"
        );
        // The default, under another posture than its own.
        let default = Policy::default();
        let json = policy_json(&default, Posture::FullAccess);
        assert_eq!(
            serde_json::to_string(&json).unwrap(),
            concat!(
                r#"{"mode":"work","posture":"full-access","allow":[],"ask":[],"deny":[],"tools":{},"hooks":[],"#,
                r#""sandbox":{"profile":"WorkspaceWrite","network":false,"writable":[],"kill_grace_ms":2000}}"#
            )
        );
    }
}
