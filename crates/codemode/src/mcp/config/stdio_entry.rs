//! A stdio server's fields: `command`, `args`, `env`, `envFile` (dotenv
//! text, its values secrets) and `cwd`, relative paths resolved against
//! the config file's folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::server_entry::{EntryReader, RawServer, ReadTransport};
use super::{ConfigError, REDACTED, Transport};

/// The stdio transport of `raw`: expanded, and as shown (`${VAR}`s
/// unexpanded, `envFile` values as [`REDACTED`]).
///
/// # Errors
/// [`ConfigError::Field`] for a missing or
/// empty `command`, a `url` beside it, a variable without a value, or an
/// `envFile` that cannot be used.
pub(super) fn stdio_transport(
    reader: &mut EntryReader<'_>,
    raw: &RawServer,
) -> Result<ReadTransport, ConfigError> {
    let Some(command) = &raw.command else {
        return Err(reader.error("command", "a stdio server needs a `command` (or give a `url` for HTTP)"));
    };
    if raw.url.is_some() {
        return Err(reader.error("url", "give either `command` (stdio) or `url` (HTTP), not both"));
    }
    let command = reader.expand("command", command)?;
    if command.trim().is_empty() {
        return Err(reader.error("command", "must not be empty"));
    }
    let args = raw
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| reader.expand(&format!("args[{i}]"), a))
        .collect::<Result<Vec<_>, _>>()?;
    let mut env = BTreeMap::new();
    for (key, value) in &raw.env {
        env.insert(key.clone(), reader.expand(&format!("env.{key}"), value)?);
    }
    let mut shown_env = raw.env.clone();
    let env_file = match &raw.env_file {
        Some(written) => Some(add_env_file(reader, written, &mut env, &mut shown_env)?),
        None => None,
    };
    let (cwd, shown_cwd) = working_folder(reader, raw.cwd.as_deref())?;
    let shown = Transport::Stdio {
        command: raw.command.clone().unwrap_or_default(),
        args: raw.args.clone(),
        env: shown_env,
        cwd: shown_cwd,
    };
    Ok(ReadTransport { transport: Transport::Stdio { command, args, env, cwd }, shown, env_file })
}

/// Adds the entries of the `envFile` written `written` to `env` (an `env`
/// entry of the config wins over the file's), each value a secret shown
/// as [`REDACTED`] in `shown_env`. Returns the file's path, resolved
/// against the config file's folder.
///
/// # Errors
/// [`ConfigError::Field`] `envFile`: a variable
/// without a value, a path through a symbolic link, or a file that cannot
/// be read as dotenv text.
fn add_env_file(
    reader: &mut EntryReader<'_>,
    written: &str,
    env: &mut BTreeMap<String, String>,
    shown_env: &mut BTreeMap<String, String>,
) -> Result<PathBuf, ConfigError> {
    let path = PathBuf::from(reader.expand("envFile", written)?);
    let path = if path.is_relative() { reader.base.join(path) } else { path };
    if let Some(link) = linked_component(&path, reader.base, reader.workspace()) {
        return Err(reader.error(
            "envFile",
            format!(
                "{} is reached through the symbolic link {}; a program could point the link elsewhere \
                 for a later start: name the file itself",
                path.display(),
                link.display()
            ),
        ));
    }
    for (key, value) in read_env_file(&path).map_err(|m| reader.error("envFile", m))? {
        // `env` entries win over the file's.
        if env.contains_key(&key) {
            continue;
        }
        reader.secrets.push((value.clone(), REDACTED.to_owned()));
        shown_env.insert(key.clone(), REDACTED.to_owned());
        env.insert(key, value);
    }
    Ok(path)
}

/// The working folder of `cwd` (written `written`), expanded, resolved
/// against the config file's folder and canonical; and as shown (as
/// written when it holds a `${VAR}`). `(None, None)` without a `cwd`.
///
/// # Errors
/// [`ConfigError::Field`] `cwd` for a variable
/// without a value.
fn working_folder(
    reader: &mut EntryReader<'_>,
    written: Option<&str>,
) -> Result<(Option<PathBuf>, Option<PathBuf>), ConfigError> {
    let Some(written) = written else { return Ok((None, None)) };
    let cwd = PathBuf::from(reader.expand("cwd", written)?);
    let cwd = if cwd.is_relative() { reader.base.join(cwd) } else { cwd };
    // One spelling per folder (`examples/..`, `./`, a symlink), so the
    // schema cache key does not depend on how the config file was named.
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let shown = if written.contains("${") { PathBuf::from(written) } else { cwd.clone() };
    Ok((Some(cwd), Some(shown)))
}

/// The first symbolic link on the way to `path`: the file itself, or a
/// folder between the `workspace` (for a file in it) or `base` (the config
/// file's folder) and it.
fn linked_component(path: &Path, base: &Path, workspace: Option<&Path>) -> Option<PathBuf> {
    if let Some(workspace) = workspace.filter(|w| path.starts_with(w)) {
        return codemode_base::links::link_below(path, workspace).map(Path::to_path_buf);
    }
    if path.starts_with(base) {
        return codemode_base::links::link_below(path, base).map(Path::to_path_buf);
    }
    path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()).then(|| path.to_path_buf())
}

/// The `KEY=value` entries of the dotenv file at `path` (read as
/// `codemode_base::config_file` reads any config file, parsed by `dotenvy`).
///
/// # Errors
/// A message that names the file but quotes none of its values.
fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    // Read once, as itself: a link swapped in after the check above is
    // refused, not followed.
    let text = codemode_base::config_file::read_own_bytes(path)
        .and_then(|b| String::from_utf8(b).map_err(|_| std::io::Error::other("the file is not UTF-8 text")))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for item in dotenvy::from_read_iter(text.as_bytes()) {
        match item {
            Ok(pair) => out.push(pair),
            // Its message quotes the line, which may hold a secret.
            Err(dotenvy::Error::LineParse(..)) => {
                return Err(format!(
                    "{}: the entry after the first {} is not `KEY=value` dotenv text",
                    path.display(),
                    out.len()
                ));
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(out)
}
