//! Program normalisation end to end: TypeScript, fences, `export default`,
//! trailing expressions, imports, syntax errors, positions, and programs
//! that try to leave the wrapper. Every program runs on the real engine with
//! the real native tools over a temp workspace (`a.txt` has three lines).

use codemode::{receipt::CallStatus, receipt::ErrorKind, receipt::RunStatus};
use serde_json::json;

use crate::common::run;

/// Runs `src` and expects it to complete with `value` after `calls` calls
/// that all succeeded.
fn completes(src: &str, value: serde_json::Value, calls: usize) {
    let r = run(src);
    assert_eq!(r.status, RunStatus::Completed, "{src}\n{:?}", r.error);
    assert_eq!(r.value, value, "{src}");
    assert_eq!(r.calls.len(), calls, "{src}");
    assert!(r.calls.iter().all(|c| c.status == CallStatus::Ok), "{src}");
}

/// Runs `src` and expects a syntax error at (`line`, `column`) with no call.
fn syntax_error_at(src: &str, line: u32, column: u32) -> String {
    let r = run(src);
    assert_eq!(r.status, RunStatus::Failed, "{src}");
    let e = r.error.expect("an error");
    assert_eq!(e.kind, ErrorKind::Syntax, "{src}: {e:?}");
    assert_eq!((e.line, e.column), (Some(line), Some(column)), "{src}: {e:?}");
    assert!(r.calls.is_empty());
    e.message
}

#[test]
fn typescript_with_types_generics_and_assertions_runs() {
    let src = r#"
interface ReadResult { content: string; metadata: { total_lines: number } }
type Pair<A, B> = [A, B];
function first<T>(items: T[]): T | undefined { return items[0]; }
const r = (await tools.read({ path: "a.txt" })) as ReadResult;
const lines: string[] = r.content.split("\n").filter((l) => l.trim() !== "");
const pair: Pair<number, string> = [r.metadata.total_lines, first(lines)!];
const config = { retries: 2 } satisfies { retries: number };
const maybe: { deep?: { value?: number } } = {};
return { pair, retries: config.retries, deep: maybe.deep?.value ?? "none" };
"#;
    let r = run(src);
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value["pair"][0], 3);
    assert!(r.value["pair"][1].as_str().unwrap().contains("alpha"), "{}", r.value);
    assert_eq!(r.value["retries"], 2);
    assert_eq!(r.value["deep"], "none");
    assert_eq!(r.calls.len(), 1);
}

#[test]
fn enums_namespaces_and_parameter_properties_are_transformed() {
    let src = r#"
enum Level { Low = 1, High = 10 }
const enum Mode { Read = "r", Write = "w" }
enum Direction { Up, Down }
namespace Paths { export const file = "a.txt"; export function of(n: string): string { return n; } }
class Reader {
  constructor(private readonly path: string, public count: number = 0) {}
  async lines(): Promise<number> {
    const r = await tools.read({ path: this.path });
    this.count++;
    return r.metadata.total_lines;
  }
}
const reader = new Reader(Paths.of(Paths.file));
const n = await reader.lines();
export default { n, count: reader.count, high: Level.High, mode: Mode.Write, down: Direction.Down, name: Direction[0] };
"#;
    completes(src, json!({"n": 3, "count": 1, "high": 10, "mode": "w", "down": 1, "name": "Up"}), 1);
}

#[test]
fn type_only_imports_are_dropped() {
    let src = "import type { Foo } from \"./types\";\nimport { type Bar } from \"./bar\";\nconst x: Foo = 1 as Foo;\nreturn x;";
    completes(src, json!(1), 0);
}

#[test]
fn a_type_error_is_not_an_error() {
    completes(
        "const x: number = \"a\" as any as number;\nconst y: number = \"b\";\nreturn [x, y];",
        json!(["a", "b"]),
        0,
    );
}

#[test]
fn a_runtime_throw_in_typescript_reports_the_users_line() {
    let ts = "interface Options {\n  path: string;\n  limit?: number;\n}\ntype Lines = Array<\n  string\n>;\nconst o: Options = { path: \"a.txt\" };\nconst r = await tools.read(o);\n  throw new Error(`stop after ${r.metadata.total_lines} lines`);\n";
    // The same program without types, on the same lines and columns.
    let js = "\n\n\n\n\n\n\nconst o          = { path: \"a.txt\" };\nconst r = await tools.read(o);\n  throw new Error(`stop after ${r.metadata.total_lines} lines`);\n";
    let (r, plain) = (run(ts), run(js));
    assert_eq!(r.status, RunStatus::Failed);
    let (e, plain) = (r.error.unwrap(), plain.error.unwrap());
    assert_eq!(e.kind, ErrorKind::Exception);
    assert!(e.message.contains("stop after 3 lines"), "{e:?}");
    assert_eq!(e.line, Some(10), "{e:?}");
    assert_eq!((e.line, e.column), (plain.line, plain.column), "{e:?} {plain:?}");
    let stack = e.stack.unwrap_or_default();
    assert!(stack.contains("program.js:10:"), "{stack}");
    assert_eq!(r.calls.len(), 1);
}

#[test]
fn a_runtime_throw_in_javascript_reports_the_users_column() {
    // Line 1 has the wrapper's prefix, the last line a `return ` inserted
    // before the trailing expression: neither shows. The same throw on its
    // own line 2 gives the column QuickJS reports without either.
    let on_line_1 = run("const a = 1;    [a].map((x) => { throw new Error('no') })").error.unwrap();
    let on_line_2 = run("const a = 1;\n    [a].map((x) => { throw new Error('no') }); 0").error.unwrap();
    assert_eq!(on_line_1.line, Some(1), "{on_line_1:?}");
    assert_eq!(on_line_2.line, Some(2), "{on_line_2:?}");
    assert_eq!(on_line_1.column.unwrap(), on_line_2.column.unwrap() + 12, "{on_line_1:?} {on_line_2:?}");
    let trailing = run("const a = 1;\n[a].map((x) => { throw new Error('no') })").error.unwrap();
    assert_eq!(trailing.column.unwrap() + 4, on_line_2.column.unwrap(), "{trailing:?} {on_line_2:?}");
    assert!(trailing.stack.unwrap().contains(&format!("program.js:2:{}", trailing.column.unwrap())));
}

#[test]
fn syntax_errors_report_the_users_line_and_column() {
    syntax_error_at("const a = 1;\nconst b = a +;\nreturn b;", 2, 14);
    // TypeScript: the TypeScript parser's error, not JavaScript's at `:`.
    syntax_error_at("const a: number = 1;\nconst s: string = 'x';\nlet c = (a + ;", 3, 14);
    // A fence keeps lines: the error is on the user's line 3.
    syntax_error_at("```ts\nconst a: number = 1;\nconst = 2;\n```", 3, 7);
}

#[test]
fn fences_are_stripped() {
    for fence in ["```", "```js", "```javascript", "```ts", "```typescript"] {
        let src = format!(
            "{fence}\nconst r = await tools.read({{path: 'a.txt'}});\nreturn r.metadata.total_lines;\n```\n"
        );
        completes(&src, json!(3), 1);
    }
}

#[test]
fn export_default_and_trailing_expressions_give_the_value() {
    completes("export default 40 + 2", json!(42), 0);
    completes(
        "const r = await tools.read({path: 'a.txt'});\nexport default\n  r.metadata.total_lines;",
        json!(3),
        1,
    );
    completes("const a = 2;\na * 21", json!(42), 0);
    completes("(await tools.read({path: 'a.txt'})).metadata.total_lines", json!(3), 1);
    completes("await tools.read({path: 'a.txt'}).then((r) => r.metadata.total_lines)", json!(3), 1);
    completes("({a: 1})", json!({"a": 1}), 0);
    completes("export const x: number = 5;\nx * 2", json!(10), 0);
    // A last statement that is a declaration or `if` gives no value.
    completes("const a = 1;", json!(null), 0);
    completes("let a = 1;\nif (a) { a + 1 }", json!(null), 0);
    completes("function f() { return 1 }", json!(null), 0);
}

#[test]
fn imports_say_there_is_no_module_loader() {
    let m = syntax_error_at("const a = 1;\nimport { readFile } from \"node:fs\";\nreturn a;", 2, 1);
    assert!(m.contains("no module loader") && m.contains("tools.call"), "{m}");
    let m = syntax_error_at("import x from './x.ts';\nconst y: number = x;", 1, 1);
    assert!(m.contains("no module loader"), "{m}");
    let m = syntax_error_at("const a = 1;\nexport { a };", 2, 1);
    assert!(m.contains("module system"), "{m}");
}

/// Regression: the wrapper used to be text, and a program with unbalanced
/// braces could close it and run (even end `completed`) outside it.
#[test]
fn programs_cannot_break_out_of_the_wrapper() {
    syntax_error_at("throw x })(); (async()=>{ return 1", 1, 9);
    for src in [
        "})(); (async () => { return 1",
        "return 1 })(); (async () => {",
        "}, 1)(); ((async () => { return 2",
        "})((async () => { return 3",
        "return 1\n})();\nglobalThis.escaped = 1;\n(async () => {\nreturn 2",
        "const x: number = 1; })(); (async () => { return x",
    ] {
        let r = run(src);
        assert_eq!(r.status, RunStatus::Failed, "{src}: {:?}", r.value);
        assert_eq!(r.error.as_ref().map(|e| e.kind), Some(ErrorKind::Syntax), "{src}: {:?}", r.error);
    }
}

#[test]
fn javascript_stays_sloppy_and_typescript_is_strict() {
    completes("undeclared = 5;\nreturn undeclared;", json!(5), 0);
    let r = run("```ts\nundeclared = 5;\nreturn undeclared;\n```");
    assert_eq!(r.error.map(|e| (e.kind, e.line)), Some((ErrorKind::Exception, Some(2))));
}

#[test]
fn a_fenced_block_inside_prose_or_left_open_runs() {
    let prose =
        "Sure! Here is the program:\n```ts\nconst n: number = 2;\nreturn n * 21;\n```\nIt returns 42.\n";
    let r = run(prose);
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(42));
    let r = run("```js\nreturn 'open fence'");
    assert_eq!(r.value, json!("open fence"));
    // Positions stay the user's: line 3 of the text is the throw.
    let r = run("Here it is:\n```js\nthrow new Error('x');\n```\n");
    assert_eq!(r.error.unwrap().line, Some(3));
    // A text that is neither code nor holds a fenced block keeps its error.
    let r = run("This is just prose, no code.");
    assert_eq!(r.error.unwrap().kind, ErrorKind::Syntax);
}

#[test]
fn decorators_and_dynamic_imports_say_they_are_not_supported() {
    let r = run("@log\nclass A {}\nreturn 1");
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert!(e.message.contains("decorators are not supported"), "{}", e.message);
    let r = run("const m = await import('fs');\nreturn 1");
    let e = r.error.unwrap();
    assert!(e.message.contains("no module loader"), "{}", e.message);
}
