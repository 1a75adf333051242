//! `McpTool`: one tool of an MCP server as a catalog [`Tool`].
//!
//! Its [`ToolSpec`]: name from [`naming::tool_name`]; description from the
//! tool's `description` (else its `title`, else a generic line); input
//! schema from `inputSchema` (an object schema when missing); output schema
//! from `outputSchema`; the MCP annotations (`readOnlyHint`,
//! `destructiveHint`, `idempotentHint`, `openWorldHint`) as
//! [`Annotations`]; source [`ToolSource::Mcp`]; [`Loading::Deferred`];
//! timeout the server's `timeout_ms`. Its `call` goes through the pool,
//! which starts the server if needed (after the pool's connect check). The
//! call has no timer of its own: its caller times it (the engine does,
//! with the spec's timeout or the one `codemode.toml` sets), so a timeout
//! is the engine's kind `timeout` wherever it was set. The tool holds the
//! pool weakly: once the pool is gone its calls fail.

use std::sync::Weak;

use serde_json::{Value, json};

use super::McpError;
use super::config::ServerConfig;
use super::naming;
use super::pool::{Inner, McpPool};
use crate::catalog::{Annotations, Loading, Tool, ToolContext, ToolError, ToolFuture, ToolSource, ToolSpec};

/// A tool of an MCP server, registrable in the catalog.
#[derive(Clone)]
pub struct McpTool {
    pool: Weak<Inner>,
    server: String,
    tool: String,
    spec: ToolSpec,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("name", &self.spec.name).finish()
    }
}

impl McpTool {
    /// The tool described by `raw` (an MCP `Tool` object) on `server`.
    pub(crate) fn new(pool: &McpPool, server: &ServerConfig, raw: &Value) -> McpTool {
        let tool = raw["name"].as_str().unwrap_or_default().to_owned();
        let text = |key: &str| raw.get(key).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
        let description = text("description")
            .or_else(|| text("title"))
            .map_or_else(|| format!("Tool `{tool}` of MCP server `{}`.", server.name), str::to_owned);
        let input_schema = match raw.get("inputSchema") {
            Some(schema @ Value::Object(_)) => schema.clone(),
            _ => json!({"type": "object"}),
        };
        let hint = |key: &str| raw.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_bool);
        let annotations = Annotations {
            read_only: hint("readOnlyHint"),
            destructive: hint("destructiveHint"),
            idempotent: hint("idempotentHint"),
            open_world: hint("openWorldHint"),
        };
        let mut spec = ToolSpec::new(naming::tool_name(&server.name, &tool), description, input_schema)
            .source(ToolSource::Mcp { server: server.name.clone() })
            .loading(Loading::Deferred);
        spec.output_schema = raw.get("outputSchema").filter(|s| s.is_object()).cloned();
        spec.annotations = annotations;
        if let Some(timeout) = server.timeout {
            spec = spec.timeout_ms(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        }
        McpTool { pool: pool.downgrade(), server: server.name.clone(), tool, spec }
    }

    /// The configured server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tool's own name on the server (before sanitising).
    pub fn tool_name(&self) -> &str {
        &self.tool
    }
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        let (pool, server, tool) = (self.pool.clone(), self.server.clone(), self.tool.clone());
        Box::pin(async move {
            let pool = McpPool::upgrade(&pool).ok_or_else(|| McpError::ShutDown { server: server.clone() });
            let result = match pool {
                Ok(pool) => pool.call_untimed(&server, &tool, args, Some(&cx)).await,
                Err(e) => Err(e),
            };
            result.map_err(|e| match e {
                McpError::TotalTimeout { .. } => ToolError::timeout(e.to_string()),
                e => ToolError::new(e.to_string()).retry(e.retry_hint()),
            })
        })
    }
}
