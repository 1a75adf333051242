//! Exact renderings of small schemas.

use serde_json::{Value, json};

use super::*;
use crate::catalog::Loading;

fn native(name: &str, schema: Value) -> ToolSpec {
    ToolSpec::new(name, "", schema)
}

/// The `interface Tools` body line(s) for one native tool, without the
/// preamble.
fn members(spec: &ToolSpec) -> String {
    declarations_with([spec], &DeclarationOptions::new().preamble(false))
}

#[test]
fn print_natives() {
    let specs: Vec<ToolSpec> = crate::tools::native().iter().map(|t| t.spec()).collect();
    println!("{}", declarations(&specs));
    let _ = (native("x", json!({})), Loading::Eager, members(&native("x", json!({}))));
}
