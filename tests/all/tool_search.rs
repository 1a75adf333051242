//! `tool_search` and the toolbox through the engine: searches from programs
//! (describe, activate nothing), direct searches (activate, evict, report
//! references), deferred tools, callers, errors.

use codemode::{
    Engine, Program, Tool, ToolSpec, receipt::Caller, receipt::RunStatus, tool::Loading, tool::ToolContext,
    tool::ToolFuture, tool::ToolOutput,
};
use serde_json::{Value, json};

use crate::common::{builder, workspace};

/// A deferred tool named `name` about `topic`, whose input schema is about
/// `schema_bytes` long.
struct Deferred {
    name: String,
    topic: String,
    schema_bytes: usize,
    callers: Vec<Caller>,
}

impl Deferred {
    fn new(name: &str, topic: &str) -> Self {
        Deferred {
            name: name.into(),
            topic: topic.into(),
            schema_bytes: 0,
            callers: vec![Caller::Program, Caller::Direct],
        }
    }
}

impl Tool for Deferred {
    fn spec(&self) -> ToolSpec {
        let schema = json!({
            "type": "object",
            "properties": {"note": {"type": "string", "description": "x".repeat(self.schema_bytes)}},
        });
        ToolSpec::new(self.name.clone(), format!("Works with {}.", self.topic), schema)
            .loading(Loading::Deferred)
            .read_only(true)
            .allowed_callers(&self.callers)
    }
    fn call(&self, args: Value, _: ToolContext) -> ToolFuture {
        let name = self.name.clone();
        Box::pin(async move { Ok(ToolOutput::new(json!({"tool": name, "args": args}))) })
    }
}

fn names(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

fn listed(engine: &Engine) -> Vec<String> {
    engine.listed_tools().into_iter().map(|s| s.name).collect()
}

fn search(engine: &Engine, args: Value) -> Value {
    let out = engine.call_blocking("tool_search", &args);
    assert!(out.is_ok(), "{out:?}");
    out.envelope.unwrap()["content"].clone()
}

#[test]
fn deferred_tools_are_callable_and_found_but_not_listed() {
    let ws = workspace();
    let engine = builder(&ws).tool(Deferred::new("weather_forecast", "weather forecasts")).build().unwrap();
    assert!(!listed(&engine).contains(&"weather_forecast".to_owned()));
    assert!(listed(&engine).contains(&"tool_search".to_owned()));
    let receipt = engine.execute_blocking(Program::new(
        r#"const found = await tools.search("weather forecast");
           const called = await tools.call("weather_forecast", {note: "hi"});
           return {found: found.content.tools.map(t => t.name), called: called.content.tool,
                   first: found.content.tools[0]};"#,
    ));
    assert_eq!(receipt.status, RunStatus::Completed, "{receipt:?}");
    assert_eq!(receipt.value["found"][0], "weather_forecast");
    assert_eq!(receipt.value["called"], "weather_forecast");
    let first = &receipt.value["first"];
    assert_eq!(first["source"], "native");
    assert_eq!(first["annotations"]["readOnlyHint"], true);
    assert_eq!(first["input_schema"]["type"], "object");
    assert_eq!(first["description"], "Works with weather forecasts.");
    // Searching inside a program activated nothing.
    assert!(!listed(&engine).contains(&"weather_forecast".to_owned()));
    assert_eq!(receipt.calls[0].tool, "tool_search");
}

#[test]
fn a_direct_search_activates_deferred_matches_into_the_listed_tools() {
    let ws = workspace();
    let engine = builder(&ws)
        .tool(Deferred::new("weather_forecast", "weather forecasts"))
        .tool(Deferred::new("stock_quote", "stock prices"))
        .build()
        .unwrap();
    let out = search(&engine, json!({"query": "weather"}));
    assert_eq!(names(&out["tools"]), ["weather_forecast"]);
    assert_eq!(out["activated"], json!(["weather_forecast"]));
    assert_eq!(out["evicted_tool_references"], json!([]));
    assert_eq!(out["unavailable_tool_references"], json!([]));
    let now = listed(&engine);
    assert_eq!(now.last().unwrap(), "weather_forecast");
    assert!(!now.contains(&"stock_quote".to_owned()));
    // The model-facing execute_tools now declares it too.
    let described = engine.execute_tools_spec().description;
    assert!(described.contains("\n  weather_forecast(args"), "{described}");
    assert!(!described.contains("stock_quote"));
}

#[test]
fn the_toolbox_evicts_never_called_tools_first_and_says_how_to_reload_them() {
    let ws = workspace();
    let mut b = builder(&ws);
    for i in 0..10 {
        b = b.tool(Deferred::new(&format!("probe_{i}"), &format!("probe number {i}")));
    }
    let engine = b.build().unwrap();
    // Activate probe_0..probe_7, one search each (turns 1-8).
    for i in 0..8 {
        let out = search(&engine, json!({"query": format!("^probe_{i}$"), "mode": "regex"}));
        assert_eq!(out["activated"], json!([format!("probe_{i}")]));
    }
    // Call probe_0 from a program (a turn of its own), then let two turns pass.
    let r = engine.execute_blocking(Program::new(r#"return (await tools.probe_0({})).content.tool"#));
    assert_eq!(r.value, "probe_0");
    engine.call_blocking("read", &json!({"path": "a.txt"}));
    engine.call_blocking("read", &json!({"path": "a.txt"}));
    let out = search(&engine, json!({"query": "^probe_[89]$", "mode": "regex", "limit": 2}));
    assert_eq!(out["activated"], json!(["probe_8", "probe_9"]));
    // Never-called tools go first, earliest activated first; probe_0 was called.
    let evicted = names(&out["evicted_tool_references"]);
    assert_eq!(evicted, ["probe_1", "probe_2"]);
    let reference = &out["evicted_tool_references"][0]["query"];
    assert_eq!(reference, &json!({"query": "^probe_1$", "mode": "regex", "limit": 1}));
    let toolbox: Vec<String> = listed(&engine).into_iter().filter(|n| n.starts_with("probe_")).collect();
    assert_eq!(toolbox.len(), 8);
    assert!(toolbox.contains(&"probe_0".to_owned()));
    // A full toolbox: a search from a program matches tools outside it and
    // changes nothing (not its members, not their order).
    let r = engine.execute_blocking(Program::new(
        r#"return (await tools.search("^probe_[0-9]$", {mode: "regex", limit: 10})).content.tools.length"#,
    ));
    assert_eq!(r.value, json!(10));
    assert_eq!(listed(&engine).into_iter().filter(|n| n.starts_with("probe_")).collect::<Vec<_>>(), toolbox);
    // The reference loads the tool again (evicting the next never-called one).
    let again = search(&engine, reference.clone());
    assert_eq!(again["activated"], json!(["probe_1"]));
    assert_eq!(names(&again["evicted_tool_references"]), ["probe_3"]);
}

#[test]
fn tools_called_this_turn_or_the_last_are_not_evicted_and_the_rest_is_unavailable() {
    let ws = workspace();
    let mut b = builder(&ws);
    for i in 0..9 {
        b = b.tool(Deferred::new(&format!("probe_{i}"), "probes"));
    }
    let engine = b.build().unwrap();
    let out = search(&engine, json!({"query": "^probe_[0-7]$", "mode": "regex", "limit": 8}));
    assert_eq!(out["activated"].as_array().unwrap().len(), 8);
    // One program calls all eight: this turn.
    let r = engine.execute_blocking(Program::new(
        "await Promise.all([0,1,2,3,4,5,6,7].map(i => tools.call(`probe_${i}`, {}))); return 1",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{r:?}");
    // The next turn is a search: all eight were called in the last turn.
    let out = search(&engine, json!({"query": "^probe_8$", "mode": "regex"}));
    assert_eq!(out["activated"], json!([]));
    let unavailable = &out["unavailable_tool_references"][0];
    assert_eq!(unavailable["name"], "probe_8");
    assert_eq!(unavailable["query"]["query"], "^probe_8$");
    assert!(unavailable["reason"].as_str().unwrap().contains("called in this turn or the last"));
    // It is still callable by name from a program.
    let r = engine.execute_blocking(Program::new("return (await tools.probe_8({})).content.tool"));
    assert_eq!(r.value, "probe_8");
}

#[test]
fn schemas_over_the_toolbox_bound_are_unavailable() {
    let ws = workspace();
    let mut big = Deferred::new("huge_schema_tool", "huge schemas");
    big.schema_bytes = 20_000;
    let engine = builder(&ws).tool(big).build().unwrap();
    let out = search(&engine, json!({"query": "huge schemas"}));
    assert_eq!(out["tools"][0]["name"], "huge_schema_tool");
    assert!(
        out["unavailable_tool_references"][0]["reason"].as_str().unwrap().contains("larger than the toolbox")
    );
}

#[test]
fn programs_only_find_tools_programs_may_call() {
    let ws = workspace();
    let mut direct_only = Deferred::new("admin_reset", "resetting the admin console");
    direct_only.callers = vec![Caller::Direct];
    let engine = builder(&ws).tool(direct_only).build().unwrap();
    let r = engine.execute_blocking(Program::new(
        r#"return (await tools.search("admin console reset")).content.tools.map(t => t.name)"#,
    ));
    assert!(!r.value.as_array().unwrap().contains(&json!("admin_reset")), "{:?}", r.value);
    let out = search(&engine, json!({"query": "admin console reset"}));
    assert_eq!(out["tools"][0]["name"], "admin_reset");
}

#[test]
fn tools_denied_by_a_whole_tool_rule_are_not_found() {
    let ws = workspace();
    let mut policy = codemode::Policy::full_access();
    policy.rules.deny.push(codemode::policy::Rule::parse("bash").unwrap());
    let engine = builder(&ws).policy(policy).build().unwrap();
    let out = search(&engine, json!({"query": "run a shell command", "limit": 50}));
    assert!(!names(&out["tools"]).contains(&"bash".to_owned()));
}

#[test]
fn search_options_and_errors_reach_programs() {
    let ws = workspace();
    let engine = builder(&ws).build().unwrap();
    let r = engine.execute_blocking(Program::new(
        r#"const a = await tools.search("^grep_files$", {mode: "regex", limit: 1});
           let bad = null;
           try { await tools.search("(", {mode: "regex"}); } catch (e) { bad = [e.name, e.kind, e.message]; }
           let kind = null;
           try { await tools.search("x", "regex"); } catch (e) { kind = e.name; }
           let limit = null;
           try { await tools.search("read", {limit: 500}); } catch (e) { limit = e.kind; }
           let unknown = null;
           try { await tools.search("read", {fuzzy: true}); } catch (e) { unknown = e.message; }
           const itself = await tools.search("find tools by what they do", {limit: 50});
           const object = await tools.search({query: "^grep_files$", mode: "regex", limit: 1});
           let objectUnknown = null;
           try { await tools.search({query: "read", fuzzy: true}); } catch (e) { objectUnknown = e.message; }
           return {a: a.content.tools.map(t => t.name), bad, kind, limit, unknown,
                   itself: itself.content.tools.map(t => t.name),
                   object: object.content.tools.map(t => t.name), objectUnknown};"#,
    ));
    assert_eq!(r.status, RunStatus::Completed, "{r:?}");
    assert_eq!(r.value["a"], json!(["grep_files"]));
    assert_eq!(r.value["bad"][0], "ToolError");
    assert_eq!(r.value["bad"][1], "failed");
    assert!(r.value["bad"][2].as_str().unwrap().contains("not a valid regular expression"), "{}", r.value);
    assert_eq!(r.value["kind"], "TypeError");
    assert_eq!(r.value["limit"], "refused", "the schema bounds limit");
    assert!(r.value["unknown"].as_str().unwrap().contains("unknown option \"fuzzy\""), "{}", r.value);
    assert!(!r.value["itself"].as_array().unwrap().contains(&json!("tool_search")), "{}", r.value);
    // The object form every other call takes works too.
    assert_eq!(r.value["object"], json!(["grep_files"]));
    assert!(r.value["objectUnknown"].as_str().unwrap().contains("unknown option \"fuzzy\""), "{}", r.value);
}
