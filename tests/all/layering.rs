//! The layering the workspace declares (docs/ARCHITECTURE.md): crates and
//! the engine crate's modules import only downwards. Cargo refuses a cycle
//! between crates; this check also refuses an import that points up the
//! declared order, between crates and between the top-level modules of
//! crates/codemode, so the layering cannot drift.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The crates, top to bottom: a crate may depend only on crates of a
/// lower level (a greater number).
const CRATE_LEVELS: &[(&str, u8)] = &[
    ("codemode-cli", 0),
    ("codemode-serve", 1),
    ("codemode-journal-postgres", 1),
    ("codemode-otel", 1),
    ("codemode", 2),
    ("codemode-program", 3),
    ("codemode-sandbox", 3),
    ("codemode-base", 4),
];

/// The top-level modules of crates/codemode/src, top to bottom: a module
/// may import only modules of a lower level (a greater number). The order
/// is the data flow: the engine runs a VM; the VM hands calls to the gate
/// (through the `vm::calls::CallHost` trait the engine implements); the
/// gate decides and the tools and MCP client execute; the catalog holds
/// what they are; the journal records; receipts, confinement, trust and
/// rules are the vocabulary below them all. The configuration file
/// (`config`) is read by the engine alone and names the gate's policy, the
/// journal's settings and the sandbox's, so it sits between them, beside
/// the VM (which neither reads it nor is read by it). `telemetry` (trace
/// contexts and the sink a traced run goes to) sits beside the journal:
/// the catalog's `ToolContext` and the MCP client carry a call's context,
/// and it reads receipts.
const MODULE_LEVELS: &[(&str, u8)] = &[
    ("fuzzing", 0),
    ("error", 0),
    ("engine", 1),
    ("vm", 2),
    ("config", 2),
    ("gate", 3),
    ("tools", 4),
    ("mcp", 4),
    ("catalog", 5),
    ("journal", 6),
    ("telemetry", 6),
    ("receipt", 7),
    ("sandbox", 8),
    ("trust", 8),
    ("rule", 9),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `codemode-*` crates a manifest depends on (normal and
/// target-specific dependencies; not dev-dependencies).
fn codemode_dependencies(manifest: &str) -> Vec<String> {
    let mut deps = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]"
                || (line.starts_with("[target.") && line.ends_with(".dependencies]"));
            continue;
        }
        if !in_deps {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if name == "codemode" || name.starts_with("codemode-") {
            deps.push(name.to_owned());
        }
    }
    deps
}

/// The package name of a manifest.
fn package_name(manifest: &str) -> String {
    let package = manifest.split("[package]").nth(1).expect("a [package] table");
    let line = package.lines().find(|l| l.trim_start().starts_with("name")).expect("a name");
    line.split('"').nth(1).expect("a quoted name").to_owned()
}

fn manifests() -> Vec<PathBuf> {
    let mut found = vec![root().join("Cargo.toml")];
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let path = entry.unwrap().path().join("Cargo.toml");
        if path.is_file() {
            found.push(path);
        }
    }
    found
}

fn level(levels: &[(&str, u8)], name: &str) -> Option<u8> {
    levels.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

#[test]
fn crates_depend_only_on_lower_crates() {
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    for path in manifests() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = package_name(&text);
        let from = level(CRATE_LEVELS, &name)
            .unwrap_or_else(|| panic!("{name} ({}) has no place in CRATE_LEVELS: add it", path.display()));
        for dep in codemode_dependencies(&text) {
            let to =
                level(CRATE_LEVELS, &dep).unwrap_or_else(|| panic!("{dep} has no place in CRATE_LEVELS"));
            if to <= from {
                wrong.push(format!("{name} -> {dep}"));
            }
        }
        seen.push(name);
    }
    assert!(wrong.is_empty(), "dependencies against the declared order: {wrong:?}");
    for (name, _) in CRATE_LEVELS {
        assert!(seen.iter().any(|s| s == name), "CRATE_LEVELS names {name}, which is not in the workspace");
    }
}

/// The non-test code of a source file: without comment lines, and without
/// a `#[cfg(test)]` (or `#[cfg(all(test, ...))]`) module and what follows
/// it (test modules close the files here).
fn code_of(text: &str) -> String {
    let cut = ["#[cfg(test)]\nmod ", "#[cfg(all(test"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(text.len());
    text[..cut].lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The top-level modules `code` names through `crate::` (paths and `use
/// crate::{a, b}` groups), with the crate root's re-exports (`crate::Engine`)
/// traced to the module that defines them.
fn modules_named(code: &str, reexports: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        if i > 0 {
            let before = code.as_bytes()[i - 1];
            if before.is_ascii_alphanumeric() || before == b'_' {
                continue; // `codemode_base::...`, not `crate::`
            }
        }
        let rest = &code[i + "crate::".len()..];
        let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end].split(',').map(|p| p.trim().split("::").next().unwrap_or("").trim()).collect()
        } else {
            vec![rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or("")]
        };
        for name in names.into_iter().filter(|n| !n.is_empty()) {
            let module = reexports.get(name).cloned().unwrap_or_else(|| name.to_owned());
            found.push(module);
        }
    }
    found
}

/// What the crate root re-exports from its own modules: name -> module.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for item in lib.split("pub use ").skip(1) {
        let item = &item[..item.find(';').unwrap_or(item.len())];
        let Some((module, names)) = item.split_once("::") else { continue };
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            let name = name.trim().rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                map.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    map
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every import against [`MODULE_LEVELS`] in the engine crate's sources,
/// as `from -> to (file)`.
fn module_violations(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let reexports = root_reexports(&code_of(&lib));
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut wrong = Vec::new();
    for path in files {
        let rel = path.strip_prefix(src).unwrap();
        let stem =
            rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned();
        let name = path.file_stem().unwrap().to_string_lossy();
        if stem == "lib" || name == "tests" || name.ends_with("_tests") {
            continue;
        }
        let from = level(MODULE_LEVELS, &stem)
            .unwrap_or_else(|| panic!("module `{stem}` has no place in MODULE_LEVELS: add it"));
        let code = code_of(&std::fs::read_to_string(&path).unwrap());
        for to_name in modules_named(&code, &reexports) {
            if to_name == stem {
                continue;
            }
            // Names that are not modules of this crate (macros, the crate
            // root's own items) have no level and are not imports.
            if let Some(to) = level(MODULE_LEVELS, &to_name)
                && to <= from
            {
                wrong.push(format!("{stem} -> {to_name} ({})", rel.display()));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    wrong
}

#[test]
fn engine_modules_import_only_lower_modules() {
    let src = root().join("crates/codemode/src");
    let wrong = module_violations(&src);
    assert!(wrong.is_empty(), "imports against the declared order (MODULE_LEVELS): {wrong:#?}");
    // Every declared module exists, so the list says what the crate is.
    for (name, _) in MODULE_LEVELS {
        assert!(
            src.join(name).is_dir() || src.join(format!("{name}.rs")).is_file(),
            "MODULE_LEVELS names `{name}`, which is not a module of crates/codemode"
        );
    }
}

#[test]
fn the_check_sees_an_upward_import_in_every_form() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod engine;\nmod receipt;\npub use engine::{Engine, Run};\n")
        .unwrap();
    std::fs::create_dir(src.join("receipt")).unwrap();
    std::fs::create_dir(src.join("engine")).unwrap();
    std::fs::write(src.join("engine/mod.rs"), "use crate::receipt::Receipt;\n").unwrap();
    let forms = [
        ("path.rs", "fn f() { let _ = crate::engine::run(); }\n"),
        ("group.rs", "use crate::{engine, trust};\n"),
        ("reexport.rs", "fn f(_: crate::Engine) {}\n"),
    ];
    for (file, text) in forms {
        std::fs::write(src.join("receipt").join(file), text).unwrap();
    }
    // Comments and test modules are not imports.
    std::fs::write(
        src.join("receipt/mod.rs"),
        "/// See [`crate::engine::Engine`].\nfn g() {}\n#[cfg(test)]\nmod tests {\n    use crate::engine::Engine;\n}\n",
    )
    .unwrap();
    let wrong = module_violations(src);
    assert_eq!(
        wrong,
        [
            "receipt -> engine (receipt/group.rs)",
            "receipt -> engine (receipt/path.rs)",
            "receipt -> engine (receipt/reexport.rs)",
        ],
        "{wrong:#?}"
    );
    assert_eq!(
        codemode_dependencies(
            "[dependencies]\ncodemode.workspace = true\n[dev-dependencies]\ncodemode-base = 1\n"
        ),
        ["codemode"]
    );
}
