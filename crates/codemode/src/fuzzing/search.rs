//! `tool_search` over a fixed catalog (the `tool_search_query` target).

use std::sync::Arc;

use serde_json::Value;

use crate::catalog::cell::CatalogCell;
use crate::catalog::tool_search::Discovery;
use crate::receipt::Caller;
use crate::{Tool, ToolSpec, tool::ToolContext, tool::ToolFuture, tool::ToolOutput};

/// A listed tool that is only searched, never called.
struct Listed(ToolSpec);

impl Tool for Listed {
    fn spec(&self) -> ToolSpec {
        self.0.clone()
    }
    fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
        Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
    }
}

/// A catalog and the discovery state `tool_search` searches, built once and
/// searched many times.
pub struct SearchCatalog {
    cell: CatalogCell,
    discovery: Discovery,
}

impl SearchCatalog {
    /// A catalog of `tools`, each added as an MCP server's tool is: one
    /// with an invalid name or schema, or a name taken, is left out and
    /// shown by searches as `unavailable`. No tool is barred.
    pub fn new(tools: Vec<ToolSpec>) -> SearchCatalog {
        let optional = tools.into_iter().map(|s| Arc::new(Listed(s)) as Arc<dyn Tool>).collect();
        let (cell, _) = CatalogCell::new(Vec::new(), optional).expect("an empty base is a valid catalog");
        SearchCatalog { cell, discovery: Discovery::new(Box::new(|_| false)) }
    }

    /// One `tool_search` call with `args` (`{query, mode?, limit?}`), from
    /// a program or (when `direct`) as a direct call, which also activates
    /// deferred matches into the toolbox. Returns the tool's content.
    ///
    /// # Errors
    /// The tool's error message (bad arguments, a query over the bound, a
    /// regex that does not compile).
    pub fn search(&self, args: Value, direct: bool) -> Result<Value, String> {
        let caller = if direct { Caller::Direct } else { Caller::Program };
        self.discovery.search_now(&self.cell, args, caller).map(|out| out.content).map_err(|e| e.message)
    }

    /// Which of `unlisted` servers a search with `args` would start: their
    /// names, `["*"]` for every one, or none.
    pub fn mcp_focus(&self, args: &Value, unlisted: &[String]) -> Vec<String> {
        use crate::catalog::tool_search::McpFocus;
        match self.discovery.mcp_focus(&self.cell.load(), args, Caller::Program, unlisted) {
            McpFocus::Named(named) => named,
            McpFocus::All => vec!["*".to_owned()],
            McpFocus::Unrelated => Vec::new(),
        }
    }
}
