//! `codemode mcp serve`: codemode as an MCP server on stdin/stdout, or on
//! streamable HTTP with `--http ADDR` (docs/SERVE.md). The engine options
//! are `run`'s; `--approve` puts one approver in place of the person behind
//! the client.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use codemode_serve::{CodeModeServer, HttpOptions, ServeOptions};

use super::engine_args::{EngineArgs, LimitArgs};

/// The environment variable that may hold the request-state key
/// (base64 or raw text of at least 32 bytes).
const STATE_KEY_ENV: &str = "CODEMODE_SERVE_STATE_KEY";

/// The environment variable that may hold the bearer token of `--http`.
const TOKEN_ENV: &str = "CODEMODE_SERVE_TOKEN";

/// How often a serve process prunes old runs.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Arguments of `codemode mcp serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Also list the native tools (read, write, edit, file_search,
    /// grep_files, bash) as MCP tools; each call passes the same gate.
    #[arg(long)]
    direct_tools: bool,
    /// Seconds a call waits for the person's answer to an approval asked
    /// through the client (elicitation) before it is denied; not counted
    /// against the run's deadline.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    approval_timeout: f64,
    /// File holding the key that signs `requestState` of approvals asked
    /// with `input_required` (2026-07-28 clients), at least 32 bytes;
    /// replicas behind one load balancer need the same key [default:
    /// $CODEMODE_SERVE_STATE_KEY, else a random key per process].
    #[arg(long, value_name = "FILE")]
    state_key_file: Option<PathBuf>,
    /// Serve streamable HTTP on ADDR (IP:PORT; port 0 picks a free one)
    /// at the endpoint /mcp instead of stdin/stdout. 127.0.0.1:PORT keeps
    /// it on this machine; any other address needs a bearer token.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// File holding the bearer token HTTP clients must send
    /// (`Authorization: Bearer TOKEN`), at least 16 bytes; required when
    /// --http is beyond loopback [default: $CODEMODE_SERVE_TOKEN].
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
    /// A browser origin allowed to call the HTTP endpoint besides loopback
    /// ones, as scheme://host[:port] (`:*` for any port); repeatable.
    #[arg(long, value_name = "URL", requires = "http")]
    allow_origin: Vec<String>,
    /// The most 2025-11-25 client sessions open at once over --http; at
    /// the bound the session idle longest ends to make room, and an
    /// `initialize` gets 503 with Retry-After only when every session is
    /// busy [default: 1000].
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: Option<u32>,
    /// Seconds a 2025-11-25 session over --http may stay idle (no message,
    /// no tool call in flight, no run of its own going) before it ends
    /// with its upstream MCP servers [default: 300].
    #[arg(long, value_name = "SECS", requires = "http")]
    session_idle: Option<f64>,
    /// Seconds an upstream MCP server may go without a tool call before it
    /// is stopped (its next call starts it again); `off` keeps it running
    /// [default: 600 with --http, off over stdio].
    #[arg(long, value_name = "SECS|off")]
    upstream_idle: Option<String>,
    /// A host name (or name:port) accepted in the Host header besides
    /// localhost, 127.0.0.1 and ::1, e.g. the public name a reverse proxy
    /// passes on; repeatable.
    #[arg(long, value_name = "NAME", requires = "http")]
    allow_host: Vec<String>,
    /// Skip the admission check, which refuses a program before its first
    /// call when a tool it names literally does not exist or its literal
    /// arguments do not fit the tool's schema (the gate still refuses
    /// each such call when it is made) [default: the policy's admission,
    /// else on].
    #[arg(long)]
    no_admission: bool,
    /// Seconds an execute_tools call waits for its run before it answers
    /// `running` (the run goes on; the model waits with {"wait": RUN_ID}
    /// or stops it with {"cancel": RUN_ID}); 0 or `off` waits for the end.
    /// Keep it below the client's request timeout [default: 45, below the
    /// 60 s of the MCP TypeScript SDK's clients].
    #[arg(long, value_name = "SECS|off")]
    yield_after: Option<String>,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Runs `codemode mcp serve` until SIGTERM or Ctrl-C, or (on stdio) until
/// the client closes stdin. Exit 0; 2 for a bad invocation or config.
pub(crate) fn serve(mut args: ServeArgs) -> anyhow::Result<u8> {
    if !args.engine.workspace_given() {
        super::own_server::refuse_implicit_workspace()?;
    }
    let upstream_idle = upstream_idle(args.upstream_idle.as_deref(), args.http.is_some())?;
    args.engine = args
        .engine
        .with_limits(args.limits.settings())
        .without_admission(args.no_admission)
        .with_upstream_idle(upstream_idle);
    let http = http_options(&args)?;
    let engine = args.engine.clone().approve_by_default("deny").build()?;
    if let Some(path) = &args.token_file {
        outside_workspace(
            "--token-file",
            path,
            engine.workspace(),
            "the bearer token",
            "call this server as you",
        )?;
    }
    let options = serve_options(&args, engine.workspace())?;
    if engine.journal_store().is_none() && (options.approver.is_none() || options.pause_always) {
        bail!(
            "--journal off: codemode mcp serve pauses runs for a person's approval, which needs a journal; \
             keep the journal, or give --approve deny|allow|cmd:PROGRAM to decide every approval without a person"
        );
    }
    let server = CodeModeServer::new((*engine).clone(), options)?;
    // A serve process lives long: old runs are pruned to the retention
    // (`[journal] keep_runs`, `keep_days`) when it starts and every ten
    // minutes, as `codemode run` does at each run.
    let (pruned, retention) = ((*engine).clone(), engine.retention());
    std::thread::spawn(move || {
        loop {
            super::retention::prune_runs(&pruned, retention, "", None);
            std::thread::sleep(PRUNE_EVERY);
        }
    });
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    // (The prune thread keeps a clone of the engine, and so of the journal
    // store, past the end of serving: `engine`'s drop, a CliEngine's,
    // waits for the journals still being written after their answers.)
    let Some(http) = http else {
        super::note!("serving MCP on stdin/stdout (workspace {})", engine.workspace().display());
        let served = rt.block_on(server.serve_stdio(stop_signal()));
        // A blocking write to an stdout nobody reads (a file or terminal
        // goes through tokio's blocking pool) must not hold the exit.
        rt.shutdown_timeout(std::time::Duration::from_secs(2));
        served?;
        return Ok(0);
    };
    rt.block_on(async {
        let bound = server.bind_http(http).await?;
        super::note!("serving MCP on {} (workspace {})", bound.url(), engine.workspace().display());
        bound.run(stop_signal()).await?;
        super::note!("stopped serving MCP");
        anyhow::Ok(())
    })?;
    Ok(0)
}

/// Completes on SIGTERM or Ctrl-C (SIGINT).
async fn stop_signal() {
    super::run::interrupted().await;
}

/// The HTTP server's options from the command line; none without `--http`.
fn http_options(args: &ServeArgs) -> anyhow::Result<Option<HttpOptions>> {
    let Some(addr) = &args.http else { return Ok(None) };
    let addr: std::net::SocketAddr = addr.trim().parse().map_err(|_| {
        anyhow::anyhow!(
            "--http {addr}: give IP:PORT, e.g. 127.0.0.1:8080 (this machine only), 0.0.0.0:8080 (every \
             interface, needs --token-file), or 127.0.0.1:0 for a free port"
        )
    })?;
    for origin in &args.allow_origin {
        if !(origin.starts_with("http://") || origin.starts_with("https://")) || origin.ends_with('/') {
            bail!(
                "--allow-origin {origin}: give a browser origin as scheme://host[:port], e.g. https://app.example.com:443"
            );
        }
    }
    for host in &args.allow_host {
        if host.is_empty() || host.contains(['/', ' ']) {
            bail!("--allow-host {host}: give a host name or name:port, e.g. mcp.example.com");
        }
    }
    let token = match &args.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("--token-file {}", path.display()))?
                .trim()
                .to_owned(),
        ),
        None => std::env::var(TOKEN_ENV).ok().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()),
    };
    let mut options = HttpOptions::new(addr);
    options.token = token;
    options.allowed_hosts = args.allow_host.clone();
    options.allowed_origins = args.allow_origin.clone();
    if let Some(max) = args.max_sessions {
        options.max_sessions = max as usize;
    }
    if let Some(secs) = args.session_idle {
        options.session_idle = idle_seconds("--session-idle", secs)?;
    }
    // Upstream MCP servers per 2025-11-25 session: each session's engine is
    // built like the shared one. Without an MCP configuration there is
    // nothing per session, and the shared engine serves every session.
    if args.engine.mcp_config_only()?.is_some() {
        let engine = args.engine.clone().approve_by_default("deny");
        options.session_engines = Some(std::sync::Arc::new(move || {
            engine.build().map(|e| e.into_engine()).map_err(|e| format!("{e:#}"))
        }));
    }
    Ok(Some(options))
}

/// The default of `--upstream-idle` over HTTP.
const UPSTREAM_IDLE: Duration = Duration::from_secs(600);

/// `--upstream-idle SECS|off`: how long an upstream MCP server may go
/// without a call (`None`: for ever). Default: [`UPSTREAM_IDLE`] over
/// HTTP, where sessions come and go; off over stdio, where the one client's
/// servers end with the process, and a server holding state (a browser, a
/// connection) must not lose it in a pause of its client.
fn upstream_idle(given: Option<&str>, http: bool) -> anyhow::Result<Option<Duration>> {
    match given.map(str::trim) {
        None => Ok(http.then_some(UPSTREAM_IDLE)),
        Some("off") => Ok(None),
        Some(text) => {
            let secs = text.parse::<f64>().map_err(|_| {
                anyhow::anyhow!(
                    "--upstream-idle {text}: give a number of seconds, or `off` to keep servers running"
                )
            })?;
            idle_seconds("--upstream-idle", secs).map(Some)
        }
    }
}

/// `secs` as a duration for `flag`: above 0 and at most a day.
fn seconds(flag: &str, secs: f64) -> anyhow::Result<Duration> {
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        bail!("{flag} must be a number of seconds above 0 and at most 86400 (fractions allowed), got {secs}");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// [`seconds`] for an idle time, which must also be at least a second:
/// idleness is checked every quarter of it (at least every 50 ms), so a
/// smaller one ends a session before its first call, or stops an upstream
/// server after each.
fn idle_seconds(flag: &str, secs: f64) -> anyhow::Result<Duration> {
    let idle = seconds(flag, secs)?;
    if idle < Duration::from_secs(1) {
        bail!("{flag} must be a number of seconds from 1 to 86400 (fractions allowed), got {secs}");
    }
    Ok(idle)
}

/// The server's options from the command line.
fn serve_options(args: &ServeArgs, workspace: &std::path::Path) -> anyhow::Result<ServeOptions> {
    let mut options = ServeOptions::default();
    options.direct_tools = args.direct_tools;
    options.approval_timeout = seconds("--approval-timeout", args.approval_timeout)?;
    options.approver = match args.engine.approver_spec().map(str::trim) {
        None => None,
        Some("prompt") => bail!(
            "--approve prompt: stdin and stdout carry MCP here; approvals reach the person through the \
             client (elicitation) or `codemode approve`. Use deny, allow, pause or cmd:PROGRAM, or leave it out"
        ),
        Some(spec) => Some(
            codemode::approval::approver_from_spec(spec).map_err(anyhow::Error::msg).context("--approve")?,
        ),
    };
    options.state_key = state_key(args.state_key_file.as_deref(), workspace)?;
    if let Some(given) = &args.yield_after {
        options.yield_after = yield_after(given)?;
    }
    let placed = args.engine.approve_options();
    // A database's credentials are shown masked (the result reaches the
    // model and logs): say so, or the pasted command fails to log in.
    let hidden = if args.engine.journal_masked() {
        " [the journal's password is shown as ***: give your database's connection string]"
    } else {
        ""
    };
    options.decide_command = format!(
        "codemode approve {{run_id}} --allow {{seqs}}{placed} (or --deny {{seqs}}){hidden}, then call execute_tools with {{\"resume\": \"{{run_id}}\"}}"
    );
    Ok(options)
}

/// `--yield-after`'s value: seconds (fractions allowed, at most a day), 0
/// or `off` for none.
fn yield_after(given: &str) -> anyhow::Result<Option<Duration>> {
    let given = given.trim();
    if given.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    match given.parse::<f64>() {
        Ok(0.0) => Ok(None),
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
            Ok(Some(Duration::from_secs_f64(secs)))
        }
        _ => bail!(
            "--yield-after {given}: give seconds above 0 and at most 86400 (fractions allowed), or 0 or off to \
             wait for every run's end"
        ),
    }
}

/// `path` resolved, unless it lies inside `workspace` (canonical), where a
/// program could read `what` (with `read`, `grep_files`, `bash`) and `abuse`
/// it: then an error naming `flag`.
fn outside_workspace(
    flag: &str,
    path: &std::path::Path,
    workspace: &std::path::Path,
    what: &str,
    abuse: &str,
) -> anyhow::Result<std::path::PathBuf> {
    let real = std::fs::canonicalize(path).with_context(|| format!("{flag} {}", path.display()))?;
    if real.starts_with(workspace) {
        bail!(
            "{flag} {}: {what} is inside the workspace, where a program could read it and {abuse}; keep it \
             outside (e.g. in ~/.config/codemode/)",
            path.display()
        );
    }
    Ok(real)
}

/// The request-state key: `--state-key-file`, else the environment, else
/// none (a random key).
/// A key file inside the workspace is refused: a program could read it
/// (and forge approvals' states) or replace it.
fn state_key(file: Option<&std::path::Path>, workspace: &std::path::Path) -> anyhow::Result<Option<Vec<u8>>> {
    let text = match file {
        Some(path) => {
            let real = outside_workspace("--state-key-file", path, workspace, "the key", "forge approvals")?;
            std::fs::read(&real).with_context(|| format!("--state-key-file {}", path.display()))?
        }
        None => match std::env::var(STATE_KEY_ENV) {
            Ok(v) => v.into_bytes(),
            Err(_) => return Ok(None),
        },
    };
    let trimmed: Vec<u8> = text.trim_ascii().to_vec();
    if trimmed.len() < codemode_serve::STATE_KEY_BYTES {
        bail!(
            "the request-state key ({}) has {} bytes; it needs at least {} (e.g. `head -c 32 /dev/urandom | base64`)",
            file.map(|p| p.display().to_string()).unwrap_or_else(|| format!("${STATE_KEY_ENV}")),
            trimmed.len(),
            codemode_serve::STATE_KEY_BYTES
        );
    }
    Ok(Some(trimmed))
}
