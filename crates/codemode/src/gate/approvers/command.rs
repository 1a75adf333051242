//! The `cmd:PROGRAM` approver: an external program answers.

use std::time::Duration;

use serde::Deserialize;

use crate::gate::approval::{Answer, Approval, ApprovalFuture, ApprovalRequest, Approver, ApproverError};
use crate::gate::elicitation::{ElicitationReply, ElicitationReplyFuture, ElicitationRequest};

use super::text::{bounded, printable};

/// Asks an external program (`--approve cmd:PROGRAM [ARGS...]`).
///
/// For each request the program is started (no shell: the program and its
/// arguments are passed as they are; a name without `/` is looked up on
/// `PATH`) with codemode's environment and working directory. It gets the
/// [`ApprovalRequest`] as one line of JSON on stdin (`"kind": "approval"`,
/// then `tool`, `arguments`, `caller`, `run_id`, `seq`, `reason`,
/// `subject`, `annotations`, `destructive`), then
/// end of input, and must exit 0 after printing on stdout:
///
/// ```json
/// {"decision": "allow", "reason": "optional, shown in the receipt"}
/// ```
///
/// `decision` is `allow`, `deny` or `pause` (leave the call for `codemode
/// resume`: the run pauses on it where it can, and the call is refused
/// where it cannot); `reason` is optional (a denial without
/// one gets "denied by approver command `PROGRAM`"); other keys are ignored.
/// The program need not read its stdin.
///
/// An elicitation (a question an MCP server asks during a call) reaches the
/// same program as an [`ElicitationRequest`] with `"kind": "elicitation"`;
/// it answers `{"action": "accept"|"decline"|"cancel", "content"?: {...},
/// "reason"?: "..."}`, and anything else (a crash, a timeout, an approval's
/// `decision`) declines the question with the reason in the receipt. A
/// program that knows only approvals therefore declines every question.
///
/// Each of these is an [`ApproverError`] (the call is refused) saying which:
/// the program cannot be found or started; it exits non-zero or is killed by
/// a signal (a crash); its output is not that JSON; it writes more than
/// [`CommandApprover::MAX_STDOUT_BYTES`] on stdout; it runs longer than its
/// timeout ([`CommandApprover::DEFAULT_TIMEOUT`], or
/// [`CommandApprover::with_timeout`]). The last
/// [`CommandApprover::MAX_STDERR_BYTES`] of its stderr are added to the
/// error's message.
///
/// The program runs in a session (so a process group, with no controlling terminal) of its own. When it exits, at the
/// timeout, and when the approval is abandoned (the run cancelled), the
/// whole group is killed with SIGKILL and reaped, so nothing it started
/// outlives the approval. Unix only: elsewhere every request is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandApprover {
    program: String,
    args: Vec<String>,
    timeout: Duration,
}

impl CommandApprover {
    /// How long a program may take to answer unless set otherwise: 60 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// The most stdout read from the program (64 KiB); more is an error.
    pub const MAX_STDOUT_BYTES: usize = 64 << 10;

    /// How much of the program's stderr (its end) goes into an error (4 KiB).
    pub const MAX_STDERR_BYTES: usize = 4 << 10;

    /// Runs `program` with `args`, with the default timeout.
    pub fn new(
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> CommandApprover {
        CommandApprover {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            timeout: CommandApprover::DEFAULT_TIMEOUT,
        }
    }

    /// Parses `PROGRAM [ARGS...]` (what follows `cmd:`), split on
    /// whitespace: no shell, no quoting.
    ///
    /// # Errors
    ///
    /// A message when there is no program.
    pub fn parse(command_line: &str) -> Result<CommandApprover, String> {
        let mut words = command_line.split_whitespace();
        let program = words
            .next()
            .ok_or("`cmd:` needs a program: cmd:PROGRAM [ARGS...] (split on spaces, no shell)")?;
        Ok(CommandApprover::new(program, words))
    }

    /// Sets how long the program may take to answer.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> CommandApprover {
        self.timeout = timeout;
        self
    }

    /// The program.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Its arguments.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// How long it may take to answer.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl Approver for CommandApprover {
    fn decide(&self, request: ApprovalRequest) -> ApprovalFuture {
        let this = self.clone();
        Box::pin(async move {
            let body = request_json("approval", &request)?;
            child::run(&this, body, |out| parse_reply(&this.program, out)).await
        })
    }

    /// Runs the program with the request as JSON (`"kind": "elicitation"`)
    /// and reads `{"action": ...}`; a program that fails or prints anything
    /// else declines, with the reason in the receipt.
    fn elicit(&self, request: ElicitationRequest) -> ElicitationReplyFuture {
        let this = self.clone();
        Box::pin(async move {
            let by = format!("cmd:{}", this.program);
            let run = async {
                let body = request_json("elicitation", &request)?;
                child::run(&this, body, |out| crate::gate::elicitation::reply::parse(&this.program, out))
                    .await
            };
            match run.await {
                Ok((answer, reason)) => ElicitationReply { answer, by, reason },
                Err(e) => {
                    ElicitationReply::decline(by, format!("the approver command could not answer: {e}"))
                }
            }
        })
    }

    /// The program (as a path, or found on `PATH` when its name has no `/`)
    /// and every argument that names an existing file, canonical.
    fn named_files(&self) -> Vec<std::path::PathBuf> {
        // Every file the command names, by the same reading as hooks' and
        // servers' (its program, `#!` interpreter, arguments, the words of
        // a shell string), missing ones included so that their folder is
        // protected and a file created during the run is not run. Any
        // folder counts: the approver may be kept outside the workspace.
        let argv: Vec<String> =
            std::iter::once(self.program.clone()).chain(self.args.iter().cloned()).collect();
        let here = std::env::current_dir().unwrap_or_default();
        codemode_base::command_files::command_files(&argv, &here, std::path::Path::new("/")).files
    }
}

/// `request` as one line of JSON after `"kind": KIND`, for a `cmd:`
/// approver's stdin.
pub(super) fn request_json(
    kind: &'static str,
    request: &impl serde::Serialize,
) -> Result<Vec<u8>, ApproverError> {
    #[derive(serde::Serialize)]
    struct Tagged<'a, T: serde::Serialize> {
        kind: &'static str,
        #[serde(flatten)]
        body: &'a T,
    }
    let mut body = serde_json::to_vec(&Tagged { kind, body: request })
        .map_err(|e| ApproverError(format!("cannot encode the {kind} request: {e}")))?;
    body.push(b'\n');
    Ok(body)
}

/// What a `cmd:` approver prints.
#[derive(Deserialize)]
pub(super) struct Reply {
    pub(super) decision: Answer,
    #[serde(default)]
    pub(super) reason: Option<String>,
}

/// Reads a `cmd:` approver's stdout.
pub(super) fn parse_reply(program: &str, stdout: &[u8]) -> Result<Approval, String> {
    let text = String::from_utf8_lossy(stdout);
    let text = text.trim();
    if text.is_empty() {
        return Err(format!(
            "approver command `{program}` printed nothing; it must print {{\"decision\": \"allow\"|\"deny\"|\"pause\"}}"
        ));
    }
    let reply: Reply = serde_json::from_str(text).map_err(|e| {
        format!(
            "approver command `{program}` printed `{}`, which is not {{\"decision\": \"allow\"|\"deny\"|\"pause\", \
             \"reason\"?: \"...\"}}: {e}",
            bounded(&printable(text), 200)
        )
    })?;
    let reason = reply.reason.filter(|r| !r.trim().is_empty());
    Ok(match reply.decision {
        Answer::Allow => Approval { decision: Answer::Allow, reason },
        Answer::Deny => {
            Approval::deny(reason.unwrap_or_else(|| format!("denied by approver command `{program}`")))
        }
        Answer::Pause => Approval { decision: Answer::Pause, reason },
    })
}

#[cfg(not(unix))]
/// Running the approver program as a child in a process group of its own.
mod child {
    use super::*;

    pub(super) async fn run<T>(
        _: &CommandApprover,
        _: Vec<u8>,
        _: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, ApproverError> {
        Err(ApproverError("`cmd:` approvers run on Unix only".to_owned()))
    }
}

/// Running the approver program as a child in a process group of its own.
#[cfg(unix)]
mod child {
    use std::process::{ExitStatus, Stdio};

    use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::time::Instant;

    use super::*;
    use codemode_base::process_group::ProcessGroup;

    /// After the program exits, how long to wait for its pipes to reach
    /// their end (a process that left the group may hold them).
    const DRAIN_GRACE: Duration = Duration::from_millis(250);

    /// How long to keep reaping a killed group's processes.
    const REAP_WAIT: Duration = Duration::from_secs(2);

    /// Bytes read from a pipe at a time.
    const READ_CHUNK: usize = 8 << 10;

    /// How the wait for the program ended.
    enum End {
        /// It exited (its pipes drained, or the drain grace passed).
        Exited,
        /// Its time ran out.
        TimedOut,
        /// It wrote more than the stdout bound.
        TooMuchOutput,
    }

    /// Runs `approver`'s program with `body` on its stdin and reads its
    /// stdout with `parse`; see [`CommandApprover`].
    pub(super) async fn run<T>(
        approver: &CommandApprover,
        body: Vec<u8>,
        parse: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, ApproverError> {
        let started = Instant::now();
        let mut group = start(approver)?;
        let mut out = Vec::new();
        let mut err = Tail::new(CommandApprover::MAX_STDERR_BYTES);
        let (end, status) = talk(&mut group, &body, &mut out, &mut err, started + approver.timeout).await;
        let status = match status {
            Some(status) => {
                group.kill();
                status
            }
            // Still running (timed out, too much output): SIGTERM, the
            // grace period, then SIGKILL.
            None => group.terminate().await,
        };
        group.reap().await;
        check_end(approver, end, status).map_err(|message| with_stderr(&err, message))?;
        parse(&out).map_err(|message| with_stderr(&err, message))
    }

    /// Starts `approver`'s program in a session of its own (no controlling
    /// terminal: process_group.rs), dying with this process, its three
    /// pipes piped.
    fn start(approver: &CommandApprover) -> Result<ProcessGroup, ApproverError> {
        let program = approver.program.as_str();
        let mut command = tokio::process::Command::new(program);
        command
            .args(&approver.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = codemode_base::process_group::dying_with_parent(
            codemode_base::process_group::in_new_session(&mut command),
        )
        .spawn()
        .map_err(|e| {
            ApproverError(match e.kind() {
                std::io::ErrorKind::NotFound => {
                    format!("approver command `{program}` not found: {e}")
                }
                _ => format!("cannot start approver command `{program}`: {e}"),
            })
        })?;
        ProcessGroup::new(child, "approver", REAP_WAIT)
            .ok_or_else(|| ApproverError("the approver command exited before it could be tracked".to_owned()))
    }

    /// Writes `body` to the program's stdin, reads its stdout into `out`
    /// (up to [`CommandApprover::MAX_STDOUT_BYTES`]) and the end of its
    /// stderr into `err`, until it exited and its pipes reached their end
    /// (or [`DRAIN_GRACE`] passed), `deadline` passed, or it wrote too
    /// much. How the wait ended, and the exit status if it exited.
    async fn talk(
        group: &mut ProcessGroup,
        body: &[u8],
        out: &mut Vec<u8>,
        err: &mut Tail,
        mut deadline: Instant,
    ) -> (End, Option<std::io::Result<ExitStatus>>) {
        let stdin = group.child().stdin.take();
        let stdout = group.child().stdout.take();
        let stderr = group.child().stderr.take();
        let mut status = None;
        let writing = write_request(stdin, body);
        let reading_out = read_capped(stdout, out, CommandApprover::MAX_STDOUT_BYTES);
        let reading_err = read_tail(stderr, err);
        tokio::pin!(writing, reading_out, reading_err);
        let (mut written, mut out_done, mut err_done) = (false, false, false);
        let end = loop {
            if status.is_some() && out_done && err_done {
                break End::Exited;
            }
            tokio::select! {
                s = group.child().wait(), if status.is_none() => {
                    status = Some(s);
                    // Whatever it left running dies with it, so its pipes close.
                    group.kill();
                    deadline = deadline.min(Instant::now() + DRAIN_GRACE);
                }
                over = &mut reading_out, if !out_done => {
                    out_done = true;
                    if over {
                        break End::TooMuchOutput;
                    }
                }
                () = &mut reading_err, if !err_done => err_done = true,
                () = &mut writing, if !written => written = true,
                () = tokio::time::sleep_until(deadline) => {
                    break if status.is_some() { End::Exited } else { End::TimedOut };
                }
            }
        };
        (end, status)
    }

    /// Why the program's answer cannot be used, if it cannot: it timed
    /// out, wrote too much, could not be waited for, or did not exit
    /// successfully (`status`).
    fn check_end(
        approver: &CommandApprover,
        end: End,
        status: std::io::Result<ExitStatus>,
    ) -> Result<(), String> {
        let program = approver.program.as_str();
        match end {
            End::TimedOut => {
                return Err(format!(
                    "approver command `{program}` timed out after {} ms; its process group was killed",
                    approver.timeout.as_millis()
                ));
            }
            End::TooMuchOutput => {
                return Err(format!(
                    "approver command `{program}` wrote more than {} KiB on stdout; it was killed",
                    CommandApprover::MAX_STDOUT_BYTES >> 10
                ));
            }
            End::Exited => {}
        }
        let status = status.map_err(|e| format!("waiting for approver command `{program}` failed: {e}"))?;
        if !status.success() {
            use std::os::unix::process::ExitStatusExt as _;
            let how = match (status.code(), status.signal()) {
                (Some(code), _) => format!("exit code {code}"),
                (None, Some(signal)) => format!("killed by {}", signal_name(signal)),
                (None, None) => status.to_string(),
            };
            return Err(format!("approver command `{program}` crashed ({how})"));
        }
        Ok(())
    }

    /// `message`, followed by the program's stderr (its last bytes) when it
    /// wrote any.
    fn with_stderr(err: &Tail, message: String) -> ApproverError {
        let (text, cut) = err.text();
        let text = text.trim_end();
        if text.is_empty() {
            ApproverError(message)
        } else {
            let which = if cut { "last bytes of its stderr" } else { "its stderr" };
            ApproverError(format!("{message}\n--- {which} ---\n{text}"))
        }
    }

    /// Writes the request and closes stdin. A program that exits without
    /// reading it is fine (its answer decides), so write errors are ignored.
    async fn write_request(stdin: Option<tokio::process::ChildStdin>, body: &[u8]) {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(body).await;
            let _ = stdin.shutdown().await;
        }
    }

    /// Reads `reader` to its end into `out`; `true` as soon as more than
    /// `max` bytes came.
    async fn read_capped(reader: Option<impl AsyncRead + Unpin>, out: &mut Vec<u8>, max: usize) -> bool {
        let Some(mut reader) = reader else { return false };
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if out.len() > max {
                        return true;
                    }
                }
            }
        }
    }

    /// Reads `reader` to its end, keeping the last bytes in `tail`.
    async fn read_tail(reader: Option<impl AsyncRead + Unpin>, tail: &mut Tail) {
        let Some(mut reader) = reader else { return };
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => tail.push(&buf[..n]),
            }
        }
    }

    /// The last `max` bytes of a stream.
    pub(super) struct Tail {
        buf: Vec<u8>,
        max: usize,
        cut: bool,
    }

    impl Tail {
        pub(super) fn new(max: usize) -> Tail {
            Tail { buf: Vec::new(), max, cut: false }
        }

        pub(super) fn push(&mut self, bytes: &[u8]) {
            self.buf.extend_from_slice(bytes);
            if self.buf.len() > 2 * self.max {
                let drop = self.buf.len() - self.max;
                self.buf.drain(..drop);
                self.cut = true;
            }
        }

        /// The kept text (at most `max` bytes, starting at a character
        /// boundary; invalid UTF-8 replaced) and whether bytes were dropped.
        pub(super) fn text(&self) -> (String, bool) {
            let start = self.buf.len().saturating_sub(self.max);
            let mut kept = &self.buf[start..];
            let cut = self.cut || start > 0;
            if cut {
                let partial = kept.iter().take(3).take_while(|b| (**b & 0xC0) == 0x80).count();
                kept = &kept[partial..];
            }
            (String::from_utf8_lossy(kept).into_owned(), cut)
        }
    }

    /// `SIGKILL`, or the number as text.
    fn signal_name(signal: i32) -> String {
        nix::sys::signal::Signal::try_from(signal)
            .map_or_else(|_| signal.to_string(), |s| s.as_str().to_owned())
    }
}
