//! `codemode mcp list` (servers, state, tool counts; starts nothing) and
//! `codemode mcp tools SERVER` (starts the server if the gate allows
//! `mcp_connect__<server>`, and lists its tools).

use codemode::mcp::{ServerState, naming};
use serde_json::{Value, json};

use super::engine_args::EngineArgs;

/// Arguments of `codemode mcp`.
#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, clap::Subcommand)]
enum McpCommand {
    /// List the configured MCP servers with their state and tool counts
    /// (from the schema cache when not running); starts nothing.
    List {
        /// Print JSON on stdout: [{name, transport, state, tools}].
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Start SERVER if the gate allows `mcp_connect__<SERVER>` and list its
    /// tools (this also refreshes its schema cache).
    Tools {
        /// The server's name in the MCP configuration.
        server: String,
        /// Print JSON on stdout: {server, tools: [{name, description}]}.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        engine: EngineArgs,
    },
}

/// Runs `codemode mcp`. Exit 0; 1 when the server could not be started or
/// listed (refused, denied, failed); 2 for a bad invocation or config.
pub(crate) fn mcp(args: McpArgs) -> anyhow::Result<u8> {
    match args.command {
        McpCommand::List { json, engine } => list(json, &engine),
        McpCommand::Tools { server, json, engine } => tools(&server, json, &engine),
    }
}

fn list(json: bool, args: &EngineArgs) -> anyhow::Result<u8> {
    let engine = args.build()?;
    let servers = engine.mcp_servers();
    if json {
        let rows: Vec<Value> = servers
            .iter()
            .map(|s| json!({"name": s.name, "transport": s.transport, "state": state(&s.state), "tools": s.tools, "era": s.era}))
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
            Some(n) => format!("{n} tools"),
            None => "tools not listed yet".to_owned(),
        };
        // The protocol era: 2026-07-28 (modern) or 2025-11-25 (legacy).
        let era = s.era.map_or("", |era| era.as_str());
        text.push_str(&format!(
            "{:width$}  {:5}  {:11}  {:6}  {}\n",
            super::run::printable(&s.name),
            s.transport,
            state(&s.state),
            era,
            tools
        ));
        if let ServerState::Failed { error } = &s.state {
            text.push_str(&format!("{:width$}  last error: {}\n", "", super::run::printable(error)));
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
        let why = outcome.call.error.as_deref().unwrap_or("the server could not be started");
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
            super::run::printable(tool["name"].as_str().unwrap_or("")),
            super::run::printable(first)
        ));
    }
    super::print_stdout(&text)?;
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
