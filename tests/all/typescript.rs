//! TypeScript declarations (`codemode::tool::declarations`) for the native tools,
//! the reference MCP servers' real schemas (captured by
//! tests/fixtures/schemas/capture.py) and hand-made hard cases, checked by
//! the real TypeScript compiler (tests/node, pinned in package.json).

use std::path::{Path, PathBuf};
use std::process::Command;

use codemode::{ToolSpec, tool::Annotations, tool::DeclarationOptions, tool::Loading, tool::ToolSource};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schemas")
}

/// The tools of one captured `tools/list` fixture as MCP tool specs named
/// `mcp__<server>__<tool>` (the server name with characters outside
/// `[A-Za-z0-9_-]` as `_`).
fn mcp_specs(file: &str) -> Vec<ToolSpec> {
    let text = std::fs::read_to_string(fixtures().join(file)).expect("fixture exists");
    let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
    let server = fixture["server"].as_str().expect("fixture names its server").to_owned();
    let prefix: String = server
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    fixture["tools"]
        .as_array()
        .expect("fixture lists tools")
        .iter()
        .map(|t| {
            let mut spec = ToolSpec::new(
                format!("mcp__{prefix}__{}", t["name"].as_str().expect("tool name")),
                t["description"].as_str().unwrap_or(""),
                t["inputSchema"].clone(),
            )
            .source(ToolSource::Mcp { server: server.clone() })
            .loading(Loading::Deferred);
            spec.output_schema = t.get("outputSchema").cloned();
            spec.annotations = t
                .get("annotations")
                .map(|a| serde_json::from_value::<Annotations>(a.clone()).unwrap())
                .unwrap_or_default();
            spec
        })
        .collect()
}

/// The hard cases again as native tools, so their types are written inline.
fn hard_cases_native() -> Vec<ToolSpec> {
    let text = std::fs::read_to_string(fixtures().join("hard_cases.json")).unwrap();
    let fixture: Value = serde_json::from_str(&text).unwrap();
    fixture["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let mut spec = ToolSpec::new(
                t["name"].as_str().unwrap(),
                t["description"].as_str().unwrap_or(""),
                t["inputSchema"].clone(),
            );
            spec.output_schema = t.get("outputSchema").cloned();
            spec
        })
        .collect()
}

const REAL: [&str; 7] = [
    "everything.json",
    "filesystem.json",
    "memory.json",
    "time.json",
    "git.json",
    "fetch.json",
    "sequential-thinking.json",
];

/// The native tools (from a real engine), every real MCP tool, and the
/// hard cases as MCP and as native tools.
fn all_specs() -> (Vec<ToolSpec>, usize) {
    let ws = tempfile::tempdir().unwrap();
    let engine = crate::common::engine_builder().workspace(ws.path()).build().unwrap();
    let mut specs = engine.tool_specs();
    for file in REAL {
        specs.extend(mcp_specs(file));
    }
    let real = specs.len();
    specs.extend(mcp_specs("hard_cases.json"));
    specs.extend(hard_cases_native());
    (specs, real)
}

fn tsc() -> PathBuf {
    let tsc = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/node_modules/.bin/tsc");
    assert!(
        tsc.exists(),
        "the TypeScript compiler is missing at {}: run `npm ci --prefix tests/node` (pinned in tests/node/package.json)",
        tsc.display()
    );
    tsc
}

/// Runs `tsc --noEmit --strict` on `files` (name, text) in a fresh folder;
/// returns whether it passed and what it printed.
pub(crate) fn compile(files: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let out = Command::new(tsc())
        .args(["--noEmit", "--strict", "--target", "es2022", "--lib", "es2022"])
        .args(files.iter().map(|(name, _)| *name))
        .current_dir(dir.path())
        .output()
        .expect("tsc runs (is node installed?)");
    let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), shown)
}

/// The declarations of all specs, with the line numbers shown on failure.
fn show(dts: &str) -> String {
    dts.lines().enumerate().map(|(i, l)| format!("{:5} {l}\n", i + 1)).collect()
}

#[test]
fn declarations_for_natives_real_servers_and_hard_cases_compile_with_tsc() {
    let (specs, real) = all_specs();
    // Every native tool plus every tool of the seven reference servers.
    assert!(real >= 30, "only {real} real schemas");
    let dts = codemode::tool::declarations(&specs);
    for spec in &specs {
        let quoted = format!("\"{}\"", spec.name);
        let declared = dts.contains(&format!("\n  {}(args", spec.name))
            || dts.contains(&format!("\n  {quoted}(args"))
            || dts.contains(&format!("\n  call(name: {quoted}, args"));
        assert!(declared, "`{}` is not declared", spec.name);
    }
    for server in ["everything", "filesystem", "memory", "time", "git", "fetch", "hard_cases"] {
        assert!(dts.contains(&format!("declare namespace mcp__{server} {{")), "no namespace for {server}");
    }
    assert_eq!(dts, codemode::tool::declarations(&specs), "the output is deterministic");

    let usage = std::fs::read_to_string(fixtures().join("usage.ts")).unwrap();
    let (ok, output) = compile(&[("tools.d.ts", &dts), ("usage.ts", &usage)]);
    assert!(ok, "tsc rejected the declarations or the usage:\n{output}\n--- tools.d.ts ---\n{}", show(&dts));
}

#[test]
fn wrong_argument_types_fail_tsc() {
    let (specs, _) = all_specs();
    let dts = codemode::tool::declarations(&specs);
    let wrong = std::fs::read_to_string(fixtures().join("wrong_args.ts")).unwrap();
    let (ok, output) = compile(&[("tools.d.ts", &dts), ("wrong_args.ts", &wrong)]);
    assert!(!ok, "tsc accepted a number for read's path:\n{output}");
    assert!(output.contains("wrong_args.ts(4,") && output.contains("TS2322"), "{output}");
    assert!(!output.contains("tools.d.ts("), "the declarations themselves have errors:\n{output}");
}

#[test]
fn a_preamble_and_separately_rendered_tools_merge() {
    let (specs, _) = all_specs();
    let natives: Vec<&ToolSpec> = specs.iter().filter(|s| s.source == ToolSource::Native).take(6).collect();
    let time = mcp_specs("time.json");
    let first = codemode::tool::declarations(natives);
    let more = codemode::tool::declarations_with(&time, &DeclarationOptions::new().preamble(false));
    assert!(!more.contains("declare const tools") && !more.contains("ToolResult<T"), "{more}");
    let usage = r#"
async function main(): Promise<string> {
  const r = await tools.read({ path: "a" });
  const t = await tools.mcp__time__get_current_time({ timezone: "UTC" });
  const c = await tools.call("mcp__time__get_current_time", { timezone: "UTC" });
  // @ts-expect-error: the merged declarations keep their types
  await tools.call("mcp__time__get_current_time", { timezone: 1 });
  return `${r.content} ${t.truncated === null ? t.content.is_dst : ""} ${c.metadata}`;
}
void main();
"#;
    let dts = format!("{first}\n{more}");
    let (ok, output) = compile(&[("tools.d.ts", &dts), ("usage.ts", usage)]);
    assert!(ok, "{output}\n--- tools.d.ts ---\n{}", show(&dts));
}
