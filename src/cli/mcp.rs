//! `codemode mcp list` (servers, state, tool counts; starts nothing),
//! `codemode mcp tools SERVER` (starts the server if the gate allows
//! `mcp_connect__<server>`, and lists its tools), and `codemode mcp login
//! SERVER` / `logout SERVER` (an HTTP server's OAuth login, see
//! `codemode::mcp::oauth`).

use std::time::Duration;

use codemode::mcp::{ServerState, Transport, naming, oauth};
use serde_json::{Value, json};

use super::engine_args::{CatalogArgs, EngineArgs};

/// Arguments of `codemode mcp`.
#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

// Parsed once per process: the size of its largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, clap::Subcommand)]
enum McpCommand {
    /// List the configured MCP servers with their state and tool counts
    /// (from the schema cache when not running); starts nothing.
    #[command(after_help = super::READ_EXIT_CODES)]
    List {
        /// Print JSON on stdout: [{name, transport, state, tools, hidden}].
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
    /// Start SERVER if the gate allows `mcp_connect__<SERVER>` and list its
    /// tools (this also refreshes its schema cache).
    #[command(after_help = "Exit codes: 0 listed, 1 the server could not be started or listed \
(refused, denied, failed), 2 bad invocation or config.")]
    Tools {
        /// The server's name in the MCP configuration.
        server: String,
        /// Print JSON on stdout: {server, tools: [{name, description}],
        /// hidden?: [{name, why}]} (hidden: tools the config's
        /// `disabledTools` names, and tools that run only as MCP tasks).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Log in to the HTTP server SERVER with OAuth: prints the
    /// authorization URL and opens it ($BROWSER, else xdg-open when there is
    /// a display), waits for the browser's redirect to 127.0.0.1, and keeps
    /// the tokens in the user's config folder (codemode/oauth/, mode 0600),
    /// keyed by the server's URL.
    #[command(after_help = "Exit codes: 0 logged in (the tokens kept), 1 the login failed, \
2 bad invocation or config.")]
    Login {
        /// The server's name in the MCP configuration.
        server: String,
        /// Seconds to wait for the browser's redirect.
        #[arg(long, value_name = "SECS", default_value_t = 300)]
        timeout: u64,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
    /// Serve codemode as an MCP server on stdin/stdout (or streamable
    /// HTTP with --http ADDR): the tools
    /// execute_tools and tool_search, approvals asked of the person behind
    /// the client (docs/SERVE.md).
    #[command(after_help = "Exit codes: 0 stopped (SIGTERM, Ctrl-C, or the client closed stdin), \
2 bad invocation or config.")]
    Serve(super::serve::ServeArgs),
    /// Remove the OAuth login kept for SERVER's URL (says when there was none).
    #[command(after_help = "Exit codes: 0 done (also when there was no login), 2 bad invocation \
or config.")]
    Logout {
        /// The server's name in the MCP configuration.
        server: String,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
}

/// Runs `codemode mcp`. Exit 0; 1 when the server could not be started or
/// listed (refused, denied, failed); 2 for a bad invocation or config.
pub(crate) fn mcp(args: McpArgs) -> anyhow::Result<u8> {
    match args.command {
        McpCommand::List { json, catalog } => list(json, &catalog.engine(None)),
        McpCommand::Tools { server, json, engine } => tools(&server, json, &engine),
        McpCommand::Login { server, timeout, catalog } => login(&server, timeout, &catalog.engine(None)),
        McpCommand::Logout { server, catalog } => logout(&server, &catalog.engine(None)),
        McpCommand::Serve(args) => super::serve::serve(args),
    }
}

/// The URL and OAuth settings of the configured HTTP server `server`.
/// (The URL as written, `${VAR}` unexpanded, is the one shown.)
fn http_server(server: &str, args: &EngineArgs) -> anyhow::Result<(String, String, oauth::OAuthSettings)> {
    let config = args.mcp_config_only()?.unwrap_or_default();
    let Some(found) = config.servers.get(server) else {
        let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
        anyhow::bail!(
            "no MCP server named `{server}` is configured; configured: {}",
            if names.is_empty() { "none".to_owned() } else { names.join(", ") }
        );
    };
    match &found.transport {
        Transport::Http { url, .. } => {
            let shown = match &found.shown {
                Transport::Http { url, .. } => url.clone(),
                _ => String::new(),
            };
            Ok((url.clone(), shown, found.oauth.clone().unwrap_or_default()))
        }
        _ => anyhow::bail!("MCP server `{server}` is a stdio server; OAuth logins are for HTTP servers"),
    }
}

/// `codemode mcp login SERVER`. Exit 0 when the tokens are kept; 1 when the
/// flow failed; 2 for a bad invocation or config.
fn login(server: &str, timeout: u64, args: &EngineArgs) -> anyhow::Result<u8> {
    let (url, shown, settings) = http_server(server, args)?;
    let dir = oauth::user_token_dir().map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut announce = |auth_url: &str, opened: Option<&str>| {
        eprintln!(
            "codemode: to log in to MCP server `{server}`, open this URL in a browser:\n\n  {auth_url}\n"
        );
        match opened {
            Some(program) => eprintln!("codemode: opened it with `{program}`; waiting for the redirect..."),
            None => eprintln!("codemode: waiting for the redirect to 127.0.0.1..."),
        }
    };
    let outcome =
        rt.block_on(oauth::login(&url, &settings, &dir, Duration::from_secs(timeout), &mut announce));
    match outcome {
        Ok(outcome) => {
            eprintln!(
                "codemode: logged in to `{server}` ({shown}); the tokens are kept in {}",
                outcome.path.display()
            );
            Ok(0)
        }
        Err(message) => {
            eprintln!("codemode: login to `{server}` failed: {}", super::run::printable(&message));
            Ok(1)
        }
    }
}

/// `codemode mcp logout SERVER`. Exit 0 whether or not there was a login.
fn logout(server: &str, args: &EngineArgs) -> anyhow::Result<u8> {
    let (url, shown, _) = http_server(server, args)?;
    let dir = oauth::user_token_dir().map_err(anyhow::Error::msg)?;
    match oauth::logout(&url, &dir).map_err(anyhow::Error::msg)? {
        Some(path) => eprintln!("codemode: removed the login for `{server}` ({shown}): {}", path.display()),
        None => eprintln!("codemode: there was no login for `{server}` ({shown})"),
    }
    Ok(0)
}

fn list(json: bool, args: &EngineArgs) -> anyhow::Result<u8> {
    let engine = args.build()?;
    let servers = engine.mcp_servers();
    if json {
        let rows: Vec<Value> = servers
            .iter()
            .map(|s| {
                json!({"name": s.name, "transport": s.transport, "state": state(&s.state), "tools": s.tools,
                       "hidden": s.hidden, "era": s.era})
            })
            .collect();
        super::print_stdout(&(serde_json::to_string_pretty(&rows)? + "\n"))?;
        return Ok(0);
    }
    if servers.is_empty() {
        eprintln!(
            "codemode: no MCP servers are configured (give --mcp-config FILE, or put a .mcp.json in the workspace)"
        );
        return Ok(0);
    }
    let width = servers.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut text = String::new();
    for s in &servers {
        let tools = match s.tools {
            Some(n) if s.hidden > 0 => {
                format!("{n} tools ({} hidden: `codemode mcp tools {}` says why)", s.hidden, s.name)
            }
            Some(n) => format!("{n} tools"),
            None => "tools not listed yet".to_owned(),
        };
        // The protocol era: 2026-07-28 (modern) or 2025-11-25 (legacy).
        let era = s.era.map_or("", |era| era.as_str());
        text.push_str(&format!(
            "{:width$}  {:5}  {:11}  {:6}  {}\n",
            codemode::display_text::one_line(&s.name),
            s.transport,
            state(&s.state),
            era,
            tools
        ));
        if let ServerState::Failed { error } = &s.state {
            text.push_str(&format!(
                "{:width$}  last error: {}\n",
                "",
                codemode::display_text::one_line(error)
            ));
        }
    }
    super::print_stdout(&text)?;
    Ok(0)
}

fn tools(server: &str, json: bool, args: &EngineArgs) -> anyhow::Result<u8> {
    let engine = args.build()?;
    let servers = engine.mcp_servers();
    let Some(status) = servers.iter().find(|s| s.name == server) else {
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        anyhow::bail!(
            "no MCP server named `{server}` is configured; configured: {}",
            if names.is_empty() { "none".to_owned() } else { names.join(", ") }
        );
    };
    if status.state == ServerState::Disabled {
        anyhow::bail!("MCP server `{server}` is disabled in the configuration");
    }
    let outcome = match super::direct_call(&engine, &naming::connect_name(server), &json!({}))? {
        Ok(outcome) => outcome,
        Err(code) => return Ok(code),
    };
    let Some(envelope) = outcome.envelope else {
        let why = outcome.error_message().unwrap_or("the server could not be started");
        eprintln!("codemode: {}", super::run::printable(why));
        return Ok(1);
    };
    let listing = &envelope["content"];
    if json {
        super::print_stdout(&(serde_json::to_string_pretty(listing)? + "\n"))?;
        return Ok(0);
    }
    let mut text = String::new();
    for tool in listing["tools"].as_array().into_iter().flatten() {
        let description = tool["description"].as_str().unwrap_or("");
        let first = description.split(". ").next().unwrap_or(description).trim_end_matches('.');
        text.push_str(&format!(
            "{}\n    {}\n",
            codemode::display_text::one_line(tool["name"].as_str().unwrap_or("")),
            codemode::display_text::one_line(first)
        ));
    }
    super::print_stdout(&text)?;
    for tool in listing["unavailable"].as_array().into_iter().flatten() {
        eprintln!(
            "codemode: unavailable: {}: {}",
            super::run::printable(tool["name"].as_str().unwrap_or("")),
            super::run::printable(tool["why"].as_str().unwrap_or(""))
        );
    }
    for tool in listing["hidden"].as_array().into_iter().flatten() {
        eprintln!(
            "codemode: hidden: {}: {}",
            codemode::display_text::one_line(tool["name"].as_str().unwrap_or("")),
            codemode::display_text::one_line(tool["why"].as_str().unwrap_or(""))
        );
    }
    Ok(0)
}

fn state(state: &ServerState) -> &'static str {
    match state {
        ServerState::Disabled => "disabled",
        ServerState::NotStarted => "not started",
        ServerState::Running => "running",
        ServerState::Failed { .. } => "failed",
        _ => "unknown",
    }
}
