//! The engine's network holder: one user and network namespace shared by
//! the engine's sandboxed bash calls with the network off, so that a call
//! does not make (and tear down) a network namespace of its own, the
//! dearest step of its sandbox (about 0.5 ms each way; docs/PERFORMANCE.md).
//!
//! The holder is a launcher process started on the first such call
//! (`<launcher> __sandbox-exec 4 hold-network`, crates/sandbox's
//! `launcher/shared_network.rs`), in a process group of its own. It ends
//! when its stdin closes: when the engine's [`Confinement`](super::Confinement)
//! is dropped (the holder is killed and reaped then too) or the process
//! ends. What is shared and why that is safe is in docs/SECURITY.md ("The
//! bash sandbox"). When the holder cannot be started or has died, each
//! launcher makes its own namespaces, as before.

use std::path::Path;
use std::sync::{Arc, Mutex};

use codemode_sandbox::launcher::SharedNetwork;

/// The holder of one engine's network namespace, started on first use.
/// Clones share it.
#[derive(Clone, Default)]
pub struct NetworkHolder(Arc<Mutex<Holder>>);

#[derive(Default)]
enum Holder {
    /// Not asked for yet.
    #[default]
    NotStarted,
    /// Running: the process (its stdin open) and what launchers check.
    Running(std::process::Child, SharedNetwork),
    /// It could not be started: launchers make their own namespaces.
    Failed,
}

impl NetworkHolder {
    /// The holder's namespaces for a launcher's spec, starting the holder
    /// with `launcher` on the first call; `None` when it cannot be started
    /// or has ended (the launcher then makes its own). Blocks while the
    /// holder starts (about a millisecond, once per engine).
    pub(crate) fn shared(&self, launcher: &Path) -> Option<SharedNetwork> {
        let mut holder = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Holder::Running(child, shared) = &mut *holder {
            if matches!(child.try_wait(), Ok(None)) {
                return Some(*shared);
            }
            // It ended (killed from outside): a new one.
            *holder = Holder::NotStarted;
        }
        if matches!(*holder, Holder::NotStarted) {
            *holder = match start(launcher) {
                Ok((child, shared)) => Holder::Running(child, shared),
                Err(e) => {
                    tracing::debug!("bash calls make their own network namespace: {e}");
                    Holder::Failed
                }
            };
        }
        match &*holder {
            Holder::Running(_, shared) => Some(*shared),
            _ => None,
        }
    }
}

/// Starts the holder and, once it says it is ready, reads what launchers
/// check it by: its namespaces' inode numbers and its start time.
///
/// # Errors
/// When it cannot be started, does not say `ready`, or its network
/// namespace is this process's (a message for the debug log).
#[cfg(target_os = "linux")]
fn start(launcher: &Path) -> Result<(std::process::Child, SharedNetwork), String> {
    use std::io::BufRead as _;
    use std::os::unix::fs::MetadataExt as _;
    use std::os::unix::process::CommandExt as _;
    use std::process::{Command, Stdio};

    use codemode_sandbox::launcher::{HOLD_NETWORK, PROTOCOL, READY, SUBCOMMAND};

    let mut child = Command::new(launcher)
        .args([SUBCOMMAND, PROTOCOL, HOLD_NETWORK])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", launcher.display()))?;
    let mut line = String::new();
    let said = child.stdout.take().map(|out| std::io::BufReader::new(out).read_line(&mut line));
    let ready = matches!(said, Some(Ok(_))) && line.trim_end() == READY;
    // The holder is this process's child, not yet reaped: its pid is its
    // own until the engine reaps it.
    let ino = |pid: u32, kind: &str| std::fs::metadata(format!("/proc/{pid}/ns/{kind}")).map(|m| m.ino());
    let pid = child.id();
    let seen = (ino(pid, "user"), ino(pid, "net"), ino(std::process::id(), "net"));
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let start_time = codemode_sandbox::launcher::stat_parent_and_start(&stat).map(|(_, start)| start);
    match (seen, start_time) {
        ((Ok(user_ns), Ok(net_ns), Ok(own_net)), Some(start_time)) if ready && net_ns != own_net => {
            Ok((child, SharedNetwork { pid: pid as i32, user_ns, net_ns, start_time }))
        }
        _ => {
            end(&mut child);
            Err(format!("the network holder did not start: {}", line.trim_end()))
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn start(_: &Path) -> Result<(std::process::Child, SharedNetwork), String> {
    Err("no namespaces on this system".into())
}

/// Closes the holder's stdin (it ends), kills it in case it did not, and
/// reaps it.
fn end(child: &mut std::process::Child) {
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Holder {
    fn drop(&mut self) {
        if let Holder::Running(child, _) = self {
            end(child);
        }
    }
}

impl std::fmt::Debug for NetworkHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let holder = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &*holder {
            Holder::NotStarted => f.write_str("NetworkHolder(not started)"),
            Holder::Running(_, shared) => write!(f, "NetworkHolder({shared:?})"),
            Holder::Failed => f.write_str("NetworkHolder(failed)"),
        }
    }
}

/// Two are equal when they are the same holder (clones of one engine's).
impl PartialEq for NetworkHolder {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for NetworkHolder {}
