//! The on-disk schema cache: each server's last `tools/list` answer, so its
//! tools can be searched and described without starting it.
//!
//! One file per server and launch configuration:
//! `<dir>/<server>-<first 16 hex digits of ServerConfig::launch_hash>.json`
//! holding `{"version": 1, "server", "launch_hash", "era", "tools": [<MCP
//! Tool objects as the server sent them>]}`, `era` being the protocol era
//! the server spoke (`"modern"` or `"legacy"`, see [`Era`]; tried first on
//! the next start). Written after every successful
//! listing to a temporary file in the same folder and renamed over the old
//! one, so readers never see half a file. A file whose version or launch
//! hash does not match (the config changed) is ignored. Environment values
//! and headers are never written: only their hash, inside the launch hash.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::config::ServerConfig;
use super::era::Era;
use super::naming;

/// The cache file format version.
const VERSION: u64 = 1;

/// The default cache folder: `$XDG_CACHE_HOME/codemode/mcp-schemas`, else
/// `$HOME/.cache/codemode/mcp-schemas`; `None` when neither is an absolute
/// path (the XDG rule: a relative value is ignored, as it is for the state
/// and config folders; it would name a folder in whatever the current
/// folder is, the workspace often).
pub fn default_cache_dir() -> Option<PathBuf> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|home| home.join(".cache")))?;
    Some(base.join("codemode").join("mcp-schemas"))
}

/// Where one server's cached listing lives.
pub(crate) fn cache_path(dir: &Path, server: &ServerConfig) -> PathBuf {
    // The connect name is the server name made safe for a file name.
    let safe = naming::connect_name(&server.name);
    let safe = safe.trim_start_matches(naming::CONNECT_PREFIX);
    dir.join(format!("{safe}-{}.json", &server.launch_hash()[..16]))
}

/// The cached tools of `server`, or `None` when there is no usable file.
pub(crate) fn read(dir: &Path, server: &ServerConfig) -> Option<Vec<Value>> {
    match read_file(dir, server)?["tools"].take() {
        Value::Array(tools) => Some(tools),
        _ => None,
    }
}

/// The era `server` spoke when its listing was cached, or `None` when there
/// is no usable file or it names none.
pub(crate) fn read_era(dir: &Path, server: &ServerConfig) -> Option<Era> {
    serde_json::from_value(read_file(dir, server)?["era"].take()).ok()
}

/// The cache file of `server` when it is usable (this version, this launch
/// configuration).
fn read_file(dir: &Path, server: &ServerConfig) -> Option<Value> {
    let path = cache_path(dir, server);
    let text = std::fs::read(&path).ok()?;
    let file: Value = match serde_json::from_slice(&text) {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!(path = %path.display(), "ignoring a broken MCP schema cache file: {e}");
            return None;
        }
    };
    if file["version"] != json!(VERSION) || file["launch_hash"] != json!(server.launch_hash()) {
        return None;
    }
    Some(file)
}

/// Writes `tools` as the cached listing of `server`, with the `era` it
/// spoke, atomically.
///
/// # Errors
/// The I/O error of creating the folder, writing or renaming.
pub(crate) fn write(
    dir: &Path,
    server: &ServerConfig,
    tools: &[Value],
    era: Option<Era>,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = cache_path(dir, server);
    let body = json!({
        "version": VERSION,
        "server": server.name,
        "launch_hash": server.launch_hash(),
        "era": era,
        "tools": tools,
    });
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(&serde_json::to_vec_pretty(&body).map_err(std::io::Error::other)?)?;
    file.as_file().sync_all()?;
    file.persist(&path).map_err(|e| e.error)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::McpConfig;

    #[test]
    fn round_trip_and_config_change() {
        let dir = tempfile::tempdir().unwrap();
        let config = McpConfig::parse(
            r#"{"mcpServers": {"a-b": {"command": "x"}, "c": {"command": "y"}}}"#,
            Path::new("/"),
            &|_| None,
        )
        .unwrap();
        let a = &config.servers["a-b"];
        assert_eq!(read(dir.path(), a), None);
        let tools = vec![json!({"name": "t", "inputSchema": {"type": "object"}})];
        let path = write(dir.path(), a, &tools, Some(Era::Legacy)).unwrap();
        assert!(path.file_name().unwrap().to_str().unwrap().starts_with("a-b-"));
        assert_eq!(read(dir.path(), a), Some(tools.clone()));
        assert_eq!(read_era(dir.path(), a), Some(Era::Legacy));
        // Another launch config does not see it; a rewrite replaces it.
        assert_eq!(read(dir.path(), &config.servers["c"]), None);
        write(dir.path(), a, &[], Some(Era::Modern)).unwrap();
        assert_eq!(read(dir.path(), a), Some(vec![]));
        assert_eq!(read_era(dir.path(), a), Some(Era::Modern));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        std::fs::write(&path, "{broken").unwrap();
        assert_eq!(read(dir.path(), a), None);
    }
}
