//! What an `execute_tools` request asks for, read from its arguments and
//! its `requestState` before anything runs, within bounds.
//!
//! Pure: [`read_request`] decides which of a program, a batch, a resume of
//! a paused run or the answer to an `input_required` result a request is,
//! or refuses it with a sentence for the client. Nothing here runs, opens
//! a journal or checks a seal.

use serde_json::Value;

use codemode::batch::BatchError;
use codemode::run::ExecuteInput;

/// Most bytes of `execute_tools`' arguments (compact JSON): a program is
/// at most the engine's source limit (64 KiB by default) and a batch
/// carries tool arguments, so 4 MiB is room for a large batch; larger
/// arguments are refused before they are read. The same as the HTTP
/// server's body bound, and the longest line the stdio server reads.
pub const MAX_ARGUMENTS_BYTES: usize = 4 * 1024 * 1024;

/// Most bytes of a `requestState` echoed back by a client. The states this
/// server seals name a run and its pending calls (a few hundred bytes); one
/// that would be longer is not sealed (the run pauses for `codemode
/// approve` instead), so a longer one is refused before it is decoded.
pub const MAX_REQUEST_STATE_BYTES: usize = 64 * 1024;

/// The name of the resume field of `execute_tools`' input.
pub const RESUME: &str = "resume";

/// What an `execute_tools` request asks for.
#[derive(Debug)]
pub(crate) enum Request {
    /// The retry of an `input_required` answer: open this sealed state
    /// (at most [`MAX_REQUEST_STATE_BYTES`]) and apply the person's answers.
    Answered(String),
    /// `{"resume": RUN_ID}`: continue a paused run with the decisions a
    /// person recorded.
    Resume(String),
    /// A program or a batch, or the engine's own refusal of malformed input
    /// (the error is for the engine's failed receipt, which names the field).
    Input(Result<ExecuteInput, BatchError>),
    /// Refused before anything ran: the sentence for the client.
    Refused(String),
    /// `{"rollback": RUN_ID}`: undo a run's file changes (rollback.rs).
    Rollback(String),
    /// `{"wait": RUN_ID}`: the result of a run answered `running`
    /// (long_runs.rs).
    Wait(String),
    /// `{"cancel": RUN_ID}`: cancel a run answered `running`.
    Cancel(String),
}

/// Reads what a request with `args` (the tool's arguments), the
/// `requestState` `state` and (when `answered`) `inputResponses` asks for.
pub(crate) fn read_request(args: &Value, state: Option<&str>, answered: bool) -> Request {
    if let Err(bytes) = within(args, MAX_ARGUMENTS_BYTES) {
        return Request::Refused(format!(
            "the arguments are over {} MiB ({bytes} bytes or more), the most execute_tools reads; give a \
             shorter program, or split the batch into several calls",
            MAX_ARGUMENTS_BYTES >> 20
        ));
    }
    if state.is_some() || answered {
        return match state {
            None => Request::Refused(
                "inputResponses came without the requestState they answer; nothing was resumed".to_owned(),
            ),
            Some(sealed) if sealed.len() > MAX_REQUEST_STATE_BYTES => Request::Refused(format!(
                "requestState is {} bytes, over the {MAX_REQUEST_STATE_BYTES} of any this server issues; \
                 nothing was resumed",
                sealed.len()
            )),
            Some(sealed) => Request::Answered(sealed.to_owned()),
        };
    }
    if let Some(rollback) = args.get(super::rollback::ROLLBACK) {
        return super::rollback::rollback_of(args, rollback).map_or_else(Request::Refused, Request::Rollback);
    }
    if let Some(request) = super::long_runs::read(args) {
        return request;
    }
    match args.get(RESUME) {
        Some(resume) => match resume_of(args, resume) {
            Ok(run_id) => Request::Resume(run_id.to_owned()),
            Err(why) => Request::Refused(why),
        },
        None => Request::Input(ExecuteInput::from_value(args)),
    }
}

/// The run id of `{"resume": RUN_ID}`, which takes no other field.
fn resume_of<'a>(args: &'a Value, resume: &'a Value) -> Result<&'a str, String> {
    let others: Vec<&String> =
        args.as_object().into_iter().flat_map(|o| o.keys()).filter(|k| *k != RESUME).collect();
    if !others.is_empty() {
        return Err(format!(
            "`resume` continues a paused run and takes no other field; remove {}. A run's calls are \
             decided by a person (`codemode approve`), never in this call",
            others.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    resume
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| "`resume` must be the run_id of a paused run (a string)".to_owned())
}

/// `Ok` when `value`'s compact JSON is at most `bound` bytes, else
/// `Err(bytes)` with the bytes counted when the bound was passed (writing
/// stops there).
fn within(value: &Value, bound: usize) -> Result<(), usize> {
    struct Counter {
        bytes: usize,
        bound: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes += buf.len();
            if self.bytes > self.bound {
                return Err(std::io::Error::other("over the bound"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { bytes: 0, bound };
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => Ok(()),
        Err(_) => Err(counter.bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_form_is_read_and_a_bad_resume_is_refused() {
        assert!(matches!(read_request(&json!({"code": "return 1"}), None, false), Request::Input(Ok(_))));
        assert!(matches!(read_request(&json!({"code": 1}), None, false), Request::Input(Err(_))));
        assert!(
            matches!(read_request(&json!({"resume": "run-1"}), None, false), Request::Resume(r) if r == "run-1")
        );
        let refused = |args: Value| match read_request(&args, None, false) {
            Request::Refused(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(refused(json!({"resume": "r", "code": "x"})).contains("remove `code`"));
        assert!(refused(json!({"resume": ""})).contains("must be the run_id"));
        assert!(matches!(read_request(&json!({}), Some("s"), true), Request::Answered(s) if s == "s"));
        assert!(
            matches!(read_request(&json!({}), None, true), Request::Refused(w) if w.contains("without the requestState"))
        );
    }

    #[test]
    fn arguments_and_states_over_their_bounds_are_refused_naming_the_bound() {
        let big = json!({"code": "x".repeat(MAX_ARGUMENTS_BYTES)});
        match read_request(&big, None, false) {
            Request::Refused(why) => assert!(why.contains("over 4 MiB"), "{why}"),
            other => panic!("{other:?}"),
        }
        let at = json!({"code": "x".repeat(MAX_ARGUMENTS_BYTES - 20)});
        assert!(matches!(read_request(&at, None, false), Request::Input(Ok(_))));
        let state = "A".repeat(MAX_REQUEST_STATE_BYTES + 1);
        match read_request(&json!({}), Some(&state), true) {
            Request::Refused(why) => assert!(why.contains("over the 65536"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
