//! The estimate's unit tests: the texts it refuses and the programs it
//! lets through.

use super::*;

#[test]
fn the_fuzzers_find_and_its_family_are_refused_at_75_bytes() {
    for unit in ["a<({[", "({[a<", "{[a<(", "a<{["] {
        let e = check(&unit.repeat(15)).expect_err(unit);
        assert!(e.open_angles >= 6, "{unit}: {e:?}");
    }
}

#[test]
fn ordinary_generics_comparisons_and_text_are_far_below_the_bound() {
    let program = "const m = new Map<string, Array<Promise<Set<number>>>>();\n\
                   for (let i = 0; i < n && j < (k < 3 ? 1 : 2); i++) { if (a < b) x = y >= z; }\n\
                   const html = \"<div><span><b><i>\" + `<p>${a < b}</p>` + '<<<<';\n\
                   // a comment with <<< and < < <\n\
                   /* and a block <a<b<c */ const f = <T,>(x: T): T => x;\n";
    assert_eq!(check(&program.repeat(300)), Ok(()));
}

#[test]
fn a_line_comment_ends_at_every_line_terminator() {
    // The fuzzer's find: a `//` comment ended by `\r` alone hid the
    // rest of the text from the estimate.
    for end in ["\n", "\r", "\r\n", "\u{2028}", "\u{2029}"] {
        let text = format!("// a comment{end}{}", "a<({[".repeat(15));
        assert!(check(&text).is_err(), "{end:?}");
    }
    // A string may hold U+2028 and U+2029, not `\n` or `\r`.
    for end in ["\n", "\r", "\r\n"] {
        let string = format!("'an open string{end}{}", "a<({[".repeat(15));
        assert!(check(&string).is_err(), "{end:?}");
    }
}

#[test]
fn a_template_with_code_inside_is_scanned_as_code() {
    // The `<` inside `${...}` are code; the ones in the text are not.
    let inside = format!("`{}`", "${a<({[".repeat(15));
    assert!(check(&inside).is_err());
    let text_only = format!("`{}`", "a<({[".repeat(15));
    assert_eq!(check(&text_only), Ok(()));
}

#[test]
fn a_semicolon_or_a_closing_bracket_ends_the_open_angles_of_its_level() {
    assert_eq!(check(&"a < b;".repeat(10_000)), Ok(()));
    // Code without semicolons: an assignment or a statement's keyword
    // ends them too.
    assert_eq!(check(&"const ok = a < b\nx = c < d\nif (e) f()\n".repeat(3_000)), Ok(()));
    // But not a line break: type arguments may span lines.
    assert!(check(&"a<(\n{[\n".repeat(15)).is_err());
    assert_eq!(check(&"(a < b)".repeat(10_000)), Ok(()));
    assert_eq!(check(&"f(a < b, c < d)\n".repeat(2_000)), Ok(()));
}

#[test]
fn nested_parentheses_tried_as_arrow_parameters_are_refused() {
    // Each `(a=` is tried as an arrow function's parameters, fails at
    // the end of its text, and is read again: quadratic (8 KB took 1 s
    // and 260 MB; 32 KB, 19 s and 4 GB), in both parsers.
    let nested = format!("{}1{}", "(a=".repeat(2_000), ")".repeat(2_000));
    for dialect in [Dialect::JavaScript, Dialect::TypeScript] {
        let e = check_as(&nested, dialect).expect_err("nested tries");
        assert!(e.arrow_tries > 100 && e.open_angles == 0, "{e:?}");
    }
    // 250 tries around a long expression: 61 KB took 1.5 s and 1.3 GB.
    let wide = format!("{}{}{}", "(a=".repeat(250), ["1"; 30_000].join("+"), ")".repeat(250));
    assert!(check_as(&wide, Dialect::JavaScript).is_err());
    // TypeScript: `(x): T =>` in a conditional's first branch, its body
    // read and rewound (18 KB took 3.3 s and 1.7 GB).
    let conditional = "a?(x):T=>".repeat(2_000) + "1";
    assert!(check_as(&conditional, Dialect::TypeScript).is_err());
    assert_eq!(check_as(&conditional, Dialect::JavaScript), Ok(()));
}

#[test]
fn calls_callbacks_and_conditionals_are_far_below_the_bound() {
    let program = "describe(name, async () => {\n\
                   const rows = await tools.call('db', { sql: q }).then((r) => r.rows)\n\
                   for (const { id, tags } of rows.filter(({ n }) => n > 0)) {\n\
                   if (id < 10) out.push(id ? (tags ?? []).map((t, i) => [t, i]) : null)\n\
                   const f = (x: number, ...rest: T[]): string => x ? g(x) : h(x)\n\
                   const k = a ? (y): number => y : (z) => z\n\
                   }\n\
                   })\n";
    for dialect in [Dialect::JavaScript, Dialect::TypeScript] {
        assert_eq!(check_as(&program.repeat(200), dialect), Ok(()));
        // Nested twenty deep, the whole program inside.
        let deep = format!("{}{}{}", "f(async (a) => {\n".repeat(20), program.repeat(100), "})\n".repeat(20));
        assert_eq!(check_as(&deep, dialect), Ok(()));
    }
}

/// The 75-byte find, to hide behind what the estimate might skip.
fn attack() -> String {
    "a<({[".repeat(15)
}

#[test]
fn a_quote_backquote_or_slash_inside_a_regular_expression_hides_nothing() {
    // Each regular expression holds what would start a string, template
    // or comment if it were read as code; the attack after it on the same
    // line (or, for the template, anywhere) must still be counted.
    let regexes = [
        r#"if (c) /"/.test(s); "#,
        r#"while (c) /'/.exec(s); "#,
        "for (;;) /`/.test(s); ",
        "x = /`/; ",
        r"x = /\//; ",
        "x = /[/*]/; ",
        "x = /[//]/; ",
        r#"function f() {} /"/.test(s); "#,
        r#"{} /"/.test(s); "#,
        r#"try {} finally {} /"/.test(s); "#,
        r#"return typeof /"/; "#,
        r#"x = a ? /"/ : /'/; "#,
        r#"f(/"/, /'/); "#,
    ];
    for regex in regexes {
        let text = format!("{regex}{}`", attack());
        assert!(check(&text).is_err(), "{regex}");
        assert!(
            check_as(&format!("{regex}{}`", "(a=".repeat(3_000)), Dialect::JavaScript).is_err(),
            "{regex}"
        );
    }
    // TypeScript's declarations whose `}` ends a statement.
    for regex in
        [r#"interface A {} /"/.test(s); "#, r#"enum E { A } /"/.test(s); "#, r#"class A {} /"/.test(s); "#]
    {
        assert!(check(&format!("{regex}{}", attack())).is_err(), "{regex}");
    }
}

#[test]
fn a_division_is_not_read_as_a_regular_expression_that_hides_code() {
    // Read as a regular expression, the text between the two `/` would be
    // skipped; it is code, and a string after the first `/` is a string.
    let divisions = [
        "x = (a) / b / 1; ",
        "x = a / b / 1; ",
        "x = a.if / b / 1; ",
        "x = a[0] / b / 1; ",
        "x = {} / b / 1; ",
        "x = function () {} / b / 1; ",
        "x = class {} / b / 1; ",
        "x = a++ / b / 1; ",
        "x = a! / b / 1; ",
        "x = `t` / b / 1; ",
    ];
    for division in divisions {
        let hidden = division.replacen("b", &attack(), 1);
        assert!(check(&hidden).is_err(), "{division}");
        let quoted = division.replacen("b", &format!("\"/\" + {}", attack()), 1);
        assert!(check(&quoted).is_err(), "{division}");
    }
    // A function expression's return type does not make its body a block.
    assert!(check(&format!("x = function (): {{ a: 1 }} {{}} / {} / 1", attack())).is_err());
}

#[test]
fn a_slash_after_type_arguments_is_followed_both_ways() {
    // `a<b>/.../` divides when `<b>` are type arguments (the parser takes
    // them when a binary operator follows); `a < 1 + 2 > /"/` compares
    // with a regular expression.
    assert!(check(&format!("x = a<b>/ {} /1", attack())).is_err());
    assert!(check(&format!("x = a < 1 + 2 > /\"/; {}", attack())).is_err());
    assert_eq!(check("x = a<b>/c/ 1; y = d < 1 + 2 > /\"/.test(s)"), Ok(()));
    // Too many such `/` to follow every reading: refused, saying why.
    let many = "x = a<b>/c/ d<e>/f/ 1;\n".repeat(20);
    let e = check(&many).expect_err("many readings");
    assert!(e.ambiguous, "{e:?}");
}

#[test]
fn a_string_continued_on_the_next_line_stays_a_string() {
    // `\` before `\r\n` continues the string; ending it at the `\n` would
    // read its text as code and its closing quote as an opening one.
    let text = format!("x = \"a\\\r\n\" + {}", attack());
    assert!(check(&text).is_err());
}

#[test]
fn ordinary_regular_expressions_cost_their_tokens() {
    let program = "const re = /^(?<name>[a-z]+)\\/<[^>]*>$/giu;\n\
                   if (/\"'`/.test(s)) x = s.replace(/[/*]+/g, '') / 2;\n\
                   const parts = line.split(/\\s+/).map((p) => p.trim());\n\
                   return count / total > 0.5 ? /yes/ : /no/;\n";
    for dialect in [Dialect::JavaScript, Dialect::TypeScript] {
        assert_eq!(check_as(&program.repeat(500), dialect), Ok(()));
    }
}
