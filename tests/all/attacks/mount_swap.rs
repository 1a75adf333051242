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

use super::run;

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

/// `codemode trust` of `ws`'s policy, with the trust record under `config`.
fn trust(ws: &std::path::Path, config: &std::path::Path) {
    let trusted = std::process::Command::new(env!("CARGO_BIN_EXE_codemode"))
        .arg("trust")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .env("XDG_CONFIG_HOME", config)
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));
}

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
    // Run state there to find: this earlier run's folder (the cover of the
    // state folder shows the way to the call's own TMPDIR, nothing else).
    let earlier = engine.execute_blocking(Program::new("return 'earlier';"));
    assert_eq!(earlier.status, RunStatus::Completed, "{:?}", earlier.error);
    assert!(state.join("workspaces").is_dir());
    let source = format!(
        "const flipper = tools.bash({{command: {flip}, timeout: 90}}); \
         await tools.bash({{command: 'sleep 0.3'}}); \
         let seen = ''; let tries = 0; \
         for (; tries < 300 && !seen; tries++) {{ \
           const b = await tools.bash({{command: 'for d in .git gl; do ls -d \"$d\"/workspaces/*/runs/run-* >/dev/null 2>&1 && echo \"$d\"; done; true'}}); \
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

/// A later reviewer's break, with no race: two trusted hooks,
/// `tools/guard.py` (its folder protected: Python imports beside a
/// script) and `tools/a/b/check.py` (`tools/a` pinned, a folder between
/// the workspace and a protected path). The pin was bound writable, and
/// the protected folder's read-only bind, recursive, carried it along:
/// bash rewrote `tools/a/helper.py`, which the first hook imports, so the
/// next hook ran the program's code outside the sandbox. A protected
/// folder is now read-only all the way down.
#[test]
fn a_folder_pinned_beneath_a_protected_folder_is_read_only_too() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let pass = "import sys\nsys.stdin.read()\n";
    std::fs::create_dir_all(ws.path().join("tools/a/b")).unwrap();
    std::fs::write(ws.path().join("tools/guard.py"), pass).unwrap();
    std::fs::write(ws.path().join("tools/a/b/check.py"), pass).unwrap();
    std::fs::write(ws.path().join("tools/a/helper.py"), "X = 1\n").unwrap();
    std::fs::write(
        ws.path().join("codemode.toml"),
        "[[hooks.before_call]]\ncommand = [\"python3\", \"tools/guard.py\"]\n\n\
         [[hooks.before_call]]\ncommand = [\"python3\", \"tools/a/b/check.py\"]\n",
    )
    .unwrap();
    trust(ws.path(), config.path());
    let program = "const b = await tools.bash({command: 'echo planted > tools/a/helper.py && echo wrote; \
                   touch tools/a/new.py && echo made; true'}); return b.content.stdout;";
    let (value, stderr) =
        run(&["run", "-", "--json", "--posture", "full-access"], program, ws.path(), config.path());
    assert_eq!(value, "", "bash wrote beneath a protected folder: {value} {stderr}");
    assert_eq!(std::fs::read_to_string(ws.path().join("tools/a/helper.py")).unwrap(), "X = 1\n");
    assert!(!ws.path().join("tools/a/new.py").exists());
}

/// The same reviewer: a pinned folder made during the run as a link
/// (`ln -s "$PWD/.git/hooks" m/n`, where an MCP server's missing script
/// `m/n/server.js` makes `m/n` a folder to pin) had its target bound
/// writable: a later call wrote a git hook into the protected `.git`. A
/// pin that is a link is now refused (reported, not followed).
#[test]
fn a_pinned_folder_that_is_a_link_does_not_make_its_target_writable() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let mcp = ws.path().join("servers.json");
    std::fs::write(&mcp, r#"{"mcpServers": {"s": {"command": "node", "args": ["m/n/server.js"]}}}"#).unwrap();
    let program = "await tools.bash({command: 'mkdir m && ln -s \"$PWD/.git/hooks\" m/n'}); \
                   const b = await tools.bash({command: 'echo planted > .git/hooks/pre-commit && echo wrote; true'}); \
                   return b.content.stdout;";
    let mcp_arg = mcp.to_str().unwrap();
    let (value, stderr) = run(
        &["run", "-", "--json", "--posture", "full-access", "--mcp-config", mcp_arg],
        program,
        ws.path(),
        config.path(),
    );
    assert_eq!(value, "", "bash wrote a git hook: {value} {stderr}");
    assert!(!ws.path().join(".git/hooks/pre-commit").exists());
}

/// The same reviewer: with `[sandbox] writable` naming the folder that
/// holds the engine's `TMPDIR`, a concurrent call replaced each new call's
/// private temporary folder (`codemode-bash-*`) with a link to a folder
/// outside every writable one; the launcher bound the link's target
/// writable, and the call wrote there. The private `TMPDIR` is now bound
/// only as a folder, never through a link.
///
/// Later (CI, under load), the swap also won against the engine itself:
/// made between the folder's creation and the engine resolving its real
/// path, the swap gave the spec the link's target as `TMPDIR`, a folder
/// with no link on its way, which the launcher bound writable. The engine
/// now names the folder by its parent's real path and its own name, never
/// resolving it again. The lister here is woken by inotify as each folder
/// is made: without the fix it won in every run tried (one to three calls
/// of thirty). A sampling test: the swap must land in the window. Since a
/// seventh review, a root that commands may write (as this test's is) is
/// not used at all (`<cache home>/codemode/tmp` is): the lister then finds
/// nothing to swap, and no call writes outside either way.
#[test]
fn a_private_tmpdir_swapped_for_a_link_gives_no_write_outside() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let etmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("codemode.toml"),
        format!("[sandbox]\nwritable = [{:?}]\n", etmp.path().display().to_string()),
    )
    .unwrap();
    trust(ws.path(), config.path());
    std::fs::write(
        ws.path().join("lister.py"),
        "import ctypes, os, select, struct, sys, time\nparent, target = sys.argv[1], sys.argv[2]\n\
         libc = ctypes.CDLL(None, use_errno=True)\nfd = libc.inotify_init()\n\
         libc.inotify_add_watch(fd, parent.encode(), 0x100)  # IN_CREATE\nend = time.time() + 40\n\
         while time.time() < end and not os.path.exists('stop'):\n    if not select.select([fd], [], [], 0.1)[0]:\n        \
         continue\n    data = os.read(fd, 65536)\n    i = 0\n    while i < len(data):\n        \
         size = struct.unpack_from('iIII', data, i)[3]\n        name = data[i + 16:i + 16 + size].rstrip(b'\\0').decode()\n        \
         i += 16 + size\n        p = os.path.join(parent, name)\n        \
         if name.startswith('codemode-bash-') and not name.endswith('.x'):\n            try:\n                \
         os.rename(p, p + '.x')\n                os.symlink(target, p)\n            except OSError:\n                pass\n",
    )
    .unwrap();
    let program = format!(
        "const lister = tools.bash({{command: {lister}, timeout: 60}}); \
         await tools.bash({{command: 'sleep 0.5'}}); \
         for (let i = 0; i < 30; i++) {{ await tools.bash({{command: `echo planted > \"$TMPDIR/planted_${{i}}\" 2>/dev/null; true`}}); }} \
         await tools.bash({{command: 'touch stop'}}); await lister; return 'done';",
        lister = serde_json::to_string(&format!(
            "python3 lister.py '{}' '{}'",
            etmp.path().display(),
            outside.path().display()
        ))
        .unwrap(),
    );
    let mut child = crate::cli::spawn(
        &["run", "-", "--json", "--posture", "full-access"],
        ws.path(),
        &[("XDG_CONFIG_HOME", config.path()), ("TMPDIR", etmp.path())],
    );
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(receipt["value"], "done", "{receipt}");
    let planted: Vec<_> =
        std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(planted.is_empty(), "a call wrote outside every writable folder: {planted:?}");
}

/// The third review of issue 36: a folder bash may write (here a
/// `[sandbox] writable` folder; there, another run's command cache) swapped
/// with a link to a folder outside, by a concurrent process, between the
/// launcher's check that it is no link and its bind: the bind followed the
/// link and a command wrote outside every folder it may write (twice in
/// 150 calls). A writable folder is now opened with no link allowed on its
/// way (`openat2`, `RESOLVE_NO_SYMLINKS`) and bound through descriptors
/// only (`open_tree`, `mount_setattr`, `move_mount`).
#[test]
fn a_writable_folder_swapped_with_a_link_is_never_bound_at_its_target() {
    let top = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(top.path()).unwrap();
    let (w, outside) = (top.join("w"), top.join("outside"));
    std::fs::create_dir_all(&outside).unwrap();
    let ws = crate::common::workspace();
    let policy = top.join("policy.toml");
    std::fs::write(&policy, format!("[sandbox]\nwritable = [\"{}\"]\n", w.display())).unwrap();
    // Swaps `w` (a folder) and `wl` (a link to `outside`) until `stop`,
    // from a second on: the engine settles `w` before (as the folder).
    let flipper = r#"import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
time.sleep(1)
end = time.time() + 90
while time.time() < end and not os.path.exists("stop"):
    for _ in range(1000): libc.renameat2(-100, b"w", -100, b"wl", 2)
if os.path.islink("w"): libc.renameat2(-100, b"w", -100, b"wl", 2)
"#;
    std::fs::create_dir(&w).unwrap();
    std::os::unix::fs::symlink(&outside, top.join("wl")).unwrap();
    let mut flip =
        std::process::Command::new("python3").args(["-c", flipper]).current_dir(&top).spawn().unwrap();
    let program = format!(
        "await tools.bash({{command: 'sleep 1.5'}}); \
         for (let i = 0; i < 300; i++) {{ await tools.bash({{command: 'touch {}/f' + i + ' 2>/dev/null; true'}}); }} \
         return 1;",
        w.display()
    );
    let out = super::rewritable_links::run(ws.path(), &program, &[], &["--config", policy.to_str().unwrap()]);
    std::fs::write(top.join("stop"), "").unwrap();
    let _ = flip.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let planted: Vec<_> = std::fs::read_dir(&outside).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(planted.is_empty(), "a command wrote outside every folder it may write: {planted:?}");
}

/// A sixth review of issue 36: the engine made each call's private folder
/// in its own `TMPDIR`, resolved again at every call, so a command that
/// could change what that path leads to (a link in a `[sandbox] writable`
/// folder, which the run's first call pointed at `<workspace>/.git/hooks`;
/// here at a folder a program loads from, outside every writable place)
/// decided where the next call's folder went. In the hooks folder, it had
/// `.git` and `.git/hooks` pinned writable on its way, and the next call
/// planted a hook that git ran outside the sandbox. Settled once per
/// engine, the rewritten link steered the next run's (a seventh review),
/// and a walk that refused roots this engine's commands may write did not
/// know another session's (an eighth). The folders now go beneath the
/// hidden run state (`bash-tmp` beside the runs' folder), which no command sees and
/// no `writable` entry may name: the process's `TMPDIR` decides nothing.
#[test]
fn a_tmpdir_link_rewritten_by_a_call_does_not_move_the_next_call_s_folder() {
    let ws = crate::common::workspace();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    let config = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let w = w.path().canonicalize().unwrap();
    std::fs::create_dir(w.join("t")).unwrap();
    std::os::unix::fs::symlink(w.join("t"), w.join("tl")).unwrap();
    // A folder a program loads from (an editor's plugins), outside every
    // place commands may write.
    let plugins = tempfile::tempdir().unwrap();
    let plugins = plugins.path().canonicalize().unwrap();
    std::fs::write(
        ws.path().join("codemode.toml"),
        format!("[sandbox]\nwritable = [{:?}]\n", w.display().to_string()),
    )
    .unwrap();
    trust(ws.path(), config.path());
    let program = format!(
        "const a = await tools.bash({{command: `rm {w}/tl && ln -s {plugins} {w}/tl && echo relinked`}}); \
         const b = await tools.bash({{command: 'echo \"$TMPDIR\"; echo planted > .git/hooks/pre-commit 2>/dev/null && echo WROTE; true'}}); \
         return [a.content.stdout, b.content.stdout];",
        w = w.display(),
        plugins = plugins.display()
    );
    for run in 0..2 {
        let (value, stderr) = tmpdir_run(&program, ws.path(), config.path(), &w.join("tl"));
        // The second run finds the link already pointing at the plugins.
        assert!(run == 1 || value[0] == "relinked\n", "{value} {stderr}");
        let second = value[1].as_str().unwrap_or_default();
        assert!(
            second.starts_with(crate::common::XDG_STATE) && second.contains("bash-tmp/codemode-bash-"),
            "run {run}: {value} {stderr}"
        );
        assert!(!second.contains("WROTE") && !ws.path().join(".git/hooks/pre-commit").exists(), "{second}");
    }
    assert_eq!(std::fs::read_dir(&plugins).unwrap().count(), 0, "made or written in the plugins folder");
}

/// Runs `program` with `codemode run` in `ws` (full access, the trust
/// record under `config`) with `TMPDIR` set to `tmpdir`; its value and
/// stderr.
fn tmpdir_run(
    program: &str,
    ws: &std::path::Path,
    config: &std::path::Path,
    tmpdir: &std::path::Path,
) -> (serde_json::Value, String) {
    let mut child = crate::cli::spawn(
        &["run", "-", "--json", "--posture", "full-access"],
        ws,
        &[("XDG_CONFIG_HOME", config), ("TMPDIR", tmpdir)],
    );
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let receipt: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    (receipt["value"].clone(), stderr)
}

/// The eighth review: another session, whose `writable` folder holds this
/// engine's `TMPDIR` (writable to that session, not to this one), moves
/// that folder aside and puts a link to `<workspace>/.git/hooks` in its
/// place (played here by the test, while the program waits between two
/// calls). The next call runs as before, its folder beneath the hidden
/// run state; nothing is made or written in the hooks folder.
#[test]
fn the_engine_s_tmpdir_swapped_by_another_session_decides_nothing() {
    let ws = crate::common::workspace();
    let hooks = ws.path().join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let config = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let w = w.path().canonicalize().unwrap();
    std::fs::create_dir(w.join("t")).unwrap();
    let program = "await tools.bash({command: 'touch ready; while [ ! -e swapped ]; do sleep 0.05; done', timeout: 60}); \
                   const b = await tools.bash({command: 'echo planted > .git/hooks/pre-commit 2>/dev/null && echo WROTE; echo \"$TMPDIR\"'}); \
                   return b.content.stdout;";
    let mut child = crate::cli::spawn(
        &["run", "-", "--json", "--posture", "full-access"],
        ws.path(),
        &[("XDG_CONFIG_HOME", config.path()), ("TMPDIR", &w.join("t"))],
    );
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), program.as_bytes()).unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ws.path().join("ready").exists() {
        assert!(std::time::Instant::now() < until, "the first call never ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::rename(w.join("t"), w.join("t.old")).unwrap();
    std::os::unix::fs::symlink(&hooks, w.join("t")).unwrap();
    std::fs::write(ws.path().join("swapped"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let said = receipt["value"].as_str().unwrap_or_default();
    assert!(said.contains("bash-tmp/codemode-bash-") && !said.contains("WROTE"), "{receipt}");
    let in_hooks: Vec<_> = std::fs::read_dir(&hooks).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(in_hooks.is_empty(), "made or written in the hooks folder: {in_hooks:?}");
}

/// An engine `TMPDIR` the sandbox replaces (`/dev/shm`: the call has a
/// `/dev` of its own) gave the command a `TMPDIR` that did not exist in
/// the sandbox, with nothing said (the seventh review). The command's
/// folder does not depend on it any more.
#[test]
fn an_engine_tmpdir_the_sandbox_covers_still_gives_the_command_its_folder() {
    let ws = crate::common::workspace();
    let program =
        "return (await tools.bash({command: 'echo x > \"$TMPDIR/f\" && cat \"$TMPDIR/f\"'})).content.stdout;";
    let mut child = crate::cli::spawn(
        &["run", "-", "--json", "--posture", "full-access"],
        ws.path(),
        &[("TMPDIR", std::path::Path::new("/dev/shm"))],
    );
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), program.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(receipt["value"], "x\n", "{receipt}");
}
