//! The `prompt` approver: a person answers on the terminal.

use std::fmt;
use std::io::{BufRead as _, BufReader, Read, Write};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::gate::approval::{Approval, ApprovalFuture, ApprovalRequest, Approver, ApproverError};
use crate::gate::elicitation::{ElicitationReply, ElicitationReplyFuture, ElicitationRequest};
use crate::gate::run_grant::{RunGrant, RunGrants};

use super::text::{bounded, one_line_json, printable};
use super::{allowed, terminal};

/// Asks a person on the terminal.
///
/// For each request it writes a compact description to its output (the
/// controlling terminal for [`PromptApprover::terminal`]):
///
/// ```text
/// codemode: approval needed for `write` [DESTRUCTIVE]
///   path: src/main.rs
///   call #4 from a program, run 0193f6c2a1b4
///   why:  writer under posture ask
///   args: {"content":"fn main() {}\n"}
///   a: allows every `write` call of this run
/// approve? [y/N/a]
/// ```
///
/// then reads one line from its input: `y` or `yes` allows, `n`, `no` or an
/// empty line denies (reason [`PromptApprover::DENIED_REASON`]); `a` or
/// `all` allows this call and, without asking, every later call of the
/// run the answer covers ([`PromptApprover::ALLOWED_FOR_RUN_REASON`]): every
/// call of the same tool, or for a tool that starts programs (`bash`,
/// `mcp_connect__<server>`) every call with the same subject (the exact
/// command), as [`RunGrant`] says (`codemode mcp serve` offers the same
/// grant through its questions). Case and surrounding spaces do not matter. Anything else asks
/// again, at most [`PromptApprover::MAX_TRIES`] lines in all, then denies.
/// The end of the input is an [`ApproverError`] ("the terminal closed"):
/// nobody is left to answer.
///
/// The `[DESTRUCTIVE]` label appears when the request is `destructive`,
/// except for tools that start programs: `bash` says it may destroy data
/// because a command may, which says nothing about the command shown; the
/// command itself is shown whole instead.
///
/// The request's `subject` (what the call acts on: `bash`'s command, a file
/// tool's path as the tool will reach it) comes first, on its own line,
/// labelled with the argument it comes from (`command:`, `path:`) or, when no
/// argument holds it as written (a path reached through a symlink, `./`
/// spellings), `acts on:`. It is shown whole up to
/// [`PromptApprover::MAX_SUBJECT_CHARS`] characters; a longer one keeps its
/// start and its end and says how many characters were left out between
/// them. A command is shown exactly as the tool gets it, whitespace
/// included: newlines, tabs and carriage returns as `\n`, `\t`, `\r`, other
/// blank or invisible characters (no-break and other Unicode spaces,
/// zero-width characters, fillers such as U+2800 and U+3164) as `\uXXXX`,
/// and a run of more than [`PromptApprover::MAX_SPACE_RUN`] spaces as
/// `[N spaces]`, so padding cannot push the rest of a command out of sight
/// ([`codemode_base::display_text::visible`], which server mode's questions
/// use too).
///
/// The other arguments follow as one line of JSON of at most
/// [`PromptApprover::MAX_ARGS_CHARS`] characters, without the argument the
/// subject line already shows (`{}` when there is none left). Without a
/// subject, that line shows every argument. Control characters and
/// bidirectional-text overrides in anything shown (tool name, reason,
/// subject, arguments) are replaced by `\uXXXX` escapes, so a program cannot
/// move the cursor or disguise what it asks for.
///
/// Prompts never interleave: each input/output pair has one async lock, held
/// from the first line written to the answer read, and every
/// [`PromptApprover::terminal`] shares the one process-wide lock of the real
/// terminal. Reading blocks, so it runs on tokio's blocking pool
/// (`spawn_blocking`). A prompt has no timeout (the run's deadline clock
/// stops while the run waits on nothing but it). If the approval is abandoned (the run cancelled)
/// while the read is blocked, the read still consumes the next line typed,
/// and the next prompt waits for it; note also that a tokio runtime waits
/// for blocking reads when it shuts down, unless shut down with a timeout.
pub struct PromptApprover {
    io: Arc<tokio::sync::Mutex<PromptIo>>,
}

impl PromptApprover {
    /// Lines read per request before giving up and denying.
    pub const MAX_TRIES: usize = 3;

    /// The most characters of the arguments' JSON shown in a prompt.
    pub const MAX_ARGS_CHARS: usize = 300;

    /// The most characters of the subject shown in a prompt; a longer one
    /// keeps its start and end and says how much was left out.
    pub const MAX_SUBJECT_CHARS: usize = 2000;

    /// The longest run of spaces a subject shows as spaces; a longer run is
    /// shown as `[N spaces]`.
    pub const MAX_SPACE_RUN: usize = codemode_base::display_text::MAX_SPACE_RUN;

    /// The reason of a denial at the prompt.
    pub const DENIED_REASON: &'static str = "denied at the prompt";

    /// The reason of an approval at the prompt.
    pub const ALLOWED_REASON: &'static str = "allowed at the prompt";

    /// The reason of a denial after [`PromptApprover::MAX_TRIES`] lines that
    /// were neither yes nor no.
    pub const NO_ANSWER_REASON: &'static str = "denied at the prompt: no y or n after 3 tries";

    /// The reason of an approval answered `a` at the prompt, and of every
    /// later call of the run it covers.
    pub const ALLOWED_FOR_RUN_REASON: &'static str =
        "allowed at the prompt for the rest of the run (answer `a`)";

    /// The token that ends every prompt line; a driver (or a person) answers
    /// after it.
    pub const QUESTION: &'static str = "approve? [y/N/a] ";

    /// Asks on this process's controlling terminal (`/dev/tty`): writes the
    /// request there and reads the answer from it, whatever stdin and
    /// stdout are. Fails each request with an [`ApproverError`] when there
    /// is no controlling terminal. All terminal prompts of the process
    /// share one lock, so they never interleave.
    pub fn terminal() -> PromptApprover {
        static TERMINAL: OnceLock<Arc<tokio::sync::Mutex<PromptIo>>> = OnceLock::new();
        let io = TERMINAL.get_or_init(|| {
            Arc::new(tokio::sync::Mutex::new(PromptIo {
                input: Input::Reader(BufReader::new(Box::new(terminal::Tty))),
                output: Box::new(terminal::Tty),
                allowed_for_run: RunGrants::default(),
            }))
        });
        PromptApprover { io: Arc::clone(io) }
    }

    /// Asks on `output` and reads answers from `input` (tests, hosts with
    /// their own terminal). Input is buffered, so lines typed ahead are kept
    /// for the next prompt of this approver.
    pub fn with_io(input: Box<dyn Read + Send>, output: Box<dyn Write + Send>) -> PromptApprover {
        let input = Input::Reader(BufReader::new(input));
        let io = PromptIo { input, output, allowed_for_run: RunGrants::default() };
        PromptApprover { io: Arc::new(tokio::sync::Mutex::new(io)) }
    }
}

impl fmt::Debug for PromptApprover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromptApprover").finish_non_exhaustive()
    }
}

impl Approver for PromptApprover {
    fn decide(&self, request: ApprovalRequest) -> ApprovalFuture {
        let io = Arc::clone(&self.io);
        Box::pin(async move {
            let text = describe(&request);
            let grant = RunGrant::of(&request);
            let mut io = io.lock_owned().await;
            // Checked under the lock: calls waiting behind the prompt that
            // granted it are not asked.
            if let Some(grant) = &grant
                && io.allowed_for_run.cover(grant)
            {
                return Ok(allowed(PromptApprover::ALLOWED_FOR_RUN_REASON));
            }
            tokio::task::spawn_blocking(move || {
                let answer = ask(&mut io, &text, grant.as_ref());
                if let Some(grant) = grant
                    && matches!(&answer, Ok(a) if a.reason.as_deref() == Some(PromptApprover::ALLOWED_FOR_RUN_REASON))
                {
                    io.allowed_for_run.hold(grant);
                }
                answer
            })
            .await
            .map_err(|e| ApproverError(format!("the prompt failed: {e}")))?
        })
    }

    /// Asks on the terminal, field by field, under the same lock as the
    /// approval prompts (the dialogue is described in
    /// `gate/elicitation/prompt.rs` and docs/MCP.md).
    fn elicit(&self, request: ElicitationRequest) -> ElicitationReplyFuture {
        let io = Arc::clone(&self.io);
        Box::pin(async move {
            let mut io = io.lock_owned().await;
            tokio::task::spawn_blocking(move || crate::gate::elicitation::prompt::ask(&mut io, &request))
                .await
                .unwrap_or_else(|e| ElicitationReply::cancel("prompt", format!("the prompt failed: {e}")))
        })
    }
}

/// Where a prompt writes and reads, and what `a` answers allowed.
pub(crate) struct PromptIo {
    pub(crate) input: Input,
    pub(crate) output: Box<dyn Write + Send>,
    /// The calls answered `a`: later calls they cover are allowed unasked.
    allowed_for_run: RunGrants,
}

/// The prompt's line saying what `a` allows on a call that would make
/// `grant` (`None`: `a` allows the call alone).
fn grant_line(grant: Option<&RunGrant>) -> String {
    match grant {
        None => "  a: allows this call only (an ask rule or a hook asks about each such call)\n".to_owned(),
        Some(grant) => format!("  a: allows {}\n", grant.reach(&bounded(&printable(grant.tool()), 120))),
    }
}

/// Where answers come from: a buffered reader, so lines typed ahead are
/// kept for the next prompt.
pub(crate) enum Input {
    /// A reader (the controlling terminal, or one injected).
    Reader(BufReader<Box<dyn Read + Send>>),
}

impl Input {
    /// Reads one line (its newline included, if any) into `line`; 0 at the
    /// end of the input.
    pub(crate) fn read_line(&mut self, line: &mut Vec<u8>) -> std::io::Result<usize> {
        match self {
            Input::Reader(reader) => reader.read_until(b'\n', line),
        }
    }
}

/// Writes the prompt for `text` and reads answers; see [`PromptApprover`].
pub(super) fn ask(
    io: &mut PromptIo,
    text: &str,
    grant: Option<&RunGrant>,
) -> Result<Approval, ApproverError> {
    let write_failed = |e: std::io::Error| ApproverError(format!("cannot write the prompt: {e}"));
    write!(io.output, "{text}{}{}", grant_line(grant), PromptApprover::QUESTION).map_err(write_failed)?;
    io.output.flush().map_err(write_failed)?;
    for attempt in 1..=PromptApprover::MAX_TRIES {
        let mut line = Vec::new();
        let n = io
            .input
            .read_line(&mut line)
            .map_err(|e| ApproverError(format!("reading the answer failed: {e}")))?;
        if n == 0 {
            // Best effort: end the dangling question line.
            let _ = writeln!(io.output).and_then(|()| io.output.flush());
            return Err(ApproverError("the terminal closed".to_owned()));
        }
        match parse_answer(&String::from_utf8_lossy(&line)) {
            Some(Typed::Yes) => return Ok(allowed(PromptApprover::ALLOWED_REASON)),
            Some(Typed::No) => return Ok(Approval::deny(PromptApprover::DENIED_REASON)),
            Some(Typed::ForTheRun) if grant.is_none() => return Ok(allowed(PromptApprover::ALLOWED_REASON)),
            Some(Typed::ForTheRun) => return Ok(allowed(PromptApprover::ALLOWED_FOR_RUN_REASON)),
            None if attempt < PromptApprover::MAX_TRIES => {
                write!(io.output, "please answer y, n or a; {}", PromptApprover::QUESTION)
                    .and_then(|()| io.output.flush())
                    .map_err(write_failed)?;
            }
            None => {}
        }
    }
    let _ = writeln!(io.output, "no answer: denied").and_then(|()| io.output.flush());
    Ok(Approval::deny(PromptApprover::NO_ANSWER_REASON))
}

/// An answer typed at the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Typed {
    Yes,
    No,
    /// Allow this call and the later calls of the run it covers.
    ForTheRun,
}

/// `y`/`yes` allow, `n`/`no`/nothing deny, `a`/`all` allow for the run,
/// anything else is no answer.
pub(super) fn parse_answer(line: &str) -> Option<Typed> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(Typed::Yes),
        "n" | "no" | "" => Some(Typed::No),
        "a" | "all" => Some(Typed::ForTheRun),
        _ => None,
    }
}

/// The lines of a prompt, up to (not including) the question.
pub(super) fn describe(request: &ApprovalRequest) -> String {
    let label = if request.destructive && !crate::gate::ask_posture::starts_programs(&request.tool) {
        " [DESTRUCTIVE]"
    } else {
        ""
    };
    let caller = match request.caller {
        crate::receipt::Caller::Program => "a program",
        crate::receipt::Caller::Direct => "a direct call",
    };
    let mut text =
        format!("\ncodemode: approval needed for `{}`{label}\n", bounded(&printable(&request.tool), 120));
    let mut arguments = std::borrow::Cow::Borrowed(&request.arguments);
    if let Some(subject) = &request.subject {
        let (label, shown) = match subject_argument(&request.arguments, subject) {
            Some((key, raw)) => {
                if let Value::Object(map) = arguments.to_mut() {
                    map.remove(key);
                }
                (bounded(&printable(key), 40), raw)
            }
            // `mcp_connect__<server>`: the server's command line or URL.
            None if request.tool.starts_with(codemode_base::CONNECT_PREFIX) => {
                let http = subject.starts_with("http://") || subject.starts_with("https://");
                ((if http { "connects to" } else { "runs" }).to_owned(), subject.as_str())
            }
            None => ("acts on".to_owned(), subject.as_str()),
        };
        text.push_str(&format!("  {label}: {}\n", shown_subject(shown)));
    }
    text.push_str(&format!(
        "  call #{} from {caller}, run {}\n",
        request.seq,
        bounded(&printable(&request.run_id), 120)
    ));
    if !request.reason.is_empty() {
        text.push_str(&format!("  why:  {}\n", bounded(&printable(&request.reason), 300)));
    }
    text.push_str(&format!("  args: {}\n", one_line_json(&arguments, PromptApprover::MAX_ARGS_CHARS)));
    text
}

/// The top-level argument the subject comes from, and its text as the tool
/// gets it (the gate gives a command with its runs of whitespace collapsed;
/// the exact text is what runs, and what is shown): the string argument
/// equal to `subject` once runs of whitespace are collapsed to one space.
/// `None` when no argument is the subject as written (a path spelled with
/// `./` or reached through a symlink), or when several are and their exact
/// texts differ (which one runs cannot be told): then the subject is shown
/// as the gate gave it and every argument stays on the `args:` line.
pub(super) fn subject_argument<'a>(arguments: &'a Value, subject: &str) -> Option<(&'a str, &'a str)> {
    let Value::Object(map) = arguments else { return None };
    let collapsed = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let subject = collapsed(subject);
    let mut candidates = map
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .filter(|(_, v)| collapsed(v) == subject);
    let first = candidates.next()?;
    candidates.all(|(_, v)| v == first.1).then_some(first)
}

/// `text` for the subject line: every character visible (see
/// [`PromptApprover`]), whole up to [`PromptApprover::MAX_SUBJECT_CHARS`]
/// shown characters; a longer text keeps its first and last characters
/// and says how many were left out between them.
pub(super) fn shown_subject(text: &str) -> String {
    // Each piece is what one character, or one long run of spaces, shows
    // as, with how many characters of `text` it stands for.
    let pieces = codemode_base::display_text::visible_pieces(text);
    let width = |p: &(String, usize)| p.0.chars().count();
    let total: usize = pieces.iter().map(width).sum();
    if total <= PromptApprover::MAX_SUBJECT_CHARS {
        return pieces.into_iter().map(|p| p.0).collect();
    }
    // Keep three quarters of the room for the start, a quarter for the end
    // (where a chained command would hide).
    let room = PromptApprover::MAX_SUBJECT_CHARS - 60;
    let (mut head, mut head_width) = (0, 0);
    while head < pieces.len() && head_width + width(&pieces[head]) <= room * 3 / 4 {
        head_width += width(&pieces[head]);
        head += 1;
    }
    let (mut tail, mut tail_width) = (pieces.len(), 0);
    while tail > head && tail_width + width(&pieces[tail - 1]) <= room - head_width {
        tail_width += width(&pieces[tail - 1]);
        tail -= 1;
    }
    let left_out: usize = pieces[head..tail].iter().map(|p| p.1).sum();
    let mut out: String = pieces[..head].iter().map(|p| p.0.as_str()).collect();
    out.push_str(&format!(" [… {left_out} chars left out …] "));
    out.extend(pieces[tail..].iter().map(|p| p.0.as_str()));
    out
}
