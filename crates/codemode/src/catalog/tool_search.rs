//! `tool_search {query, mode?, limit?}`: the synthetic tool that finds
//! tools, and the discovery state behind it (index and toolbox).
//!
//! It ranks every tool the caller may call, eager and deferred (see
//! [`Discovery::may_call`]). Inside a program it only describes the
//! matches; a direct search also activates the deferred matches into the
//! toolbox (module `toolbox`) and reports what that evicted and what could
//! not be activated.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde::Deserialize;
use serde_json::{Value, json};

use super::cell::{CatalogCell, Unavailable};
use super::search::SearchError;
use super::toolbox::{Activation, Candidate, Toolbox};
use super::{
    Annotations, Catalog, Loading, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSource, ToolSpec,
};
use crate::receipt::Caller;

/// The synthetic tool's name.
pub const TOOL_SEARCH: &str = "tool_search";
/// Results returned when `limit` is not given.
const DEFAULT_LIMIT: usize = 5;
/// Most results one search returns.
const MAX_LIMIT: usize = 50;
/// Most characters (Unicode scalar values, as JSON Schema's `maxLength`
/// counts) of a query; a longer one is refused before it is read, so a
/// search's time stays bounded whatever the query (a few words, or a short
/// regular expression, is what a search needs).
pub(crate) const MAX_QUERY_CHARS: usize = 1000;

/// The description's first part: what a search finds and returns.
const SEARCH_TEXT: &str = "Find tools by what they do, among every tool you may call, deferred ones too (MCP \
servers' tools): a few words (mode \"bm25\", default: BM25 over names, descriptions and parameters), or a regular \
expression (mode \"regex\", Rust syntax, case-sensitive unless it starts with (?i)) tried on names, then \
descriptions, then parameters. Its content is {tools: [{name, description, input_schema, output_schema?, annotations, \
source}]}; output_schema is the shape of a result's content. Call a tool found by its exact name from a program.";

/// The description's sentence on what a direct search activates: a host
/// whose direct searches activate nothing (one that searches as a program
/// does, with [`crate::Engine::call_as`]) shows the description without it.
pub const TOOL_SEARCH_ACTIVATION: &str = ACTIVATION_TEXT;

const ACTIVATION_TEXT: &str = " Called directly (not from a program), it also adds the deferred matches to your tool \
list (at most 8 tools / 16 KiB of schemas) and reports `activated`, `evicted_tool_references` and \
`unavailable_tool_references`; each reference has the exact query that activates that tool again.";

const SERVERS_TEXT: &str = " It first starts configured MCP servers never listed (gated as \
`mcp_connect__<server>`, at most 3) when the query names one, says \"mcp\", or matches nothing listed; \
`unlisted_servers` names those still not listed and why.";

/// What no caller may call: a whole-tool deny rule, plan mode. Search never
/// shows such a tool.
pub(crate) type Barred = Box<dyn Fn(&ToolSpec) -> bool + Send + Sync>;

/// The toolbox of one engine, and what search must leave out.
pub(crate) struct Discovery {
    barred: Barred,
    toolbox: Mutex<Toolbox>,
}

impl Discovery {
    /// Discovery that never shows tools `barred` says no caller may call.
    pub(crate) fn new(barred: Barred) -> Self {
        Discovery { barred, toolbox: Mutex::new(Toolbox::default()) }
    }

    /// Whether a search by `caller` may show `spec`'s tool: one it may call,
    /// other than `tool_search` itself (always listed, and its description
    /// would match the words it gives as examples).
    fn may_call(&self, spec: &ToolSpec, caller: Caller) -> bool {
        spec.name != TOOL_SEARCH && !(self.barred)(spec) && spec.allowed_callers.contains(&caller)
    }

    /// Starts a turn (a run or a direct call); returns its number.
    pub(crate) fn begin_turn(&self) -> u64 {
        self.lock().begin_turn()
    }

    /// Records a call of a deferred tool in `turn`.
    pub(crate) fn note_called(&self, tool: &str, turn: u64) {
        self.lock().note_called(tool, turn);
    }

    /// The names of the tools in the toolbox, in activation order.
    pub(crate) fn toolbox(&self) -> Vec<String> {
        self.lock().names()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Toolbox> {
        // The toolbox holds no invariant a panic could break half-way.
        self.toolbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one search of the catalog in `cell` (as it is now) with the
    /// tool's arguments `args`, for `caller`: what a call of `tool_search`
    /// returns.
    ///
    /// # Errors
    /// Bad arguments (unknown field, bad mode or limit, a regex that does
    /// not compile, a query with no words), as the tool's failure.
    pub(crate) fn search_now(
        &self,
        cell: &CatalogCell,
        args: Value,
        caller: Caller,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = crate::catalog::parse_args(args)?;
        self.search(&cell.load(), &cell.unavailable(), &args, caller).map(ToolOutput::new)
    }

    /// Which of the configured MCP servers whose tools the catalog does not
    /// hold (`unlisted`, never listed and not in the schema cache) a search
    /// with `args` by `caller` is about (the seed's "MCP-focused search"):
    ///
    /// 1. the query names servers: their words appear in it, in order
    ///    (`everything`, `mcp__time__get_current_time`, `my-server` for
    ///    `my-server`): those servers;
    /// 2. else the query has the word `mcp`, or matches nothing in the
    ///    catalog (regex mode: no tool it may call matches; bm25: no tool it
    ///    may call holds more than half of the query's terms, synonyms not
    ///    counted): every unlisted server;
    /// 3. else nothing: an unrelated search starts no server.
    ///
    /// The `mcp_connect__<server>` tools do not count as matches (their
    /// descriptions name servers, not what the servers do). Arguments that
    /// do not parse start nothing (the search itself says what is wrong).
    pub(crate) fn mcp_focus(
        &self,
        catalog: &Catalog,
        args: &Value,
        caller: Caller,
        unlisted: &[String],
    ) -> McpFocus {
        let Ok(args) = serde_json::from_value::<Args>(args.clone()) else { return McpFocus::Unrelated };
        if unlisted.is_empty() || check_query(&args.query).is_err() {
            return McpFocus::Unrelated;
        }
        let query = super::search::words(&args.query);
        let named: Vec<String> = unlisted
            .iter()
            .filter(|server| {
                let name = super::search::words(server);
                !name.is_empty() && query.windows(name.len()).any(|w| w == name.as_slice())
            })
            .cloned()
            .collect();
        if !named.is_empty() {
            return McpFocus::Named(named);
        }
        if query.iter().any(|w| w == "mcp") {
            return McpFocus::All;
        }
        let index = catalog.search_index();
        let eligible = |i: usize| {
            let spec = &catalog.at(i).spec;
            self.may_call(spec, caller) && !spec.name.starts_with(codemode_base::CONNECT_PREFIX)
        };
        let matches_nothing = if args.mode.as_deref() == Some("regex") {
            index.regex(&args.query, eligible).is_ok_and(|hits| hits.is_empty())
        } else {
            let (best, terms) = index.best_coverage(&args.query, eligible);
            terms > 0 && best * 2 <= terms
        };
        if matches_nothing { McpFocus::All } else { McpFocus::Unrelated }
    }

    /// Runs one search of `catalog` for `caller`.
    /// MCP tools the catalog left out (see [`Unavailable`]) that match the
    /// search are added as `unavailable: [{name, description, why}]`.
    fn search(
        &self,
        catalog: &Catalog,
        left_out: &[Unavailable],
        args: &Args,
        caller: Caller,
    ) -> Result<Value, ToolError> {
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > MAX_LIMIT {
            return Err(ToolError::new(format!("limit must be between 1 and {MAX_LIMIT}, got {limit}")));
        }
        check_query(&args.query).map_err(ToolError::new)?;
        let index = catalog.search_index();
        let eligible = |i: usize| self.may_call(&catalog.at(i).spec, caller);
        let hits = match args.mode.as_deref().unwrap_or("bm25") {
            "bm25" => index.bm25(&args.query, eligible),
            "regex" => index.regex(&args.query, eligible),
            other => {
                return Err(ToolError::new(format!("mode must be \"bm25\" or \"regex\", got {other:?}")));
            }
        }
        .map_err(|e: SearchError| ToolError::new(e.to_string()))?;
        let hits: Vec<&ToolSpec> = hits.into_iter().take(limit).map(|(i, _)| &catalog.at(i).spec).collect();
        let described: Vec<Value> = hits.iter().map(|spec| describe(spec)).collect();
        let callable: Vec<&Unavailable> =
            left_out.iter().filter(|u| self.may_call(&u.spec, caller)).collect();
        let unavailable = unavailable_matches(&callable, args);
        if caller == Caller::Program {
            let mut out = json!({ "tools": described });
            if !unavailable.is_empty() {
                out["unavailable"] = Value::Array(unavailable);
            }
            return Ok(out);
        }
        let candidates: Vec<Candidate> = hits
            .iter()
            .filter(|spec| spec.loading == Loading::Deferred)
            .map(|spec| Candidate {
                name: spec.name.clone(),
                bytes: super::digest::canonical_len(&spec.input_schema),
            })
            .collect();
        let Activation { activated, evicted_tool_references, unavailable_tool_references } =
            self.lock().activate(&candidates);
        let mut out = json!({
            "tools": described,
            "activated": activated,
            "evicted_tool_references": evicted_tool_references,
            "unavailable_tool_references": unavailable_tool_references,
        });
        if !unavailable.is_empty() {
            out["unavailable"] = Value::Array(unavailable);
        }
        Ok(out)
    }
}

/// Refuses a query over [`MAX_QUERY_CHARS`] characters.
///
/// # Errors
/// A sentence naming the query's length and the bound.
fn check_query(query: &str) -> Result<(), String> {
    // Counting stops past the bound: a huge query costs no more than a long one.
    let chars = query.chars().take(MAX_QUERY_CHARS + 1).count();
    if chars > MAX_QUERY_CHARS {
        return Err(format!(
            "the query is over {MAX_QUERY_CHARS} characters ({} bytes); give a few words (bm25) or a short \
             regular expression (regex)",
            query.len()
        ));
    }
    Ok(())
}

/// What a search is about among the configured MCP servers not listed yet
/// ([`Discovery::mcp_focus`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum McpFocus {
    /// The query names these servers.
    Named(Vec<String>),
    /// The query says `mcp` or matches nothing in the catalog: every
    /// unlisted server.
    All,
    /// An unrelated search: start nothing.
    Unrelated,
}

/// The left-out tools a search for `args` matches, as `{name,
/// description, why}`: in regex mode the expression matches the name or
/// the description; in bm25 mode a word of the query (2 characters or more,
/// any case) is in the name or the description. At most the search's
/// limit. Only tools the caller could call were they available.
fn unavailable_matches(left_out: &[&Unavailable], args: &Args) -> Vec<Value> {
    if left_out.is_empty() {
        return Vec::new();
    }
    let matches: Box<dyn Fn(&str) -> bool> = if args.mode.as_deref() == Some("regex") {
        match super::search::compile(&args.query) {
            Ok(re) => Box::new(move |text| re.is_match(text)),
            Err(_) => return Vec::new(),
        }
    } else {
        let words: Vec<String> =
            args.query.split_whitespace().filter(|w| w.len() >= 2).map(str::to_lowercase).collect();
        Box::new(move |text| {
            let text = text.to_lowercase();
            words.iter().any(|w| text.contains(w.as_str()))
        })
    };
    left_out
        .iter()
        .filter(|u| matches(&u.spec.name) || matches(&u.spec.description))
        .take(args.limit.unwrap_or(DEFAULT_LIMIT))
        .map(|u| json!({"name": u.spec.name, "description": u.spec.description, "why": u.why}))
        .collect()
}

/// What a search shows of one tool: `output_schema` (the JSON Schema of
/// the result's `content`) only when the tool declares one.
fn describe(spec: &ToolSpec) -> Value {
    let mut found = json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "annotations": annotations_json(&spec.annotations),
        "source": spec.source.label(),
    });
    if let Some(schema) = &spec.output_schema {
        found["output_schema"] = schema.clone();
    }
    found
}

fn annotations_json(a: &Annotations) -> Value {
    serde_json::to_value(a).unwrap_or_else(|_| json!({}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    query: String,
    mode: Option<String>,
    limit: Option<usize>,
}

/// What `tool_search` searches: the engine's catalog (held weakly: the
/// tool is part of that catalog) and its discovery state.
pub(crate) struct SearchLink {
    pub catalog: Weak<CatalogCell>,
    pub discovery: Arc<Discovery>,
}

/// The `tool_search` tool. Its link is set once the catalog it searches
/// exists.
pub(crate) struct ToolSearch {
    link: Arc<OnceLock<SearchLink>>,
}

impl ToolSearch {
    /// The tool, and the cell to put its link in.
    pub(crate) fn new() -> (Self, Arc<OnceLock<SearchLink>>) {
        let cell = Arc::new(OnceLock::new());
        (ToolSearch { link: cell.clone() }, cell)
    }
}

impl Tool for ToolSearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            TOOL_SEARCH,
            format!("{SEARCH_TEXT}{ACTIVATION_TEXT}{SERVERS_TEXT}"),
            json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_QUERY_CHARS
                    },
                    "mode": {
                        "type": "string",
                        "enum": ["bm25", "regex"],
                        "default": "bm25"
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "default": DEFAULT_LIMIT,
                        "description": "Most tools to return."
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
        .read_only(true)
        .destructive(false)
        .source(ToolSource::Synthetic)
        .result_schemas(super::shapes::tool_search())
    }

    fn call(&self, args: Value, cx: ToolContext) -> ToolFuture {
        let found = self.link.get().and_then(|l| {
            let cell = l.catalog.upgrade()?;
            Some((cell, l.discovery.clone()))
        });
        Box::pin(async move {
            let (cell, discovery) = found.ok_or_else(|| {
                ToolError::new("tool_search has no catalog: the engine is being built or dropped")
            })?;
            discovery.search_now(&cell, args, cx.caller)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, description: &str, loading: Loading) -> ToolSpec {
        ToolSpec::new(name, description, json!({"type": "object"})).loading(loading)
    }

    struct Plain(ToolSpec);
    impl Tool for Plain {
        fn spec(&self) -> ToolSpec {
            self.0.clone()
        }
        fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
            Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
        }
    }

    fn catalog(specs: Vec<ToolSpec>) -> Catalog {
        Catalog::new(specs.into_iter().map(|s| Arc::new(Plain(s)) as Arc<dyn Tool>).collect()).unwrap()
    }

    fn args(query: &str) -> Args {
        Args { query: query.into(), mode: None, limit: None }
    }

    fn open() -> Discovery {
        Discovery::new(Box::new(|_| false))
    }

    #[test]
    fn program_searches_describe_and_activate_nothing() {
        let c = catalog(vec![spec("open_issue", "open an issue in a tracker", Loading::Deferred)]);
        let d = open();
        let out = d.search(&c, &[], &args("issue"), Caller::Program).unwrap();
        assert_eq!(out["tools"][0]["name"], "open_issue");
        assert_eq!(out["tools"][0]["source"], "native");
        assert!(out.get("activated").is_none());
        assert!(d.toolbox().is_empty());
        let out = d.search(&c, &[], &args("issue"), Caller::Direct).unwrap();
        assert_eq!(out["activated"], json!(["open_issue"]));
        assert_eq!(d.toolbox(), ["open_issue"]);
    }

    #[test]
    fn eager_tools_are_found_but_not_activated() {
        let c = catalog(vec![spec("read", "read a file", Loading::Eager)]);
        let out = open().search(&c, &[], &args("read"), Caller::Direct).unwrap();
        assert_eq!(out["tools"][0]["name"], "read");
        assert_eq!(out["activated"], json!([]));
    }

    #[test]
    fn only_tools_the_caller_may_call_are_ranked() {
        let c = catalog(vec![
            spec("direct_only", "issue tool", Loading::Eager).allowed_callers(&[Caller::Direct]),
            spec("denied", "issue tool", Loading::Eager),
            spec("fine", "issue tool", Loading::Eager),
        ]);
        let d = Discovery::new(Box::new(|s: &ToolSpec| s.name == "denied"));
        let names = |caller| {
            let out = d.search(&c, &[], &args("issue"), caller).unwrap();
            let mut n: Vec<String> = out["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names(Caller::Program), ["fine"]);
        assert_eq!(names(Caller::Direct), ["direct_only", "fine"]);
    }

    #[test]
    fn mcp_focus_is_a_named_server_the_word_mcp_or_a_query_nothing_covers() {
        let c = catalog(vec![
            spec("read", "read a text file", Loading::Eager),
            spec("mcp_connect__my-time", "start the MCP server my-time and add numbers", Loading::Deferred),
        ]);
        let d = open();
        let unlisted = ["my-time".to_owned(), "everything".to_owned()];
        let focus = |query: &str, mode: Option<&str>| {
            let args = json!({"query": query, "mode": mode.unwrap_or("bm25")});
            d.mcp_focus(&c, &args, Caller::Program, &unlisted)
        };
        assert_eq!(focus("what my-time is it", None), McpFocus::Named(vec!["my-time".into()]));
        assert_eq!(
            focus("^mcp__everything__add$", Some("regex")),
            McpFocus::Named(vec!["everything".into()])
        );
        assert_eq!(focus("MCP tools", None), McpFocus::All);
        // "file" alone is half of the terms: not more than half, nothing covers it.
        assert_eq!(focus("add two numbers", None), McpFocus::All);
        assert_eq!(focus("open file", None), McpFocus::All);
        assert_eq!(focus("read a file", None), McpFocus::Unrelated);
        assert_eq!(focus("^read$", Some("regex")), McpFocus::Unrelated);
        assert_eq!(focus("^add", Some("regex")), McpFocus::All);
        // Nothing unlisted, or arguments that do not parse: nothing to start.
        assert_eq!(d.mcp_focus(&c, &json!({"query": "mcp"}), Caller::Program, &[]), McpFocus::Unrelated);
        assert_eq!(d.mcp_focus(&c, &json!({"q": "mcp"}), Caller::Program, &unlisted), McpFocus::Unrelated);
    }

    #[test]
    fn bad_arguments_are_clear_errors() {
        let c = catalog(vec![spec("a", "b", Loading::Eager)]);
        let d = open();
        let bad = |mode: Option<&str>, limit| {
            let a = Args { query: "(".into(), mode: mode.map(Into::into), limit };
            d.search(&c, &[], &a, Caller::Program).unwrap_err().message
        };
        assert!(bad(Some("regex"), None).contains("not a valid regular expression"));
        assert!(bad(Some("fuzzy"), None).contains("\"bm25\" or \"regex\""));
        assert!(bad(None, Some(0)).contains("between 1 and 50"));
    }

    #[test]
    fn a_query_over_the_bound_is_refused_and_one_at_it_is_searched() {
        let c = catalog(vec![spec("read", "read a file", Loading::Eager)]);
        let d = open();
        let search = |query: String, mode: Option<&str>| {
            let a = Args { query, mode: mode.map(Into::into), limit: None };
            d.search(&c, &[], &a, Caller::Program)
        };
        let at = format!("read {}", "x".repeat(MAX_QUERY_CHARS - 5));
        assert_eq!(search(at, None).unwrap()["tools"][0]["name"], "read");
        // Characters, not bytes, as the schema's maxLength: 1000 `é` are 2000 bytes.
        assert!(search("é".repeat(MAX_QUERY_CHARS), None).is_ok());
        for mode in [None, Some("regex")] {
            let message = search("a(".repeat(50_000), mode).unwrap_err().message;
            assert!(message.contains("over 1000 characters (100000 bytes)"), "{message}");
        }
        let unlisted = ["srv".to_owned()];
        let long = json!({"query": format!("mcp {}", "x ".repeat(MAX_QUERY_CHARS))});
        assert_eq!(d.mcp_focus(&c, &long, Caller::Program, &unlisted), McpFocus::Unrelated);
    }
}
