//! `codemode search QUERY [--regex] [--limit N] [--json]`: a direct
//! `tool_search` call, through the gate like any direct call.

use serde_json::{Value, json};

use super::engine_args::CatalogArgs;

/// Arguments of `codemode search`.
#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    /// Words describing the tool, or a regular expression with --regex.
    query: String,
    /// Match a regular expression (Rust syntax) on names, then
    /// descriptions, then parameters, instead of ranking words with BM25.
    #[arg(long)]
    regex: bool,
    /// Most tools to show, 1-50 [default: 5].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=50))]
    limit: Option<u64>,
    /// Print tool_search's result as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Who approves starting an MCP server the search needs
    /// (`mcp_connect__<server>`): deny, allow, prompt or cmd:PROGRAM
    /// [default: prompt on a terminal, else deny].
    #[arg(long, value_name = "APPROVER")]
    approve: Option<String>,
    #[command(flatten)]
    catalog: CatalogArgs,
}

/// Runs `codemode search`; exit 0 (even with no match), 1 when the search
/// failed (a bad regex), 2 for a bad invocation or config.
pub(crate) fn search(args: SearchArgs) -> anyhow::Result<u8> {
    if args.query.trim().is_empty() {
        anyhow::bail!("QUERY is empty: give a few words (\"list directory\") or, with --regex, a pattern");
    }
    let engine = args.catalog.engine(args.approve.clone()).build()?;
    let mut call = json!({"query": args.query, "mode": if args.regex { "regex" } else { "bm25" }});
    if let Some(limit) = args.limit {
        call["limit"] = json!(limit);
    }
    let outcome = match super::direct_call(&engine, codemode::tool::TOOL_SEARCH, &call)? {
        Ok(outcome) => outcome,
        Err(code) => return Ok(code),
    };
    let Some(envelope) = outcome.envelope else {
        let why = outcome.error_message().unwrap_or("the search failed");
        if args.json {
            super::print_stdout(&(serde_json::to_string_pretty(&json!({"error": outcome.error}))? + "\n"))?;
        }
        eprintln!("codemode: search: {}", super::run::printable(why));
        return Ok(1);
    };
    let result = &envelope["content"];
    if args.json {
        super::print_stdout(&(serde_json::to_string_pretty(result)? + "\n"))?;
        return Ok(0);
    }
    let found = result["tools"].as_array().cloned().unwrap_or_default();
    for tool in result["unavailable"].as_array().into_iter().flatten() {
        eprintln!("codemode: unavailable: {}: {}", str_of(&tool["name"]), str_of(&tool["why"]));
    }
    for server in result["started_servers"].as_array().into_iter().flatten() {
        super::note!("started MCP server `{}` to search its tools", str_of(server));
    }
    for server in result["unlisted_servers"].as_array().into_iter().flatten() {
        let (name, state, why) = (str_of(&server["name"]), str_of(&server["state"]), str_of(&server["why"]));
        eprintln!("codemode: MCP server `{name}` not listed ({state}): {why}");
    }
    if found.is_empty() {
        eprintln!("codemode: no tool matches {:?}", args.query);
        return Ok(0);
    }
    let mut text = String::new();
    for (i, tool) in found.iter().enumerate() {
        let description = tool["description"].as_str().unwrap_or("");
        let first = description.split(". ").next().unwrap_or(description).trim_end_matches('.');
        text.push_str(&format!(
            "{}. {} ({})\n   {}\n   args: {}\n",
            i + 1,
            str_of(&tool["name"]),
            str_of(&tool["source"]),
            codemode::display_text::one_line(first),
            parameters(&tool["input_schema"]),
        ));
    }
    super::print_stdout(&text)?;
    Ok(0)
}

fn str_of(v: &Value) -> String {
    codemode::display_text::one_line(v.as_str().unwrap_or("")).into_owned()
}

/// `path, offset?, limit?`: the top-level parameters, optional ones marked.
fn parameters(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema["properties"].as_object() else { return "(none)".into() };
    if props.is_empty() {
        return "(none)".into();
    }
    let names: Vec<String> = props
        .keys()
        .map(|k| if required.contains(&k.as_str()) { k.clone() } else { format!("{k}?") })
        .collect();
    codemode::display_text::one_line(&names.join(", ")).into_owned()
}
