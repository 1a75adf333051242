//! The built-in approvers: `deny`, `allow`, `prompt` and `cmd:PROGRAM`, and
//! the two functions that pick one ([`approver_from_spec`] for `--approve`,
//! [`default_approver`] when none is given).
//!
//! Every approver answers through the [`Approver`] trait. An answer is
//! [`Approval`] (allow, or deny with a reason: the call is `approved` or
//! `denied`); an [`ApproverError`] means the approver could not answer (the
//! terminal closed, the command crashed, hung or printed nonsense) and the
//! gate refuses the call.
//!
//! - [`DenyApprover`] denies everything. It is the default when codemode has
//!   no terminal to ask on.
//! - [`AllowApprover`] allows everything.
//! - [`PromptApprover`] asks a person on the terminal (the controlling
//!   terminal, `/dev/tty`, so a program piped on stdin can still be
//!   approved), one prompt at a time.
//! - [`CommandApprover`] runs a program that gets the [`ApprovalRequest`] as
//!   JSON on stdin and prints `{"decision": "allow"|"deny"|"pause", "reason"?: "..."}`
//!   (`pause` leaves the call for `codemode resume`).
//!
//! Each also answers elicitations (questions MCP servers ask the user
//! during a call, [`Approver::elicit`]): `allow` accepts a form's defaults,
//! `deny` and `pause` decline, the prompt asks field by field, and a
//! command gets them with `"kind": "elicitation"` (see
//! `gate/elicitation/`).

use std::sync::Arc;

use super::approval::{Answer, Approval, ApprovalFuture, ApprovalRequest, Approver};
use super::elicitation::{ElicitationReply, ElicitationReplyFuture, ElicitationRequest};

mod batch;
mod command;
mod prompt;
mod text;

pub use batch::BatchApprover;
pub use command::CommandApprover;
pub use prompt::PromptApprover;
pub(crate) use prompt::PromptIo;
pub(crate) use text::{bounded, one_line_json, printable};

/// Picks an approver from its `--approve` spelling.
///
/// - `deny`: [`DenyApprover`], every approval is denied;
/// - `allow`: [`AllowApprover`], every approval is granted;
/// - `prompt`: [`PromptApprover::terminal`], ask on the controlling
///   terminal (an error when codemode has none);
/// - `pause`: [`PauseApprover`], end the run `paused` on the call, to be
///   decided later with `codemode resume`;
/// - `cmd:PROGRAM [ARGS...]`: [`CommandApprover`]. The text after `cmd:` is
///   split on whitespace into the program and its arguments; no shell is
///   involved, so there is no quoting, globbing or variable expansion (write
///   a script for anything more).
///
/// Leading and trailing whitespace is ignored; the names are lowercase.
///
/// # Errors
///
/// A message for the user when the spec is none of the above, `cmd:` has
/// no program, or `prompt` is asked for and the controlling terminal cannot
/// be opened.
pub fn approver_from_spec(spec: &str) -> Result<Arc<dyn Approver>, String> {
    let spec = spec.trim();
    match spec {
        "deny" => Ok(Arc::new(DenyApprover::with_reason(DenyApprover::EXPLICIT_REASON))),
        "allow" => Ok(Arc::new(AllowApprover)),
        "prompt" => match terminal::open() {
            Ok(_) => Ok(Arc::new(PromptApprover::terminal())),
            Err(e) => Err(format!(
                "`--approve prompt` asks on the terminal, and codemode has none to ask on ({e}); use \
                 pause (decide later with `codemode approve`), cmd:PROGRAM, allow or deny"
            )),
        },
        "pause" => Ok(Arc::new(PauseApprover)),
        "" => Err("no approver given: use deny, allow, prompt, pause or cmd:PROGRAM".to_owned()),
        _ => match spec.strip_prefix("cmd:") {
            Some(command_line) => Ok(Arc::new(CommandApprover::parse(command_line)?)),
            None => Err(format!("unknown approver `{spec}`: use deny, allow, prompt, pause or cmd:PROGRAM")),
        },
    }
}

/// The approver used when none is configured: [`PromptApprover::terminal`]
/// when stderr is a terminal and the controlling terminal can be opened
/// (someone is there to answer; stdin may be a pipe holding the program),
/// else a [`DenyApprover`] whose reason says codemode had no terminal.
/// Processes started with stderr piped (tests, hosts) therefore never
/// prompt.
pub fn default_approver() -> Arc<dyn Approver> {
    use std::io::IsTerminal as _;
    if prompts_by_default(std::io::stderr().is_terminal(), || terminal::open().is_ok()) {
        Arc::new(PromptApprover::terminal())
    } else {
        Arc::new(DenyApprover::new())
    }
}

/// Whether the default approver is the prompt: stderr is a terminal and
/// the controlling terminal opens (only tried when stderr is one).
fn prompts_by_default(stderr_is_terminal: bool, terminal_opens: impl FnOnce() -> bool) -> bool {
    stderr_is_terminal && terminal_opens()
}

/// The controlling terminal, opened once for reading and writing: where the
/// terminal prompt asks and reads its answers.
mod terminal {
    use std::fs::File;
    use std::io::{Read, Write};
    use std::sync::OnceLock;

    /// The device of the controlling terminal.
    #[cfg(unix)]
    const DEVICE: &str = "/dev/tty";

    /// The terminal, or why it cannot be opened (the same for the whole
    /// process).
    pub(super) fn open() -> Result<&'static File, String> {
        static TTY: OnceLock<Result<File, String>> = OnceLock::new();
        TTY.get_or_init(|| {
            #[cfg(unix)]
            {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(DEVICE)
                    .map_err(|e| format!("cannot open the controlling terminal {DEVICE}: {e}"))
            }
            #[cfg(not(unix))]
            {
                Err("the terminal prompt runs on Unix only".to_owned())
            }
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// Reads and writes the controlling terminal; an I/O error when it
    /// cannot be opened.
    pub(super) struct Tty;

    fn unavailable(e: String) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::NotFound, e)
    }

    impl Read for Tty {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            open().map_err(unavailable)?.read(buf)
        }
    }

    impl Write for Tty {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            open().map_err(unavailable)?.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            open().map_err(unavailable)?.flush()
        }
    }
}

// ---------------------------------------------------------------------------
// deny, allow

/// Denies every request, always with the same reason.
///
/// [`DenyApprover::new`] (and [`Default`]) give the reason used when codemode
/// ran without a terminal ([`DenyApprover::NO_TERMINAL_REASON`]);
/// `--approve deny` uses [`DenyApprover::EXPLICIT_REASON`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyApprover {
    reason: String,
}

impl DenyApprover {
    /// The reason given by the default approver when there is no terminal.
    pub const NO_TERMINAL_REASON: &'static str = "no approver: codemode ran without a terminal to ask on \
         (stderr is not a terminal, or there is no controlling terminal); give `--approve allow` (or \
         `--approve cmd:PATH`) or an allow rule";

    /// The reason given when the user chose `--approve deny`.
    pub const EXPLICIT_REASON: &'static str =
        "denied by the `deny` approver; use an allow rule or another --approve";

    /// Denies with [`DenyApprover::NO_TERMINAL_REASON`].
    pub fn new() -> DenyApprover {
        DenyApprover::with_reason(DenyApprover::NO_TERMINAL_REASON)
    }

    /// Denies with `reason`.
    pub fn with_reason(reason: impl Into<String>) -> DenyApprover {
        DenyApprover { reason: reason.into() }
    }

    /// The reason every denial carries.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl Default for DenyApprover {
    fn default() -> DenyApprover {
        DenyApprover::new()
    }
}

impl Approver for DenyApprover {
    fn decide(&self, _request: ApprovalRequest) -> ApprovalFuture {
        let approval = Approval::deny(self.reason.clone());
        Box::pin(std::future::ready(Ok(approval)))
    }

    /// Declines, saying why: no terminal to ask on, `--approve deny`, or
    /// this approver's own reason.
    fn elicit(&self, _request: ElicitationRequest) -> ElicitationReplyFuture {
        let reason = match self.reason.as_str() {
            DenyApprover::NO_TERMINAL_REASON => {
                "no approver: codemode ran without a terminal to ask on; use \
                 --approve prompt, allow (a form's defaults) or cmd:PROGRAM"
                    .to_owned()
            }
            DenyApprover::EXPLICIT_REASON => "declined by the `deny` approver".to_owned(),
            other => format!("declined: {other}"),
        };
        Box::pin(std::future::ready(ElicitationReply::decline("deny", reason)))
    }
}

/// Allows every request (`--approve allow`). The approval carries the reason
/// [`AllowApprover::REASON`], so the receipt shows who approved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllowApprover;

impl AllowApprover {
    /// The reason every approval carries.
    pub const REASON: &'static str = "allowed by the `allow` approver";
}

impl Approver for AllowApprover {
    fn decide(&self, _request: ApprovalRequest) -> ApprovalFuture {
        Box::pin(std::future::ready(Ok(allowed(AllowApprover::REASON))))
    }

    /// Accepts a form with its defaults (every field that has a `default`);
    /// declines a form with a required field that has none, and every URL.
    fn elicit(&self, request: ElicitationRequest) -> ElicitationReplyFuture {
        Box::pin(std::future::ready(super::elicitation::allow_reply(&request)))
    }
}

/// Decides nothing now (`--approve pause`): a program run ends `paused`
/// on the first calls that need a decision, with them listed in the
/// receipt's `pending` and its journal kept; `codemode resume RUN_ID
/// --allow SEQ | --deny SEQ` (or [`Engine::resume`](crate::Engine::resume))
/// decides them and goes on (docs/JOURNAL.md). A direct call or a batch
/// cannot pause: there such a call is refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PauseApprover;

impl Approver for PauseApprover {
    fn decide(&self, _request: ApprovalRequest) -> ApprovalFuture {
        Box::pin(std::future::ready(Ok(Approval::pause())))
    }

    /// Declines: a run cannot pause in the middle of a tool call.
    fn elicit(&self, _request: ElicitationRequest) -> ElicitationReplyFuture {
        Box::pin(std::future::ready(ElicitationReply::decline("pause", PauseApprover::ELICITATION_REASON)))
    }
}

impl PauseApprover {
    /// Why the `pause` approver declines every elicitation.
    pub const ELICITATION_REASON: &'static str = "the `pause` approver cannot pause a run in the middle of a \
         tool call, so the question was declined; use --approve prompt, allow or cmd:PROGRAM to answer it";
}

/// An approval carrying `reason`.
fn allowed(reason: &str) -> Approval {
    Approval { decision: Answer::Allow, reason: Some(reason.to_owned()) }
}

#[cfg(test)]
pub(super) mod tests;
