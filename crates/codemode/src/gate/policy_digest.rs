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
