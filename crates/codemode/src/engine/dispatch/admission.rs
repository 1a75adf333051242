//! The admission check: before a program's first call, the calls it names
//! literally (found by `codemode_program` in the parse that checked the
//! program) are compared with the catalog, so that a program that would
//! be refused at its fifth call on a misspelled tool is refused before its
//! first, with every such call's line and column.
//!
//! It brings forward only refusals the gate would make for certain, with
//! the gate's own words ([`gate::unknown_tool`], [`gate::schema_mismatch`]):
//!
//! - a tool no catalog entry and no MCP server can give (a tool of a
//!   server not started or not listed yet, a deferred tool, a hidden or
//!   disabled one is left to the gate, which says what to do);
//! - arguments that cannot fit the input schema whatever the parts not
//!   written out hold ([`Entry::partial_schema_errors`]).
//!
//! Calls the program handles where it makes them (`ToolUse::handled`)
//! and direct-only names (the gate's first step says why) are left to
//! the gate: a refusal there is the program's to catch. The
//! policy's `admission = false` (`--no-admission`) turns the check off.

use codemode_program::{Arguments, ToolUse};
use serde_json::{Map, Value};

use super::Dispatcher;
use crate::catalog::Entry;
use crate::gate;
use crate::receipt::{ErrorKind, RunError};

/// Reasons listed in the error at most; the rest are counted.
const MAX_REASONS: usize = 10;

impl Dispatcher {
    /// The admission check of a program's `uses`: `None` when the
    /// program may run, else the run's error (kind `admission`) listing
    /// each call the gate would refuse, at the first one's position.
    pub(crate) fn admit(&self, uses: &[ToolUse]) -> Option<RunError> {
        if !self.shared.config.policy.admission || uses.is_empty() {
            return None;
        }
        let catalog = self.shared.catalog.load();
        let mut reasons: Vec<(u32, u32, String)> = Vec::new();
        // A direct-only name gets the gate's own refusal, which says so.
        for used in uses.iter().filter(|u| !u.handled && !gate::is_direct_only(&u.tool)) {
            let mode = self.shared.config.policy.mode;
            let reason = match catalog.get(&used.tool) {
                Some(entry) => gate::mode::plan_refusal(mode, entry, &used.tool)
                    .or_else(|| arguments_refusal(entry, &used.tool, &used.arguments)),
                None if self.unlisted(&catalog, &used.tool).is_some() => None,
                // Counted, not shown: no suggestion is looked for.
                None if reasons.len() >= MAX_REASONS => Some(String::new()),
                None => Some(gate::unknown_tool(&catalog, &used.tool)),
            };
            if let Some(reason) = reason {
                reasons.push((used.line, used.column, reason));
            }
        }
        let (line, column, _) = *reasons.first()?;
        let mut e = RunError::new(ErrorKind::Admission, message(&reasons));
        e.line = Some(line);
        e.column = Some(column);
        Some(e)
    }
}

/// Why `tool`'s gate would refuse `arguments` whatever their unwritten
/// parts hold, if it would.
fn arguments_refusal(entry: &Entry, tool: &str, arguments: &Arguments) -> Option<String> {
    let Arguments::Object(object) = arguments else { return None };
    let mut args = Map::with_capacity(object.keys.len());
    for (key, value) in &object.keys {
        args.insert(key.clone(), value.clone().unwrap_or(Value::Null));
    }
    let known = |key: &str| object.keys.iter().any(|(k, v)| k == key && v.is_some());
    let errors = entry.partial_schema_errors(&Value::Object(args), &known, object.open);
    (!errors.is_empty()).then(|| gate::schema_mismatch(tool, &errors))
}

/// The error's message: how many calls, then each with its place.
fn message(reasons: &[(u32, u32, String)]) -> String {
    let calls =
        if reasons.len() == 1 { "1 tool call".to_owned() } else { format!("{} tool calls", reasons.len()) };
    let mut out = format!(
        "the program was not run: the admission check found {calls} the gate would refuse, before its first call \
         (fix them and run it again; whoever runs codemode can turn the check off with --no-admission or \
         `admission = false` in codemode.toml):"
    );
    for (line, column, reason) in reasons.iter().take(MAX_REASONS) {
        out.push_str(&format!("\n  line {line}, column {column}: {reason}"));
    }
    if reasons.len() > MAX_REASONS {
        out.push_str(&format!("\n  and {} more", reasons.len() - MAX_REASONS));
    }
    out
}

/// The check on `catalog` alone (no MCP servers), for tests.
#[cfg(test)]
fn reasons_of(catalog: &crate::catalog::Catalog, uses: &[ToolUse]) -> Vec<String> {
    uses.iter()
        .filter(|u| !u.handled && !gate::is_direct_only(&u.tool))
        .filter_map(|u| match catalog.get(&u.tool) {
            Some(entry) => arguments_refusal(entry, &u.tool, &u.arguments),
            None => Some(gate::unknown_tool(catalog, &u.tool)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use codemode_program::{Program, normalise};
    use std::sync::Arc;

    fn catalog() -> crate::catalog::Catalog {
        let tools: Vec<Arc<dyn crate::catalog::Tool>> = crate::tools::native();
        crate::catalog::Catalog::new(tools).unwrap()
    }

    fn reasons(source: &str) -> Vec<String> {
        reasons_of(&catalog(), &normalise(&Program::new(source)).unwrap().tool_uses)
    }

    #[test]
    fn unknown_tools_get_the_gates_suggestion() {
        let r = reasons("await tools.read({path: 'a'}); await tools.raed({path: 'a'})");
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].starts_with("unknown tool `raed`: did you mean `read`"), "{r:?}");
    }

    #[test]
    fn literal_arguments_are_checked_against_the_schema() {
        let r = reasons("tools.read({path: 5})");
        assert!(r[0].contains("input schema of `read`") && r[0].contains("/path"), "{r:?}");
        let r = reasons("tools.read({})");
        assert!(r[0].contains("\"path\" is a required property"), "{r:?}");
        let r = reasons("tools.read({path: 'a', pathh: 'b'})");
        assert!(r[0].contains("pathh"), "{r:?}");
    }

    #[test]
    fn what_is_not_written_out_is_not_checked() {
        for source in [
            "const p = 5; tools.read({path: p})",
            "const o = {path: 'a'}; tools.read({...o})",
            "const o = {path: 'a'}; tools.read(o)",
            "const k = 'path'; tools.read({[k]: 'a'})",
            "const n = 'raed'; tools[n]({})",
            "try { await tools.raed({}) } catch (e) { }",
            "await tools.read({path: 5}).catch(() => null)",
            "await tools.execute_tools({code: 1})",
        ] {
            assert!(reasons(source).is_empty(), "{source}: {:?}", reasons(source));
        }
        // An unknown key is there whatever a spread adds.
        assert_eq!(reasons("const o = {}; tools.read({...o, pathh: 1})").len(), 1);
    }

    #[test]
    fn the_message_lists_every_reason_with_its_place() {
        let reasons: Vec<(u32, u32, String)> = (1..=12).map(|i| (i, 3, format!("reason {i}"))).collect();
        let m = message(&reasons);
        assert!(m.contains("found 12 tool calls") && m.contains("line 10, column 3: reason 10"), "{m}");
        assert!(!m.contains("reason 11") && m.ends_with("and 2 more"), "{m}");
    }
}
