//! The native tool contract, pinned: every registered native tool has its
//! row in docs/TOOL_CONTRACT.md with the right read-only cell, a non-empty
//! description, a valid JSON Schema, and a schema equal to its canonical
//! JSON snapshot in tests/snapshots/tool_schemas/<name>.json.
//!
//! A deliberate schema change updates the snapshot in the same commit:
//! `UPDATE_SNAPSHOTS=1 cargo test -p codemode --lib contract` rewrites the snapshots,
//! and the diff shows the change.

use std::path::PathBuf;

use codemode_base::json_text::canonical_json;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The rows of the contract table: (name, read-only cell, purpose).
fn contract_rows() -> Vec<(String, String, String)> {
    let doc =
        std::fs::read_to_string(root().join("docs/TOOL_CONTRACT.md")).expect("docs/TOOL_CONTRACT.md exists");
    doc.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (
                cells[0].trim_matches('`').to_owned(),
                cells[1].to_owned(),
                cells.get(2).unwrap_or(&"").to_string(),
            )
        })
        .collect()
}

#[test]
fn every_native_tool_matches_its_contract_row() {
    let rows = contract_rows();
    let specs: Vec<_> = super::native().iter().map(|t| t.spec()).collect();
    assert!(!specs.is_empty());
    for spec in &specs {
        let row = rows
            .iter()
            .find(|r| r.0 == spec.name)
            .unwrap_or_else(|| panic!("docs/TOOL_CONTRACT.md has no row for `{}`", spec.name));
        let want = if spec.is_read_only() { "yes" } else { "no" };
        assert_eq!(row.1, want, "read-only cell of `{}`", spec.name);
        assert!(!row.2.is_empty(), "purpose cell of `{}` is empty", spec.name);
        assert!(!spec.description.trim().is_empty(), "`{}` has no description", spec.name);
        assert!(spec.annotations.read_only.is_some(), "`{}` must say whether it is read-only", spec.name);
        assert!(
            jsonschema::meta::is_valid(&spec.input_schema),
            "the input schema of `{}` is not a valid JSON Schema",
            spec.name
        );
        assert_eq!(spec.input_schema["type"], "object", "`{}` takes an arguments object", spec.name);
    }
    for row in &rows {
        assert!(
            specs.iter().any(|s| s.name == row.0),
            "docs/TOOL_CONTRACT.md lists `{}`, which is not registered",
            row.0
        );
    }
}

#[test]
fn every_native_schema_equals_its_snapshot() {
    let dir = root().join("tests/snapshots/tool_schemas");
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut stale = Vec::new();
    for tool in super::native() {
        let spec = tool.spec();
        let text = canonical_json(&spec.input_schema) + "\n";
        let path = dir.join(format!("{}.json", spec.name));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(snapshot) if snapshot == text => {}
            Ok(_) => stale.push(format!("{} differs from its snapshot", spec.name)),
            Err(_) => stale.push(format!("{} has no snapshot at {}", spec.name, path.display())),
        }
    }
    assert!(
        stale.is_empty(),
        "{}; if the change is deliberate, run `UPDATE_SNAPSHOTS=1 cargo test -p codemode --lib contract` and commit the snapshots",
        stale.join("; ")
    );
}

/// The result shapes (output and metadata schemas) are declared, valid and
/// pinned like the input schemas, in tests/snapshots/tool_results/; that
/// the tools really return them is tests/all/tool_shapes.rs.
#[test]
fn every_native_result_shape_is_valid_and_equals_its_snapshot() {
    let dir = root().join("tests/snapshots/tool_results");
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut stale = Vec::new();
    for tool in super::native() {
        let spec = tool.spec();
        let (Some(content), Some(metadata)) = (&spec.output_schema, &spec.metadata_schema) else {
            panic!(
                "`{}` must declare its output and metadata schemas (crates/codemode/src/catalog/shapes.rs)",
                spec.name
            );
        };
        for schema in [content, metadata] {
            assert!(jsonschema::meta::is_valid(schema), "a result schema of `{}` is not valid", spec.name);
        }
        let text = canonical_json(&serde_json::json!({"content": content, "metadata": metadata})) + "\n";
        let path = dir.join(format!("{}.json", spec.name));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(snapshot) if snapshot == text => {}
            Ok(_) => stale.push(format!("{} differs from its snapshot", spec.name)),
            Err(_) => stale.push(format!("{} has no snapshot at {}", spec.name, path.display())),
        }
    }
    assert!(
        stale.is_empty(),
        "{}; if the change is deliberate, run `UPDATE_SNAPSHOTS=1 cargo test -p codemode --lib contract` and commit the snapshots",
        stale.join("; ")
    );
}

#[test]
fn native_schemas_stay_small() {
    for tool in super::native() {
        let spec = tool.spec();
        let bytes = canonical_json(&spec.input_schema).len();
        assert!(
            bytes <= 1024,
            "the schema of `{}` is {bytes} bytes; keep native schemas under 1 KiB",
            spec.name
        );
    }
}
