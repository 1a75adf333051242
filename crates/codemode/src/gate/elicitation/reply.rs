//! What a `cmd:` approver prints for an elicitation:
//!
//! ```json
//! {"action": "accept", "content": {"name": "Ada"}, "reason": "optional"}
//! ```
//!
//! `action` is `accept`, `decline` or `cancel` (MCP `ElicitResult.action`);
//! `content` is the form's answer (accept in form mode; ignored otherwise);
//! `reason` is optional and goes to the receipt; other keys are ignored.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::catalog::{ElicitationAction, ElicitationAnswer};

/// The shape the program prints, as the error messages name it.
const SHAPE: &str = r#"{"action": "accept"|"decline"|"cancel", "content"?: {...}, "reason"?: "..."}"#;

#[derive(Deserialize)]
struct Reply {
    action: ElicitationAction,
    #[serde(default)]
    content: Option<Map<String, Value>>,
    #[serde(default)]
    reason: Option<String>,
}

/// Reads the stdout of `program`: the answer and its reason.
///
/// # Errors
///
/// A sentence naming the program and what it printed instead (an
/// approval's `{"decision": ...}` is named as such).
pub(crate) fn parse(program: &str, stdout: &[u8]) -> Result<(ElicitationAnswer, Option<String>), String> {
    let text = String::from_utf8_lossy(stdout);
    let text = text.trim();
    if text.is_empty() {
        return Err(format!(
            "approver command `{program}` printed nothing; for a request of kind `elicitation` it must print {SHAPE}"
        ));
    }
    let reply: Reply = serde_json::from_str(text).map_err(|e| {
        let approval = serde_json::from_str::<Value>(text).is_ok_and(|v| v.get("decision").is_some());
        if approval {
            format!(
                "approver command `{program}` answered a request of kind `elicitation` with an approval's \
                 `decision`; it must print {SHAPE}"
            )
        } else {
            let shown: String = text.chars().take(200).collect();
            format!(
                "approver command `{program}` printed `{}`, which is not {SHAPE}: {e}",
                shown.escape_debug()
            )
        }
    })?;
    let reason = reply.reason.filter(|r| !r.trim().is_empty());
    let content = match reply.action {
        ElicitationAction::Accept => Some(reply.content.unwrap_or_default()),
        _ => None,
    };
    Ok((ElicitationAnswer { action: reply.action, content }, reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_three_actions_are_read() {
        let (a, why) = parse("p", br#"{"action":"accept","content":{"n":1},"reason":"ok"}"#).unwrap();
        assert_eq!(a.action, ElicitationAction::Accept);
        assert_eq!(Value::Object(a.content.unwrap()), json!({"n": 1}));
        assert_eq!(why.as_deref(), Some("ok"));
        let (a, _) = parse("p", br#" {"action":"decline","content":{"n":1}} "#).unwrap();
        assert_eq!((a.action, a.content), (ElicitationAction::Decline, None));
        let (a, why) = parse("p", br#"{"action":"cancel","reason":" "}"#).unwrap();
        assert_eq!((a.action, why), (ElicitationAction::Cancel, None));
    }

    #[test]
    fn anything_else_says_what_was_printed() {
        assert!(parse("p", b"").unwrap_err().contains("printed nothing"));
        let err = parse("p", br#"{"decision":"allow"}"#).unwrap_err();
        assert!(err.contains("with an approval's `decision`"), "{err}");
        let err = parse("p", b"sure").unwrap_err();
        assert!(err.contains("printed `sure`, which is not"), "{err}");
        let err = parse("p", br#"{"action":"maybe"}"#).unwrap_err();
        assert!(err.contains("unknown variant `maybe`"), "{err}");
    }
}
