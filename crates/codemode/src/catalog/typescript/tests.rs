//! Exact renderings of small schemas, and robustness on bad ones. The
//! compiler check of real schemas is in tests/all/typescript.rs.

use serde_json::{Value, json};

use super::*;
use crate::catalog::Loading;

fn native(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec::new(name, description, schema)
}

fn mcp(server: &str, tool: &str, schema: Value, output: Option<Value>) -> ToolSpec {
    let mut spec = ToolSpec::new(format!("mcp__{server}__{tool}"), "", schema)
        .source(ToolSource::Mcp { server: server.into() })
        .loading(Loading::Deferred);
    spec.output_schema = output;
    spec
}

/// The declarations of `specs` without the preamble.
fn bare(specs: &[ToolSpec]) -> String {
    declarations_with(specs, &DeclarationOptions::new().preamble(false))
}

#[test]
fn an_object_with_required_and_optional_properties_and_jsdoc() {
    let spec = native(
        "read",
        "Reads a file. Never */ ends early.",
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Where"},
            "limit": {"type": "integer", "minimum": 1, "default": 10}
        }, "required": ["path"], "additionalProperties": false}),
    )
    .read_only(true);
    assert_eq!(
        bare(&[spec]),
        r#"interface Tools {
  /** Reads a file. Never *\/ ends early. @readOnly */
  read(args: {
    /** Where */
    path: string;
    /** @integer @minimum 1 @default 10 */
    limit?: number;
  }): Promise<ToolResult>;
}
"#
    );
}

#[test]
fn enums_const_nullable_tuples_maps_and_boolean_schemas() {
    let spec = native(
        "pick",
        "",
        json!({"type": "object", "properties": {
            "mode": {"type": ["string", "null"], "enum": ["a", "b", null]},
            "level": {"enum": [1, 2], "nullable": true},
            "fixed": {"const": "x"},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": false, "minItems": 1},
            "map": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": {"type": "number"}},
            "any": true,
            "none": false
        }}),
    );
    // Nothing required, so the arguments may be left out; the map's index
    // signature admits the known property's type, as TypeScript requires.
    assert_eq!(
        bare(&[spec]),
        r#"interface Tools {
  pick(args?: {
    mode?: "a" | "b" | null;
    level?: 1 | 2 | null;
    fixed?: "x";
    /** @minItems 1 */
    pair?: [string, number?];
    map?: { id: string; [key: string]: number | string };
    any?: unknown;
    none?: never;
  }): Promise<ToolResult>;
}
"#
    );
}

#[test]
fn mcp_tools_get_a_namespace_with_named_and_recursive_types() {
    let spec = mcp(
        "my-server",
        "get-tree",
        json!({"type": "object", "$defs": {"Node": {"type": "object", "description": "A node", "properties": {
            "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
            "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"]}),
        Some(json!({"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]})),
    );
    assert_eq!(
        bare(&[spec]),
        r#"interface Tools {
  "mcp__my-server__get-tree"(args: mcp__my_server.GetTreeArgs): Promise<ToolResult<mcp__my_server.GetTreeResult>>;
}

/** Argument and result types of the MCP server `my-server`. */
declare namespace mcp__my_server {
  interface GetTreeArgs { root: mcp__my_server.Node }
  /** A node */
  interface Node { kids?: mcp__my_server.Node[] }
  interface GetTreeResult {
    /** @integer */
    size: number;
  }
}
"#
    );
}

#[test]
fn direct_cycles_become_unknown_and_self_referencing_roots_get_a_name() {
    // Result = Loop | string and Loop = Result | number: TypeScript rejects
    // such aliases as circular.
    let looped = mcp(
        "s",
        "t",
        json!({"type": "object"}),
        Some(json!({"anyOf": [{"$ref": "#/$defs/Loop"}, {"type": "string"}],
            "$defs": {"Loop": {"anyOf": [{"$ref": "#"}, {"type": "number"}]}}})),
    );
    let out = bare(&[looped]);
    assert!(out.contains("  type TResult = unknown /* circular $ref #/$defs/Loop */;\n"), "{out}");
    let list = native(
        "list",
        "",
        json!({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}}),
    );
    assert_eq!(
        bare(&[list]),
        r#"interface Tools {
  list(args?: codemode.ListArgs): Promise<ToolResult>;
}

/** Named types of native tools. */
declare namespace codemode {
  interface ListArgs { next?: codemode.ListArgs | null }
}
"#
    );
}

#[test]
fn names_the_tools_proxy_keeps_get_call_overloads() {
    let specs = [
        native("call", "", json!({"type": "object"})),
        native(
            "toString",
            "",
            json!({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}),
        ),
        native("two-words", "", json!({"type": "object", "properties": {"x": {"not": {}}}})),
    ];
    assert_eq!(
        bare(&specs),
        r#"interface Tools {
  "two-words"(args?: { x?: unknown /* not is not expressible */ }): Promise<ToolResult>;
  call(name: "call", args?: Record<string, unknown>): Promise<ToolResult>;
  call(name: "toString", args: { x: string }): Promise<ToolResult>;
}
"#
    );
}

#[test]
fn the_preamble_declares_the_envelope_the_error_and_tools_call() {
    let out = declarations(&[native("read", "", json!({"type": "object"}))]);
    for part in [
        "type ToolResult<T = unknown, M = Record<string, unknown> | null> =",
        "truncated: Truncation",
        "declare class ToolError extends Error",
        r#"readonly kind: "denied" | "refused" | "failed" | "timeout" | "cancelled" | "unknown_outcome";"#,
        "call<N extends ToolName>(name: N, ...args: Parameters<Tools[N]>): ReturnType<Tools[N]>;",
        "declare const tools: Tools;",
    ] {
        assert!(out.contains(part), "no {part:?} in\n{out}");
    }
    assert!(!bare(&[native("read", "", json!({"type": "object"}))]).contains("declare const tools"));
}

#[test]
fn native_result_shapes_become_named_types_of_the_codemode_namespace() {
    let spec = native("grep", "", json!({"type": "object"})).result_schemas((
        json!({"type": "array", "items": {"$ref": "#/$defs/Hit"}, "$defs": {"Hit": {"type": "object",
            "properties": {"line": {"type": "number"}}, "required": ["line"]}}}),
        json!({"$ref": "#/$defs/GrepMeta", "$defs": {"GrepMeta": {"type": "object",
            "properties": {"next": {"type": ["number", "null"]}}, "required": ["next"]}}}),
    ));
    let none = native("put", "", json!({"type": "object"}))
        .result_schemas((json!({"type": "string"}), json!({"type": "null"})));
    assert_eq!(
        bare(&[spec, none]),
        r#"interface Tools {
  grep(args?: Record<string, unknown>): Promise<ToolResult<codemode.Hit[], codemode.GrepMeta>>;
  put(args?: Record<string, unknown>): Promise<ToolResult<string, null>>;
}

/** Named types of native tools. */
declare namespace codemode {
  interface Hit { line: number }
  interface GrepMeta { next: number | null }
}
"#
    );
}

#[test]
fn servers_with_clashing_identifiers_get_distinct_namespaces() {
    let specs = [
        mcp("a-b", "x", json!({"type": "object"}), None),
        mcp("a_b", "x", json!({"type": "object"}), None),
        mcp("a-b", "y", json!({"type": "object"}), None),
    ];
    let out = bare(&specs);
    assert!(out.contains("\"mcp__a-b__x\"(args?: mcp__a_b.XArgs)"), "{out}");
    assert!(out.contains("mcp__a_b__x(args?: mcp__a_b_2.XArgs)"), "{out}");
    assert!(out.contains("\"mcp__a-b__y\"(args?: mcp__a_b.YArgs)"), "{out}");
    assert_eq!(out.matches("declare namespace").count(), 2, "{out}");
}

#[test]
fn identical_defs_are_shared_and_different_ones_renamed() {
    let defs = json!({"Item": {"type": "object", "properties": {"a": {"type": "string"}}}});
    let other = json!({"Item": {"type": "number"}});
    let with = |defs: &Value| json!({"type": "object", "$defs": defs, "properties": {"i": {"$ref": "#/$defs/Item"}}});
    let specs = [
        mcp("s", "one", with(&defs), None),
        mcp("s", "two", with(&other), None),
        mcp("s", "three", with(&defs), None),
    ];
    let out = bare(&specs);
    assert!(out.contains("interface OneArgs { i?: mcp__s.Item }"), "{out}");
    assert!(out.contains("interface TwoArgs { i?: mcp__s.Item2 }"), "{out}");
    assert!(out.contains("interface ThreeArgs { i?: mcp__s.Item }"), "{out}");
    assert_eq!(out.matches("interface Item ").count(), 1, "{out}");
}

#[test]
fn bad_schemas_render_as_unknown_without_panicking() {
    let bad = [
        json!(17),
        json!("object"),
        json!(null),
        json!([1, 2]),
        json!({"type": 3}),
        json!({"type": ["string", 4]}),
        json!({"enum": {}}),
        json!({"anyOf": "x"}),
        json!({"allOf": 1}),
        json!({"$ref": 5}),
        json!({"$ref": "#/properties/a", "properties": {"a": {"$ref": "#/properties/a"}}}),
        json!({"$defs": {"A": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}),
        json!({"$defs": {"A": {"allOf": [{"$ref": "#/$defs/B"}]}, "B": {"$ref": "#/$defs/A"}}, "properties": {"x": {"$ref": "#/$defs/A"}}}),
        json!({"properties": {"a": {"$ref": "#/%zz/%"}}}),
        json!({"properties": {"a": {"$ref": "other.json#/x"}}}),
        json!({"items": [], "additionalItems": 3}),
        json!({"type": "array", "prefixItems": "x", "items": {"$ref": "#"}}),
    ];
    for schema in bad {
        for spec in [native("t", "", schema.clone()), mcp("s", "t", schema.clone(), Some(schema.clone()))] {
            let out = declarations(&[spec]);
            assert!(out.contains("interface Tools"), "{schema}: {out}");
        }
    }
    let out = bare(&[native("t", "", json!({"properties": {"a": {"$ref": "#/properties/a"}}}))]);
    assert!(out.contains("a?: unknown /* recursive $ref #/properties/a */"), "{out}");
}

#[test]
fn output_is_deterministic_in_catalog_order() {
    let specs: Vec<ToolSpec> = crate::tools::native().iter().map(|t| t.spec()).collect();
    let a = declarations(&specs);
    assert_eq!(a, declarations(&specs));
    let positions: Vec<usize> =
        specs.iter().map(|s| a.find(&format!("\n  {}(args", s.name)).expect("declared")).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "not in catalog order");
}
