//! The 2025-11-25 sessions of `--http`: when each was last used and
//! whether it is busy, so that idle sessions end and, at the bound, the
//! oldest idle one makes room (docs/SERVE.md, "Sessions").
//!
//! [`Tracked`] is rmcp's in-memory session manager with a table beside it:
//! every message of a session (a request, a notification, an answer to
//! the server's question, a GET stream) marks it used; each tool call
//! marks it busy while it runs ([`Tracked::busy`]); a session whose own
//! server holds runs still going (answered `running`) is busy too. A
//! session is *idle* when it is not busy; it *ends* when it has been idle
//! for the idle time ([`Tracked::sweep`]) or when a new session needs its
//! place ([`Tracked::make_room`]). Ending it closes it in rmcp, which drops
//! its handler, and so its engine and upstream MCP servers.
//!
//! A question a run waits on (an approval asked with `elicitation/create`)
//! is asked inside a tool call, so it keeps the session busy; a run
//! paused for `codemode approve` is in the journal, not the session, and
//! any session (or `codemode resume`) continues it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::SessionId;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};

use super::CodeModeServer;

/// The default of [`HttpOptions::session_idle`](super::HttpOptions::session_idle):
/// 5 minutes.
pub const SESSION_IDLE: Duration = Duration::from_secs(300);

/// What is known of one session.
struct Use {
    /// Its last message, or the end of its last tool call.
    last: Instant,
    /// Its tool calls in flight.
    calls: usize,
    /// Its own server, when it has one: busy while it holds runs going.
    own: Option<CodeModeServer>,
}

impl Use {
    fn busy(&self) -> bool {
        self.calls > 0 || self.own.as_ref().is_some_and(CodeModeServer::holds_runs_going)
    }
}

/// rmcp's [`LocalSessionManager`] with each session's use beside it.
pub(crate) struct Tracked {
    inner: LocalSessionManager,
    table: Mutex<HashMap<SessionId, Use>>,
}

impl Tracked {
    pub(crate) fn new(inner: LocalSessionManager) -> Tracked {
        Tracked { inner, table: Mutex::default() }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Use>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks session `id` used now.
    fn touch(&self, id: &SessionId) {
        if let Some(used) = self.table().get_mut(id) {
            used.last = Instant::now();
        }
    }

    /// How many sessions are open.
    pub(crate) async fn open(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// Marks session `id` busy until the mark is dropped (a tool call,
    /// from its arrival: before its engine is built); [`Busy::own`] notes
    /// the session's own server.
    pub(crate) fn busy(self: &Arc<Self>, id: SessionId) -> Busy {
        if let Some(used) = self.table().get_mut(&id) {
            used.calls += 1;
            used.last = Instant::now();
        }
        Busy { tracked: self.clone(), id }
    }

    /// Ends every session idle for at least `idle`; returns how many.
    pub(crate) async fn sweep(&self, idle: Duration) -> usize {
        let ended: Vec<SessionId> = self
            .table()
            .iter()
            .filter(|(_, used)| !used.busy() && used.last.elapsed() >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        let mut count = 0;
        for id in &ended {
            // A call may have arrived since the list was made.
            if self.end_if(id, |used| !used.busy() && used.last.elapsed() >= idle).await {
                count += 1;
            }
        }
        count
    }

    /// When `max` sessions or more are open, ends the one idle longest to
    /// make room for one more. Returns false when there is no room: every
    /// session is busy.
    pub(crate) async fn make_room(&self, max: usize) -> bool {
        if self.open().await < max {
            return true;
        }
        // The one chosen may turn busy before it ends (a call arriving):
        // then the next idle one, a few times.
        for _ in 0..3 {
            let oldest = self
                .table()
                .iter()
                .filter(|(_, used)| !used.busy())
                .min_by_key(|(_, used)| used.last)
                .map(|(id, _)| id.clone());
            let Some(id) = oldest else { return false };
            if self.end_if(&id, |used| !used.busy()).await {
                return true;
            }
        }
        false
    }

    /// Ends session `id` when `idle` still holds of it, deciding under the
    /// table's lock (so a call that arrived after the session was chosen
    /// keeps it): rmcp closes it (its handler, engine and upstream servers
    /// go with it); the next request naming it gets 404. Whether it ended.
    async fn end_if(&self, id: &SessionId, idle: impl FnOnce(&Use) -> bool) -> bool {
        {
            let mut table = self.table();
            match table.get(id) {
                Some(used) if idle(used) => {
                    table.remove(id);
                }
                _ => return false,
            }
        }
        tracing::debug!(session = %id, "ending an idle session");
        if let Err(e) = self.inner.close_session(id).await {
            tracing::warn!(session = %id, "ending an idle session failed: {e}");
        }
        true
    }
}

/// A tool call's mark on its session (see [`Tracked::busy`]).
pub(crate) struct Busy {
    tracked: Arc<Tracked>,
    id: SessionId,
}

impl Busy {
    /// Notes `own`, the session's own server, once the call has it: the
    /// session stays busy while that server holds runs going.
    pub(crate) fn own(&self, own: CodeModeServer) {
        if let Some(used) = self.tracked.table().get_mut(&self.id) {
            used.own = Some(own);
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(used) = self.tracked.table().get_mut(&self.id) {
            used.calls = used.calls.saturating_sub(1);
            used.last = Instant::now();
        }
    }
}

/// rmcp's manager, each message marking its session used.
impl SessionManager for Tracked {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        self.table().insert(id.clone(), Use { last: Instant::now(), calls: 0, own: None });
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.table().remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.touch(id);
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.resume(id, last_event_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session busy when it would end (a call arrived after it was
    /// chosen) is kept; an idle one makes room or ends by the sweep.
    #[tokio::test]
    async fn a_busy_session_is_never_ended_and_an_idle_one_is() {
        let tracked = Arc::new(Tracked::new(LocalSessionManager::default()));
        let (a, _ta) = tracked.create_session().await.unwrap();
        let (b, _tb) = tracked.create_session().await.unwrap();
        let busy_a = tracked.busy(a.clone());
        let busy_b = tracked.busy(b.clone());
        assert!(!tracked.make_room(2).await, "both busy: no room");
        assert_eq!(tracked.sweep(Duration::ZERO).await, 0);
        assert_eq!(tracked.open().await, 2);
        // `a` chosen idle, then a call arrives before it ends: kept.
        drop(busy_a);
        assert!(!tracked.end_if(&a, |used| used.calls > 0).await, "the predicate decides, under the lock");
        let again = tracked.busy(a.clone());
        assert!(!tracked.end_if(&a, |used| !used.busy()).await);
        drop(again);
        assert!(tracked.make_room(2).await);
        assert!(!tracked.inner.has_session(&a).await.unwrap(), "the idle one made room");
        drop(busy_b);
        assert_eq!(tracked.sweep(Duration::ZERO).await, 1);
        assert_eq!(tracked.open().await, 0);
    }
}
