//! Unit tests of normalisation; programs that run are in tests/all.

use super::*;

fn script(src: &str) -> String {
    normalise(&Program::new(src)).unwrap_or_else(|e| panic!("{src:?}: {e:?}")).script
}

fn syntax(src: &str) -> RunError {
    let e = normalise(&Program::new(src)).expect_err(src);
    assert_eq!(e.kind, ErrorKind::Syntax, "{src:?}");
    e
}

#[test]
fn javascript_runs_as_written_inside_the_wrapper() {
    let src = "const a = 1;\nreturn a; // trailing comment";
    assert_eq!(script(src), format!("{WRAP_PREFIX}{src}{WRAP_SUFFIX}"));
}

#[test]
fn a_trailing_expression_is_returned() {
    assert_eq!(
        script("const a = 1;\na + 1"),
        format!("{WRAP_PREFIX}const a = 1;\nreturn a + 1{WRAP_SUFFIX}")
    );
    assert_eq!(script("({a: 1})"), format!("{WRAP_PREFIX}return ({{a: 1}}){WRAP_SUFFIX}"));
    // Declarations and `if` give no value.
    for src in ["const a = 1", "if (x) { 1 }", "function f() { return 1 }"] {
        assert_eq!(script(src), format!("{WRAP_PREFIX}{src}{WRAP_SUFFIX}"), "{src}");
    }
}

#[test]
fn breaking_out_of_the_wrapper_is_a_syntax_error() {
    for src in [
        "throw x })(); (async()=>{ return 1",
        "})(); (async () => {",
        "}, 1)(); ((async () => {",
        "})((async () => {",
        "return 1 })(); x = (() => {",
        "}\n})();\n(async () => {\nreturn 2",
    ] {
        let e = syntax(src);
        assert!(e.line.is_some() && e.column.is_some(), "{src:?}: {e:?}");
    }
    let e = syntax("throw x })(); (async()=>{ return 1");
    assert_eq!((e.line, e.column), (Some(1), Some(9)), "{e:?}");
}

#[test]
fn javascript_syntax_errors_have_the_users_position() {
    let e = syntax("const a = 1;\nconst b = ;\n");
    assert_eq!((e.line, e.column), (Some(2), Some(11)), "{e:?}");
    let e = syntax("let x = (1 + ;");
    assert_eq!(e.line, Some(1), "{e:?}");
    assert_eq!(e.column, Some(14), "{e:?}");
}

#[test]
fn typescript_syntax_errors_have_the_users_position() {
    let e = syntax("interface A { x: number }\nconst a: A = { x: 1 };\nconst b: = 2;\n");
    assert_eq!((e.line, e.column), (Some(3), Some(10)), "{e:?}");
}

#[test]
fn export_default_keeps_columns() {
    assert_eq!(script("export default 1 + 2"), format!("{WRAP_PREFIX}return         1 + 2{WRAP_SUFFIX}"));
}

#[test]
fn imports_are_refused_with_a_clear_message() {
    let e = syntax("const a = 1;\nimport fs from 'node:fs';\nreturn fs;");
    assert!(e.message.contains("no module loader") && e.message.contains("tools.call"), "{e:?}");
    assert_eq!((e.line, e.column), (Some(2), Some(1)));
}

#[test]
fn export_lists_are_refused() {
    let e = syntax("const a = 1;\nexport { a };");
    assert!(e.message.contains("module system"), "{e:?}");
}

#[test]
fn typescript_is_transformed_with_a_source_map() {
    let n =
        normalise(&Program::new("const a: number = 1;\nenum E { A = 2 }\nthrow new Error(String(a + E.A));"))
            .unwrap();
    assert!(n.script.starts_with(STRICT_WRAP_PREFIX), "{}", n.script);
    assert!(!n.script.contains(": number"), "{}", n.script);
    assert!(n.positions.mapped.is_some());
}

#[test]
fn fences_and_names_choose_typescript() {
    let n = normalise(&Program::new("```ts\nconst a = 1;\nreturn a;\n```")).unwrap();
    assert!(n.script.starts_with(STRICT_WRAP_PREFIX));
    let n = normalise(&Program::named("x.ts", "return 1")).unwrap();
    assert!(n.script.starts_with(STRICT_WRAP_PREFIX));
    let n = normalise(&Program::new("```js\nreturn 1\n```")).unwrap();
    assert_eq!(n.script, format!("{WRAP_PREFIX}\nreturn 1\n{WRAP_SUFFIX}"));
}

#[test]
fn names_are_sanitised() {
    assert_eq!(Program::named("my prog(1).js", "").name(), "my_prog_1_.js");
    assert_eq!(Program::named("", "").name(), "program.js");
}

/// Texts that make oxc's TypeScript parser backtrack, each repetition
/// multiplying its work (docs/FUZZING.md): `a<({[` x 15 took 4.2 GB.
const BACKTRACKING_UNITS: [&str; 4] = ["a<({[", "({[a<", "{[a<(", "a<{["];

#[test]
fn a_text_that_makes_the_parser_backtrack_is_a_limit_error_before_it_parses() {
    for unit in BACKTRACKING_UNITS {
        for name in ["program.js", "program.ts", "program.md"] {
            // 75 bytes (the fuzzer's find), on lines of their own, fenced,
            // and the whole source limit.
            for source in [
                unit.repeat(15),
                format!("{unit}\n").repeat(15),
                format!("```ts\n{}\n```", unit.repeat(15)),
                unit.repeat((64 << 10) / unit.len()),
            ] {
                let e = normalise(&Program::named(name, source.clone())).expect_err(&source[..20]);
                assert_eq!(e.kind, ErrorKind::Limit, "{unit} {name}: {e:?}");
                assert!(
                    e.message.contains(" open at once here") && e.message.contains("2000000"),
                    "{}",
                    e.message
                );
                assert!(e.line.is_some() && e.column.is_some(), "{e:?}");
            }
        }
    }
    // As JavaScript, the message also gives JavaScript's error.
    let e = normalise(&Program::named("p.js", "a<({[".repeat(15))).unwrap_err();
    assert!(e.message.contains("as JavaScript it does not parse either"), "{}", e.message);
}

#[test]
fn a_large_ordinary_typescript_program_is_within_the_bound() {
    let function = "function f_N(x: { a: Array<number>; b?: string }): Promise<number[]> {\n  \
                    const m = new Map<string, [number, string]>()\n  \
                    if (x.a.length < 3 && m.size > 0) m.clear()\n  \
                    return Promise.resolve(x.a.filter((v: number) => v < 3 && m.size > 0));\n}\n";
    let mut source = String::new();
    for n in 0.. {
        let next = function.replace('N', &n.to_string());
        if source.len() + next.len() > 64 << 10 {
            break;
        }
        source.push_str(&next);
    }
    let normalised = normalise(&Program::named("big.ts", source)).expect("within the bound");
    assert!(normalised.script.contains("function f_0(x)"));
}

#[test]
fn nesting_without_brackets_is_parsed_on_the_large_stack() {
    // Each of these overflowed an 8 MiB stack (and aborted the process)
    // when parsed on the calling thread; this test's thread has 2 MiB.
    for source in [
        format!("{}1", "x=>".repeat(12_000)),
        format!("{}1", "a=".repeat(16_000)),
        format!("{}1", "a?b:".repeat(16_000)),
        format!("{}b", "a:".repeat(20_000)),
    ] {
        for name in ["p.js", "p.ts"] {
            let outcome = normalise(&Program::named(name, source.clone())).map(|_| ());
            assert!(
                outcome.as_ref().map_or_else(|e| e.kind != ErrorKind::Internal, |()| true),
                "{name} {}: {outcome:?}",
                &source[..8]
            );
        }
    }
}
