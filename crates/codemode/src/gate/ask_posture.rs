//! The `ask_and_posture` step: ask rules, hook answers and the posture decide whether a call
//! needs an approval.

use super::{Posture, Preparation};

/// What the before-call hooks said, for `ask_and_posture`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HookVerdict {
    /// A hook answered `allow`.
    pub allow: bool,
    /// A hook answered `ask`, with its reason.
    pub ask: Option<String>,
}

/// Why the call needs an approval, or `None` when it may run. In order: a
/// hook's `ask` and an ask rule always ask; a hook's `allow`, an allow rule
/// and a reader never do; otherwise the posture decides for writers: `ask`
/// asks, `auto-review` asks for destructive tools and for tools that start
/// programs (`bash`, and `mcp_connect__<server>`, which starts an MCP
/// server's command), `full-access` never asks.
pub(crate) fn approval_reason(
    tool: &str,
    prep: &Preparation,
    hooks: &HookVerdict,
    posture: Posture,
) -> Option<String> {
    if let Some(reason) = &hooks.ask {
        return Some(format!("a before-call hook asks: {reason}"));
    }
    if let Some(rule) = &prep.ask_rule {
        return Some(format!("the ask rule `{rule}` covers this call"));
    }
    if hooks.allow || prep.allowed_by.is_some() || prep.reader {
        return None;
    }
    let by_posture = match posture {
        Posture::FullAccess => None,
        Posture::AutoReview if !prep.destructive && !starts_programs(tool) => None,
        Posture::AutoReview => Some(format!(
            "auto-review sends {} to approval",
            if prep.destructive { "destructive tools" } else { "tools that start programs" }
        )),
        Posture::Ask => Some("the posture is ask, and this tool may change things".to_owned()),
    }?;
    // An allow rule that names the tool but does not cover the call is
    // what a person needs to see: they meant it to apply.
    Some(match &prep.not_allowed_by {
        Some(why) => format!("{why}; {by_posture}"),
        None => by_posture,
    })
}

/// Whether the call is asked about because an ask rule or a hook's `ask`
/// says so (such a call is asked every time: a prompt's `a` does not cover
/// it), rather than because of the posture.
pub(crate) fn asked_every_time(prep: &Preparation, hooks: &HookVerdict) -> bool {
    hooks.ask.is_some() || prep.ask_rule.is_some()
}

/// Whether `tool` runs a program of its caller's or the configuration's
/// choosing: `bash`, or `mcp_connect__<server>` (starting an MCP server).
pub(crate) fn starts_programs(tool: &str) -> bool {
    tool == "bash" || tool.starts_with(codemode_base::CONNECT_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> Preparation {
        Preparation::default()
    }

    #[test]
    fn the_posture_decides_for_writers() {
        let none = HookVerdict::default();
        assert!(approval_reason("write", &writer(), &none, Posture::Ask).is_some());
        assert!(approval_reason("write", &writer(), &none, Posture::AutoReview).is_none());
        assert!(approval_reason("bash", &writer(), &none, Posture::AutoReview).is_some());
        assert!(approval_reason("mcp_connect__github", &writer(), &none, Posture::AutoReview).is_some());
        assert!(approval_reason("mcp_connect__github", &writer(), &none, Posture::FullAccess).is_none());
        let destructive = Preparation { destructive: true, ..writer() };
        assert!(approval_reason("mcp__x__drop", &destructive, &none, Posture::AutoReview).is_some());
        assert!(approval_reason("bash", &writer(), &none, Posture::FullAccess).is_none());
    }

    #[test]
    fn readers_allow_rules_and_hooks_are_respected() {
        let none = HookVerdict::default();
        let reader = Preparation { reader: true, ..writer() };
        assert!(approval_reason("read", &reader, &none, Posture::Ask).is_none());
        let allowed = Preparation { allowed_by: Some("write".into()), ..writer() };
        assert!(approval_reason("write", &allowed, &none, Posture::Ask).is_none());
        let missed =
            Preparation { not_allowed_by: Some("the allow rule `write(docs/**)` …".into()), ..writer() };
        let why = approval_reason("write", &missed, &none, Posture::Ask).unwrap();
        assert!(
            why.starts_with("the allow rule `write(docs/**)`") && why.contains("posture is ask"),
            "{why}"
        );
        let ask = Preparation { ask_rule: Some("read".into()), reader: true, ..writer() };
        assert!(approval_reason("read", &ask, &none, Posture::FullAccess).is_some());
        let hook_ask = HookVerdict { allow: false, ask: Some("why".into()) };
        assert!(approval_reason("read", &reader, &hook_ask, Posture::FullAccess).unwrap().contains("why"));
        let hook_allow = HookVerdict { allow: true, ask: None };
        assert!(approval_reason("write", &writer(), &hook_allow, Posture::Ask).is_none());
    }
}
