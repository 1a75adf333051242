//! The terminal dialogue of an elicitation ([`PromptApprover`]'s
//! `elicit`).
//!
//! A form:
//!
//! ```text
//! codemode: MCP server `x` asks a question (elicitation) during call #3 `mcp__x__ask`, run 0193f6c2a1b4
//!   message: Who are you?
//!   (the server's text; answer only what you would tell that server)
//!   2 fields; Enter takes the [default]; type /decline or /cancel to refuse
//!   name (text, required): User name
//!   name [John Doe] > Ada
//!   status (one of): 1) active  2) inactive
//!   status [active] > 2
//!   answer: {"name":"Ada","status":"inactive"}
//! send this answer to `x`? [Y = send / n = decline / c = cancel] >
//! ```
//!
//! Each value is parsed for its field's type (a number, y/n, a choice by
//! value or number, several choices separated by commas) and checked
//! against the field's schema; a bad value is explained and asked again,
//! at most [`PromptApprover::MAX_TRIES`] lines per field, then the question
//! is declined. Every question ends with [`QUESTION_END`].
//!
//! A URL:
//!
//! ```text
//! codemode: MCP server `x` asks you to open a URL (elicitation) during call #3 `mcp__x__pay`, run …
//!   message: Confirm the payment
//!   url: https://pay.example.com/confirm?id=7
//!   domain: pay.example.com
//!   codemode does not open it: open it yourself if you trust that domain
//! done? [y = I completed it / N = decline / c = cancel] >
//! ```
//!
//! The server's text (message, titles, choices, URL) is shown with control
//! and bidirectional characters escaped, as the approval prompt shows a
//! program's text. The end of the input cancels ("the terminal closed").

use serde_json::{Map, Value};

use super::form::{self, Field, Kind};
use super::{ElicitationReply, ElicitationRequest};
use crate::catalog::{ElicitationAction, ElicitationAnswer, ElicitationMode};
use crate::gate::approvers::{PromptApprover, PromptIo, bounded, one_line_json, printable};

/// How every question of an elicitation ends: a driver (or a person)
/// answers after it.
pub const QUESTION_END: &str = "> ";

/// Who answers, in the receipt.
const BY: &str = "prompt";

/// The most characters of the server's message shown.
const MAX_MESSAGE_CHARS: usize = 2000;

/// What one line read gave.
enum Line {
    Text(String),
    Decline,
    Cancel,
}

/// Asks `request` on `io`; see the module docs.
pub(in crate::gate) fn ask(io: &mut PromptIo, request: &ElicitationRequest) -> ElicitationReply {
    match dialogue(io, request) {
        Ok(reply) => reply,
        Err(Ended(reply)) => *reply,
    }
}

/// A reply that ends the dialogue early (a refusal, the terminal closed);
/// boxed: a reply holds a JSON object, which keeps its key order and is
/// larger for it.
struct Ended(Box<ElicitationReply>);

impl Ended {
    fn of(reply: ElicitationReply) -> Ended {
        Ended(Box::new(reply))
    }
}

fn dialogue(io: &mut PromptIo, request: &ElicitationRequest) -> Result<ElicitationReply, Ended> {
    let question = &request.elicitation;
    let server = bounded(&printable(&question.server), 80);
    let head = |what: &str| {
        format!(
            "\ncodemode: MCP server `{server}` {what} (elicitation) during call #{} `{}`, run {}\n  message: {}\n",
            request.seq,
            bounded(&printable(&request.tool), 120),
            bounded(&printable(&request.run_id), 120),
            bounded(&printable(&question.message), MAX_MESSAGE_CHARS),
        )
    };
    match &question.mode {
        ElicitationMode::Url { url, .. } => {
            let mut text = head("asks you to open a URL");
            text.push_str(&format!(
                "  url: {}\n",
                bounded(&printable(url), PromptApprover::MAX_SUBJECT_CHARS)
            ));
            text.push_str(&format!("  domain: {}\n", printable(domain(url))));
            text.push_str("  codemode does not open it: open it yourself if you trust that domain\n");
            write(io, &text)?;
            let answer = choose(io, "done? [y = I completed it / N = decline / c = cancel] ", false)?;
            Ok(match answer {
                ElicitationAction::Accept => {
                    reply(ElicitationAction::Accept, None, "completed, said at the prompt")
                }
                ElicitationAction::Decline => {
                    reply(ElicitationAction::Decline, None, "declined at the prompt")
                }
                ElicitationAction::Cancel => {
                    reply(ElicitationAction::Cancel, None, "cancelled at the prompt")
                }
            })
        }
        ElicitationMode::Form { requested_schema } => {
            let fields = match form::fields(requested_schema) {
                Ok(fields) => fields,
                Err(why) => {
                    return Ok(ElicitationReply::decline(BY, format!("the form cannot be shown: {why}")));
                }
            };
            let mut text = head("asks a question");
            text.push_str("  (the server's text; answer only what you would tell that server)\n");
            text.push_str(&format!(
                "  {} field{}; Enter takes the [default]; type /decline or /cancel to refuse\n",
                fields.len(),
                if fields.len() == 1 { "" } else { "s" }
            ));
            write(io, &text)?;
            let mut content = Map::new();
            for field in &fields {
                if let Some(value) = ask_field(io, field)? {
                    content.insert(field.name.clone(), value);
                }
            }
            write(io, &format!("  answer: {}\n", one_line_json(&Value::Object(content.clone()), 300)))?;
            let send = format!("send this answer to `{server}`? [Y = send / n = decline / c = cancel] ");
            Ok(match choose(io, &send, true)? {
                ElicitationAction::Accept => {
                    reply(ElicitationAction::Accept, Some(content), "answered at the prompt")
                }
                ElicitationAction::Decline => {
                    reply(ElicitationAction::Decline, None, "declined at the prompt")
                }
                ElicitationAction::Cancel => {
                    reply(ElicitationAction::Cancel, None, "cancelled at the prompt")
                }
            })
        }
    }
}

/// Asks one field; `None` when it is left out (optional, no default).
fn ask_field(io: &mut PromptIo, field: &Field) -> Result<Option<Value>, Ended> {
    let name = bounded(&printable(&field.name), 80);
    let mut about =
        format!("  {name} ({}{})", field.kind.name(), if field.required { ", required" } else { "" });
    if let Some(label) = &field.label {
        about.push_str(&format!(": {}", bounded(&printable(label), 300)));
    }
    about.push('\n');
    if let Kind::Choice(choices) | Kind::Choices(choices) = &field.kind {
        let listed: Vec<String> = choices
            .iter()
            .enumerate()
            .map(|(i, c)| match &c.title {
                Some(t) if *t != c.value => format!("{}) {} ({})", i + 1, c.value, t),
                _ => format!("{}) {}", i + 1, c.value),
            })
            .collect();
        about.push_str(&format!("    {}\n", bounded(&printable(&listed.join("  ")), 1000)));
    }
    let shown_default = field.default.as_ref().map(|d| match (d, &field.kind) {
        (Value::Bool(true), _) => "yes".to_owned(),
        (Value::Bool(false), _) => "no".to_owned(),
        (Value::String(s), _) => s.clone(),
        (Value::Array(items), Kind::Choices(_)) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(", "),
        (other, _) => other.to_string(),
    });
    let question = match &shown_default {
        Some(d) => format!("  {name} [{}] ", bounded(&printable(d), 200)),
        None => format!("  {name} "),
    };
    write(io, &about)?;
    for attempt in 1..=PromptApprover::MAX_TRIES {
        let typed = read(io, &question)?;
        let problem = match form::parse_input(field, &typed) {
            Ok(Some(value)) => return Ok(Some(value)),
            Ok(None) => match &field.default {
                Some(default) => match form::check_field(field, default) {
                    Ok(()) => return Ok(Some(default.clone())),
                    Err(e) => format!("the default does not fit the field ({e}); type a value"),
                },
                None if !field.required => return Ok(None),
                None => "a value is required".to_owned(),
            },
            Err(e) => e,
        };
        if attempt < PromptApprover::MAX_TRIES {
            write(io, &format!("  {}; try again\n", bounded(&printable(&problem), 300)))?;
        }
    }
    let reason = format!(
        "declined at the prompt: no valid value for `{name}` after {} tries",
        PromptApprover::MAX_TRIES
    );
    let _ = write(io, "  no valid value: declined\n");
    Err(Ended::of(ElicitationReply::decline(BY, reason)))
}

/// Asks `question` until it gets y, n or c (an empty line is
/// `empty_accepts` ? accept : decline).
fn choose(io: &mut PromptIo, question: &str, empty_accepts: bool) -> Result<ElicitationAction, Ended> {
    for attempt in 1..=PromptApprover::MAX_TRIES {
        let typed = read(io, question)?;
        match typed.trim().to_ascii_lowercase().as_str() {
            "" if empty_accepts => return Ok(ElicitationAction::Accept),
            "" => return Ok(ElicitationAction::Decline),
            "y" | "yes" => return Ok(ElicitationAction::Accept),
            "n" | "no" => return Ok(ElicitationAction::Decline),
            "c" | "cancel" => return Ok(ElicitationAction::Cancel),
            _ if attempt < PromptApprover::MAX_TRIES => write(io, "  please answer y, n or c\n")?,
            _ => {}
        }
    }
    let _ = write(io, "  no answer: declined\n");
    Err(Ended::of(ElicitationReply::decline(BY, "declined at the prompt: no y, n or c after 3 tries")))
}

/// Writes `question` and its [`QUESTION_END`], reads one line (without its
/// line end); `/decline` and `/cancel` end the dialogue, as does the end of
/// the input.
fn read(io: &mut PromptIo, question: &str) -> Result<String, Ended> {
    write(io, &format!("{question}{QUESTION_END}"))?;
    let mut line = Vec::new();
    let n = io
        .input
        .read_line(&mut line)
        .map_err(|e| Ended::of(ElicitationReply::cancel(BY, format!("reading the answer failed: {e}"))))?;
    if n == 0 {
        let _ = write(io, "\n");
        return Err(Ended::of(ElicitationReply::cancel(BY, "the terminal closed")));
    }
    let text = String::from_utf8_lossy(&line).trim_end_matches(['\n', '\r']).to_owned();
    match classify(&text) {
        Line::Text(text) => Ok(text),
        Line::Decline => Err(Ended::of(ElicitationReply::decline(BY, "declined at the prompt"))),
        Line::Cancel => Err(Ended::of(ElicitationReply::cancel(BY, "cancelled at the prompt"))),
    }
}

fn classify(text: &str) -> Line {
    match text.trim() {
        "/decline" => Line::Decline,
        "/cancel" => Line::Cancel,
        _ => Line::Text(text.to_owned()),
    }
}

fn write(io: &mut PromptIo, text: &str) -> Result<(), Ended> {
    io.output
        .write_all(text.as_bytes())
        .and_then(|()| io.output.flush())
        .map_err(|e| Ended::of(ElicitationReply::cancel(BY, format!("cannot write the prompt: {e}"))))
}

fn reply(action: ElicitationAction, content: Option<Map<String, Value>>, reason: &str) -> ElicitationReply {
    ElicitationReply {
        answer: ElicitationAnswer { action, content },
        by: BY.to_owned(),
        reason: Some(reason.to_owned()),
    }
}

/// The host part of `url` (what a person checks before opening it): after
/// the scheme, before the path, without any user info.
pub(crate) fn domain(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    host.rsplit_once('@').map_or(host, |(_, h)| h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::approvers::tests::prompt;
    use crate::gate::elicitation::tests::request;
    use crate::gate::{Approver, PromptApprover};
    use serde_json::json;

    fn sep1034() -> ElicitationMode {
        ElicitationMode::Form {
            requested_schema: json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "default": 30, "minimum": 0},
                "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
                "email": {"type": "string", "title": "E-mail"},
            }, "required": ["email"]}),
        }
    }

    async fn answer(input: &str, mode: ElicitationMode) -> (ElicitationReply, String) {
        let (approver, out): (PromptApprover, _) = prompt(input);
        let reply = approver.elicit(request(mode)).await;
        (reply, out.text())
    }

    #[tokio::test]
    async fn enter_takes_the_defaults_and_typed_values_are_checked() {
        // name, age, status, verified, email (the schema's order); a bad
        // age and an empty required email are asked again.
        let input = "\n-4\nx\n31\n3\nn\n\nada@example.com\n\n";
        let (reply, text) = answer(input, sep1034()).await;
        assert_eq!(reply.answer.action, ElicitationAction::Accept, "{text}");
        assert_eq!(
            Value::Object(reply.answer.content.unwrap()),
            json!({"name": "John Doe", "age": 31, "status": "pending", "verified": false, "email": "ada@example.com"})
        );
        assert_eq!(reply.by, "prompt");
        assert!(
            text.contains("MCP server `x` asks a question (elicitation) during call #3 `mcp__x__ask`"),
            "{text}"
        );
        assert!(text.contains("  message: Who are you?\n"), "{text}");
        assert!(text.contains("  age [30] > "), "{text}");
        assert!(text.contains("minimum"), "the bound is explained: {text}");
        assert!(text.contains("not a whole number"), "{text}");
        assert!(text.contains("a value is required"), "{text}");
        assert!(text.contains("1) active  2) inactive  3) pending"), "{text}");
        assert!(text.contains("  verified [yes] > "), "{text}");
        assert!(text.contains("email (text, required): E-mail"), "{text}");
        assert!(text.ends_with("[Y = send / n = decline / c = cancel] > "), "{text}");
    }

    #[tokio::test]
    async fn decline_cancel_and_a_closed_terminal() {
        let (reply, _) = answer("/decline\n", sep1034()).await;
        assert_eq!(reply.answer, ElicitationAnswer::decline());
        assert_eq!(reply.reason.as_deref(), Some("declined at the prompt"));
        let (reply, _) = answer("\n/cancel\n", sep1034()).await;
        assert_eq!(reply.answer, ElicitationAnswer::cancel());
        let (reply, _) = answer("\n\n\n\nme@x\nn\n", sep1034()).await;
        assert_eq!(reply.answer.action, ElicitationAction::Decline, "n at the end declines");
        let (reply, _) = answer("\n", sep1034()).await;
        assert_eq!(reply.answer.action, ElicitationAction::Cancel);
        assert_eq!(reply.reason.as_deref(), Some("the terminal closed"));
        let (reply, _) = answer("\n\n\n\n\n\n\n", sep1034()).await;
        assert_eq!(reply.answer.action, ElicitationAction::Decline);
        assert!(reply.reason.unwrap().contains("no valid value for `email` after 3 tries"));
    }

    #[tokio::test]
    async fn the_servers_text_cannot_drive_the_terminal() {
        let mut req = request(ElicitationMode::Url {
            url: "https://user@pay.example.com/ok?x=1\u{1b}[2J".into(),
            elicitation_id: "e".into(),
        });
        req.elicitation.message = "pay\u{1b}[1A\nnow\u{202e}".into();
        let (approver, out) = prompt("y\n");
        let reply = approver.elicit(req).await;
        let text = out.text();
        assert_eq!(reply.answer.action, ElicitationAction::Accept);
        assert!(text.contains(r"message: pay\u001b[1A\u000anow\u202e"), "{text}");
        assert!(text.contains("  domain: pay.example.com\n"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
        let (approver, _) = prompt("\n");
        let url = ElicitationMode::Url { url: "https://a.example".into(), elicitation_id: "e".into() };
        assert_eq!(approver.elicit(request(url)).await.answer.action, ElicitationAction::Decline);
    }

    #[test]
    fn domains() {
        assert_eq!(domain("https://u:p@a.example.com:8443/x?y#z"), "a.example.com:8443");
        assert_eq!(domain("mailto:x"), "mailto:x");
    }
}
