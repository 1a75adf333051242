//! `codemode tools [--json] [--all] [--digest]`: the tools a model is
//! shown (`execute_tools` first, then the eager tools), every tool with
//! `--all`, or only the catalog digest.

use codemode::{Engine, ToolSpec, tool::Loading};
use serde_json::{Value, json};

use super::engine_args::CatalogArgs;

/// Arguments of `codemode tools`.
#[derive(Debug, clap::Args)]
pub(crate) struct ToolsArgs {
    /// Print JSON on stdout: {"catalog_sha256", "tools": [{name,
    /// description, input_schema, output_schema, annotations, source,
    /// loading}]}.
    #[arg(long)]
    json: bool,
    /// Also list deferred tools (callable by exact name, found by search).
    #[arg(long)]
    all: bool,
    /// Print only the catalog digest (sha256, hex).
    #[arg(long, conflicts_with_all = ["json", "all"])]
    digest: bool,
    #[command(flatten)]
    catalog: CatalogArgs,
}

/// Runs `codemode tools`; exit 0, or 2 for a bad invocation or config.
pub(crate) fn tools(args: ToolsArgs) -> anyhow::Result<u8> {
    let engine = args.catalog.engine(None).build()?;
    if args.digest {
        super::print_stdout(&format!("{}\n", engine.catalog_digest()))?;
        return Ok(0);
    }
    let shown = shown_tools(&engine, args.all);
    let deferred_hidden = if args.all {
        0
    } else {
        engine.tool_specs().iter().filter(|s| s.loading == Loading::Deferred).count()
    };
    if args.json {
        let tools: Vec<Value> = shown.iter().map(tool_json).collect();
        let out = json!({"catalog_sha256": engine.catalog_digest(), "tools": tools});
        super::print_stdout(&(serde_json::to_string_pretty(&out)? + "\n"))?;
        return Ok(0);
    }
    let width = shown.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let source_width = shown.iter().map(|s| s.source.label().len()).max().unwrap_or(0);
    let mut text = String::new();
    for spec in &shown {
        let flags = if spec.is_read_only() { "read-only" } else { "" };
        let first = spec.description.lines().next().unwrap_or("");
        let first = first.split(". ").next().unwrap_or(first).trim_end_matches('.');
        text.push_str(&format!(
            "{:width$}  {:source_width$}  {:9}  {}\n",
            codemode::display_text::one_line(&spec.name),
            codemode::display_text::one_line(&spec.source.label()),
            flags,
            codemode::display_text::one_line(first)
        ));
    }
    if deferred_hidden > 0 {
        text.push_str(&format!(
            "({deferred_hidden} deferred tools not listed: `codemode tools --all` lists them, `codemode search QUERY` finds them)\n"
        ));
    }
    text.push_str(&format!("catalog sha256 {}\n", engine.catalog_digest()));
    super::print_stdout(&text)?;
    Ok(0)
}

/// `execute_tools`, then the listed tools (or every tool with `all`).
fn shown_tools(engine: &Engine, all: bool) -> Vec<ToolSpec> {
    let mut shown = vec![engine.execute_tools_spec()];
    shown.extend(if all { engine.usable_tools() } else { engine.listed_tools() });
    shown
}

fn tool_json(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "output_schema": spec.output_schema,
        "annotations": spec.annotations,
        "source": spec.source.label(),
        "loading": spec.loading,
    })
}
