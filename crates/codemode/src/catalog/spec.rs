//! `ToolSpec`: what the catalog knows about one tool.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::receipt::Caller;

/// Behaviour hints, with the meanings of MCP's tool annotations
/// (`readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`;
/// MCP specification 2025-06-18, "Tool annotations"). `None` means the tool
/// did not say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Annotations {
    /// The tool does not change its environment.
    #[serde(rename = "readOnlyHint", skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The tool may destroy data (meaningful only when not read-only).
    #[serde(rename = "destructiveHint", skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Calling it twice with the same arguments has no further effect.
    #[serde(rename = "idempotentHint", skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// The tool reaches outside the machine (network, external systems).
    #[serde(rename = "openWorldHint", skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// Where a tool comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
#[non_exhaustive]
pub enum ToolSource {
    /// Built into codemode or registered by the host in Rust.
    Native,
    /// A tool of an MCP server.
    Mcp {
        /// The server's name in the MCP configuration.
        server: String,
    },
    /// Made by the engine itself (`tool_search`, `execute_tools`).
    Synthetic,
}

impl ToolSource {
    /// The source as one word: `native`, `mcp:<server>` or `synthetic`.
    pub fn label(&self) -> String {
        match self {
            ToolSource::Native => "native".to_owned(),
            ToolSource::Mcp { server } => format!("mcp:{server}"),
            ToolSource::Synthetic => "synthetic".to_owned(),
        }
    }
}

/// Whether a tool is in the model-facing surface from the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Loading {
    /// Listed from the first request.
    Eager,
    /// Callable by exact name and found by search, listed once activated.
    Deferred,
}

/// The argument that rules with a pattern match (`bash(git *)`,
/// `write(docs/**)`): its name in the arguments object and how it is
/// normalised before matching.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
#[non_exhaustive]
pub enum PrimaryArgument {
    /// A path: compared in workspace-relative form (`./a/../b` is `b`; an
    /// absolute path inside the workspace is made relative).
    Path(String),
    /// Text such as a shell command: compared with surrounding whitespace
    /// trimmed.
    Text(String),
}

/// The description of one tool: name, JSON Schemas, annotations and where it
/// may be called from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// Unique name, e.g. `read` or `mcp__github__create_issue`.
    pub name: String,
    /// What the tool does, for models and people.
    pub description: String,
    /// JSON Schema of the arguments object; calls are validated against it
    /// before they run.
    pub input_schema: Value,
    /// JSON Schema of the result content, when the tool declares one (an
    /// MCP tool's `outputSchema`; the native tools' shapes).
    pub output_schema: Option<Value>,
    /// JSON Schema of the result's `metadata`, when the tool declares one
    /// (the native tools and `tool_search` do; `{"type": "null"}` for a tool
    /// that gives none). `codemode types` renders it as the second type
    /// argument of `ToolResult`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_schema: Option<Value>,
    /// Behaviour hints; `read_only` is what Plan mode and the gate use.
    pub annotations: Annotations,
    /// Where the tool comes from.
    pub source: ToolSource,
    /// Eager or deferred.
    pub loading: Loading,
    /// Who may call it. Default: programs and direct callers.
    pub allowed_callers: Vec<Caller>,
    /// Per-call timeout in milliseconds; `None` uses the engine's
    /// [`Limits::tool_timeout`](crate::Limits::tool_timeout).
    pub timeout_ms: Option<u64>,
    /// The argument rule patterns match; `None` when rules can only name the
    /// tool.
    pub primary_argument: Option<PrimaryArgument>,
    /// Set by a native tool that starts at once in a journaled run and
    /// waits itself for its durable start ([`ToolContext`]'s
    /// `durable_start`) before it changes anything, so that what it does
    /// first, which changes nothing (the bash sandbox's namespaces and
    /// mounts), overlaps with the journal's write. Other tools start once
    /// their start is durable.
    ///
    /// [`ToolContext`]: super::ToolContext
    #[serde(skip)]
    pub(crate) waits_for_durable_start: bool,
}

impl ToolSpec {
    /// A native, eager tool callable by programs and direct callers, with no
    /// annotations and no output schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema: None,
            metadata_schema: None,
            annotations: Annotations::default(),
            source: ToolSource::Native,
            loading: Loading::Eager,
            allowed_callers: vec![Caller::Program, Caller::Direct],
            timeout_ms: None,
            primary_argument: None,
            waits_for_durable_start: false,
        }
    }

    /// Marks the tool as one that waits for its durable start itself
    /// ([`ToolSpec::waits_for_durable_start`]).
    pub(crate) fn waiting_for_durable_start(mut self) -> Self {
        self.waits_for_durable_start = true;
        self
    }

    /// Declares the result's shape: the JSON Schemas of its `content` and
    /// of its `metadata`. Default: neither.
    pub fn result_schemas(mut self, (content, metadata): (Value, Value)) -> Self {
        self.output_schema = Some(content);
        self.metadata_schema = Some(metadata);
        self
    }

    /// Sets the argument rule patterns match. Default: none.
    pub fn primary_argument(mut self, argument: PrimaryArgument) -> Self {
        self.primary_argument = Some(argument);
        self
    }

    /// Marks the tool read-only (`true`) or not (`false`).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.annotations.read_only = Some(read_only);
        self
    }

    /// Says whether the tool may destroy data (`destructiveHint`; meaningful
    /// for tools that are not read-only). Default: unset, which MCP reads as
    /// `true`.
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.annotations.destructive = Some(destructive);
        self
    }

    /// Sets the source. Default: [`ToolSource::Native`].
    pub fn source(mut self, source: ToolSource) -> Self {
        self.source = source;
        self
    }

    /// Sets eager or deferred. Default: [`Loading::Eager`].
    pub fn loading(mut self, loading: Loading) -> Self {
        self.loading = loading;
        self
    }

    /// Sets who may call the tool. Default: both callers.
    pub fn allowed_callers(mut self, callers: &[Caller]) -> Self {
        self.allowed_callers = callers.to_vec();
        self
    }

    /// Sets the per-call timeout in milliseconds. Default: the engine's.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Whether the tool declared itself read-only.
    pub fn is_read_only(&self) -> bool {
        self.annotations.read_only == Some(true)
    }
}
