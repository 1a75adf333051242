//! The example programs run against this repository and do what they say.

use codemode::{Program, receipt::CallStatus, receipt::RunStatus};

fn run_example(name: &str) -> codemode::Receipt {
    let root = env!("CARGO_MANIFEST_DIR");
    let source = std::fs::read_to_string(format!("{root}/examples/{name}")).unwrap();
    let spill = tempfile::tempdir().unwrap();
    let engine = crate::common::engine_builder().workspace(root).spill_dir(spill.path()).build().unwrap();
    let r = engine.execute_blocking(Program::named(name, source));
    assert_eq!(r.status, RunStatus::Completed, "{name}: {:?}", r.error);
    r
}

#[test]
fn hello_summarises_the_markdown_files() {
    let r = run_example("hello.js");
    assert!(r.value["files"].as_u64().unwrap() >= 3, "{}", r.value);
    // The five largest, biggest first, each with the title its file has.
    let largest = r.value["largest"].as_array().unwrap();
    assert_eq!(largest.len(), 5, "{}", r.value);
    let sizes: Vec<u64> = largest.iter().map(|f| f["lines"].as_u64().unwrap()).collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
    let root = env!("CARGO_MANIFEST_DIR");
    for f in largest {
        let text = std::fs::read_to_string(format!("{root}/{}", f["path"].as_str().unwrap())).unwrap();
        let title = text.lines().find_map(|l| l.strip_prefix("# ")).unwrap();
        assert_eq!(f["title"], title, "{f}");
    }
    assert!(r.calls.iter().all(|c| c.status == CallStatus::Ok));
}

#[test]
fn parallel_reads_counts_the_source_files() {
    let r = run_example("parallel_reads.js");
    let files = r.value["files"].as_u64().unwrap();
    assert!(files >= 10, "{}", r.value);
    assert_eq!(r.calls.len() as u64, files + 1);
}

#[test]
fn caught_tool_error_reports_the_missing_file_and_goes_on() {
    let r = run_example("caught_tool_error.js");
    let report = r.value.as_array().unwrap();
    assert_eq!(report[1]["path"], "CHANGELOG.md");
    assert_eq!(report[1]["error"], "failed");
    assert_eq!(report[2]["first_line"], "[workspace]");
    assert_eq!(r.calls[1].status, CallStatus::Failed);
}

#[test]
fn search_then_read_finds_the_limits_module() {
    let r = run_example("search_then_read.js");
    let path = r.value["path"].as_str().unwrap();
    assert!(path.ends_with("/limits.rs"), "{path}");
    assert!(r.value["excerpt"].as_str().unwrap().contains("Limits"));
}

#[test]
fn typed_search_is_typescript_and_finds_the_limits_module() {
    let r = run_example("typed_search.ts");
    let path = r.value["path"].as_str().unwrap();
    assert!(path.ends_with("/limits.rs"), "{path}");
    assert_eq!(r.value["match"], "exact");
    assert!(r.value["excerpt"].as_str().unwrap().contains("Limits"));
    assert_eq!(r.calls.len(), 3);
}

#[test]
fn mcp_notes_composes_the_filesystem_and_memory_servers() {
    let root = env!("CARGO_MANIFEST_DIR");
    let scratch = tempfile::tempdir().unwrap();
    let memory = scratch.path().join("memory.jsonl");
    let text = std::fs::read_to_string(format!("{root}/examples/mcp.json")).unwrap();
    let env = |name: &str| (name == "CODEMODE_EXAMPLE_MEMORY").then(|| memory.to_string_lossy().into_owned());
    let config =
        codemode::mcp::McpConfig::parse(&text, std::path::Path::new(&format!("{root}/examples")), &env)
            .unwrap();
    let options = codemode::mcp::PoolOptions {
        cache_dir: Some(scratch.path().join("cache")),
        ..codemode::mcp::PoolOptions::default()
    };
    let engine = crate::common::engine_builder()
        .workspace(root)
        .spill_dir(scratch.path().join("spill"))
        .policy(codemode::Policy::full_access())
        .mcp(config, options)
        .build()
        .unwrap();
    let source = std::fs::read_to_string(format!("{root}/examples/mcp_notes.js")).unwrap();
    for _ in 0..2 {
        // Twice: the second run finds the first run's graph and clears it.
        let r = engine.execute_blocking(Program::named("mcp_notes.js", source.clone()));
        assert_eq!(r.status, RunStatus::Completed, "{}", r.to_json_pretty());
        assert!(r.value["documents"].as_u64().unwrap() >= 5, "{}", r.value);
        assert_eq!(r.value["about_typescript"], serde_json::json!(["TYPESCRIPT.md"]));
    }
    assert!(memory.exists(), "the memory server kept its graph in the given file");
}
