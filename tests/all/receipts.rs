//! The receipt and the result envelope: shape, bounds and spill files.

use codemode::{Limits, Program, receipt::CallStatus, receipt::RECEIPT_VERSION, receipt::RunStatus};
use serde_json::{Value, json};

use crate::common::{engine_with, run, workspace};

#[test]
fn the_receipt_json_has_exactly_the_documented_fields() {
    let r = run("await tools.echo({a: 1}); try { await tools.fail({}); } catch {} return 'v';");
    let v: Value = serde_json::from_str(&r.to_json()).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "approval_wait_ms",
            "calls",
            "catalog_sha256",
            "elapsed_ms",
            "error",
            "logs",
            "logs_dropped",
            "receipt_version",
            "run_id",
            "status",
            "value",
            "value_truncated"
        ]
    );
    assert_eq!(v["receipt_version"], json!(RECEIPT_VERSION));
    assert_eq!(v["status"], json!("completed"));
    let call = &v["calls"][1];
    let mut keys: Vec<&str> = call.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["bytes", "caller", "decision", "elapsed_ms", "error", "note", "seq", "status", "tool", "truncated"]
    );
    assert_eq!(call["caller"], json!("program"));
    assert_eq!(call["decision"], json!("auto"));
    assert_eq!(call["status"], json!("failed"));
    assert_eq!(v["catalog_sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn a_result_over_the_bound_is_truncated_and_the_spill_file_holds_every_byte() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.result_bytes = 1000;
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new(
        "const r = await tools.blob({bytes: 5000}); return {len: r.content.length, t: r.truncated};",
    ));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value["len"], json!(1000));
    let t = &r.value["t"];
    assert_eq!(t["original_bytes"], json!(5000));
    assert_eq!(t["kept_bytes"], json!(1000));
    let path = t["spill_path"].as_str().unwrap();
    let spilled = std::fs::read_to_string(path).unwrap();
    assert_eq!(spilled, "0123456789".repeat(500));
    // In the run's folder, outside the workspace.
    assert!(path.starts_with(crate::common::runs_dir(ws.path()).to_str().unwrap()), "{path}");
    let call = &r.calls[0];
    assert_eq!(call.bytes, 5000);
    assert_eq!(call.truncated.as_ref().unwrap().spill_path.as_deref(), Some(path));
}

#[test]
fn a_result_at_the_bound_is_kept_whole() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.result_bytes = 1000;
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new(
        "const r = await tools.blob({bytes: 1000}); return [r.content.length, r.truncated];",
    ));
    assert_eq!(r.value, json!([1000, null]));
}

#[test]
fn a_structured_result_over_the_bound_becomes_a_prefix_of_its_json() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.result_bytes = 50;
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new(
        "const r = await tools.echo({list: Array.from({length: 100}, (_, i) => i)}); return [typeof r.content, r.content, r.truncated.spill_path];",
    ));
    assert_eq!(r.value[0], json!("string"));
    assert_eq!(r.value[1].as_str().unwrap().len(), 50);
    let whole: Value =
        serde_json::from_str(&std::fs::read_to_string(r.value[2].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(whole["list"].as_array().unwrap().len(), 100);
}

#[test]
fn a_return_value_over_the_bound_is_cut_and_spilled() {
    let ws = workspace();
    let mut limits = Limits::default();
    limits.value_bytes = 100;
    let engine = engine_with(&ws, limits);
    let r = engine.execute_blocking(Program::new("return Array.from({length: 1000}, (_, i) => 'é' + i);"));
    assert_eq!(r.status, RunStatus::Completed);
    let t = r.value_truncated.unwrap();
    assert!(t.kept_bytes <= 100 && t.kept_bytes >= 97, "{t:?}");
    assert!(t.original_bytes.unwrap() > 1000);
    assert_eq!(r.value.as_str().unwrap().len() as u64, t.kept_bytes);
    let whole: Value =
        serde_json::from_str(&std::fs::read_to_string(t.spill_path.unwrap()).unwrap()).unwrap();
    assert_eq!(whole.as_array().unwrap().len(), 1000);
}

#[test]
fn every_outcome_has_a_receipt_with_the_catalog_digest() {
    let ws = workspace();
    let engine = engine_with(&ws, crate::common::deadline(300));
    let digest = engine.catalog_digest().to_owned();
    for src in ["return 1;", "throw new Error('x');", "const = ;", "while (true) {}"] {
        let r = engine.execute_blocking(Program::new(src));
        assert_eq!(r.catalog_sha256, digest, "{src}");
        assert!(r.run_id.starts_with("run-"));
        assert!(r.elapsed_ms >= 0.0);
    }
}

#[test]
fn call_receipts_record_bytes_and_time() {
    let r = run("await tools.blob({bytes: 1234}); await tools.sleep({ms: 20});");
    assert_eq!(r.calls[0].bytes, 1234);
    assert_eq!(r.calls[0].status, CallStatus::Ok);
    assert!(r.calls[1].elapsed_ms >= 19.0, "{}", r.calls[1].elapsed_ms);
}

#[test]
fn a_sandbox_runs_one_program_only() {
    let ws = workspace();
    let engine = engine_with(&ws, Limits::default());
    let mut sandbox = engine.vm().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let first = rt.block_on(sandbox.run(Program::new("return (await tools.sleep({ms: 1})).content.slept;")));
    assert_eq!(first.value, json!(1));
    let second = rt.block_on(sandbox.run(Program::new("return 2;")));
    assert_eq!(second.status, RunStatus::Failed);
    assert!(second.error.unwrap().message.contains("one program only"));
}
