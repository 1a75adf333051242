//! TypeScript declarations of the catalog (DESIGN.md §6, `codemode types`):
//! how a program calls each tool, with argument and result types rendered
//! from the tools' JSON Schemas.
//!
//! The layout (this file): a preamble (`ToolResult`, `Truncation`,
//! `ToolError`), one `interface Tools` with a method per tool, the generic
//! `tools.call`, `declare const tools: Tools`, and one `declare namespace`
//! per MCP server holding that server's argument and result types (plus a
//! `codemode` namespace for the named types of native and synthetic
//! tools, when they need any). Schema -> type rendering is in `schema/`;
//! docs/TYPESCRIPT.md lists the mapping.

mod compact;
mod schema;
mod text;

use std::collections::HashMap;

use serde_json::Value;

use super::{ToolSource, ToolSpec};
pub use compact::{compact_type, signature_line};
use schema::{Root, Scope, render_document};
use text::{comment_safe, jsdoc, pascal_name, property_key, sanitize, string_literal};

/// What [`declarations_with`] renders besides the tools.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeclarationOptions {
    /// Whether to include the shared preamble: the header comment,
    /// `ToolResult`, `Truncation`, `ToolError`, the generic `tools.call`
    /// overloads and `declare const tools: Tools`. Default `true`. Without
    /// it the output is only `interface Tools { ... }` (the tools' methods)
    /// and the namespaces, to put after a preamble rendered once (interface
    /// declarations merge); `declarations(std::iter::empty())` renders the
    /// preamble alone.
    pub preamble: bool,
}

impl Default for DeclarationOptions {
    fn default() -> Self {
        DeclarationOptions { preamble: true }
    }
}

impl DeclarationOptions {
    /// The defaults: with the preamble.
    pub fn new() -> Self {
        Self::default()
    }

    /// Includes the shared preamble (`true`, the default) or leaves it out.
    pub fn preamble(mut self, on: bool) -> Self {
        self.preamble = on;
        self
    }
}

/// TypeScript declarations (one `.d.ts` text) for `specs`, in the order
/// given, with the shared preamble: see [`declarations_with`].
pub fn declarations<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> String {
    declarations_with(specs, &DeclarationOptions::default())
}

/// TypeScript declarations (one `.d.ts` text, a global script) for
/// `specs`, in the order given; pass a subset (e.g. the eager tools) to
/// declare only those.
///
/// Shape: `interface Tools` has one method per tool, `name(args: A):
/// Promise<ToolResult<R, M>>`, where `A` comes from the input schema, `R`
/// from the output schema (`unknown` without one) and `M` from the
/// metadata schema (left out without one: `Record<string, unknown> |
/// null`); a name that is not an
/// identifier is quoted (`"get-sum"(args)`, called as
/// `tools["get-sum"](args)`), and a name the `tools` proxy keeps for itself
/// (`call`, `then`, `toString`, ...) gets a `call("name", args)` overload
/// instead. Tool descriptions become JSDoc. MCP tools (source
/// [`ToolSource::Mcp`]) take their argument and result types from a
/// `declare namespace mcp__<server>` (`mcp__memory.CreateEntitiesArgs`);
/// native and synthetic tools' types are inline.
///
/// Never fails: schema parts TypeScript cannot express become `unknown`
/// with a comment (docs/TYPESCRIPT.md). The output is deterministic for the
/// same specs and compiles with `tsc --strict`.
pub fn declarations_with<'a>(
    specs: impl IntoIterator<Item = &'a ToolSpec>,
    options: &DeclarationOptions,
) -> String {
    let mut namespaces = Namespaces::new();
    let mut members = String::new();
    let mut overloads = String::new();
    for spec in specs {
        let server = match &spec.source {
            ToolSource::Mcp { server } => Some(server.as_str()),
            _ => None,
        };
        let (args, returns) = signature(namespaces.scope(server), spec, server);
        let optional = if args_optional(&spec.input_schema) { "?" } else { "" };
        let doc = jsdoc(&spec.description, &annotation_tags(spec), "  ");
        if proxy_keeps(&spec.name) {
            overloads.push_str(&format!(
                "{doc}  call(name: {}, args{optional}: {args}): {returns};\n",
                string_literal(&spec.name)
            ));
        } else {
            members.push_str(&format!(
                "{doc}  {}(args{optional}: {args}): {returns};\n",
                property_key(&spec.name)
            ));
        }
    }
    let mut out = interface_tools(&members, &overloads, options);
    namespaces.write(&mut out);
    out
}

/// The `declare namespace`s of one declarations text, each with the MCP
/// server it is for (`None`: the `codemode` namespace of native and
/// synthetic tools), in the order of their first tool.
struct Namespaces {
    scopes: Vec<(Scope, Option<String>)>,
    /// Index in `scopes` by MCP server name.
    by_server: HashMap<String, usize>,
    /// Index in `scopes` of the `codemode` namespace, once made.
    native: Option<usize>,
    /// The namespace identifiers given so far (`codemode` is kept).
    taken: Vec<String>,
}

impl Namespaces {
    fn new() -> Namespaces {
        Namespaces {
            scopes: Vec::new(),
            by_server: HashMap::new(),
            native: None,
            taken: vec!["codemode".into()],
        }
    }

    /// The namespace of `server`'s tools (`None`: native and synthetic
    /// tools), made on first use: `mcp__<server>` with the server's name
    /// made an identifier, `_2`, `_3`, ... added when that is taken.
    fn scope(&mut self, server: Option<&str>) -> &mut Scope {
        let index = match server {
            Some(server) => *self.by_server.entry(server.to_owned()).or_insert_with(|| {
                let base = format!("mcp__{}", sanitize(server));
                let mut ns = base.clone();
                let mut n = 2;
                while self.taken.contains(&ns) {
                    ns = format!("{base}_{n}");
                    n += 1;
                }
                self.taken.push(ns.clone());
                self.scopes.push((Scope::new(ns), Some(server.to_owned())));
                self.scopes.len() - 1
            }),
            None => *self.native.get_or_insert_with(|| {
                self.scopes.push((Scope::new("codemode".into()), None));
                self.scopes.len() - 1
            }),
        };
        &mut self.scopes[index].0
    }

    /// Appends each namespace that declares anything to `out`, after a
    /// blank line, with a JSDoc line saying whose types it holds.
    fn write(&self, out: &mut String) {
        for (scope, server) in self.scopes.iter().filter(|(s, _)| !s.decls.is_empty()) {
            out.push('\n');
            let what = match server {
                Some(server) => {
                    format!("Argument and result types of the MCP server `{}`.", comment_safe(server))
                }
                None => "Named types of native tools.".to_owned(),
            };
            out.push_str(&format!("/** {what} */\ndeclare namespace {} {{\n{}}}\n", scope.ns, scope.decls));
        }
    }
}

/// The argument type and the return type (`Promise<ToolResult<R, M>>`)
/// of `spec`'s method. An MCP tool's types (`<Tool>Args`, `<Tool>Result`,
/// `<Tool>Metadata`) are declared in `scope` and named; other tools' are
/// inline, with only their named parts declared in `scope`.
fn signature(scope: &mut Scope, spec: &ToolSpec, server: Option<&str>) -> (String, String) {
    let base = pascal_name(short_name(&spec.name, server));
    let (args_base, result_base) = (format!("{base}Args"), format!("{base}Result"));
    let metadata_base = format!("{base}Metadata");
    let named = server.is_some();
    let args = render_document(scope, &spec.input_schema, placement(named, &args_base), 1);
    let result =
        spec.output_schema.as_ref().map(|s| render_document(scope, s, placement(named, &result_base), 1));
    let metadata =
        spec.metadata_schema.as_ref().map(|s| render_document(scope, s, placement(named, &metadata_base), 1));
    let returns = match (&result, &metadata) {
        (Some(r), Some(m)) => format!("Promise<ToolResult<{}, {}>>", r.text, m.text),
        (None, Some(m)) => format!("Promise<ToolResult<unknown, {}>>", m.text),
        (Some(r), None) => format!("Promise<ToolResult<{}>>", r.text),
        (None, None) => "Promise<ToolResult>".to_owned(),
    };
    (args.text, returns)
}

/// How a tool's schema document is placed: declared under `base` when
/// `named`, else inline.
fn placement(named: bool, base: &str) -> Root<'_> {
    if named { Root::Named(base) } else { Root::Inline(base) }
}

/// `interface Tools { ... }` with the tools' `members` and `overloads`
/// (lines ending in newlines), and with `options.preamble` the preamble
/// before it, the generic `call`/`search` in it and `ToolName` and
/// `declare const tools` after it.
fn interface_tools(members: &str, overloads: &str, options: &DeclarationOptions) -> String {
    let mut out = String::new();
    if options.preamble {
        out.push_str(PREAMBLE);
        out.push('\n');
    }
    if options.preamble {
        out.push_str(TOOLS_DOC);
    }
    out.push_str("interface Tools {\n");
    out.push_str(members);
    out.push_str(overloads);
    if options.preamble {
        out.push_str(CALL);
    }
    out.push_str("}\n");
    if options.preamble {
        out.push_str(
            "type ToolName = Exclude<keyof Tools, \"call\" | \"search\">;\ndeclare const tools: Tools;\n",
        );
    }
    out
}

/// The tool's name without its `mcp__<server>__` prefix, for type names.
fn short_name<'n>(name: &'n str, server: Option<&str>) -> &'n str {
    let Some(server) = server else { return name };
    for prefix in [format!("mcp__{server}__"), format!("mcp__{}__", sanitize(server))] {
        if let Some(rest) = name.strip_prefix(prefix.as_str())
            && !rest.is_empty()
        {
            return rest;
        }
    }
    name.strip_prefix("mcp__").and_then(|rest| rest.split_once("__")).map_or(name, |(_, tool)| tool)
}

/// Names the `tools` proxy answers itself (js-prelude: `call`, `search`,
/// `then`, `toJSON` and `Object.prototype`'s), so `tools.<name>` is not the
/// tool.
fn proxy_keeps(name: &str) -> bool {
    matches!(
        name,
        "call"
            | "search"
            | "then"
            | "toJSON"
            | "constructor"
            | "hasOwnProperty"
            | "isPrototypeOf"
            | "propertyIsEnumerable"
            | "toLocaleString"
            | "toString"
            | "valueOf"
            | "__proto__"
            | "__defineGetter__"
            | "__defineSetter__"
            | "__lookupGetter__"
            | "__lookupSetter__"
    )
}

/// Whether the arguments may be left out (`tools.x()` sends `{}`): an
/// object schema with nothing required.
fn args_optional(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(s) => {
            let composite = ["$ref", "anyOf", "oneOf", "allOf", "enum", "const", "not", "if"];
            !composite.iter().any(|k| s.contains_key(*k))
                && matches!(s.get("type"), None | Some(Value::String(_)))
                && s.get("type").is_none_or(|t| t == "object")
                && match s.get("required") {
                    Some(Value::Array(r)) => r.is_empty(),
                    _ => true,
                }
        }
        _ => false,
    }
}

/// JSDoc tags from the MCP annotations a caller should know.
fn annotation_tags(spec: &ToolSpec) -> Vec<String> {
    let mut tags = Vec::new();
    if spec.annotations.read_only == Some(true) {
        tags.push("@readOnly".to_owned());
    } else if spec.annotations.destructive == Some(true) {
        tags.push("@destructive".to_owned());
    }
    tags
}

const PREAMBLE: &str = r#"// Tools a codemode program can call: `await tools.<name>(args)`, which is
// `await tools.call("<name>", args)`. Generated from the tools' JSON Schemas.

/**
 * Set whenever the result is not whole: over the per-call bound (the whole
 * is in spill_path), or cut by its tool (a window or page ending before the
 * end, an output tail: tool_cut says what was kept and how to get the rest).
 */
interface Truncation {
  /** Bytes of the whole; null when the tool does not know it (a page). */
  original_bytes: number | null;
  kept_bytes: number;
  /** The file holding the whole result; null if it could not be written or the tool cut. */
  spill_path: string | null;
  tool_cut?: string;
}

/** A tool's cut of its own output: the content keeps its type. */
interface ToolCut extends Truncation {
  spill_path: null;
  tool_cut: string;
}

/**
 * What a tool call resolves to. `content` is the tool's result (`T`) and
 * `metadata` facts about it (`M`: sizes, where to continue); `truncated` is
 * null exactly when the result is whole. A tool's own cut (a window, a page,
 * an output tail) keeps the content's type; when the content was over the
 * per-call bound, `content` is a string prefix of the result's text. When the tool asked the user a
 * question, `metadata.elicitations` lists them with each answer's `action`
 * ("accept", "decline" or "cancel"): a declined one means the result was
 * made without the answer.
 */
type ToolResult<T = unknown, M = Record<string, unknown> | null> =
  | { content: T; metadata: M; truncated: null }
  | { content: T; metadata: M; truncated: ToolCut }
  | { content: string; metadata: M; truncated: Truncation };

/** How a call that did not succeed rejects. */
declare class ToolError extends Error {
  readonly name: "ToolError";
  /** `unknown_outcome`: a call a recovery found running when its process
   * died, denied by a person (docs/JOURNAL.md, "Recovery"). */
  readonly kind: "denied" | "refused" | "failed" | "timeout" | "cancelled" | "unknown_outcome";
  /** The tool's name as called. */
  readonly tool: string;
  /** The call's number in the run's receipt; null when it never got one. */
  readonly seq: number | null;
}

/** What `tools.search` finds (the tool_search tool's result). */
interface ToolSearchFound {
  tools: ToolDescription[];
  /** Matching tools this caller may not call, and why. */
  unavailable?: { name: string; description: string; why: string }[];
  /** MCP servers this search started. */
  started_servers?: string[];
  /** Configured MCP servers still not listed (their tools unseen), and why. */
  unlisted_servers?: {
    name: string;
    state: "not_started" | "refused" | "denied" | "failed" | "over_bound" | "timed_out" | "started";
    why: string;
  }[];
}

/** A tool as `tools.search` describes it; call it by `name`. */
interface ToolDescription {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  /** The JSON Schema of the result's `content`, when the tool declares one. */
  output_schema?: Record<string, unknown>;
  annotations: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
  /** "native", "mcp:<server>" or "synthetic". */
  source: string;
}
"#;

const TOOLS_DOC: &str = "/** The tools. Each call resolves to a ToolResult or rejects with a ToolError. */\n";

const CALL: &str = r#"  /** Calls a tool by its exact name: `tools.call("read", {path})` is `tools.read({path})`. */
  call<N extends ToolName>(name: N, ...args: Parameters<Tools[N]>): ReturnType<Tools[N]>;
  /** Tools not declared here (deferred tools found with tool_search) are called by name too. */
  call<N extends string>(name: N & (N extends ToolName ? never : unknown), args?: Record<string, unknown>): Promise<ToolResult>;
  /** Finds tools, listed or not, by what they do (the tool_search tool): ranked words (bm25, default) or a regex over names, descriptions and parameters. */
  search(query: string, options?: { mode?: "bm25" | "regex"; limit?: number }): Promise<ToolResult<ToolSearchFound>>;
  /** The same with one object, as every tool call takes: `tools.search({query: "issues", limit: 5})`. */
  search(args: { query: string; mode?: "bm25" | "regex"; limit?: number }): Promise<ToolResult<ToolSearchFound>>;
"#;

#[cfg(test)]
mod tests;
