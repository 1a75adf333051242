//! Finding the sandbox launcher: the `codemode-sandbox` binary, or the
//! `codemode` binary re-executed with a hidden subcommand (see
//! `launcher.rs`).
//!
//! In order:
//! 1. the path given to [`set_launcher`] (a library host that ships the
//!    `codemode` binary somewhere of its own);
//! 2. the `CODEMODE_SANDBOX_LAUNCHER` environment variable of the engine's
//!    process ([`LAUNCHER_ENV`]);
//! 3. `codemode-sandbox` beside the current executable, then the current
//!    executable when it is `codemode` itself;
//! 4. a `codemode-sandbox`, then a `codemode` file beside the current
//!    executable, then in its parent folder (cargo puts test binaries in `target/<profile>/deps/` and
//!    `codemode` in `target/<profile>/`).
//!
//! None found under a confining profile: the bash call fails and says how
//! to proceed; it never runs unconfined.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

/// The environment variable naming the launcher (the `codemode` binary).
pub const LAUNCHER_ENV: &str = "CODEMODE_SANDBOX_LAUNCHER";

/// The launcher set with [`set_launcher`].
static LAUNCHER: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Tells every engine of this process where the `codemode` binary is, for
/// the bash sandbox (a library host whose own executable is not
/// `codemode`). Takes precedence over [`LAUNCHER_ENV`].
pub fn set_launcher(path: impl Into<PathBuf>) {
    *LAUNCHER.write().unwrap_or_else(|e| e.into_inner()) = Some(path.into());
}

/// The launcher to run, found as the module docs say.
///
/// # Errors
/// A message naming where it looked and how to proceed, when none is found
/// or the one named explicitly is not a file.
pub fn find_launcher() -> Result<PathBuf, String> {
    let explicit = LAUNCHER.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(path) = explicit.or_else(|| std::env::var_os(LAUNCHER_ENV).map(PathBuf::from)) {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "the sandbox launcher {} (set with {LAUNCHER_ENV} or codemode::sandbox::set_launcher) is \
                 not a file; point it at the `codemode` binary",
                path.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the current executable: {e}"))?;
    candidates(&exe).into_iter().find(|p| p.is_file()).ok_or_else(|| {
        format!(
            "bash runs in a sandbox started by the `codemode` binary, and none was found (looked at {} \
             and beside it); set {LAUNCHER_ENV} to the `codemode` binary, or run bash unconfined with \
             `[sandbox] profile = \"off\"` in codemode.toml (allowed only under the full-access posture)",
            exe.display()
        )
    })
}

/// Where the launcher may be, given the current executable `exe`: in each
/// folder, the small `codemode-sandbox` binary before `codemode`.
fn candidates(exe: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let dir = exe.parent();
    if let Some(dir) = dir {
        found.push(dir.join(SMALL_LAUNCHER));
    }
    if exe.file_stem().is_some_and(|s| s == "codemode") {
        found.push(exe.to_path_buf());
    }
    if let Some(dir) = dir {
        found.push(dir.join("codemode"));
        if let Some(up) = dir.parent() {
            found.push(up.join(SMALL_LAUNCHER));
            found.push(up.join("codemode"));
        }
    }
    found
}

/// The file name of this crate's launcher binary.
const SMALL_LAUNCHER: &str = "codemode-sandbox";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codemode_binary_then_its_neighbours_are_candidates() {
        assert_eq!(
            candidates(Path::new("/opt/bin/codemode")),
            [
                PathBuf::from("/opt/bin/codemode-sandbox"),
                "/opt/bin/codemode".into(),
                "/opt/bin/codemode".into(),
                "/opt/codemode-sandbox".into(),
                "/opt/codemode".into()
            ]
        );
        assert_eq!(
            candidates(Path::new("/t/debug/deps/all-1234")),
            [
                PathBuf::from("/t/debug/deps/codemode-sandbox"),
                "/t/debug/deps/codemode".into(),
                "/t/debug/codemode-sandbox".into(),
                "/t/debug/codemode".into()
            ]
        );
    }
}
