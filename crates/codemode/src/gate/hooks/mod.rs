//! Before-call hooks: external commands asked about a call before it runs
//! (the `before_call_hooks` step of docs/POLICY.md, `[[hooks.before_call]]`
//! in `codemode.toml`).
//!
//! [`hooks_for`] picks the hooks whose regex matches the tool name;
//! [`run_hook`] runs one of them for one call and turns what it did into a
//! [`HookOutcome`]. What the gate does with the outcome (order, rewrites
//! validated again, the receipt's note) is the hook step's business.
//!
//! # The protocol
//!
//! - **Start.** `command[0]` with the rest of `command` as its arguments, no
//!   shell. The working directory is the workspace root. The hook inherits
//!   the engine's whole environment, unfiltered (unlike the `bash` tool):
//!   hooks are the user's own programs, named in the user's own config, like
//!   git hooks, and often need the user's credentials or tool paths. The
//!   call's arguments, on the other hand, may come from a program and are
//!   untrusted data to the hook.
//! - **Input.** One JSON object on stdin, followed by a newline, then end of
//!   input: `{"tool", "arguments", "caller": "program"|"direct", "run_id",
//!   "workspace"}` ([`HookInput`]). A hook need not read it: the input is
//!   written alongside the wait, and a hook that exits without reading it
//!   (a broken pipe) is fine.
//! - **Answer.**
//!   - exit 0 with nothing but whitespace on stdout: [`HookOutcome::Pass`];
//!   - exit 0 with one JSON object `{"decision": "allow"|"ask"|"deny",
//!     "reason"?: string, "arguments"?: object, "context"?: string}`:
//!     `allow` and `ask` are [`HookOutcome::Decide`], `deny` is a
//!     [`HookOutcome::Block`] with the hook's reason. `null` counts as
//!     absent. Anything else (not JSON, not an object, no or an unknown
//!     `decision`, a field of the wrong type, a key not listed here, a key
//!     repeated in any object of the answer, which a JSON parser would
//!     silently resolve to its last value) blocks
//!     the call: an answer the engine cannot read must not let a call
//!     through (a misspelled `arguments` would otherwise drop a rewrite
//!     silently);
//!   - exit 2: [`HookOutcome::Block`]; stderr (trimmed, at most
//!     [`STDERR_LIMIT`] bytes) is the reason;
//!   - any other exit code, a kill by a signal, a hook that cannot start, a
//!     timeout, or more than [`STDOUT_LIMIT`] bytes on stdout ("answer too
//!     large"): [`HookOutcome::Block`]. A hook that fails never lets a call
//!     through.
//!
//!   Every block reason names the hook (its command) and says why.
//! - **Process group and time.** The hook runs in a session (so a process
//!   group, and no controlling terminal) of its own (`setsid`). When it exits, whatever it left in its group is
//!   killed (SIGKILL) and its pipes are drained for at most [`DRAIN_GRACE`];
//!   nothing a hook starts outlives it. At `spec.timeout` (counted from
//!   before the start) the whole group is killed, the hook is reaped (waited
//!   for at most [`KILL_WAIT`]; one stuck in the kernel is left to the drop
//!   guard below), and the call is blocked; [`run_hook`] returns right
//!   after, within a few milliseconds. Without a timeout, it returns at
//!   most [`DRAIN_GRACE`] after the hook exits. A process that left the
//!   group (`setsid`) is not killed, as with the `bash` tool; if it still
//!   holds stdout, the answer is incomplete and the call is blocked.
//! - **Reaping.** The hook itself is reaped by tokio. After the group is
//!   killed, its remaining members that are this process's children
//!   (orphans, when the engine is PID 1 or a subreaper) are reaped with
//!   `waitpid(-pgid, WNOHANG)` for at most [`REAP_WAIT`]; otherwise PID 1
//!   reaps them (see the `bash` tool's docs). The group handling is the
//!   one the `bash` tool and the `cmd:` approvers use (`process_group.rs`).
//! - **Cancellation.** Dropping the future kills the group (a drop guard)
//!   and, on the current tokio runtime, waits for the hook and then reaps
//!   the group as above; without a runtime the hook is left to tokio's
//!   orphan reaping (`kill_on_drop`).
//!
//! Bounds: stdout keeps at most [`STDOUT_LIMIT`] bytes (one more byte and
//! the hook is killed at once, the answer being too large); stderr keeps
//! its first [`STDERR_LIMIT`] bytes and the rest is read and dropped, so a
//! chatty hook does not stall on a full pipe.

use std::path::Path;
#[cfg(any(test, not(unix)))]
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::policy::HookSpec;
use crate::receipt::Caller;

#[cfg(unix)]
mod process;
#[cfg(unix)]
use process::run_process;

/// Bytes of stdout kept; a longer answer blocks the call.
pub(crate) const STDOUT_LIMIT: usize = 64 << 10;
/// Bytes of stderr kept for a reason; the rest is dropped.
pub(crate) const STDERR_LIMIT: usize = 4 << 10;
/// Characters of the command shown in a reason.
const COMMAND_SHOWN: usize = 200;

/// What a hook gets on stdin, as one JSON object.
#[derive(Debug, Serialize)]
pub(crate) struct HookInput<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The call's arguments, as the gate has them.
    pub arguments: &'a Value,
    /// `program` or `direct`.
    pub caller: Caller,
    /// The run's id.
    pub run_id: &'a str,
    /// The workspace root (also the hook's working directory).
    pub workspace: &'a Path,
}

/// A hook's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HookOutcome {
    /// Exit 0 and no JSON on stdout (or only whitespace): no opinion, go on.
    Pass,
    /// The call is refused: exit 2 (stderr, trimmed and bounded, is the
    /// reason), decision "deny", a non-zero exit other than 2 (a crash), a
    /// timeout, a kill by signal, a hook that cannot start, or stdout that
    /// is not a valid answer. The reason says which hook (its command) and
    /// why.
    Block {
        /// Which hook and why, for the program and the receipt.
        reason: String,
    },
    /// Exit 0 with a JSON answer `{"decision": "allow"|"ask", "reason"?,
    /// "arguments"?: {...}, "context"?: "..."}`.
    Decide {
        /// Allow or ask.
        decision: HookDecision,
        /// The hook's reason, bounded to [`STDERR_LIMIT`] bytes.
        reason: Option<String>,
        /// Rewritten arguments (always a JSON object); the gate validates
        /// them again.
        arguments: Option<Value>,
        /// Text the hook wants passed along.
        context: Option<String>,
    },
}

/// What a hook's JSON answer decided, when it did not deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookDecision {
    /// Allow the call (later steps may still refuse it).
    Allow,
    /// Send the call to the approver.
    Ask,
}

/// The hooks of `hooks` whose regex matches `tool`, in order.
pub(crate) fn hooks_for<'a>(hooks: &'a [HookSpec], tool: &str) -> impl Iterator<Item = &'a HookSpec> {
    hooks.iter().filter(move |hook| hook.matcher.is_match(tool))
}

/// Runs one hook for one call; see the module docs. Never panics, never
/// hangs past `spec.timeout` (then the hook's process group is killed and
/// reaped and the call is blocked).
pub(crate) async fn run_hook(spec: &HookSpec, input: &HookInput<'_>) -> HookOutcome {
    let name = describe(&spec.command);
    let Some((program, args)) = spec.command.split_first() else {
        return block(&name, "has an empty command");
    };
    let mut payload = match serde_json::to_vec(input) {
        Ok(payload) => payload,
        Err(e) => return block(&name, &format!("cannot be given the call: encoding its input failed: {e}")),
    };
    payload.push(b'\n');
    match run_process(program, args, input.workspace, &payload, spec.timeout).await {
        Ok(finished) => interpret(&name, &finished),
        Err(why) => block(&name, &why),
    }
}

/// How a hook's process ended.
#[cfg_attr(not(unix), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal (this number) killed it.
    Signal(i32),
}

/// A hook that ran to its end.
#[cfg_attr(not(unix), allow(dead_code))]
#[derive(Debug)]
struct Finished {
    /// How it ended.
    exit: Exit,
    /// Everything it wrote on stdout (at most [`STDOUT_LIMIT`] bytes).
    stdout: Vec<u8>,
    /// The first [`STDERR_LIMIT`] bytes of its stderr.
    stderr: Vec<u8>,
    /// Whether stderr had more.
    stderr_cut: bool,
}

/// A [`HookOutcome::Block`] saying hook `name` `why`.
fn block(name: &str, why: &str) -> HookOutcome {
    HookOutcome::Block { reason: format!("hook `{name}` {why}") }
}

/// The command as shown in reasons: its words joined by spaces, cut to
/// [`COMMAND_SHOWN`] characters.
fn describe(command: &[String]) -> String {
    let joined = command.join(" ");
    if joined.chars().count() <= COMMAND_SHOWN {
        return joined;
    }
    let mut shown: String = joined.chars().take(COMMAND_SHOWN).collect();
    shown.push('…');
    shown
}

/// `bytes` as trimmed text of at most [`STDERR_LIMIT`] bytes, cut at a
/// character boundary, with a mark when something was left out (`cut` says
/// the source already was).
fn bounded_text(bytes: &[u8], mut cut: bool) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut text = text.trim();
    if text.len() > STDERR_LIMIT {
        let mut end = STDERR_LIMIT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text = text[..end].trim_end();
        cut = true;
    }
    let mut text = text.to_owned();
    if cut {
        // A lossy decode of a cut stream may end in half a character.
        if text.ends_with('\u{FFFD}') {
            text.pop();
        }
        text.push_str(" […]");
    }
    text
}

/// Turns a finished hook into its outcome.
fn interpret(name: &str, finished: &Finished) -> HookOutcome {
    let stderr = || bounded_text(&finished.stderr, finished.stderr_cut);
    match finished.exit {
        Exit::Code(0) => read_answer(name, &finished.stdout),
        Exit::Code(2) => {
            let reason = stderr();
            if reason.is_empty() {
                block(name, "blocked the call (exit 2, nothing on stderr)")
            } else {
                block(name, &format!("blocked the call: {reason}"))
            }
        }
        Exit::Code(code) => {
            let reason = stderr();
            let mut why =
                format!("failed with exit code {code} (only 0 and 2 are answers), so the call is blocked");
            if !reason.is_empty() {
                why.push_str(&format!("; its stderr: {reason}"));
            }
            block(name, &why)
        }
        Exit::Signal(signal) => {
            block(name, &format!("was killed by {}, so the call is blocked", signal_name(signal)))
        }
    }
}

/// The keys a JSON answer may have.
const ANSWER_KEYS: &[&str] = &["decision", "reason", "arguments", "context"];

/// Reads the stdout of a hook that exited 0.
fn read_answer(name: &str, stdout: &[u8]) -> HookOutcome {
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return HookOutcome::Pass;
    }
    let invalid = |what: String| {
        block(
            name,
            &format!(
                "exited 0 with an answer that is not valid: {what}; print nothing to pass, or one JSON \
                 object {{\"decision\": \"allow\"|\"ask\"|\"deny\", \"reason\"?, \"arguments\"?, \"context\"?}}"
            ),
        )
    };
    let answer: Value = match serde_json::from_slice(stdout) {
        Ok(answer) => answer,
        Err(e) => return invalid(format!("not JSON ({e})")),
    };
    let Value::Object(mut answer) = answer else {
        return invalid(format!("a JSON {}, not an object", kind(&answer)));
    };
    // A JSON parser keeps the last of repeated keys, so a hook that pastes
    // untrusted text into its answer could be made to say `allow` after
    // its own `deny`: an answer that repeats a key, at any depth, is not
    // read at all.
    if let Some(repeated) = repeated_key(stdout) {
        return invalid(repeated);
    }
    if let Some(key) = answer.keys().find(|key| !ANSWER_KEYS.contains(&key.as_str())) {
        return invalid(format!("unknown key `{}`", bounded_text(key.as_bytes(), false)));
    }
    let mut optional_text = |key: &str| match answer.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(format!("`{key}` is a {}, not a string", kind(&other))),
    };
    let reason = match optional_text("reason") {
        Ok(reason) => reason.map(|r| bounded_text(r.as_bytes(), false)),
        Err(e) => return invalid(e),
    };
    let context = match optional_text("context") {
        Ok(context) => context,
        Err(e) => return invalid(e),
    };
    let arguments = match answer.remove("arguments") {
        None | Some(Value::Null) => None,
        Some(object @ Value::Object(_)) => Some(object),
        Some(other) => return invalid(format!("`arguments` is a {}, not an object", kind(&other))),
    };
    let decision = match answer.remove("decision") {
        Some(Value::String(decision)) => decision,
        None | Some(Value::Null) => return invalid("it has no `decision`".to_owned()),
        Some(other) => return invalid(format!("`decision` is a {}, not a string", kind(&other))),
    };
    let decision = match decision.as_str() {
        "allow" => HookDecision::Allow,
        "ask" => HookDecision::Ask,
        "deny" => {
            return match reason {
                Some(reason) if !reason.is_empty() => block(name, &format!("denied the call: {reason}")),
                _ => block(name, "denied the call (no reason given)"),
            };
        }
        other => {
            return invalid(format!(
                "unknown decision `{}` (expected allow, ask or deny)",
                bounded_text(other.as_bytes(), false)
            ));
        }
    };
    HookOutcome::Decide { decision, reason, arguments, context }
}

/// The first key repeated within one object of the JSON text `json` (which
/// parses), as a message: "the answer repeats the key `decision`", saying
/// where when the object is nested ("in `arguments`"). `None` when no object
/// repeats a key. Keys are compared decoded (`"a"` and `"\u0061"` are the
/// same key).
fn repeated_key(json: &[u8]) -> Option<String> {
    use serde::de::DeserializeSeed as _;

    let mut found = None;
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let _ = FindRepeated { found: &mut found, at: Vec::new() }.deserialize(&mut deserializer);
    let (at, key) = found?;
    let key = bounded_text(key.as_bytes(), false);
    if at.is_empty() {
        return Some(format!("the answer repeats the key `{key}`"));
    }
    let at = at.concat();
    let at = bounded_text(at.trim_start_matches('.').as_bytes(), false);
    Some(format!("the answer repeats the key `{key}` in `{at}`"))
}

/// Walks a JSON value and stops at the first object that repeats a key,
/// recording where (`.key` and `[index]` steps) and which key.
struct FindRepeated<'a> {
    /// Where the repeated key was found, and the key.
    found: &'a mut Option<(Vec<String>, String)>,
    /// The steps to the value being walked.
    at: Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for FindRepeated<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FindRepeated<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for index in 0usize.. {
            let mut at = self.at.clone();
            at.push(format!("[{index}]"));
            if seq.next_element_seed(FindRepeated { found: &mut *self.found, at })?.is_none() {
                break;
            }
        }
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                *self.found = Some((self.at, key));
                return Err(serde::de::Error::custom("a repeated key"));
            }
            let mut at = self.at.clone();
            at.push(format!(".{key}"));
            map.next_value_seed(FindRepeated { found: &mut *self.found, at })?;
        }
        Ok(())
    }
}

/// The JSON kind of `value`, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The name of signal `signal` (`"SIGKILL"`), or `signal N`.
fn signal_name(signal: i32) -> String {
    #[cfg(unix)]
    if let Ok(known) = nix::sys::signal::Signal::try_from(signal) {
        return known.as_str().to_owned();
    }
    format!("signal {signal}")
}

/// Hooks need process groups to be stopped reliably; elsewhere every hook
/// blocks its call.
#[cfg(not(unix))]
async fn run_process(_: &str, _: &[String], _: &Path, _: &[u8], _: Duration) -> Result<Finished, String> {
    Err("cannot run: before-call hooks run on Unix only".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    /// A finished hook with this exit and output.
    fn finished(exit: Exit, stdout: &str, stderr: &str) -> Finished {
        Finished { exit, stdout: stdout.into(), stderr: stderr.into(), stderr_cut: false }
    }

    /// The reason of a block, or a panic naming what came instead.
    fn reason(outcome: HookOutcome) -> String {
        match outcome {
            HookOutcome::Block { reason } => reason,
            other => panic!("expected a block, got {other:?}"),
        }
    }

    #[test]
    fn answers_are_read_strictly() {
        let read = |stdout: &str| read_answer("h", stdout.as_bytes());
        assert_eq!(read(""), HookOutcome::Pass);
        assert_eq!(read(" \n\t\r\n"), HookOutcome::Pass);
        assert_eq!(
            read(r#"{"decision": "allow", "reason": null, "arguments": null, "context": null}"#),
            HookOutcome::Decide {
                decision: HookDecision::Allow,
                reason: None,
                arguments: None,
                context: None
            }
        );
        assert_eq!(
            read(r#"  {"decision": "ask", "arguments": {"a": 1}, "context": "c"}  "#),
            HookOutcome::Decide {
                decision: HookDecision::Ask,
                reason: None,
                arguments: Some(json!({"a": 1})),
                context: Some("c".into())
            }
        );
        for (stdout, expected) in [
            ("yes", "not JSON"),
            (r#"{"decision": "allow"} {}"#, "not JSON"),
            ("[1]", "a JSON array, not an object"),
            ("\"allow\"", "a JSON string, not an object"),
            ("{}", "no `decision`"),
            (r#"{"decision": "Allow"}"#, "unknown decision `Allow` (expected allow, ask or deny)"),
            (r#"{"decision": "maybe"}"#, "unknown decision `maybe`"),
            (r#"{"decision": true}"#, "`decision` is a boolean"),
            (r#"{"decision": "allow", "arguments": [1]}"#, "`arguments` is a array, not an object"),
            (r#"{"decision": "allow", "arguments": "x"}"#, "`arguments` is a string, not an object"),
            (r#"{"decision": "allow", "reason": 3}"#, "`reason` is a number, not a string"),
            (r#"{"decision": "allow", "context": {}}"#, "`context` is a object, not a string"),
            (r#"{"decision": "allow", "args": {}}"#, "unknown key `args`"),
            // A repeated key is never resolved to one of its values.
            (
                r#"{"decision":"deny","reason":"no","decision":"allow"}"#,
                "the answer repeats the key `decision`;",
            ),
            (r#"{"decision":"allow","decision":"allow"}"#, "the answer repeats the key `decision`;"),
            (r#"{"decision":"allow","reason":"a","reason":"b"}"#, "the answer repeats the key `reason`;"),
            // The same key spelled with an escape is the same key.
            (r#"{"decision":"deny","d\u0065cision":"allow"}"#, "the answer repeats the key `decision`;"),
            // A repeated unknown key is named as repeated.
            (r#"{"decision":"allow","x":1,"x":2}"#, "the answer repeats the key `x`;"),
            // At any depth, saying where.
            (
                r#"{"decision":"allow","arguments":{"path":"a.txt","path":"secrets/key"}}"#,
                "the answer repeats the key `path` in `arguments`;",
            ),
            (
                r#"{"decision":"allow","arguments":{"edits":[{"old":"a","new":"b"},{"old":"c","old":"d"}]}}"#,
                "the answer repeats the key `old` in `arguments.edits[1]`;",
            ),
        ] {
            let why = reason(read(stdout));
            assert!(why.starts_with("hook `h` exited 0 with an answer that is not valid"), "{why}");
            assert!(why.contains(expected), "{stdout}: {why}");
        }
        assert_eq!(reason(read(r#"{"decision": "deny"}"#)), "hook `h` denied the call (no reason given)");
        // Equal values under different keys, and one key in several
        // objects, are not repeats.
        assert_eq!(
            read(
                r#"{"decision":"allow","arguments":{"decision":"allow","a":{"decision":1},"b":[{"a":1},{"a":2}]}}"#
            ),
            HookOutcome::Decide {
                decision: HookDecision::Allow,
                reason: None,
                arguments: Some(
                    json!({"decision": "allow", "a": {"decision": 1}, "b": [{"a": 1}, {"a": 2}]})
                ),
                context: None
            }
        );
        assert_eq!(
            reason(read(r#"{"decision": "deny", "reason": " nope ", "arguments": {}}"#)),
            "hook `h` denied the call: nope"
        );
    }

    #[test]
    fn exits_and_signals_are_interpreted() {
        let outcome = |exit, stdout, stderr| interpret("h", &finished(exit, stdout, stderr));
        assert_eq!(outcome(Exit::Code(0), "", "noise on stderr"), HookOutcome::Pass);
        assert_eq!(reason(outcome(Exit::Code(2), "", "  why\n")), "hook `h` blocked the call: why");
        assert_eq!(
            reason(outcome(Exit::Code(2), r#"{"decision": "allow"}"#, "")),
            "hook `h` blocked the call (exit 2, nothing on stderr)"
        );
        let crash = reason(outcome(Exit::Code(101), "", "panicked"));
        assert!(crash.contains("exit code 101") && crash.ends_with("its stderr: panicked"), "{crash}");
        let killed = reason(outcome(Exit::Signal(9), "", ""));
        assert_eq!(killed, "hook `h` was killed by SIGKILL, so the call is blocked");
        assert!(reason(outcome(Exit::Signal(200), "", "")).contains("signal 200"));
    }

    #[test]
    fn reasons_and_commands_are_bounded() {
        let long = format!("{}{}", "é".repeat(STDERR_LIMIT), "tail");
        let text = bounded_text(long.as_bytes(), false);
        assert!(text.len() <= STDERR_LIMIT + " […]".len() && text.ends_with(" […]"), "{}", text.len());
        assert!(text.trim_end_matches(" […]").chars().all(|c| c == 'é'));
        // A stream cut in the middle of a character loses the half.
        let cut = &"aé".as_bytes()[..2];
        assert_eq!(bounded_text(cut, true), "a […]");
        assert_eq!(bounded_text(b"  short \n", false), "short");

        let command: Vec<String> = vec!["x".repeat(300), "arg".into()];
        let shown = describe(&command);
        assert_eq!(shown.chars().count(), COMMAND_SHOWN + 1);
        assert!(shown.ends_with('…'));
        assert_eq!(describe(&["a".into(), "b c".into()]), "a b c");
    }

    #[test]
    fn hooks_for_matches_the_tool_name() {
        let hook = |pattern: &str| HookSpec {
            matcher: regex::Regex::new(pattern).unwrap(),
            command: vec![pattern.to_owned()],
            timeout: Duration::from_secs(1),
        };
        let hooks =
            [hook("^write$"), hook("bash"), hook("^(write|edit)$"), hook(".*"), hook("^mcp__github__")];
        let names = |tool: &str| hooks_for(&hooks, tool).map(|h| h.command[0].as_str()).collect::<Vec<_>>();
        assert_eq!(names("write"), ["^write$", "^(write|edit)$", ".*"]);
        assert_eq!(names("rewrite"), [".*"]);
        assert_eq!(names("bash"), ["bash", ".*"]);
        assert_eq!(names("mcp__github__create_issue"), [".*", "^mcp__github__"]);
        assert!(hooks_for(&hooks[..1], "read").next().is_none());
        assert!(hooks_for(&[], "write").next().is_none());
    }

    #[cfg(unix)]
    mod processes {
        use super::*;

        use std::path::PathBuf;
        use std::time::Instant;

        /// A fixture script's path.
        fn fixture(name: &str) -> String {
            format!("{}/tests/fixtures/hooks/{name}", concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        }

        /// A hook running `command` with `timeout_ms`.
        fn spec(command: &[&str], timeout_ms: u64) -> HookSpec {
            HookSpec {
                matcher: regex::Regex::new(".*").unwrap(),
                command: command.iter().map(|s| (*s).to_owned()).collect(),
                timeout: Duration::from_millis(timeout_ms),
            }
        }

        /// Runs `command` for a `write` call with `arguments` in `workspace`.
        async fn run_in(
            workspace: &Path,
            command: &[&str],
            timeout_ms: u64,
            arguments: &Value,
        ) -> HookOutcome {
            let input =
                HookInput { tool: "write", arguments, caller: Caller::Program, run_id: "run-1", workspace };
            run_hook(&spec(command, timeout_ms), &input).await
        }

        /// Runs fixture `name` for a small `write` call in a fresh workspace.
        async fn run_fixture(name: &str) -> HookOutcome {
            let workspace = tempfile::tempdir().unwrap();
            let path = fixture(name);
            run_in(workspace.path(), &[&path], 10_000, &json!({"path": "a.txt", "content": "hi"})).await
        }

        /// Whether process `pid` is gone (or a zombie, which is dead and only
        /// waits for its parent).
        #[cfg(target_os = "linux")]
        fn dead(pid: i32) -> bool {
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Err(_) => true,
                // The state follows the command name, which is in parentheses.
                Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
            }
        }

        #[tokio::test]
        async fn exit_0_without_output_passes() {
            assert_eq!(run_fixture("pass.sh").await, HookOutcome::Pass);
        }

        #[tokio::test]
        async fn exit_2_blocks_with_stderr_as_the_reason() {
            let why = reason(run_fixture("block.sh").await);
            assert_eq!(
                why,
                format!("hook `{}` blocked the call: no writes under secrets/", fixture("block.sh"))
            );
        }

        #[tokio::test]
        async fn exit_2_reasons_are_bounded() {
            let workspace = tempfile::tempdir().unwrap();
            let script = "head -c 100000 /dev/zero | tr '\\0' e >&2; exit 2";
            let why = reason(run_in(workspace.path(), &["sh", "-c", script], 10_000, &json!({})).await);
            assert!(why.ends_with("eeee […]"), "{why}");
            assert!(why.len() < STDERR_LIMIT + 200, "{}", why.len());
        }

        #[tokio::test]
        async fn deny_blocks_with_the_hooks_reason() {
            let why = reason(run_fixture("deny.sh").await);
            assert_eq!(why, format!("hook `{}` denied the call: not on Fridays", fixture("deny.sh")));
        }

        #[tokio::test]
        async fn an_injected_second_decision_blocks() {
            // The fixture pastes untrusted text into its answer unescaped,
            // which smuggles in a second `decision` after its `deny`.
            let why = reason(run_fixture("inject.sh").await);
            assert!(
                why.starts_with(&format!(
                    "hook `{}` exited 0 with an answer that is not valid: the answer repeats the key \
                     `decision`;",
                    fixture("inject.sh")
                )),
                "{why}"
            );
        }

        #[tokio::test]
        async fn allow_and_ask_decide() {
            assert_eq!(
                run_fixture("allow.sh").await,
                HookOutcome::Decide {
                    decision: HookDecision::Allow,
                    reason: Some("read-only path".into()),
                    arguments: None,
                    context: None
                }
            );
            assert_eq!(
                run_fixture("ask.sh").await,
                HookOutcome::Decide {
                    decision: HookDecision::Ask,
                    reason: Some("touches the build".into()),
                    arguments: None,
                    context: None
                }
            );
        }

        #[tokio::test]
        async fn a_rewrite_returns_the_new_arguments() {
            let HookOutcome::Decide { decision, reason, arguments, context } =
                run_fixture("rewrite.py").await
            else {
                panic!("expected a decision")
            };
            assert_eq!(decision, HookDecision::Allow);
            assert_eq!(reason.as_deref(), Some("moved into sandbox/"));
            assert_eq!(
                arguments,
                Some(json!({"path": "sandbox/a.txt", "content": "hi", "rewritten_by": "rewrite.py"}))
            );
            assert_eq!(context, None);
        }

        #[tokio::test]
        async fn the_hook_gets_the_documented_input_in_the_workspace_with_the_environment() {
            let workspace = tempfile::tempdir().unwrap();
            let workspace = workspace.path().canonicalize().unwrap();
            let arguments = json!({
                "path": "notes/ü.md",
                "content": "line\n\"quoted\"",
                "n": [1, 2.5, null],
            });
            let path = fixture("echo.py");
            let outcome = run_in(&workspace, &[&path], 10_000, &arguments).await;
            let HookOutcome::Decide { decision: HookDecision::Allow, context: Some(context), .. } = outcome
            else {
                panic!("expected allow with context, got {outcome:?}")
            };
            let seen: Value = serde_json::from_str(&context).unwrap();
            let stdin = seen["stdin"].as_str().unwrap();
            assert!(stdin.ends_with("}\n") && stdin.lines().count() == 1, "{stdin:?}");
            let input: Value = serde_json::from_str(stdin).unwrap();
            assert_eq!(
                input,
                json!({
                    "tool": "write",
                    "arguments": arguments,
                    "caller": "program",
                    "run_id": "run-1",
                    "workspace": workspace.to_str().unwrap(),
                })
            );
            assert_eq!(PathBuf::from(seen["cwd"].as_str().unwrap()), workspace);
            // The engine's environment, unfiltered (PATH is left out: a
            // launcher such as a pyenv shim may prepend to it).
            let mut compared = 0;
            for key in ["HOME", "USER", "CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "RUST_TEST_THREADS"] {
                if let Ok(value) = std::env::var(key) {
                    assert_eq!(seen["env"][key].as_str(), Some(value.as_str()), "{key}");
                    compared += 1;
                }
            }
            assert!(compared > 0, "no variable to compare");
        }

        #[tokio::test]
        async fn a_timeout_blocks_promptly_and_kills_the_hooks_processes() {
            let workspace = tempfile::tempdir().unwrap();
            let started = Instant::now();
            let path = fixture("slow.sh");
            let why = reason(run_in(workspace.path(), &[&path], 200, &json!({})).await);
            let elapsed = started.elapsed();
            assert_eq!(
                why,
                format!(
                    "hook `{path}` timed out after 200 ms; its processes were killed and the call is blocked"
                )
            );
            assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
            assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}");
            let pid = |file: &str| -> i32 {
                std::fs::read_to_string(workspace.path().join(file)).unwrap().trim().parse().unwrap()
            };
            let (hook, child) = (pid("hook.pid"), pid("child.pid"));
            #[cfg(target_os = "linux")]
            {
                // The hook was reaped before run_hook returned; its `sleep`
                // child got SIGKILL with the group (it may take a moment to
                // finish dying, and PID 1 reaps it).
                assert!(dead(hook), "the hook {hook} is still running");
                let give_up = Instant::now() + Duration::from_secs(2);
                while !dead(child) && Instant::now() < give_up {
                    std::thread::sleep(Duration::from_millis(10));
                }
                assert!(dead(child), "the hook's child {child} is still running");
            }
            let _ = (hook, child);
        }

        #[tokio::test]
        async fn a_crash_blocks() {
            let why = reason(run_fixture("crash.sh").await);
            assert_eq!(
                why,
                format!(
                    "hook `{}` failed with exit code 1 (only 0 and 2 are answers), so the call is blocked; \
                     its stderr: Traceback: something broke",
                    fixture("crash.sh")
                )
            );
        }

        #[tokio::test]
        async fn a_kill_by_signal_blocks() {
            let workspace = tempfile::tempdir().unwrap();
            let why =
                reason(run_in(workspace.path(), &["sh", "-c", "kill -SEGV $$"], 10_000, &json!({})).await);
            assert_eq!(why, "hook `sh -c kill -SEGV $$` was killed by SIGSEGV, so the call is blocked");
        }

        #[tokio::test]
        async fn garbage_on_stdout_blocks() {
            let why = reason(run_fixture("garbage.sh").await);
            assert!(
                why.starts_with(&format!(
                    "hook `{}` exited 0 with an answer that is not valid: not JSON",
                    fixture("garbage.sh")
                )),
                "{why}"
            );
        }

        #[tokio::test]
        async fn an_endless_answer_is_too_large_and_stopped_at_once() {
            let workspace = tempfile::tempdir().unwrap();
            let started = Instant::now();
            let why = reason(run_in(workspace.path(), &["yes"], 10_000, &json!({})).await);
            assert_eq!(
                why,
                "hook `yes` answer too large: more than 65536 bytes on stdout; the call is blocked"
            );
            assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
        }

        #[tokio::test]
        async fn a_finite_answer_over_the_limit_is_too_large() {
            let workspace = tempfile::tempdir().unwrap();
            let script = "head -c 70000 /dev/zero | tr '\\0' x; exit 0";
            let why = reason(run_in(workspace.path(), &["sh", "-c", script], 10_000, &json!({})).await);
            assert!(
                why.ends_with("answer too large: more than 65536 bytes on stdout; the call is blocked"),
                "{why}"
            );
            // Exactly at the limit is still read (and here is not JSON).
            let script = "head -c 65536 /dev/zero | tr '\\0' ' '; exit 0";
            let outcome = run_in(workspace.path(), &["sh", "-c", script], 10_000, &json!({})).await;
            assert_eq!(outcome, HookOutcome::Pass);
        }

        #[tokio::test]
        async fn a_process_that_left_the_group_and_holds_stdout_blocks() {
            // `setsid` puts the sleep out of the hook's group, so it is not
            // killed; it keeps stdout open, so the answer never ends.
            let workspace = tempfile::tempdir().unwrap();
            let script = "echo '{\"decision\": \"allow\"}'; setsid sh -c 'echo > out; exec sleep 1' & \
                          while [ ! -e out ]; do sleep 0.01; done; exit 0";
            let started = Instant::now();
            let why = reason(run_in(workspace.path(), &["sh", "-c", script], 10_000, &json!({})).await);
            assert!(why.contains("still holds its stdout"), "{why}");
            assert!(started.elapsed() < Duration::from_millis(900), "{:?}", started.elapsed());
        }

        #[tokio::test]
        async fn a_missing_program_blocks_with_a_clear_message() {
            let workspace = tempfile::tempdir().unwrap();
            let missing = fixture("no-such-hook.sh");
            let why = reason(run_in(workspace.path(), &[&missing, "x"], 10_000, &json!({})).await);
            assert_eq!(
                why,
                format!(
                    "hook `{missing} x` could not start: program `{missing}` was not found; the call is blocked"
                )
            );
            // A workspace that does not exist is named as the cause.
            let gone = workspace.path().join("gone");
            let why = reason(run_in(&gone, &["true"], 10_000, &json!({})).await);
            assert!(why.contains("is not a directory"), "{why}");
            // An empty command cannot run at all.
            assert_eq!(
                reason(run_in(workspace.path(), &[], 10_000, &json!({})).await),
                "hook `` has an empty command"
            );
        }

        #[tokio::test]
        async fn a_hook_that_never_reads_stdin_still_passes() {
            // Far more input than a pipe holds, so the write cannot finish
            // before the hook exits.
            let workspace = tempfile::tempdir().unwrap();
            let big = json!({"content": "x".repeat(4 << 20)});
            let started = Instant::now();
            let path = fixture("no_stdin.sh");
            assert_eq!(run_in(workspace.path(), &[&path], 10_000, &big).await, HookOutcome::Pass);
            assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
        }

        #[tokio::test]
        async fn leftover_background_processes_do_not_hold_the_answer() {
            // The hook answers and exits, leaving a child that holds stdout
            // open; the group is killed, so the answer comes at once.
            let workspace = tempfile::tempdir().unwrap();
            let script = "cat >/dev/null; echo '{\"decision\": \"allow\"}'; sleep 5 & exit 0";
            let started = Instant::now();
            let outcome = run_in(workspace.path(), &["sh", "-c", script], 10_000, &json!({})).await;
            assert_eq!(
                outcome,
                HookOutcome::Decide {
                    decision: HookDecision::Allow,
                    reason: None,
                    arguments: None,
                    context: None
                }
            );
            assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        }

        /// Starts `slow.sh` (which never answers) in `workspace` and drops
        /// the call after 300 ms, as a cancelled run does.
        async fn drop_a_slow_hook(workspace: &Path) {
            let path = fixture("slow.sh");
            let (command, arguments) = ([path.as_str()], json!({}));
            let running = run_in(workspace, &command, 10_000, &arguments);
            assert!(tokio::time::timeout(Duration::from_millis(300), running).await.is_err());
        }

        /// The pid `slow.sh` wrote into `file` in `workspace`.
        #[cfg(target_os = "linux")]
        fn pid_in(workspace: &Path, file: &str) -> i32 {
            std::fs::read_to_string(workspace.join(file)).unwrap().trim().parse().unwrap()
        }

        #[tokio::test]
        async fn dropping_the_call_kills_the_hook() {
            let workspace = tempfile::tempdir().unwrap();
            drop_a_slow_hook(workspace.path()).await;
            #[cfg(target_os = "linux")]
            {
                let (hook, child) =
                    (pid_in(workspace.path(), "hook.pid"), pid_in(workspace.path(), "child.pid"));
                let give_up = Instant::now() + Duration::from_secs(2);
                while !(dead(hook) && dead(child)) && Instant::now() < give_up {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert!(dead(hook) && dead(child), "hook {hook} or its child {child} is still running");
            }
        }

        #[cfg(target_os = "linux")]
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn dropping_the_call_reaps_the_hooks_orphans() {
            // As under the CLI, which makes itself a subreaper: the hook's
            // orphans become this process's children, and the drop guard
            // reaps them (gone from the process table, not zombies).
            nix::sys::prctl::set_child_subreaper(true).unwrap();
            let workspace = tempfile::tempdir().unwrap();
            drop_a_slow_hook(workspace.path()).await;
            for pid in [pid_in(workspace.path(), "hook.pid"), pid_in(workspace.path(), "child.pid")] {
                let give_up = Instant::now() + Duration::from_secs(5);
                while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < give_up {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert!(!Path::new(&format!("/proc/{pid}")).exists(), "{pid} is still in the process table");
            }
        }
    }
}
