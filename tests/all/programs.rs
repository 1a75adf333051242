//! What programs can and cannot do: values, console, the tools object,
//! errors, isolation.

use codemode::{
    Limits, Program, receipt::CallStatus, receipt::Decision, receipt::ErrorKind, receipt::RunStatus,
};
use serde_json::json;

use crate::common::{engine_with, run, workspace};

#[test]
fn every_json_type_comes_back_as_the_value() {
    let cases = [
        ("return 42;", json!(42)),
        ("return -1.5;", json!(-1.5)),
        ("return 'text';", json!("text")),
        ("return true;", json!(true)),
        ("return false;", json!(false)),
        ("return null;", json!(null)),
        ("return [1, 'two', [3]];", json!([1, "two", [3]])),
        ("return {a: {b: [null, {c: 'd'}]}};", json!({"a": {"b": [null, {"c": "d"}]}})),
        ("return 'é😀';", json!("é😀")),
    ];
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    for (src, want) in cases {
        let r = engine.execute_blocking(Program::new(src));
        assert_eq!(r.status, RunStatus::Completed, "{src}: {:?}", r.error);
        assert_eq!(r.value, want, "{src}");
    }
}

#[test]
fn undefined_and_no_return_become_null() {
    // (`return () => 1` is an entry point: it gives 1, see
    // a_function_value_is_the_entry_point_and_is_called.)
    // (An empty program is refused: an_empty_program_is_refused_wherever_it_comes_from.)
    for src in ["return undefined;", "return () => undefined;", "let a = 1 + 1;"] {
        let r = run(src);
        assert_eq!(r.status, RunStatus::Completed, "{src}");
        assert_eq!(r.value, json!(null), "{src}");
    }
    // A trailing expression is the value (programs_typescript.rs has more).
    assert_eq!(run("1 + 1;").value, json!(2));
}

#[test]
fn top_level_await_and_return_work() {
    let r = run("const r = await tools.echo({x: 1}); if (r.content.x === 1) return 'yes'; return 'no';");
    assert_eq!(r.value, json!("yes"));
}

#[test]
fn a_result_is_the_same_plain_envelope_whether_it_came_at_once_or_later() {
    // A result with JSON content, no metadata and nothing cut reaches the
    // prelude as the content's JSON alone, and the prelude makes the
    // envelope: it must be what JSON.parse of the whole envelope made
    // (keys, order, prototype, writable), for a call answered at once
    // (echo) and for one answered later (sleep), whatever keys the content
    // has.
    let src = r#"
        const shape = (r) => [JSON.stringify(r), Object.getPrototypeOf(r) === Object.prototype,
            Object.getOwnPropertyNames(r).join(), Object.isFrozen(r),
            Object.getOwnPropertyDescriptor(r, "content").writable];
        const now = await tools.echo({a: 1, metadata: null, truncated: null});
        const later = await tools.sleep({ms: 1});
        const empty = await tools.echo();
        const proto = await tools.echo(JSON.parse('{"__proto__": {"x": 1}}'));
        return [shape(now), shape(later), shape(empty),
            Object.hasOwn(proto.content, "__proto__"), Object.getPrototypeOf(proto.content) === Object.prototype];
    "#;
    let r = run(src);
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let plain = |content: &str| {
        json!([
            format!(r#"{{"content":{content},"metadata":null,"truncated":null}}"#),
            true,
            "content,metadata,truncated",
            false,
            true
        ])
    };
    assert_eq!(
        r.value,
        json!([
            plain(r#"{"a":1,"metadata":null,"truncated":null}"#),
            plain(r#"{"slept":1}"#),
            plain("{}"),
            true,
            true
        ])
    );
}

#[test]
fn setters_on_array_prototype_do_not_change_what_calls_answer() {
    // The host hands some answers over as small arrays; their elements are
    // its own properties, so a setter a program put on Array.prototype
    // neither sees nor replaces them.
    let src = r#"
        for (const i of ["0", "1"]) {
            Object.defineProperty(Array.prototype, i, {
                configurable: true,
                get() { return "fake"; },
                set(v) {},
            });
        }
        const text = await tools.read({path: "a.txt"});
        const found = await tools.file_search({query: "guide", limit: 1});
        let failed;
        try { await tools.fail({message: "no"}); } catch (e) { failed = [e.name, e.message]; }
        return [text.content, Array.isArray(found.content), typeof found.metadata, failed];
    "#;
    let r = run(src);
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value,
        json!([
            "     1\talpha\n     2\tbeta\n     3\tgamma\n",
            true,
            "object",
            ["ToolError", "fail (call 3): no"]
        ])
    );
}

#[test]
fn console_levels_are_captured_in_order() {
    let r = run("console.log('one', 1, {a: [1]}); console.info('two'); console.warn('three'); \
         console.error(new TypeError('four')); console.debug(null, undefined, 5n, Symbol('s'));");
    let got: Vec<(&str, &str)> = r.logs.iter().map(|l| (l.level.as_str(), l.text.as_str())).collect();
    assert_eq!(got[0], ("log", "one 1 {\"a\":[1]}"));
    assert_eq!(got[1], ("info", "two"));
    assert_eq!(got[2], ("warn", "three"));
    assert_eq!(got[3].0, "error");
    assert!(got[3].1.starts_with("TypeError: four"), "{:?}", got[3]);
    assert_eq!(got[4], ("debug", "null undefined 5n Symbol(s)"));
    assert_eq!(r.logs_dropped, 0);
}

#[test]
fn the_tools_proxy_is_sugar_for_tools_call() {
    let r = run("const a = await tools.echo({v: 1}); const b = await tools.call('echo', {v: 1}); \
         return [a, b, JSON.stringify(a) === JSON.stringify(b)];");
    assert_eq!(r.value[0], json!({"content": {"v": 1}, "metadata": null, "truncated": null}));
    assert_eq!(r.value[2], json!(true));
    assert_eq!(r.calls.len(), 2);
    assert!(r.calls.iter().all(|c| c.tool == "echo" && c.status == CallStatus::Ok));
}

#[test]
fn tools_is_frozen_and_touching_it_makes_no_call() {
    let r = run("'use strict'; const out = []; \
         try { tools.call = () => 1; out.push('assigned'); } catch (e) { out.push(e.name); } \
         try { delete tools.call; out.push('deleted'); } catch (e) { out.push(e.name); } \
         try { globalThis.tools = {}; } catch (e) { out.push('global ' + e.name); } \
         out.push(Object.isFrozen(tools), typeof tools.then, typeof tools.toJSON, String(tools.toString === Object.prototype.toString)); \
         console.log(tools); await Promise.resolve(tools); \
         return out;");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value,
        json!(["TypeError", "TypeError", "global TypeError", true, "undefined", "undefined", "true"])
    );
    assert!(r.calls.is_empty(), "logging or awaiting tools made calls: {:?}", r.calls);
}

#[test]
fn the_tools_object_keeps_its_shape_and_sugar_still_calls() {
    let r = run("const e = await tools.echo({a: 1}); \
         return [Object.keys(tools), tools instanceof Object, 'call' in tools, 'read' in tools, \
                 typeof tools.search, typeof tools.anything, e.content.a, Object.getOwnPropertyNames(tools)];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value,
        json!([["call", "search"], true, true, false, "function", "function", 1, ["call", "search"]])
    );
    assert_eq!(r.calls.len(), 1);
}

/// Typed arrays are made on first use (sandbox.rs): a program sees the same
/// built-ins, prototypes and property attributes as when they were eager.
#[test]
fn typed_arrays_are_the_usual_built_ins_on_first_use() {
    let r = run("const before = Object.getOwnPropertyDescriptor(globalThis, 'Uint8Array'); \
         const u = new Uint8Array([1, 2, 300]); \
         const d = Object.getOwnPropertyDescriptor(globalThis, 'Uint8Array'); \
         const view = new DataView(new ArrayBuffer(8)); view.setFloat64(0, 1.5); \
         const big = new BigInt64Array(1); big[0] = 5n; \
         const i32 = new Int32Array(new SharedArrayBuffer(8)); Atomics.add(i32, 0, 7); \
         return [typeof before.get, before.get === before.set, Array.from(u), d.writable, d.enumerable, d.configurable, typeof d.value, \
                 view.getFloat64(0), String(big[0]), i32[0], \
                 Object.getPrototypeOf(Int8Array) === Object.getPrototypeOf(Float32Array), \
                 Float16Array.BYTES_PER_ELEMENT, u instanceof Uint8Array, \
                 Object.prototype.toString.call(new Uint8ClampedArray(1)), \
                 ArrayBuffer.isView(u), typeof Uint16Array, typeof Uint32Array, typeof Int16Array, \
                 typeof Float64Array, typeof BigUint64Array];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value,
        json!([
            "function",
            true,
            [1, 2, 44],
            true,
            false,
            true,
            "function",
            1.5,
            "5",
            7,
            true,
            2,
            true,
            "[object Uint8ClampedArray]",
            true,
            "function",
            "function",
            "function",
            "function",
            "function"
        ])
    );
}

/// `Map`/`Set`/`WeakMap`/`WeakSet` and `WeakRef`/`FinalizationRegistry`
/// are made on first use too (late_builtins.rs), each group on the first
/// use of one of its globals.
#[test]
fn maps_sets_and_weak_refs_are_the_usual_built_ins_on_first_use() {
    let r = run("const before = Object.getOwnPropertyDescriptor(globalThis, 'Set'); \
         const m = new Map([[1, 'one']]); \
         const d = Object.getOwnPropertyDescriptor(globalThis, 'Set'); \
         const wm = new WeakMap(); const key = {}; wm.set(key, 2); \
         const refBefore = Object.getOwnPropertyDescriptor(globalThis, 'WeakRef'); \
         const ref = new WeakRef(key); const reg = new FinalizationRegistry(() => {}); \
         return [typeof before.get, before.get === before.set, m.get(1), typeof d.value, d.writable, d.enumerable, \
                 d.configurable, new Set([1, 1, 2]).size, wm.get(key), new WeakSet([key]).has(key), \
                 typeof refBefore.get, ref.deref() === key, typeof reg.register, \
                 Object.prototype.toString.call(new Map().entries()), Map.groupBy([1, 2], (x) => x % 2).size, \
                 new Set([1, 2]).union(new Set([3])).size, Object.getPrototypeOf(Map) === Function.prototype];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value,
        json!([
            "function",
            true,
            "one",
            "function",
            true,
            false,
            true,
            2,
            2,
            true,
            "function",
            true,
            "function",
            "[object Map Iterator]",
            2,
            3,
            true
        ])
    );
    // A frozen globalThis before the first use: a TypeError that says why.
    let r = run("Object.freeze(globalThis); return new Set();");
    assert_eq!(r.status, RunStatus::Failed);
    let message = r.error.unwrap().message;
    assert!(
        message.contains("Set is not available: before the program first used a Map or Set"),
        "{message}"
    );
    // A global of the group replaced by the program first: the real ones
    // still come, and the program's value is what it assigned.
    let r = run("globalThis.WeakMap = 5; return [WeakMap, typeof Map, typeof WeakSet];");
    assert_eq!(r.value, json!([5, "function", "function"]));
}

/// `Date` is made on first use too, and the prelude's clock (which the
/// journal replays) is around it from its first use on.
#[test]
fn date_is_made_on_first_use_with_the_journaled_clock_around_it() {
    let r = run("const before = Object.getOwnPropertyDescriptor(globalThis, 'Date'); \
         const t = Date.now(); const d = new Date(); const s = Date(); \
         const after = Object.getOwnPropertyDescriptor(globalThis, 'Date'); \
         return [typeof before.get, typeof t, d instanceof Date, typeof s, \
                 Date.parse('2020-01-01T00:00:00Z') === Date.UTC(2020, 0, 1), Date.name, Date.length, \
                 after.writable, after.enumerable, after.configurable, Object.getPrototypeOf(d) === Date.prototype, \
                 Date.prototype.constructor === Date, new Date(0).toISOString(), Date.now.name, \
                 Math.abs(d.getTime() - t) < 60000];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value,
        json!([
            "function",
            "number",
            true,
            "string",
            true,
            "Date",
            7,
            true,
            false,
            true,
            true,
            true,
            "1970-01-01T00:00:00.000Z",
            "now",
            true
        ])
    );
    // A program that assigns Date first still had the clock made for it,
    // and a frozen globalThis is told why there is no Date.
    let r =
        run("const real = Object.getOwnPropertyDescriptor(globalThis, 'Date').get(); globalThis.Date = 5; \
                 return [Date, typeof real.now(), real.name];");
    assert_eq!(r.value, json!([5, "number", "Date"]));
    let r = run("Object.freeze(globalThis); return Date.now();");
    assert_eq!(r.status, RunStatus::Failed);
    let message = r.error.unwrap().message;
    assert!(message.contains("Date is not available: before the program first used Date"), "{message}");
}

/// Running out of memory while a group is made (it may be half made) ends
/// the program: no handler of it runs with, say, a `Map` and no `Set`.
#[test]
fn running_out_of_memory_while_a_group_is_made_ends_the_program() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.memory_bytes = 4 << 20;
    let engine = engine_with(&ws, limits);
    for gap in 0..24 {
        let r = engine.execute_blocking(Program::new(format!(
            "const keep = []; try {{ for (;;) keep.push(new Array(1000).fill(1.5)); }} catch (e) {{}} \
             keep.length = Math.max(0, keep.length - {gap}); \
             let r; try {{ new Set(); r = 'made'; }} catch (e) {{ r = 'caught'; }} keep.length = 0; \
             let iter; try {{ for (const x of new Map([[1, 2]])) {{}} for (const x of new Set([1])) {{}} iter = 'ok'; }} \
             catch (e) {{ iter = 'broken'; }} \
             return [typeof Map, typeof Set, typeof WeakMap, typeof WeakSet, iter];"
        )));
        if r.status == RunStatus::Completed {
            assert_eq!(
                r.value,
                json!(["function", "function", "function", "function", "ok"]),
                "gap {gap}: the program went on with a half-made group"
            );
        }
    }
}

/// With the VM's memory full to the last bytes, making a group can fail
/// with no room left even for an error object: QuickJS then leaves `null`
/// pending, which a program can catch. The run still ends as kind
/// `memory`, whatever the program's handler does, and it makes no call:
/// it never goes on with a group that may be half made, nor is the group
/// said to be unavailable because of globalThis.
#[test]
fn running_out_of_memory_with_no_room_for_an_error_while_a_group_is_made_still_ends_the_run() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.memory_bytes = 4 << 20;
    let engine = engine_with(&ws, limits);
    for (make, globals, group) in [
        ("new Set()", "[typeof Map, typeof Set, typeof WeakMap, typeof WeakSet]", "a Map or Set"),
        (
            "new Uint8Array(1)",
            "[typeof Uint8Array, typeof ArrayBuffer, typeof DataView, typeof Atomics]",
            "a typed array",
        ),
    ] {
        let mut group_failed = 0;
        for gap in 0..48 {
            // Filled with ever smaller nodes of a list (freed at once when
            // let go: QuickJS counts references), then `gap` nodes let go.
            let r = engine.execute_blocking(Program::new(format!(
                "let head = null; \
                 for (const size of [4096, 256, 16, 1, 0]) {{ \
                   try {{ for (;;) head = {{next: head, a: size ? new Array(size).fill(1.5) : null}}; }} catch (e) {{}} }} \
                 for (let i = 0; i < {gap} && head !== null; i++) head = head.next; \
                 let made; try {{ {make}; made = 'made'; }} catch (e) {{ made = e === null ? 'null' : 'caught'; }} \
                 head = null; \
                 let called; try {{ await tools.echo({{made}}); called = 'called'; }} catch (e) {{ called = 'refused'; }} \
                 return [made, called, ...{globals}.map((t) => t === 'undefined' ? t : 'defined')];"
            )));
            if r.status == RunStatus::Completed {
                assert_eq!(
                    r.value,
                    json!(["made", "called", "defined", "defined", "defined", "defined"]),
                    "{make}, gap {gap}"
                );
                continue;
            }
            let e = r.error.as_ref().unwrap();
            assert_eq!(e.kind, ErrorKind::Memory, "{make}, gap {gap}: {e:?}");
            assert_eq!(r.value, json!(null), "{make}, gap {gap}");
            // Nothing reached a tool once the group failed.
            assert!(r.calls.iter().all(|c| c.tool != "echo"), "{make}, gap {gap}: {:?}", r.calls);
            if e.message.contains(&format!("while making {group}")) {
                group_failed += 1;
            }
        }
        // The fill reached the group's making for some gap.
        assert!(group_failed > 0, "{make}");
    }
}

/// `Date` is made while the program runs: what the program put on
/// `Object.prototype` is not read, so neither makes the real, unjournaled
/// Date reachable nor stops `Date` from being made.
#[test]
fn object_prototype_changes_do_not_reach_the_making_of_date() {
    let r = run("let real; \
         Object.defineProperty(Object.prototype, 'get', {get() { real ??= globalThis.Date; return undefined; }, configurable: true}); \
         Object.prototype.enumerable = true; \
         let error = null; try { Date; } catch (e) { error = String(e); } \
         delete Object.prototype.get; delete Object.prototype.enumerable; \
         return [error, real === undefined, Date.name, typeof Date.now(), 'prototype' in Date.now, \
                 (() => { try { new Date.now(); return 'constructed'; } catch (e) { return e.name; } })()];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!([null, true, "Date", "number", false, "TypeError"]));
}

#[test]
fn a_typed_array_global_can_be_assigned_or_shadowed_before_first_use() {
    let r = run("globalThis.Float32Array = 5; const a = Float32Array; \
         const Uint8Array = 'mine'; \
         return [a, Uint8Array, typeof Int8Array, Object.getOwnPropertyDescriptor(globalThis, 'Float32Array').value, \
                 'DataView' in globalThis, Object.getPrototypeOf(globalThis) === Object.prototype, \
                 globalThis instanceof Object, typeof globalThis.hasOwnProperty, typeof notAGlobal];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!([5, "mine", "function", 5, true, true, true, "function", "undefined"]));
    // Atomics first (QuickJS defines it lazily, so its accessor must be
    // gone before the others are made), and a deleted accessor.
    let r =
        run("delete globalThis.DataView; return [typeof Atomics.add, typeof DataView, typeof Uint8Array];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(["function", "function", "function"]));
    // An accessor the program kept still answers after they are made.
    let r = run("const g = Object.getOwnPropertyDescriptor(globalThis, 'Uint8Array').get; \
         return [g() === g(), typeof g(), g() === Uint8Array];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!([true, "function", true]));
    // Without a use, nothing is made and other lookups are untouched.
    let r =
        run("let e; try { missing; } catch (x) { e = x.name; } return [e, String(globalThis).length > 0];");
    assert_eq!(r.value, json!(["ReferenceError", true]));
}

#[test]
fn a_program_that_froze_globalthis_is_told_why_typed_arrays_are_missing() {
    let r = run("Object.freeze(globalThis); return new Uint8Array(2);");
    assert_eq!(r.status, RunStatus::Failed);
    let e = r.error.unwrap();
    assert!(
        e.message
            .contains("Uint8Array is not available: before the program first used a typed array, it froze"),
        "{}",
        e.message
    );
    let r = run("Object.preventExtensions(globalThis); return typeof DataView;");
    assert_eq!(r.status, RunStatus::Failed);
    assert!(r.error.unwrap().message.contains("DataView is not available"));
    // Program code cannot run inside the making of them (QuickJS aborts
    // the process if it meets an `Atomics` made meanwhile): a getter on
    // Array.prototype.toString, which the making reads, is refused.
    let r = run(
        "Object.defineProperty(Array.prototype, 'toString', {get() { globalThis.Atomics = 1; return () => ''; }}); \
         try { new Uint8Array(1); } catch (e) { \
           return [e.name, e.message.includes('Array.prototype.toString'), \
                   typeof Object.getOwnPropertyDescriptor(globalThis, 'Atomics').get]; }",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(["TypeError", true, "function"]));
    // Replaced by a plain function, it is only shared, as QuickJS does.
    let r = run(
        "Array.prototype.toString = () => 'mine'; return [String(new Uint8Array(2)), typeof Atomics.add];",
    );
    assert_eq!(r.value, json!(["mine", "function"]));
    // A typed array global made unconfigurable: nothing is made and
    // nothing removed (QuickJS could abort on what the program left).
    let r = run("Object.defineProperty(globalThis, 'Atomics', {value: 1, configurable: false}); \
         try { new Uint8Array(1); } catch (e) { \
           return [e.name, Object.getOwnPropertyNames(globalThis).includes('DataView'), Atomics]; }");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(["TypeError", true, 1]));
    // Used before the freeze, they stay.
    let r = run(
        "const n = new Uint8Array(2).length; Object.freeze(globalThis); return [n, new Int8Array(3).length];",
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!([2, 3]));
}

#[test]
fn a_tool_name_with_a_lone_surrogate_reaches_the_gate_as_well_formed_text() {
    let r = run("try { await tools.call('ech\\ud800o', {}); } catch (e) { return [e.kind, e.tool]; }");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(["refused", "ech\u{FFFD}o"]));
    assert_eq!(r.calls[0].tool, "ech\u{FFFD}o");
}

#[test]
fn no_raw_host_hooks_and_no_ambient_capabilities() {
    let r = run(
        "const names = Object.getOwnPropertyNames(globalThis).filter(n => /host|codemode|__/i.test(n)); \
         return {names, require: typeof require, setTimeout: typeof setTimeout, setInterval: typeof setInterval, \
                 fetch: typeof fetch, std: typeof std, os: typeof os, process: typeof process, Deno: typeof Deno, \
                 performance: typeof performance};",
    );
    assert_eq!(
        r.value,
        json!({"names": [], "require": "undefined", "setTimeout": "undefined", "setInterval": "undefined",
               "fetch": "undefined", "std": "undefined", "os": "undefined", "process": "undefined", "Deno": "undefined",
               "performance": "undefined"})
    );
}

#[test]
fn import_fails() {
    let r = run("const m = await import('fs'); return m;");
    assert_eq!(r.status, RunStatus::Failed);
    assert!(r.calls.is_empty());
    let r = run("import fs from 'fs';");
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.error.unwrap().kind, ErrorKind::Syntax);
}

#[test]
fn a_program_cannot_see_or_change_another_programs_globals() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    let first = engine.execute_blocking(Program::new(
        "globalThis.secret = 42; Array.prototype.evil = 1; JSON.parse = () => 'hijacked'; return 'set';",
    ));
    assert_eq!(first.value, json!("set"));
    let second = engine.execute_blocking(Program::new(
        "const r = await tools.echo({ok: true}); \
         return [typeof secret, [].evil === undefined, JSON.parse('1'), r.content.ok];",
    ));
    assert_eq!(second.value, json!(["undefined", true, 1, true]));
}

#[test]
fn a_hijacked_json_does_not_break_tools_call() {
    let r = run(
        "JSON.parse = () => 'x'; JSON.stringify = () => 'y'; const r = await tools.echo({n: 1}); return r.content.n;",
    );
    assert_eq!(r.value, json!(1), "{:?}", r.error);
}

#[test]
fn a_thrown_error_fails_the_run_with_the_users_line_and_column() {
    let r = run("const a = 1;\nconst b = 2;\n  null.boom;\nreturn a + b;");
    assert_eq!(r.status, RunStatus::Failed);
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Exception);
    assert!(e.message.starts_with("TypeError"), "{}", e.message);
    assert_eq!((e.line, e.column), (Some(3), Some(3)));
    // On the first line the wrapper's prefix is taken off the column
    // (QuickJS points at the constructor, `Error`; the run error at the
    // `throw`, in column 5).
    let e = run("    throw new Error('first line');").error.unwrap();
    assert_eq!((e.line, e.column), (Some(1), Some(5)));
    assert_eq!(e.message, "Error: first line");
}

/// Regression: QuickJS places an error made in a `throw` at the last call
/// before it (`slice` in the template literal), so the run error pointed at
/// `slice`; it points at the `throw`, in JavaScript, TypeScript and fenced
/// programs, and so does the stack's first frame.
#[test]
fn an_error_thrown_by_a_throw_statement_is_placed_at_the_throw() {
    let body = "const s = \"abcdefghijklmnop\";\n  throw new TypeError(`${s.slice(0, 10)}`);\n";
    let ts = "const s: string = \"abcdefghijklmnop\";\n  throw new TypeError(`${s.slice(0, 10)}`);\n";
    for (src, line) in [
        (body.to_owned(), 2),
        (ts.to_owned(), 2),
        (format!("Here:\n```ts\n{ts}```\n"), 4),
        (format!("```js\n{body}```"), 3),
    ] {
        let e = run(&src).error.unwrap();
        assert_eq!(e.message, "TypeError: abcdefghij", "{src}");
        assert_eq!((e.line, e.column), (Some(line), Some(3)), "{src}");
        let stack = e.stack.unwrap_or_default();
        assert!(stack.contains(&format!(":{line}:3)")), "{src}: {stack}");
    }
    // A throw inside a function: the error is at that throw, the caller's
    // frame at its call.
    let e = run("function f(x) {\n  if (x) throw new Error(`bad ${x.toString()}`);\n}\nf(1);").error.unwrap();
    assert_eq!((e.line, e.column), (Some(2), Some(10)));
    let stack = e.stack.unwrap();
    assert!(stack.contains(":2:10)") && stack.contains(":4:"), "{stack}");
    // An error that is not thrown by a throw statement keeps its position.
    let e = run("const o = null;\nconst n = 1 + o.x;").error.unwrap();
    assert_eq!((e.line, e.column), (Some(2), Some(15)));
}

/// Regression: `require`, timers, `fetch`, `process` and `fs` were a bare
/// ReferenceError; the run error says what programs use instead.
#[test]
fn node_and_browser_globals_say_what_to_use_instead() {
    for (src, says) in [
        ("const fs = require('fs');", "no module loader"),
        ("await new Promise((r) => setTimeout(r, 10));", "no timers"),
        ("setInterval(() => {}, 5);", "no timers"),
        ("const r = await fetch('https://example.com');", "tools.search"),
        ("return process.env.HOME;", "no `process`"),
        ("return fs.readFileSync('a.txt', 'utf8');", "tools.read"),
    ] {
        let e = run(src).error.unwrap();
        assert_eq!(e.kind, ErrorKind::Exception, "{src}");
        assert!(
            e.message.starts_with("ReferenceError: ") && e.message.contains(says),
            "{src}: {}",
            e.message
        );
    }
    let e = run("return undefinedThing;").error.unwrap();
    assert_eq!(e.message, "ReferenceError: undefinedThing is not defined");
}

#[test]
fn a_syntax_error_runs_no_call() {
    let r = run("await tools.echo({});\nconst x = ;\n");
    assert_eq!(r.status, RunStatus::Failed);
    assert!(r.calls.is_empty());
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert_eq!(e.line, Some(2));
}

#[test]
fn tool_errors_are_catchable_with_kind_tool_and_seq() {
    let r = run("await tools.echo({}); \
         try { await tools.fail({message: 'disk on fire'}); } \
         catch (e) { return [e instanceof ToolError, e.name, e.kind, e.tool, e.seq, e.message]; }");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!([true, "ToolError", "failed", "fail", 2, "fail (call 2): disk on fire"]));
    assert_eq!(r.calls[1].status, CallStatus::Failed);
    assert_eq!(r.calls[1].decision, Decision::Auto);
    assert_eq!(r.calls[1].error.as_deref(), Some("disk on fire"));
}

#[test]
fn an_uncaught_tool_error_fails_the_run() {
    let r = run("await tools.fail({message: 'nope'});");
    assert_eq!(r.status, RunStatus::Failed);
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Exception);
    assert_eq!(e.message, "ToolError: fail (call 1): nope");
}

#[test]
fn unknown_tools_are_refused_with_suggestions() {
    let r = run("try { await tools.call('ehco', {}); } catch (e) { return [e.kind, e.message]; }");
    assert_eq!(r.value[0], json!("refused"));
    assert!(r.value[1].as_str().unwrap().contains("did you mean `echo`?"), "{}", r.value[1]);
    assert_eq!(r.calls[0].decision, Decision::Refused);
    assert_eq!(r.calls[0].status, CallStatus::Refused);
}

#[test]
fn direct_only_tools_are_refused_inside_programs_ignoring_case() {
    for name in ["execute_tools", "Execute_Tools", "AGENT", "workflow", "mcp__github__authenticate"] {
        let r = run(&format!(
            "try {{ await tools.call('{name}', {{}}); }} catch (e) {{ return [e.kind, e.message]; }}"
        ));
        assert_eq!(r.value[0], json!("refused"), "{name}");
        assert!(r.value[1].as_str().unwrap().contains("direct-only"), "{name}: {}", r.value[1]);
    }
}

#[test]
fn arguments_are_validated_against_the_input_schema() {
    let r = run("try { await tools.sleep({ms: 'soon'}); } catch (e) { return [e.kind, e.message]; }");
    assert_eq!(r.value[0], json!("refused"));
    let msg = r.value[1].as_str().unwrap();
    assert!(msg.contains("input schema of `sleep`") && msg.contains("/ms"), "{msg}");
}

#[test]
fn non_json_arguments_are_a_clear_type_error() {
    let r = run("const out = []; const cyc = {}; cyc.self = cyc; \
         for (const bad of [{f: () => 1}, cyc, {n: 10n}, {s: Symbol('x')}, () => 1]) { \
           try { await tools.echo(bad); out.push('accepted'); } catch (e) { out.push(e.name + ': ' + e.message); } } \
         try { await tools.call(42, {}); } catch (e) { out.push(e.name + ': ' + e.message); } \
         return out;");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let got: Vec<&str> = r.value.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(got[0].contains("TypeError") && got[0].contains("\"f\" is a function"), "{}", got[0]);
    assert!(got[1].contains("TypeError") && got[1].contains("circular"), "{}", got[1]);
    assert!(got[2].contains("TypeError") && got[2].contains("BigInt"), "{}", got[2]);
    // A symbol-valued key is left out, as JSON.stringify does with undefined.
    assert_eq!(got[3], "accepted");
    assert!(got[4].contains("TypeError") && got[4].contains("function"), "{}", got[4]);
    assert!(got[5].contains("TypeError") && got[5].contains("name must be a string"), "{}", got[5]);
    assert_eq!(r.calls.len(), 1, "only the symbol case reached the host: {:?}", r.calls);
}

#[test]
fn promise_all_of_100_calls_is_fully_receipted() {
    let r = run("const rs = await Promise.all(Array.from({length: 100}, (_, i) => \
            i % 2 ? tools.echo({i}) : tools.sleep({ms: 1 + (i % 7)}))); \
         return rs.length;");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(100));
    assert_eq!(r.calls.len(), 100);
    let mut seqs: Vec<u64> = r.calls.iter().map(|c| c.seq).collect();
    seqs.dedup();
    assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
    assert!(r.calls.iter().all(|c| c.status == CallStatus::Ok));
}

#[test]
fn the_in_flight_limit_queues_calls_and_never_exceeds_it() {
    let ws = workspace();
    let sleep = crate::common::Sleep::new();
    let peak = sleep.peak.clone();
    let mut limits = Limits::default();
    limits.max_in_flight = 4;
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .limits(limits)
        .policy(codemode::Policy::full_access())
        .tool(sleep)
        .build()
        .unwrap();
    let r = engine.execute_blocking(Program::new(
        "await Promise.all(Array.from({length: 20}, () => tools.sleep({ms: 10}))); return 'done';",
    ));
    assert_eq!(r.value, json!("done"), "{:?}", r.error);
    assert_eq!(r.calls.len(), 20);
    assert_eq!(peak.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[test]
fn an_unawaited_call_is_still_receipted() {
    let r = run("tools.sleep({ms: 30}); tools.echo({late: true}); return 'returned first';");
    assert_eq!(r.status, RunStatus::Completed);
    assert_eq!(r.value, json!("returned first"));
    assert_eq!(r.calls.len(), 2);
    let sleep = &r.calls[0];
    assert_eq!(sleep.status, CallStatus::Ok, "the engine waits for calls the program left running");
    assert!(sleep.note.as_deref().unwrap_or("").contains("not awaited"), "{:?}", sleep.note);
}

#[test]
fn a_tool_that_panics_fails_its_call_not_the_engine() {
    let r = run("const out = []; \
         for (const later of [false, true]) { try { await tools.panic({later}); } catch (e) { out.push(e.kind); } } \
         return out;");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(["failed", "failed"]));
    assert!(r.calls.iter().all(|c| c.error.as_deref().unwrap().contains("panicked")));
}

#[test]
fn a_busy_program_does_not_stall_another_programs_calls() {
    let ws = workspace();
    let engine =
        crate::common::builder(&ws).limits(crate::common::deadline(5_000)).vm_threads(2).build().unwrap();
    let busy = engine.start(Program::new("while (true) {}"));
    let worker = engine.execute_blocking(Program::new(
        "let n = 0; for (let i = 0; i < 5; i++) { n += (await tools.sleep({ms: 20})).content.slept; } return n;",
    ));
    assert_eq!(worker.status, RunStatus::Completed, "{:?}", worker.error);
    assert_eq!(worker.value, json!(100));
    // The busy program is still running when the other one is done; stop it.
    busy.cancel();
    let busy = busy.wait_blocking();
    assert_eq!(busy.status, RunStatus::Cancelled);
}

#[test]
fn a_failed_program_ends_at_once_and_cancels_what_it_left_running() {
    let r = run("await Promise.all([tools.sleep({ms: 60000}), tools.fail({message: 'first'})]);");
    assert_eq!(r.status, RunStatus::Failed);
    assert!(r.error.unwrap().message.contains("first"));
    assert_eq!(r.calls[0].status, CallStatus::InFlight);
    assert!(r.calls[0].note.as_deref().unwrap().contains("program failed"), "{:?}", r.calls[0].note);
    assert!(r.elapsed_ms < 30_000.0, "the run did not wait for the sleeping call");
}

#[test]
fn a_current_thread_tool_runtime_is_refused() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let ws = workspace();
    let err = crate::common::engine_builder()
        .workspace(ws.path())
        .tool_runtime(rt.handle().clone())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("multi-thread"), "{err}");
}

#[test]
fn json_stringify_keeps_its_own_behaviour_outside_tools_call() {
    let r = run(
        "const out = [JSON.stringify({f() {}, a: 1}), JSON.stringify([() => 1]), String(JSON.stringify(() => 1))]; \
         try { JSON.stringify({n: 1n}); } catch (e) { out.push(e.name); } \
         try { Object.defineProperty(Function.prototype, 'toJSON', {value: null}); } catch (e) { out.push('hook ' + e.name); } \
         try { await tools.echo({f: () => 1}); } catch (e) { out.push(e.name); } \
         return out;",
    );
    assert_eq!(
        r.value,
        json!(["{\"a\":1}", "[null]", "undefined", "TypeError", "hook TypeError", "TypeError"])
    );
}

#[test]
fn text_results_arrive_as_strings_with_their_envelope() {
    let r = run("const a = await tools.blob({bytes: 12}); const b = await tools.sleep({ms: 1}); \
         return [a, Object.keys(a), typeof b.content];");
    assert_eq!(r.value[0], json!({"content": "012345678901", "metadata": null, "truncated": null}));
    assert_eq!(r.value[1], json!(["content", "metadata", "truncated"]));
    assert_eq!(r.value[2], json!("object"));
}

// Regressions from trying to break the engine: the program's own code that
// runs while its outcome is read (toJSON, getters) is still the program.

#[test]
fn a_loop_in_the_return_values_to_json_times_out() {
    let ws = workspace();
    let engine = engine_with(&ws, crate::common::deadline(300));
    for src in ["return {toJSON() { for (;;) {} }};", "return {get x() { for (;;) {} }};"] {
        let r = engine.execute_blocking(Program::new(src));
        assert_eq!(r.status, RunStatus::TimedOut, "{src}: {:?}", r.error);
    }
}

#[test]
fn calls_made_while_the_value_is_serialised_are_the_programs_calls() {
    let r = run("return {toJSON() { tools.echo({late: 1}); return 'v'; }};");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!("v"));
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].status, CallStatus::Ok);
}

#[test]
fn thrown_values_that_are_not_errors_are_described() {
    let r = run("throw {code: 7, why: 'nope'};");
    assert_eq!(r.error.unwrap().message, "uncaught {\"code\":7,\"why\":\"nope\"}");
    let r = run("throw {get message() { return 'from a getter'; }, name: 'Custom'};");
    assert_eq!(r.error.unwrap().message, "Custom: from a getter");
    let r = run("throw 'text';");
    assert_eq!(r.error.unwrap().message, "uncaught \"text\"");
}

#[test]
fn arguments_reach_the_tool_as_json_stringify_makes_them_and_a_getter_runs_once() {
    // Plain arguments are written by the host, anything that could run
    // code by JSON.stringify (vm/args_json.rs): either way the tool gets
    // the same value and a getter runs once.
    let r = run("let reads = 0; \
         const e = await tools.echo({get a() { reads++; return 1; }, b: [1, {c: 'x'}]}); \
         const p = await tools.echo({s: 'q\"\\\\\\n\\u0001é', n: 0.1 + 0.2, big: 1e21, neg: -0, u: undefined, \
                                     arr: [undefined, 2], nan: NaN, nested: {deep: [[[]]]}}); \
         const t = await tools.echo({d: new Date(0), n: new Number(3)}); \
         return [reads, e.content, p.content, t.content];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.value,
        json!([
            1,
            {"a": 1, "b": [1, {"c": "x"}]},
            {"s": "q\"\\\n\u{1}é", "n": 0.30000000000000004, "big": 1e21, "neg": 0, "arr": [null, 2], "nan": null,
             "nested": {"deep": [[[]]]}},
            {"d": "1970-01-01T00:00:00.000Z", "n": 3}
        ])
    );
}

#[test]
fn arguments_that_stand_for_more_text_than_the_vm_can_hold_are_its_memory_error() {
    // One array shared 2^22 times over: a few hundred bytes in the VM, 12
    // MiB of JSON. The host gives up at its bound; JSON.stringify in the
    // VM runs out of its 16 MiB, as the program's catchable error: QuickJS's
    // own InternalError, not a TypeError about the arguments.
    let ws = workspace();
    let mut limits = Limits::default();
    limits.memory_bytes = 16 << 20;
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new(
        "let a = 1; for (let i = 0; i < 22; i++) a = [a, a]; \
         try { await tools.echo({a}); return 'sent'; } catch (e) { return `caught ${e.name}: ${e.message}`; }",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!("caught InternalError: out of memory"));
    // Not caught, it ends the run as kind memory, saying how to raise it.
    let r = engine.execute_blocking(Program::new(
        "let a = 1; for (let i = 0; i < 22; i++) a = [a, a]; await tools.echo({a});",
    ));
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Memory, "{}", e.message);
    assert!(e.message.contains("--memory"), "{}", e.message);
}

#[test]
fn lone_surrogates_become_replacement_characters() {
    let r = run("console.log('a\\ud800b'); const e = await tools.echo({s: 'x\\udfff'}); \
         return ['\\ud800', e.content.s];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(["\u{fffd}", "x\u{fffd}"]));
    assert_eq!(r.logs[0].text, "a\u{fffd}b");
    // What it threw, too (the host reads the report's strings as text).
    let r = run("throw new RangeError('m\\ud800');");
    let e = r.error.unwrap();
    assert!(e.message.contains("RangeError: m\u{fffd}"), "{}", e.message);
    let r = run("throw 'x\\udc00';");
    let e = r.error.unwrap();
    assert!(e.message.contains("\"x\\udc00\""), "a thrown string is shown as JSON: {}", e.message);
}

#[test]
fn a_nul_character_is_a_syntax_error_with_its_position() {
    let r = run("const a = 1;\nreturn 'x\0y';");
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert_eq!((e.line, e.column), (Some(2), Some(10)));
}

#[test]
fn a_deadline_shorter_than_vm_setup_times_out_the_program() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.deadline = std::time::Duration::from_micros(1);
    let r = engine_with(&ws, limits).execute_blocking(Program::new("let i = 0; while (true) i++;"));
    assert_eq!(r.status, RunStatus::TimedOut, "{:?}", r.error);
}

#[test]
fn closing_the_wrapper_is_a_syntax_error() {
    let r = run("}); (() => {");
    assert_eq!(r.error.unwrap().kind, ErrorKind::Syntax);
}

#[test]
fn the_prelude_cannot_be_reached_to_forge_results() {
    let r = run("const out = []; \
         try { Error.prepareStackTrace = (e, cs) => cs; out.push(typeof Error.prepareStackTrace); } catch (e) { out.push(e.name); } \
         try { const m = await import('codemode:prelude'); m.default(() => 0); out.push('loaded again'); } \
         catch (e) { out.push(e.message); } \
         return out;");
    assert_eq!(r.value[0], json!("undefined"), "{:?}", r.value);
    let second = r.value[1].as_str().unwrap();
    assert!(
        second.contains("already loaded") || second.contains("not found") || second.contains("module"),
        "{second}"
    );
}

#[test]
fn replaced_builtins_do_not_break_tools_call() {
    let r = run("Map.prototype.set = Map.prototype.get = function () {}; \
         String.prototype.slice = String.prototype.charCodeAt = () => 'x'; \
         Promise.resolve = Promise.reject = () => 'hijacked'; \
         Array.prototype.map = () => ['hijacked']; Object.assign = () => ({}); \
         globalThis.TypeError = function () {}; \
         const a = await tools.sleep({ms: 1}); const b = await tools.echo({n: 2}); \
         let e; try { await tools.fail({message: 'm'}); } catch (x) { e = [x.name, x.kind, x.message]; } \
         console.log('still', {ok: true}); \
         return [a.content.slept, b.content.n, e];");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!([1, 2, ["ToolError", "failed", "fail (call 3): m"]]));
    assert_eq!(r.logs[0].text, "still {\"ok\":true}");
}

#[test]
fn a_value_returned_before_a_runaway_callback_is_kept() {
    let ws = workspace();
    let engine = engine_with(&ws, crate::common::deadline(300));
    let r = engine.execute_blocking(Program::new("Promise.resolve().then(() => { for (;;) {} }); return 1;"));
    assert_eq!(r.status, RunStatus::TimedOut);
    assert_eq!(r.value, json!(1));
}

#[test]
fn rejections_nothing_handled_are_logged() {
    let r = run("Promise.reject(new Error('lost')); \
         const late = Promise.reject(new Error('caught later')); \
         try { await tools.fail({message: 'awaited'}); } catch {} \
         await late.catch(() => {}); \
         return 1;");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let errors: Vec<&str> = r.logs.iter().filter(|l| l.level == "error").map(|l| l.text.as_str()).collect();
    assert_eq!(errors, ["unhandled promise rejection: Error: lost"]);
    // A value that is not an error is shown as it is.
    let r = run("Promise.reject(42); Promise.reject({code: 42}); Promise.reject(null); \
         Promise.reject(10n); Promise.reject('y'.repeat(3000)); return 1;");
    let errors: Vec<&str> = r.logs.iter().filter(|l| l.level == "error").map(|l| l.text.as_str()).collect();
    let shown = |v: &str| format!("unhandled promise rejection: {v}");
    assert_eq!(errors[..4], [shown("42"), shown("{\"code\":42}"), shown("null"), shown("10n")]);
    assert!(errors[4].ends_with("... [cut; 3000 bytes in all]"), "{}", errors[4]);
}

#[test]
fn a_function_value_is_the_entry_point_and_is_called() {
    // The shape many code-mode prompts ask for, and a trailing `main`.
    let r = run("export default async () => { const r = await tools.echo({n: 1}); return r.content.n + 1; }");
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value, json!(2));
    assert_eq!(r.calls.len(), 1);
    let r = run("async function main() { return 'ran'; }\nmain");
    assert_eq!(r.value, json!("ran"));
    // Its failure is the program's failure.
    let r = run("return async () => { throw new Error('inside'); }");
    assert_eq!(r.status, RunStatus::Failed);
    assert!(r.error.unwrap().message.contains("inside"));
    // One level only: a function returning a function gives null.
    assert_eq!(run("return () => () => 1").value, json!(null));
}

/// A program with nothing in it but whitespace, comments and fence lines
/// is refused by the engine, as the CLI refuses it: served models and
/// program batches got a `null` as if it had run.
#[test]
fn an_empty_program_is_refused_wherever_it_comes_from() {
    for blank in ["", "  \n", "// nothing here\n", "```js\n```"] {
        let r = run(blank);
        assert_eq!(r.status, RunStatus::Failed, "{blank:?}");
        let e = r.error.unwrap();
        assert_eq!(e.kind, ErrorKind::Syntax, "{blank:?}");
        assert!(e.message.contains("the program is empty"), "{blank:?}: {}", e.message);
    }
    let ws = workspace();
    std::fs::write(ws.path().join("e.js"), "// later\n").unwrap();
    let out = crate::cli::codemode(&["batch", "--program", "e.js", "-q"], "{}\n", ws.path());
    assert_eq!(out.status.code(), Some(2), "refused before any line runs");
    assert!(String::from_utf8_lossy(&out.stderr).contains("e.js is empty"), "{out:?}");
}
