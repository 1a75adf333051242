//! Folders that decide later calls reached through a symbolic link a
//! program could rewrite (issue 36's reviews; docs/SECURITY.md, "Run
//! state is outside the workspace" and "Trust"). The sandbox pins the real
//! folders on the way to run state and the trust record (a mount point
//! cannot be renamed), but a link cannot be pinned: one in the workspace,
//! or in a folder the sandbox makes writable, could be pointed by a bash
//! command at a folder the program made, and the next run would read its
//! journals, its recorded decisions or its trust record there.
//!
//! The defences these fail without: `engine/rewritable_links.rs` (the
//! engine refuses such a folder when built, for the whole way to the runs
//! folder, against the workspace and every writable folder),
//! `engine/confinement.rs` (`decisive_files`: a trust folder that resolves
//! into the workspace is made and protected by both names) and
//! `sandbox/src/mounts.rs` (`pinned_folders` never pins above its base).

use std::path::Path;
use std::process::Output;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `codemode run -` of `program` in `ws` under full access, with `env`
/// and the `extra` arguments.
pub(super) fn run(ws: &Path, program: &str, env: &[(&str, &Path)], extra: &[&str]) -> Output {
    use std::io::Write as _;
    let mut args = vec!["run", "-", "--posture", "full-access"];
    args.extend_from_slice(extra);
    let mut child = crate::cli::spawn(&args, ws, env);
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// [`run`] with `HOME` set to `home` and no `XDG_CONFIG_HOME` or
/// `XDG_CACHE_HOME`: the trust record's folder is
/// `<home>/.config/codemode`, the schema cache `<home>/.cache/codemode/mcp-schemas`.
fn run_with_home(ws: &Path, home: &Path, program: &str) -> Output {
    use std::io::Write as _;
    let mut child = crate::cli::command(&["run", "-", "--posture", "full-access"], ws)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Asserts `out` is the engine's refusal naming `link`.
fn refused_naming(out: &Output, link: &Path) {
    let err = stderr(out);
    assert!(!out.status.success(), "the run was not refused: {err}");
    assert!(
        err.contains("is reached through the symbolic link") && err.contains(&link.display().to_string()),
        "{err}"
    );
}

/// A reviewer's finding (issue 36): the workspace holds the state folder
/// (the home folder as a workspace) and a symbolic link on its way (a
/// dotfiles manager's `.local/state`). The sandbox pins the real folders on
/// the way, so none can be renamed, but a link cannot be pinned: a
/// program's bash command pointed it at a folder of its own, and the next
/// run kept its journal and receipt there, where a program could read them
/// or plant a paused run with a forged approval for `codemode resume`. The
/// engine now refuses a state folder reached through a link inside the
/// workspace: nothing runs, and the error says what to set instead.
#[test]
fn a_link_inside_the_workspace_on_the_way_to_the_state_folder_is_refused() {
    let ws = crate::common::workspace();
    let w = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir_all(w.join("dots/state")).unwrap();
    std::fs::create_dir_all(w.join(".local")).unwrap();
    std::os::unix::fs::symlink(w.join("dots/state"), w.join(".local/state")).unwrap();
    std::fs::write(
        w.join("prog.js"),
        "const b = await tools.bash({command: 'mkdir -p planted && rm .local/state && \
         ln -s \"$PWD/planted\" .local/state && echo repointed'}); return b.content.stdout;",
    )
    .unwrap();
    let run = || {
        crate::cli::command(&["run", "prog.js", "--posture", "full-access"], &w)
            .env("XDG_STATE_HOME", w.join(".local/state"))
            .output()
            .unwrap()
    };
    let (first, second) = (run(), run());
    assert!(
        !w.join("planted/codemode").exists(),
        "a later run kept its run state in the folder the program chose: {}",
        stderr(&second)
    );
    assert!(!w.join("planted").exists(), "the program ran: {}", String::from_utf8_lossy(&first.stdout));
    for out in [&first, &second] {
        assert!(!out.status.success());
        let err = stderr(out);
        assert!(
            err.contains("is reached through the symbolic link")
                && err.contains(&w.join(".local/state").display().to_string())
                && err.contains("XDG_STATE_HOME"),
            "{err}"
        );
    }
    // `codemode runs` reads the runs folder without building an engine:
    // refused the same way.
    let listed = crate::cli::command(&["runs", "list"], &w)
        .env("XDG_STATE_HOME", w.join(".local/state"))
        .output()
        .unwrap();
    assert!(!listed.status.success(), "{}", String::from_utf8_lossy(&listed.stdout));
    assert!(stderr(&listed).contains("is reached through the symbolic link"), "{}", stderr(&listed));
    // The same folder written without the link is the user's to choose.
    let fixed = crate::cli::command(&["run", "-", "--posture", "full-access"], &w)
        .env("XDG_STATE_HOME", w.join("dots/state"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(b"return 1;")?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(fixed.status.success(), "{}", stderr(&fixed));
    assert!(w.join("dots/state/codemode/workspaces").is_dir());
}

/// Break 4 of the review: the trust record's folder reached through a
/// dotfiles link in the workspace (`~/.config`, the home folder as the
/// workspace). A program pointed the link at a folder holding a record
/// that trusts the `.mcp.json` it wrote, and the next run started that
/// server, unsandboxed. Here the record is made by `codemode trust` in the
/// real folder and the link leads to it: the run is refused, the server
/// never starts.
#[test]
fn a_trust_record_reached_through_a_link_in_the_workspace_is_refused() {
    let ws = crate::common::workspace();
    let w = std::fs::canonicalize(ws.path()).unwrap();
    let marker = w.join("server-started");
    std::fs::write(
        w.join(".mcp.json"),
        format!(
            r#"{{"mcpServers": {{"x": {{"command": "sh", "args": ["-c", "touch {}"]}}}}}}"#,
            marker.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(w.join("dots/config")).unwrap();
    let trusted =
        crate::cli::command(&["trust"], &w).env("XDG_CONFIG_HOME", w.join("dots/config")).output().unwrap();
    assert!(trusted.status.success(), "{}", stderr(&trusted));
    std::os::unix::fs::symlink(w.join("dots/config"), w.join(".config")).unwrap();
    let program = "try { await tools.call('mcp_connect__x', {}); } catch (e) {} return 1;";
    let out = run(&w, program, &[("XDG_CONFIG_HOME", &w.join(".config"))], &[]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!marker.exists(), "the server a program could have trusted started: {}", stderr(&out));
    refused_naming(&out, &w.join(".config"));
}

/// Break 1 of the review: a link on the way to the state folder inside a
/// folder `[sandbox] writable` names (outside the workspace): the same as
/// one in the workspace, since a command may write there. The reviewer
/// repointed it and `codemode resume` applied a forged approval.
#[test]
fn a_link_in_a_writable_folder_on_the_way_to_the_state_folder_is_refused() {
    let top = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(top.path()).unwrap();
    let (ws, dots) = (top.join("proj"), top.join("dots"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(top.join("realstate")).unwrap();
    std::fs::create_dir_all(&dots).unwrap();
    std::os::unix::fs::symlink(top.join("realstate"), dots.join("state")).unwrap();
    std::os::unix::fs::symlink(dots.join("state"), top.join("st")).unwrap();
    let policy = top.join("policy.toml");
    std::fs::write(&policy, format!("[sandbox]\nwritable = [\"{}\"]\n", dots.display())).unwrap();
    let out = run(
        &ws,
        "return 1;",
        &[("XDG_STATE_HOME", &top.join("st"))],
        &["--config", policy.to_str().unwrap()],
    );
    refused_naming(&out, &dots.join("state"));
    assert!(stderr(&out).contains("which the bash sandbox lets commands write"), "{}", stderr(&out));
    // Without the writable folder, the link is the user's layout.
    let out = run(&ws, "return 1;", &[("XDG_STATE_HOME", &top.join("st"))], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Break 2 of the review: only the state home was checked. A run whose
/// state was elsewhere planted `.local/state/codemode/workspaces` as a link
/// to a folder it could read and write; a later run with the default state
/// home kept its journal there. The whole way to the runs folder is
/// checked.
#[test]
fn a_link_planted_beneath_the_state_home_is_refused() {
    let ws = crate::common::workspace();
    let w = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir_all(w.join(".local/state/codemode")).unwrap();
    std::fs::create_dir_all(w.join("visible")).unwrap();
    std::os::unix::fs::symlink(w.join("visible"), w.join(".local/state/codemode/workspaces")).unwrap();
    let out = run(&w, "return 1;", &[("XDG_STATE_HOME", &w.join(".local/state"))], &[]);
    refused_naming(&out, &w.join(".local/state/codemode/workspaces"));
    assert_eq!(
        std::fs::read_dir(w.join("visible")).unwrap().count(),
        0,
        "run state was kept where the program reads"
    );
}

/// Break 5 of the review: a decisive folder written with `..` out of the
/// workspace (`HOME=<ws>/..`, so the trust record's folder is
/// `<ws>/../.config/codemode`) made the sandbox pin, writable, every folder
/// on that way, the workspace's parent among them: a command could chmod
/// a file beside the workspace. Pinned folders now lie beneath their base.
#[test]
fn a_path_climbing_out_of_the_workspace_pins_nothing_above_it() {
    let top = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(top.path()).unwrap();
    let ws = top.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(top.join(".config/codemode")).unwrap();
    let beside = top.join("other.txt");
    std::fs::write(&beside, "x").unwrap();
    let program = "const b = await tools.bash({command: 'chmod 666 ../other.txt 2>&1; echo done'}); \
                   return b.content.stdout;";
    let out = run_with_home(&ws, &ws.join(".."), program);
    assert!(out.status.success(), "{}", stderr(&out));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&beside).unwrap().permissions().mode() & 0o777;
    assert_ne!(
        mode,
        0o666,
        "a command changed a file above the workspace: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Break 4b of the review: the home folder named through a link outside
/// (`HOME=/…/homelink`, leading to the workspace) and no trust record yet.
/// The trust record's folder was made (and so protected) only when its
/// path as written lay in the workspace, so a command made
/// `.config/codemode/trusted.json` itself. It is now made and protected
/// when it leads into the workspace.
#[test]
fn a_trust_folder_reached_through_a_link_outside_is_made_and_protected() {
    let top = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(top.path()).unwrap();
    let ws = top.join("home");
    std::fs::create_dir_all(&ws).unwrap();
    std::os::unix::fs::symlink(&ws, top.join("homelink")).unwrap();
    let program = "const b = await tools.bash({command: 'mkdir -p .config/codemode && \
                   echo {} > .config/codemode/trusted.json && echo planted'}); return b.content.stdout;";
    let out = run_with_home(&ws, &top.join("homelink"), program);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!ws.join(".config/codemode/trusted.json").exists(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// A command that tries to plant a trust record (or a cached listing) at
/// `folder`, relative to the workspace; what it printed.
fn plant(folder: &str) -> String {
    format!(
        "const b = await tools.bash({{command: 'mkdir -p {folder} && echo {{}} > {folder}/planted.json \
         && echo planted'}}); return b.content.stdout;"
    )
}

/// The third review's breaks 3 and 4: the trust record's folder reached
/// through a dangling link outside into a folder the workspace does not
/// hold yet (`~/.config -> <dotfiles workspace>/config`), or written with
/// `..` after a link outside (`HOME=/out/L/..`, `L -> <ws>/sub`). Its path
/// was judged as written, so the folder was neither made nor protected,
/// and a program made it with a record trusting its own `.mcp.json`. The
/// path is now resolved as the kernel would, and the folder made and
/// protected where it leads.
#[test]
fn a_trust_folder_reached_through_a_dangling_link_or_dot_dot_is_made_and_protected() {
    let top = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(top.path()).unwrap();
    let ws = top.join("dotfiles");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir_all(top.join("home")).unwrap();
    std::os::unix::fs::symlink(ws.join("config"), top.join("home/.config")).unwrap();
    let out = run_with_home(&ws, &top.join("home"), &plant("config/codemode"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!ws.join("config/codemode/planted.json").exists(), "{}", String::from_utf8_lossy(&out.stdout));
    std::fs::create_dir_all(top.join("out")).unwrap();
    std::os::unix::fs::symlink(ws.join("sub"), top.join("out/L")).unwrap();
    let out = run_with_home(&ws, &top.join("out/L/.."), &plant(".config/codemode"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!ws.join(".config/codemode/planted.json").exists(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// The third review's break 5: with the home folder as the workspace and
/// no MCP servers configured, the MCP schema cache was neither made nor
/// protected, and a program wrote a listing there that a later run with
/// servers read (a forged description, a tool taken away). The default
/// cache is protected whatever the run configures.
#[test]
fn the_default_schema_cache_is_protected_in_a_run_without_mcp_servers() {
    let ws = crate::common::workspace();
    let w = std::fs::canonicalize(ws.path()).unwrap();
    let out = run_with_home(&w, &w, &plant(".cache/codemode/mcp-schemas"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !w.join(".cache/codemode/mcp-schemas/planted.json").exists(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
