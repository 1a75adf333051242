//! Issue 31 (fuzz target `gate_path`): a backslash spelt as a separator.
//! On Unix `docs\..\x.txt` is one file at the workspace root, but the gate
//! matched rules against `docs/../x.txt`, so `allow = ["write(docs/**)"]`
//! let a program write outside `docs/` unasked. Defence
//! (crates/codemode/src/gate/primary.rs, `shown`): the gate's spelling of a
//! path keeps a backslash where it is part of a name, so rules see the
//! path the tool opens.

use codemode::config::ConfigFile;
use codemode::policy::{Rule, Rules};
use codemode::{Policy, Program, receipt::RunStatus};

#[test]
fn an_allow_rule_on_a_folder_does_not_cover_a_backslashed_name_at_the_root() {
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("docs")).unwrap();
    let allow = vec![Rule::parse("write(docs/**)").unwrap()];
    let policy = Policy { rules: Rules { allow, ..Rules::default() }, ..Policy::default() };
    let engine = crate::common::engine_builder()
        .workspace(&root)
        .config(ConfigFile::with_policy(policy))
        .build()
        .unwrap();
    let source = "const out = {};
        try { await tools.write({path: 'docs\\\\..\\\\x.txt', content: 'x'}); out.outside = 'written'; }
        catch (e) { out.outside = e.kind; }
        await tools.write({path: 'docs/in.txt', content: 'x'});
        return out;";
    let receipt = engine.execute_blocking(Program::new(source));
    assert_eq!(receipt.status, RunStatus::Completed, "{:?}", receipt.error);
    assert!(root.join("docs/in.txt").is_file(), "the rule still allows what it names");
    assert_ne!(receipt.value["outside"], "written", "{}", receipt.value);
    assert!(!root.join("docs\\..\\x.txt").exists(), "a file outside docs/ was written unasked");
}
