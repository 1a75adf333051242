//! The catalog: every tool a run can call, with its compiled validator.
//!
//! Tools keep the order in which they were registered ("catalog order"),
//! which is the order of the catalog digest. Names are unique; each input
//! schema is compiled to a validator once: a tool the engine makes itself
//! (the native tools, `tool_search`) on its first use, every other tool
//! (the host's, an MCP server's, a connect tool) when the catalog is built
//! ([`Compile`]).

pub(crate) mod cell;
mod digest;
mod elicitation;
mod schema;
mod search;
pub(crate) mod shapes;
mod spec;
mod suggest;
mod tool;
pub(crate) mod tool_search;
mod toolbox;
mod typescript;

pub use elicitation::{
    CallProgress, Elicitation, ElicitationAction, ElicitationAnswer, ElicitationFuture, ElicitationMode,
    Elicitor,
};
pub use spec::{Annotations, Loading, PrimaryArgument, ToolSource, ToolSpec};
pub(crate) use tool::{DurableStart, DurableStartSender, parse_args};
pub use tool::{RetryHint, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
pub use typescript::{DeclarationOptions, compact_type, declarations, declarations_with, signature_line};

pub(crate) use schema::validator as schema_validator;
pub use tool_search::{TOOL_SEARCH, TOOL_SEARCH_ACTIVATION};

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::receipt::spill::display_cut;

/// Why a set of tools cannot form a catalog.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two tools share a name.
    #[error("two tools are named `{name}`; tool names must be unique")]
    DuplicateName {
        /// The name registered twice.
        name: String,
    },
    /// A tool name is empty or has characters outside `[A-Za-z0-9_-]`.
    #[error("tool name `{name}` is invalid: use 1-128 characters of A-Z, a-z, 0-9, `_` and `-`")]
    InvalidName {
        /// The offending name.
        name: String,
    },
    /// A tool's input schema is not a valid JSON Schema.
    #[error("the input schema of `{tool}` is not a valid JSON Schema: {message}")]
    InvalidSchema {
        /// The tool whose schema failed.
        tool: String,
        /// What the schema compiler said.
        message: String,
    },
}

/// When a tool's input schema is compiled to its validator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compile {
    /// When the catalog is built: a schema that does not compile is an
    /// error of the build (a host's tool) or leaves the tool out (an MCP
    /// server's). For every schema codemode does not write itself.
    AtBuild,
    /// On the tool's first use (the first check of arguments against the
    /// schema: a call, or the admission check of a literal call). Only for
    /// the engine's own tools, whose schemas are constants of this build
    /// that a test compiles (`tools::tests`); a process that calls none of
    /// them (`codemode run` of `return 1`) compiles none. Should one not
    /// compile, each use is refused with the same [`CatalogError`] text
    /// the build would have given.
    OnFirstUse,
}

/// One registered tool.
pub(crate) struct Entry {
    pub spec: ToolSpec,
    /// The tool's name (`spec.name`), shared: each call's receipt and
    /// context hold it without copying it.
    pub name: Arc<str>,
    pub tool: Arc<dyn Tool>,
    /// The compiled input schema, or why it does not compile (the
    /// [`CatalogError::InvalidSchema`] text); set when the catalog is built
    /// or on first use ([`Compile`]).
    validator: std::sync::OnceLock<Result<jsonschema::Validator, String>>,
}

impl Entry {
    /// The tool's validator, compiled now if it was not yet; `Err` is the
    /// [`CatalogError::InvalidSchema`] text when the schema does not
    /// compile.
    fn validator(&self) -> Result<&jsonschema::Validator, &str> {
        self.validator.get_or_init(|| compiled(&self.spec)).as_ref().map_err(String::as_str)
    }

    /// The schema errors of `args`, one line each (at most 8), each cut
    /// to [`TEXT_BYTES`](crate::receipt::spill::TEXT_BYTES) as it is
    /// formatted; empty when valid.
    ///
    /// For an MCP server's tool, a `null` for a top-level property the
    /// schema does not require counts as leaving it out
    /// ([`Entry::checked_args`]).
    pub(crate) fn schema_errors(&self, args: &Value) -> Vec<String> {
        let validator = match self.validator() {
            Ok(validator) => validator,
            Err(why) => return vec![why.to_owned()],
        };
        let checked = self.checked_args(args);
        let args = checked.as_ref().unwrap_or(args);
        if validator.is_valid(args) {
            return Vec::new();
        }
        validator
            .iter_errors(args)
            .take(8)
            // Cut while written: an error quotes the value it rejects,
            // which may be the whole (huge) argument.
            .map(|e| schema_error_text(&e))
            .collect()
    }

    /// The schema errors of arguments known in part (a program's literal
    /// arguments, before it runs), as [`Entry::schema_errors`] writes
    /// them. `args` holds every key the call surely has, each whose value
    /// is not known as `null`, and `known(key)` says which values are
    /// known. Kept are only errors the unknown parts cannot mend: about a
    /// known value, a key the schema does not allow, and a required key
    /// missing when `open` is false (`open`: the call may have keys not
    /// in `args`). An error a whole-object keyword reports (`anyOf`,
    /// `if`, `dependentRequired`, ...) may depend on unknown values: left
    /// out.
    pub(crate) fn partial_schema_errors(
        &self,
        args: &Value,
        known: &dyn Fn(&str) -> bool,
        open: bool,
    ) -> Vec<String> {
        use jsonschema::error::ValidationErrorKind as Kind;
        let validator = match self.validator() {
            Ok(validator) => validator,
            Err(why) => return vec![why.to_owned()],
        };
        let checked = self.checked_args(args);
        let args = checked.as_ref().unwrap_or(args);
        if validator.is_valid(args) {
            return Vec::new();
        }
        validator
            .iter_errors(args)
            .filter(|e| {
                let at = e.instance_path();
                match first_key(at.as_str()) {
                    Some(key) => known(&key),
                    None => match e.kind() {
                        Kind::Required { .. } => !open,
                        Kind::AdditionalProperties { .. } => true,
                        _ => false,
                    },
                }
            })
            .take(8)
            .map(|e| schema_error_text(&e))
            .collect()
    }
}

impl Entry {
    /// What the schema check sees of an MCP tool's `args` when they hold a
    /// top-level `null` for a property the schema does not list as
    /// `required`: `args` without it (the call still sends the `null`; the
    /// server decides what it means, and its `Mcp-Param-*` header is
    /// omitted as for an absent argument). Programs write
    /// `{region, verbose: flag ?? null}` for "not given", and schemas
    /// rarely allow `null` for optional properties. `None`: check `args`
    /// as they are (not an MCP tool, nothing to leave out).
    fn checked_args(&self, args: &Value) -> Option<Value> {
        if !matches!(self.spec.source, ToolSource::Mcp { .. }) {
            return None;
        }
        let object = args.as_object()?;
        let required = self.spec.input_schema.get("required").and_then(Value::as_array);
        let is_required = |key: &str| required.is_some_and(|r| r.iter().any(|k| k.as_str() == Some(key)));
        let optional_null = |(key, value): (&String, &Value)| value.is_null() && !is_required(key);
        if !object.iter().any(optional_null) {
            return None;
        }
        let kept = object.iter().filter(|entry| !optional_null(*entry));
        Some(Value::Object(kept.map(|(k, v)| (k.clone(), v.clone())).collect()))
    }
}

/// The first key of a JSON pointer (`/a~1b/0` gives `a/b`), `None` for
/// the whole value.
fn first_key(pointer: &str) -> Option<String> {
    let first = pointer.strip_prefix('/')?.split('/').next()?;
    Some(first.replace("~1", "/").replace("~0", "~"))
}

/// The tools of an engine, in catalog order.
pub(crate) struct Catalog {
    entries: Vec<Entry>,
    /// Position in `entries` by name. foldhash rather than SipHash: every
    /// call looks its tool up here.
    index: Index,
    digest: String,
    /// `tool_search`'s index, built on the first search.
    search: std::sync::OnceLock<search::SearchIndex>,
}

impl Catalog {
    /// Builds a catalog, compiling every input schema now.
    ///
    /// # Errors
    /// [`CatalogError`] for a duplicate or invalid name, or an invalid schema.
    #[cfg(test)]
    pub(crate) fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Self, CatalogError> {
        let tools = tools.into_iter().map(|t| (t, Compile::AtBuild)).collect();
        Ok(Catalog::with_optional(tools, Vec::new())?.0)
    }

    /// Builds a catalog of `tools` (which must all be valid, as for
    /// [`Catalog::new`]; each compiled when its [`Compile`] says) followed
    /// by `optional` tools (MCP servers' tools, compiled now), each of
    /// which is left out, with the reason in the returned list, when its
    /// name is invalid or taken or its schema does not compile: a server's
    /// bad schema must not stop the engine.
    ///
    /// # Errors
    /// [`CatalogError`] for a fault in `tools`.
    pub(crate) fn with_optional(
        tools: Vec<(Arc<dyn Tool>, Compile)>,
        optional: Vec<Arc<dyn Tool>>,
    ) -> Result<(Self, Vec<CatalogError>), CatalogError> {
        let mut entries = Vec::with_capacity(tools.len() + optional.len());
        let mut index = Index::with_capacity_and_hasher(tools.len() + optional.len(), Default::default());
        let mut skipped = Vec::new();
        let required = tools.into_iter().map(|(t, compile)| (t, compile, true));
        let optional = optional.into_iter().map(|t| (t, Compile::AtBuild, false));
        for (tool, compile, must) in required.chain(optional) {
            match entry_of(tool, compile, &index) {
                Ok(entry) => {
                    index.insert(entry.spec.name.clone(), entries.len());
                    entries.push(entry);
                }
                Err(e) if must => return Err(e),
                Err(e) => skipped.push(e),
            }
        }
        let digest = digest::catalog_digest(entries.iter().map(|e| &e.spec));
        Ok((Catalog { entries, index, digest, search: std::sync::OnceLock::new() }, skipped))
    }

    /// The search index over every tool, in catalog order.
    pub(crate) fn search_index(&self) -> &search::SearchIndex {
        self.search.get_or_init(|| search::SearchIndex::new(self.specs()))
    }

    /// The tool at `position` in catalog order.
    pub(crate) fn at(&self, position: usize) -> &Entry {
        &self.entries[position]
    }

    /// The tool named exactly `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.index.get(name).map(|&i| &self.entries[i])
    }

    /// Every tool's spec, in catalog order.
    pub(crate) fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.iter().map(|e| &e.spec)
    }

    /// Every entry, in catalog order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// The catalog digest (DESIGN.md §6), lower-case hex.
    pub(crate) fn digest(&self) -> &str {
        &self.digest
    }

    /// The MCP servers whose tools are in the catalog (listed, or known
    /// from the schema cache), each once, in catalog order.
    pub(crate) fn mcp_servers(&self) -> Vec<String> {
        let mut servers: Vec<String> = Vec::new();
        for spec in self.specs() {
            if let ToolSource::Mcp { server } = &spec.source
                && !servers.contains(server)
            {
                servers.push(server.clone());
            }
        }
        servers
    }

    /// The digest of the catalog without the tools of MCP servers not in
    /// `servers`: what [`Catalog::digest`] was when only those servers
    /// were listed, if nothing else changed. A resume compares it with the
    /// digest its journal recorded, so a server first listed after that
    /// point (by the run's own call, or by the schema cache another run
    /// filled) does not count as a change.
    pub(crate) fn digest_with_servers(&self, servers: &[String]) -> String {
        let kept = self.specs().filter(|spec| match &spec.source {
            ToolSource::Mcp { server } => servers.contains(server),
            _ => true,
        });
        digest::catalog_digest(kept)
    }

    /// Up to three registered names closest to `name`, best first.
    pub(crate) fn suggest(&self, name: &str) -> Vec<&str> {
        suggest::nearest(name, self.entries.iter().map(|e| e.spec.name.as_str()), 3)
    }
}

/// The catalog's index type: position by tool name.
type Index = HashMap<String, usize, foldhash::fast::RandomState>;

/// A catalog entry for `tool`, unless its name is invalid or already in
/// `index`, or (compiled at build) its schema does not compile.
fn entry_of(tool: Arc<dyn Tool>, compile: Compile, index: &Index) -> Result<Entry, CatalogError> {
    let spec = tool.spec();
    if !valid_name(&spec.name) {
        return Err(CatalogError::InvalidName { name: spec.name });
    }
    if index.contains_key(&spec.name) {
        return Err(CatalogError::DuplicateName { name: spec.name });
    }
    let validator = std::sync::OnceLock::new();
    if compile == Compile::AtBuild {
        let compiled = schema::validator(&spec.input_schema)
            .map_err(|message| CatalogError::InvalidSchema { tool: spec.name.clone(), message })?;
        let _ = validator.set(Ok(compiled));
    }
    let name = Arc::from(spec.name.as_str());
    Ok(Entry { spec, name, tool, validator })
}

/// `spec`'s input schema compiled, or the [`CatalogError::InvalidSchema`]
/// text the catalog's build gives for it.
fn compiled(spec: &ToolSpec) -> Result<jsonschema::Validator, String> {
    schema::validator(&spec.input_schema)
        .map_err(|message| CatalogError::InvalidSchema { tool: spec.name.clone(), message }.to_string())
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A JSON Schema validation error as a call's refusal quotes it: where in
/// the arguments (`at /path: `, none at the top) and why, cut while
/// written (an error quotes the value it rejects, which may be huge).
fn schema_error_text(e: &jsonschema::ValidationError<'_>) -> String {
    let at = e.instance_path();
    if at.as_str().is_empty() { display_cut(e) } else { display_cut(format_args!("at {at}: {e}")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Named(&'static str, Value);
    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new(self.0, "test tool", self.1.clone())
        }
        fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
            Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
        }
    }

    fn tool(name: &'static str) -> Arc<dyn Tool> {
        Arc::new(Named(name, json!({"type": "object"})))
    }

    #[test]
    fn duplicate_names_are_refused() {
        let err = Catalog::new(vec![tool("a"), tool("a")]).err().unwrap();
        assert!(matches!(err, CatalogError::DuplicateName { name } if name == "a"));
    }

    #[test]
    fn invalid_names_are_refused() {
        for bad in ["", "has space", "dot.name"] {
            let err = Catalog::new(vec![tool(bad)]).err().unwrap();
            assert!(matches!(err, CatalogError::InvalidName { .. }), "{bad:?}");
        }
    }

    #[test]
    fn invalid_schemas_are_refused_with_the_tool_name() {
        let t: Arc<dyn Tool> = Arc::new(Named("bad", json!({"type": "nonsense"})));
        let err = Catalog::new(vec![t]).err().unwrap();
        assert!(err.to_string().contains("`bad`"), "{err}");
    }

    #[test]
    fn schema_errors_name_the_place() {
        let t: Arc<dyn Tool> = Arc::new(Named(
            "t",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ));
        let c = Catalog::new(vec![t]).unwrap();
        let e = c.get("t").unwrap();
        assert!(e.schema_errors(&json!({"path": "x"})).is_empty());
        let errs = e.schema_errors(&json!({"path": 3}));
        assert_eq!(errs.len(), 1);
        assert!(errs[0].starts_with("at /path:"), "{errs:?}");
        assert!(e.schema_errors(&json!({}))[0].contains("path"));
    }

    /// A catalog of `tools`, each compiled on first use.
    fn lazy(tools: Vec<Arc<dyn Tool>>) -> Catalog {
        let tools = tools.into_iter().map(|t| (t, Compile::OnFirstUse)).collect();
        Catalog::with_optional(tools, Vec::new()).unwrap().0
    }

    #[test]
    fn a_schema_compiled_on_first_use_refuses_what_one_compiled_at_build_does() {
        let schema = json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["path"],
            "additionalProperties": false
        });
        let built = Catalog::new(vec![Arc::new(Named("t", schema.clone()))]).unwrap();
        let first_use = lazy(vec![Arc::new(Named("t", schema))]);
        let (built, first_use) = (built.get("t").unwrap(), first_use.get("t").unwrap());
        assert!(first_use.validator.get().is_none(), "compiled before its first use");
        for args in [
            json!({"path": 3}),
            json!({}),
            json!({"path": "x", "limit": 0, "extra": true}),
            json!("not an object"),
            json!({"path": "x"}),
        ] {
            assert_eq!(first_use.schema_errors(&args), built.schema_errors(&args), "{args}");
        }
        assert!(first_use.validator.get().is_some());
        // The admission check's partial form, on a fresh entry too.
        let fresh = lazy(vec![Arc::new(Named("t", json!({"type": "object", "required": ["path"]})))]);
        let fresh = fresh.get("t").unwrap();
        let errors = fresh.partial_schema_errors(&json!({}), &|_| true, false);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("path"), "{errors:?}");
    }

    #[test]
    fn a_schema_that_does_not_compile_on_first_use_refuses_every_use_with_the_build_error() {
        let bad = json!({"type": "nonsense"});
        let at_build = Catalog::new(vec![Arc::new(Named("bad", bad.clone()))]).err().unwrap().to_string();
        let catalog = lazy(vec![Arc::new(Named("bad", bad))]);
        let entry = catalog.get("bad").unwrap();
        assert_eq!(entry.schema_errors(&json!({})), std::slice::from_ref(&at_build));
        assert_eq!(entry.partial_schema_errors(&json!({}), &|_| true, true), [at_build]);
    }

    /// A tool of MCP server `server`.
    struct OfServer(&'static str, &'static str);
    impl Tool for OfServer {
        fn spec(&self) -> ToolSpec {
            let mut spec = ToolSpec::new(self.0, "server tool", json!({"type": "object"}));
            spec.source = ToolSource::Mcp { server: self.1.to_owned() };
            spec
        }
        fn call(&self, _: Value, _: ToolContext) -> ToolFuture {
            Box::pin(async { Ok(ToolOutput::new(Value::Null)) })
        }
    }

    #[test]
    fn a_digest_without_servers_listed_since_is_the_digest_before_them() {
        let fs: Arc<dyn Tool> = Arc::new(OfServer("mcp__fs__read", "fs"));
        let fs2: Arc<dyn Tool> = Arc::new(OfServer("mcp__fs__write", "fs"));
        let git: Arc<dyn Tool> = Arc::new(OfServer("mcp__git__log", "git"));
        let before =
            Catalog::with_optional(vec![(tool("read"), Compile::AtBuild)], vec![fs.clone(), fs2.clone()])
                .unwrap()
                .0;
        let after =
            Catalog::with_optional(vec![(tool("read"), Compile::AtBuild)], vec![fs, fs2, git]).unwrap().0;
        assert_eq!(before.mcp_servers(), ["fs"]);
        assert_eq!(after.mcp_servers(), ["fs", "git"]);
        assert_ne!(after.digest(), before.digest());
        assert_eq!(after.digest_with_servers(&before.mcp_servers()), before.digest());
        assert_eq!(after.digest_with_servers(&after.mcp_servers()), after.digest());
        // A server's tool changed: not hidden.
        let changed: Arc<dyn Tool> = Arc::new(OfServer("mcp__fs__read2", "fs"));
        let other = Catalog::with_optional(vec![(tool("read"), Compile::AtBuild)], vec![changed]).unwrap().0;
        assert_ne!(other.digest_with_servers(&["fs".to_owned()]), before.digest());
    }
}
