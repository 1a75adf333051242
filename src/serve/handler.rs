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
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, Implementation,
    InputRequest, InputRequests, InputRequiredResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ServeOptions;
use super::approvals::{Route, approval_text, form};
use super::request_state::{ApprovalState, StateSigner};
use crate::journal::Decided;
use crate::receipt::{CallReceipt, Receipt, RunStatus};
use crate::{BatchOptions, Engine, ExecuteInput, RunOptions};

/// The key of the input request asking about pending call `seq`.
fn input_key(seq: u64) -> String {
    format!("approve-{seq}")
}

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
        Ok(CodeModeServer { inner: Arc::new(Inner { engine, options, signer, direct }) })
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

    /// Runs `execute_tools`' input `args` (or continues a paused run) for
    /// the request `cx`.
    async fn execute_tools(
        &self,
        params: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let inner = &self.inner;
        let args = Value::Object(params.arguments.clone().unwrap_or_default());
        let route = Route::of(&cx, inner.options.approver.as_ref(), inner.options.approval_timeout);
        let progress = Progress::start(&cx);
        let options = RunOptions::with_approver(route.approver());
        let options = match &progress {
            Some(p) => options.on_call_end(p.observer()),
            None => options,
        };
        let started = if params.request_state.is_some() || params.input_responses.is_some() {
            match self.answered(&params, &args, &cx, options).await {
                Ok(started) => started,
                Err(refusal) => return Ok(refusal.into()),
            }
        } else if let Some(resume) = args.get(super::surface::RESUME) {
            match resume_of(&args, resume) {
                Ok(run_id) => self.resume_recorded(run_id, options).await,
                Err(message) => return Ok(input_error(message).into()),
            }
        } else {
            match ExecuteInput::from_value(&args) {
                Ok(ExecuteInput::Program(program)) => Started::Run(inner.engine.start_with(program, options)),
                Ok(ExecuteInput::Batch(batch)) => {
                    Started::Batch(inner.engine.start_batch_with(batch, BatchOptions::default(), options))
                }
                // The engine's own refusal: a failed receipt naming the field.
                Err(_) => Started::Done(Box::new(inner.engine.execute_tools(&args).await)),
            }
        };
        let receipt = started.wait(&cx.ct).await;
        if let Some(p) = progress {
            p.stop().await;
        }
        Ok(self.answer(&receipt, &route, &args))
    }

    /// A retry of a call answered `input_required`: opens the signed state,
    /// reads the person's answers, and resumes the run with them.
    async fn answered(
        &self,
        params: &CallToolRequestParams,
        args: &Value,
        cx: &RequestContext<RoleServer>,
        options: RunOptions,
    ) -> Result<Started, CallToolResult> {
        let Some(sealed) = &params.request_state else {
            return Err(input_error(
                "inputResponses came without the requestState they answer; nothing was resumed",
            ));
        };
        let state = self.inner.signer.open(sealed, args).map_err(input_error)?;
        let client = cx.client_info().map(|i| i.name).unwrap_or_else(|| "the MCP client".to_owned());
        let empty = Default::default();
        let responses = params.input_responses.as_ref().unwrap_or(&empty);
        let decisions: Vec<(u64, Decided)> = state
            .seqs
            .iter()
            .map(|&seq| {
                let action =
                    responses.get(&input_key(seq)).and_then(|r| r.get("action")).and_then(Value::as_str);
                let decided = match action {
                    Some("accept") => Decided::Allow,
                    Some("decline") => Decided::Deny(format!("declined by the person in {client}")),
                    Some("cancel") => Decided::Deny(format!("the person dismissed the approval in {client}")),
                    _ => Decided::Deny(format!("{client} sent no answer for this call's approval")),
                };
                (seq, decided)
            })
            .collect();
        Ok(match self.inner.engine.start_resume_with(&state.run_id, &decisions, options).await {
            Ok(run) => Started::Run(run),
            Err(receipt) => Started::Done(Box::new(receipt)),
        })
    }

    /// `{"resume": RUN_ID}`: continues a paused run with the decisions a
    /// person recorded with `codemode approve`, and no other: calls still
    /// undecided are gated again (they pause again, or are put to the
    /// person).
    async fn resume_recorded(&self, run_id: &str, options: RunOptions) -> Started {
        match self.inner.engine.start_resume_with(run_id, &[], options).await {
            Ok(run) => Started::Run(run),
            Err(receipt) => Started::Done(Box::new(receipt)),
        }
    }

    /// The answer to a request whose run ended with `receipt`.
    fn answer(&self, receipt: &Receipt, route: &Route, args: &Value) -> CallToolResponse {
        let engine = &self.inner.engine;
        let saved = engine.save_receipt(receipt).ok().map(|p| p.display().to_string());
        if receipt.status == RunStatus::Paused
            && matches!(route, Route::InputRequired)
            && !receipt.pending.is_empty()
        {
            return CallToolResponse::InputRequired(self.input_required(receipt, args));
        }
        let result =
            super::result::tool_result(receipt, saved.as_deref(), &self.inner.options.decide_command);
        CallToolResponse::Complete(result)
    }

    /// `input_required` for a paused run: one form elicitation per pending
    /// call, and the signed state naming them.
    fn input_required(&self, receipt: &Receipt, args: &Value) -> InputRequiredResult {
        let mut requests = InputRequests::new();
        for p in &receipt.pending {
            let text = approval_text(&p.tool, p.subject.as_deref(), &p.reason, &receipt.run_id, p.seq);
            let params = form(text, json!({"type": "object", "properties": {}}));
            requests.insert(input_key(p.seq), InputRequest::Elicitation(ElicitRequest::new(params)));
        }
        let state = ApprovalState {
            run_id: receipt.run_id.clone(),
            seqs: receipt.pending.iter().map(|p| p.seq).collect(),
        };
        InputRequiredResult::new(Some(requests), Some(self.inner.signer.seal(&state, args)))
    }

    /// A direct call of native tool `name` (`--direct-tools`): a batch of
    /// one call through the same gate and approvals; the tool's own result
    /// when it ran, else the receipt's.
    async fn direct_call(
        &self,
        params: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let inner = &self.inner;
        let args = Value::Object(params.arguments.unwrap_or_default());
        let route = Route::of(&cx, inner.options.approver.as_ref(), inner.options.approval_timeout);
        let batch = ExecuteInput::from_value(&json!({"batch": {"tool": params.name, "arguments": args}}));
        let Ok(ExecuteInput::Batch(batch)) = batch else {
            return Ok(input_error("the arguments are not an object").into());
        };
        let run = inner.engine.start_batch_with(
            batch,
            BatchOptions::default(),
            RunOptions::with_approver(route.approver()),
        );
        let receipt = Started::Batch(run).wait(&cx.ct).await;
        let _ = inner.engine.save_receipt(&receipt);
        let item = receipt.value.as_array().and_then(|items| items.first()).cloned().unwrap_or(Value::Null);
        Ok(CallToolResponse::Complete(match item.get("error") {
            None if receipt.status == RunStatus::Completed => {
                let content = item.get("content").cloned().unwrap_or(Value::Null);
                let text = match content {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            _ => {
                let mut r = super::result::tool_result(&receipt, None, &inner.options.decide_command);
                r.is_error = Some(true);
                r.structured_content = None;
                r
            }
        }))
    }
}

/// The run id of `{"resume": RUN_ID}`, which takes no other field.
fn resume_of<'a>(args: &'a Value, resume: &'a Value) -> Result<&'a str, String> {
    let others: Vec<&String> = args
        .as_object()
        .into_iter()
        .flat_map(|o| o.keys())
        .filter(|k| *k != super::surface::RESUME)
        .collect();
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

/// A tool result saying the input was refused (`isError`).
fn input_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A run started for a request.
enum Started {
    Run(crate::Run),
    Batch(crate::BatchRun),
    /// Refused before it ran: its receipt.
    Done(Box<Receipt>),
}

impl Started {
    /// The receipt, cancelling the run if `cancelled` fires first (the
    /// client cancelled the request): the run stops, its in-flight calls
    /// are cancelled, and its receipt is still saved.
    async fn wait(self, cancelled: &CancellationToken) -> Receipt {
        match self {
            Started::Run(run) => {
                let canceller = run.canceller();
                let wait = run.wait();
                tokio::pin!(wait);
                tokio::select! {
                    receipt = &mut wait => receipt,
                    () = cancelled.cancelled() => { canceller.cancel(); wait.await }
                }
            }
            Started::Batch(run) => {
                let canceller = run.canceller();
                let wait = run.wait();
                tokio::pin!(wait);
                tokio::select! {
                    receipt = &mut wait => receipt,
                    () = cancelled.cancelled() => { canceller.cancel(); wait.await }
                }
            }
            Started::Done(receipt) => *receipt,
        }
    }
}

/// `notifications/progress` for a request that gave a progress token: one
/// per finished call, at most one per [`PROGRESS_INTERVAL`] (calls that end
/// in between are counted in the next), none after the result.
struct Progress {
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
            loop {
                let message = tokio::select! {
                    m = calls.recv() => match m { Some(m) => m, None => return },
                    () = stopped.cancelled() => return,
                };
                finished += 1;
                let mut message = message;
                while let Ok(m) = calls.try_recv() {
                    finished += 1;
                    message = m;
                }
                let note =
                    ProgressNotificationParam::new(token.clone(), finished as f64).with_message(message);
                tokio::select! {
                    _ = peer.notify_progress(note) => {}
                    () = stopped.cancelled() => return,
                }
                tokio::select! {
                    () = tokio::time::sleep(PROGRESS_INTERVAL) => {}
                    () = stopped.cancelled() => return,
                }
            }
        });
        Some(Progress { sender, stop, task })
    }

    /// The run's observer: queues a line per finished call.
    fn observer(&self) -> crate::receipt::CallEndObserver {
        let sender = self.sender.clone();
        Arc::new(move |call: &CallReceipt| {
            let status = serde_json::to_value(call.status).ok();
            let status = status.as_ref().and_then(Value::as_str).unwrap_or("ended");
            let _ = sender.send(format!("call {} {} {status}", call.seq, call.tool));
        })
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
        Ok(ListToolsResult::with_all_items(self.listed_tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        if !super::surface::is_listed(&name, &self.inner.direct) {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{name}`: this server lists execute_tools and tool_search; other tools are called inside a program"
                ),
                None,
            ));
        }
        if name == crate::EXECUTE_TOOLS {
            return self.execute_tools(request, context).await;
        }
        if name == crate::catalog::TOOL_SEARCH {
            let args = Value::Object(request.arguments.unwrap_or_default());
            let outcome = self.inner.engine.call(&name, &args).await;
            return Ok(CallToolResponse::Complete(match (outcome.envelope, outcome.error) {
                (Some(envelope), _) => {
                    let content = envelope.get("content").cloned().unwrap_or(Value::Null);
                    let text = match &content {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
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
