//! Starting a server: the connect check, the back-off after failures,
//! one start at a time shared by the calls that wait for it, the first
//! listing, and the restart of a connection that ended.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::listing::{fresh, refresh};
use super::{McpPool, ServerState, Slot, State, redacted};
use crate::catalog::ToolContext;
use crate::mcp::McpError;
use crate::mcp::connection::Connection;
use crate::mcp::tool::McpTool;

/// A connection that lived this long before it ended resets the backoff.
pub const STABLE_AFTER: Duration = Duration::from_secs(60);

/// Longest wait before restarting a failing server.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl McpPool {
    /// Starts `server` if it is not running (asking the
    /// `ConnectCheck`), and returns its tools as catalog tools. The one
    /// entry point the engine calls once the gate allowed
    /// `mcp_connect__<server>`.
    ///
    /// # Errors
    /// Any start or listing failure: [`McpError::ConnectRefused`],
    /// [`McpError::Spawn`], [`McpError::StartupTimeout`],
    /// [`McpError::Initialize`], [`McpError::ListTimeout`],
    /// [`McpError::TooManyPages`], ...
    pub async fn connect(&self, server: &str) -> Result<Vec<McpTool>, McpError> {
        self.connect_since(server, self.starts_seen(server)).await
    }

    /// How many starts of `server` have finished (0 for an unknown
    /// server); given to [`McpPool::connect_since`] by a caller that may
    /// wait before it connects.
    pub(crate) fn starts_seen(&self, server: &str) -> u64 {
        self.inner.slots.get(server).map_or(0, |slot| slot.starts.lock().expect("starts lock").0)
    }

    /// [`McpPool::connect`] for a caller that counted `seen` finished
    /// starts before it began waiting: a start that failed since fails it
    /// with the same error, without starting the server again. A server
    /// that was running before the caller began waiting lists its tools
    /// again (once, shared with a listing that finished while this
    /// waited); one whose start finished while it waited (another call's,
    /// or one made before a program's first call) was listed just now.
    pub(crate) async fn connect_since(&self, server: &str, seen: u64) -> Result<Vec<McpTool>, McpError> {
        let slot = self.slot(server)?;
        let (connection, started) =
            self.connection(slot, None, Some(seen)).await.map_err(|e| redacted(slot, e))?;
        if !started && self.starts_seen(server) == seen {
            fresh(&self.inner, slot, &connection, true).await.map_err(|e| redacted(slot, e))?;
        }
        let tools = self.live(slot).unwrap_or_default();
        Ok(self.tools_of(slot, &tools))
    }

    /// The live connection, started if needed (see the module docs). With
    /// `seen` (the finished starts counted before the caller began to
    /// wait), a start that failed since is this call's failure too.
    /// Returns the connection and whether this call started it.
    pub(super) async fn connection(
        &self,
        slot: &Arc<Slot>,
        cx: Option<&ToolContext>,
        seen: Option<u64>,
    ) -> Result<(Arc<Connection>, bool), McpError> {
        let server = &slot.config.name;
        let mut state = slot.state.lock().await;
        if self.inner.shut.load(Ordering::Acquire) {
            return Err(McpError::ShutDown { server: server.clone() });
        }
        if let State::Up(connection) = &*state {
            match connection.is_down() {
                None => return Ok((connection.clone(), false)),
                Some(_) => {
                    self.note_end(slot, connection.started.elapsed());
                    connection.stop().await;
                    *state = State::Failed;
                }
            }
        }
        if let Some(seen) = seen {
            failed_since(slot, seen)?;
        }
        if let Some(check) = &self.inner.options.connect_check {
            check
                .check(server, cx)
                .await
                .map_err(|reason| McpError::ConnectRefused { server: server.clone(), reason })?;
        }
        // Shutdown ends a start at any point of it: the process it spawned
        // is ended and reaped (`Connection::start`), and the slot given
        // back.
        let mut stopping = self.inner.stopping.subscribe();
        let shut_down = || McpError::ShutDown { server: server.clone() };
        let wait = backoff_left(slot);
        if !wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stopping.wait_for(|s| *s) => return Err(shut_down()),
            }
        }
        let options = &self.inner.options;
        let hint = self.era(slot);
        let start = Connection::start(
            &slot.config,
            options.max_message_bytes,
            hint,
            options.workspace.clone(),
            &options.interactive_login,
            &stopping,
        );
        let started = match start.await {
            Ok(started) => started,
            Err(error @ McpError::ShutDown { .. }) => return Err(error),
            Err(error) => return Err(self.fail(slot, &mut state, error)),
        };
        let connection = started.connection;
        *slot.era.lock().expect("era lock") = Some(connection.era);
        let listed = tokio::select! {
            listed = fresh(&self.inner, slot, &connection, true) => listed,
            _ = stopping.wait_for(|s| *s) => Err(shut_down()),
        };
        if let Err(error) = listed {
            connection.stop().await;
            if matches!(error, McpError::ShutDown { .. }) {
                return Err(error);
            }
            return Err(self.fail(slot, &mut state, error));
        }
        self.running(slot, &mut state, connection.clone(), started.list_changed);
        Ok((connection, true))
    }

    /// Makes `connection` (listed) `slot`'s running one: counts the start,
    /// lets one `list_changed` list by itself, and relists on each
    /// `list_changed` from `list_changed` until it ends.
    fn running(
        &self,
        slot: &Arc<Slot>,
        state: &mut State,
        connection: Arc<Connection>,
        list_changed: tokio::sync::mpsc::UnboundedReceiver<()>,
    ) {
        connection.listing.eager.store(true, Ordering::Release);
        let mut starts = slot.starts.lock().expect("starts lock");
        *starts = (starts.0 + 1, None);
        drop(starts);
        tokio::spawn(refresh(
            Arc::downgrade(&self.inner),
            slot.clone(),
            Arc::downgrade(&connection),
            list_changed,
        ));
        *state = State::Up(connection);
        *slot.status.lock().expect("status lock") = ServerState::Running;
        super::idle::started(slot);
        self.sweep_idle();
    }

    fn fail(&self, slot: &Slot, state: &mut State, error: McpError) -> McpError {
        self.note_end(slot, Duration::ZERO);
        let error = redacted(slot, error);
        let mut starts = slot.starts.lock().expect("starts lock");
        *starts = (starts.0 + 1, Some(error.clone()));
        drop(starts);
        *slot.status.lock().expect("status lock") = ServerState::Failed { error: error.to_string() };
        *state = State::Failed;
        error
    }

    /// Counts a failure (or resets after a stable connection).
    fn note_end(&self, slot: &Slot, lived: Duration) {
        let mut failures = slot.failures.lock().expect("failures lock");
        failures.0 = if lived >= STABLE_AFTER { 0 } else { failures.0.saturating_add(1) };
        failures.1 = Some(tokio::time::Instant::now());
    }
}

/// Fails with the error of a start of `slot` that failed after the caller
/// counted `seen` finished starts.
///
/// # Errors
/// That start's error (already redacted).
fn failed_since(slot: &Slot, seen: u64) -> Result<(), McpError> {
    let starts = slot.starts.lock().expect("starts lock");
    if starts.0 > seen
        && let Some(error) = &starts.1
    {
        return Err(error.clone());
    }
    Ok(())
}

/// What is left of the back-off before `slot`'s next start: none after no
/// failure, else [`backoff`] from when the last connection ended.
fn backoff_left(slot: &Slot) -> Duration {
    let (failures, last) = *slot.failures.lock().expect("failures lock");
    match (failures, last) {
        (0, _) | (_, None) => Duration::ZERO,
        (n, Some(at)) => backoff(n).saturating_sub(at.elapsed()),
    }
}

/// The wait before the next start after `failures` failures in a row:
/// 250 ms, doubled per failure, at most [`MAX_BACKOFF`].
fn backoff(failures: u32) -> Duration {
    let ms = 250u64.saturating_mul(1 << failures.saturating_sub(1).min(16));
    Duration::from_millis(ms).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(4), Duration::from_secs(2));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
