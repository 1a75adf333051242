//! Reading a configuration file (a policy, an MCP configuration, the trust
//! record) that a program may have planted: only a regular file of at most
//! [`MAX_CONFIG_BYTES`] is read, and opening it never blocks, so a FIFO or
//! a link to `/dev/zero` in the workspace is an error, not a hang or an
//! endless read.

use std::io::Read as _;
use std::path::Path;

/// The largest configuration file read: 1 MiB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of the configuration file at `path`.
///
/// # Errors
/// The file cannot be opened or read, is not a regular file (a FIFO, a
/// device, a folder), is over [`MAX_CONFIG_BYTES`], or is not UTF-8.
pub fn read_config(path: &Path) -> std::io::Result<String> {
    let bytes = read_config_bytes(path)?;
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("the file is not UTF-8 text"))
}

/// [`read_config`] without the UTF-8 check.
pub fn read_config_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // A FIFO would block the open until a writer came.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file (a FIFO, a device or a folder)"));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(std::io::Error::other(format!(
            "{} bytes; a configuration file is at most {MAX_CONFIG_BYTES} bytes",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(std::io::Error::other(format!("over {MAX_CONFIG_BYTES} bytes")));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_devices_and_huge_files_are_errors_not_hangs() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("codemode.toml");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(read_config(&fifo).unwrap_err().to_string().contains("not a regular file"));
        let zero = dir.path().join(".mcp.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read_config(&zero).unwrap_err().to_string().contains("not a regular file"));
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; (MAX_CONFIG_BYTES + 1) as usize]).unwrap();
        assert!(read_config(&big).unwrap_err().to_string().contains("at most"));
        let fine = dir.path().join("fine.toml");
        std::fs::write(&fine, "mode = \"plan\"\n").unwrap();
        assert_eq!(read_config(&fine).unwrap(), "mode = \"plan\"\n");
    }
}
