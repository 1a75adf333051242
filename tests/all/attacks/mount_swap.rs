//! A reviewer's break of the sandbox's read-only and writable binds: each
//! looked its path up twice by name (as the mount point, then as the
//! source), so a concurrent call swapping a folder the sandbox mounts
//! (`.git`, made during the run) with a link to the state folder, with
//! `renameat2(RENAME_EXCHANGE)` in a loop, could have the folder found as
//! the mount point and the link's target as the source: the whole state
//! folder (every run's journals) appeared at `<workspace>/.git`, beside its
//! cover at its own path. Now the path is looked up once, mounted from and
//! onto that descriptor, and checked again after the remount. A sampling
//! test: the window is a few system calls wide; without the fix it was hit
//! after 127 and 41 calls in two tries here (300 are made).

use codemode::Program;
use codemode::receipt::RunStatus;

/// Swaps `.git` (a folder) and `gl` (a link to the folder given) until a
/// file `stop` appears or a minute passes; leaves `.git` the folder.
const FLIPPER: &str = r#"import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir(".git"); os.symlink(sys.argv[1], "gl")
end = time.time() + 60
while time.time() < end and not os.path.exists("stop"):
    for _ in range(1000): libc.renameat2(-100, b".git", -100, b"gl", 2)
if os.path.islink(".git"): libc.renameat2(-100, b".git", -100, b"gl", 2)
"#;

#[test]
fn a_folder_swapped_with_a_link_during_the_mounts_never_shows_the_state_folder() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("flip.py"), FLIPPER).unwrap();
    let state = crate::common::state_home();
    let engine = crate::common::engine_builder()
        .workspace(ws.path())
        .policy(codemode::Policy::full_access())
        .build()
        .unwrap();
    // Run state there to find: this earlier run's journal.
    let earlier = engine.execute_blocking(Program::new("return 'earlier';"));
    assert_eq!(earlier.status, RunStatus::Completed, "{:?}", earlier.error);
    assert!(state.join("workspaces").is_dir());
    let source = format!(
        "const flipper = tools.bash({{command: {flip}, timeout: 90}}); \
         await tools.bash({{command: 'sleep 0.3'}}); \
         let seen = ''; let tries = 0; \
         for (; tries < 300 && !seen; tries++) {{ \
           const b = await tools.bash({{command: 'for d in .git gl; do [ -d \"$d/workspaces\" ] && echo \"$d\"; done; true'}}); \
           seen = b.content.stdout; \
         }} \
         await tools.bash({{command: 'touch stop'}}); await flipper; \
         return {{seen, tries}};",
        flip = serde_json::to_string(&format!("python3 flip.py '{}'", state.display())).unwrap(),
    );
    let r = engine.execute_blocking(Program::new(source));
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.value["seen"], "", "the state folder showed inside the workspace: {}", r.value);
    assert_eq!(r.value["tries"], 300, "{}", r.value);
}
