//! Reading a configuration file (a policy, an MCP configuration, the trust
//! record) that a program may have planted: only a regular file of at most
//! [`MAX_CONFIG_BYTES`] is read, and opening it never blocks, so a FIFO or
//! a link to `/dev/zero` in the workspace is an error, not a hang or an
//! endless read.
//!
//! A file whose contents decide what is trusted (a workspace's
//! `codemode.toml` or `.mcp.json`, an `envFile`, the trust record) is read
//! with [`read_own_bytes`]: once, and never through a symbolic link as its
//! last component, so that its digest, its parse and its trust all come
//! from the same bytes of the same file (docs/SECURITY.md, "Workspace
//! trust").

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
    read_bytes(path, false)
}

/// [`read_config_bytes`] of the file itself: when `path`'s last component
/// is a symbolic link the read fails with [`LinkRefused`] (as the error's
/// inner error, see [`is_link_refused`]) rather than reading the link's
/// target. Folders on the way may be links (the user's own layout).
///
/// # Errors
/// As [`read_config_bytes`], and a link as the last component.
pub fn read_own_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    read_bytes(path, true)
}

/// The error a read of a file's own bytes ([`read_own_bytes`]) fails with
/// when the file is a symbolic link.
#[derive(Debug)]
pub struct LinkRefused;

impl std::fmt::Display for LinkRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a symbolic link; a file that decides what is trusted is read only as itself, never through a link")
    }
}

impl std::error::Error for LinkRefused {}

/// Whether `e` is [`read_own_bytes`] refusing a symbolic link.
pub fn is_link_refused(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<LinkRefused>())
}

fn read_bytes(path: &Path, own: bool) -> std::io::Result<Vec<u8>> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // A FIFO would block the open until a writer came; O_NOFOLLOW
        // refuses a link as the last component (ELOOP).
        let nofollow = if own { libc::O_NOFOLLOW } else { 0 };
        options.custom_flags(libc::O_NONBLOCK | nofollow);
    }
    let file = match options.open(path) {
        #[cfg(unix)]
        Err(e) if own && e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(std::io::Error::other(LinkRefused));
        }
        other => other?,
    };
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

    #[test]
    fn a_file_read_as_itself_is_never_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.toml");
        std::fs::write(&real, "x = 1\n").unwrap();
        let link = dir.path().join("codemode.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = read_own_bytes(&link).unwrap_err();
        assert!(is_link_refused(&e), "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(read_own_bytes(&real).unwrap(), b"x = 1\n");
        assert_eq!(read_config_bytes(&link).unwrap(), b"x = 1\n");
        // A FIFO is still refused without blocking.
        let fifo = dir.path().join(".mcp.json");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(read_own_bytes(&fifo).unwrap_err().to_string().contains("not a regular file"));
    }
}
