//! The MCP server: rmcp's [`ServerHandler`] for codemode's surface.
//!
//! Both protocol eras go through rmcp's server side: `initialize` and a
//! session for 2025-11-25 clients, `server/discover` and self-contained
//! requests for 2026-07-28 clients. Each `tools/call` picks how its
//! approvals reach a person (approvals.rs), starts the run with that
//! approver, waits for it (cancelled with the request), saves the receipt
//! and answers with the result (result.rs), or, for a 2026-07-28 client
//! whose run paused, with `input_required` (request_state.rs).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InputRequiredResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ServeOptions;
use super::approvals::{PausingApprover, Route};
use super::arguments::{Request, read_request};
use super::request_state::StateSigner;
use super::saves::Place;

mod waiting;
use codemode::{Engine, batch::BatchOptions, run::ExecuteInput, run::RunOptions};
use codemode::{Receipt, receipt::RunStatus};

/// How often, and how long apart, a resume retries a run another process
/// holds for a moment (a person's `codemode approve` recording).
const BUSY_RETRIES: u32 = 10;
const BUSY_WAIT: Duration = Duration::from_millis(200);

/// Whether `receipt` refuses a resume because another process holds the
/// run.
fn is_busy(receipt: &Receipt) -> bool {
    receipt.error.as_ref().is_some_and(|e| {
        e.kind == codemode::receipt::ErrorKind::NotResumable && e.message.contains("held by another process")
    })
}

/// How long a `ping`, a resume or a stopping server waits for the receipt
/// files of earlier answers, at most.
pub(crate) const SAVE_WAIT: Duration = Duration::from_secs(30);

/// Progress notifications of one request: at most one per this interval.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// codemode as an MCP server over one engine. Cheap to clone (each clone
/// serves the same engine, options and request-state key).
#[derive(Clone)]
pub struct CodeModeServer {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    options: ServeOptions,
    signer: StateSigner,
    /// The native tools also listed as direct MCP tools (`--direct-tools`).
    direct: BTreeSet<String>,
    /// Cancelled when the server stops: every tool call in flight is
    /// cancelled with it ([`CodeModeServer::stop_runs`]).
    stop: CancellationToken,
    /// Held shared by each tool call; a stopping server takes it whole to
    /// know the calls have answered (their receipts saved).
    inflight: Arc<tokio::sync::RwLock<()>>,
    /// The runs answered `running` (long_runs.rs).
    background: super::long_runs::Background<Done>,
}

impl std::fmt::Debug for CodeModeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeModeServer").field("engine", &self.inner.engine).finish_non_exhaustive()
    }
}

impl CodeModeServer {
    /// A server of `engine` with `options`.
    ///
    /// # Errors
    /// The request-state key is shorter than 32 bytes, or none was given
    /// and the OS random source could not be read.
    pub fn new(engine: Engine, options: ServeOptions) -> Result<CodeModeServer, super::ServeError> {
        let key = match &options.state_key {
            Some(key) => key.clone(),
            None => super::request_state::random_key().map_err(|e| super::ServeError::Key(e.to_string()))?,
        };
        let signer = StateSigner::new(&key, options.state_ttl).map_err(super::ServeError::Key)?;
        let direct =
            if options.direct_tools { super::surface::native_names(&engine) } else { BTreeSet::new() };
        let (stop, inflight) = (CancellationToken::new(), Arc::default());
        let background = super::long_runs::Background::default();
        let inner = Inner { engine, options, signer, direct, stop, inflight, background };
        Ok(CodeModeServer { inner: Arc::new(inner) })
    }

    /// Cancels every tool call in flight (their runs stop, their requests
    /// are answered) and waits for them and for every receipt file an
    /// answer named, at most `wait` for each; later calls are refused.
    pub async fn stop_runs(&self, wait: Duration) {
        self.inner.stop.cancel();
        let _ = tokio::time::timeout(wait, self.inner.inflight.write()).await;
        super::saves::wait_all(wait).await;
    }

    /// Whether a run this server answered `running` for is still going.
    pub(crate) fn holds_runs_going(&self) -> bool {
        self.inner.background.going()
    }

    /// The engine this server runs programs on.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The options this server was made with.
    pub fn options(&self) -> &ServeOptions {
        &self.inner.options
    }

    /// The tools `tools/list` answers with now.
    pub fn listed_tools(&self) -> Vec<rmcp::model::Tool> {
        super::surface::tools(&self.inner.engine, &self.inner.direct)
    }

    /// Runs `execute_tools`' input (or continues a paused run) for the
    /// request `cx`, and answers with the result.
    async fn execute_tools(
        &self,
        params: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(params.arguments.clone().unwrap_or_default());
        if let Some(answer) = self.wait_or_cancel(&params, &args, &cx).await {
            return Ok(answer);
        }
        let yield_after = self.inner.options.yield_after;
        let done = match self.run_request(&params, &args, args.clone(), &cx, yield_after).await {
            Ok(done) => done,
            Err(refusal) => return Ok(refusal.into()),
        };
        let answer = self.answer(&done, &params, &args);
        done.save(&self.inner.engine).await;
        Ok(answer)
    }

    /// Runs `input` (`execute_tools`' input: `{code}`, `{batch}` or
    /// `{resume}`) for the request `cx` to its end, or, when the request is
    /// the retry of an `input_required` answer, resumes the run it names
    /// with the person's answers. `args` are the request's own arguments
    /// (what a `requestState` is bound to). With `yield_after`, a run not
    /// ended by then goes on in the server and the request is answered
    /// `running` (waiting.rs).
    ///
    /// # Errors
    /// The result refusing the request before anything ran (a bad resume,
    /// a `requestState` that does not verify), or saying the run goes on.
    async fn run_request(
        &self,
        params: &CallToolRequestParams,
        args: &Value,
        input: Value,
        cx: &RequestContext<RoleServer>,
        yield_after: Option<Duration>,
    ) -> Result<Done, CallToolResult> {
        let inner = &self.inner;
        let mut route = Route::of(cx, &inner.options);
        let progress = Progress::start(cx);
        let options =
            RunOptions::with_approver(route.approver()).trace_parent(super::trace_parent::of(params, cx));
        let relay = super::long_runs::Relay::default();
        relay.set(progress.as_ref().map(|p| p.sender.clone()));
        let options = match progress.is_some() || yield_after.is_some() {
            true => options.on_call_end(waiting::observer(&relay)),
            false => options,
        };
        let request = read_request(&input, params.request_state.as_deref(), params.input_responses.is_some());
        if matches!(request, Request::Answered(_) | Request::Resume(_)) {
            // The run's earlier receipt file is written before its resumed
            // run's receipt can replace it.
            super::saves::wait_all(SAVE_WAIT).await;
        }
        let started = match request {
            Request::Refused(why) => return Err(input_error(why)),
            Request::Wait(_) | Request::Cancel(_) => {
                return Err(input_error("`wait` and `cancel` are answered by execute_tools alone"));
            }
            Request::Answered(sealed) => {
                let (started, answered_route) = self.answered(&sealed, params, args, cx, options).await?;
                route = answered_route;
                started
            }
            Request::Resume(run_id) => {
                self.same_workspace(&run_id).await?;
                if matches!(route, Route::Pause) {
                    self.nothing_decided(&run_id).await?;
                }
                self.resume_recorded(&run_id, options).await
            }
            Request::Rollback(run_id) => {
                self.same_workspace(&run_id).await?;
                match super::rollback::roll_back(&inner.engine, &run_id, options).await {
                    super::rollback::Rolled::Ran(receipt) => Started::Ran(receipt),
                    super::rollback::Rolled::Refused(text) => return Err(input_error(text)),
                    super::rollback::Rolled::NothingLeft(text, structured) => {
                        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                        result.structured_content = Some(structured);
                        return Err(result);
                    }
                }
            }
            Request::Input(Ok(ExecuteInput::Program(program))) => {
                Started::Run(inner.engine.start_with(program, options))
            }
            // A batch cannot pause: where approvals pause, it runs as the
            // equivalent program, which can (unless that program would be
            // over the source limit: then as a batch, whose calls needing
            // an approval are refused; and unless the batch is over the
            // call budget: then as a batch, refused whole before any call,
            // where the program would make the first calls and stop).
            Request::Input(Ok(ExecuteInput::Batch(batch)))
                if route.pauses()
                    && batch.calls().len() <= inner.engine.limits().max_calls
                    && batch.as_program().source().len() <= inner.engine.limits().source_bytes =>
            {
                Started::Run(inner.engine.start_with(batch.as_program(), options))
            }
            Request::Input(Ok(ExecuteInput::Batch(batch))) => {
                Started::Batch(inner.engine.start_batch_with(batch, BatchOptions::default(), options))
            }
            // The engine's own refusal: a failed receipt naming the field.
            Request::Input(Err(_)) => Started::Done(Box::new(inner.engine.execute_tools(&input).await)),
        };
        // A refusal before anything ran (a run that cannot be resumed) is
        // not the run's receipt: saving it would overwrite the receipt of
        // the run it names.
        let ran = !matches!(started, Started::Done(_));
        let waited = self.wait_or_yield(started, &cx.ct, yield_after, &relay, &route).await;
        if let Some(p) = progress {
            p.stop().await;
        }
        let mut receipt = match waited {
            waiting::Waited::Ended(receipt) => *receipt,
            waiting::Waited::Yielded(running) => return Err(running),
        };
        // The run's folder is checked now and the answer names the file;
        // the file itself is written after the answer ([`Done::save`]).
        let place = ran.then(|| place_receipt(&inner.engine, &mut receipt));
        let saved = place.as_ref().and_then(Place::path);
        Ok(Done { receipt, route, saved, place })
    }

    /// A retry of a call answered `input_required`: opens the signed state,
    /// reads the person's answer, and resumes the run with it; the resumed
    /// run's route holds the grants the state carries and the answer gave.
    async fn answered(
        &self,
        sealed: &str,
        params: &CallToolRequestParams,
        args: &Value,
        cx: &RequestContext<RoleServer>,
        mut options: RunOptions,
    ) -> Result<(Started, Route), CallToolResult> {
        let state = self.inner.signer.open(sealed, &bound(params, args)).map_err(input_error)?;
        self.same_workspace(&state.run_id).await?;
        let client = super::approvals::client_name(cx);
        let (decisions, grants) =
            super::input_required::answered(&state, params.input_responses.as_ref(), &client);
        let approver = Arc::new(PausingApprover::new(client, grants));
        options.approver = Some(approver.clone());
        let started = match self.inner.engine.start_resume_with(&state.run_id, &decisions, options).await {
            Ok(run) => Started::Run(run),
            Err(receipt) => Started::Done(Box::new(receipt)),
        };
        Ok((started, Route::InputRequired(approver)))
    }

    /// Refuses a resume of run `run_id` made in another workspace: a shared
    /// journal store may hold several projects' runs, and a resume runs the
    /// approved calls in this server's workspace. (Replicas serve the same
    /// workspace path.) An unknown run goes on, to be refused by the
    /// resume itself.
    ///
    /// # Errors
    /// The result naming both workspaces.
    async fn same_workspace(&self, run_id: &str) -> Result<(), CallToolResult> {
        let engine = &self.inner.engine;
        let runs = engine.runs();
        let Ok(details) = runs.show(run_id).await else { return Ok(()) };
        let here = engine.workspace().display().to_string();
        match details.workspace {
            Some(made_in) if made_in != here => Err(input_error(format!(
                "run {run_id} was made in workspace {made_in}, and this server serves {here}: its calls would run \
                 in the wrong place, so nothing was resumed; continue it from a server of that workspace"
            ))),
            _ => Ok(()),
        }
    }

    /// Refuses, without replaying anything, a resume of paused run `run_id`
    /// on the pause route when no person has decided any of its pending
    /// calls yet: the run would only pause again. Anything else (a
    /// decision recorded, a run that is not paused) goes on to the resume.
    ///
    /// # Errors
    /// The result saying nothing is decided yet and how a person decides.
    async fn nothing_decided(&self, run_id: &str) -> Result<(), CallToolResult> {
        let Ok(pending) = self.inner.engine.pending_decisions(run_id).await else { return Ok(()) };
        if pending.is_empty() || pending.iter().any(|p| p.recorded.is_some()) {
            return Ok(());
        }
        let seqs: Vec<String> = pending.iter().map(|p| p.call.seq.to_string()).collect();
        let command =
            self.inner.options.decide_command.replace("{run_id}", run_id).replace("{seqs}", &seqs.join(","));
        let text = format!(
            "paused; nothing decided yet: no person has decided the pending call(s) {} of run {run_id}, so the run \
             stays paused and nothing ran. Ask the user to decide: {command}",
            seqs.join(", ")
        );
        let pending: Vec<Value> = pending
            .iter()
            .map(|p| json!({"seq": p.call.seq, "tool": p.call.tool, "reason": p.call.reason, "subject": p.call.subject}))
            .collect();
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(json!({
            "status": "paused", "run_id": run_id, "value": null, "value_truncated": null, "error": null,
            "calls": {}, "pending": pending, "receipt_path": null
        }));
        Err(result)
    }

    /// `{"resume": RUN_ID}`: continues a paused run with the decisions a
    /// person recorded with `codemode approve`, and no other: calls still
    /// undecided are gated again (they pause again, or are put to the
    /// person).
    async fn resume_recorded(&self, run_id: &str, options: RunOptions) -> Started {
        // `codemode approve` holds the run for a moment while it records:
        // wait a little for it rather than answer "busy".
        let mut tries = 0;
        loop {
            match self.inner.engine.start_resume_recorded(run_id, options.clone()).await {
                Ok(run) => return Started::Run(run),
                Err(receipt) if tries < BUSY_RETRIES && is_busy(&receipt) => {
                    tries += 1;
                    tokio::time::sleep(BUSY_WAIT).await;
                }
                Err(receipt) => return Started::Done(Box::new(receipt)),
            }
        }
    }

    /// The answer to a request whose run is `done`: `input_required` when
    /// it paused on a route that asks that way, else the tool result.
    fn answer(&self, done: &Done, params: &CallToolRequestParams, args: &Value) -> CallToolResponse {
        if let Some(asked) = self.input_required(done, params, args) {
            return CallToolResponse::InputRequired(asked);
        }
        let result = super::result::tool_result(
            &done.receipt,
            done.saved.as_deref(),
            &self.inner.options.decide_command,
        );
        CallToolResponse::Complete(result)
    }

    /// `input_required` for a paused run: one form elicitation listing
    /// the pending calls, and the signed state naming them.
    /// `None` unless the run paused on the `input_required` route.
    fn input_required(
        &self,
        done: &Done,
        params: &CallToolRequestParams,
        args: &Value,
    ) -> Option<InputRequiredResult> {
        let receipt = &done.receipt;
        let Route::InputRequired(approver) = &done.route else { return None };
        if receipt.status != RunStatus::Paused || receipt.pending.is_empty() {
            return None;
        }
        super::input_required::ask(receipt, approver, &self.inner.signer, &bound(params, args))
    }

    /// A direct call of native tool `name` (`--direct-tools`): a batch of
    /// one call through the same gate and approvals (a program of one call
    /// where approvals pause); the tool's own result when it ran, else the
    /// receipt's (paused: how a person decides; refused or failed:
    /// `isError`).
    async fn direct_call(
        &self,
        params: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(params.arguments.clone().unwrap_or_default());
        let input = json!({"batch": {"tool": params.name, "arguments": args}});
        let done = match self.run_request(&params, &args, input, &cx, None).await {
            Ok(done) => done,
            Err(refusal) => return Ok(refusal.into()),
        };
        let answer = self.direct_answer(&done, &params, &args);
        done.save(&self.inner.engine).await;
        Ok(answer)
    }

    /// The answer to a direct call whose run is `done`.
    fn direct_answer(&self, done: &Done, params: &CallToolRequestParams, args: &Value) -> CallToolResponse {
        if done.receipt.status == RunStatus::Paused {
            return self.answer(done, params, args);
        }
        let receipt = &done.receipt;
        let item = match super::direct::item(receipt) {
            Ok(item) => item,
            Err(why) => return CallToolResponse::Complete(input_error(why)),
        };
        let answer =
            (receipt.status == RunStatus::Completed).then(|| super::direct::success(&item)).flatten();
        CallToolResponse::Complete(match answer {
            Some(answer) => answer,
            None => {
                let decide = &self.inner.options.decide_command;
                let mut r = super::result::tool_result(receipt, done.saved.as_deref(), decide);
                r.is_error = Some(true);
                r.structured_content = None;
                r
            }
        })
    }
}

/// What a `requestState` is bound to: the tool called and its arguments.
fn bound(params: &CallToolRequestParams, args: &Value) -> Value {
    json!({"tool": params.name, "arguments": args})
}

/// Where `receipt`'s file goes on `engine`, its folder checked; when it
/// cannot be used, the receipt's warnings and stderr say so.
fn place_receipt(engine: &Engine, receipt: &mut Receipt) -> Place {
    let place = Place::of(engine, receipt);
    if let Place::Failed(why) = &place {
        let warning = format!("the receipt could not be saved: {why}");
        eprintln!("codemode: warning: run {}: {warning}", receipt.run_id);
        receipt.warnings.push(warning);
    }
    place
}

/// A request's run, ended.
struct Done {
    receipt: Receipt,
    /// How its approvals were asked.
    route: Route,
    /// Where its receipt is saved (the file follows the answer).
    saved: Option<String>,
    /// Where its receipt goes; none for a refusal before anything ran.
    place: Option<Place>,
}

impl Done {
    /// Starts writing the receipt file the answer names (the answer is
    /// ready: it does not wait for the file).
    async fn save(self, engine: &Engine) {
        if let Some(Place::At(path)) = self.place {
            super::saves::write_later(engine.clone(), self.receipt, path).await;
        }
    }
}

/// Makes `context`'s cancellation also fire when `stop` does; the link
/// ends when the returned guard drops (with the request).
pub(crate) fn link_cancellation(
    context: &mut RequestContext<RoleServer>,
    stop: &CancellationToken,
) -> tokio_util::sync::DropGuard {
    let linked = stop.child_token();
    let end = linked.clone().drop_guard();
    let (client, watched) = (context.ct.clone(), linked.clone());
    tokio::spawn(async move {
        tokio::select! {
            () = client.cancelled() => watched.cancel(),
            () = watched.cancelled() => {}
        }
    });
    context.ct = linked;
    end
}

/// A tool's result content as the text of an MCP text block: a string as
/// it is, anything else as compact JSON.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A tool result saying the input was refused (`isError`).
fn input_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A run started for a request.
enum Started {
    Run(codemode::run::Run),
    Batch(codemode::batch::BatchRun),
    /// Refused before it ran: its receipt.
    Done(Box<Receipt>),
    /// Ran to its end already (a rollback): its receipt.
    Ran(Box<Receipt>),
}

/// The end of a run, to wait for.
type RunEnd = std::pin::Pin<Box<dyn Future<Output = Receipt> + Send>>;

impl Started {
    /// The run's id, a canceller and its end; the receipt of a refusal.
    fn parts(self) -> Result<(String, codemode::run::Canceller, RunEnd), Box<Receipt>> {
        match self {
            Started::Run(run) => Ok((run.run_id().to_owned(), run.canceller(), Box::pin(run.wait()))),
            Started::Batch(run) => Ok((run.run_id().to_owned(), run.canceller(), Box::pin(run.wait()))),
            Started::Done(receipt) | Started::Ran(receipt) => Err(receipt),
        }
    }

    /// The receipt, cancelling the run if `cancelled` fires first (the
    /// client cancelled the request): the run stops, its in-flight calls
    /// are cancelled, and its receipt is still saved.
    async fn wait(self, cancelled: &CancellationToken) -> Receipt {
        let (_, canceller, mut wait) = match self.parts() {
            Ok(parts) => parts,
            Err(receipt) => return *receipt,
        };
        tokio::select! {
            receipt = &mut wait => receipt,
            () = cancelled.cancelled() => { canceller.cancel(); wait.await }
        }
    }
}

/// `notifications/progress` for a request that gave a progress token: one
/// per finished call, at most one per [`PROGRESS_INTERVAL`] (calls that end
/// in between are counted in the next; those not yet sent when the run ends
/// go in one last notification before the result), none after the result.
struct Progress {
    /// Takes one line per notification.
    sender: tokio::sync::mpsc::UnboundedSender<String>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    fn start(cx: &RequestContext<RoleServer>) -> Option<Progress> {
        let token = cx.meta.get_progress_token()?;
        let (sender, mut calls) = tokio::sync::mpsc::unbounded_channel::<String>();
        let stop = CancellationToken::new();
        let peer = cx.peer.clone();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut finished = 0u64;
            // Counts the calls queued now; the last one's line is the message.
            let take_queued = |calls: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
                               finished: &mut u64| {
                let mut message = None;
                while let Ok(m) = calls.try_recv() {
                    *finished += 1;
                    message = Some(m);
                }
                message
            };
            loop {
                let stopping = tokio::select! {
                    m = calls.recv() => match m {
                        Some(m) => {
                            finished += 1;
                            let later = take_queued(&mut calls, &mut finished);
                            Some((later.unwrap_or(m), false))
                        }
                        None => None,
                    },
                    // The run has ended: the calls that ended since the
                    // last notification are sent in one, before the result.
                    () = stopped.cancelled() => take_queued(&mut calls, &mut finished).map(|m| (m, true)),
                };
                let Some((message, last)) = stopping else { return };
                let note =
                    ProgressNotificationParam::new(token.clone(), finished as f64).with_message(message);
                // Bounded: a client that stops reading cannot hold the result.
                let _ = tokio::time::timeout(PROGRESS_INTERVAL * 10, peer.notify_progress(note)).await;
                if last {
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep(PROGRESS_INTERVAL) => {}
                    () = stopped.cancelled() => {
                        if let Some(message) = take_queued(&mut calls, &mut finished) {
                            let note = ProgressNotificationParam::new(token.clone(), finished as f64)
                                .with_message(message);
                            let _ = tokio::time::timeout(PROGRESS_INTERVAL * 10, peer.notify_progress(note)).await;
                        }
                        return;
                    }
                }
            }
        });
        Some(Progress { sender, stop, task })
    }

    /// Stops sending: the result goes next.
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

impl ServerHandler for CodeModeServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("codemode", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "codemode runs JavaScript/TypeScript programs that call tools: give execute_tools one program \
                 instead of one tool call per turn; tool_search finds the tools programs can call.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // A barrier, as `ping` is (2026-07-28 has no `ping`).
        super::saves::wait_all(SAVE_WAIT).await;
        Ok(ListToolsResult::with_all_items(self.listed_tools()))
    }

    /// Answers once every receipt file named in an earlier answer is
    /// written: a client that needs the file sends `ping` (or
    /// `tools/list`) first.
    async fn ping(&self, _context: RequestContext<RoleServer>) -> Result<(), McpError> {
        super::saves::wait_all(SAVE_WAIT).await;
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let inner = &self.inner;
        let _running = inner.inflight.clone().read_owned().await;
        if inner.stop.is_cancelled() {
            return Err(McpError::internal_error("codemode mcp serve is stopping; nothing was run", None));
        }
        // Cancelled by the client's cancellation or by the server stopping.
        let _end = link_cancellation(&mut context, &inner.stop);
        let name = request.name.to_string();
        if !super::surface::is_listed(&name, &self.inner.direct) {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{name}`: this server lists execute_tools and tool_search; other tools are called inside a program"
                ),
                None,
            ));
        }
        if name == codemode::run::EXECUTE_TOOLS {
            return self.execute_tools(request, context).await;
        }
        if name == codemode::tool::TOOL_SEARCH {
            let args = Value::Object(request.arguments.unwrap_or_default());
            // As a program searches: what it finds is what a program may
            // call, and nothing is activated (this server's list is fixed).
            let outcome = self.inner.engine.call_as(&name, &args, codemode::receipt::Caller::Program).await;
            return Ok(CallToolResponse::Complete(match (outcome.envelope, outcome.error) {
                (Some(envelope), _) => {
                    let content = envelope.get("content").cloned().unwrap_or(Value::Null);
                    let mut r = CallToolResult::success(vec![ContentBlock::text(content_text(&content))]);
                    if content.is_object() {
                        r.structured_content = Some(content);
                    }
                    r
                }
                (None, error) => {
                    let message = error.as_ref().and_then(|e| e.get("message")).and_then(Value::as_str);
                    input_error(message.unwrap_or("tool_search failed").to_owned())
                }
            }));
        }
        self.direct_call(request, context).await
    }
}
