//! The result shapes the native tools and `tool_search` declare (their
//! output and metadata schemas) are what they really return: each tool runs
//! for real, from a program and directly, in each of its modes, and every
//! envelope is validated against the declared schemas with `jsonschema`.
//! Then a TypeScript program using the typed results without casts passes
//! `tsc --strict` against `codemode types` and runs (`codemode run`).

use codemode::{Engine, Limits, Program, ToolSpec, receipt::RunStatus};
use serde_json::{Value, json};

use crate::common::{engine_with, workspace};

/// Checks one envelope `{content, metadata, truncated}` of `tool` against
/// its declared schemas; returns what is wrong, if anything.
pub(crate) fn check(specs: &[ToolSpec], tool: &str, envelope: &Value) -> Vec<String> {
    let spec = specs.iter().find(|s| s.name == tool).unwrap_or_else(|| panic!("no tool {tool}"));
    let mut wrong = Vec::new();
    // A small result is not cut at the bound (a window or page that ends
    // before the end is the tool's own cut, said in `tool_cut`).
    let cut = &envelope["truncated"];
    assert!(cut.is_null() || cut["tool_cut"].is_string(), "{tool}: a small result is not truncated: {cut}");
    for (part, schema) in [("content", &spec.output_schema), ("metadata", &spec.metadata_schema)] {
        let schema = schema.as_ref().unwrap_or_else(|| panic!("{tool} declares no {part} schema"));
        let validator = jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{tool} {part}: {e}"));
        for e in validator.iter_errors(&envelope[part]) {
            wrong.push(format!("{tool} {part} at {}: {e}", e.instance_path()));
        }
    }
    wrong
}

#[test]
fn every_native_tool_and_tool_search_returns_what_its_schemas_declare() {
    let ws = workspace();
    std::fs::write(ws.path().join("data.json"), r#"{"a": [1, 2, 3], "b": "caf\u00e9"}"#).unwrap();
    std::fs::write(ws.path().join("notes.md"), "TODO one\nline\nTODO two\n").unwrap();
    let engine: Engine = engine_with(&ws, Limits::default());
    let specs = engine.tool_specs();
    let calls: Vec<(&str, Value)> = vec![
        ("read", json!({"path": "a.txt"})),
        ("read", json!({"path": "a.txt", "offset": 2, "limit": 1})),
        ("read", json!({"path": "a.txt", "offset": 9})),
        ("read", json!({"path": "data.json", "format": "text"})),
        ("read", json!({"path": "data.json", "format": "text", "offset": 3, "limit": 5})),
        ("write", json!({"path": "new/b.txt", "content": "beta\n"})),
        ("write", json!({"path": "new/b.txt", "content": "beta 2\n"})),
        ("edit", json!({"path": "new/b.txt", "edits": [{"old": "beta", "new": "beta"}]})),
        ("file_search", json!({"query": "*.md"})),
        ("file_search", json!({"query": "a", "limit": 1})),
        ("grep_files", json!({"pattern": "TODO"})),
        ("grep_files", json!({"pattern": "TODO", "context": 1, "limit": 1})),
        ("grep_files", json!({"pattern": "TODO", "output": "files"})),
        ("grep_files", json!({"pattern": "TODO", "output": "count", "offset": 0})),
        ("grep_files", json!({"pattern": "nothing here"})),
        ("bash", json!({"command": "echo out; echo err >&2; exit 3"})),
        ("bash", json!({"command": "kill -TERM $$"})),
        ("tool_search", json!({"query": "read a file"})),
        ("tool_search", json!({"query": "^grep", "mode": "regex"})),
    ];
    let mut wrong = Vec::new();
    for (tool, args) in &calls {
        // Directly...
        let out = engine.call_blocking(tool, args);
        let envelope = out.envelope.clone().unwrap_or_else(|| panic!("{tool} {args}: {:?}", out.error));
        wrong.extend(check(&specs, tool, &envelope));
        // ...and from a program.
        let r = engine.execute_blocking(Program::new(format!("return await tools.call({tool:?}, {args});")));
        assert_eq!(r.status, RunStatus::Completed, "{tool} {args}: {:?}", r.error);
        wrong.extend(check(&specs, tool, &r.value));
    }
    assert!(wrong.is_empty(), "results that do not match their schemas:\n{}", wrong.join("\n"));

    // The schemas are not so loose that anything passes.
    let bad =
        json!({"content": [{"path": "a", "line": "1", "text": "x"}], "metadata": null, "truncated": null});
    let refused = check(&specs, "grep_files", &bad);
    assert!(
        refused.iter().any(|e| e.contains("content at /0/line"))
            && refused.iter().any(|e| e.contains("metadata")),
        "a string line and a null metadata are refused: {refused:?}"
    );
}

#[test]
fn a_typescript_program_uses_typed_results_without_casts() {
    let ws = workspace();
    let long: Vec<String> = (0..3000).map(|i| format!("\"k{i}\":{i}")).collect();
    std::fs::write(ws.path().join("wide.json"), format!("{{{}}}", long.join(","))).unwrap();
    std::fs::write(ws.path().join("todo.rs"), "// TODO a\n// TODO b\nfn x() {}\n").unwrap();
    let body = r#"
let text = "";
let offset: number | null = 0;
while (offset !== null) {
  const r = await tools.read({ path: "wide.json", format: "text", offset, limit: 10000 });
  text += r.content;
  offset = r.metadata.next_offset;
}
const parsed: Record<string, number> = JSON.parse(text);
const g = await tools.grep_files({ pattern: "TODO", glob: "*.rs", output: "count" });
const perFile = g.truncated === null ? g.content.map((m) => `${m.path}:${m.count ?? 0}`) : [];
const first = await tools.grep_files({ pattern: "TODO", glob: "*.rs" });
const lines: number[] = first.truncated === null ? first.content.map((m) => m.line) : [];
const files = await tools.file_search({ query: "*.rs" });
const found = await tools.tool_search({ query: "search file contents" });
const names = found.truncated === null ? found.content.tools.map((t) => t.name) : [];
const unlisted = found.truncated === null ? (found.content.unlisted_servers ?? []).map((s) => `${s.name}:${s.state}`) : [];
const started: string[] = found.truncated === null ? found.content.started_servers ?? [] : [];
const viaSearch = await tools.search("search file contents");
const unseen = viaSearch.truncated === null ? (viaSearch.content.unlisted_servers ?? []).length + (viaSearch.content.started_servers ?? []).length : -1;
const total: number | null = g.metadata.matches;
return { keys: Object.keys(parsed).length, perFile, lines, files: files.content, total,
         grep: names.includes("grep_files"), bytes: files.metadata.returned, unlisted, started, unseen };
"#;
    // Type-checked as the body of an async function, against the
    // declarations `codemode types` prints.
    let types = crate::cli::codemode(&["types"], "", ws.path());
    assert!(types.status.success(), "{}", String::from_utf8_lossy(&types.stderr));
    let dts = String::from_utf8(types.stdout).unwrap();
    let program = format!("async function main() {{{body}}}\nvoid main();\n");
    let (ok, output) = crate::typescript::compile(&[("tools.d.ts", &dts), ("prog.ts", &program)]);
    assert!(ok, "tsc --strict rejected the typed program:\n{output}");
    // A wrong use of a typed result is caught.
    let wrong = "async function main() {\n  const r = await tools.grep_files({ pattern: \"x\" });\n  if (r.truncated === null) { const s: string = r.content[0].line; void s; }\n}\n";
    let (ok, output) = crate::typescript::compile(&[("tools.d.ts", &dts), ("wrong.ts", wrong)]);
    assert!(!ok && output.contains("wrong.ts(3,"), "tsc accepted a number as a string:\n{output}");

    // And it runs.
    std::fs::write(ws.path().join("prog.ts"), body).unwrap();
    let out = crate::cli::codemode(&["run", "--json", "prog.ts"], "", ws.path());
    let receipt: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let v = &receipt["value"];
    assert_eq!(v["keys"], json!(3000));
    assert_eq!(v["perFile"], json!(["todo.rs:2"]));
    assert_eq!(v["lines"], json!([1, 2]));
    assert_eq!(v["files"], json!(["todo.rs"]));
    assert_eq!(v["total"], json!(2));
    assert_eq!(v["grep"], json!(true));
    assert_eq!(v["bytes"], json!(1));
    // No MCP servers here: discovery's fields are absent (typed optional).
    assert_eq!((&v["unlisted"], &v["started"], &v["unseen"]), (&json!([]), &json!([]), &json!(0)));
}
